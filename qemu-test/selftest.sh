#!/bin/bash
# Host test of the VM harness itself (qemu-test/run): exit status and output, the timeout,
# kernel-warning detection, and that Ctrl-C (SIGINT to the process group) and SIGTERM leave
# no QEMU behind. Each case boots a guest (about 10 s under TCG).
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
# What a run started and must not leave behind: QEMU and the NIC models (their command lines
# name the run's results folder).
qemu_of() { pgrep -f "(qemu-system-x86_64|ordma-model).*$1" || true; }

rc=0; "$RUN" --results "$OUT/status" -- sh -c 'echo hello from the guest; exit 7' >/dev/null 2>&1 || rc=$?
check "exit status is the command's" 7 "$rc"
check "output.txt holds the command's output" "hello from the guest" "$(cat "$OUT/status/output.txt")"
for f in console.log dmesg.txt harness.log qemu.log nic0.log cmd.sh; do
	check "results folder has $f" yes "$([ -e "$OUT/status/$f" ] && echo yes || echo no)"
done

rc=0; "$RUN" --results "$OUT/timeout" --nics 2 --timeout 25 -- sleep 1000 >/dev/null 2>&1 || rc=$?
check "timeout gives 124" 124 "$rc"
check "no QEMU or NIC model left after timeout" "" "$(qemu_of "$OUT/timeout")"

rc=0; "$RUN" --results "$OUT/splat" -- sh -c 'echo "WARNING: ordma harness self-test" >/dev/kmsg' >/dev/null 2>&1 || rc=$?
check "a kernel WARNING fails a passing command with 126" 126 "$rc"

# Signals: start a long run in its own process group, wait until the command runs, signal.
# Job control on, as in a terminal: a background job then has its own process group. And
# SIGINT at its default disposition, as a terminal's foreground job has it: this script may
# itself have been started with SIGINT ignored (any `&` in a non-interactive shell does that,
# CI's runner may too), and an ignored signal stays ignored across exec unless reset.
set -m
for sig in INT TERM; do
	dir=$OUT/sig$sig
	mkdir -p "$dir"
	env --default-signal=INT "$RUN" --results "$dir" -- sleep 1000 >"$dir.out" 2>&1 &
	pid=$!
	for _ in $(seq 600); do # up to 60 s for the guest to boot
		grep -q 'ordma loaded' "$dir/console.log" 2>/dev/null && break
		sleep 0.1
	done
	check "SIG$sig case: guest booted" yes "$(grep -q 'ordma loaded' "$dir/console.log" && echo yes || echo no)"
	if [ $sig = INT ]; then
		kill -INT -- "-$pid" # what Ctrl-C in a terminal does: the whole foreground group
		want=130
	else
		kill -TERM "$pid" # what a supervisor does: the harness process only
		want=143
	fi
	rc=0; wait "$pid" || rc=$?
	check "SIG$sig: harness exits with $want" $want $rc
	check "SIG$sig: no QEMU or NIC model left" "" "$(qemu_of "$dir")"
	check "SIG$sig: harness prints where the logs are" yes \
		"$(grep -q "logs: $dir" "$dir.out" && echo yes || echo no)"
done

[ $fails = 0 ] || die "$fails harness self-test check(s) failed"
echo "PASS: harness self-test"
