#!/bin/bash
# `make test`: everything, in order: build root, test kernel, lint (rustfmt, clippy for the
# module and the workspace), unit tests (cargo test), the module, NIC model and provider builds, host
# tests of the pipeline, and the VM tests (qemu-test/tests/*.sh, each in a fresh guest); then
# the debug kernel (KASAN, lockdep, kmemleak, UBSAN) and the VM tests marked `# debug: yes`
# again on it.
#
# Results: test-results/<time>/ holds one log per step, one results folder per VM run and
# summary.txt; test-results/latest points at the newest. Exit status 0 only if all passed.
source "$(dirname "$0")/lib.sh"
need_root_user

TR=$ORDMA_SRC/test-results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$TR"
ln -sfn "$TR" "$ORDMA_SRC/test-results/latest"
SUMMARY=$TR/summary.txt
: >"$SUMMARY"
failed=0
T0=$SECONDS

# step [--show] NAME COMMAND...: run it, log to $TR/NAME.log (--show: and to the terminal,
# for the long builds' progress), record PASS/FAIL and the time.
step() {
	local show= name start=$SECONDS rc=0
	[ "$1" != --show ] || { show=1; shift; }
	name=$1
	shift
	log "== $name"
	if [ -n "$show" ]; then
		"$@" 2>&1 | tee "$TR/$name.log" >&2 || rc=$?
	else
		"$@" >"$TR/$name.log" 2>&1 || rc=$?
	fi
	local t=$((SECONDS - start)) res=PASS
	if [ $rc != 0 ]; then
		res=FAIL
		failed=$((failed + 1))
		[ -n "$show" ] || tail -n 25 "$TR/$name.log" | sed 's/^/    /' >&2
	fi
	printf '%-4s %-34s %5d s%s\n' "$res" "$name" "$t" "$([ $rc = 0 ] || echo "  (exit $rc; $TR/$name.log)")" |
		tee -a "$SUMMARY" >&2
	return $rc
}
inroot() { "$ORDMA_SRC/scripts/in-root" -- bash -euc "cd /ordma/src; $1"; }
# The module build must be warning-free (rustc, clippy and the C compiler alike).
no_warnings() { ! grep -E '^(warning|error)(\[|:)|: warning:' "$1"; }
module_clippy() {
	inroot 'make -s KDIR=/ordma/kernel clean && make KDIR=/ordma/kernel CLIPPY=1 modules' | tee "$TR/module-clippy.out"
	no_warnings "$TR/module-clippy.out"
}
module_build() {
	inroot 'make -s KDIR=/ordma/kernel clean && make KDIR=/ordma/kernel modules' | tee "$TR/module-build.out"
	no_warnings "$TR/module-build.out" && test -f drivers/infiniband/hw/ordma/ordma.ko
}
vm_test() { # FILE [debug]
	local f=$1 variant=${2:-} nics timeout
	nics=$(sed -n 's/^# nics: *\([0-9]*\).*/\1/p' "$f" | head -n1)
	timeout=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "$f" | head -n1)
	# `# run-args:` lines: more qemu-test/run options, one option and its values per line.
	local args=() line
	while IFS= read -r line; do
		eval "args+=($line)"
	done < <(sed -n 's/^# run-args: *//p' "$f")
	ORDMA_KERNEL=$variant ORDMA_NO_BUILD=1 "$ORDMA_SRC/qemu-test/run" --nics "${nics:-1}" \
		--timeout "${timeout:-600}" "${args[@]}" \
		--results "$TR/vm-${variant:+$variant-}$(basename "$f" .sh)" -- \
		bash "/ordma/src/qemu-test/tests/$(basename "$f")"
}
module_build_debug() {
	ORDMA_KERNEL=debug "$ORDMA_SRC/scripts/build-module.sh" 2>&1 | tee "$TR/module-build-debug.out"
	no_warnings "$TR/module-build-debug.out" &&
		test -f "$ORDMA_STATE/module-debug/drivers/infiniband/hw/ordma/ordma.ko"
}

log "test results: $TR"
step --show build-root "$ORDMA_SRC/scripts/build-root.sh" || { log "no build root; stopping"; exit 1; }
step --show build-kernel "$ORDMA_SRC/scripts/build-kernel.sh" || { log "no test kernel; stopping"; exit 1; }
step lint-rustfmt inroot 'rustfmt --check --edition 2021 --config-path /ordma/kernel/.rustfmt.toml \
	drivers/infiniband/hw/ordma/ordma_main.rs && cargo fmt --all --check' || true
step lint-cargo-clippy inroot 'cargo clippy --workspace --all-targets -- -D warnings' || true
step cargo-test inroot 'cargo test --workspace' || true
step module-clippy module_clippy || true
step model-build inroot 'cargo build --release -p ordma-model' || true
step provider-build inroot 'cargo build --release -p ordma-provider &&
	test -f /ordma/cache/target/release/libordma.so' || true
if step module-build module_build; then
	step host-kconfig-check "$ORDMA_SRC/scripts/tests/kconfig-broken-fragment.sh" || true
	step host-harness-selftest "$ORDMA_SRC/qemu-test/selftest.sh" "$TR/harness-selftest" || true
	for f in "$ORDMA_SRC"/qemu-test/tests/*.sh; do
		step "vm-$(basename "$f" .sh)" vm_test "$f" || true
	done
else
	log "module build failed: skipping the tests that need ordma.ko"
fi

# The debug kernel, and the tests that exercise object lifetimes, again on it.
if step --show build-kernel-debug env ORDMA_KERNEL=debug "$ORDMA_SRC/scripts/build-kernel.sh" &&
	step module-build-debug module_build_debug; then
	for f in "$ORDMA_SRC"/qemu-test/tests/*.sh; do
		grep -qx '# debug: yes' "$f" || continue
		step "vm-debug-$(basename "$f" .sh)" vm_test "$f" debug || true
	done
else
	log "no debug kernel or module: skipping the debug VM tests"
fi

printf '%s: %d step(s) failed; %d s in all\n' "$([ $failed = 0 ] && echo PASS || echo FAIL)" \
	"$failed" "$((SECONDS - T0))" | tee -a "$SUMMARY" >&2
log "summary: $SUMMARY"
[ $failed = 0 ]
