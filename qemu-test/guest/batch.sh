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
R=/ordma/results
KO=/ordma/payload/ordma.ko
K=/sys/kernel/debug/kmemleak
for spec; do
	name=${spec%:*}
	t=${spec##*:}
	d=$R/tests/$name
	mkdir -p "$d"
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
		sleep 6
		echo scan >$K
		echo scan >$K
		cat $K >"$d/kmemleak.txt"
		echo clear >$K
	fi
	echo "$((SECONDS - start))" >"$d/seconds"
	echo "$rc" >"$d/rc"
	echo "ordma-batch: end $name rc=$rc" >/dev/kmsg
	echo "[batch] ===== $name: exit status $rc"
done
exit 0
