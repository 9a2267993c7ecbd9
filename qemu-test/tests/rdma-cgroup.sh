#!/bin/bash
# VM test: ib_core's rdma cgroup bounds one user of ordma0 (issue 20, item 5). A greedy user
# (nobody, in cgroup `greedy`) takes all it can of the NIC (`verbs_ctx.py take`: contexts until
# one fails, then PDs on them until one fails) while another user (uid 1000, cgroup `other`)
# wants 64 contexts and 1024 PDs:
#   1. no limit: the greedy user gets all 2047 contexts (the 2048th ENOMEM) and 16384 PDs,
#      and the other user none (ENOMEM): one local user locks every other one out;
#   2. `rdma.max` of `greedy` = "ordma0 hca_handle=16 hca_object=1000": the greedy user gets
#      16 contexts and 1000 PDs, the next of each EAGAIN (ib_core's charge), `rdma.current`
#      reads the limit, and the other user gets its 64 contexts and 1024 PDs beside it;
#   3. the greedy user killed with SIGKILL: its charges go back (`rdma.current` all zero)
#      and the NIC holds no PD.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
CG=/sys/fs/cgroup
# usage: greedy's charges on ordma0 (its line of rdma.current).
usage() { sed -n 's/^\(ordma0 .*[^ ]\) *$/\1/p' $CG/greedy/rdma.current; }
pds_on_nic() { nic_ctl 0 status | grep -o ' pds=[0-9]*' | cut -d= -f2; }

mountpoint -q $CG || mount -t cgroup2 none $CG
grep -qw rdma $CG/cgroup.controllers || fail "the kernel has no rdma cgroup controller (CONFIG_CGROUP_RDMA)"
echo +rdma >$CG/cgroup.subtree_control
mkdir -p $CG/greedy $CG/other
cleanup() {
	exec 3>&- 2>/dev/null || true
	pkill -KILL -f 'verbs_ctx.py take' 2>/dev/null || true
	sleep 0.5
	rmdir $CG/greedy $CG/other 2>/dev/null || true
}
trap cleanup EXIT
chmod 755 /root 2>/dev/null || true

# as UID CGROUP ARGS...: verbs_ctx.py take ARGS as user UID, in cgroup CGROUP (with room for
# 2 files per context: its uverbs file and its async event file).
as() {
	local uid=$1 cg=$2
	shift 2
	sh -c "ulimit -n 8192 && echo \$\$ >$CG/$cg/cgroup.procs && exec setpriv --reuid=$uid --regid=$uid \
		--clear-groups --inh-caps=-all python3 $P/verbs_ctx.py take ordma0 $*"
}
# greedy: start the greedy user in the background, holding what it took until fd 3 closes.
greedy() {
	rm -f /tmp/greedy.in /tmp/greedy.out
	mkfifo /tmp/greedy.in
	as 65534 greedy 4096 100000 </tmp/greedy.in >/tmp/greedy.out 2>&1 &
	gpid=$!
	exec 3>/tmp/greedy.in
	for _ in $(seq 600); do grep -q '^contexts' /tmp/greedy.out && break; sleep 0.1; done
	grep -q '^contexts' /tmp/greedy.out || { cat /tmp/greedy.out; fail "the greedy user did not get to hold"; }
	took=$(cat /tmp/greedy.out)
	echo "greedy user: $took"
}
other() {
	local out
	out=$(echo | as 1000 other 64 1024) || true
	echo "other user: $out"
	other_took=$(head -n1 <<<"$out")
}

# 1. No limit.
[ "$(cat $CG/greedy/rdma.max)" = "" ] || grep -q "ordma0 hca_handle=max hca_object=max" $CG/greedy/rdma.max ||
	fail "greedy's rdma.max is not unlimited: $(cat $CG/greedy/rdma.max)"
greedy
[ "$took" = "contexts 2047 errno 12 pds 16384 errno 12" ] || fail "unlimited, the greedy user took: $took"
other
[ "$other_took" = "contexts 0 errno 12 pds 0 errno 0" ] || fail "with the NIC taken, the other user got: $other_took"
exec 3>&-
wait $gpid || fail "the greedy user did not free what it took: $(cat /tmp/greedy.out)"
grep -q '^freed' /tmp/greedy.out || fail "the greedy user did not free: $(cat /tmp/greedy.out)"

# 2. Limited.
echo "ordma0 hca_handle=16 hca_object=1000" >$CG/greedy/rdma.max
grep -q "^ordma0 hca_handle=16 hca_object=1000 *$" $CG/greedy/rdma.max || fail "rdma.max reads $(cat $CG/greedy/rdma.max)"
greedy
[ "$took" = "contexts 16 errno 11 pds 1000 errno 11" ] || fail "limited to 16 handles and 1000 objects, the greedy user took: $took"
current=$(usage)
[ "$current" = "ordma0 hca_handle=16 hca_object=1000" ] || fail "greedy's rdma.current: '$current'"
other
[ "$other_took" = "contexts 64 errno 0 pds 1024 errno 0" ] || fail "beside the limited user, the other user got: $other_took"
[ "$(pds_on_nic)" = 1000 ] || fail "the NIC holds $(pds_on_nic) PDs, the greedy user's 1000 expected"

# 3. The limited user killed: its charges and its objects go.
kill -KILL $gpid
wait $gpid 2>/dev/null || true
exec 3>&-
current=
for _ in $(seq 100); do
	current=$(usage)
	[ "$current" = "ordma0 hca_handle=0 hca_object=0" ] && [ "$(pds_on_nic)" = 0 ] && break
	sleep 0.2
done
[ "$current" = "ordma0 hca_handle=0 hca_object=0" ] || fail "after SIGKILL greedy's rdma.current is '$current'"
[ "$(pds_on_nic)" = 0 ] || fail "after SIGKILL the NIC holds $(pds_on_nic) PDs"
echo "PASS: rdma-cgroup"
