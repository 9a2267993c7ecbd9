#!/bin/bash
# The DMA channel mux's per-channel properties (formal/mux_formal.sv: no loss, no
# duplicate, in order, requests whole, fully pipelined) proved for ORDMA_FORMAL_DEPTH (7)
# cycles from reset with yosys's smtbmc flow and z3: the mux as it is must pass, each
# test mutant (ORDMA_MUX_MUTANT 1: a beat lost under backpressure; 2: a bubble between
# channels) must fail. The make test step rtl-formal; in the build root:
# scripts/in-root -- bash rtl/hdl/formal.sh
set -euo pipefail
cd "$(dirname "$0")"
DEPTH=${ORDMA_FORMAL_DEPTH:-7}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
yosys -V
# bmc NAME [DEFINE]: the bounded check; 0 if every assertion holds to DEPTH.
bmc() {
	local name=$1 def=${2:-}
	yosys -q -l "$W/$name.yosys.log" -p "read_verilog -sv -formal $def ordma_dma_mux.sv formal/mux_formal.sv;
		prep -top mux_formal; async2sync; dffunmap; write_smt2 -wires $W/$name.smt2"
	yosys-smtbmc -s z3 --presat -t "$DEPTH" "$W/$name.smt2" >"$W/$name.log" 2>&1
}
fail=0
start=$SECONDS
if bmc mux; then
	echo "PASS: ordma_dma_mux: every property holds for $DEPTH cycles ($((SECONDS - start)) s)"
else
	echo "FAIL: ordma_dma_mux: a property fails:"
	grep -E 'Assert|failed|Error|error' "$W/mux.log" | head -20
	fail=1
fi
for m in 1 2; do
	start=$SECONDS
	if bmc "mutant$m" "-DORDMA_MUX_MUTANT=$m"; then
		echo "FAIL: mutant $m passed: the properties do not catch it"
		fail=1
	else
		echo "PASS: mutant $m caught ($((SECONDS - start)) s): $(grep -m1 -E 'Assert failed' "$W/mutant$m.log" | sed 's/.*Assert failed in //')"
		grep -q 'Assert failed' "$W/mutant$m.log" || { echo "FAIL: mutant $m: no failed assertion (an error?)"; tail -5 "$W/mutant$m.log"; fail=1; }
	fi
done
exit $fail
