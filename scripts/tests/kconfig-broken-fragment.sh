#!/bin/bash
# Host test: a fragment line that Kconfig drops fails the kernel build with a message naming
# it. Runs the real configuration step (untar, tinyconfig, merge_config, olddefconfig) of
# scripts/kernel-inner.sh in a scratch tree, with the repo's fragment plus two bad lines.
source "$(dirname "$0")/../lib.sh"
T=$(mktemp -d "$ORDMA_CACHE/kconfig-test.XXXXXX")
trap 'rm -rf --one-file-system "$T"' EXIT
{
	cat "$ORDMA_SRC/scripts/kernel.config"
	echo "CONFIG_ORDMA_NO_SUCH_OPTION=y"
	echo "CONFIG_NR_CPUS=8192"
} >"$T/broken.config"
rc=0
"$ORDMA_SRC/scripts/in-root" --kernel "$T" -- env ORDMA_FRAGMENT=/ordma/kernel/broken.config \
	ORDMA_CONFIG_ONLY=1 bash /ordma/src/scripts/kernel-inner.sh >"$T/log" 2>&1 || rc=$?
grep '^ERROR' "$T/log" || true
[ "$rc" != 0 ] || die "the configuration step accepted a broken fragment"
for want in "'CONFIG_ORDMA_NO_SUCH_OPTION=y'" "'CONFIG_NR_CPUS=8192'"; do
	grep -q "^ERROR: fragment line did not take effect: $want" "$T/log" ||
		die "no clear error for $want"
done
echo "PASS: a broken fragment fails the kernel build, naming the lines"
