#!/bin/bash
# `make test` and `make test-full` (ORDMA_TIER=full): build root, test kernel, lint (rustfmt,
# clippy for the module and the workspace), unit tests (cargo test), the fuzz targets
# (ORDMA_FUZZ_SECONDS each: 5, 30 in the full tier), the RTL's lint and bounded proof (and
# in the full tier a deeper proof and the synthesis), the module, NIC model and provider
# builds, the kconfig check, the debug kernel (KASAN, lockdep, kmemleak, UBSAN) and its
# module; then the VM runs, ORDMA_JOBS at a time (cores / 2, at least 2): the harness
# self-test, the VM tests (qemu-test/tests/*.sh) and some of them again on the debug kernel.
#
# The tiers (Documentation/testing.md lists every test's): `make test` runs every VM test
# but those marked `# tier: full`, and on the debug kernel those marked `# debug: core`;
# `make test-full` runs every VM test, and on the debug kernel those marked `# debug: core`
# or `# debug: full`. A test sees its tier in the guest as ORDMA_TIER (full, or empty), and
# may run a longer form in the full tier.
#
# VM tests that need the same machine (same `# nics:` and `# run-args:`) and are not marked
# `# fresh-vm: yes` run one after another in one boot (a batch, step vm-[debug-]batch<N>),
# each from a freshly loaded ordma.ko, each still its own step vm-[debug-]<name> with its own
# output, kernel log and verdict (Documentation/testing.md). ORDMA_BATCH=0: one boot each.
#
# T=<patterns> (make test T=...; ORDMA_TEST_FILTER here): only the steps whose names match
# one of the shell patterns (space- or comma-separated), plus the builds they need.
#
# Results: test-results/<time>/ holds one log per step, one results folder per VM run and
# summary.txt; test-results/latest points at the newest; only the newest ORDMA_KEEP_RESULTS
# (20) are kept. Exit status 0 only if all passed.
source "$(dirname "$0")/lib.sh"
need_root_user

TR=$ORDMA_SRC/test-results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$TR"
prune_results "$ORDMA_SRC/test-results"
ln -sfn "$TR" "$ORDMA_SRC/test-results/latest"
SUMMARY=$TR/summary.txt
: >"$SUMMARY"
failed=0
T0=$SECONDS
FILTER=${ORDMA_TEST_FILTER:-}
FILTER=${FILTER//,/ }
TIER=${ORDMA_TIER:-}
case $TIER in
'' | full) ;;
*) die "ORDMA_TIER=$TIER: the tiers are full (make test-full) or empty (make test)" ;;
esac
export ORDMA_TIER=$TIER
# VM runs at a time: cores / 2, at least 2 (ORDMA_JOBS; ORDMA_VM_JOBS, its old name, too).
JOBS=${ORDMA_JOBS:-${ORDMA_VM_JOBS:-$(($(nproc) / 2))}}
[[ $JOBS =~ ^[0-9]+$ ]] || die "ORDMA_JOBS=$JOBS: a number of VM runs at a time"
[ "$JOBS" -ge 2 ] || JOBS=2

# selected NAME...: true if any NAME matches T (all do without one).
selected() {
	[ -n "$FILTER" ] || return 0
	local n p
	set -f
	for n; do
		for p in $FILTER; do
			# shellcheck disable=SC2053
			[[ $n == $p ]] && { set +f; return 0; }
		done
	done
	set +f
	return 1
}

