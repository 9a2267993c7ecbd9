// SPDX-License-Identifier: GPL-2.0
//
// The DMA interface's completions (read data) back to their channels, by the tag the
// mux put on the request: a channel that stalls holds the completions behind it.
module ordma_dma_demux #(
    parameter int N  = 4,
    parameter int DW = 512,
    localparam int CW = $clog2(N)
) (
    input  logic          in_valid,
    output logic          in_ready,
    input  logic [DW-1:0] in_data,
    input  logic          in_last,
    input  logic [CW-1:0] in_chan,

    output logic [N-1:0]  out_valid,
    input  logic [N-1:0]  out_ready,
    output logic [DW-1:0] out_data,
    output logic          out_last
);
  always_comb begin
    out_valid = '0;
    out_valid[in_chan] = in_valid;
  end
  assign in_ready = out_ready[in_chan];
  assign out_data = in_data;
  assign out_last = in_last;
endmodule
