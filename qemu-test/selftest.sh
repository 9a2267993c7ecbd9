#!/bin/bash
# Host test of the VM harness itself (qemu-test/run): exit status and output, the timeout,
# kernel-warning detection (from the kernel's log, not the command's output; hung tasks
# too; a report in the kernel's own boot gets one more boot), ORDMA_MODEL_LOG reaching the models, and that Ctrl-C (SIGINT to the process group),
# SIGTERM and SIGKILL of the harness leave no QEMU or NIC model behind. Several guests
# (--vms 2): each guest's status, output and logs in its own folder, the run's status and
# summary, --segment-args reaching the segment, a failing guest stopping the other, and the
# timeout and the signals again, for every guest and the segment's hub. Each case boots a guest (about 10 s under TCG).
#
# Usage: qemu-test/selftest.sh RESULTS_DIR
source "$(dirname "$0")/../scripts/lib.sh"
OUT=${1:?usage: qemu-test/selftest.sh RESULTS_DIR}
mkdir -p "$OUT"
RUN=$ORDMA_SRC/qemu-test/run
export ORDMA_NO_BUILD=1
fails=0
check() { # NAME WANT GOT
	if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: wanted $2, got $3"; fails=$((fails + 1)); fi
}
# What a run started and must not leave behind: QEMU, the NIC models, anything. Each case
# runs with its own ORDMA_RUN_ID, which every process of the run has in its environment
# (scripts/in-root passes it in) and QEMU also as its -name: the processes still carrying it
# (pid and name), or nothing. (Command lines inside the root hold /ordma/results, never the
# host's results path, so they cannot tell one run from another.)
left_of() {
	local e p
	for e in /proc/[0-9]*/environ; do
		p=${e#/proc/}
		p=${p%/environ}
		[ "$p" != $$ ] && [ "$p" != "$BASHPID" ] || continue
		if { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qx "ORDMA_RUN_ID=$1"; then
			echo "$p($(cat "/proc/$p/comm" 2>/dev/null))"
		fi
	done | tr '\n' ' ' | sed 's/ $//'
}
ID=selftest-$$

rc=0; "$RUN" --results "$OUT/status" -- sh -c 'echo hello from the guest; exit 7' >/dev/null 2>&1 || rc=$?
check "exit status is the command's" 7 "$rc"
check "output.txt holds the command's output" "hello from the guest" "$(cat "$OUT/status/output.txt")"
for f in console.log dmesg.txt harness.log qemu.log nic0.log cmd.sh; do
	check "results folder has $f" yes "$([ -e "$OUT/status/$f" ] && echo yes || echo no)"
done

rc=0; ORDMA_RUN_ID=$ID-timeout "$RUN" --results "$OUT/timeout" --nics 2 --timeout 12 -- sleep 1000 >/dev/null 2>&1 || rc=$?
check "timeout gives 124" 124 "$rc"
check "no QEMU or NIC model left after timeout" "" "$(left_of "$ID-timeout")"

# Kernel warnings come from the kernel's log only: a kernel WARNING or a hung task fails a
# passing command; a command that merely prints "WARNING:" does not. ORDMA_MODEL_LOG
# reaches the NIC models (debug lines in their logs).
rc=0; "$RUN" --results "$OUT/splat" -- sh -c 'echo "WARNING: ordma harness self-test" >/dev/kmsg' >/dev/null 2>&1 || rc=$?
check "a kernel WARNING fails a passing command with 126" 126 "$rc"
# A real hung task (the kernel's detector, CONFIG_DETECT_HUNG_TASK, at a 1 s timeout): a
# NIC that never comes out of reset holds each bind in probe for 2 s under the device
# lock, so the fourth of four concurrent binds waits in uninterruptible sleep for 6 s.
rc=0; "$RUN" --results "$OUT/hung" --nic-args 0 "--inject reset-stuck" -- sh -c '
	echo 1 >/proc/sys/kernel/hung_task_timeout_secs
	for i in 1 2 3 4; do echo 0000:00:06.0 >/sys/bus/pci/drivers/ordma/bind & done 2>/dev/null
	wait; sleep 2' >/dev/null 2>&1 || rc=$?
check "a hung task (uninterruptible for 6 s, detector at 1 s) fails a passing command with 126" 126 "$rc"
check "the hung task is reported in the kernel's log" yes \
	"$(grep -q "INFO: task .* blocked for more than" "$OUT/hung/kernel.log" && echo yes || echo no)"
# A report in the kernel's own boot, before ordma is loaded, is not the run's: kept aside,
# and the machine booted once more; once only.
rc=0; ORDMA_TEST_BOOT_WARNING=1 "$RUN" --results "$OUT/boot-report" -- true >"$OUT/boot-report.out" 2>&1 || rc=$?
check "a kernel report before ordma's load: booted again, the command's status" 0 "$rc"
check "the first boot's report is kept in <results>.boot-report" yes \
	"$(grep -q "WARNING: ordma harness self-test (boot)" "$OUT/boot-report.boot-report/kernel.log" 2>/dev/null && echo yes || echo no)"
check "the second boot is clean" no \
	"$(grep -q "WARNING: ordma harness self-test (boot)" "$OUT/boot-report/kernel.log" && echo yes || echo no)"
check "the harness says it booted again" yes "$(grep -q "NOTICE: the kernel reported while booting" "$OUT/boot-report.out" && echo yes || echo no)"
rc=0; ORDMA_TEST_BOOT_WARNING=always "$RUN" --results "$OUT/boot-report-twice" -- true >/dev/null 2>&1 || rc=$?
check "a kernel report in the second boot too fails with 126" 126 "$rc"
# A guest whose kernel does not boot (here: its init stops before saying it booted) is
# stopped by the boot watchdog with where its vCPUs were, and booted once more; once only.
rc=0; ORDMA_BOOT_LIMIT=20 ORDMA_TEST_BOOT_HANG=1 "$RUN" --results "$OUT/boot-hang" -- true >"$OUT/boot-hang.out" 2>&1 || rc=$?
check "a guest that does not boot: booted again, the command's status" 0 "$rc"
check "the hung boot's vCPUs are kept, with the kernel symbol each was in" yes \
	"$(grep -q -E '^CPU#0 RIP 0x[0-9a-f]+ in [a-z_]' "$OUT/boot-hang.boot-hang/boot-hang.txt" 2>/dev/null && echo yes || echo no)"
check "the harness says it booted again" yes "$(grep -q "NOTICE: the guest's kernel did not boot" "$OUT/boot-hang.out" && echo yes || echo no)"
# Twice (two 20 s watchdogs): `make test-full` (the second attempt's failure is the run's, as
# the boot report's twice above, in the same code of qemu-test/run).
if [ "${ORDMA_TIER:-}" = full ]; then
	rc=0; ORDMA_BOOT_LIMIT=20 ORDMA_TEST_BOOT_HANG=always "$RUN" --results "$OUT/boot-hang-twice" -- true >/dev/null 2>&1 || rc=$?
	check "a guest that does not boot twice fails with 123" 123 "$rc"
fi
rc=0; ORDMA_MODEL_LOG=debug "$RUN" --results "$OUT/stdout-warning" -- sh -c 'echo "WARNING: printed by the test, not the kernel"; cat /sys/bus/pci/devices/0000:00:06.0/vendor' >/dev/null 2>&1 || rc=$?
check "a command printing WARNING: passes" 0 "$rc"
check "ORDMA_MODEL_LOG=debug reaches the NIC model" yes \
	"$(grep -q DEBUG "$OUT/stdout-warning/nic0.log" && echo yes || echo no)"

# A NIC model killed on the guest's request (kill-nic0) while the guest floods its BAR0 with
# writes (QEMU sends each to the model, posted, unanswered): the guest lives on. A plain
# SIGKILL leaves QEMU's writes unread in the dead model's socket, QEMU's next read of it
# gets ECONNRESET, and QEMU 11.1 aborts on that (qemu-test/kill-model.py).
rc=0; "$RUN" --results "$OUT/kill-nic" -- bash -c '
	d=0000:00:06.0
	echo $d >/sys/bus/pci/drivers/ordma/unbind
	python3 - $d <<"PY" &
import mmap, os, sys, time
m = mmap.mmap(os.open(f"/sys/bus/pci/devices/{sys.argv[1]}/resource0", os.O_RDWR | os.O_SYNC), 4096)
end, n = time.monotonic() + 3, 0
while time.monotonic() < end:
    m[0x14:0x18] = n.to_bytes(4, "little")  # DB_PAGES, read-only: ignored, counted
    n += 1
print("writes:", n)
PY
	sleep 0.5
	: >/ordma/results/control/.kill-nic0.tmp
	mv /ordma/results/control/.kill-nic0.tmp /ordma/results/control/kill-nic0
	wait $!
	echo "the guest lived on"' >/dev/null 2>&1 || rc=$?
check "a NIC model killed mid-writes: the guest lives on" "0 yes" \
	"$rc $(grep -q '^the guest lived on' "$OUT/kill-nic/output.txt" 2>/dev/null && echo yes || echo no)"
check "... killed by kill-model.py, QEMU reading an end of file" "no" \
	"$(grep -q 'plain SIGKILL' "$OUT/kill-nic/harness.log" "$OUT/kill-nic/output.txt" 2>/dev/null && echo yes || echo no)"

# Several guests: the command runs in each, knowing which it is; each one's results in vm<i>/;
# the run's status is the first failing guest's; summary.txt has them all.
rc=0; "$RUN" --vms 2 --segment-args "--loss 0.25 --seed 5" --results "$OUT/vms" -- sh -c \
	'echo "guest $ORDMA_VM of $ORDMA_VMS: $(hostname) $(ip -4 -br addr show eth0 | awk "{print \$3}")"; exit $((ORDMA_VM + 3))' \
	>/dev/null 2>&1 || rc=$?
check "--vms 2: the run's status is the first failing guest's" 3 "$rc"
for g in 0 1; do
	check "--vms 2: vm$g knows it is guest $g, has its name and address" \
		"guest $g of 2: vm$g 10.0.0.$((g + 1))/24" "$(cat "$OUT/vms/vm$g/output.txt" 2>/dev/null)"
	for f in console.log kernel.log dmesg.txt qemu.log nic0.log cmd.sh rc; do
		check "--vms 2: vm$g/ has $f" yes "$([ -e "$OUT/vms/vm$g/$f" ] && echo yes || echo no)"
	done
done
check "--vms 2: summary.txt has each guest's status" "vm0 rc=3 vm1 rc=4" \
	"$(grep -o '^vm[0-9] rc=[0-9]*' "$OUT/vms/summary.txt" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
check "--vms 2: --segment-args reach the segment's hub" yes \
	"$(grep -q 'loss=0.25 .* from=all' "$OUT/vms/segment.log" 2>/dev/null && echo yes || echo no)"
check "--vms 2: the segment was captured" yes "$([ -s "$OUT/vms/shared/segment.pcap" ] && echo yes || echo no)"
# A guest that fails stops the others (30 s later; here 5, ORDMA_STOP_GRACE): a peer waiting
# for it does not wait until the deadline.
start=$SECONDS
rc=0; ORDMA_STOP_GRACE=5 ORDMA_RUN_ID=$ID-vms-stop "$RUN" --vms 2 --timeout 300 --results "$OUT/vms-stop" -- sh -c \
	'[ "$ORDMA_VM" = 0 ] || sleep 1000; exit 5' >/dev/null 2>&1 || rc=$?
check "--vms 2: a guest failing while the other waits: its status" 5 "$rc"
check "--vms 2: ... the other stopped well before the deadline" yes "$([ $((SECONDS - start)) -lt 200 ] && echo yes || echo no)"
check "--vms 2: ... and said so in the summary" yes \
	"$(grep -q '^vm1 rc=125 .*stopped: another guest failed' "$OUT/vms-stop/summary.txt" 2>/dev/null && echo yes || echo no)"
check "--vms 2: no QEMU, NIC model or hub left after a stop" "" "$(left_of "$ID-vms-stop")"
rc=0; ORDMA_RUN_ID=$ID-vms-timeout "$RUN" --vms 2 --results "$OUT/vms-timeout" --timeout 12 -- sleep 1000 >/dev/null 2>&1 || rc=$?
check "--vms 2: timeout gives 124" 124 "$rc"
check "--vms 2: no QEMU, NIC model or hub left after timeout" "" "$(left_of "$ID-vms-timeout")"

# Signals: start a long run in its own process group, wait until the command runs, signal.
# Job control on, as in a terminal: a background job then has its own process group. And
# SIGINT at its default disposition, as a terminal's foreground job has it: this script may
# itself have been started with SIGINT ignored (any `&` in a non-interactive shell does that,
# CI's runner may too), and an ignored signal stays ignored across exec unless reset.
# Each signal with one guest, then with two (both booted, both QEMUs and the segment's hub
# running when the signal comes): SIGKILL with two in `make test` (the namespace must take
# every process down), SIGINT and SIGTERM with two in `make test-full` (ORDMA_TIER=full).
set -m
cases=(INT TERM KILL vms-KILL)
[ "${ORDMA_TIER:-}" != full ] || cases+=(vms-INT vms-TERM)
for case in "${cases[@]}"; do
	sig=${case#vms-}
	dir=$OUT/sig$case
	mkdir -p "$dir"
	args=() consoles=("$dir/console.log") want_qemus=1
	[ "$case" = "$sig" ] || { args=(--vms 2); consoles=("$dir/vm0/console.log" "$dir/vm1/console.log"); want_qemus=2; }
	ORDMA_RUN_ID=$ID-$case env --default-signal=INT "$RUN" "${args[@]}" --results "$dir" -- sleep 1000 >"$dir.out" 2>&1 &
	pid=$!
	booted=no
	for _ in $(seq 3000); do # up to 300 s for the guests to boot (a loaded machine)
		booted=yes
		for c in "${consoles[@]}"; do grep -q 'ordma loaded' "$c" 2>/dev/null || booted=no; done
		[ $booted = no ] || break
		sleep 0.1
	done
	check "SIG$case case: guest(s) booted" yes "$booted"
	check "SIG$case case: QEMU ($want_qemus) and NIC models run with the marker" yes \
		"$([ "$(left_of "$ID-$case" | grep -o 'qemu-system' | wc -l)" = $want_qemus ] &&
			left_of "$ID-$case" | grep -q 'ordma-model' && echo yes || echo no)"
	[ "$case" = "$sig" ] || check "SIG$case case: the segment's hub runs with the marker" yes \
		"$(left_of "$ID-$case" | grep -q 'python3' && echo yes || echo no)"
	case $sig in
	INT) kill -INT -- "-$pid"; want=130 ;; # what Ctrl-C in a terminal does: the whole foreground group
	TERM) kill -TERM "$pid"; want=143 ;;   # what a supervisor does: the harness process only
	KILL) kill -KILL "$pid"; want=137 ;;   # nothing can catch it: the kernel must clean up
	esac
	rc=0; wait "$pid" || rc=$?
	check "SIG$case: harness exits with $want" $want $rc
	left=
	for _ in $(seq 50); do # SIGKILL: the namespace's processes die asynchronously
		left=$(left_of "$ID-$case")
		[ -n "$left" ] || break
		sleep 0.1
	done
	check "SIG$case: no QEMU or NIC model left" "" "$left"
	[ $sig = KILL ] || check "SIG$case: harness prints where the logs are" yes \
		"$(grep -q "logs: $dir" "$dir.out" && echo yes || echo no)"
done

[ $fails = 0 ] || die "$fails harness self-test check(s) failed"
echo "PASS: harness self-test"