# step [--show] NAME COMMAND...: run it, log to $TR/NAME.log (--show: and to the terminal,
# for the long builds' progress), record PASS/FAIL and the time (STEP_TIME, if the command
# sets it, instead of the wall time: a batched test's own time in the guest).
step() {
	local show= name start=$SECONDS rc=0
	[ "$1" != --show ] || { show=1; shift; }
	name=$1
	shift
	log "== $name"
	STEP_TIME= STEP_NOTE=
	if [ -n "$show" ]; then
		"$@" 2>&1 | tee "$TR/$name.log" >&2 || rc=$?
	else
		"$@" >"$TR/$name.log" 2>&1 || rc=$?
	fi
	local t=${STEP_TIME:-$((SECONDS - start))} res=PASS
	# A VM test's time, for the next run's plan (plan_vm_tests, run_units).
	case $name in vm-*batch[0-9]*) ;; vm-* | host-harness-selftest) echo "$t" >"$SECS/$name" ;; esac
	if [ $rc != 0 ]; then
		res=FAIL
		failed=$((failed + 1))
		[ -n "$show" ] || tail -n 25 "$TR/$name.log" | sed 's/^/    /' >&2
	fi
	printf '%-4s %-34s %5d s%s%s\n' "$res" "$name" "$t" "${STEP_NOTE:+  $STEP_NOTE}" \
		"$([ $rc = 0 ] || echo "  (exit $rc; $TR/$name.log)")" |
		tee -a "$SUMMARY" >&2
	[ $rc = 0 ] || why_failed "$TR/$name.log" | tee -a "$SUMMARY" >&2
	return $rc
}
# why_failed LOG: a failed step's reasons, indented under its summary line, so the summary's
# last lines (all CI shows) say why: the test's FAIL lines, the harness's verdict, and the
# kernel's first reports (the lines after "KERNEL WARNING"/"KMEMLEAK").
why_failed() {
	{
		grep -E -m 3 '(^|: )FAIL: ' "$1"
		grep -E -m 2 'TIMEOUT: |BOOT HANG: |STOPPED: |VM FAILURE: |did not finish' "$1"
		grep -E -m 1 -A 5 'KERNEL WARNING' "$1"
		grep -E -m 1 -A 3 'KMEMLEAK' "$1"
	} 2>/dev/null | head -n 14 | cut -c1-220 | sed 's/^/       why: /'
}
inroot() { "$ORDMA_SRC/scripts/in-root" -- bash -euc "cd /ordma/src; $1"; }
# A build's log must be free of warnings and errors: rustc's and clippy's, the C compiler's
# and the linker's, and make's own "***" failures.
no_warnings() {
	! grep -E '^(warning|error|ERROR)(\[|:)|: (warning|error|fatal error):|^ld(\.lld)?: |\*\*\* |^make(\[[0-9]+\])?: \*\*\*' "$1"
}
# build_clean OUT COMMAND: run COMMAND in the root, stdout and stderr to OUT and the step's
# log; fail on its exit status (not tee's) or on any warning in its output.
build_clean() {
	local rc
	inroot "$2" 2>&1 | tee "$1"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || { echo "FAIL: the build exited with status $rc"; return 1; }
	no_warnings "$1" || { echo "FAIL: the build warned (lines above)"; return 1; }
}
KO=drivers/infiniband/hw/ordma/ordma.ko
module_clippy() {
	build_clean "$TR/module-clippy.out" "make -s KDIR=/ordma/kernel clean && make KDIR=/ordma/kernel CLIPPY=1 modules"
}
module_build() {
	rm -f "$ORDMA_SRC/$KO"
	build_clean "$TR/module-build.out" "make -s KDIR=/ordma/kernel clean && make KDIR=/ordma/kernel modules" &&
		test -f "$ORDMA_SRC/$KO"
}
module_build_debug() {
	local rc ko=$(target_dir)/module-debug/$KO
	# Never a module from an earlier build: the VM tests would run it.
	rm -f "$ko"
	ORDMA_KERNEL=debug "$ORDMA_SRC/scripts/build-module.sh" 2>&1 | tee "$TR/module-build-debug.out"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || { echo "FAIL: the debug module build exited with status $rc"; return 1; }
	no_warnings "$TR/module-build-debug.out" && test -f "$ko"
}

