#!/bin/bash
# VM test: port events reach user space. While a process holds a context, the NIC model's
# link goes down and up (its control channel, qemu-test/progs/nic-control.sh): the process
# receives IBV_EVENT_PORT_ERR then IBV_EVENT_PORT_ACTIVE from ibv_get_async_event, and
# `rdma link` and `ibv_devinfo` follow the port's state.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh

# wait_port STATE: rdma link shows ordma0/1 in STATE (ACTIVE or DOWN) within 30 s.
wait_port() {
	for _ in $(seq 300); do
		rdma link show ordma0/1 | grep -q "state $1 " && return
		sleep 0.1
	done
	rdma link show ordma0/1
	fail "ordma0/1 did not become $1"
}

wait_port ACTIVE
python3 $P/async_events.py ordma0 "port error" "port active" >/tmp/ev.out 2>&1 &
waiter=$!
for _ in $(seq 300); do grep -q '^ready' /tmp/ev.out && break; sleep 0.1; done
grep -q '^ready' /tmp/ev.out || { cat /tmp/ev.out; fail "the verbs process did not open ordma0"; }

nic_ctl 0 link down || fail "the model refused 'link down'"
wait_port DOWN
ibv_devinfo -d ordma0 | grep -q 'state:.*PORT_DOWN' || fail "ibv_devinfo does not show the port DOWN"
echo "ok: link down: rdma link and ibv_devinfo show DOWN"
# The process has the PORT_ERR before the link comes back: the events come in order.
for _ in $(seq 300); do grep -q '^event port error' /tmp/ev.out && break; sleep 0.1; done
grep -q '^event port error' /tmp/ev.out || { cat /tmp/ev.out; fail "no IBV_EVENT_PORT_ERR"; }

nic_ctl 0 link up || fail "the model refused 'link up'"
wait_port ACTIVE
ibv_devinfo -d ordma0 | grep -q 'state:.*PORT_ACTIVE' || fail "ibv_devinfo does not show the port ACTIVE"
echo "ok: link up: rdma link and ibv_devinfo show ACTIVE"
rc=0
wait $waiter || rc=$?
cat /tmp/ev.out
[ $rc = 0 ] || fail "the verbs process did not get PORT_ERR then PORT_ACTIVE (exit $rc)"
[ "$(grep -c '^event ' /tmp/ev.out)" = 2 ] || fail "expected exactly two events"
echo "PASS: verbs-async-events"
