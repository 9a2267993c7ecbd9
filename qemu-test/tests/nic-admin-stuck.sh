#!/bin/bash
# VM test: an admin queue that stops answering is a failed NIC. The model is told to
# process no admin command (`inject admin-stuck`: doorbells are taken, nothing completes,
# `status` counts them in `admin_pending`).
# 1. A process registers a 1 MiB MR: CREATE_MR times out (ETIMEDOUT, the 5 s admin
#    timeout), alone (nic-admin-timeout: one command's timeout is not the NIC's failure).
#    A second process's ALLOC_PD times out too, 10 s after the NIC last answered anything:
#    the driver then treats the NIC as failed: a process holding a context and a PD
#    gets IBV_EVENT_DEVICE_FATAL (ibv_get_async_event) and its next verb fails with EIO;
#    so does a new process's, and no later command reaches the NIC (once the model is
#    unstuck, anything rung would run: `commands` stays, `admin_pending` stays 2). The NIC
#    may have made the MR, so its pages stay pinned after the process is killed, until
#    unbind stops the NIC; unbind and rebind are clean and the NIC works again.
# 2. The same with the NIC dying while CREATE_MR waits (`inject admin-dies`: the doorbell
#    makes it fatal): EIO, and the MR's pages stay pinned until unbind too. rmmod is
#    clean, nothing pinned.
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
# Starts `verbs_mr.py hold 0 --then-reg` (one 1 MiB MR once /tmp/reg-now exists) into $1.
start_reg() {
	rm -f /tmp/reg-now
	python3 $P/verbs_mr.py hold 0 --then-reg /tmp/reg-now >"$1" 2>&1 &
	reg=$!
	for _ in $(seq 300); do grep -q holding "$1" && break; sleep 0.1; done
	grep -q holding "$1" || { cat "$1"; fail "the registering process did not start"; }
}
# Waits (bounded) for the registration's answer in $1.
reg_answer() {
	for _ in $(seq 600); do grep -q '^reg ' "$1" && break; sleep 0.1; done
	grep '^reg ' "$1" || { cat "$1"; fail "the registration did not return"; }
}
pinned0=$(pins)

# 1. A command the NIC never answers. (The context holder waits for the event at most
# 300 s: processes and control requests are slow on the debug kernel.)
start_reg /tmp/reg.out
python3 $P/async_events.py ordma0 --pd --then-alloc-pd --wait 300 "local catastrophic error" >/tmp/ev.out 2>&1 &
waiter=$!
for _ in $(seq 600); do grep -q '^ready' /tmp/ev.out && break; sleep 0.1; done
grep -q '^ready' /tmp/ev.out || { cat /tmp/ev.out; fail "the verbs process did not open ordma0"; }
commands0=$(field commands "$(status)")
nic_ctl 0 inject admin-stuck >/dev/null || fail "inject admin-stuck"
touch /tmp/reg-now
answer=$(reg_answer /tmp/reg.out)
echo "registering with the admin queue stuck: $answer"
grep -q '^reg ETIMEDOUT ' <<<"$answer" || fail "CREATE_MR on a stuck admin queue: expected ETIMEDOUT"
dmesg | grep "treated as failed" && fail "one command's timeout took the NIC for failed"
python3 $P/async_events.py ordma0 --then-alloc-pd >/tmp/ev1.out 2>&1 || { cat /tmp/ev1.out; fail "a second process"; }
cat /tmp/ev1.out
grep -q '^alloc_pd errno ETIMEDOUT ' /tmp/ev1.out || fail "ALLOC_PD on a NIC silent for 10 s: expected ETIMEDOUT"
dmesg | grep -q "answered no command for 10 s: the NIC is treated as failed" ||
	fail "a NIC silent for 10 s was not taken for failed"
rc=0
wait $waiter || rc=$?
cat /tmp/ev.out
[ $rc = 0 ] || fail "the context holder did not see what it expected (exit $rc)"
grep -q '^event local catastrophic error' /tmp/ev.out || fail "no IBV_EVENT_DEVICE_FATAL"
grep -q '^alloc_pd errno EIO ' /tmp/ev.out || fail "ibv_alloc_pd after the timeout did not fail with EIO"
kill -KILL $reg
wait $reg 2>/dev/null || true
kept=$(($(pins) - pinned0))
echo "the registering process killed: $kept pages still pinned"
[ "$kept" -ge $((256 - SLACK)) ] || fail "the unanswered CREATE_MR's memory was released while the NIC may use it"
nic_ctl 0 inject none >/dev/null || fail "inject none"
python3 $P/async_events.py ordma0 --then-alloc-pd >/tmp/ev2.out 2>&1 || { cat /tmp/ev2.out; fail "a new process"; }
cat /tmp/ev2.out
grep -q '^alloc_pd errno EIO ' /tmp/ev2.out || fail "a new process's ibv_alloc_pd did not fail with EIO"
s=$(status)
echo "NIC: $s"
[ "$(field commands "$s")" = "$commands0" ] && [ "$(field admin_pending "$s")" = 2 ] ||
	fail "a command reached the NIC after it was treated as failed"
echo "ok: after the timeout, IBV_EVENT_DEVICE_FATAL, then EIO with no command sent"
echo $dev >$D/unbind
left=$(($(pins) - pinned0))
echo "after unbind: $left pages pinned"
[ "$left" -le $SLACK ] || fail "$left pages still pinned after unbind"
echo $dev >$D/bind
python3 $P/async_events.py ordma0 --pd >/tmp/ev3.out 2>&1 || { cat /tmp/ev3.out; fail "the rebound NIC"; }
echo "ok: unbind released the MR's pages; the rebound NIC works"

# 2. The NIC dies while a command waits (`inject admin-dies`: the next admin doorbell
# makes it fatal before it processes anything).
start_reg /tmp/reg2.out
nic_ctl 0 inject admin-dies >/dev/null || fail "inject admin-dies"
touch /tmp/reg-now
answer=$(reg_answer /tmp/reg2.out)
echo "registering when the NIC died: $answer"
grep -q '^reg EIO ' <<<"$answer" || fail "CREATE_MR on a NIC that died: expected EIO"
kill -KILL $reg
wait $reg 2>/dev/null || true
kept=$(($(pins) - pinned0))
echo "the registering process killed: $kept pages still pinned"
[ "$kept" -ge $((256 - SLACK)) ] || fail "the MR's memory was released when the NIC died mid-command"
nic_ctl 0 inject none >/dev/null || fail "inject none"
[ "$(field fatal "$(status)")" = 1 ] || fail "the NIC did not die"
echo $dev >$D/unbind
left=$(($(pins) - pinned0))
echo "after unbind: $left pages pinned"
[ "$left" -le $SLACK ] || fail "$left pages still pinned after unbind"
echo $dev >$D/bind
rmmod ordma
echo "PASS: nic-admin-stuck"