# The kconfig check is a function of its inputs alone (the check, the configuration step,
# the fragment, the root's kernel source): like the root and the kernels, it runs again only
# when one of them changes, and says so when it does not.
kconfig_check() {
	local key stamp
	key=$({
		root_hash
		cat "$ORDMA_SRC"/scripts/{check-kconfig.sh,kernel-inner.sh,kernel.config,lib.sh} \
			"$ORDMA_SRC/scripts/tests/kconfig-broken-fragment.sh"
	} | sha256sum | cut -c1-16)
	stamp=$ORDMA_STATE/kconfig-check-$key.passed
	if [ -f "$stamp" ]; then
		echo "inputs unchanged since this check passed ($(cat "$stamp")): not run again"
		return 0
	fi
	"$ORDMA_SRC/scripts/tests/kconfig-broken-fragment.sh" && date -Is >"$stamp"
}

# A VM test's harness options, from its header.
test_nics() { sed -n 's/^# nics: *\([0-9]*\).*/\1/p' "$1" | head -n1 | grep . || echo 1; }
test_timeout() { sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "$1" | head -n1 | grep . || echo 600; }
test_runargs() { sed -n 's/^# run-args: *//p' "$1"; }
test_fresh() { grep -qx '# fresh-vm: yes' "$1"; }
# The machine a test needs: tests with the same key can share a boot.
test_key() { printf 'nics=%s' "$(test_nics "$1")"; test_runargs "$1" | sed 's/^/ | /' | tr -d '\n'; }

# run_vm VARIANT RESULTS TIMEOUT HEADER_FILE COMMAND...: qemu-test/run with the harness
# options of HEADER_FILE's `# nics:` and `# run-args:` lines.
run_vm() {
	local variant=$1 res=$2 timeout=$3 f=$4 args=() line
	shift 4
	# `# run-args:` lines: more qemu-test/run options, one option and its values per line.
	while IFS= read -r line; do
		eval "args+=($line)"
	done < <(test_runargs "$f")
	local rc=0
	ORDMA_KERNEL=$variant ORDMA_NO_BUILD=1 "$ORDMA_SRC/qemu-test/run" --nics "$(test_nics "$f")" \
		--timeout "$timeout" "${args[@]}" --results "$res" -- "$@" || rc=$?
	# qemu-test/run booted the machine again after a report in the kernel's own boot: say so
	# in the summary too.
	[ ! -d "$res.boot-report" ] || echo "NOTICE: $(basename "$res"): the kernel reported while" \
		"booting, before ordma.ko was loaded; booted once more (see $res.boot-report)" >>"$TR/boot-reports.txt"
	return $rc
}
vm_test() { # FILE [VARIANT]: one test, one boot
	local f=$1 variant=${2:-}
	run_vm "$variant" "$TR/vm-${variant:+$variant-}$(basename "$f" .sh)" "$(test_timeout "$f")" "$f" \
		bash "/ordma/src/qemu-test/tests/$(basename "$f")"
}

# The kernel's log lines of one test in a batch: from its begin marker to its end marker.
klog_of() { # KERNEL_LOG NAME
	awk -v b="ordma-batch: begin $2" -v e="ordma-batch: end $2 rc=" '
		index($0, b) && substr($0, index($0, b) + length(b)) == "" { on = 1 }
		on { print }
		on && index($0, e) { on = 0 }' "$1"
}
# ... and the lines logged outside every test (boot, shutdown).
klog_outside() {
	awk '/ordma-batch: begin / { on = 1 } !on { print } /ordma-batch: end / { on = 0 }' "$1"
}
splats() { grep -E -f "$ORDMA_SRC/qemu-test/kernel-splats.txt" "$@"; }

# guest_dirs DIR: a run's guests' results folders (DIR itself for one guest; vm<G> for several).
guest_dirs() {
	if [ -d "$1/vm0" ]; then
		ls -d "$1"/vm[0-9]*
	else
		echo "$1"
	fi
}

