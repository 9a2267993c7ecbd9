#!/bin/bash
# The kernel build proper; runs inside the build root (scripts/build-kernel.sh calls it).
set -euo pipefail
cd /ordma/kernel
FRAG=/ordma/src/scripts/kernel.config
MK=(make LLVM=1 -j"$(nproc)")

echo "== unpacking linux-source"
tar -xf /usr/src/linux-source-7.3.tar.xz --strip-components=1
echo "== configuring: tinyconfig + $FRAG"
"${MK[@]}" tinyconfig
scripts/kconfig/merge_config.sh -m .config "$FRAG"
"${MK[@]}" olddefconfig

# Every fragment line must have taken effect: Kconfig drops what it cannot satisfy silently.
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*)
		grep -qxF -- "$line" .config || {
			echo "ERROR: fragment line did not take effect: '$line' (.config has: '$(grep -E "^(# )?${line%%=*}[= ]" .config || echo nothing)')"
			bad=1
		} ;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }; opt=${opt%% *}
		if grep -qE "^$opt=" .config; then
			echo "ERROR: fragment line did not take effect: '$line' (.config has: '$(grep -E "^$opt=" .config)')"
			bad=1
		fi ;;
	""|"#"*) ;;
	*) echo "ERROR: fragment line not understood: '$line'"; bad=1 ;;
	esac
done <"$FRAG"
if [ $bad != 0 ]; then
	echo "ERROR: the kernel config fragment $FRAG did not apply; fix the lines above"
	exit 1
fi
echo "== all fragment lines took effect"
"${MK[@]}" rustavailable
echo "== building"
"${MK[@]}" bzImage modules
echo "== installing modules into mods/"
"${MK[@]}" INSTALL_MOD_PATH=/ordma/kernel/mods modules_install
make -s kernelrelease >kernelrelease.txt
echo "== done: $(cat kernelrelease.txt)"
