#!/bin/bash
# VM test: a doorbell page whose queues are still on the NIC is never handed out again.
# A process holds a CQ and a QP on its context's doorbell page (raw uverbs,
# qemu-test/progs/uverbs_raw.py); the model is told to fail every DESTROY_CQ and DESTROY_QP
# (`inject destroy-fails`) and the process is killed: its context goes, its CQ and QP stay
# on the NIC, bound to that page. Then one process opens contexts until none is left and
# arms the leaked CQ from each one's page: the NIC takes a doorbell for a queue only from
# the queue's own page, so had any context got the leaked page, its arm would be taken
# (`doorbells`); every one must be ignored as foreign (`foreign_doorbells`), and the
# contexts get every user page but that one (2046 of 2047). Unbind resets the NIC and
# releases the kept rings; after rebind all 2047 pages are handed out again.
# nics: 1
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/pins.sh
dev=0000:00:06.0
# A fault left armed would break the tests after this one in the same boot.
trap 'nic_ctl 0 inject none >/dev/null || true' EXIT
D=/sys/bus/pci/drivers/ordma
[ -e $D/$dev ] || fail "NIC not bound"
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$2"; }
status() { nic_ctl 0 status || fail "nic_ctl 0 status"; }
# `rdma resource show`'s contexts on ordma0.
contexts() { rdma resource show | sed -n 's/^[0-9]*: ordma0: .* ctx \([0-9]*\) .*/\1/p'; }
pinned0=$(pins)

python3 $P/uverbs_raw.py --hold ordma0 >/tmp/hold.out 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q '^holding' /tmp/hold.out && break; sleep 0.1; done
grep -q '^holding' /tmp/hold.out || { cat /tmp/hold.out; fail "the CQ/QP holder did not start"; }
read -r _ _ page _ cqn _ qpn </tmp/hold.out
echo "the holder's CQ $cqn and QP $qpn are on doorbell page $page"
nic_ctl 0 inject destroy-fails >/dev/null || fail "inject destroy-fails"
kill -KILL $holder
wait $holder 2>/dev/null || true
for _ in $(seq 100); do [ "$(contexts)" = 0 ] && break; sleep 0.1; done
[ "$(contexts)" = 0 ] || fail "the killed holder's context is still there: $(rdma resource show)"
nic_ctl 0 inject none >/dev/null || fail "inject none"
s=$(status)
echo "after the kill: $s"
[ "$(field cqs "$s")" = 1 ] && [ "$(field qps "$s")" = 1 ] ||
	fail "the failed destroys did not leave the CQ and the QP on the NIC"
kept=$(($(pins) - pinned0))
[ "$kept" -ge $((769 - SLACK)) ] || fail "only $kept pages pinned: the rings of queues still on the NIC were released"

before=$(status)
out=$(python3 $P/uverbs_raw.py --contexts ordma0 "$cqn") || { echo "$out"; fail "uverbs_raw.py --contexts"; }
echo "$out"
after=$(status)
pages=$(sed -n 's/^pages //p' <<<"$out")
taken=$(($(field doorbells "$after") - $(field doorbells "$before")))
foreign=$(($(field foreign_doorbells "$after") - $(field foreign_doorbells "$before")))
echo "arms of CQ $cqn: $taken taken, $foreign ignored as foreign"
[ "$taken" = 0 ] || fail "a new context drove the leaked CQ: it got doorbell page $page"
if grep -qw "$page" <<<"$pages"; then fail "doorbell page $page was handed out again"; fi
grep -qx "contexts 2046 errno ENOMEM" <<<"$out" || fail "expected 2046 contexts (every user page but $page), then ENOMEM"
[ "$foreign" = 2046 ] || fail "expected 2046 foreign arms, one per context"
echo "ok: page $page, whose CQ and QP are still on the NIC, stayed out of the pool"

echo $dev >$D/unbind
left=$(($(pins) - pinned0))
echo "after unbind: $left pages pinned"
[ "$left" -le $SLACK ] || fail "$left pages still pinned after unbind"
echo $dev >$D/bind
s=$(status)
[ "$(field cqs "$s")" = 0 ] && [ "$(field qps "$s")" = 0 ] || fail "queues left after the reset: $s"
out=$(python3 $P/uverbs_raw.py --contexts ordma0 "$cqn") || { echo "$out"; fail "uverbs_raw.py --contexts after rebind"; }
grep -qx "contexts 2047 errno ENOMEM" <<<"$out" || { echo "$out"; fail "after rebind, expected all 2047 pages"; }
grep -qw "$page" <<<"$(sed -n 's/^pages //p' <<<"$out")" || fail "page $page not handed out after rebind"
echo "ok: after unbind and rebind every page, $page too, is handed out"
rmmod ordma
echo "PASS: verbs-doorbell-kept"
