# Common definitions for ordma's scripts. Source it; do not run it.
#
# ORDMA_CACHE   where build roots, kernels and cargo state live (default ~/.cache/ordma)
# ORDMA_KERNEL  which test kernel: "" (the default) or "debug" (KASAN, lockdep, kmemleak,
#               UBSAN: scripts/kernel-debug.config on top of scripts/kernel.config)
# ORDMA_DEBIAN_MIRROR  Debian mirror for debootstrap (default: the host's own apt mirror)
# ORDMA_KEEP_RESULTS  how many results folders to keep in qemu-test/results/ and
#               test-results/ (default 20; the oldest go first)
# ORDMA_STATE   cargo home and the target dirs, one per checkout (target_dir below: the
#               cargo builds and the debug module's); default $ORDMA_CACHE/state

set -euo pipefail

ORDMA_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ORDMA_CACHE=${ORDMA_CACHE:-${HOME:-/root}/.cache/ordma}
ORDMA_STATE=${ORDMA_STATE:-$ORDMA_CACHE/state}
# Bump when the way a root is made changes (not its package list).
ORDMA_ROOT_FORMAT=1
# Bump when the way a kernel is built changes (not its fragment).
ORDMA_KERNEL_FORMAT=1

log() { printf '[ordma %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[ordma] error: %s\n' "$*" >&2; exit 1; }

# The build root's hash: its package list plus the format version.
root_hash() {
	{ echo "format $ORDMA_ROOT_FORMAT"; grep -v '^#' "$ORDMA_SRC/scripts/root-packages.txt"; } |
		sha256sum | cut -c1-16
}

root_dir() { echo "$ORDMA_CACHE/root-$(root_hash)"; }

# The packages the kernels are built with: root-packages.txt up to its "# End of the
# kernel's toolchain" line. Packages added below that line make a new root but reuse the
# kernels.
toolchain_packages() {
	sed "/^# End of the kernel's toolchain/q" "$ORDMA_SRC/scripts/root-packages.txt" | grep -v '^#'
}

# The kernel's hash: the toolchain and source it is built with (the root's packages above
# the marker, and the root's format), fragment and format.
kernel_hash() {
	{
		echo "format $ORDMA_KERNEL_FORMAT"
		echo "root format $ORDMA_ROOT_FORMAT"
		toolchain_packages
		cat "$ORDMA_SRC/scripts/kernel.config"
		if [ -n "${ORDMA_KERNEL:-}" ]; then
			echo "variant $ORDMA_KERNEL"
			cat "$(kernel_variant_fragment)"
		fi
	} | sha256sum | cut -c1-16
}

# The variant's extra fragment (ORDMA_KERNEL=debug: scripts/kernel-debug.config).
kernel_variant_fragment() {
	case ${ORDMA_KERNEL:-} in
	debug) echo "$ORDMA_SRC/scripts/kernel-debug.config" ;;
	*) die "unknown ORDMA_KERNEL '${ORDMA_KERNEL:-}' (want nothing or debug)" ;;
	esac
}

kernel_dir() { echo "$ORDMA_CACHE/kernel-${ORDMA_KERNEL:+$ORDMA_KERNEL-}$(kernel_hash)"; }

# This checkout's cargo target dir (in-root mounts it at /ordma/cache/target): one per
# checkout, keyed by its path, because cargo judges freshness by modification times and two
# checkouts sharing a target dir (a CI clone, a working tree) would each take the other's
# newer build for fresh.
target_dir() { echo "$ORDMA_STATE/target-$(printf %s "$ORDMA_SRC" | sha256sum | cut -c1-12)"; }

# fresh_tmp DIR WHAT: make DIR an empty directory, first removing what an interrupted run
# left there (WHAT names it in the log).
fresh_tmp() {
	if [ -e "$1" ]; then
		log "removing $2 from an interrupted run: $1"
		rm -rf --one-file-system "$1"
	fi
	mkdir -p "$1"
}

need_root_user() {
	[ "$(id -u)" = 0 ] || die "this step needs root (debootstrap, chroot and mount namespaces)"
}

# prune_results DIR: delete all but the newest $ORDMA_KEEP_RESULTS (default 20) timestamped
# folders (<date>-<time>[-...]) in DIR; `latest` and anything else is left alone.
prune_results() {
	local keep=${ORDMA_KEEP_RESULTS:-20} d
	[[ $keep =~ ^[0-9]+$ ]] && [ "$keep" -gt 0 ] || keep=20
	[ -d "$1" ] || return 0
	find "$1" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended \
		-regex '.*/[0-9]{8}-[0-9]{6}(-.*)?' -printf '%f\n' | sort -r | tail -n +$((keep + 1)) |
		while IFS= read -r d; do rm -rf --one-file-system "${1:?}/$d"; done
}

# wait_progress PID INTERVAL COMMAND...: wait for background job PID, logging COMMAND's
# one-line output every INTERVAL seconds while it runs (the long builds' progress on the
# terminal); returns PID's exit status.
wait_progress() {
	local pid=$1 every=$2 start=$SECONDS
	shift 2
	while kill -0 "$pid" 2>/dev/null; do
		for _ in $(seq "$every"); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 1
		done
		! kill -0 "$pid" 2>/dev/null || log "$(($SECONDS - start)) s: $("$@" 2>/dev/null)"
	done
	wait "$pid"
}
