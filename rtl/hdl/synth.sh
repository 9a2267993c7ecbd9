#!/bin/bash
# Synthesis for a Lattice ECP5 (yosys synth_ecp5) and place and route (nextpnr-ecp5,
# LFE5U-85F, CABGA381) of each block in its pin harness (synth/synth_top.sv): the block's
# LUTs and registers (yosys, before flattening) and the maximum clock nextpnr reports.
# In the build root: scripts/in-root --results DIR -- bash rtl/hdl/synth.sh [/ordma/results]
set -euo pipefail
cd "$(dirname "$0")"
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT"
yosys -V; nextpnr-ecp5 --version 2>&1 | head -1
for top in synth_icrc synth_mux; do
	start=$SECONDS
	yosys -q -l "$OUT/$top.yosys.log" -p "read_verilog -sv ordma_icrc.sv ordma_dma_mux.sv synth/synth_top.sv;
		hierarchy -top $top; synth_ecp5 -top $top -noflatten -json $OUT/$top.json; tee -o $OUT/$top.stat stat"
	nextpnr-ecp5 --85k --package CABGA381 --json "$OUT/$top.json" --textcfg "$OUT/$top.config" \
		--lpf-allow-unconstrained --freq 100 --seed 1 -l "$OUT/$top.pnr.log" >/dev/null 2>&1 || true
	echo "== $top ($((SECONDS - start)) s)"
	grep -A40 "=== .*ordma_" "$OUT/$top.stat" | grep -E "=== |LUT4|TRELLIS_FF|CCU2C|PFUMX|L6MUX21|Number of cells" || true
	grep -E "Max frequency for clock|Info: +(TRELLIS_SLICE|TRELLIS_FF|LUT4|TRELLIS_COMB):" "$OUT/$top.pnr.log" | tail -4 || true
done
