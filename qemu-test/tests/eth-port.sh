#!/bin/bash
# VM test: the Ethernet port (NIC interface 1.4, RoCEv2) as the driver presents it. Both NIC
# models report link layer Ethernet and their MAC; the harness gives the guest one
# virtio-net device per NIC with the NIC's MAC (02:6f:72:64:00:<NIC + 1>) and its address
# 10.78.<guest>.<NIC + 1>/16. Checked:
# - ibv_devinfo shows link_layer Ethernet on both NICs; `rdma link` shows each ordma port's
#   netdev, the one with the NIC's MAC;
# - ib_core's GID table (sysfs gids/, gid_attrs/types/, gid_attrs/ndevs/) holds the
#   netdev's IPv4-mapped address and its fe80 link-local one as RoCE v2 entries of that
#   netdev, and the NIC holds as many entries as sysfs shows (its `status` line's gids=);
# - `ip addr add`/`del` of another IPv4 and an IPv6 address adds and removes their GIDs,
#   in sysfs and on the NIC;
# - `ip link set down` of the netdev: the port goes DOWN and a verbs process gets
#   IBV_EVENT_PORT_ERR; `up`: ACTIVE and IBV_EVENT_PORT_ACTIVE;
# - an AH without a GRH is refused (EINVAL), one with a GRH to the port's own address is
#   made, one with SL 8 is refused by the driver (EINVAL);
# - the netdev's own driver unbound: the port is unpaired and DOWN; rebound: paired again;
#   ordma unbound and rebound: paired again with its GIDs; rmmod with the netdev present
#   and with it gone leaves no reference on a netdev (it unregisters at once) and the NIC
#   holds no GID, PD, MR, CQ or QP.
# nics: 2
# run-args: --link-layer ethernet
# fresh-vm: yes
# debug: full
# timeout: 900
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
D=/sys/bus/pci/drivers/ordma
KO=/ordma/payload/ordma.ko
pci=(0000:00:06.0 0000:00:07.0)

