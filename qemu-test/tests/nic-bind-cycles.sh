#!/bin/bash
# VM test: 20 unbind/bind cycles of both NICs (5 on the debug kernel, where each probe costs
# about 3 s and KASAN, lockdep and kmemleak see the same paths in fewer cycles), each bind a
# full probe (reset, queues, MSI-X, QUERY_DEVICE), then rmmod. The harness fails the run on
# any kernel warning.
# nics: 2
# The machine verbs-provider and uverbs-udata need too (these cycles use neither NIC's
# attributes nor its log), so the three share one boot in make test's batches.
# run-args: --nic-args 0 "--log-level debug --guid 0x02000000000000b0 --attr fw_ver=4.5.6 --attr max_qp=1000 --attr max_pd=1000 --attr max_cq=1000 --attr max_mr=4000 --attr max_qp_wr=4096 --attr max_cqe=32768"
# run-args: --nic-args 1 "--guid 0x02000000000000b1 --attr max_qp=77 --attr max_pd=4 --attr max_cq=5 --attr max_mr=6"
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
D=/sys/bus/pci/drivers/ordma
devs=$(cd $D && ls -d 0000:*)
[ "$(echo "$devs" | wc -w)" = 2 ] || fail "expected two bound NICs, got: $devs"
source /ordma/src/qemu-test/progs/debug-kernel.sh
cycles=20
! debug_kernel || cycles=5
# Each probe succeeds in full: bound, with its ib_device registered (the probe's last step);
# each unbind removes both.
for i in $(seq $cycles); do
	for d in $devs; do
		echo "$d" >$D/unbind
		[ ! -e "$D/$d" ] || fail "cycle $i: $d still bound after unbind"
		[ ! -e "/sys/bus/pci/devices/$d/infiniband" ] || fail "cycle $i: $d's ib_device outlived the unbind"
		echo "$d" >$D/bind
		[ -e "$D/$d" ] || fail "cycle $i: $d not bound after bind"
		ls "/sys/bus/pci/devices/$d/infiniband/" | grep -q . || fail "cycle $i: $d bound without an ib_device"
	done
done
echo "$cycles cycles of both NICs: every probe registered its ib_device"
# Every vector was given back: no ordma interrupt is left after unload.
rmmod ordma
! grep -q ordma-admin /proc/interrupts || fail "an ordma interrupt is still registered after rmmod"
echo "PASS: nic-bind-cycles"
