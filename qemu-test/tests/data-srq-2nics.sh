#!/bin/bash
# VM test: shared receive queues between two NICs on one wire (RoCEv2 frames between the
# two NIC model processes): the senders on ordma0, the QPs on the SRQ on ordma1.
# - qemu-test/progs/verbs-data (srq_checks.c): 400 SENDs with immediate of 0 B to 1 MiB + 3
#   from 4 QPs on ordma0 to 4 QPs on one SRQ on ordma1, receives reposted as they complete:
#   every message once, on its QP, every byte; the limit event and
#   IBV_EVENT_QP_LAST_WQE_REACHED, the WQEs left then reaching another QP;
# - ibv_srq_pingpong, unmodified, server on ordma0, client on ordma1, polling and -e;
# - perftest's ib_send_bw --use-srq, unmodified, server on ordma0, client on ordma1;
# - afterwards neither NIC holds a PD, MR, CQ, QP or SRQ, and no frame was refused.
# nics: 2
# timeout: 600
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*\|srqs=[0-9]*' | xargs; }

$VD --dev ordma0 --dev2 ordma1 srq srq-events || fail "ordma-verbs-data's SRQ checks between two NICs"

pair_run "ibv_srq_pingpong 4096 B" 18515 ibv_srq_pingpong -d ordma0 -n 200 -c -- ibv_srq_pingpong -d ordma1 -n 200 -c
grep -q "200 iters in" /tmp/cli.out || fail "ibv_srq_pingpong: no result line"
! grep -q "invalid data" /tmp/srv.out /tmp/cli.out || fail "ibv_srq_pingpong: invalid data"
pair_run "ibv_srq_pingpong 64 KiB, 4 QPs, events" 18516 ibv_srq_pingpong -d ordma0 -s 65536 -q 4 -r 8 -n 50 -e -- ibv_srq_pingpong -d ordma1 -s 65536 -q 4 -r 8 -n 50 -e
grep -q "50 iters in" /tmp/cli.out || fail "ibv_srq_pingpong -e: no result line"
echo "ok: ibv_srq_pingpong between ordma0 and ordma1, polling and with -e"

pair_run "ib_send_bw --use-srq" 18610 ib_send_bw -d ordma0 -F --use-srq -n 200 -s 65536 -- ib_send_bw -d ordma1 -F --use-srq -n 200 -s 65536
grep -Eq '^ *65536 +200 ' /tmp/cli.out || fail "ib_send_bw --use-srq: no result line for 65536 B x 200"
echo "ok: ib_send_bw --use-srq between ordma0 and ordma1"

for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0 srqs=0" ] || fail "NIC $n still holds $(objects $n)"
	s=$(nic_ctl $n status)
	[[ $s == *" bad_frames=0"* ]] || fail "NIC $n refused frames: $s"
done
echo "PASS: data-srq-2nics"
