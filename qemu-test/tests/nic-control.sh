#!/bin/bash
# VM test: the NIC model's control channel while the guest runs (qemu-test/progs/
# nic-control.sh, nic_ctl). `status` answers with the link and object counts; `link down`
# makes ordma0/1 DOWN (the driver's port state follows the NIC's events, not a query), `link
# up` ACTIVE again; an unknown request and a bad one fail with an error reply; `fatal 5`
# reaches the driver as a fatal event (its verbs fail with EIO) and unbind/bind recovers.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
. /ordma/src/qemu-test/progs/nic-control.sh
dev=0000:00:06.0
# Waits up to 30 s for ordma0/1 to be in state $1 (the NIC's event, on a loaded machine).
wait_state() {
	for _ in $(seq 300); do
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
s=$(nic_ctl 0 status) || fail "status: $s"
[[ $s == "ok link=down "* ]] || fail "status after link down: $s"
echo "link down: $(rdma link show ordma0/1)"

r=$(nic_ctl 0 link up) || fail "link up: $r"
wait_state ACTIVE || fail "ordma0/1 not ACTIVE after 'link up'"
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

# A verb that needs the NIC (open ordma0, allocate a PD): "ok", or the errno name of the
# step that failed.
alloc_pd() {
	python3 - <<'PY'
import ctypes, errno, sys
sys.path.insert(0, "/ordma/src/qemu-test/progs")
from ibv import ibv
n = ctypes.c_int()
devs = ibv.ibv_get_device_list(ctypes.byref(n))
dev = next(devs[i] for i in range(n.value) if ibv.ibv_get_device_name(devs[i]) == b"ordma0")
ctx = ibv.ibv_open_device(dev)
pd = ctx and ibv.ibv_alloc_pd(ctx)
print("ok" if pd else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
PY
}
r=$(alloc_pd)
[ "$r" = ok ] || fail "ibv_alloc_pd on the working NIC: $r"

# fatal CODE: the driver takes the fatal event (its verbs fail with EIO); unbind/bind resets
# the NIC.
r=$(nic_ctl 0 fatal 5) || fail "fatal 5: $r"
for _ in $(seq 300); do
	r=$(alloc_pd)
	[ "$r" = ok ] || break
	sleep 0.2
done
echo "ibv_alloc_pd after 'fatal 5': $r"
[ "$r" = EIO ] || fail "the driver did not take the fatal event: ibv_alloc_pd gives $r, not EIO"
s=$(nic_ctl 0 status) || fail "status: $s"
[[ $s == *" fatal=1 error=5 "* ]] || fail "status after fatal: $s"
D=/sys/bus/pci/drivers/ordma
echo $dev >$D/unbind
echo $dev >$D/bind
s=$(nic_ctl 0 status) || fail "status: $s"
[[ $s == "ok link=up enabled=1 fatal=0 error=0 "* ]] || fail "status after rebind: $s"
echo "fatal 5, rebind: $s"
r=$(alloc_pd)
[ "$r" = ok ] || fail "ibv_alloc_pd on the rebound NIC: $r"
echo "PASS: nic-control"
