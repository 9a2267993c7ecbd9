#!/bin/bash
# The exact package versions of the build root, against the ones the repo was last tested
# with (scripts/root-versions.txt, committed).
#
# Every root records its own (`dpkg-query -W` when it is built) in /ordma/versions.txt
# inside it. The package list (scripts/root-packages.txt) names packages, not versions, and
# Debian updates trixie, so a root built later can differ: `make test` and `make run` say so.
#
# Usage: scripts/root-versions.sh --check    print a notice listing the differences (exit 0)
#        scripts/root-versions.sh --update   write the current root's versions into
#                                            scripts/root-versions.txt (after `make test`
#                                            passed on it; commit the result)
source "$(dirname "$0")/lib.sh"
ROOT=$(root_dir)
HAVE=$ROOT/ordma/versions.txt
WANT=$ORDMA_SRC/scripts/root-versions.txt
[ -f "$ROOT/.ordma-root-complete" ] || die "no build root at $ROOT; run scripts/build-root.sh"
if [ ! -f "$HAVE" ]; then
	chroot "$ROOT" dpkg-query -W -f '${Package} ${Version}\n' >"$HAVE"
fi
case ${1:---check} in
--update)
	{
		echo "# The build root's package versions the repo was last tested with."
		echo "# Regenerate: scripts/root-versions.sh --update (after make test passed)."
		sort "$HAVE"
	} >"$WANT"
	log "wrote $(grep -vc '^#' "$WANT") package versions to $WANT"
	;;
--check)
	[ -f "$WANT" ] || { log "NOTICE: no $WANT to compare the root's package versions with"; exit 0; }
	diffs=$(awk '
		FNR == NR { if ($0 !~ /^#/ && NF == 2) want[$1] = $2; next }
		NF == 2 { have[$1] = $2 }
		END {
			for (p in have)
				if (!(p in want)) printf "  %s %s (new)\n", p, have[p]
				else if (want[p] != have[p]) printf "  %s %s (tested: %s)\n", p, have[p], want[p]
			for (p in want) if (!(p in have)) printf "  %s (tested: %s; not in this root)\n", p, want[p]
		}' "$WANT" "$HAVE" | sort)
	if [ -n "$diffs" ]; then
		log "NOTICE: the build root's package versions differ from the ones the repo was last tested with ($(echo "$diffs" | wc -l) package(s); scripts/root-versions.txt, root: $HAVE):"
		echo "$diffs" >&2
	fi
	;;
*) die "usage: scripts/root-versions.sh --check|--update" ;;
esac
