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
