#!/bin/bash
# VM test: RoCEv2 across two guests over a wire that fails on request. Two guests
# (--vms 2), one Ethernet ordma NIC each (--link-layer ethernet, netdev 10.78.<G>.1/16);
# each guest makes its own NIC's port lose 1%, duplicate 1%, reorder 2% and corrupt 1% of
# the frames it sends (the control channel's `wire`, set while the guests run). By GID:
# - ibv_rc_pingpong -g, 4 KiB x 500 and 64 KiB x 100 with -e, bytes checked (--chk):
#   RC recovers every frame lost, duplicated, reordered or corrupted (a pair whose last
#   ACK was lost after the other end finished, ibv_rc_pingpong's own race, runs again);
# - ib_write_bw, ib_read_bw, ib_send_bw (64 KiB x 200, -x) complete;
# - every byte (qemu-test/progs/roce_xfer.py, pyverbs): 20 RDMA WRITEs of 2 MiB of fresh
#   random bytes, each read back with an RDMA READ and compared, and 200 SENDs of 1 B to
#   4 KiB compared by SHA-256;
# - each port's counters show every kind of failure, and each NIC dropped and counted
#   frames it received corrupted (bad_frames > 0: the IP checksum or the ICRC caught
#   them); afterwards neither NIC holds a PD, MR, CQ or QP;
# - a cut link (vm1's port loses everything): a WRITE with timeout 18 and 3 retries ends in
#   IBV_WC_RETRY_EXC_ERR after the 4 transport timers the specification predicts (4.3 s;
#   0.9 to 2 times that accepted).
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
counter() { nic_ctl 0 status | tr ' ' '\n' | sed -n "s/^$1=//p"; }
nic_mark 0
me=10.78.$ORDMA_VM.1
g=$(roce_gid_index ordma0 "$me")

for w in "loss 0.01" "duplicate 0.01" "reorder 0.02" "corrupt 0.01"; do
	# shellcheck disable=SC2086
	nic_ctl 0 wire $w >/dev/null || fail "the NIC refused 'wire $w'"
done
echo "vm$ORDMA_VM: ordma0 (GID index $g, $me): its port loses 1%, duplicates 1%, reorders 2%, corrupts 1%"

# pingpong NAME PORT N ARGS...: ibv_rc_pingpong -n N ARGS, vm0 the server and vm1 the
# client; both must finish their N iterations. ibv_rc_pingpong ends without a handshake: an
# end whose last SEND has all its iterations behind it, the other end done and gone, ends
# in IBV_WC_RETRY_EXC_ERR when that SEND's last ACK is lost on the wire (its resends find
# no QP). That outcome alone (the other end's N iterations prove the lost ACK was the last
# one's) runs the pair again, at most twice; any other failure fails.
# finished F N: the outcome in F (exit status, output) is an exit 0 after N iterations.
finished() { [ "$(head -n1 "$1")" = 0 ] && grep -q "^$2 iters in" "$1"; }
# lastack F: the outcome in F is the end of a SEND in IBV_WC_RETRY_EXC_ERR.
lastack() { grep -q 'Failed status transport retry counter exceeded (12) for wr_id 2$' "$1"; }
pingpong() {
	local name=$1 port=$2 n=$3 a pid rc mine other
	shift 3
	for a in 1 2 3; do
		rc=0
		if [ "$ORDMA_VM" = 0 ]; then
			ibv_rc_pingpong -n "$n" "$@" -p "$port" >/tmp/pp.out 2>&1 &
			pid=$!
			wait_listen "$port" $pid || { cat /tmp/pp.out; fail "$name: the server did not listen"; }
			vm_flag "$name.$a.ready"
			timeout 120 tail --pid=$pid -f /dev/null || kill $pid 2>/dev/null
			wait $pid || rc=$?
		else
			vm_wait_flag "$name.$a.ready" 300 || fail "$name: the server never listened"
			timeout 120 ibv_rc_pingpong -n "$n" "$@" -p "$port" "$(vm_ip 0)" >/tmp/pp.out 2>&1 || rc=$?
		fi
		echo "----- $name, run $a (vm$ORDMA_VM, the $([ "$ORDMA_VM" = 0 ] && echo server || echo client)): exit $rc"
		cat /tmp/pp.out
		# The outcome for the other guest: the exit status, then the output.
		mine=$VM_SHARED/$name.$a.vm$ORDMA_VM other=$VM_SHARED/$name.$a.vm$((1 - ORDMA_VM))
		{ echo $rc; cat /tmp/pp.out; } >"$VM_SHARED/.$name.$a.vm$ORDMA_VM"
		mv "$VM_SHARED/.$name.$a.vm$ORDMA_VM" "$mine"
		vm_wait_flag "${other##*/}" 300 || fail "$name: no outcome from the other guest"
		if finished "$mine" "$n" && finished "$other" "$n"; then
			cp /tmp/pp.out "/tmp/$name.out"
			return
		fi
		if { finished "$mine" "$n" && lastack "$other"; } || { finished "$other" "$n" && lastack "$mine"; }; then
			echo "note: $name, run $a: the last SEND's last ACK was lost after the other end finished; again"
			port=$((port + 100))
			continue
		fi
		fail "$name: run $a failed"
	done
	fail "$name: the last ACK lost three times in a row"
}
pingpong rc 18515 500 -d ordma0 -g "$g" -s 4096 -c
pingpong rc-events 18516 100 -d ordma0 -g "$g" -s 65536 -c -e
echo "ok: ibv_rc_pingpong -g (4 KiB x 500, 64 KiB x 100 with -e), --chk, over the failing wire"
port=18600
for t in ib_write_bw ib_read_bw ib_send_bw; do
	vm_pair "$t" $port $t -d ordma0 -x "$g" -F -n 200 -s 65536
	[ "$ORDMA_VM" = 0 ] || grep -Eq '^ *65536 +200 ' "/tmp/$t.out" || fail "$t: no result line for 65536 B x 200"
	port=$((port + 1))
