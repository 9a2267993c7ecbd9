#!/bin/bash
# scripts/bench-ab.sh, inside the guest (two ordma NICs on one wire): a short set of
# unmodified perftest and ibv_rc_pingpong runs, one line each to /ordma/results/ab.tsv:
#   test  bytes  where  value  unit
# where: lo (server and client on ordma0, loopback in the NIC) or 2nics (server on ordma0,
# client on ordma1). The same set for every model the script compares.
set -uo pipefail
TSV=/ordma/results/ab.tsv
: >$TSV
port=19000
# run KIND TOOL ARGS...: server and client; the client's output on stdout.
run() {
	local kind=$1 srv=ordma0 cli=ordma0 spid
	shift
	[ "$kind" = lo ] || cli=ordma1
	port=$((port + 1))
	"$1" -d $srv -p $port "${@:2}" >/dev/null 2>&1 &
	spid=$!
	for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.1; done
	timeout 120 "$1" -d $cli -p $port "${@:2}" 127.0.0.1 2>&1
	timeout 30 tail --pid=$spid -f /dev/null || kill $spid 2>/dev/null
	wait $spid 2>/dev/null
}
# value OUTPUT SIZE COLUMN: perftest's result row for SIZE, that column, or "fail".
value() { awk -v s="$2" -v n="$3" '$1 == s && $2 ~ /^[0-9]+$/ { v = $n } END { print (v ~ /^[0-9.]+$/ && v + 0 > 0) ? v : "fail" }' <<<"$1"; }
bw() { # KIND TOOL SIZE [ARGS...]
	local kind=$1 t=$2 s=$3 label=$2
	shift 3
	[ $# = 0 ] || label="$t $*"
	printf '%s\t%s\t%s\t%s\tMiB/s\n' "$label" "$s" "$kind" "$(value "$(run "$kind" "$t" -F -s "$s" -D 2 "$@")" "$s" 4)" >>$TSV
}
lat() { # KIND TOOL SIZE: the median (t_typical)
	printf '%s\t%s\t%s\t%s\tus median\n' "$2" "$3" "$1" "$(value "$(run "$1" "$2" -F -s "$3" -n 1000)" "$3" 5)" >>$TSV
}
for s in 65536 2097152; do
	for t in ib_write_bw ib_read_bw ib_send_bw; do bw lo $t $s; done
done
lat lo ib_write_lat 64
lat lo ib_send_lat 64
v=$(run lo ibv_rc_pingpong -s 4096 -n 1000 | sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p')
printf 'ibv_rc_pingpong\t4096\tlo\t%s\tus/iter\n' "${v:-fail}" >>$TSV
# READs between the NICs, one outstanding and as many as the QP may have (perftest's -o).
for s in 4096 16384 65536; do
	bw 2nics ib_read_bw $s -o 1
	bw 2nics ib_read_bw $s -o 16
done
cat $TSV
