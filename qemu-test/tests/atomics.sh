#!/bin/bash
# VM test: 64-bit atomics (compare and swap, fetch and add) on one NIC (loopback: ordma0 to
# itself) and between two NICs (ordma0 to ordma1 over the wire):
# - qemu-test/progs/verbs-data `atomics` (atomics.c): atomic_cap IBV_ATOMIC_HCA and the
#   READ/atomic depths in ibv_query_device; compare and swap (unequal, equal) and fetch and
#   add (wrapping), every old value and the word; 4 threads, a context and QP each, doing
#   500 fetch and adds of 1 on one counter: it ends at 2000 and the old values are exactly
#   0..1999; an unaligned address (IBV_WC_REM_INV_REQ_ERR), an MR and a QP without
#   REMOTE_ATOMIC (IBV_WC_REM_ACCESS_ERR), a local buffer of 4 bytes (IBV_WC_LOC_LEN_ERR),
#   the word unchanged by each; the responder NIC's model counted exactly the atomics the
#   program had executed (`status`: atomics=);
# - perftest's ib_atomic_bw and ib_atomic_lat, unmodified, -A CMP_AND_SWAP and
#   -A FETCH_AND_ADD, loopback and between the NICs, each with its result line and at least
#   its iterations executed on the server's NIC;
# - rdma-core's own atomic tests (run_tests.py test_atomic: compare and swap, fetch and
#   add, bad lkey, rkey, QP and MR access, an unaligned address) pass on ordma0 (XRC's two
#   skipped: no XRC domains);
# - afterwards neither NIC holds a PD, MR, CQ or QP, and no frame was refused.
# On the debug kernel (KASAN, lockdep, kmemleak) perftest and rdma-core's tests (user space
# only) are left to the default kernel's run.
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
# Atomics NIC $1 executed, and answered again from its replay cache, since it started.
executed() { nic_ctl "$1" status | grep -o ' atomics=[0-9]*' | cut -d= -f2; }
replayed() { nic_ctl "$1" status | grep -o ' atomics_replayed=[0-9]*' | cut -d= -f2; }

for run in "ordma0 ordma0 0 loopback" "ordma0 ordma1 1 between-NICs"; do
	read -r a b nic name <<<"$run"
	before=$(executed "$nic")
	$VD --dev "$a" --dev2 "$b" atomics | tee /tmp/atomics.out || fail "ordma-verbs-data atomics, $name"
	n=$(sed -n 's/^atomics executed: //p' /tmp/atomics.out)
	after=$(executed "$nic")
	[ -n "$n" ] && [ $((after - before)) = "$n" ] ||
		fail "$name: the program executed $n atomics, NIC $nic counted $((after - before))"
	echo "ok: $name: NIC $nic executed exactly the program's $n atomics ($(replayed "$nic") replayed since it started)"
done

if debug_kernel; then
	echo "the debug kernel: perftest and rdma-core's tests run on the default kernel"
else
	port=18700
	for run in "ordma0 ordma0 0" "ordma0 ordma1 0"; do
		read -r srv cli nic <<<"$run"
		for t in ib_atomic_bw ib_atomic_lat; do
			for op in CMP_AND_SWAP FETCH_AND_ADD; do
				before=$(executed "$nic")
				pair_run "$t -A $op, $srv <- $cli" $port $t -d "$srv" -F -n 200 -A $op -- \
					$t -d "$cli" -F -n 200 -A $op
				grep -Eq '^ *8 +200 ' /tmp/cli.out || fail "$t -A $op: no result line for 8 B x 200"
				d=$(($(executed "$nic") - before))
				[ "$d" -ge 200 ] || fail "$t -A $op: NIC $nic executed $d atomics, fewer than 200"
				echo "ok: $t -A $op, $srv <- $cli: NIC $nic executed $d atomics"
				port=$((port + 1))
			done
		done
	done

	rdma_core_tests ordma0 tests.test_atomic
	echo "ok: rdma-core's atomic tests on ordma0"
fi

for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC $n still holds $(objects $n)"
	s=$(nic_ctl $n status)
	[[ $s == *" bad_frames=0"* ]] || fail "NIC $n refused frames: $s"
done
echo "PASS: atomics"
