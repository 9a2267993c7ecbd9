#!/bin/bash
# VM test: RoCEv2 across machines. Two guests (--vms 2), one ordma NIC each, both ports
# Ethernet (--link-layer ethernet): each NIC's netdev (the guest's virtio-net device of the
# NIC's MAC, whose frames pass through the NIC model onto the wire) has 10.78.<G>.1/16.
# The side channel (TCP) is eth0 (10.0.0.<G+1>). Checked:
# - IP between the guests over the ordma netdevs (ping both ways: ARP and ICMP, the host's
#   frames through the NIC models and the wire);
# - each NIC's GID of its 10.78 address (RoCE v2), and then, addressed by GID (-g) as every
#   RoCE tool addresses a peer (the destination MAC resolved by ib_core from the neighbour
#   table): ibv_rc_pingpong, bytes checked, polling and with -e; ibv_uc_pingpong and
#   ibv_ud_pingpong (UD: the GRH area filled by the NIC); perftest's ib_write_bw,
#   ib_read_bw, ib_send_bw, ib_atomic_bw (-x GID index); afterwards neither NIC holds a
#   PD, MR, CQ or QP, and neither refused a frame;
# Interop with soft-RoCE: roce-rxe.sh.
# nics: 1
# run-args: --vms 2
# run-args: --link-layer ethernet
# timeout: 900
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
source $P/vms.sh
source $P/roce.sh
[ "$ORDMA_VMS" = 2 ] || fail "wants two guests (--vms 2), not $ORDMA_VMS"
objects() { nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
me=10.78.$ORDMA_VM.1
peer=10.78.$((1 - ORDMA_VM)).1
nd=$(ip -br -4 addr | awk -v a="$me/16" '$3 == a { print $1 }')
[ -n "$nd" ] || { ip -br addr; fail "no netdev with $me"; }
dev=$(ls /sys/class/infiniband | head -n1)
[ "$dev" = ordma0 ] || fail "the RDMA device is '$dev', not ordma0"
ibv_devinfo -d ordma0 | grep -q 'link_layer:[[:space:]]*Ethernet' || { ibv_devinfo -d ordma0; fail "not Ethernet"; }
rdma link show ordma0/1 | grep -q "netdev $nd" || { rdma link show; fail "ordma0 is not paired with $nd"; }
echo "vm$ORDMA_VM: ordma0 on $nd ($me), $(cat /sys/class/net/$nd/address)"
nic_mark 0


# 1. IP over the ordma netdevs, through the NIC models and their wire.
vm_flag "up-vm$ORDMA_VM"
vm_wait_flag "up-vm$((1 - ORDMA_VM))" 300 || fail "the other guest never came up"
busybox ping -c 3 -W 5 -I "$nd" "$peer" >/tmp/ping.out 2>&1 || { cat /tmp/ping.out; fail "no ping to $peer over $nd"; }
grep -q ' 0% packet loss' /tmp/ping.out || { cat /tmp/ping.out; fail "ping lost packets"; }
echo "ok: ping $peer over $nd: $(tail -n1 /tmp/ping.out)"

# 2. ordma to ordma, by GID.
g=$(roce_gid_index ordma0 "$me")
echo "vm$ORDMA_VM: ordma0's GID index $g is $me"
vm_pair rc 18515 ibv_rc_pingpong -d ordma0 -g "$g" -s 4096 -n 500 -c
grep -q "500 iters in" /tmp/rc.out || fail "ibv_rc_pingpong: no result line"
vm_pair rc-events 18516 ibv_rc_pingpong -d ordma0 -g "$g" -s 65536 -n 100 -c -e
grep -q "100 iters in" /tmp/rc-events.out || fail "ibv_rc_pingpong -e: no result line"
vm_pair uc 18517 ibv_uc_pingpong -d ordma0 -g "$g" -s 4096 -n 200 -c
grep -q "200 iters in" /tmp/uc.out || fail "ibv_uc_pingpong: no result line"
vm_pair ud 18518 ibv_ud_pingpong -d ordma0 -g "$g" -s 1024 -n 200 -c
grep -q "200 iters in" /tmp/ud.out || fail "ibv_ud_pingpong: no result line"
echo "ok: ibv_rc_pingpong (polling, -e), ibv_uc_pingpong, ibv_ud_pingpong -g between vm0's and vm1's ordma0, --chk"
port=18600
for t in "ib_write_bw -s 65536" "ib_read_bw -s 65536" "ib_send_bw -s 65536" "ib_atomic_bw -A FETCH_AND_ADD"; do
	name=${t%% *}
	# shellcheck disable=SC2086
	vm_pair "$name" $port $t -d ordma0 -x "$g" -F -n 200
	[ "$ORDMA_VM" = 0 ] || grep -Eq '^ *[0-9]+ +200 ' "/tmp/$name.out" || fail "$name: no result line for 200 iterations"
	port=$((port + 1))
done
echo "ok: ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw -x between vm0's and vm1's ordma0"
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "vm$ORDMA_VM's NIC still holds $(objects)"
[ "$(nic_since 0 bad_frames)" = 0 ] || fail "vm$ORDMA_VM's NIC refused $(nic_since 0 bad_frames) frames: $(nic_ctl 0 status)"
echo "PASS: roce-vms (vm$ORDMA_VM)"
