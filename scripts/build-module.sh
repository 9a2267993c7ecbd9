#!/bin/bash
# Build ordma.ko for the test kernel ORDMA_KERNEL names (see lib.sh) and print its path.
#
# The default kernel's module is built in the tree (`make modules`: what `make KDIR=...`
# gives). A variant's (ORDMA_KERNEL=debug) is built from a copy of the module's sources in
# $ORDMA_CACHE/state/module-<variant>, so the two builds never overwrite each other.
source "$(dirname "$0")/lib.sh"
need_root_user

"$ORDMA_SRC/scripts/build-kernel.sh" >/dev/null
if [ -z "${ORDMA_KERNEL:-}" ]; then
	make -s -C "$ORDMA_SRC" modules >&2
	echo "$ORDMA_SRC/drivers/infiniband/hw/ordma/ordma.ko"
	exit 0
fi
kernel_variant_fragment >/dev/null
W=module-$ORDMA_KERNEL
# Inside the root: /ordma/cache is $ORDMA_CACHE/state; /ordma/kernel the variant's kernel.
"$ORDMA_SRC/scripts/in-root" -- bash -euc "
	mkdir -p /ordma/cache/$W
	cd /ordma/cache/$W
	# The module's inputs, at the same relative paths (hw.rs and the Kbuild reach into rtl/
	# and uapi/); build products from the last build stay, so the build is incremental.
	for d in drivers rtl/ordma-hw/src uapi; do
		mkdir -p \$d
		cp -a --update /ordma/src/\$d/. \$d/
	done
	cp -a /ordma/src/Kbuild .
	make -C /ordma/kernel M=/ordma/cache/$W LLVM=1 modules >&2
"
echo "$ORDMA_CACHE/state/$W/drivers/infiniband/hw/ordma/ordma.ko"
