#!/bin/bash
# The kernel build proper; runs inside the build root (scripts/build-kernel.sh calls it),
# in an empty /ordma/kernel.
#
# ORDMA_FRAGMENT=FILE  use another fragment (the tests use a broken one)
# ORDMA_FRAGMENT_EXTRA=FILE  a second fragment merged on top (the debug variant's)
# ORDMA_CONFIG_ONLY=1  stop after the configuration and its check
set -euo pipefail
cd /ordma/kernel
FRAG=${ORDMA_FRAGMENT:-/ordma/src/scripts/kernel.config}
EXTRA=${ORDMA_FRAGMENT_EXTRA:-}
MK=(make LLVM=1 -j"$(nproc)")

echo "== unpacking linux-source"
tar -xf /usr/src/linux-source-7.3.tar.xz --strip-components=1
echo "== configuring: tinyconfig + $FRAG${EXTRA:+ + $EXTRA}"
"${MK[@]}" tinyconfig
scripts/kconfig/merge_config.sh -m .config "$FRAG" $EXTRA
"${MK[@]}" olddefconfig

# Every fragment line must have taken effect: Kconfig drops what it cannot satisfy silently.
bash /ordma/src/scripts/check-kconfig.sh "$FRAG" .config
[ -z "$EXTRA" ] || bash /ordma/src/scripts/check-kconfig.sh "$EXTRA" .config
[ -z "${ORDMA_CONFIG_ONLY:-}" ] || exit 0
"${MK[@]}" rustavailable
echo "== building"
"${MK[@]}" bzImage modules
echo "== installing modules into mods/"
"${MK[@]}" INSTALL_MOD_PATH=/ordma/kernel/mods modules_install
make -s kernelrelease >kernelrelease.txt
echo "== done: $(cat kernelrelease.txt)"
