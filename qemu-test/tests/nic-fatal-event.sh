#!/bin/bash
# VM test: a fatal NIC error. A process writes an unknown command to the CONTROL register
# through the PCI resource file (the NIC must answer with FATAL + ERR_BAD_REGISTER_WRITE and
# an EVENT_FATAL). The driver logs it once (one error line) from its event interrupt, marks
# the NIC dead and tells ib_core: a process holding a context and a PD receives IBV_EVENT_DEVICE_FATAL
# ("local catastrophic error") from ibv_get_async_event, and its next verb fails at once
# with EIO (not after the 5 s admin timeout). Unbind then completes without a timeout, and
# unbind/bind resets the NIC: it works again for a new process. Another process holds a CQ
# and a QP (769 pages of rings and record) when the NIC dies and is killed after: their
# destroys cannot reach the dead NIC, so the pages stay pinned until unbind has stopped it.
# nics: 1
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
dev=0000:00:06.0
D=/sys/bus/pci/drivers/ordma
[ -e $D/$dev ] || fail "NIC not bound"
source /ordma/src/qemu-test/progs/pins.sh
pinned0=$(pins)
python3 $P/uverbs_raw.py --hold ordma0 >/tmp/hold-qp.out 2>&1 &
qp_holder=$!
for _ in $(seq 300); do grep -q holding /tmp/hold-qp.out && break; sleep 0.1; done
grep -q holding /tmp/hold-qp.out || { cat /tmp/hold-qp.out; fail "the CQ/QP holder did not start"; }

python3 $P/async_events.py ordma0 --pd --then-alloc-pd "local catastrophic error" >/tmp/ev.out 2>&1 &
waiter=$!
for _ in $(seq 300); do grep -q '^ready' /tmp/ev.out && break; sleep 0.1; done
grep -q '^ready' /tmp/ev.out || { cat /tmp/ev.out; fail "the verbs process did not open ordma0"; }

python3 - "$dev" <<'PY'
import ctypes, mmap, os, sys
fd = os.open(f"/sys/bus/pci/devices/{sys.argv[1]}/resource0", os.O_RDWR | os.O_SYNC)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
ctypes.c_uint32.from_buffer(m, 0x8).value = 99   # CONTROL: no such command
status = ctypes.c_uint32.from_buffer(m, 0x4).value
error = ctypes.c_uint32.from_buffer(m, 0xc).value
print(f"STATUS {status:#x} ERROR {error}")
sys.exit(0 if status & 4 and error == 3 else 1)
PY
rc=0
wait $waiter || rc=$?
cat /tmp/ev.out
[ $rc = 0 ] || fail "the verbs process did not see what it expected (exit $rc)"
grep -q '^event local catastrophic error' /tmp/ev.out || fail "no IBV_EVENT_DEVICE_FATAL"
ms=$(sed -n 's/^alloc_pd errno EIO \([0-9]*\) ms$/\1/p' /tmp/ev.out)
[ -n "$ms" ] || fail "ibv_alloc_pd after the fatal error did not fail with EIO"
# At once: well under the 5 s admin timeout a live-but-silent NIC would cost.
[ "$ms" -lt 2500 ] || fail "ibv_alloc_pd took $ms ms to fail: it waited for a timeout"
echo "ok: after FATAL, ibv_alloc_pd failed with EIO in $ms ms"

# Told once: one error line from the driver for the fatal error (whatever its words), not
# one per waiter or per failed verb.
errs=$(dmesg -l err | grep -c "ordma $dev: " || true)
dmesg -l err | grep "ordma $dev: " || true
[ "$errs" = 1 ] || fail "the driver logged $errs error lines for one fatal error, want 1"

kill -KILL $qp_holder
wait $qp_holder 2>/dev/null || true
kept=$(($(pins) - pinned0))
echo "the CQ/QP holder killed on the dead NIC: $kept pages still pinned"
[ "$kept" -ge $((769 - SLACK)) ] || fail "the rings were released while the dead NIC could still reach them"

t0=$(date +%s%N)
echo $dev >$D/unbind
echo "unbind of the dead NIC took $((($(date +%s%N) - t0) / 1000000)) ms"
# The CQ's and QP's memory was released at unbind.
left=$(($(pins) - pinned0))
echo "after unbind: $left pages pinned"
[ "$left" -le $SLACK ] || fail "$left pages still pinned after unbind"
echo $dev >$D/bind
source $P/nic-control.sh
s=$(nic_ctl 0 status) || fail "status: $s"
echo "after rebind: $s"
[[ $s == "ok link=up enabled=1 fatal=0 error=0 "* ]] || fail "the NIC did not come back after rebind"
port=(/sys/bus/pci/devices/$dev/infiniband/*/ports/1/state)
for _ in $(seq 300); do [ "$(cat "${port[0]}")" = "4: ACTIVE" ] && break; sleep 0.1; done
[ "$(cat "${port[0]}")" = "4: ACTIVE" ] || fail "the port is not ACTIVE after rebind (its PORT_ACTIVE event)"
python3 $P/async_events.py ordma0 --pd >/tmp/ev2.out 2>&1 || { cat /tmp/ev2.out; fail "a new process cannot use the rebound NIC"; }
grep -q '^done' /tmp/ev2.out || fail "a new process cannot use the rebound NIC"
echo "ok: rebound NIC works for a new process"
echo "PASS: nic-fatal-event"
