#!/bin/bash
# Check that every line of a kernel config fragment took effect in a .config.
#
# Usage: scripts/check-kconfig.sh FRAGMENT DOTCONFIG
#
# Kconfig silently drops what it cannot satisfy (a missing dependency, a renamed option), so
# scripts/kernel-inner.sh runs this after merge_config/olddefconfig and fails the build on any
# ERROR line. "CONFIG_X=v" must appear exactly; "# CONFIG_X is not set" must not be =y/=m.
set -euo pipefail
FRAG=$1
CONFIG=$2
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*)
		grep -qxF -- "$line" "$CONFIG" || {
			echo "ERROR: fragment line did not take effect: '$line' (.config has: '$(grep -E "^(# )?${line%%=*}[= ]" "$CONFIG" || echo nothing)')"
			bad=1
		} ;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }
		opt=${opt%% *}
		if grep -qE "^$opt=" "$CONFIG"; then
			echo "ERROR: fragment line did not take effect: '$line' (.config has: '$(grep -E "^$opt=" "$CONFIG")')"
			bad=1
		fi ;;
	"" | "#"*) ;;
	*)
		echo "ERROR: fragment line not understood: '$line'"
		bad=1 ;;
	esac
done <"$FRAG"
if [ $bad != 0 ]; then
	echo "ERROR: the kernel config fragment $FRAG did not apply; fix the lines above"
	exit 1
fi
echo "all $(grep -c '^CONFIG_\|^# CONFIG_.* is not set' "$FRAG") fragment lines took effect"
