#!/bin/bash
# `make test`'s fuzz step, inside the build root (scripts/in-root --results DIR): builds the
# fuzz targets of fuzz/ (the NIC model's parsers of WQEs, frames and admin commands) with
# libFuzzer's coverage instrumentation, then runs each for SECONDS (the argument; 25) from its
# checked-in seeds (fuzz/corpus/<target>/). A crash, a timeout (10 s for one input) or a
# run-away memory use fails the step; the input that did it is kept as
# /ordma/results/<target>-crash-<sha1> (the step's folder in test-results/), to be added to
# fuzz/regressions/<target>/ with the fix. Documentation/testing.md, "Fuzzing".
#
# The flags are cargo-fuzz's (sanitizer-coverage's inline 8-bit counters, PC table and
# compare tracing; --cfg fuzzing; debug assertions and overflow checks), without a sanitizer:
# Debian's rustc ships no ASan runtime and -Zsanitizer needs a nightly compiler. `--target`
# keeps the flags off build scripts and proc macros, and the instrumented build in its own
# folder of the target directory.
set -euo pipefail
cd /ordma/src
secs=${1:-25}
triple=x86_64-unknown-linux-gnu
out=/ordma/results
flags=(--cfg fuzzing --check-cfg 'cfg(fuzzing)' -Cpasses=sancov-module
	-Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
	-Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares
	-Cdebug-assertions -Coverflow-checks)
export RUSTFLAGS="${flags[*]}"
start=$SECONDS
cargo build --release -p ordma-fuzz --features libfuzzer --target "$triple" --bins 2>&1 | tee "$out/build.log"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL: the fuzz targets did not build"; exit 1; }
if grep -E '^(warning|error)(\[|:)|: (warning|error|fatal error):' "$out/build.log"; then
	echo "FAIL: the fuzz build warned (lines above)"
	exit 1
fi
echo "built in $((SECONDS - start)) s"
rc=0
for t in wqe frame admin; do
	work=$(mktemp -d "/tmp/fuzz-$t.XXXXXX")
	echo "== $t: $secs s from fuzz/corpus/$t ($(ls "fuzz/corpus/$t" | wc -l) seeds)"
	# -timeout: one input; -rss_limit_mb: the model maps 1.1 GiB of (untouched) guest memory
	# per input. New inputs go to a scratch corpus, never into the repo.
	if ! "/ordma/cache/target/$triple/release/fuzz-$t" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$out/$t-" \
		"$work" "fuzz/corpus/$t" >"$out/$t.log" 2>&1; then
		rc=1
		echo "FAIL: fuzz-$t found a crash (the input: $(ls "$out/$t-"* 2>/dev/null | tr '\n' ' '))"
		grep -v '^#[0-9]' "$out/$t.log" | tail -n 60
	fi
	grep -E '^INFO: Seed|^stat::' "$out/$t.log" || true
	grep -E '^#[0-9]+' "$out/$t.log" | tail -n 1 || true
	rm -rf "$work"
done
exit $rc
