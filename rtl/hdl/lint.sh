#!/bin/bash
# `verilator --lint-only -Wall` of every block, and of the mux's test mutants (the make
# test step rtl-lint; in the build root: scripts/in-root -- bash rtl/hdl/lint.sh).
set -euo pipefail
cd "$(dirname "$0")"
verilator --version
run() { echo "lint: $*"; verilator --lint-only -Wall --quiet-stats "$@"; }
run ordma_icrc.sv
run ordma_dma_mux.sv
run ordma_dma_demux.sv
run -DORDMA_MUX_MUTANT=1 ordma_dma_mux.sv
run -DORDMA_MUX_MUTANT=2 ordma_dma_mux.sv
# The tables are what the generator writes.
python3 gen_icrc_tables.py --check
echo "lint: clean"
