#!/bin/bash
# VM test: two ordma NICs (two model processes) are listed by lspci and both are probed:
# reset, version, queues, MSI-X, and QUERY_DEVICE and QUERY_PORT answered by each model:
# each ib_device shows its own model's node GUID, firmware version and max QP (all set on
# the models' command lines, so no default is assumed), and its port the LID, state and MTU
# that model reports. The event queue works: NIC 0's link is up, so it posts its
# PORT_ACTIVE event, which arrives as an MSI-X event interrupt; NIC 1's model runs with its
# link down and posts none.
# nics: 2
# run-args: --nic-args 0 "--guid 0x02000000000000a0 --attr fw_ver=3.14.15 --attr max_qp=1000"
# run-args: --nic-args 1 "--link down --guid 0x02000000000000a1 --attr fw_ver=2.7.1 --attr max_qp=900"
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
lspci -nn -d 4f52:0001
[ "$(lspci -n -d 4f52:0001 | wc -l)" = 2 ] || fail "lspci does not list two ordma functions"
lspci -n -d 4f52:0001 | grep -q ' 0207: ' || fail "class is not InfiniBand controller"
# NIC I's ib_device, by its PCI function.
ibdev() { local d=(/sys/bus/pci/devices/$1/infiniband/*); [ -e "${d[0]}" ] || fail "$1: no ib_device"; echo "${d[0]##*/}"; }
# BDF GUID FW MAX_QP LID STATE: what its model was started with and reports.
check() {
	local dev d got
	dev=$(ibdev "$1")
	d=/sys/class/infiniband/$dev
	got="$(cat "$d/node_guid") $(cat "$d/fw_ver") $(ibv_devinfo -v -d "$dev" | awk '$1 == "max_qp:" { print $2 }')"
	echo "$1 ($dev): node_guid fw_ver max_qp: $got"
	[ "$got" = "$2 $3 $4" ] || fail "$1: want $2 $3 $4 (the model's command line)"
	got="$(cat "$d/ports/1/lid"), $(cat "$d/ports/1/state"), $(ibv_devinfo -d "$dev" | awk '$1 == "active_mtu:" { print $2, $3 }'), $(cat "$d/ports/1/gids/0")"
	echo "$1 ($dev): port 1 lid, state, active_mtu, GID 0: $got"
	[ "$got" = "$5, $6, 4096 (5), fe80:0000:0000:0000:$2" ] || fail "$1: port 1 not as the model reports it"
}
# QUERY_PORT: LID = index + 1, ACTIVE with the link up, DOWN without.
check 0000:00:06.0 0200:0000:0000:00a0 3.14.15 1000 0x1 "4: ACTIVE"
check 0000:00:07.0 0200:0000:0000:00a1 2.7.1 900 0x2 "1: DOWN"
# Events: NIC 0 posted its PORT_ACTIVE (and nothing else happened to post one), NIC 1 none.
s0=$(nic_ctl 0 status) && s1=$(nic_ctl 1 status) || fail "no status from the models"
echo "NIC 0: $s0"
echo "NIC 1: $s1"
[[ " $s0 " == *" events=1 "* ]] || fail "NIC 0 did not post exactly its PORT_ACTIVE event"
[[ " $s1 " == *" events=0 "* ]] || fail "NIC 1's link is down, yet it posted an event"
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
