#!/bin/bash
# VM test: CQs and RC QPs through libibverbs and the provider (qemu-test/progs/
# verbs_cq_qp.py, ctypes), checked against the NIC model's object counts (`status`):
# CQ sizes and limits, arming by doorbell, completion and CQ error events injected by the
# model (`nic_ctl 0 event`), QP capabilities and limits, the RC state machine pair by pair
# with its attribute checks, ibv_query_qp, SQ_DRAINED, EBUSY for a CQ or PD a QP uses, and
# a process killed while holding a PD, MRs, CQs and QPs leaves nothing on the NIC, in
# `rdma resource` or pinned (its rings' pages released, /proc/vmstat's FOLL_PIN counts).
# nics: 1
# debug: full
# timeout: 400
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
# `rdma resource show`'s counts for ordma0, e.g. "pd 1 cq 2 qp 2 cm_id 0 mr 2 ctx 1 srq 0".
res() { rdma resource show | sed -n 's/^[0-9]*: ordma0: //p' | sed 's/ *$//'; }
# The NIC's objects, from one `status`: "pds=N mrs=N cqs=N qps=N".
objects() {
	local s
	s=$(nic_ctl 0 status) || fail "nic_ctl 0 status: $s"
	for k in pds mrs cqs qps; do
		printf '%s=%s ' $k "$(sed -n "s/.* $k=\([0-9]*\).*/\1/p" <<<"$s")"
	done | sed 's/ $//'
}

source /ordma/src/qemu-test/progs/pins.sh

[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC has objects before the test: $(objects)"
res0=$(res)
echo "rdma resource before: $res0"

python3 $P/verbs_cq_qp.py cq events caps states order || fail "verbs_cq_qp.py"

# A process killed while holding a PD, 2 MRs, 2 CQs and 2 QPs (one in RTS). Its CQ rings
# (2 x 16384 CQEs of 32 bytes) are 256 pages, its QP rings (2 x 4096 send WQEs of at least
# 64 bytes and 4096 receive WQEs of at least 32) at least 192, its MRs 32: all pinned while
# it lives, none after.
pinned0=$(pins)
python3 $P/verbs_cq_qp.py hold >/tmp/cqqp-hold.out 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding /tmp/cqqp-hold.out && break; sleep 0.1; done
grep -q holding /tmp/cqqp-hold.out || { cat /tmp/cqqp-hold.out; fail "the holder did not start"; }
during=$(objects)
echo "held: the NIC has $during; rdma resource: $(res)"
[ "$during" = "pds=1 mrs=2 cqs=2 qps=2" ] || fail "the NIC has $during while the holder runs"
pinned_during=$(pins)
echo "pages pinned: $pinned0 before, $pinned_during while the holder runs"
[ $((pinned_during - pinned0)) -ge $((256 + 192 + 32 - SLACK)) ] ||
	fail "only $((pinned_during - pinned0)) pages pinned while the holder runs"
kill -KILL $holder
wait $holder 2>/dev/null || true
after=
for _ in $(seq 300); do
	after=$(objects)
	[ "$after" = "pds=0 mrs=0 cqs=0 qps=0" ] && break
	sleep 0.2
done
echo "after SIGKILL: the NIC has $after; rdma resource: $(res)"
[ "$after" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "left on the NIC after SIGKILL: $after"
[ "$(res)" = "$res0" ] || fail "rdma resource after SIGKILL: '$(res)', before: '$res0'"
for t in pd cq qp mr; do
	out=$(rdma resource show $t)
	if grep -q 'dev ordma0 .*comm python3' <<<"$out"; then
		echo "$out"
		fail "rdma resource show $t lists the killed process's objects on ordma0"
	fi
done
pinned_after=
for _ in $(seq 300); do
	pinned_after=$(pins)
	[ $((pinned_after - pinned0)) -le $SLACK ] && break
	sleep 0.2
done
echo "pages pinned after SIGKILL: $pinned_after"
[ $((pinned_after - pinned0)) -le $SLACK ] || fail "$((pinned_after - pinned0)) page(s) still pinned"
echo "ok: the killed process left no PD, MR, CQ or QP (NIC and rdma resource) and no pinned page"

# The driver logs the CQ_ERROR the test injected for CQN 0, which no CQ has (one warning,
# whatever its words); nothing else is an error or a warning.
dmesg -l err,warn | grep -E 'ordma [0-9a-f]{4}:' || true
n=$(dmesg -l err,warn | grep -cE 'ordma [0-9a-f]{4}:' || true)
[ "$n" = 1 ] || fail "$n error or warning lines from ordma, want 1 (the injected CQ error)"
echo "ok: no driver errors in dmesg but the injected CQ error"
echo "PASS: verbs-cq-qp"
