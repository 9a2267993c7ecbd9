#!/bin/bash
# VM test: probe failures at three stages, each from a NIC model told to misbehave: an
# interface version the driver does not speak (before any allocation), a reset that never
# completes, and a QUERY_DEVICE that fails (after queues, DMA memory and MSI-X are set up,
# so the driver must stop the NIC and give everything back). Each gives a clear error, no
# NIC stays bound, no interrupt stays registered, rmmod is clean, no warning (harness).
# nics: 3
# run-args: --nic-args 0 "--inject bad-version"
# run-args: --nic-args 1 "--inject reset-stuck"
# run-args: --nic-args 2 "--inject query-device-error"
# debug: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
dmesg | grep 'ordma 0000' || true
expect() { dmesg | grep -q "ordma $1: $2" || fail "$1: no '$2' message"; }
expect 0000:00:06.0 "NIC interface version 2.0 is not supported (this driver speaks 1.x)"
expect 0000:00:07.0 "the NIC did not come out of reset"
expect 0000:00:08.0 "admin command 0x1 failed with status 2"
if ls /sys/bus/pci/drivers/ordma | grep -q '^0000:'; then fail "a failing NIC stayed bound"; fi
! grep -q ordma-admin /proc/interrupts || fail "an interrupt stayed registered after a failed probe"
# A second attempt fails the same way, and leaves nothing behind either.
for d in 0000:00:06.0 0000:00:07.0 0000:00:08.0; do
	if echo $d >/sys/bus/pci/drivers/ordma/bind 2>/dev/null; then fail "$d: bind succeeded"; fi
done
! grep -q ordma-admin /proc/interrupts || fail "an interrupt stayed registered after rebinding"
rmmod ordma
echo "PASS: nic-probe-failures"
