#!/bin/bash
# Gets rdma-core's own headers for the version of libibverbs-dev installed here, the
# legitimate way: Debian's source package of that exact version, downloaded by apt with
# the hashes from the mirror's signed Sources index. Then makes an include directory laid
# out as rdma-core's cmake build lays out its build/include (the private headers
# infiniband/driver.h, kern-abi.h, cmd_*.h, ccan/, util/, the generated config.h and
# kernel-abi/), for the provider's ABI test (userspace-provider/src/abi_check.rs).
# Nothing of it is ever committed (Documentation/testing.md).
#
# Usage: rdma-core-source.sh DIR   (run as root, inside the build root: scripts/in-root)
# Prints the include directory. Cached in DIR: once complete, later runs download nothing.
# All apt state (lists, downloads) stays in DIR; the root's own apt state is not touched.
set -euo pipefail
die() { echo "rdma-core-source.sh: $*" >&2; exit 1; }
[ $# = 1 ] || die "usage: rdma-core-source.sh DIR"
dir=$1

ver=$(dpkg-query -W -f='${source:Version}' libibverbs-dev 2>/dev/null) ||
	die "libibverbs-dev is not installed (run inside the build root)"
[ -n "$ver" ] || die "cannot tell libibverbs-dev's source version"
out=$dir/rdma-core-$ver
if [ -f "$out/.complete" ]; then
	echo "$out/include"
	exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
[ -f "$out/.complete" ] && { echo "$out/include"; exit 0; }

# apt with a private sources list (the root's own mirrors, as deb-src) and private state.
apt=$dir/apt
rm -rf "$apt" "$out.tmp"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts" "$out.tmp/src"
sed -n 's/^deb[[:space:]]\+/deb-src /p' /etc/apt/sources.list >"$apt/sources.list" 2>/dev/null || true
for f in /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] && sed -n 's/^deb[[:space:]]\+/deb-src /p' "$f" >>"$apt/sources.list"
done
[ -s "$apt/sources.list" ] || die "no 'deb' line in /etc/apt/sources.list to derive a deb-src line from"
O=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
	-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=root"
	-o "Debug::NoLocking=true" -q)
apt-get "${O[@]}" update >&2 || die "apt-get update of the deb-src index failed (network to the Debian mirror?)"
uris=$(apt-get "${O[@]}" source --print-uris "rdma-core=$ver" 2>/dev/null | grep "^'") ||
	die "the mirror's Sources index has no rdma-core $ver"
# Each line: 'URI' NAME SIZE SHA256:HASH. The .dsc is not needed (and some mirrors lack it):
# the tarballs' hashes come from the signed index all the same.
n=0
while read -r uri name _ hash; do
	uri=${uri//\'/}
	case $name in *.dsc) continue ;; esac
	/usr/lib/apt/apt-helper "${O[@]}" download-file "$uri" "$out.tmp/$name" "$hash" >&2 ||
		die "download of $name failed or its hash is not $hash"
	n=$((n + 1))
done <<<"$uris"
orig=$(ls "$out.tmp"/rdma-core_*.orig.tar.* 2>/dev/null) || die "no orig tarball among $n files"
tar -xf "$orig" -C "$out.tmp/src" --strip-components=1
s=$out.tmp/src
# Debian's patches, as dpkg-source would apply them (none touches libibverbs in 56.1-1).
if deb=$(ls "$out.tmp"/rdma-core_*.debian.tar.* 2>/dev/null); then
	tar -xf "$deb" -C "$s"
	if [ -f "$s/debian/patches/series" ]; then
		while read -r p _; do
			case $p in '' | '#'*) continue ;; esac
			patch -d "$s" -p1 -s --no-backup-if-mismatch <"$s/debian/patches/$p" || die "patch $p"
		done <"$s/debian/patches/series"
	fi
fi

# build/include as rdma-core's cmake makes it (libibverbs/, kernel-headers/, ccan/, util/
# CMakeLists.txt: publish_headers, publish_internal_headers, rdma_kernel_provider_abi).
inc=$out.tmp/include
mkdir -p "$inc/infiniband" "$inc/rdma" "$inc/linux" "$inc/kernel-abi"
for h in arch.h opcode.h sa-kern-abi.h sa.h verbs.h verbs_api.h tm_types.h \
	cmd_ioctl.h cmd_write.h driver.h kern-abi.h marshall.h; do
	ln -s "../../src/libibverbs/$h" "$inc/infiniband/$h"
done
ln -s ../../src/kernel-headers/rdma/ib_user_ioctl_verbs.h "$inc/infiniband/"
for h in "$s"/kernel-headers/rdma/*.h; do ln -s "../../src/kernel-headers/rdma/${h##*/}" "$inc/rdma/"; done
for h in "$s"/kernel-headers/linux/*.h; do ln -s "../../src/kernel-headers/linux/${h##*/}" "$inc/linux/"; done
ln -s ../src/ccan "$inc/ccan"
ln -s ../src/util "$inc/util"
python3 "$s/buildlib/make_abi_structs.py" "$s/kernel-headers/rdma/ib_user_verbs.h" \
	"$inc/kernel-abi/ib_user_verbs.h"
# config.h from buildlib/config.h.in with CMakeLists.txt's values: the private ABI number,
# the package version, both ioctl and write commands (the default), 64-bit long.
cmake_var() { sed -n "s/^set($1 \"\\(.*\\)\")/\\1/p" "$s/CMakeLists.txt" | head -n1; }
pabi=$(cmake_var IBVERBS_PABI_VERSION)
pver=$(cmake_var PACKAGE_VERSION)
[ -n "$pabi" ] || die "no IBVERBS_PABI_VERSION in rdma-core's CMakeLists.txt"
sed -e "s/@IBVERBS_PABI_VERSION@/$pabi/" -e "s/@PACKAGE_VERSION@/$pver/" \
	-e "s/@IOCTL_MODE_NUM@/3/" -e "s/@SIZEOF_LONG_CODE@/#define SIZEOF_LONG 8/" \
	-e "s/@IBVERBS_PROVIDER_SUFFIX@/-rdmav$pabi.so/" \
	-e 's/@[A-Za-z_]*@//g' -e 's/^#cmakedefine /#define /' \
	"$s/buildlib/config.h.in" >"$inc/config.h"

rm -rf "$out" "$apt"
mv "$out.tmp" "$out"
# The tarballs stay next to the tree (a few MB); the apt state (≈12 MB of index) does not.
touch "$out/.complete"
echo "$out/include"
