#!/bin/bash
# Where a guest's boot goes, under TCG: boots each test kernel (the default one; with
# --debug, the debug one too) with `initcall_debug` and runs nothing, then reads the kernel's
# log: the time to each of the guest's marks (ordma-boot: init, switch_root, stage2, insmod,
# command; qemu-test/guest/init and stage2), the slowest initcalls, and the harness's split
# of the run (times.txt). Writes boot-profile.txt into each run's results folder and prints
# it.
#
# Usage: qemu-test/boot-profile.sh [--debug] [--nics N]
source "$(dirname "$0")/../scripts/lib.sh"
need_root_user
variants=("")
NICS=1
while [ $# -gt 0 ]; do
	case $1 in
	--debug) variants+=(debug); shift ;;
	--nics) NICS=$2; shift 2 ;;
	*) die "usage: qemu-test/boot-profile.sh [--debug] [--nics N]" ;;
	esac
done
for v in "${variants[@]}"; do
	res=$ORDMA_SRC/qemu-test/results/boot-profile${v:+-$v}
	rm -rf "$res"
	mkdir -p "$(dirname "$res")"
	ORDMA_KERNEL=$v "$ORDMA_SRC/qemu-test/run" --nics "$NICS" --append initcall_debug --results "$res" -- true \
		>"$res.out" 2>&1 || { tail -n 20 "$res.out"; die "the ${v:-default} kernel's run failed ($res)"; }
	k=$res/kernel.log
	{
		echo "== the ${v:-default} kernel: $(cat "$res/times.txt")"
		echo "-- the guest's marks (seconds since the kernel started):"
		grep -E '\] (ordma-boot: |Run /init|Freeing unused kernel)' "$k" | sed 's/^\[ *\([0-9.]*\)\] /\1  /'
		echo "-- the slowest initcalls (ms):"
		sed -n 's/.*initcall \([^ ]*\) returned .* after \([0-9]*\) usecs.*/\2 \1/p' "$k" | sort -nr | head -n 15 |
			awk '{ printf "%8.1f  %s\n", $1 / 1000, $2 }'
		echo "-- all initcalls: $(sed -n 's/.*returned .* after \([0-9]*\) usecs.*/\1/p' "$k" |
			awk '{ s += $1; n++ } END { printf "%d, %.1f s in all", n, s / 1e6 }')"
	} | tee "$res/boot-profile.txt"
done
