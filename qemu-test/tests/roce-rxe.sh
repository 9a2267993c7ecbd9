#!/bin/bash
# VM test: ordma and the kernel's own RoCEv2, soft-RoCE, on one wire. Two guests (--vms 2),
# one Ethernet ordma NIC each (--link-layer ethernet; the NIC's netdev has 10.78.<G>.1/16),
# every frame of each NIC's port captured (--capture). vm1 unloads ordma: its NIC's GID
# table empties, so the NIC hands every frame to its netdev, an ordinary virtio-net, on
# which vm1 runs rdma_rxe (rxe0). Between vm0's ordma0 and vm1's rxe0, addressed by GID:
# - ibv_rc_pingpong -g both ways (ordma the server, then soft-RoCE), ibv_ud_pingpong -g,
#   bytes checked (--chk);
# - perftest's ib_send_bw, ib_write_bw, ib_read_bw and ib_write_lat, ib_read_lat (-x), both
#   ways (soft-RoCE the client, then ordma);
# - vm0's NIC refused no frame, holds no object afterwards;
# - vm0's capture (both directions: ordma's frames and soft-RoCE's), decoded by tshark:
#   every UDP 4791 frame decodes as RoCEv2 (InfiniBand over UDP), RC SENDs both ways, ACKs,
#   no frame malformed or with a warning; and every frame's ICRC right
#   (qemu-test/progs/roce-icrc.py).
# nics: 1
# run-args: --vms 2
# run-args: --link-layer ethernet
# run-args: --capture
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
nd=$(ip -br -4 addr | awk -v a="$me/16" '$3 == a { print $1 }')
[ -n "$nd" ] || { ip -br addr; fail "no netdev with $me"; }


if [ "$ORDMA_VM" = 1 ]; then
	rmmod ordma
	for _ in $(seq 100); do [ "$(nic_ctl 0 status | grep -o ' gids=[0-9]*')" = " gids=0" ] && break; sleep 0.1; done
	[ "$(nic_ctl 0 status | grep -o ' gids=[0-9]*')" = " gids=0" ] || fail "the NIC kept GIDs after rmmod: $(nic_ctl 0 status)"
	modprobe rdma_rxe
	rdma link add rxe0 type rxe netdev "$nd"
	dev=rxe0
else
	dev=ordma0
	ibv_devinfo -d ordma0 | grep -q 'link_layer:[[:space:]]*Ethernet' || { ibv_devinfo -d ordma0; fail "not Ethernet"; }
fi
g=$(roce_gid_index "$dev" "$me")
echo "vm$ORDMA_VM: $dev on $nd, GID index $g ($me)"

vm_pair rc 18520 ibv_rc_pingpong -d "$dev" -g "$g" -s 4096 -n 200 -c
grep -q '^1638400 bytes' /tmp/rc.out || fail "ibv_rc_pingpong did not move 200 x 4096 bytes each way"
# The other way round: soft-RoCE serves, ordma connects.
case $ORDMA_VM in
1) vm_serve rc-back 18521 ibv_rc_pingpong -d "$dev" -g "$g" -s 1024 -n 200 -c; cp /tmp/rc-back.srv /tmp/rc-back.out ;;
0) vm_connect rc-back 1 18521 ibv_rc_pingpong -d "$dev" -g "$g" -s 1024 -n 200 -c; cp /tmp/rc-back.cli /tmp/rc-back.out ;;
esac
grep -q '^409600 bytes' /tmp/rc-back.out || fail "ibv_rc_pingpong (soft-RoCE serving) did not move 200 x 1024 bytes each way"
vm_pair ud 18522 ibv_ud_pingpong -d "$dev" -g "$g" -s 1024 -n 200 -c
grep -q '200 iters in' /tmp/ud.out || fail "ibv_ud_pingpong: no result line"
echo "ok: ibv_rc_pingpong -g both ways and ibv_ud_pingpong -g between vm0's ordma0 and vm1's soft-RoCE rxe0, --chk"
port=18620
for t in ib_send_bw ib_write_bw ib_read_bw; do
	vm_pair "$t" $port $t -d "$dev" -x "$g" -F -n 100 -s 16384
	[ "$ORDMA_VM" = 0 ] || grep -Eq '^ *16384 +100 ' "/tmp/$t.out" || fail "$t: no result line for 16384 B x 100"
	port=$((port + 1))
