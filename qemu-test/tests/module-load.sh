#!/bin/bash
# VM test: ordma.ko loads, carries its PCI alias (the InfiniBand-controller class: probe checks
# the vendor and device IDs, hw.rs), unloads cleanly and loads again.
# (The harness fails the run if the kernel logs any warning; it loaded ordma before us.)
# nics: 0
set -euo pipefail
KO=/ordma/payload/ordma.ko # the one stage2 loaded
grep -q '^ordma ' /proc/modules || { echo "FAIL: ordma is not loaded"; exit 1; }
alias=$(modinfo -F alias "$KO")
echo "alias: $alias"
[ "$alias" = "pci:v*d*sv*sd*bc02sc07i00*" ] || { echo "FAIL: unexpected PCI alias"; exit 1; }
# So probe must refuse, before touching it, a function that is not an ordma NIC. q35's ICH9
# SMBus controller (8086:2930, no driver in this kernel) stands in: offered to ordma with
# driver_override, it must stay unbound and disabled, with no probe error logged (ENODEV is
# the silent refusal).
SMB=/sys/bus/pci/devices/0000:00:1f.3
[ -e $SMB ] && [ ! -e $SMB/driver ] || { echo "FAIL: no driverless 00:1f.3 to offer"; exit 1; }
echo ordma >$SMB/driver_override
if echo 0000:00:1f.3 2>/dev/null >/sys/bus/pci/drivers/ordma/bind; then
	echo "FAIL: ordma bound a function that is not an ordma NIC"; exit 1
fi
[ ! -e $SMB/driver ] || { echo "FAIL: ordma bound a function that is not an ordma NIC"; exit 1; }
[ "$(cat $SMB/enable)" = 0 ] || { echo "FAIL: ordma enabled a function that is not an ordma NIC"; exit 1; }
if dmesg | grep '0000:00:1f.3' | grep -q -i 'ordma\|probe'; then
	dmesg | grep '0000:00:1f.3'
	echo "FAIL: ordma's probe of a function that is not an ordma NIC logged"; exit 1
fi
echo >$SMB/driver_override
echo "probe refused 8086:2930 (not an ordma NIC) without touching it"
for i in 1 2 3; do
	rmmod ordma
	[ ! -e /sys/module/ordma ] || { echo "FAIL: /sys/module/ordma still there after rmmod"; exit 1; }
	insmod "$KO"
	[ -e /sys/bus/pci/drivers/ordma ] || { echo "FAIL: no ordma PCI driver after insmod"; exit 1; }
	echo "cycle $i: unloaded and reloaded"
done
rmmod ordma
# Nothing of ordma may be left behind.
if grep -q ordma /proc/modules || [ -e /sys/bus/pci/drivers/ordma ]; then
	echo "FAIL: ordma left state behind after rmmod"; exit 1
fi
echo "PASS: module-load"