# vm_batch VARIANT DIR FILE...: one boot runs the tests one after another
# (qemu-test/guest/batch.sh; with several guests, in each of them, together). This step's
# verdict is the machine's: it booted, ran them all in time, and the kernel logged no warning
# outside the tests (boot, shutdown).
vm_batch() {
	local variant=$1 dir=$2 f specs=() total=120 rc=0 g
	shift 2
	for f; do
		specs+=("$(basename "$f" .sh):$(test_timeout "$f")")
		total=$((total + $(test_timeout "$f") + 20))
	done
	echo "batch: ${specs[*]}"
	run_vm "$variant" "$dir" "$total" "$1" bash /ordma/src/qemu-test/guest/batch.sh "${specs[@]}" || rc=$?
	case $rc in
	0) ;;
	126) # a kernel warning somewhere: the machine's fault only if outside every test
		for g in $(guest_dirs "$dir"); do
			if klog_outside "$g/kernel.log" | splats; then
				echo "FAIL: kernel warning outside the tests in $g (boot or shutdown; lines above)"
				return 126
			fi
			[ ! -s "$g/kmemleak.txt" ] || { echo "FAIL: kmemleak report after the last test ($g)"; return 126; }
		done
		echo "(kernel warnings during tests: see those tests' steps)"
		rc=0 ;;
	*) echo "FAIL: the batch's VM exited with status $rc (tests without a verdict fail too)" ;;
	esac
	return $rc
}
# batch_verdict DIR NAME: one batched test's step: its output, its kernel log, its verdict
# (with several guests: each guest's, and the test fails if it failed in any).
batch_verdict() {
	local dir=$1 name=$2 g rc=0 grc
	echo "batched in $dir (one boot with: $(tail -n1 "$dir/cmd.sh" | sed 's/.*batch\.sh //'))"
	for g in $(guest_dirs "$dir"); do
		grc=0
		batch_verdict_guest "$g" "$name" || grc=$?
		[ "$rc" != 0 ] || rc=$grc
	done
	return "$rc"
}
batch_verdict_guest() {
	local gdir=$1 name=$2 d=$1/tests/$2 rc s=
	[ "$gdir" = "$dir" ] || s=" ($(basename "$gdir"))"
	if [ -f "$d/seconds" ]; then
		# The test's time: the longest of its guests'.
		[ -n "$STEP_TIME" ] && [ "$STEP_TIME" -ge "$(cat "$d/seconds")" ] || STEP_TIME=$(cat "$d/seconds")
	fi
	mkdir -p "$d"
	klog_of "$gdir/kernel.log" "$name" >"$d/kernel.log" 2>/dev/null || true
	echo "----- output$s ($d/output.txt)"
	cat "$d/output.txt" 2>/dev/null || true
	if [ ! -s "$d/rc" ]; then
		echo "----- kernel log while it ran$s ($d/kernel.log)"
		tail -n 40 "$d/kernel.log"
		echo "FAIL: the test did not finish$s (the VM stopped or timed out; see $gdir)"
		return 125
	fi
	rc=$(cat "$d/rc")
	echo "----- exit status $rc$s"
	if splats "$d/kernel.log" >"$d/kernel-splats.txt"; then
		echo "KERNEL WARNING during this test$s ($d/kernel.log):"
		head -n 20 "$d/kernel-splats.txt"
		[ "$rc" != 0 ] || rc=126
	else
		rm -f "$d/kernel-splats.txt"
	fi
	if [ -s "$d/kmemleak.txt" ]; then
		echo "KMEMLEAK: unreferenced objects after this test$s ($d/kmemleak.txt):"
		grep -m 5 'unreferenced object\|comm "' "$d/kmemleak.txt" || true
		[ "$rc" != 0 ] || rc=126
	fi
	return "$rc"
}

