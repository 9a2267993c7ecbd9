#!/bin/bash
# Build (or reuse) ordma's pinned build root: Debian trixie + trixie-backports, made by
# debootstrap, holding the toolchain, the Linux source, QEMU and the RDMA userland. The same
# root is the guest's root filesystem.
#
# Result: $ORDMA_CACHE/root-<hash>, hash of scripts/root-packages.txt. It is built in
# root-<hash>.tmp and renamed only when complete, so an interrupted run never leaves a root
# that looks usable; the next run deletes the leftover and starts again.
#
# Usage: scripts/build-root.sh        prints the root's path on stdout
source "$(dirname "$0")/lib.sh"
need_root_user

ROOT=$(root_dir)
if [ -f "$ROOT/.ordma-root-complete" ]; then
	echo "$ROOT"
	exit 0
fi

mkdir -p "$ORDMA_CACHE"
exec 9>"$ORDMA_CACHE/root.lock"
flock 9
# Another run may have finished it while we waited for the lock.
if [ -f "$ROOT/.ordma-root-complete" ]; then
	echo "$ROOT"
	exit 0
fi

# The mirror: ORDMA_DEBIAN_MIRROR, else the first Debian mirror the host's apt uses.
host_mirror() {
	local m
	m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' |
		grep -v -- '-security' | head -n1 || true)
	[ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
		awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
	echo "$m"
}
MIRROR=${ORDMA_DEBIAN_MIRROR:-$(host_mirror)}
[ -n "$MIRROR" ] || die "no Debian mirror found in the host's apt sources; set ORDMA_DEBIAN_MIRROR"

if ! command -v debootstrap >/dev/null || [ ! -e /usr/share/debootstrap/scripts/trixie ]; then
	log "installing debootstrap on the host"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
		die "cannot install debootstrap"
fi

TMP=$ROOT.tmp
fresh_tmp "$TMP" "a half-made root"
LOG=$ORDMA_CACHE/root-build.log
: >"$LOG"
log "building the build root $ROOT (log: $LOG)"

START=$SECONDS
log "debootstrap trixie (minbase) from $MIRROR ..."
# In a private mount namespace: whatever debootstrap mounts inside the target vanishes with it.
unshare --mount --propagation private \
	debootstrap --variant=minbase trixie "$TMP" "$MIRROR" >>"$LOG" 2>&1 &
trap 'kill $! 2>/dev/null; exit 130' INT TERM
wait_progress $! 10 bash -c 'echo "debootstrap: $(grep -c "^I: \(Retrieving\|Validating\)" "$1") downloaded, $(grep -c "^I: \(Extracting\|Unpacking\)" "$1") unpacked, $(grep -c "^I: Configuring" "$1") configured"' _ "$LOG" ||
	die "debootstrap failed; see $LOG"
log "debootstrap done in $((SECONDS - START)) s"

cat >"$TMP/etc/apt/sources.list" <<SRC
deb $MIRROR trixie main
deb $MIRROR trixie-updates main
deb $MIRROR trixie-backports main
SRC
# No daemons in the chroot, no docs.
printf '#!/bin/sh\nexit 101\n' >"$TMP/usr/sbin/policy-rc.d"
chmod +x "$TMP/usr/sbin/policy-rc.d"

mapfile -t PKGS < <(grep -v '^#' "$ORDMA_SRC/scripts/root-packages.txt" | sed '/^\s*$/d')
log "installing ${#PKGS[@]} packages ..."
cp /etc/resolv.conf "$TMP/etc/resolv.conf"
unshare --mount --propagation private bash -euc '
	t=$1; shift
	mount -t proc proc "$t/proc"
	mount --rbind /sys "$t/sys"
	mount --rbind /dev "$t/dev"
	chroot "$t" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		apt-get update
	chroot "$t" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends "$@"
	chroot "$t" apt-get clean
' _ "$TMP" "${PKGS[@]}" >>"$LOG" 2>&1 &
wait_progress $! 10 bash -c 'echo "packages: $(grep -c "^Get:" "$1") downloaded, $(grep -c "^Unpacking " "$1") unpacked, $(grep -c "^Setting up " "$1") set up"' _ "$LOG" ||
	die "package installation failed; see $LOG"
log "packages installed in $((SECONDS - START)) s"

# Mount points the harness binds into, and the guest's fixed paths.
mkdir -p "$TMP/ordma/src" "$TMP/ordma/kernel" "$TMP/ordma/results" "$TMP/ordma/cache" \
	"$TMP/ordma/guestroot" "$TMP/ordma/host"
touch "$TMP/ordma/host/ca.crt"
# The guest's hostname and a minimal fstab-free setup.
echo ordma-guest >"$TMP/etc/hostname"
# Versions, for the record and for the tests.
chroot "$TMP" dpkg-query -W -f '${Package} ${Version}\n' >"$TMP/ordma/versions.txt"
grep -E '^(rustc|bindgen|clang|linux-source-7.3|qemu-system-x86|rdma-core|perftest) ' \
	"$TMP/ordma/versions.txt" | sed 's/^/  /' >&2
touch "$TMP/.ordma-root-complete"
mv "$TMP" "$ROOT"
log "build root ready in $((SECONDS - START)) s: $ROOT ($(du -sh "$ROOT" | cut -f1))"
echo "$ROOT"
