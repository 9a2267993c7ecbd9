#!/bin/bash
# VM test: a fatal NIC error reaches the driver through the event queue. A process writes
# an unknown command to the CONTROL register through the PCI resource file (the NIC must
# answer with FATAL + ERR_BAD_REGISTER_WRITE and an EVENT_FATAL); the driver logs it from
# its event interrupt; unbind/bind resets the NIC and it works again.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
dev=0000:00:06.0
D=/sys/bus/pci/drivers/ordma
[ -e $D/$dev ] || fail "NIC not bound"
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
for _ in $(seq 50); do
	dmesg | grep -q "ordma $dev: the NIC stopped with a fatal error 3" && break
	sleep 0.1
done
dmesg | grep "ordma $dev" | tail -n 3
dmesg | grep -q "ordma $dev: the NIC stopped with a fatal error 3" || fail "no fatal-error event logged"
echo $dev >$D/unbind
echo $dev >$D/bind
[ "$(dmesg | grep -c "ordma $dev: port 1 ACTIVE")" = 2 ] || fail "the NIC did not come back after rebind"
echo "PASS: nic-fatal-event"