ibdev() { ls "/sys/bus/pci/devices/${pci[$1]}/infiniband" 2>/dev/null; }
mac() { printf '02:6f:72:64:00:%02x' $(($1 + 1)); }
# The netdev with NIC N's MAC.
netdev_of() { ip -br link | awk -v m="$(mac "$1")" '$3 == m { print $1 }'; }
# What `rdma link` names as the netdev of DEV's port 1 (empty for none).
rdma_netdev() { rdma link show "$1/1" | grep -o 'netdev [^ ]*' | cut -d' ' -f2 || true; }
# A GID as sysfs prints it: an IPv4 address mapped, an IPv6 one in full. Bash alone, as
# the table's reads below: a process per GID entry costs seconds on the debug kernel.
gid_of() {
	local a=$1 head tail h=() t=() w=() n
	if [[ $a != *:* ]]; then
		IFS=. read -r -a w <<<"$a"
		printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "${w[@]}"
		return
	fi
	head=$a tail=
	[[ $a != *::* ]] || { head=${a%%::*}; tail=${a#*::}; }
	[ -z "$head" ] || IFS=: read -r -a h <<<"$head"
	[ -z "$tail" ] || IFS=: read -r -a t <<<"$tail"
	w=("${h[@]}")
	for ((n = ${#h[@]} + ${#t[@]}; n < 8; n++)); do w+=(0); done
	w+=("${t[@]}")
	printf '%04x:%04x:%04x:%04x:%04x:%04x:%04x:%04x\n' $(for n in "${w[@]}"; do echo $((16#$n)); done)
}
# The index of GID G in DEV's table with type RoCE v2 and netdev ND; empty if none.
gid_index() {
	local g=$2 nd=$3 f i v s=/sys/class/infiniband/$1/ports/1
	for f in "$s"/gids/*; do
		i=${f##*/}
		read -r v <"$f" || continue
		[ "$v" = "$g" ] || continue
		read -r v <"$s/gid_attrs/types/$i" 2>/dev/null || continue
		[ "$v" = "RoCE v2" ] || continue
		read -r v <"$s/gid_attrs/ndevs/$i" 2>/dev/null || continue
		[ "$v" = "$nd" ] || continue
		echo "$i"
		return
	done
}
# Waits up to 10 s for GID G of DEV (netdev ND) to be there (want=1) or gone (want=0).
wait_gid() {
	local dev=$1 g=$2 nd=$3 want=$4
	for _ in $(seq 100); do
		if [ -n "$(gid_index "$dev" "$g" "$nd")" ]; then [ "$want" = 1 ] && return 0
		else [ "$want" = 0 ] && return 0; fi
		sleep 0.1
	done
	grep -H . /sys/class/infiniband/"$dev"/ports/1/gids/* | grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$' || true
	fail "$dev: GID $g of $nd is $([ "$want" = 1 ] && echo missing || echo still there)"
}
# Entries of DEV's table that are set (not zero).
sysfs_gids() { cat /sys/class/infiniband/"$1"/ports/1/gids/* | grep -vxc '0000:0000:0000:0000:0000:0000:0000:0000' || true; }
# The NIC's count of set GID entries (`status`' gids=), empty if the model does not say.
nic_gids() { nic_ctl "$1" status | grep -o ' gids=[0-9]*' | cut -d= -f2 || true; }
# NIC N's GID count agrees with DEV's sysfs table (within 10 s), if the model reports one.
check_nic_gids() {
	local n=$1 dev=$2 g
	[ -n "$(nic_gids "$n")" ] || { echo "(NIC $n's status has no gids= count: not compared)"; return 0; }
	for _ in $(seq 100); do
		g=$(nic_gids "$n")
		[ "$g" = "$(sysfs_gids "$dev")" ] && return 0
		sleep 0.1
	done
	fail "NIC $n holds $g GIDs, $dev's table in sysfs $(sysfs_gids "$dev")"
}
wait_port() {
	for _ in $(seq 300); do
		rdma link show "$1/1" | grep -q "state $2 " && return
		sleep 0.1
	done
	rdma link show "$1/1"
	fail "$1/1 did not become $2"
}
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }

# 1. Ethernet ports, paired with the netdevs of their MACs.
declare -a dev nd
for n in 0 1; do
	dev[n]=$(ibdev $n)
	nd[n]=$(netdev_of $n)
	[ -n "${dev[n]}" ] || fail "NIC $n has no ib_device"
	[ -n "${nd[n]}" ] || fail "no netdev with NIC $n's MAC $(mac $n): $(ip -br link)"
	ibv_devinfo -d "${dev[n]}" | grep -q 'link_layer:[[:space:]]*Ethernet' ||
		{ ibv_devinfo -d "${dev[n]}"; fail "${dev[n]}: link_layer is not Ethernet"; }
	[ "$(rdma_netdev "${dev[n]}")" = "${nd[n]}" ] ||
		{ rdma link show; fail "${dev[n]}/1 is not paired with ${nd[n]}"; }
	wait_port "${dev[n]}" ACTIVE
	echo "ok: ${dev[n]} (NIC $n): link_layer Ethernet, port 1 ACTIVE, netdev ${nd[n]} ($(mac $n))"
done
rdma link show

# 2. The GID table: the netdev's IPv4-mapped address and its link-local one, RoCE v2.
declare -a v4s
for n in 0 1; do
	v4=$(ip -4 -o addr show dev "${nd[n]}" | awk '{ print $4 }' | head -n1)
	[ -n "$v4" ] || fail "${nd[n]} has no IPv4 address"
	v4s[n]=$v4
	v4=${v4%/*}
	ll=$(ip -6 -o addr show dev "${nd[n]}" scope link | awk '{ print $4 }' | cut -d/ -f1 | head -n1)
	[ -n "$ll" ] || fail "${nd[n]} has no link-local IPv6 address"
	wait_gid "${dev[n]}" "$(gid_of "$v4")" "${nd[n]}" 1
	wait_gid "${dev[n]}" "$(gid_of "$ll")" "${nd[n]}" 1
	check_nic_gids $n "${dev[n]}"
	echo "ok: ${dev[n]}: RoCE v2 GIDs of ${nd[n]}: $v4 (index $(gid_index "${dev[n]}" "$(gid_of "$v4")" "${nd[n]}")), $ll (index $(gid_index "${dev[n]}" "$(gid_of "$ll")" "${nd[n]}")); $(sysfs_gids "${dev[n]}") set, the NIC's count $(nic_gids $n)"
done

# 3. Addresses added and removed.
before=$(sysfs_gids "${dev[0]}")
ip addr add 10.79.0.1/16 dev "${nd[0]}"
ip -6 addr add 2001:db8::1/64 dev "${nd[0]}" nodad
wait_gid "${dev[0]}" "$(gid_of 10.79.0.1)" "${nd[0]}" 1
wait_gid "${dev[0]}" "$(gid_of 2001:db8::1)" "${nd[0]}" 1
[ "$(sysfs_gids "${dev[0]}")" = $((before + 2)) ] || fail "two addresses added, GIDs $before -> $(sysfs_gids "${dev[0]}")"
check_nic_gids 0 "${dev[0]}"
echo "ok: ip addr add 10.79.0.1/16 and 2001:db8::1/64: their GIDs are in ${dev[0]}'s table and on the NIC"
ip addr del 10.79.0.1/16 dev "${nd[0]}"
ip -6 addr del 2001:db8::1/64 dev "${nd[0]}"
wait_gid "${dev[0]}" "$(gid_of 10.79.0.1)" "${nd[0]}" 0
wait_gid "${dev[0]}" "$(gid_of 2001:db8::1)" "${nd[0]}" 0
[ "$(sysfs_gids "${dev[0]}")" = "$before" ] || fail "two addresses removed, GIDs $((before + 2)) -> $(sysfs_gids "${dev[0]}")"
check_nic_gids 0 "${dev[0]}"
echo "ok: ip addr del: both GIDs gone from the table and the NIC"

# 4. The netdev's carrier is the port's: down, then up, with the events.
# Its IPv6 addresses go and come back with it: GID change events between, not counted.
python3 $P/async_events.py "${dev[0]}" --ignore "GID table change" "port error" "port active" >/tmp/ev.out 2>&1 &
waiter=$!
for _ in $(seq 300); do grep -q '^ready' /tmp/ev.out && break; sleep 0.1; done
grep -q '^ready' /tmp/ev.out || { cat /tmp/ev.out; fail "the verbs process did not open ${dev[0]}"; }
ip link set "${nd[0]}" down
wait_port "${dev[0]}" DOWN
ibv_devinfo -d "${dev[0]}" | grep -q 'state:.*PORT_DOWN' || fail "ibv_devinfo does not show the port DOWN"
for _ in $(seq 300); do grep -q '^event port error' /tmp/ev.out && break; sleep 0.1; done
grep -q '^event port error' /tmp/ev.out || { cat /tmp/ev.out; fail "no IBV_EVENT_PORT_ERR"; }
echo "ok: ip link set ${nd[0]} down: ${dev[0]}/1 DOWN, IBV_EVENT_PORT_ERR"
ip link set "${nd[0]}" up
wait_port "${dev[0]}" ACTIVE
rc=0
wait $waiter || rc=$?
cat /tmp/ev.out
[ $rc = 0 ] || fail "the verbs process did not get PORT_ERR then PORT_ACTIVE (exit $rc)"
[ "$(grep -c '^event ' /tmp/ev.out)" = 2 ] || fail "expected exactly two events"
echo "ok: ip link set ${nd[0]} up: ACTIVE, IBV_EVENT_PORT_ACTIVE"
# The NIC's own link is the other half: its link down makes the port DOWN too.
nic_ctl 0 link down >/dev/null || fail "the model refused 'link down'"
wait_port "${dev[0]}" DOWN
nic_ctl 0 link up >/dev/null || fail "the model refused 'link up'"
wait_port "${dev[0]}" ACTIVE
echo "ok: the NIC's link down and up: ${dev[0]}/1 DOWN, then ACTIVE"

# 5. Address handles: RoCE addresses are global.
v4=$(ip -4 -o addr show dev "${nd[0]}" | awk '{ print $4 }' | cut -d/ -f1 | head -n1)
idx=$(gid_index "${dev[0]}" "$(gid_of "$v4")" "${nd[0]}")
python3 - "${dev[0]}" "$(gid_of "$v4")" "$idx" <<'EOF' || fail "address handles"
import sys
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError

dev, gid, idx = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = Context(name=dev)
pd = PD(ctx)


def make(what, **kw):
    try:
        AH(pd, attr=AHAttr(port_num=1, **kw)).close()
        return 0
    except PyverbsRDMAError as e:
        return e.error_code


gr = lambda: GlobalRoute(dgid=GID(gid), sgid_index=idx, hop_limit=64)
r = make("no GRH", dlid=1)
assert r == 22, f"an AH without a GRH: errno {r}, not EINVAL"
print("ok: an AH without a GRH: EINVAL")
r = make("GRH", is_global=1, gr=gr())
assert r == 0, f"an AH with a GRH to the port's own address: errno {r}"
print(f"ok: an AH with a GRH to {gid} (source GID {idx}) made")
r = make("SL 8", is_global=1, gr=gr(), sl=8)
assert r == 22, f"an AH with SL 8: errno {r}, not EINVAL"
print("ok: an AH with SL 8: EINVAL")
pd.close()
ctx.close()
EOF

# 6. The netdev goes away and comes back; so does ordma's device.
vdev=$(basename "$(readlink -f "/sys/class/net/${nd[1]}/device")")
VN=/sys/bus/virtio/drivers/virtio_net
echo "$vdev" >$VN/unbind
[ -z "$(rdma_netdev "${dev[1]}")" ] || fail "${dev[1]} still paired after its netdev's driver was unbound"
wait_port "${dev[1]}" DOWN
[ "$(sysfs_gids "${dev[1]}")" = 0 ] || fail "${dev[1]} kept GIDs of an unregistered netdev"
echo "ok: ${nd[1]} unregistered: ${dev[1]} unpaired, DOWN, no GID"
echo "$vdev" >$VN/bind
for _ in $(seq 100); do [ -n "$(netdev_of 1)" ] && break; sleep 0.1; done
nd[1]=$(netdev_of 1)
[ -n "${nd[1]}" ] || fail "no netdev with NIC 1's MAC after rebinding virtio-net"
ip link set "${nd[1]}" up
ip addr add "${v4s[1]}" dev "${nd[1]}"
[ "$(rdma_netdev "${dev[1]}")" = "${nd[1]}" ] || fail "${dev[1]} not paired with the re-registered ${nd[1]}"
wait_port "${dev[1]}" ACTIVE
wait_gid "${dev[1]}" "$(gid_of "${v4s[1]%/*}")" "${nd[1]}" 1
echo "ok: ${nd[1]} registered again: ${dev[1]} paired with it, ACTIVE, its GID back"

echo "${pci[0]}" >$D/unbind
[ -z "$(ibdev 0)" ] || fail "NIC 0's ib_device outlived the unbind"
echo "${pci[0]}" >$D/bind
dev[0]=$(ibdev 0)
[ -n "${dev[0]}" ] || fail "no ib_device after rebinding NIC 0"
[ "$(rdma_netdev "${dev[0]}")" = "${nd[0]}" ] || fail "${dev[0]} not paired again after rebind"
wait_port "${dev[0]}" ACTIVE
wait_gid "${dev[0]}" "$(gid_of "$v4")" "${nd[0]}" 1
check_nic_gids 0 "${dev[0]}"
echo "ok: ordma unbound and rebound: ${dev[0]} paired with ${nd[0]} again, its GIDs set"

for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC $n still holds $(objects $n)"
done
# rmmod with both netdevs there; then one netdev unregisters at once (no reference of
# ordma's left on it), ordma is loaded again without it, pairs with the other, and goes.
rmmod ordma
for n in 0 1; do
	g=$(nic_gids $n)
	[ -z "$g" ] || [ "$g" = 0 ] || fail "NIC $n holds $g GIDs after rmmod"
done
vdev0=$(basename "$(readlink -f "/sys/class/net/${nd[0]}/device")")
timeout 30 sh -c "echo $vdev0 >$VN/unbind" || fail "${nd[0]} did not unregister after rmmod ordma (a reference left?)"
insmod $KO
for _ in $(seq 100); do [ -n "$(ibdev 0)" ] && [ -n "$(ibdev 1)" ] && break; sleep 0.1; done
[ -z "$(rdma_netdev "$(ibdev 0)")" ] || fail "NIC 0 paired with no netdev of its MAC"
[ "$(rdma_netdev "$(ibdev 1)")" = "${nd[1]}" ] || fail "NIC 1 not paired after insmod"
wait_port "$(ibdev 0)" DOWN
echo "ok: insmod without NIC 0's netdev: NIC 0 unpaired and DOWN, NIC 1 paired"
rmmod ordma
vdev1=$(basename "$(readlink -f "/sys/class/net/${nd[1]}/device")")
timeout 30 sh -c "echo $vdev1 >$VN/unbind" || fail "${nd[1]} did not unregister after rmmod ordma"
echo "ok: rmmod with a netdev present and with one gone; both netdevs unregister at once after"
echo "PASS: eth-port"
