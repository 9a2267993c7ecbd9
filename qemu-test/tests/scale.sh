#!/bin/bash
# VM test: the scale of a real NIC (issue 20, item 5). `ordma-verbs-data scale` (scale.c) on
# ordma0: 2047 contexts at once (one per doorbell page; at least 1024 required), the 2048th
# ENOMEM, the last of them (doorbell page 2047) with an SRQ and a QP that moves a SEND and a
# WRITE, bytes checked; then PDs, MRs, CQs and QPs each created up to the limit ibv_query_device reports
# (16384, 65536, 3072, 16384), the next ENOMEM, one destroyed and created again, all
# destroyed; the rates of creates and destroys printed. In `make test-full`, the same objects
# on soft-RoCE (rxe0, `scale=2000`: its limits are too large to reach here) for the rates
# beside it (performance.md). Before all that, a process holding every doorbell page's context, each
# with a PD, a CQ, an MR, a QP (half of them extended) and a memory window (half of type 2),
# is killed with SIGKILL: the NIC
# then holds nothing, every page it pinned is released, and the contexts above open again
# on the pages it had. ordma0 holds nothing afterwards; ibv_devinfo -v reports the limits.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/pins.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"

info=$(ibv_devinfo -v -d ordma0)
for a in "max_qp:.*16384" "max_cq:.*3072" "max_mr:.*65536" "max_pd:.*16384" "max_mw:.*65536"; do
	grep -q "$a" <<<"$info" || fail "ibv_devinfo -v does not report $a"
done
objects() { nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*\| mws=[0-9]*' | tr -d '\n'; }
pins0=$(pins)
$VD --dev ordma0 scale-hold >/tmp/hold.out 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q holding /tmp/hold.out && break; sleep 0.1; done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "scale-hold did not get to hold its contexts"; }
cat /tmp/hold.out
n=$(sed -n 's/^holding \([0-9]*\) contexts.*/\1/p' /tmp/hold.out)
held=$(objects)
[ "$held" = "pds=$n mrs=$n cqs=$n qps=$n mws=$n" ] || fail "the holder of $n contexts should have $n of each on the NIC: $held"
pinned=$(($(pins) - pins0))
[ "$pinned" -ge "$n" ] || fail "the holder pinned $pinned pages, at least one per MR ($n) expected"
t0=$(date +%s.%N) t_kill=$SECONDS
kill -KILL $pid
wait $pid 2>/dev/null || true
# Up to 2 minutes (each status query is a round trip to the model; the cleanup took 9-25 s).
until [ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0 mws=0" ] || [ $SECONDS -ge $((t_kill + 120)) ]; do sleep 0.5; done
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0 mws=0" ] || fail "after SIGKILL the NIC still holds $(objects)"
left=$(($(pins) - pins0))
[ "$left" -le "$SLACK" ] || fail "after SIGKILL $left pages are still pinned ($pinned were)"
echo "ok: a process killed holding $n contexts ($held, $pinned pages pinned) left nothing on the NIC and $left pages pinned, cleaned up in $(echo "$(date +%s.%N) - $t0" | bc) s"
$VD --dev ordma0 scale || fail "ordma-verbs-data scale on ordma0"
# soft-RoCE's rates beside ordma's (performance.md): `make test-full` only.
if [ "${ORDMA_TIER:-}" = full ]; then
	modprobe rdma_rxe
	nd=$(ip -br link | awk '$1 != "lo" { print $1; exit }')
	ip link set "$nd" up
	rdma link add rxe0 type rxe netdev "$nd"
	$VD --dev rxe0 scale=2000 || fail "ordma-verbs-data scale=2000 on rxe0"
	rdma link del rxe0
fi
objects=$(nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*')
[ "$objects" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $objects"
echo "PASS: scale"
