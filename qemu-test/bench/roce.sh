#!/bin/bash
# `make bench`'s second VM run, inside each of two guests (qemu-test/run --vms 2
# --link-layer ethernet: one Ethernet ordma NIC each, its netdev 10.78.<G>.1/16, the side
# channel eth0): unmodified perftest between the two machines, addressed by GID (-x), over
#   vms        ordma to ordma, a clean wire,
#   vms-0.1    ordma to ordma, each port losing 0.1% of the frames it sends (`wire loss`),
#   vms-1      the same at 1%,
#   ordma-rxe  vm0's ordma0 serving, vm1's soft-RoCE (rxe0 on its netdev, ordma unloaded),
#   rxe-rxe    soft-RoCE on both (the baseline between machines),
# one after another in the same boot; vm0 serves, vm1 is the client. vm1 writes its raw
# outputs to /ordma/results/bench/ and one line per (test, size, kind) to
# /ordma/results/bench/results.tsv (test  bytes  device  value  unit), as perftest.sh.
set -uo pipefail
P=/ordma/src/qemu-test/progs
# A benchmark, not a test: a failing tool gives "fail" in its row, never a stop.
fail() { say "FAILED: $*"; }
say() { echo "[bench vm$ORDMA_VM $(date +%H:%M:%S)] $*"; }
source $P/nic-control.sh
source $P/server-client.sh
source $P/vms.sh
source $P/roce.sh
OUT=/ordma/results/bench
mkdir -p $OUT
TSV=$OUT/results.tsv
[ "$ORDMA_VM" = 0 ] || printf 'test\tbytes\tdevice\tvalue\tunit\n' >$TSV
me=10.78.$ORDMA_VM.1
nd=$(ip -br -4 addr | awk -v a="$me/16" '$3 == a { print $1 }')
port=19500

# The client's result line for SIZE, and column N of it when a positive number, else "fail"
# (as perftest.sh).
col() { awk -v s="$2" -v n="$3" '$1 == s && $2 ~ /^[0-9]+$/ { v = $n } END { print (v ~ /^[0-9]+(\.[0-9]+)?$/ && v + 0 > 0) ? v : "fail" }' "$1"; }

# bench KIND DEV: the perftest rows between vm0 (server) and vm1 (client) on DEV.
bench() {
	local kind=$1 dev=$2 g t size name
	g=$(roce_gid_index "$dev" "$me") || { say "$kind: no GID on $dev"; return; }
	say "$kind: $dev, GID index $g"
	for size in 4096 65536 1048576; do
		for t in ib_write_bw ib_read_bw ib_send_bw; do
			name=$kind-$t-$size
			port=$((port + 1))
			vm_pair "$name" $port $t -d "$dev" -x "$g" -F -s $size -D 2
			[ "$ORDMA_VM" = 0 ] || printf '%s\t%s\t%s\t%s\tMiB/s\n' $t $size "$kind" "$(col "/tmp/$name.out" $size 4)" >>$TSV
			[ "$ORDMA_VM" = 0 ] || cp "/tmp/$name.out" "$OUT/$name.txt"
		done
	done
	# -o 16 on the READ latency: perftest takes each side's own READ depth (soft-RoCE's
	# 128 is more than ordma's 16; roce-rxe.sh).
	for t in ib_write_lat ib_send_lat "ib_read_lat -o 16"; do
		name=$kind-${t%% *}-64
		port=$((port + 1))
		# shellcheck disable=SC2086
		vm_pair "$name" $port $t -d "$dev" -x "$g" -F -s 64 -n 500
		[ "$ORDMA_VM" = 0 ] || printf '%s\t64\t%s\t%s\tus median\n' "${t%% *}" "$kind" "$(col "/tmp/$name.out" 64 5)" >>$TSV
		[ "$ORDMA_VM" = 0 ] || cp "/tmp/$name.out" "$OUT/$name.txt"
	done
}
wire() {
	# shellcheck disable=SC2086
	nic_ctl 0 wire "$@" >/dev/null || say "the NIC refused 'wire $*'"
}
rxe_up() {
	rmmod ordma
	modprobe rdma_rxe
	rdma link add rxe0 type rxe netdev "$nd"
}

bench vms ordma0
wire loss 0.001
bench vms-0.1 ordma0
wire loss 0.01
bench vms-1 ordma0
wire clear
[ "$ORDMA_VM" = 0 ] || rxe_up
bench ordma-rxe "$([ "$ORDMA_VM" = 0 ] && echo ordma0 || echo rxe0)"
vm_flag "rxe-done.$ORDMA_VM"
vm_wait_flag "rxe-done.$((1 - ORDMA_VM))" 300
[ "$ORDMA_VM" = 1 ] || rxe_up
bench rxe-rxe rxe0
rdma link delete rxe0
[ "$ORDMA_VM" = 0 ] || cat $TSV
