#!/bin/bash
# VM test: the NIC's port counters through ib_core (CMD_QUERY_COUNTERS, the driver's
# alloc_hw_port_stats/get_hw_stats), as an operator reads them: `rdma statistic show link`
# and sysfs ports/1/hw_counters/. Two NICs, ordma0 and ordma1, over their wire:
# - both list the NIC's 17 counters in hardware.md's order, each also a sysfs file with
#   the same value, and at rest they are what the NIC itself counted (the model's
#   `counters` control request): the driver reads the NIC, not a copy;
# - ibv_rc_pingpong ordma0 <-> ordma1 (4 KiB x 100): exactly 100 SENDs sent and 100
#   received on each NIC (rdma_sends, rdma_recvs), and every packet one NIC sent is one the
#   other took in (sent_pkts, rcvd_pkts), at least 4 per message;
# - qemu-test/progs/verbs-data's error and RNR checks: local_err, remote_err, send_rnr_err,
#   rcvd_rnr_err and retry_rnr_exceeded_err move where the errors happen;
# - ordma0's port losing, duplicating and corrupting 5% of its frames (the control
#   channel's `wire`) under ib_write_bw (64 KiB x 200): out_of_seq_request and send_seq_err on ordma1, rcvd_seq_err or
#   local_ack_timeout_err on ordma0, duplicate_request and bad_frames on ordma1;
# - ordma0's port losing everything: ibv_rc_pingpong's client ends in RETRY_EXC_ERR,
#   retry_exceeded_err + 1 on ordma0;
# - `rdma resource show pd|mr|cq|qp` lists a process's objects on ordma0 with its pid and
#   name, and none once it is gone;
# - per-QP counters (`rdma statistic qp`, auto mode): a QP's own SENDs and packets, exactly,
#   the links' totals still the NIC's, the counter gone with its QPs.
# A boot of its own: the counters never go back (a NIC's port counts from power on), and
# the tests that share a boot check that their NICs refused no frame (bad_frames=0).
# nics: 2
# fresh-vm: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
VD=/ordma/payload/ordma-verbs-data
NAMES="sent_pkts rcvd_pkts duplicate_request out_of_seq_request send_seq_err rcvd_seq_err
send_rnr_err rcvd_rnr_err local_ack_timeout_err retry_exceeded_err retry_rnr_exceeded_err
local_err remote_err rdma_sends rdma_recvs atomics bad_frames"
# stats DEV: "name=value ..." of DEV's port 1 from `rdma -j statistic show link`, in order.
stats() {
	rdma -j statistic show link "$1/1" | python3 -c '
import json, sys
(e,) = json.load(sys.stdin)
print(" ".join(f"{k}={v}" for k, v in e.items() if k not in ("ifname", "port")))'
}
# stat DEV NAME: one counter of DEV's port 1.
stat() { stats "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# delta NAME BEFORE AFTER: AFTER's NAME minus BEFORE's (two `stats` lines).
delta() {
	local a b
	a=$(echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p")
	b=$(echo "$3" | tr ' ' '\n' | sed -n "s/^$1=//p")
	echo $((b - a))
}

# The names, their order, sysfs, and the NIC's own counts at rest.
for i in 0 1; do
	d=ordma$i
	s=$(stats $d) || fail "rdma statistic show link $d/1: $(rdma statistic show link $d/1 2>&1)"
	echo "$d/1: $s"
	[ "$(echo "$s" | tr ' ' '\n' | cut -d= -f1 | tr '\n' ' ')" = "$(echo $NAMES) " ] ||
		fail "$d's counters are not hardware.md's, in its order"
	for kv in $s; do
		f=/sys/class/infiniband/$d/ports/1/hw_counters/${kv%%=*}
		[ "$(cat "$f")" = "${kv#*=}" ] || fail "$f says $(cat "$f"), rdma statistic ${kv#*=}"
	done
	[ "ok $s" = "$(nic_ctl $i counters)" ] || fail "$d: the driver's counters are not the NIC's: $(nic_ctl $i counters)"
done
echo "ok: 17 counters on each port, in sysfs too, the NIC's own counts"

# Traffic: every SEND and every packet.
b0=$(stats ordma0) b1=$(stats ordma1)
pair_run pingpong 18520 ibv_rc_pingpong -d ordma0 -s 4096 -n 100 -c -- ibv_rc_pingpong -d ordma1 -s 4096 -n 100 -c
a0=$(stats ordma0) a1=$(stats ordma1)
for c in rdma_sends rdma_recvs; do
	for i in 0 1; do
		b=b$i a=a$i
		[ "$(delta $c "${!b}" "${!a}")" = 100 ] || fail "ordma$i: $c moved by $(delta $c "${!b}" "${!a}"), not 100"
	done
done
s01=$(delta sent_pkts "$b0" "$a0") r10=$(delta rcvd_pkts "$b1" "$a1")
s10=$(delta sent_pkts "$b1" "$a1") r01=$(delta rcvd_pkts "$b0" "$a0")
echo "ordma0 sent $s01, ordma1 took in $r10; ordma1 sent $s10, ordma0 took in $r01"
[ "$s01" = "$r10" ] && [ "$s10" = "$r01" ] || fail "packets sent are not packets taken in"
[ "$s01" -ge 400 ] && [ "$s10" -ge 400 ] || fail "fewer than 4 packets per 4 KiB message"
for c in duplicate_request out_of_seq_request local_err remote_err retry_exceeded_err bad_frames; do
	[ "$(delta $c "$b0" "$a0")$(delta $c "$b1" "$a1")" = 00 ] || fail "$c moved on a clean wire"
done
echo "ok: ibv_rc_pingpong 4 KiB x 100: 100 SENDs sent and received on each NIC, every packet counted at both ends"

# Errors where they happen.
b0=$a0 b1=$a1
$VD --dev ordma0 --dev2 ordma1 errors rnr >/tmp/vd.out 2>&1 || { cat /tmp/vd.out; fail "ordma-verbs-data errors rnr"; }
a0=$(stats ordma0) a1=$(stats ordma1)
for c in local_err remote_err rcvd_rnr_err retry_rnr_exceeded_err; do
	[ "$(delta $c "$b0" "$a0")" -ge 1 ] || fail "ordma0: $c did not move"
done
[ "$(delta remote_err "$b0" "$a0")" -ge 4 ] || fail "ordma0: fewer than 4 remote errors"
[ "$(delta send_rnr_err "$b1" "$a1")" -ge 1 ] || fail "ordma1: send_rnr_err did not move"
echo "ok: errors and RNR NAKs: ordma0 local_err +$(delta local_err "$b0" "$a0"), remote_err" \
	"+$(delta remote_err "$b0" "$a0"), rcvd_rnr_err +$(delta rcvd_rnr_err "$b0" "$a0"), ordma1 send_rnr_err +$(delta send_rnr_err "$b1" "$a1")"

# A failing wire from ordma0.
b0=$a0 b1=$a1
for w in "loss 0.05" "duplicate 0.05" "corrupt 0.05"; do
	# shellcheck disable=SC2086
	nic_ctl 0 wire $w >/dev/null || fail "wire $w"
done
# (perftest, which ends with a handshake: ibv_rc_pingpong's last ACK can be lost after its
# peer has gone.)
pair_run write_bw 18521 ib_write_bw -d ordma1 -F -n 200 -s 65536 -- ib_write_bw -d ordma0 -F -n 200 -s 65536
nic_ctl 0 wire clear >/dev/null
a0=$(stats ordma0) a1=$(stats ordma1)
for c in out_of_seq_request send_seq_err duplicate_request bad_frames; do
	[ "$(delta $c "$b1" "$a1")" -ge 1 ] || fail "ordma1: $c did not move"
done
[ $(($(delta rcvd_seq_err "$b0" "$a0") + $(delta local_ack_timeout_err "$b0" "$a0"))) -ge 1 ] ||
	fail "ordma0: neither rcvd_seq_err nor local_ack_timeout_err moved"
echo "ok: ordma0 losing, duplicating, corrupting 5%: ordma1 out_of_seq_request +$(delta out_of_seq_request "$b1" "$a1")," \
	"send_seq_err +$(delta send_seq_err "$b1" "$a1"), duplicate_request +$(delta duplicate_request "$b1" "$a1")," \
	"bad_frames +$(delta bad_frames "$b1" "$a1"); ordma0 rcvd_seq_err +$(delta rcvd_seq_err "$b0" "$a0")," \
	"local_ack_timeout_err +$(delta local_ack_timeout_err "$b0" "$a0")"

# A cut wire: retries exhausted.
b0=$(stats ordma0)
nic_ctl 0 wire loss 1 >/dev/null || fail "wire loss 1"
ibv_rc_pingpong -d ordma1 -n 1 -p 18522 >/tmp/cut.srv 2>&1 &
srv=$!
wait_listen 18522 $srv || fail "the cut pingpong's server did not listen"
rc=0
timeout 60 ibv_rc_pingpong -d ordma0 -n 1 -p 18522 localhost >/tmp/cut.cli 2>&1 || rc=$?
kill $srv 2>/dev/null || true
wait $srv 2>/dev/null || true
nic_ctl 0 wire clear >/dev/null
grep -q 'transport retry counter exceeded' /tmp/cut.cli || { cat /tmp/cut.cli; fail "no RETRY_EXC_ERR over a cut wire (exit $rc)"; }
a0=$(stats ordma0)
[ "$(delta retry_exceeded_err "$b0" "$a0")" = 1 ] || fail "ordma0: retry_exceeded_err moved by $(delta retry_exceeded_err "$b0" "$a0"), not 1"
echo "ok: a cut wire: RETRY_EXC_ERR, retry_exceeded_err + 1"

# `rdma resource`: a process's objects on ordma0, each with its owner; none once it is gone.
ibv_rc_pingpong -d ordma0 -p 18523 >/tmp/res.out 2>&1 &
srv=$!
wait_listen 18523 $srv || { cat /tmp/res.out; fail "the resource pingpong's server did not listen"; }
# owned KIND PID: how many of ordma0's objects of KIND (`rdma resource show KIND`) PID owns.
owned() {
	rdma -j resource show "$1" | python3 -c '
import json, sys
print(sum(1 for e in json.load(sys.stdin)
          if e.get("ifname") == "ordma0" and e.get("pid") == int(sys.argv[1])
          and e.get("comm") == "ibv_rc_pingpong"))' "$2"
}
for r in pd mr cq qp; do
	[ "$(owned $r $srv)" -ge 1 ] || { rdma resource show $r; fail "rdma resource show $r: nothing of ibv_rc_pingpong (pid $srv) on ordma0"; }
done
kill $srv
wait $srv 2>/dev/null || true
for r in pd mr cq qp; do
	[ "$(owned $r $srv)" = 0 ] || fail "rdma resource show $r: ibv_rc_pingpong's objects outlive it"
done
echo "ok: rdma resource show pd, mr, cq, qp: ibv_rc_pingpong's objects on ordma0, with its pid and name; none after it"

# Per-QP counters (NIC interface 1.10): in ib_core's auto mode (a counter per QP type, made
# as a QP moves to INIT), ordma-verbs-data's QP A on ordma0 sends 50 SENDs of 4 KiB to QP B on
# ordma1 and holds both. A's counter: exactly 50 rdma_sends, no rdma_recvs; B's: 50
# rdma_recvs; every packet A sent is one B took in; and the links' totals (port values
# plus counters) are still the NIC's own. Then the QPs go, and with them the counters.
# qp_stats DEV QPN: "name=value ..." of the counter of DEV that QPN is bound to.
qp_stats() {
	rdma -j statistic qp show link "$1/1" | python3 -c '
import json, sys
qpn = int(sys.argv[1])
for e in json.load(sys.stdin):
    if qpn in [int(q) for q in e.get("lqpn", [])]:
        print(" ".join(f"{k}={v}" for k, v in e.items() if isinstance(v, int)
                       and k not in ("port", "cntn", "pid")))
        break' "$2"
}
for i in 0 1; do
	rdma statistic qp set link ordma$i/1 auto type on || fail "rdma statistic qp set link ordma$i/1 auto type on"
done
rm -f /tmp/qpc.in && mkfifo /tmp/qpc.in
$VD --dev ordma0 --dev2 ordma1 sends-hold=50 </tmp/qpc.in >/tmp/qpc.out 2>&1 &
holder=$!
exec 3>/tmp/qpc.in
for _ in $(seq 300); do grep -q '^holding' /tmp/qpc.out && break; sleep 0.1; done
grep -q '^holding' /tmp/qpc.out || { cat /tmp/qpc.out; fail "sends-hold did not get to hold its QPs"; }
qa=$(awk '/^holding/ { print $3 }' /tmp/qpc.out) qb=$(awk '/^holding/ { print $4 }' /tmp/qpc.out)
sa=$(qp_stats ordma0 "$qa") sb=$(qp_stats ordma1 "$qb")
echo "QP $qa on ordma0: $sa"
echo "QP $qb on ordma1: $sb"
[ -n "$sa" ] && [ -n "$sb" ] || { rdma statistic qp show; fail "no counter bound to QP $qa on ordma0 or QP $qb on ordma1"; }
q() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
[ "$(q "$sa" rdma_sends)" = 50 ] || fail "QP $qa: rdma_sends $(q "$sa" rdma_sends), not 50"
[ "$(q "$sa" rdma_recvs)" = 0 ] || fail "QP $qa: rdma_recvs $(q "$sa" rdma_recvs), not 0"
[ "$(q "$sb" rdma_recvs)" = 50 ] || fail "QP $qb: rdma_recvs $(q "$sb" rdma_recvs), not 50"
[ "$(q "$sa" sent_pkts)" = "$(q "$sb" rcvd_pkts)" ] && [ "$(q "$sb" sent_pkts)" = "$(q "$sa" rcvd_pkts)" ] ||
	fail "QP $qa's packets are not QP $qb's"
[ "$(q "$sa" sent_pkts)" -ge 50 ] || fail "QP $qa sent fewer packets than messages"
for i in 0 1; do
	[ "ok $(stats ordma$i)" = "$(nic_ctl $i counters)" ] || fail "ordma$i: with a live per-QP counter, the link's totals are not the NIC's"
done
exec 3>&-
wait $holder || { cat /tmp/qpc.out; fail "sends-hold failed"; }
[ -z "$(rdma -j statistic qp show link ordma0/1 | python3 -c 'import json,sys; print(json.load(sys.stdin) or "")')" ] ||
	fail "a counter outlives its QPs: $(rdma statistic qp show link ordma0/1)"
for i in 0 1; do
	rdma statistic qp set link ordma$i/1 auto off
done
echo "ok: per-QP counters: QP $qa rdma_sends 50, QP $qb rdma_recvs 50, packets $(q "$sa" sent_pkts) and $(q "$sb" sent_pkts), link totals the NIC's, gone with the QPs"

# At rest again: the driver's numbers are still the NIC's.
for i in 0 1; do
	[ "ok $(stats ordma$i)" = "$(nic_ctl $i counters)" ] || fail "ordma$i: the driver's counters are not the NIC's after the traffic"
done
echo "PASS: port counters"
