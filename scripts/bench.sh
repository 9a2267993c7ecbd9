#!/bin/bash
# `make bench`: perftest and ibv_rc_pingpong, unmodified, over ordma (loopback on one NIC, and
# between two NICs on one wire) and over soft-RoCE in the same VM
# (qemu-test/bench/perftest.sh), then a table with ordma's ratios to soft-RoCE:
# bench-results/<time>/table.md (raw outputs in bench/, bench-results/latest points at it).
# Then two guests with an Ethernet ordma NIC each (qemu-test/bench/roce.sh): perftest by GID
# between the machines, ordma to ordma on a clean wire and at 0.1% and 1% loss, ordma to
# soft-RoCE and soft-RoCE to soft-RoCE: table-vms.md, plot-vms.png.
# Then co-simulation (qemu-test/bench/rtl.sh): register accesses and perftest's WRITE between
# two NICs running the RTL blocks (--rtl) beside two running the model alone: table-rtl.md.
# Arguments (none: all) name the groups to run: rc, transports and pingpong in the one VM
# (qemu-test/bench/perftest.sh), vms for the two guests, rtl for co-simulation
# (`make bench B="transports"`).
# A benchmark, not a test: it fails only if the VM or a tool fails.
source "$(dirname "$0")/lib.sh"
need_root_user
BENCH_GROUPS=("$@")
vm_groups=()
for g in "${BENCH_GROUPS[@]}"; do
	case $g in
	rc | transports | pingpong) vm_groups+=("$g") ;;
	vms | rtl) ;;
	*) die "unknown benchmark group '$g' (rc, transports, pingpong, vms, rtl)" ;;
	esac
