#!/bin/bash
# Build ordma.ko for the test kernel ORDMA_KERNEL names (see lib.sh) and print its path.
#
# The default kernel's module is built in the tree (`make modules`: what `make KDIR=...`
# gives). A variant's (ORDMA_KERNEL=debug) is built from a copy of the module's sources in
# $ORDMA_STATE/module-<variant>, so the two builds never overwrite each other.
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
# The module's inputs only, never the tree's build products (those are the default kernel's:
# its generated ib_core bindings would be wrong here, which ib::AbiChecked refuses at load).
LIST=$ORDMA_STATE/$W.files
mkdir -p "$ORDMA_STATE"
(
	cd "$ORDMA_SRC"
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files --cached --others --exclude-standard -- Kbuild drivers rtl/ordma-hw/src uapi
	else
		find Kbuild drivers rtl/ordma-hw/src uapi -type f ! -name '*.o' ! -name '*.ko' \
			! -name '*.mod' ! -name '*.mod.c' ! -name '*.cmd' ! -name '*.rmeta' \
			! -name '*.d' ! -name modules.order ! -name Module.symvers ! -name 'bindings_generated.rs' ! -name 'uapi_generated.rs'
	fi
) >"$LIST"
# Inside the root: /ordma/cache is $ORDMA_STATE; /ordma/kernel the variant's kernel.
# tar keeps the sources' times (to the nanosecond: posix format), so the build stays
# incremental and sees an edit made within a second of the last build.
"$ORDMA_SRC/scripts/in-root" -- bash -euc "
	mkdir -p /ordma/cache/$W
	tar -C /ordma/src --format=posix -cf - -T /ordma/cache/$W.files | tar -C /ordma/cache/$W -xf -
	make -C /ordma/kernel M=/ordma/cache/$W LLVM=1 modules >&2
"
echo "$ORDMA_STATE/$W/drivers/infiniband/hw/ordma/ordma.ko"
