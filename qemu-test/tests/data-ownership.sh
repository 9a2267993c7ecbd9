#!/bin/bash
# VM test: what the NIC touches, and when (issue 18, items 1 and 4), with
# qemu-test/progs/verbs-data's `stale` and `drain` (ownership.c):
# - stale, between ordma0 and ordma1 and in loopback on ordma0: a READ, then a WRITE, of
#   2 MiB in flight (the responder's QP still in INIT) whose local MR is deregistered and
#   whose memory is freed and refilled with a pattern before the responder answers; and
#   (two NICs) a SEND of 2 MiB stopped half-way into its receive buffer, whose MR is
#   deregistered and memory refilled before the rest comes: no byte of the pattern changes
#   and none reaches the responder; the WQE (the receive) ends in an error completion with
#   its QP in ERR (or, if the deregistration was refused with EBUSY, completes, the MR
#   kept). Loopback has no retransmission today (a dropped request fails at once), so there
#   nothing is in flight yet: the check bites once loopback runs the wire's engine;
# - drain, between ordma0 and ordma1: WQEs posted while NIC 1's link is down (a READ of
#   1 MiB; 16 WRITEs of 16 KiB), RTS->SQD with the async notification, link up:
#   IBV_EVENT_SQ_DRAINED comes with every WQE completed (in SQD, every byte right), then
#   SQD->RTS and a WRITE more;
# - afterwards neither NIC holds a PD, MR, CQ or QP, both links are up, no frame was
#   refused, and the pages pinned are back where they were.
# nics: 2
# timeout: 400
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/pins.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
pinned0=$(pins)

bad=()
$VD --dev ordma0 --dev2 ordma1 stale drain || bad+=("between ordma0 and ordma1")
$VD --dev ordma0 stale || bad+=("in loopback on ordma0")

for n in 0 1; do
	s=$(nic_ctl $n status)
	[[ $s == *" link=up "* || $s == "ok link=up "* ]] || bad+=("NIC $n's link is not up: $s")
	[[ $s == *" bad_frames=0"* ]] || bad+=("NIC $n refused frames: $s")
	o=$(objects $n)
	[ "$o" = "pds=0 mrs=0 cqs=0 qps=0" ] || bad+=("NIC $n still holds $o")
done
left=$(($(pins) - pinned0))
echo "pages pinned afterwards: $left more than before"
[ "$left" -le $SLACK ] || bad+=("$left pages still pinned")
[ ${#bad[@]} = 0 ] || fail "$(IFS=';'; echo "${bad[*]}")"
echo "PASS: data-ownership"
