#!/bin/bash
# VM test: the driver's interrupt-context logging is rate-limited. The NIC model posts 150
# events of a kind the driver does not know (its control channel's `event`), in three
# bursts: the driver consumes them all but logs at most 10 per 5 s window, and when it logs
# again it says how many it suppressed; every event is accounted for (logged or counted
# as suppressed). The NIC keeps working: a link change still reaches ib_core.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
dev=0000:00:06.0
msg="ordma $dev: unknown event type 200 ignored"
dropped() { nic_ctl 0 status | sed -n 's/.* events_dropped=\([0-9]*\).*/\1/p'; }
dropped0=$(dropped)

# Waits (up to 60 s) until the driver has consumed every event the NIC wrote (the NIC's
# producer index minus the consumer index the driver wrote to EQ_DB).
consumed() {
	local s
	for _ in $(seq 300); do
		s=$(nic_ctl 0 status) || fail "status: $s"
		[[ " $s " == *" events_unread=0 "* ]] && return 0
		sleep 0.2
	done
	fail "the driver did not consume the events: $s"
}

t0=$(date +%s)
for _ in 1 2 3; do
	nic_ctl 0 event 200 7 50 >/dev/null || fail "the model refused 'event 200 7 50'"
	consumed
done
logged=$(dmesg | grep -c "$msg" || true)
# At most 10 per 5 s window: the burst's seconds span at most this many windows.
windows=$((($(date +%s) - t0) / 5 + 2))
echo "150 unknown events: $logged logged during the burst ($windows windows at most)"
[ "$logged" -ge 1 ] || fail "no unknown-event message at all"
[ "$logged" -le $((10 * windows)) ] || fail "$logged messages for 150 events: not rate-limited"
# A later event, in a new window, is logged with the count of those suppressed. The last
# window began before the last burst was consumed: 6 s from then is past its 5 s.
sleep 6
nic_ctl 0 event 200 7 >/dev/null || fail "the model refused 'event 200 7'"
consumed
dmesg | grep "ordma $dev" | tail -n 3
total=$(dmesg | grep -c "$msg" || true)
suppressed=$(dmesg | sed -n "s/.*ordma $dev: \([0-9]*\) event message(s) suppressed/\1/p" | paste -sd+ | bc)
dropped=$(($(dropped) - dropped0))
echo "logged $total, suppressed ${suppressed:-0}, dropped by the NIC ${dropped:-?}"
[ "$((total + ${suppressed:-0} + dropped))" = 151 ] ||
	fail "151 events posted, $total logged + ${suppressed:-0} suppressed + $dropped dropped"

nic_ctl 0 link down >/dev/null || fail "the model refused 'link down'"
for _ in $(seq 300); do rdma link show ordma0/1 | grep -q 'state DOWN' && break; sleep 0.1; done
rdma link show ordma0/1 | grep -q 'state DOWN' || fail "the port did not go DOWN after the flood"
nic_ctl 0 link up >/dev/null || fail "the model refused 'link up'"
echo "PASS: nic-event-flood"
