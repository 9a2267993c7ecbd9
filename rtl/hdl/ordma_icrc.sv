// SPDX-License-Identifier: GPL-2.0
//
// The RoCEv2 invariant CRC (ICRC) of a frame streamed 64 bytes a cycle.
//
// In:  the frame from its first byte (the Ethernet header) up to, not including, its
//      four ICRC bytes; beat i carries bytes 64i..64i+63, byte j of the beat in
//      in_data[8j+7:8j]. Every beat but the last is full; the last has in_empty unused
//      bytes at its end (0..63). IPv4 or IPv6, by the Ethernet type (bytes 12, 13); the
//      frame must reach past the BTH (at least 54 bytes over IPv4, 74 over IPv6).
// Out: one word per frame, in order: the ICRC as the model's wire::icrc returns it (the
//      wire carries it least significant byte first).
//
// The invariant fields are masked here: the Ethernet header's first six bytes read as
// zero and its last eight as ones (the LRH of ones; ICRC_S0 is the register that six zero
// bytes take to all ones); as ones also the IPv4 TOS, TTL and checksum, or the IPv6 traffic
// class, flow label and hop limit, the UDP checksum and the BTH's reserved byte (over IPv6
// in the frame's second beat, so the first beat's type is kept for it). A beat's update is register' = A^64 * register ^ D * beat
// with the last beat's unused bytes zeroed; those zero bytes are then undone, A^-empty,
// off the register's loop. Fully pipelined: a beat a cycle, a frame's ICRC four cycles
// after its last beat, everything held while out_valid waits for out_ready.
module ordma_icrc (
    input logic clk,
    input logic rst,  // synchronous, active high

    input  logic         in_valid,
    output logic         in_ready,
    input  logic [511:0] in_data,
    input  logic         in_last,
    input  logic [  5:0] in_empty,

    output logic        out_valid,
    input  logic        out_ready,
    output logic [31:0] out_icrc
);
`include "icrc_tables.svh"

  // The first beat's bytes that the ICRC sees as ones, besides the LRH (Ethernet 6..13).
  // IPv4: TOS (15), TTL (22), checksum (24, 25); UDP checksum (40, 41); BTH byte 4 (46).
  // IPv6: the traffic class's low nibble in byte 14 (masked apart), the rest of it and the
  // flow label (15..17), the hop limit (21); UDP checksum (60, 61); BTH byte 4 is byte 2 of
  // the second beat (66).
  function automatic logic masked_one(input int b, input logic v6);
    if (v6) masked_one = (b >= 6 && b < 14) || (b >= 15 && b <= 17) || b == 21 || b == 60 ||
        b == 61;
    else
      masked_one = (b >= 6 && b < 14) || b == 15 || b == 22 || b == 24 || b == 25 || b == 40 ||
          b == 41 || b == 46;
  endfunction

  logic advance;
  assign advance  = !out_valid || out_ready;
  assign in_ready = advance;

  // The first beat's Ethernet type is IPv6 (0x86dd).
  logic v6_first;
  assign v6_first = in_data[8*12+:8] == 8'h86 && in_data[8*13+:8] == 8'hdd;

  // The next beat is a frame's first; or its second, of an IPv6 frame.
  logic sof, v6_second;
  always_ff @(posedge clk)
    if (rst) begin
      sof <= 1'b1;
      v6_second <= 1'b0;
    end else if (in_valid && advance) begin
      sof <= in_last;
      v6_second <= sof && v6_first && !in_last;
    end

  // Stage A: the beat masked, its tail zeroed, multiplied by D.
  logic [511:0] beat;
  always_comb begin
    for (int j = 0; j < 64; j++) begin
      if (in_last && j >= 64 - int'(in_empty)) beat[8*j+:8] = 8'h00;
      else if (sof && j < 6) beat[8*j+:8] = 8'h00;
      else if (sof && masked_one(j, v6_first)) beat[8*j+:8] = 8'hff;
      else if (sof && v6_first && j == 14) beat[8*j+:8] = in_data[8*j+:8] | 8'h0f;
      else if (v6_second && j == 2) beat[8*j+:8] = 8'hff;
      else beat[8*j+:8] = in_data[8*j+:8];
    end
  end

  logic a_valid, a_first, a_last;
  logic [31:0] a_d;
  logic [ 5:0] a_k;
  always_ff @(posedge clk)
    if (rst) a_valid <= 1'b0;
    else if (advance) begin
      a_valid <= in_valid;
      a_d <= icrc_data(beat);
      a_first <= sof;
      a_last <= in_last;
      a_k <= in_last ? in_empty : 6'd0;
    end

  // Stage B: the register's loop, one full beat a cycle.
  logic [31:0] state, next;
  assign next = icrc_adv64(a_first ? ICRC_S0 : state) ^ a_d;
  logic b_valid;
  logic [31:0] b_x;
  logic [5:0] b_k;
  always_ff @(posedge clk)
    if (rst) b_valid <= 1'b0;
    else if (advance) begin
      if (a_valid) state <= next;
      b_valid <= a_valid && a_last;
      b_x <= next;
      b_k <= a_k;
    end

  // Stages C and D: the last beat's zero bytes undone, three powers a stage; the ICRC is
  // the register inverted.
  logic [31:0] r1;
  always_comb begin
    r1 = b_x;
    if (b_k[0]) r1 = icrc_rew1(r1);
    if (b_k[1]) r1 = icrc_rew2(r1);
    if (b_k[2]) r1 = icrc_rew4(r1);
  end
  logic c_valid;
  logic [31:0] c_x;
  logic [2:0] c_k;
  always_ff @(posedge clk)
    if (rst) c_valid <= 1'b0;
    else if (advance) begin
      c_valid <= b_valid;
      c_x <= r1;
      c_k <= b_k[5:3];
    end
  logic [31:0] r;
  always_comb begin
    r = c_x;
    if (c_k[0]) r = icrc_rew8(r);
    if (c_k[1]) r = icrc_rew16(r);
    if (c_k[2]) r = icrc_rew32(r);
  end
  always_ff @(posedge clk)
    if (rst) out_valid <= 1'b0;
    else if (advance) begin
      out_valid <= c_valid;
      out_icrc  <= ~r;
    end

`ifdef VERILATOR
  // The input's protocol: only a last beat has unused bytes.
  assert property (@(posedge clk) disable iff (rst) in_valid && !in_last |-> in_empty == 0);
  // Held output: valid and value stay until taken.
  assert property (@(posedge clk) disable iff (rst)
      out_valid && !out_ready |=> out_valid && $stable(out_icrc));
`endif
endmodule