done
echo "ok: ib_write_bw, ib_read_bw, ib_send_bw -x over the failing wire"
# Every byte: 20 WRITEs of 2 MiB read back and compared, 200 SENDs of up to 4 KiB
# compared by digest (qemu-test/progs/roce_xfer.py; perftest checks nothing, the
# pingpongs one byte per page).
vm_pair xfer 18700 python3 $P/roce_xfer.py ordma0 "$g" --count 20 --sends 200
grep -q '^ok: ' /tmp/xfer.out || fail "roce_xfer.py: no result"
echo "ok: 20 x 2 MiB WRITE + READ back and 200 SENDs over the failing wire, every byte checked"
s=$(nic_ctl 0 status)
echo "vm$ORDMA_VM: $(echo "$s" | tr ' ' '\n' | grep -E '^(wire_|bad_frames)' | tr '\n' ' ')"
for c in wire_lost wire_duplicated wire_reordered wire_corrupted bad_frames; do
	[ "$(nic_since 0 $c)" -gt 0 ] || fail "vm$ORDMA_VM: $c did not grow"
done
nic_ctl 0 wire clear >/dev/null || fail "wire clear"

# A cut link: vm1's port loses every frame it sends; one WRITE from vm1 (timeout 18,
# 1.07 s, above the NIC's floor of 0.54 s; 3 retries) ends in IBV_WC_RETRY_EXC_ERR after
# the 4 transport timers the specification predicts, 4.3 s.
if [ "$ORDMA_VM" = 1 ]; then
	nic_ctl 0 wire loss 1 >/dev/null || fail "wire loss 1"
fi
vm_pair cut 18701 python3 $P/roce_xfer.py ordma0 "$g" --cut --timeout 18 --retry 3
grep -q '^ok: ' /tmp/cut.out || fail "roce_xfer.py --cut: no result"
if [ "$ORDMA_VM" = 1 ]; then
	grep -q '^ok: retries exhausted in the predicted time' /tmp/cut.out || fail "no RETRY_EXC_ERR in the predicted time"
	nic_ctl 0 wire clear >/dev/null || fail "wire clear"
	echo "ok: a cut link: $(grep 'RETRY_EXC_ERR after' /tmp/cut.out)"
fi
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "vm$ORDMA_VM's NIC still holds $(objects)"
echo "ok: every kind of failure happened, corrupted frames were dropped and counted"
echo "PASS: roce-lossy (vm$ORDMA_VM)"
