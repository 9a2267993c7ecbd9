#!/bin/bash
# VM test: the NIC model's control channel while the guest runs (qemu-test/progs/
# nic-control.sh, nic_ctl). `status` answers with the link and object counts; `link down`
# makes ordma0/1 DOWN (the driver logs "port 1 DOWN" from the event), `link up` ACTIVE
# again; an unknown request and a bad one fail with an error reply; `fatal 5` reaches the
# driver as a fatal event and unbind/bind recovers.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
. /ordma/src/qemu-test/progs/nic-control.sh
dev=0000:00:06.0

# Waits up to 5 s for ordma0/1 to be in state $1.
wait_state() {
	for _ in $(seq 50); do
		rdma link show ordma0/1 | grep -q "state $1 " && return 0
		sleep 0.1
	done
	rdma link show ordma0/1
	return 1
}

s=$(nic_ctl 0 status) || fail "status: $s"
echo "status: $s"
[[ $s == "ok link=up enabled=1 fatal=0 "* ]] || fail "status before: $s"
[[ $s == *" bme=1 "* ]] || fail "bus mastering not on: $s"
wait_state ACTIVE || fail "ordma0/1 not ACTIVE at start"

r=$(nic_ctl 0 link down) || fail "link down: $r"
wait_state DOWN || fail "ordma0/1 not DOWN after 'link down'"
for _ in $(seq 50); do
	dmesg | grep -q "ordma $dev: port 1 DOWN" && break
	sleep 0.1
done
dmesg | grep -q "ordma $dev: port 1 DOWN" || fail "no 'port 1 DOWN' in dmesg"
s=$(nic_ctl 0 status) || fail "status: $s"
[[ $s == "ok link=down "* ]] || fail "status after link down: $s"
echo "link down: $(rdma link show ordma0/1)"

r=$(nic_ctl 0 link up) || fail "link up: $r"
wait_state ACTIVE || fail "ordma0/1 not ACTIVE after 'link up'"
[ "$(dmesg | grep -c "ordma $dev: port 1 ACTIVE")" = 2 ] || fail "expected a second 'port 1 ACTIVE'"
echo "link up: $(rdma link show ordma0/1)"

if r=$(nic_ctl 0 reboot-the-nic); then fail "an unknown request succeeded: $r"; fi
[[ $r == "error: "* ]] || fail "unknown request: no error reply: $r"
echo "unknown request: $r"
if r=$(nic_ctl 0 fatal 0); then fail "'fatal 0' succeeded: $r"; fi
if r=$(nic_ctl 7 status); then fail "NIC 7 (there is none) answered: $r"; fi
echo "no NIC 7: $r"

s=$(nic_ctl 0 status) || fail "status: $s"
[[ $s == "ok link=up enabled=1 fatal=0 "* ]] || fail "status after: $s"
[[ $s == *" bad_doorbells=0 "* ]] || fail "bad doorbells: $s"
echo "status: $s"

# fatal CODE: the driver logs the fatal event; unbind/bind resets the NIC.
r=$(nic_ctl 0 fatal 5) || fail "fatal 5: $r"
for _ in $(seq 50); do
	dmesg | grep -q "ordma $dev: the NIC stopped with a fatal error 5" && break
	sleep 0.1
done
dmesg | grep -q "ordma $dev: the NIC stopped with a fatal error 5" || fail "no fatal error 5 in dmesg"
s=$(nic_ctl 0 status) || fail "status: $s"
[[ $s == *" fatal=1 error=5 "* ]] || fail "status after fatal: $s"
D=/sys/bus/pci/drivers/ordma
echo $dev >$D/unbind
echo $dev >$D/bind
s=$(nic_ctl 0 status) || fail "status: $s"
[[ $s == "ok link=up enabled=1 fatal=0 error=0 "* ]] || fail "status after rebind: $s"
echo "fatal 5, rebind: $s"
echo "PASS: nic-control"
