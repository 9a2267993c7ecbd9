// SPDX-License-Identifier: GPL-2.0
//
// Place-and-route harnesses (synth.sh): a block's ports are far more than a package's
// pins, so each harness loads the block's inputs from a shift register fed by one pin and
// loads its outputs into a shift register read out on one pin. Every port bit stays
// observable, so nothing of the block is optimized away; the harness's own registers are
// reported apart from the block's (yosys's per-module statistics before flattening).
module synth_icrc (
    input  logic clk,
    input  logic sin,
    input  logic load,
    output logic sout
);
  localparam int IW = 512 + 1 + 1 + 6 + 1;
  localparam int OW = 1 + 1 + 32;
  logic [IW-1:0] si;
  logic [OW-1:0] so;
  logic in_ready, out_valid;
  logic [31:0] out_icrc;
  always_ff @(posedge clk) si <= {si[IW-2:0], sin};
  ordma_icrc u (
      .clk(clk),
      .rst(si[IW-1]),
      .in_valid(si[0]),
      .in_last(si[1]),
      .in_empty(si[7:2]),
      .out_ready(si[8]),
      .in_data(si[520:9]),
      .in_ready(in_ready),
      .out_valid(out_valid),
      .out_icrc(out_icrc)
  );
  always_ff @(posedge clk) so <= load ? {in_ready, out_valid, out_icrc} : {1'b0, so[OW-1:1]};
  assign sout = so[0];
endmodule

module synth_mux (
    input  logic clk,
    input  logic sin,
    input  logic load,
    output logic sout
);
  localparam int N = 4, DW = 512;
  localparam int IW = N + N * DW + N + 1 + 1;
  localparam int OW = N + 1 + DW + 1 + 2;
  logic [IW-1:0] si;
  logic [OW-1:0] so;
  logic [N-1:0] in_ready;
  logic out_valid, out_last;
  logic [DW-1:0] out_data;
  logic [1:0] out_chan;
  always_ff @(posedge clk) si <= {si[IW-2:0], sin};
  ordma_dma_mux #(
      .N (N),
      .DW(DW)
  ) u (
      .clk(clk),
      .rst(si[IW-1]),
      .in_valid(si[N-1:0]),
      .in_data(si[N+N*DW-1:N]),
      .in_last(si[N+N*DW+N-1:N+N*DW]),
      .out_ready(si[N+N*DW+N]),
      .in_ready(in_ready),
      .out_valid(out_valid),
      .out_data(out_data),
      .out_last(out_last),
      .out_chan(out_chan)
  );
  always_ff @(posedge clk)
    so <= load ? {in_ready, out_valid, out_data, out_last, out_chan} : {1'b0, so[OW-1:1]};
  assign sout = so[0];
endmodule