done
# -o 16: perftest's latency tools take each side's own maximum of READs in flight (soft-RoCE
# 128, ordma 16), not the smaller; a QP asked for more than its device has is refused.
for t in ib_write_lat "ib_read_lat -o 16"; do
	name=${t%% *}
	# shellcheck disable=SC2086
	vm_pair "$name" $port $t -d "$dev" -x "$g" -F -n 100 -s 64
	# The client's result (a READ latency server prints none).
	[ "$ORDMA_VM" = 0 ] || grep -Eq '^ *64 +100 ' "/tmp/$name.out" || fail "$name: no result line for 64 B x 100"
	port=$((port + 1))
done
echo "ok: ib_send_bw, ib_write_bw, ib_read_bw, ib_write_lat, ib_read_lat, soft-RoCE the client"
# The other way round: soft-RoCE serves, ordma is the client (its SENDs and WRITEs go to
# soft-RoCE, soft-RoCE's READ responses come to it).
# (-o 16 on the READs: as above, ordma's QP takes no more than its 16.)
for t in ib_send_bw ib_write_bw "ib_read_bw -o 16" ib_write_lat "ib_read_lat -o 16"; do
	name=${t%% *}-back
	size=16384
	[[ $t != *lat* ]] || size=64
	# shellcheck disable=SC2086
	case $ORDMA_VM in
	1) vm_serve "$name" $port $t -d "$dev" -x "$g" -F -n 100 -s $size ;;
	0) vm_connect "$name" 1 $port $t -d "$dev" -x "$g" -F -n 100 -s $size
		grep -Eq "^ *$size +100 " "/tmp/$name.cli" || fail "$t, ordma the client: no result line for $size B x 100" ;;
	esac
	port=$((port + 1))
done
echo "ok: the same with ordma0 the client and rxe0 the server"

if [ "$ORDMA_VM" = 1 ]; then
	rdma link delete rxe0
	insmod /ordma/payload/ordma.ko
	echo "PASS: roce-rxe (vm1)"
	exit 0
fi
s=$(nic_ctl 0 status)
[[ $s == *" bad_frames=0"* ]] || fail "ordma0 refused frames from soft-RoCE: $s"
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $(objects)"

# vm0's capture: what its port sent and received.
pcap=/ordma/results/nic0.pcap
ts=(tshark -r "$pcap" --disable-protocol rpcordma)
"${ts[@]}" -T fields -E separator=, -e ip.src -e ip.dst -e udp.dstport -e infiniband.bth.opcode \
	>/tmp/fields.csv 2>/tmp/fields.err || { cat /tmp/fields.err; fail "tshark -T fields failed"; }
count() { awk -F, "$1" /tmp/fields.csv | wc -l; }
roce=$(count '$3 == 4791')
ib=$(count '$3 == 4791 && $4 != ""')
sends=$(count '$4 == 0 && $1 == "10.78.0.1"')
sends1=$(count '$4 == 0 && $1 == "10.78.1.1"')
acks=$(count '$4 == 17')
bad_filter='_ws.malformed || (udp.port == 4791 && _ws.expert.severity >= "Warning")'
"${ts[@]}" -Y "$bad_filter" >/tmp/bad.txt 2>/tmp/bad.err || { cat /tmp/bad.err; fail "tshark -Y '$bad_filter' failed"; }
bad=$(wc -l </tmp/bad.txt)
echo "capture: $(wc -l </tmp/fields.csv) frames, $roce UDP 4791, $ib decoded as InfiniBand (RoCEv2)," \
	"RC SEND First $sends from ordma and $sends1 from soft-RoCE, $acks ACKs, $bad malformed or with a warning"
[ "$roce" -ge 1600 ] || fail "fewer RoCEv2 frames than the pingpongs' SENDs: $roce"
[ "$ib" = "$roce" ] || fail "only $ib of $roce UDP 4791 frames decode as InfiniBand"
[ "$sends" -ge 200 ] && [ "$sends1" -ge 200 ] ||
	fail "fewer than 200 RC SEND First frames each way (4096 B at MTU 1024: First, Middle x2, Last)"
[ "$acks" -gt 0 ] || fail "no ACK in the capture"
[ "$bad" = 0 ] || { head /tmp/bad.txt; fail "$bad frames malformed or with a warning"; }
python3 $P/roce-icrc.py --min "$roce" "$pcap" || fail "a RoCEv2 frame with a wrong ICRC (or none)"
echo "ok: vm0's capture decodes as RoCEv2 both ways, nothing malformed, every ICRC right"
echo "PASS: roce-rxe (vm0)"
