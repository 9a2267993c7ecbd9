#!/bin/bash
# VM test: the debug kernel's core, what `make test` runs under KASAN, lockdep, kmemleak and
# UBSAN in one boot (the other debug-kernel tests are `make test-full`'s). Every driver
# object's create, destroy and teardown path, short data on each transport, a process killed
# holding objects, and an unbind with objects alive, on two NICs:
# 1. objects: the raw uverbs commands with malformed and valid udata (uverbs_raw.py: contexts,
#    PDs, CQs, QPs and their refusals); CQs and QPs through the IB state machine
#    (verbs_cq_qp.py cq states); MRs on 4 KiB pages, dma-buf (udmabuf) and `ibv_rereg_mr`;
#    CQ resize under traffic; memory windows (type 1 and 2); SRQs (create, limit, resize,
#    destroy); UD QPs and address handles; the extended CQ and QP;
# 2. data, every byte checked (ordma-verbs-data): RC SEND, WRITE and READ of 0 B to 64 KiB,
#    UC, UD, atomics, between the NICs;
# 3. a per-QP counter (rdma statistic qp, auto mode) bound to a QP and freed with it;
# 4. a process holding UD QPs, AHs, an SRQ, CQs and MRs on both NICs killed with SIGKILL:
#    the NICs hold nothing afterwards and no page stays pinned;
# 5. NIC 0 unbound under a live context and a process holding QPs, CQs and MRs: the driver
#    destroys them on the NIC, the context gets EIO and closes, rebind gives the device back.
# Each stage prints its time. The same test runs on the default kernel too (a minute).
# nics: 2
# debug: core
# timeout: 900
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/verbs-procs.sh
source $P/pins.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
D=/sys/bus/pci/drivers/ordma
nic0=0000:00:06.0
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
empty() {
	local n
	for n in 0 1; do
		[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "$1: NIC $n still holds $(objects $n)"
	done
}
T0=$SECONDS
stage() { echo "== $* ($((SECONDS - T0)) s)"; }
pins0=$(pins)

stage "1. objects: raw uverbs"
out=$(python3 $P/uverbs_raw.py ordma0) || { echo "$out"; fail "uverbs_raw.py"; }
echo "$out" | tail -n 3
stage "1. CQs and QPs through the state machine"
python3 $P/verbs_cq_qp.py cq states >/tmp/cqqp.out 2>&1 || { cat /tmp/cqqp.out; fail "verbs_cq_qp.py cq states"; }
stage "1. MRs: 4 KiB pages, dma-buf"
[ -e /dev/udmabuf ] || fail "no /dev/udmabuf in the guest"
python3 $P/verbs_mr.py basic dmabuf >/tmp/mr.out 2>&1 || { cat /tmp/mr.out; fail "verbs_mr.py basic dmabuf"; }
empty "after the object checks"

stage "2. RC data, CQ resize, rereg, memory windows, the extended verbs (ordma0 -> ordma1)"
$VD --dev ordma0 --dev2 ordma1 transfers cq-resize rereg mw ex || fail "ordma-verbs-data transfers cq-resize rereg mw ex"
stage "2. dma-buf memory"
$VD --dev ordma0 --dev2 ordma1 --mem dmabuf transfers || fail "ordma-verbs-data --mem dmabuf transfers"
stage "2. SRQs"
$VD --dev ordma0 srq srq-resize || fail "ordma-verbs-data srq srq-resize"
stage "2. UC, UD, atomics"
$VD --dev ordma0 --dev2 ordma1 uc ud atomics || fail "ordma-verbs-data uc ud atomics"
empty "after the data checks"

stage "3. a per-QP counter"
rdma statistic qp set link ordma0/1 auto type on || fail "rdma statistic qp set auto"
rm -f /tmp/qpc.in && mkfifo /tmp/qpc.in
$VD --dev ordma0 --dev2 ordma1 sends-hold=5 </tmp/qpc.in >/tmp/qpc.out 2>&1 &
sender=$!
exec 3>/tmp/qpc.in
for _ in $(seq 600); do grep -q '^holding' /tmp/qpc.out && break; sleep 0.1; done
grep -q '^holding' /tmp/qpc.out || { cat /tmp/qpc.out; fail "sends-hold did not start"; }
qa=$(awk '/^holding/ { print $3 }' /tmp/qpc.out)
sends=$(rdma -j statistic qp show link ordma0/1 | python3 -c '
import json, sys
for e in json.load(sys.stdin):
    if int(sys.argv[1]) in [int(q) for q in e.get("lqpn", [])]:
        print(e.get("rdma_sends"))' "$qa")
[ "$sends" = 5 ] || { rdma statistic qp show link ordma0/1; fail "QP $qa's counter: rdma_sends '$sends', not 5"; }
exec 3>&-
wait $sender || { cat /tmp/qpc.out; fail "sends-hold failed"; }
[ -z "$(rdma -j statistic qp show link ordma0/1 | python3 -c 'import json,sys; print(json.load(sys.stdin) or "")')" ] ||
	fail "a counter outlives its QP: $(rdma statistic qp show link ordma0/1)"
rdma statistic qp set link ordma0/1 auto off || fail "rdma statistic qp set auto off"
echo "ok: QP $qa's counter counted its 5 SENDs and went with it"

stage "4. a process killed holding objects"
$VD --dev ordma0 --dev2 ordma1 ud-hold >/tmp/hold.out 2>&1 &
holder=$!
for _ in $(seq 600); do grep -q '^holding' /tmp/hold.out && break; sleep 0.1; done
grep -q '^holding' /tmp/hold.out || { cat /tmp/hold.out; fail "ud-hold did not start"; }
echo "held: NIC 0 $(objects 0), NIC 1 $(objects 1)"
[ "$(objects 0)" != "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the holder holds nothing on NIC 0"
kill -KILL $holder
wait $holder 2>/dev/null || true
for _ in $(seq 100); do [ "$(objects 0)$(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0pds=0 mrs=0 cqs=0 qps=0" ] && break; sleep 0.1; done
empty "after SIGKILL of the holder"
# Exactly none left; a pin of 9p's zero-copy I/O (an exec from the root) may be in flight
# for a moment: looked at again for up to 5 s (2 such pages failed it once, 8 December).
for _ in $(seq 50); do [ $(($(pins) - pins0)) -le 0 ] && break; sleep 0.1; done
[ $(($(pins) - pins0)) -le 0 ] || fail "$(($(pins) - pins0)) pages still pinned after the holder's death"

stage "5. unbind under a live context and held objects"
ibdev() { ls "/sys/bus/pci/devices/$1/infiniband" 2>/dev/null; }
dev0=$(ibdev $nic0)
spawn A "$dev0" 2
echo "A: $(report A)"
python3 $P/verbs_cq_qp.py hold >/tmp/cqhold.out 2>&1 &
cqholder=$!
for _ in $(seq 300); do grep -q holding /tmp/cqhold.out && break; sleep 0.1; done
grep -q holding /tmp/cqhold.out || { cat /tmp/cqhold.out; fail "the CQ/QP holder did not start"; }
timeout 60 sh -c "echo $nic0 >$D/unbind" || fail "unbind under a live context failed or hung"
[ -z "$(ibdev $nic0)" ] || fail "$dev0 still registered after unbind"
[ "$(objects 0)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC 0 still holds $(objects 0) after unbind"
kill $cqholder
wait $cqholder 2>/dev/null || true
tell A after-remove
grep -qx 'alloc_pd errno 5' /tmp/A.out || fail "A: ALLOC_PD after unbind is not EIO: $(cat /tmp/A.out)"
grep -qx closed /tmp/A.out || fail "A did not close cleanly"
echo $nic0 >$D/bind
dev0=$(ibdev $nic0)
[ -n "$dev0" ] || fail "no ib_device after rebind"
$VD --dev ordma0 --dev2 ordma1 many >/tmp/many.out 2>&1 || { tail /tmp/many.out; fail "data after rebind"; }
empty "at the end"
[ $(($(pins) - pins0)) -le 0 ] || fail "$(($(pins) - pins0)) pages still pinned at the end"
stage "done"
echo "PASS: debug-core"
