#!/bin/bash
# VM test: probe failures at three stages, each from a NIC model told to misbehave: an
# interface version the driver does not speak (before any allocation: ENODEV, the NIC never
# enabled), a reset that never completes (ETIMEDOUT), and a QUERY_DEVICE that fails (after
# queues, DMA memory and MSI-X are set up: EIO, and the driver must stop the NIC and give
# everything back). What each model saw is read from its control channel: no NIC is left
# enabled or bus-mastering, only NIC 2 got a command (its QUERY_DEVICE, refused). No NIC
# stays bound, no interrupt stays registered, a second bind fails the same way, rmmod is
# clean, no warning (harness).
# nics: 3
# run-args: --nic-args 0 "--inject bad-version"
# run-args: --nic-args 1 "--inject reset-stuck"
# run-args: --nic-args 2 "--inject query-device-error"
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
source /ordma/src/qemu-test/progs/pci-bind.sh
if ls /sys/bus/pci/drivers/ordma | grep -q '^0000:'; then fail "a failing NIC stayed bound"; fi
! grep -q ordma-admin /proc/interrupts || fail "an interrupt stayed registered after a failed probe"
# NIC I's model: enabled=0 (stopped: its queues off), bme=0 (bus mastering off again: the
# failed probe undid it) and BAD bad commands.
model() {
	local s
	s=$(nic_ctl "$1" status) || fail "NIC $1: no status"
	echo "NIC $1: $s"
	[[ " $s " == *" enabled=0 "* ]] || fail "NIC $1 left enabled"
	[[ " $s " == *" bme=0 "* ]] || fail "NIC $1 left with bus mastering on"
	[[ " $s " == *" bad_commands=$2 "* ]] || fail "NIC $1: want bad_commands=$2"
}
model 0 0
model 1 0
model 2 1
# A second attempt fails the same way, and leaves nothing behind either.
for want in 0000:00:06.0=ENODEV 0000:00:07.0=ETIMEDOUT 0000:00:08.0=EIO; do
	got=$(bind_result "${want%=*}")
	echo "bind ${want%=*}: $got"
	[ "$got" = "${want#*=}" ] || fail "bind ${want%=*}: want ${want#*=}"
done
model 0 0
model 1 0
model 2 2
if ls /sys/bus/pci/drivers/ordma | grep -q '^0000:'; then fail "a failing NIC stayed bound"; fi
! grep -q ordma-admin /proc/interrupts || fail "an interrupt stayed registered after rebinding"
rmmod ordma
echo "PASS: nic-probe-failures"
