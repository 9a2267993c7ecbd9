// SPDX-License-Identifier: GPL-2.0
//
// The DMA channel mux's per-channel properties, for yosys's smtbmc flow (formal.sh).
//
// Data independence: each channel's beats carry their own sequence number (and their
// in_last in the top bit), as the assumptions below force; so a beat out with the
// sequence number its channel expects next proves, for every channel at once, that no beat
// was lost, duplicated or reordered. Besides: requests leave whole, every beat taken leaves
// (once the inputs are quiet and the output ready, beats in equal beats out), and the
// mux is fully pipelined: a beat taken is on the output the next cycle, and a channel
// that may be granted is taken whenever the output was ready in the previous cycle.
module mux_formal #(
    parameter int N  = 3,
    parameter int DW = 5,
    localparam int CW = $clog2(N)
) (
    input logic clk,
    input logic rst,
    input logic [N-1:0] in_valid,
    input logic [N-1:0][DW-1:0] in_data,
    input logic [N-1:0] in_last,
    input logic out_ready
);
  logic [N-1:0] in_ready;
  logic out_valid, out_last;
  logic [DW-1:0] out_data;
  logic [CW-1:0] out_chan;
  ordma_dma_mux #(
      .N (N),
      .DW(DW)
  ) dut (
      .*
  );

  logic init = 1'b1;
  always_ff @(posedge clk) init <= 1'b0;

  logic [DW-2:0] seq_in[N], seq_out[N];
  logic [N-1:0] taken;
  assign taken = in_valid & in_ready;
  logic locked_in = 1'b0, locked_out = 1'b0;
  logic [CW-1:0] lock_in_chan = '0, lock_out_chan = '0;
  logic [2:0] quiet = '0;
  logic prev_taken = 1'b0, prev_ready = 1'b0;

  always_ff @(posedge clk) begin
    for (int c = 0; c < N; c++) begin
      if (rst) seq_in[c] <= '0;
      else if (taken[c]) seq_in[c] <= seq_in[c] + 1'b1;
      if (rst) seq_out[c] <= '0;
      else if (out_valid && out_ready && out_chan == CW'(c)) seq_out[c] <= seq_out[c] + 1'b1;
    end
    prev_taken <= !rst && |taken;
    prev_ready <= rst || out_ready;
    quiet <= (rst || in_valid != 0 || !out_ready) ? 3'd0 : (quiet == 3'd7 ? quiet : quiet + 1'b1);
    if (rst) locked_in <= 1'b0;
    else
      for (int c = 0; c < N; c++)
        if (taken[c]) begin
          locked_in <= !in_last[c];
          lock_in_chan <= CW'(c);
        end
    if (rst) locked_out <= 1'b0;
    else if (out_valid && out_ready) begin
      locked_out <= !out_last;
      lock_out_chan <= out_chan;
    end
  end

  always_comb begin
    // Reset first; the inputs keep the valid/ready rules, and each channel numbers its beats.
    if (init) assume (rst);
    for (int c = 0; c < N; c++)
      if (in_valid[c]) begin
        assume (in_data[c][DW-2:0] == seq_in[c]);
        assume (in_data[c][DW-1] == in_last[c]);
      end
    if (!rst && !init) begin
      if (out_valid && out_ready) begin
        // In order, no loss, no duplicate: the beat its channel expects next.
        assert (32'(out_chan) < N);
        assert (out_data[DW-2:0] == seq_out[out_chan]);
        assert (out_last == out_data[DW-1]);
        // Requests leave whole.
        if (locked_out) assert (out_chan == lock_out_chan);
      end
      for (int c = 0; c < N; c++) begin
        // Never more out than in, at most the two entries held, all out once quiet.
        assert (seq_in[c] - seq_out[c] <= 2);
        if (quiet >= 2) assert (seq_in[c] == seq_out[c]);
      end
      // One grant at a time, to a channel that offers.
      assert ((taken & (taken - 1'b1)) == 0);
      assert ((in_ready & ~in_valid) == 0);
      // Fully pipelined.
      if (prev_taken) assert (out_valid);
      if (prev_ready && (locked_in ? in_valid[lock_in_chan] : |in_valid)) assert (|taken);
    end
  end

  always_ff @(posedge clk)
    if (!init && !$past(rst))
      for (int c = 0; c < N; c++)
        if ($past(in_valid[c] && !in_ready[c])) begin
          assume (in_valid[c]);
          assume (in_data[c] == $past(in_data[c]));
          assume (in_last[c] == $past(in_last[c]));
        end
endmodule
