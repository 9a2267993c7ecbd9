#!/bin/bash
# VM test: UD (unreliable datagram) QPs and address handles on one NIC (loopback: ordma0 to
# itself) and between two NICs (ordma0 and ordma1 over the wire):
# - qemu-test/progs/verbs-data `ud` (ud.c): SEND and SEND with immediate from 0 B to the
#   MTU and inline, every byte behind the 40-byte GRH area and every completion field
#   (byte_len, src_qp, slid, flags, immediate data); an AH with a GRH; a wrong Q_Key
#   dropped, the sender's own Q_Key on request; a WRITE, READ, atomic and a WR without an
#   AH refused at post (EINVAL); bad AHs refused (EINVAL); a SEND above the MTU completes
#   in LOC_LEN_ERR;
# - ibv_ud_pingpong, unmodified, polling and with -e, with and without a GRH (-g 0),
#   loopback and between the NICs;
# - perftest's ib_send_bw -c UD (also on an SRQ, --use-srq) and ib_send_lat -c UD,
#   unmodified, loopback and between the NICs, each with its result line;
# - rdma-core's own UD QP and AH tests (run_tests.py -k _ud_ -k _ah) pass on ordma0;
# - a process killed with SIGKILL holding 3 UD QPs (one on an SRQ), 64 AHs, posted
#   receives and sends and unpolled completions (ordma-verbs-data ud-hold) leaves nothing on
#   either NIC;
# - the NICs counted what was sent and received, dropped exactly the one wrong-Q_Key
#   datagram of each ud run, and hold no PD, MR, CQ or QP afterwards; no frame refused.
# On the debug kernel (KASAN, lockdep, kmemleak) the pingpongs, perftest and rdma-core's
# tests (user space only) are left to the default kernel's run.
# nics: 2
# debug: full
# timeout: 600
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
source $P/rdma-core-tests.sh
source $P/debug-kernel.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
count() { nic_ctl "$1" status | grep -o " $2=[0-9]*" | cut -d= -f2; }
q0=$(count 0 ud_qkey_dropped)
q1=$(count 1 ud_qkey_dropped)

$VD --dev ordma0 ud || fail "ordma-verbs-data ud, loopback"
[ "$(count 0 ud_qkey_dropped)" = $((q0 + 1)) ] || fail "NIC 0 did not count the wrong Q_Key"
$VD --dev ordma0 --dev2 ordma1 ud || fail "ordma-verbs-data ud, between the NICs"
[ "$(count 1 ud_qkey_dropped)" = $((q1 + 1)) ] || fail "NIC 1 did not count the wrong Q_Key"
echo "ok: each wrong Q_Key counted once, at the receiving NIC"

if debug_kernel; then
	echo "the debug kernel: pingpong, perftest and rdma-core's tests run on the default kernel"
else
	port=18900
	for devs in "ordma0 ordma0" "ordma0 ordma1"; do
		read -r srv cli <<<"$devs"
		for args in "-s 2048 -n 300" "-s 4000 -n 100 -e" "-s 1024 -n 100 -g 0"; do
			# shellcheck disable=SC2086
			pair_run "ibv_ud_pingpong $srv <- $cli, $args" $port ibv_ud_pingpong -d "$srv" $args -- \
				ibv_ud_pingpong -d "$cli" $args
			grep -q "iters in" /tmp/cli.out || fail "ibv_ud_pingpong $args: no result line"
			port=$((port + 1))
		done
		echo "ok: ibv_ud_pingpong $srv <- $cli, polling, with -e, with a GRH"
		# With --use-srq perftest's UD receive buffers at 2048 and 4096 bytes run past the end
		# of its MR (the NIC refuses them: LOC_PROT_ERR, its log names the SGE out of bounds;
		# soft-RoCE's MTU of 1024 never gets there): 4000 bytes.
		for srq in "-s 4096" "-s 4000 --use-srq"; do
			# shellcheck disable=SC2086
			pair_run "ib_send_bw -c UD $srq, $srv <- $cli" $port ib_send_bw -d "$srv" -c UD $srq -F -n 500 -- \
				ib_send_bw -d "$cli" -c UD $srq -F -n 500
			grep -Eq "^ *${srq:3:4} +500 " /tmp/cli.out || fail "ib_send_bw -c UD $srq: no result line for 500 messages"
			port=$((port + 1))
		done
		pair_run "ib_send_lat -c UD, $srv <- $cli" $port ib_send_lat -d "$srv" -c UD -F -n 200 -- \
			ib_send_lat -d "$cli" -c UD -F -n 200
		grep -Eq '^ *2 +200 ' /tmp/cli.out || fail "ib_send_lat -c UD: no result line"
		port=$((port + 1))
		echo "ok: perftest ib_send_bw -c UD (with and without an SRQ) and ib_send_lat -c UD, $srv <- $cli"
	done

	rdma_core_tests ordma0 -k _ud_ -k _ah
	echo "ok: rdma-core's UD QP and AH tests on ordma0"
fi

# A process killed while it holds UD QPs, AHs and an SRQ with work in flight.
$VD --dev ordma0 --dev2 ordma1 ud-hold >/tmp/hold.out 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q holding /tmp/hold.out && break; sleep 0.1; done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "ud-hold did not get to hold its QPs"; }
held="$(objects 0), $(objects 1)"
[ "$held" = "pds=1 mrs=1 cqs=1 qps=1, pds=1 mrs=1 cqs=1 qps=2" ] || fail "the holder's objects: $held"
kill -KILL $pid
wait $pid 2>/dev/null || true
for _ in $(seq 100); do [ "$(objects 0)$(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0pds=0 mrs=0 cqs=0 qps=0" ] && break; sleep 0.2; done
[ "$(objects 0)$(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0pds=0 mrs=0 cqs=0 qps=0" ] ||
	fail "after SIGKILL of the UD holder: NIC 0 $(objects 0), NIC 1 $(objects 1)"
echo "ok: a process killed holding UD QPs, 64 AHs and an SRQ ($held) left nothing on either NIC"

# ordma-verbs-data sends from NIC 0 only; the pingpongs and perftest both ways.
counted="0:ud_sent 0:ud_received 1:ud_received"
debug_kernel || counted+=" 1:ud_sent"
for c in $counted; do
	[ "$(count "${c%%:*}" "${c#*:}")" -gt 0 ] || fail "NIC ${c%%:*} counted no ${c#*:}"
done
for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC $n still holds $(objects $n)"
	s=$(nic_ctl $n status)
	[[ $s == *" bad_frames=0"* ]] || fail "NIC $n refused frames: $s"
	echo "NIC $n: $(echo "$s" | grep -o 'ud_sent=.*ud_qkey_dropped=[0-9]*')"
done
echo "PASS: ud"
