#!/bin/bash
# VM test: the guest's RDMA userland works: soft-RoCE (rxe0 over the guest's virtio-net eth0)
# shows up in `rdma link` and `ibv_devinfo`, and ibv_rc_pingpong exchanges and verifies data
# (--chk) over RC loopback. This is also the baseline ordma is measured against.
# nics: 0
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
rdma link show
rdma link show rxe0/1 | grep -q 'state ACTIVE' || fail "rxe0/1 is not ACTIVE"
ibv_devices
ibv_devinfo -d rxe0
ibv_devinfo -d rxe0 | grep -q 'state:.*PORT_ACTIVE' || fail "ibv_devinfo does not show rxe0 active"

# The RoCEv2 GID of 10.0.2.15 (::ffff:10.0.2.15).
gids=/sys/class/infiniband/rxe0/ports/1/gids
gid=
for _ in $(seq 300); do
	for f in "$gids"/*; do
		if [ "$(cat "$f" 2>/dev/null)" = "0000:0000:0000:0000:0000:ffff:0a00:020f" ]; then
			gid=${f##*/}
			break 2
		fi
	done
	sleep 0.1 # the GID table fills asynchronously after the link is added
done
[ -n "$gid" ] || fail "no IPv4 GID for 10.0.2.15 on rxe0"
echo "GID index $gid"

args=(-d rxe0 -g "$gid" -s 4096 -n 200 --chk)
ibv_rc_pingpong "${args[@]}" >server.log 2>&1 &
server=$!
# Wait until the server listens on its TCP port (18515) before connecting.
for _ in $(seq 300); do
	ss -ltn | grep -q ':18515 ' && break
	kill -0 $server 2>/dev/null || { cat server.log; fail "server exited early"; }
	sleep 0.1
done
ibv_rc_pingpong "${args[@]}" 127.0.0.1 | tee client.log
wait $server || { cat server.log; fail "server failed"; }
echo "server:"; cat server.log
grep -q '^1638400 bytes' client.log && grep -q '^1638400 bytes' server.log ||
	fail "pingpong did not move 200 x 4096 bytes each way (1638400 bytes reported)"
rdma link delete rxe0
echo "PASS: rxe-pingpong"
