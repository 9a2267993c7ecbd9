# Sourced by VM tests of Ethernet (RoCE) ports (qemu-test/run --link-layer ethernet):
#   roce_gid_index DEV A   the index of DEV's RoCE v2 GID of IPv4 address A in port 1's
#                          table (waits up to 10 s for ib_core to add it); a FAIL line on
#                          standard error and status 1 if there is none
roce_gid_index() {
	local dev=$1 a=$2 f want
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${a//./ })
	for _ in $(seq 100); do
		for f in /sys/class/infiniband/$dev/ports/1/gids/*; do
			[ "$(cat "$f" 2>/dev/null)" = "$want" ] || continue
			[ "$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null)" = "RoCE v2" ] || continue
			echo "${f##*/}"
			return
		done
		sleep 0.1
	done
	echo "FAIL: $dev has no RoCE v2 GID of $a" >&2
	return 1
}
