// SPDX-License-Identifier: GPL-2.0
//
// The DMA channel mux: N request streams (the engine's: WQE fetch, requester payload
// reads, responder payload writes, CQE and event writes) onto the one host DMA interface.
//
// Each channel is a valid/ready stream of beats grouped into requests (in_last on a
// request's last beat: a read request is one beat, a write its header and data beats).
// A request's beats leave together, tagged with their channel (out_chan); requests are
// granted round robin among the channels that offer one, so none waits for more than
// N - 1 others. The grant is made in the cycle a request's first beat arrives, and a
// two-entry output register (the output and a skid entry) takes a beat every cycle the
// output is not stalled, so a beat goes out every cycle while some channel offers one:
// fully pipelined, with no bubble between requests or channels. in_ready depends on
// in_valid (the grant), never out_valid on out_ready; out_ready reaches no input
// combinationally.
//
// ORDMA_MUX_MUTANT (tests only) breaks it on purpose: 1 loses the beat that arrives while
// the output is stalled (the skid entry overwritten), 2 leaves a bubble whenever the grant
// passes to another channel. The assertions, the harness's scoreboard and the formal
// check must each catch them (rtl/ordma-rtl, rtl/hdl/formal.sh).
module ordma_dma_mux #(
    parameter int N  = 4,
    parameter int DW = 512,
    localparam int CW = $clog2(N)
) (
    input logic clk,
    input logic rst,  // synchronous, active high

    input  logic [N-1:0]         in_valid,
    output logic [N-1:0]         in_ready,
    input  logic [N-1:0][DW-1:0] in_data,
    input  logic [N-1:0]         in_last,

    output logic          out_valid,
    input  logic          out_ready,
    output logic [DW-1:0] out_data,
    output logic          out_last,
    output logic [CW-1:0] out_chan
);
  // The grant: the channel in the middle of a request keeps it; otherwise the first
  // channel offering one after the last granted, round robin.
  logic locked;
  logic [CW-1:0] cur;
  logic [N-1:0] req;
  assign req = locked ? (in_valid & (N'(1) << cur)) : in_valid;

  logic [CW-1:0] pick;
  logic any;
  always_comb begin
    pick = cur;
    any  = 1'b0;
    for (int i = N; i >= 1; i--) begin
      // Downwards, so the nearest after `cur` (i = 1) is the one kept.
      logic [CW:0] c;
      c = (CW + 1)'(cur) + (CW + 1)'(i);
      if (c >= (CW + 1)'(N)) c = c - (CW + 1)'(N);
      if (req[c[CW-1:0]]) begin
        pick = c[CW-1:0];
        any  = 1'b1;
      end
    end
  end

  // The output register: the beat on the output (o*) and the one that arrived while the
  // output was stalled (s*). Beats are taken while the skid entry is empty.
  logic o_valid, s_valid;
  logic [DW-1:0] o_data, s_data;
  logic o_last, s_last;
  logic [CW-1:0] o_chan, s_chan;
  logic take;
`ifdef ORDMA_MUX_MUTANT
  logic switched;
  always_ff @(posedge clk)
    if (rst) switched <= 1'b0;
    else switched <= any && take && pick != cur;
  assign take = !s_valid && !(`ORDMA_MUX_MUTANT == 2 && switched && !locked);
`else
  assign take = !s_valid;
`endif
  logic fire;
  assign fire = any && take;
  always_comb begin
    in_ready = '0;
    in_ready[pick] = take && any;
  end

  always_ff @(posedge clk)
    if (rst) begin
      locked <= 1'b0;
      cur <= '0;
    end else if (fire) begin
      locked <= !in_last[pick];
      cur <= pick;
    end

  logic lose;
`ifdef ORDMA_MUX_MUTANT
  assign lose = `ORDMA_MUX_MUTANT == 1;
`else
  assign lose = 1'b0;
`endif
  always_ff @(posedge clk)
    if (rst) begin
      o_valid <= 1'b0;
      s_valid <= 1'b0;
    end else if (fire && o_valid && !out_ready) begin
      // Output stalled: the new beat waits in the skid entry (the mutant 1 writes it
      // over the stalled one instead).
      if (lose) begin
        o_data <= in_data[pick];
        o_last <= in_last[pick];
        o_chan <= pick;
      end else begin
        s_valid <= 1'b1;
        s_data <= in_data[pick];
        s_last <= in_last[pick];
        s_chan <= pick;
      end
    end else if (fire) begin
      o_valid <= 1'b1;
      o_data <= in_data[pick];
      o_last <= in_last[pick];
      o_chan <= pick;
    end else if (out_ready || !o_valid) begin
      o_valid <= s_valid;
      o_data <= s_data;
      o_last <= s_last;
      o_chan <= s_chan;
      s_valid <= 1'b0;
    end

  assign out_valid = o_valid;
  assign out_data  = o_data;
  assign out_last  = o_last;
  assign out_chan  = o_chan;

`ifdef VERILATOR
  // open-rdma's checkFullyPipeline, per channel: every beat in is out or held here (no
  // loss, no duplicate), and a beat is taken whenever one is offered and there is room,
  // and leaves the next cycle (no bubble unless a port stalls).
  logic [31:0] beats_in[N], beats_out[N];
  always_ff @(posedge clk)
    for (int c = 0; c < N; c++)
      if (rst) begin
        beats_in[c]  <= 0;
        beats_out[c] <= 0;
      end else begin
        if (in_valid[c] && in_ready[c]) beats_in[c] <= beats_in[c] + 1;
        if (out_valid && out_ready && out_chan == CW'(c)) beats_out[c] <= beats_out[c] + 1;
      end
  for (genvar c = 0; c < N; c++) begin : g_check
    assert property (@(posedge clk) disable iff (rst)
        beats_in[c] == beats_out[c] + 32'(o_valid && o_chan == CW'(c))
        + 32'(s_valid && s_chan == CW'(c)))
    else $error("mux channel %0d: %0d beats in, %0d out, %0d held", c, beats_in[c],
                beats_out[c], 32'(o_valid && o_chan == CW'(c)) + 32'(s_valid && s_chan == CW'(c)));
  end
  assert property (@(posedge clk) disable iff (rst) |req && !s_valid |-> |(in_valid & in_ready))
  else $error("mux bubble: a beat offered with room for it was not taken");
  assert property (@(posedge clk) disable iff (rst) |(in_valid & in_ready) |=> out_valid)
  else $error("mux bubble: a beat taken did not reach the output");
  assert property (@(posedge clk) disable iff (rst) s_valid |-> o_valid);
  assert property (@(posedge clk) disable iff (rst)
      out_valid && !out_ready |=> out_valid && $stable(out_data) && $stable(out_chan));
`endif
endmodule
