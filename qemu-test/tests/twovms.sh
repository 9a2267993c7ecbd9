#!/bin/bash
# VM test: two guests (qemu-test/run --vms 2), one ordma NIC each, on one wire, and their
# eth0s on one L2 segment (10.0.0.1, 10.0.0.2; captured by the harness). The same script runs
# in both; vm0 serves, vm1 connects over TCP on the segment:
# - ordma0 of vm0 (LID 1) and ordma0 of vm1 (LID 2): ibv_rc_pingpong, unmodified, bytes
#   checked (--chk), polling and with -e; perftest's ib_write_bw, ib_read_bw, ib_send_bw
#   (64 KiB x 200, few iterations: a test, not a benchmark); afterwards neither NIC holds a
#   PD, MR, CQ or QP, and neither refused a frame;
# - soft-RoCE (rdma_rxe) on each guest's eth0: ibv_rc_pingpong -g (the RoCEv2 GID of the
#   guest's address), bytes checked; vm0 then decodes the segment's capture with tshark:
#   every UDP 4791 frame decodes as RoCEv2 (InfiniBand over UDP), the pingpong's RC SENDs
#   are there both ways and its ACKs, no frame is malformed, no RoCEv2 frame has a warning,
#   and every RoCEv2 frame's ICRC is right (qemu-test/progs/roce-icrc.py);
# - rxe0 to rxe0 again while the segment drops 3%, duplicates 2%, reorders 3% and corrupts
#   2% of vm0's frames (set by vm0 through seg_ctl): 50 WRITEs of 4 KiB read back and 100
#   SENDs (qemu-test/progs/roce_xfer.py), every byte checked, the segment's counters show
#   each kind, and soft-RoCE's counters show it recovered.
# nics: 1
# run-args: --vms 2
# fresh-vm: yes
# timeout: 600
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
source $P/vms.sh
[ "$ORDMA_VMS" = 2 ] || fail "wants two guests (--vms 2), not $ORDMA_VMS"
objects() { nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
echo "vm$ORDMA_VM: $(ip -4 -br addr show eth0), ordma0 LID $(cat /sys/class/infiniband/ordma0/ports/1/lid)"

# ordma to ordma, across the guests.
vm_pair rc-pingpong 18515 ibv_rc_pingpong -d ordma0 -s 4096 -n 500 -c
grep -q "500 iters in" /tmp/rc-pingpong.out || fail "ibv_rc_pingpong: no result line"
vm_pair rc-pingpong-events 18516 ibv_rc_pingpong -d ordma0 -s 65536 -n 100 -c -e
grep -q "100 iters in" /tmp/rc-pingpong-events.out || fail "ibv_rc_pingpong -e: no result line"
echo "ok: ibv_rc_pingpong between vm0's ordma0 and vm1's ordma0, polling and with -e, --chk"
port=18600
for t in ib_write_bw ib_read_bw ib_send_bw; do
	vm_pair "$t" $port $t -d ordma0 -F -n 200 -s 65536
	[ "$ORDMA_VM" = 0 ] || grep -Eq '^ *65536 +200 ' "/tmp/$t.out" || fail "$t: no result line for 65536 B x 200"
	port=$((port + 1))
done
echo "ok: ib_write_bw, ib_read_bw, ib_send_bw between vm0's ordma0 and vm1's ordma0"
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "vm$ORDMA_VM's NIC still holds $(objects)"
s=$(nic_ctl 0 status)
[[ $s == *" bad_frames=0"* ]] || fail "vm$ORDMA_VM's NIC refused frames: $s"

# soft-RoCE on eth0, across the same segment.
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
me=$(vm_ip "$ORDMA_VM")
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${me//./ })
gid=
for _ in $(seq 300); do
	for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		if [ "$(cat "$f" 2>/dev/null)" = "$want" ]; then
			gid=${f##*/}
			break 2
		fi
	done
	sleep 0.1 # the GID table fills asynchronously after the link is added
done
[ -n "$gid" ] || fail "no RoCEv2 GID for $me on rxe0"
echo "rxe0: GID index $gid is $want ($me)"
vm_pair rxe-pingpong 18517 ibv_rc_pingpong -d rxe0 -g "$gid" -s 4096 -n 200 -c
grep -q '^1638400 bytes' /tmp/rxe-pingpong.out || fail "rxe pingpong did not move 200 x 4096 bytes each way"
echo "ok: ibv_rc_pingpong -g between vm0's rxe0 and vm1's rxe0"

# Over a segment that fails (set while the guests run): soft-RoCE's RC recovers every frame
# lost, duplicated, reordered or corrupted (its ICRC check drops those). Only vm0's frames.
# Not ibv_rc_pingpong, which ends without a handshake: the last ACK of either end's last
# SEND, lost after the other end has gone, leaves that end retrying to a QP that is gone
# (pingpong's end, not the wire's fault; rxe then hangs for 120 s: a full run's failure
# once). qemu-test/progs/roce_xfer.py ends with one: WRITEs read back, SENDs compared by
# digest; of 4 KiB, as the pingpong's (rxe moved no 2 MiB WRITE in 120 s over this segment).
recovery() { # the rxe counters that count a recovery, summed
	local c n=0 d=/sys/class/infiniband/rxe0/ports/1/hw_counters
	for c in duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err; do
		n=$((n + $(cat $d/$c)))
	done
	echo $n
}
before=$(recovery)
if [ "$ORDMA_VM" = 0 ]; then
	seg_ctl from 0 && seg_ctl loss 0.03 && seg_ctl duplicate 0.02 && seg_ctl reorder 0.03 && seg_ctl corrupt 0.02 ||
		fail "the segment refused a setting"
	vm_flag lossy.set
else
	vm_wait_flag lossy.set 120 || fail "vm0 never made the segment lossy"
fi
vm_pair rxe-lossy 18518 python3 /ordma/src/qemu-test/progs/roce_xfer.py rxe0 "$gid" --size 4096 --count 50 --sends 100
grep -q '^ok: ' /tmp/rxe-lossy.out || fail "roce_xfer.py between the rxe0s on a lossy segment: no result"
echo "vm$ORDMA_VM: rxe recoveries (duplicate_request + out_of_seq_request + rcvd_seq_err + completer_retry_err): $((after = $(recovery) - before))"
echo "$after" >"$VM_SHARED/.recoveries-vm$ORDMA_VM" && mv "$VM_SHARED/.recoveries-vm$ORDMA_VM" "$VM_SHARED/recoveries-vm$ORDMA_VM"
if [ "$ORDMA_VM" = 0 ]; then
	vm_wait_flag recoveries-vm1 120 || fail "vm1 never said its recoveries"
	seg=$(seg_ctl status) || fail "segment status: $seg"
	echo "segment: $seg"
	for c in lost duplicated reordered corrupted; do
		[ "$(seg_counter $c)" -gt 0 ] || fail "the segment $c no frame"
	done
	total=$((after + $(cat "$VM_SHARED/recoveries-vm1")))
	[ "$total" -gt 0 ] || fail "soft-RoCE recovered nothing on a lossy segment (its counters say 0)"
	seg_ctl clear >/dev/null || fail "the segment refused clear"
	echo "ok: rxe0 to rxe0 (roce_xfer.py, every byte) over a segment dropping 3%, duplicating 2%, reordering 3%, corrupting 2% of vm0's frames: $total recoveries"
fi
rdma link delete rxe0

# The segment's capture, decoded (vm0, once its server is done: every frame of the
# exchange is in it).
if [ "$ORDMA_VM" = 0 ]; then
	pcap=/ordma/shared/segment.pcap
	# The data is the pingpong's, not RPC over RDMA (which Wireshark guesses for it).
	ts=(tshark -r "$pcap" --disable-protocol rpcordma)
	"${ts[@]}" -q -z io,phs >/tmp/phs.txt 2>&1 || { cat /tmp/phs.txt; fail "tshark cannot read the capture"; }
	cat /tmp/phs.txt
	# One pass for the fields (each tshark start is seconds under TCG): source, destination,
	# UDP destination port, BTH opcode (empty unless the frame decoded as InfiniBand).
	"${ts[@]}" -T fields -E separator=, -e ip.src -e ip.dst -e udp.dstport -e infiniband.bth.opcode \
		>/tmp/fields.csv 2>/tmp/fields.err || { cat /tmp/fields.err; fail "tshark -T fields failed"; }
	count() { awk -F, "$1" /tmp/fields.csv | wc -l; }
	roce=$(count '$3 == 4791')
	ib=$(count '$3 == 4791 && $4 != ""')
	firsts=$(count '$4 == 0 && $1 == "10.0.0.1" && $2 == "10.0.0.2"')
	firsts1=$(count '$4 == 0 && $1 == "10.0.0.2" && $2 == "10.0.0.1"')
	acks=$(count '$4 == 17')
	bad_filter='_ws.malformed || (udp.port == 4791 && _ws.expert.severity >= "Warning")'
	"${ts[@]}" -Y "$bad_filter" >/tmp/bad.txt 2>/tmp/bad.err || { cat /tmp/bad.err; fail "tshark -Y '$bad_filter' failed"; }
	bad=$(wc -l </tmp/bad.txt)
	echo "capture: $roce UDP 4791 frames, $ib decoded as InfiniBand (RoCEv2), RC SEND First" \
		"$firsts from vm0 to vm1 and $firsts1 back, $acks ACKs, $bad malformed or with a warning"
	[ "$roce" -ge 800 ] || fail "fewer RoCEv2 frames than the pingpong's 800 SEND frames: $roce"
	[ "$ib" = "$roce" ] || fail "only $ib of $roce UDP 4791 frames decode as InfiniBand"
	[ "$firsts" -ge 200 ] && [ "$firsts1" -ge 200 ] ||
		fail "fewer than 200 RC SEND First frames each way (4096 B at MTU 1024: First, Middle x2, Last)"
	[ "$acks" -gt 0 ] || fail "no ACK in the capture"
	[ "$bad" = 0 ] || { head /tmp/bad.txt; fail "$bad frames malformed or with a warning"; }
	# tshark shows the ICRC but does not check it: qemu-test/progs/roce-icrc.py does.
	python3 $P/roce-icrc.py --min "$roce" "$pcap" || fail "a RoCEv2 frame with a wrong ICRC (or none)"
	echo "ok: the segment's capture decodes as RoCEv2, nothing malformed, every ICRC right"
fi
echo "PASS: twovms"
