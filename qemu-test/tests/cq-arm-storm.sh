#!/bin/bash
# VM test (issue 36, item 2): completion events that cannot be lost or pile up, whatever
# another user does. Three unprivileged processes each hold one unpolled completion on an
# armed CQ and re-arm it in a loop (`ordma-verbs-data arm-storm`: ibv_req_notify_cq, one
# CQ-arm doorbell each, for 20 s; 60 s in `make test-full`). The NIC posts a completion event
# only for news, so none of them may receive a single event from its storm, and the held
# completion is still there after it. Meanwhile a fourth unprivileged user
# (`cq-wakeups`) blocks in ibv_get_cq_event 100 times (400 in full), each woken by its WRITE
# (bytes checked), registering an MR every tenth round: every wakeup arrives, every
# registration succeeds. The NIC is never declared failed (no admin timeout, no fatal
# error), its event queue drops nothing, and it counted the storms' arms as coalesced.
# nics: 1
# timeout: 400
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
secs=20 rounds=100
[ "${ORDMA_TIER:-}" != full ] || secs=60 rounds=400
# An ordinary user; its MRs pin more than the default RLIMIT_MEMLOCK, which root raises.
as_user() {
	bash -c 'ulimit -l unlimited && exec setpriv --reuid=nobody --regid=65534 --clear-groups --inh-caps=-all "$@"' \
		as_user "$@"
}
stat_of() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$2"; }

s0=$(nic_ctl 0 status)
pids=()
for i in 1 2 3; do
	as_user $VD arm-storm=$secs >/tmp/storm$i.out 2>&1 &
	pids+=($!)
done
for i in 1 2 3; do
	for _ in $(seq 600); do grep -q "arming for" /tmp/storm$i.out && break; sleep 0.1; done
	grep -q "arming for" /tmp/storm$i.out || { cat /tmp/storm$i.out; fail "storm $i did not start"; }
done
t0=$SECONDS
rc=0
as_user $VD cq-wakeups=$rounds >/tmp/victim.out 2>&1 || rc=$?
victim_s=$((SECONDS - t0))
storming=0
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && storming=$((storming + 1)); done
cat /tmp/victim.out
[ "$rc" = 0 ] || fail "the user beside the storms failed (exit $rc)"
echo "ok: $rounds wakeups and registrations beside 3 arm storms in ${victim_s} s ($storming storm(s) still running at its end)"
arms=0
for i in 1 2 3; do
	rc=0
	wait "${pids[$((i - 1))]}" || rc=$?
	cat /tmp/storm$i.out
	[ "$rc" = 0 ] || fail "storm $i failed (exit $rc)"
	n=$(sed -n 's/^arm-storm: \([0-9]*\) arms.*/\1/p' /tmp/storm$i.out)
	arms=$((arms + n))
done
s1=$(nic_ctl 0 status)
dmesg | grep -E "timed out|treated as failed|fatal error" && fail "the NIC was declared failed or timed out"
[[ " $s1 " == *" fatal=0 "* ]] || fail "the NIC went fatal: $s1"
dropped=$(($(stat_of events_dropped "$s1") - $(stat_of events_dropped "$s0")))
coalesced=$(($(stat_of events_coalesced "$s1") - $(stat_of events_coalesced "$s0")))
[ "$dropped" = 0 ] || fail "the event queue dropped $dropped event(s)"
# Every arm found the held completion and nothing new: all but the first three coalesced.
[ "$coalesced" -ge $((arms - 3)) ] || fail "$arms arms, only $coalesced coalesced by the NIC"
echo "ok: $arms arms from 3 storms, $coalesced coalesced by the NIC, no event dropped, the NIC healthy"
echo "PASS: cq-arm-storm"