# The VM runs (boots) are units: a batch, a lone test, the harness self-test. They run in the
# background, ORDMA_JOBS at once (a run of two guests counts as one, of three or four as
# two), the longest
# first by the times the tests took last (in $ORDMA_STATE/vm-seconds/), each writing its
# step's log as it goes; their steps are reported in the order below, as each one's result is
# in. UNITS: the units in report order; UNIT_CMD[u]: its command; UNIT_AFTER[u]: the steps
# reported after it (a batch's tests: "DIR NAME ..."); UNIT_EST[u]: its expected seconds;
# UNIT_WEIGHT[u]: its share of the pool.
UNITS=()
declare -A UNIT_CMD=() UNIT_AFTER=() UNIT_ALONE=() UNIT_EST=() UNIT_WEIGHT=()
SECS=$ORDMA_STATE/vm-seconds
mkdir -p "$SECS"
# guests FILE: the guests a VM test boots (its `# run-args: --vms N`, else 1).
guests() { sed -n 's/^# run-args:.*--vms \([0-9]*\).*/\1/p' "$1" | head -n1 | grep . || echo 1; }
# est STEP: the seconds STEP took last time (a guess where it never ran: 60, 150 on the debug
# kernel).
est() {
	local t
	t=$(cat "$SECS/$1" 2>/dev/null) || t=
	[[ $t =~ ^[0-9]+$ ]] || t=$([[ $1 == vm-debug-* ]] && echo 150 || echo 60)
	echo "$t"
}
# A batch is cut where its tests' expected time passes ORDMA_BATCH_SECONDS (300; 600 on the
# debug kernel, whose boot costs more): boots of the default kernel are cheap (≈ 10 s), and
# batches of similar length keep every slot of the pool busy to the end.
batch_limit() { echo "${ORDMA_BATCH_SECONDS:-$([ "$1" = debug ] && echo 600 || echo 300)}"; }
# plan_vm_tests VARIANT FILE...: the selected tests, grouped into boots by the machine they need.
plan_vm_tests() {
	local variant=$1 f key keys=() n=0 i u pre=vm-${1:+$1-} limit sum chunk=() boot e
	shift
	limit=$(batch_limit "$variant")
	boot=$([ "$variant" = debug ] && echo 70 || echo 15)
	declare -A group=()
	for f; do
		selected "$pre$(basename "$f" .sh)" || continue
		if test_fresh "$f" || [ "${ORDMA_BATCH:-1}" = 0 ]; then
			key="fresh $f"
		else
			key=$(test_key "$f")
		fi
		[ -n "${group[$key]:-}" ] || keys+=("$key")
		group[$key]+="$f "
	done
	# add_unit FILE...: one boot for these tests.
	add_unit() {
		local fs=("$@") e=$boot i
		for i in "${fs[@]}"; do e=$((e + $(est "$pre$(basename "$i" .sh)"))); done
		if [ ${#fs[@]} = 1 ]; then
			u=$pre$(basename "${fs[0]}" .sh)
			UNIT_CMD[$u]="vm_test $(printf '%q ' "${fs[0]}" "$variant")"
			# Three guests or more on the debug kernel run alone: beside another run
			# (6 debug vCPUs and 2 more on 2 cores) a guest's early boot was seen to hang
			# in the clocksource watchdog and to take an interrupt KASAN reports.
			[ "$variant" != debug ] || [ "$(guests "${fs[0]}")" -lt 3 ] || UNIT_ALONE[$u]=1
		else
			n=$((n + 1))
			u=${pre}batch$n
			UNIT_CMD[$u]="vm_batch $(printf '%q ' "$variant" "$TR/$u" "${fs[@]}")"
			for i in "${fs[@]}"; do
				UNIT_AFTER[$u]+="$pre$(basename "$i" .sh):$(basename "$i" .sh) "
			done
		fi
		UNITS+=("$u")
		UNIT_EST[$u]=$e
		# Its share of the pool: a guest of a run of several waits for the others much of
		# the time, so two count as one (three or more as two).
		UNIT_WEIGHT[$u]=$((($(guests "${fs[0]}") + 1) / 2))
	}
	for key in "${keys[@]}"; do
		read -r -a fs <<<"${group[$key]}"
		chunk=() sum=0
		for i in "${fs[@]}"; do
			e=$(est "$pre$(basename "$i" .sh)")
			if [ ${#chunk[@]} -gt 0 ] && [ $((sum + e)) -gt "$limit" ]; then
				add_unit "${chunk[@]}"
				chunk=() sum=0
			fi
			chunk+=("$i")
			sum=$((sum + e))
		done
		[ ${#chunk[@]} = 0 ] || add_unit "${chunk[@]}"
	done
}
# run_unit NAME: its command, its log in $TR/NAME.run.log; then NAME.rc and NAME.seconds.
run_unit() {
	local u=$1 start=$SECONDS rc=0
	log "started $u"
	eval "${UNIT_CMD[$u]}" >"$TR/.units/$u.log" 2>&1 </dev/null || rc=$?
	echo $((SECONDS - start)) >"$TR/.units/$u.seconds"
	echo "$rc" >"$TR/.units/$u.rc"
	log "finished $u (exit $rc, $((SECONDS - start)) s)"
}
# unit_result NAME: a finished unit's log and exit status, as its step.
unit_result() {
	local t
	cat "$TR/.units/$1.log"
	STEP_TIME=$(cat "$TR/.units/$1.seconds")
	# Where a VM run's time went (qemu-test/vm-inner.sh's times.txt; guest 0's of several).
	t=$(guest_dirs "$TR/$1" | head -n1)/times.txt
	[ ! -s "$t" ] || STEP_NOTE=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "[boot %s s, tests %s s, kmemleak %s s, teardown %s s]", v["boot"], v["tests"], v["kmemleak"], v["teardown"] }' "$t")
	return "$(cat "$TR/.units/$1.rc")"
}
kill_tree() { # PID: it and all its descendants, SIGTERM
	local c
	for c in $(pgrep -P "$1"); do kill_tree "$c"; done
	kill -TERM "$1" 2>/dev/null || true
}
# run_units: all of UNITS, the pool in the background; each step reported in order as its
# unit finishes.
run_units() {
	local u t w jobs=$JOBS order=()
	[ ${#UNITS[@]} -gt 0 ] || return 0
	mkdir -p "$TR/.units"
	# The runs that take the whole pool first (later they would wait for it to empty, and
	# hold back the runs behind them), then the longest first (what a pool of equal slots
	# finishes soonest with), by the estimates.
	mapfile -t order < <(for u in "${UNITS[@]}"; do
		w=${UNIT_WEIGHT[$u]:-1}
		[ -z "${UNIT_ALONE[$u]:-}" ] || w=$jobs
		echo "$((w >= jobs ? 1 : 0)) ${UNIT_EST[$u]:-100} $u"
	done | sort -k1,1nr -k2,2nr -s | cut -d' ' -f3)
	log "${#UNITS[@]} VM runs, $jobs at a time (ORDMA_JOBS), longest first: $(for u in "${order[@]}"; do printf '%s (~%s s) ' "$u" "${UNIT_EST[$u]:-?}"; done)"
	(
		declare -A held=()
		used=0
		# reap: wait for one run to end, and give back its guests.
		reap() {
			local p=
			wait -n -p p || true
			[ -n "$p" ] || { used=0; held=(); return; }
			used=$((used - ${held[$p]:-0}))
			unset "held[$p]"
		}
		for u in "${order[@]}"; do
			w=${UNIT_WEIGHT[$u]:-1}
			[ -z "${UNIT_ALONE[$u]:-}" ] || w=$jobs
			[ "$w" -le "$jobs" ] || w=$jobs
			while [ "$used" -gt 0 ] && [ $((used + w)) -gt "$jobs" ]; do reap; done
			run_unit "$u" &
			held[$!]=$w
			used=$((used + w))
		done
		wait
	) &
	local pool=$!
	# Stopped (Ctrl-C, SIGTERM): the pool and every run in it with us; each run's harness
	# then stops its QEMU and NIC models.
	trap 'kill_tree '"$pool"'; exit 130' INT TERM
	for u in "${UNITS[@]}"; do
		while [ ! -s "$TR/.units/$u.rc" ]; do
			kill -0 "$pool" 2>/dev/null || [ -s "$TR/.units/$u.rc" ] ||
				{ echo "127" >"$TR/.units/$u.rc"; echo "the VM runs stopped before $u ran" >>"$TR/.units/$u.log"; }
			sleep 1
		done
		step "$u" unit_result "$u" || true
		for t in ${UNIT_AFTER[$u]:-}; do
			step "${t%%:*}" batch_verdict "$TR/$u" "${t#*:}" || true
		done
	done
	wait "$pool" || true
}

# The tier's VM tests: `# tier: full` ones only in the full tier; on the debug kernel those
# marked `# debug: core`, and in the full tier `# debug: full` too.
TESTS=() DEBUG_TESTS=()
for f in "$ORDMA_SRC"/qemu-test/tests/*.sh; do
	[ -n "$TIER" ] || ! grep -qx '# tier: full' "$f" || continue
	TESTS+=("$f")
	if grep -qx '# debug: core' "$f" || { [ -n "$TIER" ] && grep -qx '# debug: full' "$f"; }; then
		DEBUG_TESTS+=("$f")
	fi
done
vm_names() { local f; for f in "${@:2}"; do echo "vm-${1:+$1-}$(basename "$f" .sh)"; done; }
mapfile -t VM_NAMES < <(vm_names "" "${TESTS[@]}")
mapfile -t VM_DEBUG_NAMES < <(vm_names debug "${DEBUG_TESTS[@]}")
# With T=, the steps a selected step needs run too.
need_vm=; need_debug=
selected host-harness-selftest "${VM_NAMES[@]}" && need_vm=1
selected build-kernel-debug module-build-debug "${VM_DEBUG_NAMES[@]}" && need_debug=1
[ -z "$need_debug" ] || need_vm=1
ALL_STEPS=(build-root build-kernel lint-rustfmt lint-cargo-clippy cargo-test rtl-lint rtl-formal $([ -z "$TIER" ] || echo rtl-synth) fuzz module-clippy model-build
	provider-build module-build host-kconfig-check host-harness-selftest "${VM_NAMES[@]}"
	build-kernel-debug module-build-debug "${VM_DEBUG_NAMES[@]}")
if [ -n "$FILTER" ]; then
	selected "${ALL_STEPS[@]}" || die "T=$FILTER matches no step; the steps: ${ALL_STEPS[*]}"
	log "T=$FILTER: only the matching steps (and the builds they need)"
fi

log "test results: $TR (${TIER:+the $TIER tier: }${#TESTS[@]} VM tests, ${#DEBUG_TESTS[@]} on the debug kernel)"
step --show build-root "$ORDMA_SRC/scripts/build-root.sh" || { log "no build root; stopping"; exit 1; }
"$ORDMA_SRC/scripts/root-versions.sh" --check || true
step --show build-kernel "$ORDMA_SRC/scripts/build-kernel.sh" || { log "no test kernel; stopping"; exit 1; }
! selected lint-rustfmt || step lint-rustfmt inroot 'rustfmt --check --edition 2021 --config-path /ordma/kernel/.rustfmt.toml \
	drivers/infiniband/hw/ordma/ordma_main.rs && cargo fmt --all --check' || true
! selected lint-cargo-clippy || step lint-cargo-clippy inroot 'cargo clippy --workspace --all-targets --features ordma-model/rtl -- -D warnings' || true
! selected cargo-test || step cargo-test inroot 'cargo test --workspace --features ordma-model/rtl' || true
# The NIC's RTL (rtl/hdl): Verilator's lint of every block and mutant.
! selected rtl-lint || step rtl-lint inroot 'bash rtl/hdl/lint.sh' || true
# ... and the mux's bounded proof (yosys smtbmc, z3), its mutants caught: 7 cycles, 10 in the
# full tier (ORDMA_FORMAL_DEPTH).
! selected rtl-formal || step rtl-formal inroot "ORDMA_FORMAL_DEPTH=${ORDMA_FORMAL_DEPTH:-$([ -n "$TIER" ] && echo 10 || echo 7)} bash rtl/hdl/formal.sh" || true
# The full tier: the blocks synthesized and placed for an ECP5 (rtl/hdl/synth.sh; the figures
# in hardware.md), their reports in the step's folder.
rtl_synth() {
	mkdir -p "$TR/rtl-synth"
	"$ORDMA_SRC/scripts/in-root" --results "$TR/rtl-synth" -- bash -c 'cd /ordma/src && bash rtl/hdl/synth.sh /ordma/results'
}
[ -z "$TIER" ] || ! selected rtl-synth || step rtl-synth rtl_synth || true
# The model's parsers under libFuzzer, ORDMA_FUZZ_SECONDS (5; 30 in the full tier) per target; a crash's input is
# kept in the step's folder (scripts/fuzz.sh).
fuzz() {
	mkdir -p "$TR/fuzz"
	"$ORDMA_SRC/scripts/in-root" --results "$TR/fuzz" -- bash /ordma/src/scripts/fuzz.sh \
		"${ORDMA_FUZZ_SECONDS:-$([ -n "$TIER" ] && echo 30 || echo 5)}"
}
! selected fuzz || step fuzz fuzz || true
! selected module-clippy || step module-clippy module_clippy || true
# A failed model or provider build leaves the previous binaries in the target directory: the
# VM tests must not run them (guest_ok).
guest_ok=1
[ -z "$need_vm" ] && ! selected model-build || step model-build inroot 'cargo build --release -p ordma-model --features rtl' || guest_ok=
[ -z "$need_vm" ] && ! selected provider-build || step provider-build inroot 'cargo build --release -p ordma-provider -p ordma-verbs-data &&
	test -f /ordma/cache/target/release/libordma.so && test -x /ordma/cache/target/release/ordma-verbs-data' || guest_ok=
[ -n "$guest_ok" ] || log "the NIC model or the provider did not build: skipping every VM test (they would run the previous ones)"
if [ -n "$need_vm" ] || selected module-build host-kconfig-check; then
	if step module-build module_build; then
		! selected host-kconfig-check || step host-kconfig-check kconfig_check || true
		if [ -n "$guest_ok" ] && selected host-harness-selftest; then
			UNITS+=(host-harness-selftest)
			UNIT_CMD[host-harness-selftest]="$(printf '%q ' "$ORDMA_SRC/qemu-test/selftest.sh" "$TR/harness-selftest")"
			UNIT_EST[host-harness-selftest]=$(est host-harness-selftest)
		fi
		[ -z "$guest_ok" ] || plan_vm_tests "" "${TESTS[@]}"
	else
		log "module build failed: skipping the tests that need ordma.ko"
	fi
fi

# The debug kernel, and the tests that exercise object lifetimes, again on it.
if [ -n "$need_debug" ]; then
	if step --show build-kernel-debug env ORDMA_KERNEL=debug "$ORDMA_SRC/scripts/build-kernel.sh" &&
		step module-build-debug module_build_debug; then
		[ -z "$guest_ok" ] || plan_vm_tests debug "${DEBUG_TESTS[@]}"
	else
		log "no debug kernel or module: skipping the debug VM tests"
	fi
fi
run_units
# rdma-core's own suite on ordma0 against soft-RoCE: its tally in the summary.
for f in "$TR"/vm-rdma-core-suite.log; do
	[ -f "$f" ] || continue
	grep -h '^ *rdma-core suite:' "$f" | sed 's/^ */     /' | tee -a "$SUMMARY" >&2 || true
done

printf '%s: %d step(s) failed; %d s in all\n' "$([ $failed = 0 ] && echo PASS || echo FAIL)" \
	"$failed" "$((SECONDS - T0))" | tee -a "$SUMMARY" >&2
log "summary: $SUMMARY"
[ $failed = 0 ]
