#!/bin/bash
# `make bench`, inside the guest (two ordma NICs on one wire, and soft-RoCE rxe0 over eth0 in
# the same VM): unmodified perftest and ibv_rc_pingpong over
#   rxe     soft-RoCE, server and client on rxe0 (the baseline),
#   lo      ordma, server and client on ordma0 (loopback in the NIC),
#   2nics   ordma, server on ordma0, client on ordma1 (RoCEv2 frames between the models),
# one after another in the same boot. Arguments (none: all) name the groups to run: rc (RDMA
# WRITE, READ and SEND bandwidth and latency), transports (SEND through an SRQ, UD, atomics),
# pingpong. Raw outputs go to /ordma/results/bench/, and one line per (test, size, device) to
# /ordma/results/bench/results.tsv:
#   test  bytes  device  value  unit
set -uo pipefail
OUT=/ordma/results/bench
mkdir -p $OUT
TSV=$OUT/results.tsv
printf 'test\tbytes\tdevice\tvalue\tunit\n' >$TSV
say() { echo "[bench $(date +%H:%M:%S)] $*"; }
want() { [ -z "$GROUPS_WANTED" ] || [[ " $GROUPS_WANTED " == *" $1 "* ]]; }
GROUPS_WANTED="$*"

modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
gid=
for _ in $(seq 50); do
	for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		[ "$(cat "$f" 2>/dev/null)" = "0000:0000:0000:0000:0000:ffff:0a00:020f" ] && { gid=${f##*/}; break 2; }
	done
	sleep 0.1
done
[ -n "$gid" ] || { echo "no IPv4 GID on rxe0"; exit 1; }

port=19000
# run NAME DEVICE-KIND SERVER_ARGS... : runs the server and its client; the client's output in
# $OUT/NAME-KIND.txt
run() {
	local name=$1 kind=$2 srv cli spid rc=0
	shift 2
	case $kind in
	rxe) srv=(-d rxe0); cli=(-d rxe0) ;;
	lo) srv=(-d ordma0); cli=(-d ordma0) ;;
	2nics) srv=(-d ordma0); cli=(-d ordma1) ;;
	esac
	[ $kind != rxe ] || { srv+=(-x "$gid"); cli+=(-x "$gid"); }
	[[ $1 != ibv_rc_pingpong ]] || { [ $kind != rxe ] || { srv=(-d rxe0 -g "$gid"); cli=(-d rxe0 -g "$gid"); }; }
	port=$((port + 1))
	"$1" "${srv[@]}" -p $port "${@:2}" >"$OUT/$name-$kind.server.txt" 2>&1 &
	spid=$!
	for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.1; done
	timeout 300 "$1" "${cli[@]}" -p $port "${@:2}" 127.0.0.1 >"$OUT/$name-$kind.txt" 2>&1 || rc=$?
	timeout 30 tail --pid=$spid -f /dev/null || kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	[ $rc = 0 ] || say "$name on $kind exited with $rc (see $OUT/$name-$kind.txt)"
}
# The client's result line for SIZE: perftest's "SIZE ITERS ..." row.
row() { grep -E "^ *$2 +[0-9]+ " "$OUT/$1.txt" | tail -n1; }
# Column N of that row when it is a positive number, else "fail": perftest prints inf or
# 0.00 when its TSC calibration went wrong (a loaded host under TCG), never a measurement.
col() { awk -v n="$3" '{ v = $n } END { print (v ~ /^[0-9]+(\.[0-9]+)?$/ && v + 0 > 0) ? v : "fail" }' <<<"$(row "$1" "$2")"; }

