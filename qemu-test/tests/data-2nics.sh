#!/bin/bash
# VM test: the data path between two NICs on one wire (RoCEv2 frames between the two NIC
# model processes, qemu-test/vm-inner.sh's --wire), every byte verified:
# - qemu-test/progs/verbs-data: a QP on ordma0 and one on ordma1: SEND, SEND with
#   immediate, WRITE, WRITE with immediate, READ from 0 B to 2 MiB; the error completions
#   across the wire; RNR retried until a receive is posted; a completion event; what UCX
#   and NCCL do that plain tests do not (quirks.c);
# - ibv_rc_pingpong, unmodified, server on ordma0, client on ordma1, --chk, polling and -e;
# - perftest, unmodified, server on ordma0, client on ordma1: ib_send_bw, ib_send_lat,
#   ib_write_bw, ib_write_lat, ib_read_bw, ib_read_lat (few iterations: a test, not a
#   benchmark); ib_write_bw with 64 QPs at once (-q 64, 64 KiB, 200 WRITEs each);
# - afterwards neither NIC holds a PD, MR, CQ or QP, and no frame was refused.
# nics: 2
# timeout: 600
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }

$VD --dev ordma0 --dev2 ordma1 transfers errors rnr events quirks || fail "ordma-verbs-data between two NICs"

pair_run "ibv_rc_pingpong 4096 B" 18515 ibv_rc_pingpong -d ordma0 -s 4096 -n 500 -c -- ibv_rc_pingpong -d ordma1 -s 4096 -n 500 -c
grep -q "500 iters in" /tmp/cli.out || fail "ibv_rc_pingpong: no result line"
pair_run "ibv_rc_pingpong 64 KiB, events" 18516 ibv_rc_pingpong -d ordma0 -s 65536 -n 100 -c -e -- ibv_rc_pingpong -d ordma1 -s 65536 -n 100 -c -e
grep -q "100 iters in" /tmp/cli.out || fail "ibv_rc_pingpong -e: no result line"
echo "ok: ibv_rc_pingpong between ordma0 and ordma1, polling and with -e, --chk"

perftest_six ordma0 ordma1 18600
echo "ok: perftest's bandwidth and latency tests between ordma0 and ordma1"
# 64 QPs at once (issue 19): 12800 WRITEs of 64 KiB spread over them.
pair_run "ib_write_bw -q 64" 18620 ib_write_bw -d ordma0 -F -q 64 -n 200 -s 65536 -- ib_write_bw -d ordma1 -F -q 64 -n 200 -s 65536
grep -Eq '^ *65536 +12800 ' /tmp/cli.out || fail "ib_write_bw -q 64: no result line for 64 QPs x 200 WRITEs"
echo "ok: ib_write_bw -q 64 between ordma0 and ordma1: $(grep -E '^ *65536 +12800 ' /tmp/cli.out | xargs)"

for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC $n still holds $(objects $n)"
	s=$(nic_ctl $n status)
	[[ $s == *" bad_frames=0"* ]] || fail "NIC $n refused frames: $s"
done
echo "PASS: data-2nics"
