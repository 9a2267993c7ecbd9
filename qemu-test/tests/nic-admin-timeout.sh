#!/bin/bash
# VM test (issue 36, item 3): an admin command the NIC does not answer fails alone; the NIC
# is not taken for failed while it answers others. The model loses the next command's
# completion (`inject admin-lost`: the command runs, its answer is never written, the fault
# disarms itself). A process's 1 MiB registration then fails with ETIMEDOUT after the 5 s
# timeout and the driver warns once; the NIC serves the rest: a process holding a context
# and a PD gets no IBV_EVENT_DEVICE_FATAL (in 15 s), a new process's data run
# (ordma-verbs-data `events`: its objects, a WRITE woken by its completion event) passes. The lost command's memory stays pinned after its process is
# killed (the NIC may have made the MR), until unbind stops the NIC; unbind and rebind
# are clean.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/pins.sh
VD=/ordma/payload/ordma-verbs-data
dev=0000:00:06.0
D=/sys/bus/pci/drivers/ordma
trap 'nic_ctl 0 inject none >/dev/null || true' EXIT
pinned0=$(pins)

rm -f /tmp/reg-now
python3 $P/verbs_mr.py hold 0 --then-reg /tmp/reg-now >/tmp/reg.out 2>&1 &
reg=$!
python3 $P/async_events.py ordma0 --pd --then-alloc-pd --wait 15 "local catastrophic error" >/tmp/ev.out 2>&1 &
holder=$!
for f in /tmp/reg.out:holding /tmp/ev.out:ready; do
	for _ in $(seq 300); do grep -q "${f#*:}" "${f%%:*}" && break; sleep 0.1; done
	grep -q "${f#*:}" "${f%%:*}" || { cat "${f%%:*}"; fail "a process did not start (${f%%:*})"; }
done
nic_ctl 0 inject admin-lost >/dev/null || fail "inject admin-lost"
touch /tmp/reg-now
for _ in $(seq 300); do grep -q '^reg ' /tmp/reg.out && break; sleep 0.1; done
answer=$(grep '^reg ' /tmp/reg.out) || { cat /tmp/reg.out; fail "the registration did not return"; }
echo "registering with its answer lost: $answer"
grep -q '^reg ETIMEDOUT ' <<<"$answer" || fail "CREATE_MR with its answer lost: expected ETIMEDOUT"
dmesg | grep -q "admin command 0x5 timed out (5 s): it fails with ETIMEDOUT" ||
	fail "no warning of the timed-out command"

# The NIC serves the rest: no DEVICE_FATAL for the holder (it waits 15 s for one and must
# not see it), a new process's WRITE and its event.
$VD events >/tmp/events.out 2>&1 || { cat /tmp/events.out; fail "a data run after the timeout"; }
grep '^ok' /tmp/events.out
rc=0
wait $holder || rc=$?
cat /tmp/ev.out
[ $rc != 0 ] && grep -q "no event within 15 s" /tmp/ev.out ||
	fail "the context holder saw an event after one command timed out"
dmesg | grep -E "treated as failed|stopped with a fatal error" && fail "the NIC was taken for failed"
s=$(nic_ctl 0 status)
[[ " $s " == *" fatal=0 "* ]] || fail "the NIC went fatal: $s"
echo "ok: one command timed out alone; the NIC served the next ones"

kill -KILL $reg
wait $reg 2>/dev/null || true
kept=$(($(pins) - pinned0))
echo "the registering process killed: $kept pages still pinned"
[ "$kept" -ge $((256 - SLACK)) ] || fail "the lost CREATE_MR's memory was released while the NIC may use it"
echo $dev >$D/unbind
left=$(($(pins) - pinned0))
echo "after unbind: $left pages pinned"
[ "$left" -le $SLACK ] || fail "$left pages still pinned after unbind"
echo $dev >$D/bind
python3 $P/async_events.py ordma0 --pd >/tmp/ev3.out 2>&1 || { cat /tmp/ev3.out; fail "the rebound NIC"; }
echo "PASS: nic-admin-timeout"