for kind in rxe lo 2nics; do
	if want rc; then
	say "$kind: ib_write_bw, ib_read_bw, ib_send_bw"
	for size in 64 1024 4096 16384 65536 262144 1048576 2097152; do
		# Duration mode (-D 2: two seconds, whatever the speed), so a fast device is not
		# measured over a few milliseconds of a fixed iteration count.
		for t in ib_write_bw ib_read_bw ib_send_bw; do
			run "$t-$size" $kind $t -F -s $size -D 2
			printf '%s\t%s\t%s\t%s\tMiB/s\n' $t $size $kind "$(col "$t-$size-$kind" $size 4)" >>$TSV
		done
	done
	say "$kind: ib_write_lat, ib_read_lat, ib_send_lat"
	for size in 8 64 512 4096 65536; do
		for t in ib_write_lat ib_read_lat ib_send_lat; do
			run "$t-$size" $kind $t -F -s $size -n 500
			# t_typical[usec] (the median), the fifth column, and t_avg[usec], the sixth
			printf '%s\t%s\t%s\t%s\tus median\n' $t $size $kind "$(col "$t-$size-$kind" $size 5)" >>$TSV
			printf '%s\t%s\t%s\t%s\tus mean\n' $t $size $kind "$(col "$t-$size-$kind" $size 6)" >>$TSV
		done
	done
	if [ $kind = 2nics ]; then
		# READ depth: the rows above let perftest keep as many READs outstanding as the
		# QP may have (-o defaults to the device's max_qp_rd_atom); these keep one.
		say "$kind: ib_read_bw with one READ outstanding"
		for size in 4096 16384 65536; do
			run "ib_read_bw-o1-$size" $kind ib_read_bw -F -s $size -D 2 -o 1
			printf '%s\t%s\t%s\t%s\tMiB/s\n' "ib_read_bw -o 1" $size $kind "$(col "ib_read_bw-o1-$size-$kind" $size 4)" >>$TSV
		done
	fi
	fi # rc
	# The transports beyond RC sends (issue 19): sends through an SRQ, UD datagrams (up to
	# the path MTU), 64-bit atomics (perftest's message is the 8-byte operand).
	if want transports; then
	say "$kind: ib_send_bw --use-srq, -c UD; ib_send_lat -c UD; ib_atomic_bw, ib_atomic_lat"
	for size in 4096 65536; do
		run "ib_send_bw-srq-$size" $kind ib_send_bw -F -s $size -D 2 --use-srq
		printf '%s\t%s\t%s\t%s\tMiB/s\n' "ib_send_bw --use-srq" $size $kind "$(col "ib_send_bw-srq-$size-$kind" $size 4)" >>$TSV
	done
	# 1 KiB: soft-RoCE's path MTU here (the guest's netdev MTU is 1500).
	for size in 64 1024; do
		run "ib_send_bw-ud-$size" $kind ib_send_bw -F -s $size -D 2 -c UD
		printf '%s\t%s\t%s\t%s\tMiB/s\n' "ib_send_bw -c UD" $size $kind "$(col "ib_send_bw-ud-$size-$kind" $size 4)" >>$TSV
	done
	run "ib_send_lat-ud-64" $kind ib_send_lat -F -s 64 -n 500 -c UD
	printf '%s\t%s\t%s\t%s\tus median\n' "ib_send_lat -c UD" 64 $kind "$(col "ib_send_lat-ud-64-$kind" 64 5)" >>$TSV
	for op in FETCH_AND_ADD CMP_AND_SWAP; do
		run "ib_atomic_bw-$op" $kind ib_atomic_bw -F -D 2 -A $op
		# Operations per second, perftest's MsgRate[Mpps], the fifth column: 8 bytes each.
		printf '%s\t%s\t%s\t%s\tMops/s\n' "ib_atomic_bw -A $op" 8 $kind "$(col "ib_atomic_bw-$op-$kind" 8 5)" >>$TSV
		run "ib_atomic_lat-$op" $kind ib_atomic_lat -F -n 500 -A $op
		printf '%s\t%s\t%s\t%s\tus median\n' "ib_atomic_lat -A $op" 8 $kind "$(col "ib_atomic_lat-$op-$kind" 8 5)" >>$TSV
	done
	fi # transports
	want pingpong || continue
	say "$kind: ibv_rc_pingpong"
	run "pingpong-4096" $kind ibv_rc_pingpong -s 4096 -n 500
	v=$(sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p' "$OUT/pingpong-4096-$kind.txt" | tail -n1)
	printf 'ibv_rc_pingpong\t4096\t%s\t%s\tus/iter\n' $kind "${v:-fail}" >>$TSV
done
rdma link delete rxe0
cat $TSV
