#!/bin/bash
# Guest side of a batch (scripts/test.sh): several VM tests one after another in one boot,
# each from a freshly loaded ordma.ko, each with its own results.
#
# Usage (as the command of qemu-test/run): bash /ordma/src/qemu-test/guest/batch.sh NAME:TIMEOUT...
#
# For each test NAME (qemu-test/tests/NAME.sh), in /ordma/results/tests/NAME/: output.txt,
# rc (its exit status; 124 if it ran longer than TIMEOUT seconds), seconds, and on the debug
# kernel kmemleak.txt (scanned after its rmmod). The kernel log gets the lines
# "ordma-batch: begin NAME" and "ordma-batch: end NAME rc=N" around each test, the
# module's (re)load and unload included, so the host attributes every kernel message to
# the test during which it was logged. `dmesg` in a test shows the kernel's messages since
# its own load of ordma (dmesg -C before it). Exits 0 once all have run: verdicts are per
# test.
#
# Several guests (qemu-test/run --vms N): every guest runs the batch, and the guests meet
# before each test and after it (flags in /ordma/shared/.batch/), so a test starts in all of
# them together; each test gets a shared folder of its own (/ordma/shared/NAME, as
# ORDMA_VM_SHARED, where qemu-test/progs/vms.sh keeps its rendezvous flags), so one test's
# flags never satisfy another's; before each test guest 0 clears the segment's faults and
# every guest its NIC ports' (what a failed test may have left behind). A
# guest that does not arrive (its test hung, or it died) delays the others by at most the
# test's timeout, and the test is still run and judged in each guest that is there.
R=/ordma/results
KO=/ordma/payload/ordma.ko
K=/sys/kernel/debug/kmemleak
if [ -n "${ORDMA_VM:-}" ] && [ -n "${ORDMA_VMS:-}" ]; then
	source /ordma/src/qemu-test/progs/nic-control.sh
	mkdir -p /ordma/shared/.batch
fi
# meet NAME SECONDS: with several guests, wait until every guest has reached NAME (at most
# SECONDS); prints who did not.
meet() {
	[ -n "${ORDMA_VMS:-}" ] || return 0
	local f=/ordma/shared/.batch/$1 g n missing
	: >"$f.vm$ORDMA_VM"
	for ((n = 0; n < $2 * 5; n++)); do
		missing=
		for ((g = 0; g < ORDMA_VMS; g++)); do [ -e "$f.vm$g" ] || missing+=" vm$g"; done
		[ -n "$missing" ] || return 0
		sleep 0.2
	done
	echo "[batch] $1: not reached by$missing within $2 s"
	return 1
}
for spec; do
	name=${spec%:*}
	t=${spec##*:}
	d=$R/tests/$name
	mkdir -p "$d"
	if [ -n "${ORDMA_VMS:-}" ]; then
		meet "$name.begin" "$((t + 60))" || true
		export ORDMA_VM_SHARED=/ordma/shared/$name
		mkdir -p "$ORDMA_VM_SHARED"
		[ "$ORDMA_VM" != 0 ] || nic_ctl segment clear >/dev/null || echo "[batch] the segment's faults were not cleared"
		# ... and each of this guest's NIC ports' own (`wire`), which a failed test may leave.
		for ((j = 0; j < 8; j++)); do nic_ctl "$j" wire clear >/dev/null 2>&1 || break; done
		meet "$name.ready" 60 || true
	fi
	echo "ordma-batch: begin $name" >/dev/kmsg
	echo "[batch] ===== $name (timeout ${t}s)"
	start=$SECONDS
	rc=0
	# What `dmesg` shows the test starts at its own load of ordma, as after a boot (the
	# first test's load is stage2's, after the boot). The full log is in kernel.log.
	grep -q '^ordma ' /proc/modules || dmesg -C
	if ! grep -q '^ordma ' /proc/modules && ! insmod "$KO"; then
		echo "[batch] insmod ordma.ko failed"
		rc=125
	fi
	if [ $rc = 0 ]; then
		(cd /root && timeout -k 10 "$t" bash "/ordma/src/qemu-test/tests/$name.sh" </dev/null 2>&1) |
			tee "$d/output.txt"
		rc=${PIPESTATUS[0]}
	fi
	if grep -q '^ordma ' /proc/modules && ! rmmod ordma; then
		echo "[batch] rmmod ordma failed"
		[ "$rc" != 0 ] || rc=1
	fi
	if [ -e /ordma/payload/kmemleak ] && [ -e $K ]; then
		# As stage2 does at the end of a run: reported once unreferenced over two scans, 5 s old.
		ks=$SECONDS
		sleep 6
		echo scan >$K
		echo scan >$K
		cat $K >"$d/kmemleak.txt"
		echo clear >$K
		echo "$((SECONDS - ks))" | tee "$d/kmemleak-seconds" >>"$R/kmemleak-seconds"
	fi
	echo "$((SECONDS - start))" >"$d/seconds"
	echo "$rc" >"$d/rc"
	echo "ordma-batch: end $name rc=$rc" >/dev/kmsg
	echo "[batch] ===== $name: exit status $rc"
	meet "$name.end" "$((t + 60))" || true
done
exit 0
