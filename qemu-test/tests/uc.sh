#!/bin/bash
# VM test: UC (unreliable connected) QPs on one NIC (loopback: ordma0 to itself) and between
# two NICs (ordma0 and ordma1 over the wire):
# - qemu-test/progs/verbs-data `uc` (uc.c): SEND, SEND with immediate, WRITE and WRITE
#   with immediate from 0 B to 2 MiB and inline, every byte and completion field; a READ
#   and both atomics refused at post (EINVAL); RC's attributes refused at modify (EINVAL),
#   UC's taken;
# - ibv_uc_pingpong, unmodified, --chk (the bytes checked), polling and with -e, loopback
#   and between the NICs;
# - perftest's ib_send_bw -c UC and ib_write_bw -c UC, unmodified, loopback and between the
#   NICs, each with its result line;
# - rdma-core's own UC QP tests (run_tests.py -k uc: create with and without attributes,
#   query) pass on ordma0;
# - no UC packet was dropped by either NIC (`status`: uc_dropped= unchanged: nothing is
#   lost in this guest), neither NIC holds a PD, MR, CQ or QP afterwards, no frame was
#   refused.
# On the debug kernel (KASAN, lockdep, kmemleak) the pingpongs, perftest and rdma-core's
# tests (user space only) are left to the default kernel's run.
# nics: 2
# debug: full
# timeout: 600
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
source $P/rdma-core-tests.sh
source $P/debug-kernel.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
dropped() { nic_ctl "$1" status | grep -o ' uc_dropped=[0-9]*' | cut -d= -f2; }
d0=$(dropped 0)
d1=$(dropped 1)

$VD --dev ordma0 uc || fail "ordma-verbs-data uc, loopback"
$VD --dev ordma0 --dev2 ordma1 uc || fail "ordma-verbs-data uc, between the NICs"

if debug_kernel; then
	echo "the debug kernel: pingpong, perftest and rdma-core's tests run on the default kernel"
else
	port=18800
	for devs in "ordma0 ordma0" "ordma0 ordma1"; do
		read -r srv cli <<<"$devs"
		pair_run "ibv_uc_pingpong $srv <- $cli, 4096 B" $port ibv_uc_pingpong -d "$srv" -s 4096 -n 500 -c -- \
			ibv_uc_pingpong -d "$cli" -s 4096 -n 500 -c
		grep -q "500 iters in" /tmp/cli.out || fail "ibv_uc_pingpong: no result line"
		port=$((port + 1))
		pair_run "ibv_uc_pingpong $srv <- $cli, 1 KiB MTU, 16 KiB, events" $port ibv_uc_pingpong -d "$srv" -s 16384 \
			-n 100 -c -e -- ibv_uc_pingpong -d "$cli" -s 16384 -n 100 -c -e
		grep -q "100 iters in" /tmp/cli.out || fail "ibv_uc_pingpong -e: no result line"
		port=$((port + 1))
		echo "ok: ibv_uc_pingpong $srv <- $cli, --chk, polling and with -e"
		for t in ib_send_bw ib_write_bw; do
			pair_run "$t -c UC, $srv <- $cli" $port $t -d "$srv" -c UC -F -n 200 -s 65536 -- \
				$t -d "$cli" -c UC -F -n 200 -s 65536
			grep -Eq '^ *65536 +200 ' /tmp/cli.out || fail "$t -c UC: no result line for 65536 B x 200"
			port=$((port + 1))
		done
		echo "ok: perftest ib_send_bw and ib_write_bw -c UC, $srv <- $cli"
	done

	rdma_core_tests ordma0 -k uc
	echo "ok: rdma-core's UC QP tests on ordma0"
fi

[ "$(dropped 0)" = "$d0" ] && [ "$(dropped 1)" = "$d1" ] ||
	fail "UC packets dropped: NIC 0 $d0 -> $(dropped 0), NIC 1 $d1 -> $(dropped 1)"
echo "ok: no UC packet dropped on either NIC"
for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC $n still holds $(objects $n)"
	s=$(nic_ctl $n status)
	[[ $s == *" bad_frames=0"* ]] || fail "NIC $n refused frames: $s"
done
echo "PASS: uc"
