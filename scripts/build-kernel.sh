#!/bin/bash
# Build (or reuse) ordma's test kernel: the build root's linux-source, `make tinyconfig` plus
# scripts/kernel.config, LLVM=1. Result: $ORDMA_CACHE/kernel-<hash> (hash of the root, the
# fragment and this script's format), a kernel tree that `make KDIR=...` builds modules
# against, with bzImage and the installed modules (mods/lib/modules/...).
#
# Built in kernel-<hash>.tmp and renamed when complete; an interrupted build is redone.
# Inside the root the tree is always /ordma/kernel, so its absolute paths stay valid.
#
# Usage: scripts/build-kernel.sh     prints the kernel tree's path on stdout
#        ORDMA_KERNEL=debug scripts/build-kernel.sh   the debug variant (see lib.sh)
source "$(dirname "$0")/lib.sh"
need_root_user

"$ORDMA_SRC/scripts/build-root.sh" >/dev/null
KDIR=$(kernel_dir)
if [ -f "$KDIR/.ordma-kernel-complete" ]; then
	echo "$KDIR"
	exit 0
fi
EXTRA=
[ -z "${ORDMA_KERNEL:-}" ] || EXTRA=/ordma/src/scripts/$(basename "$(kernel_variant_fragment)")
# One lock per variant: the default and the debug kernel can build at the same time.
exec 8>"$ORDMA_CACHE/kernel${ORDMA_KERNEL:+-$ORDMA_KERNEL}.lock"
flock 8
if [ -f "$KDIR/.ordma-kernel-complete" ]; then
	echo "$KDIR"
	exit 0
fi

TMP=$KDIR.tmp
fresh_tmp "$TMP" "a half-built kernel"
LOG=$ORDMA_CACHE/kernel-${ORDMA_KERNEL:+$ORDMA_KERNEL-}build.log
log "building the ${ORDMA_KERNEL:+$ORDMA_KERNEL }test kernel into $KDIR (LLVM=1; about 13–16 min on 2 cores; log: $LOG)"
START=$SECONDS
"$ORDMA_SRC/scripts/in-root" --kernel "$TMP" -- \
	env ORDMA_FRAGMENT_EXTRA="$EXTRA" bash /ordma/src/scripts/kernel-inner.sh >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; exit 130' INT TERM
# Progress: one line every 30 s while make runs, with how far along it is: make's steps
# against the count of the last complete build of this variant (or the measured default).
# The step count of an earlier build, for the percentage; none on a cold cache (where the
# glob matches nothing and cat fails: not an error).
EXPECT=$(cat "$ORDMA_CACHE"/kernel-${ORDMA_KERNEL:+$ORDMA_KERNEL-}????????????????/.ordma-build-steps 2>/dev/null | tail -n1 || true)
[ -n "$EXPECT" ] || EXPECT=$([ -n "${ORDMA_KERNEL:-}" ] && echo 2400 || echo 2370)
progress() {
	local n
	n=$(grep -c '^  [A-Z]' "$LOG" || true)
	echo "${ORDMA_KERNEL:+$ORDMA_KERNEL }kernel build: $n/~$EXPECT steps (~$((n * 100 / EXPECT > 99 ? 99 : n * 100 / EXPECT))%), last: $(tail -n1 "$LOG" | cut -c1-60)"
}
if ! wait_progress $PID 30 progress; then
	tail -n 30 "$LOG" >&2
	die "kernel build failed; full log: $LOG"
fi
grep -c '^  [A-Z]' "$LOG" >"$TMP/.ordma-build-steps" || true
touch "$TMP/.ordma-kernel-complete"
mv "$TMP" "$KDIR"
log "test kernel ready in $((SECONDS - START)) s: $KDIR"
echo "$KDIR"
