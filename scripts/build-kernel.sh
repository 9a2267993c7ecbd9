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
exec 8>"$ORDMA_CACHE/kernel.lock"
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
# Progress: one line a minute while make runs.
while kill -0 $PID 2>/dev/null; do
	for _ in $(seq 60); do
		kill -0 $PID 2>/dev/null || break
		sleep 1
	done
	kill -0 $PID 2>/dev/null &&
		log "kernel build: $((SECONDS - START)) s, $(grep -c '^  [A-Z]' "$LOG" || true) steps, last: $(tail -n1 "$LOG" | cut -c1-70)"
done
if ! wait $PID; then
	tail -n 30 "$LOG" >&2
	die "kernel build failed; full log: $LOG"
fi
touch "$TMP/.ordma-kernel-complete"
mv "$TMP" "$KDIR"
log "test kernel ready in $((SECONDS - START)) s: $KDIR"
echo "$KDIR"