done
want_group() { [ ${#BENCH_GROUPS[@]} = 0 ] || [[ " ${BENCH_GROUPS[*]} " == *" $1 "* ]]; }
want_vms() { want_group vms; }
R=$ORDMA_SRC/bench-results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$R"
prune_results "$ORDMA_SRC/bench-results"
ln -sfn "$R" "$ORDMA_SRC/bench-results/latest"
log "bench results: $R"
# table TSV BASE COLUMN...: a markdown table of results.tsv, one row per (test, size, unit),
# one column per COLUMN (KIND=LABEL: the rows of device KIND), then, for each COLUMN marked
# with a leading +, its ratio to BASE's (rates KIND / BASE, latencies (units in us) BASE /
# KIND: above 1 is KIND ahead).
table() {
	local tsv=$1 base=$2 IFS=';'
	shift 2
	awk -F'\t' -v base="$base" -v cols="$*" '
	BEGIN {
	  nc = split(cols, c, ";")
	  for (j = 1; j <= nc; j++) { r[j] = sub(/^\+/, "", c[j]); eq = index(c[j], "="); kind[j] = substr(c[j], 1, eq - 1)
	    label[j] = substr(c[j], eq + 1); if (kind[j] == base) blabel = label[j] }
	}
	NR == 1 { next }
	{ key = $1 "\t" $2 "\t" $5; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
	  v[key, $3] = $4 }
	function ratio(a, b, lat) { if (a + 0 <= 0 || b + 0 <= 0) return "-"; return sprintf("%.2f", lat ? a / b : b / a) }
	END {
	  h = "| test | bytes |"; s = "|---|---|"
	  for (j = 1; j <= nc; j++) { h = h " " label[j] " |"; s = s "---|" }
	  h = h " unit |"; s = s "---|"
	  for (j = 1; j <= nc; j++) if (r[j]) { h = h " " label[j] " vs " blabel " |"; s = s "---|" }
	  print h; print s
	  for (i = 0; i < n; i++) {
	    k = order[i]; split(k, t, "\t"); lat = t[3] ~ /^us/; line = "| " t[1] " | " t[2] " |"
	    for (j = 1; j <= nc; j++) line = line " " v[k, kind[j]] " |"
	    line = line " " t[3] " |"
	    for (j = 1; j <= nc; j++) if (r[j]) line = line " " ratio(v[k, base], v[k, kind[j]], lat) "× |"
	    print line
	  }
	}' "$tsv"
}
if [ ${#BENCH_GROUPS[@]} = 0 ] || [ ${#vm_groups[@]} != 0 ]; then
	"$ORDMA_SRC/qemu-test/run" --nics 2 --timeout 3000 --results "$R/vm" -- bash /ordma/src/qemu-test/bench/perftest.sh "${vm_groups[@]}" ||
		die "the benchmark VM failed (see $R/vm)"
	TSV=$R/vm/bench/results.tsv
	[ -s "$TSV" ] || die "no results ($TSV)"
	cp "$TSV" "$R/results.tsv"
	table "$TSV" rxe "rxe=soft-RoCE" "+lo=ordma, one NIC" "+2nics=ordma, two NICs" >"$R/table.md"
	cat "$R/table.md"
	log "table: $R/table.md (ratios: bandwidth ordma/soft-RoCE, latency soft-RoCE/ordma; above 1 is ordma ahead)"
fi

# Between two machines.
VMS_OK=
if want_vms && "$ORDMA_SRC/qemu-test/run" --vms 2 --link-layer ethernet --timeout 3000 --results "$R/vms" -- \
	bash /ordma/src/qemu-test/bench/roce.sh && [ -s "$R/vms/vm1/bench/results.tsv" ]; then
	VMS_OK=1
	tail -n +2 "$R/vms/vm1/bench/results.tsv" >>"$R/results.tsv"
	table "$R/vms/vm1/bench/results.tsv" rxe-rxe "rxe-rxe=soft-RoCE to soft-RoCE" "ordma-rxe=ordma to soft-RoCE" \
		"+vms=ordma to ordma" "vms-0.1=0.1% loss" "vms-1=1% loss" >"$R/table-vms.md"
	cat "$R/table-vms.md"
	log "table: $R/table-vms.md (two guests, by GID; ratio: ordma to ordma against soft-RoCE to soft-RoCE)"
elif want_vms; then
	log "the two-guest benchmark failed (see $R/vms); the one-VM table stands"
fi

# Co-simulation: NIC models 0 and 1 with the RTL blocks, 2 and 3 without, in one guest.
if want_group rtl; then
	if "$ORDMA_SRC/qemu-test/run" --nics 4 --nic-args 0 "--rtl" --nic-args 1 "--rtl" --timeout 3000 \
		--results "$R/rtl" -- bash /ordma/src/qemu-test/bench/rtl.sh && [ -s "$R/rtl/bench/results.tsv" ]; then
		table "$R/rtl/bench/results.tsv" model "model=the model alone" "+rtl=co-simulation (--rtl)" >"$R/table-rtl.md"
		cat "$R/table-rtl.md"
		log "table: $R/table-rtl.md (ratio: co-simulation against the model alone; below 1 is slower)"
	else
		log "the co-simulation benchmark failed (see $R/rtl)"
	fi
fi

# The plot, with matplotlib on the host: the host's own if it has it, else a virtualenv in
# the cache (ORDMA_CACHE/bench-venv, matplotlib from PyPI, made once). Without it the table
# and the TSV still stand.
PY=python3
if ! python3 -c 'import matplotlib' 2>/dev/null; then
	VENV=$ORDMA_CACHE/bench-venv
	if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
		log "installing matplotlib into $VENV (once) ..."
		python3 -m venv "$VENV" && "$VENV/bin/pip" install -q 'matplotlib==3.9.2' ||
			log "no matplotlib: no plot (the table and results.tsv are in $R)"
	fi
	PY=$VENV/bin/python
fi
if [ -s "$R/results.tsv" ] && "$PY" "$ORDMA_SRC/qemu-test/bench/plot.py" "$R/results.tsv" "$R/plot.png"; then
	log "plot: $R/plot.png"
else
	log "the plot failed (the table and results.tsv are in $R)"
fi
if [ -n "$VMS_OK" ]; then
	if "$PY" "$ORDMA_SRC/qemu-test/bench/plot.py" "$R/results.tsv" "$R/plot-vms.png" vms; then
		log "plot: $R/plot-vms.png"
	else
		log "the two-guest plot failed (the table and results.tsv are in $R)"
	fi
fi
