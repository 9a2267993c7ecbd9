#!/bin/bash
# VM test: two ordma NICs (two model processes) are listed by lspci and both are probed:
# reset, version, queues, MSI-X and a QUERY_DEVICE admin command answered by each model
# (the node GUID in the log is the model's, which differs per NIC). The event queue works:
# NIC 0's link is up and its PORT_ACTIVE event arrives; NIC 1's model runs with its link
# down, so no such event comes from it.
# nics: 2
# run-args: --nic-args 1 "--link down"
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
lspci -nn -d 4f52:0001
[ "$(lspci -n -d 4f52:0001 | wc -l)" = 2 ] || fail "lspci does not list two ordma functions"
lspci -n -d 4f52:0001 | grep -q ' 0207: ' || fail "class is not InfiniBand controller"
dmesg | grep 'ordma 0000' || true
for guid in 0200000000000000 0200000000000001; do
	dmesg | grep -q "ordma NIC 1.1: node GUID $guid, fw 0.1.0, 1 port(s), max QP 1024" ||
		fail "no probe message with the model's attributes for GUID $guid"
done
# QUERY_PORT: LID = index + 1, state 4 (ACTIVE) with the link up, 1 (DOWN) without.
dmesg | grep -q 'ordma 0000:00:06.0: port 1: LID 1, state 4, MTU code 5, GUID 0200000000000000' ||
	fail "NIC 0: QUERY_PORT result not as the model reports it"
dmesg | grep -q 'ordma 0000:00:07.0: port 1: LID 2, state 1, MTU code 5, GUID 0200000000000001' ||
	fail "NIC 1: QUERY_PORT result not as the model reports it"
dmesg | grep -q 'ordma 0000:00:06.0: port 1 ACTIVE' || fail "no PORT_ACTIVE event from NIC 0"
if dmesg | grep -q 'ordma 0000:00:07.0: port 1 ACTIVE'; then fail "NIC 1's link is down, yet ACTIVE"; fi
for dev in /sys/bus/pci/drivers/ordma/0000:*; do
	[ -e "$dev" ] || fail "no device bound to ordma"
	bdf=${dev##*/}
	n=$(awk -v b="$bdf" '$0 ~ b && /ordma-admin/ { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print s }' /proc/interrupts)
	echo "$bdf: $n admin interrupt(s)"
	[ "${n:-0}" -ge 1 ] || fail "$bdf: no MSI-X admin interrupt was taken"
done
n=$(awk '/0000:00:06.0/ && /ordma-event/ { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print s }' /proc/interrupts)
echo "0000:00:06.0: ${n:-0} event interrupt(s)"
[ "${n:-0}" -ge 1 ] || fail "no MSI-X event interrupt on NIC 0"
echo "PASS: nic-probe"
