#!/bin/bash
# Build ordma.ko for the test kernel ORDMA_KERNEL names (see lib.sh) and print its path.
#
# The default kernel's module is built in the tree (`make modules`: what `make KDIR=...`
# gives). A variant's (ORDMA_KERNEL=debug) is built from a copy of the module's sources in
# the checkout's target dir (lib.sh's target_dir, /ordma/cache/target in the root), in
# module-<variant>, so the two builds never overwrite each other, nor another checkout's.
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
T=$(target_dir)
LIST=$T/$W.files
mkdir -p "$T"
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
# Inside the root: /ordma/cache/target is $T; /ordma/kernel the variant's kernel.
# tar keeps the sources' times (to the nanosecond: posix format), so the build stays
# incremental and sees an edit made within a second of the last build.
"$ORDMA_SRC/scripts/in-root" -- bash -euc "
	mkdir -p /ordma/cache/target/$W
	tar -C /ordma/src --format=posix -cf - -T /ordma/cache/target/$W.files | tar -C /ordma/cache/target/$W -xf -
	make -C /ordma/kernel M=/ordma/cache/target/$W LLVM=1 modules >&2
"
echo "$T/$W/drivers/infiniband/hw/ordma/ordma.ko"
