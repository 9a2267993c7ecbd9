#!/bin/bash
# VM test: co-simulation (issue 22): both NIC models with --rtl, so every DMA of the engine
# goes through the Verilated RTL DMA channel mux (rtl/hdl/ordma_dma_mux.sv) and every
# frame's ICRC is computed and checked by the Verilated ICRC unit (ordma_icrc.sv), with a
# fifth of the cycles stalled at random on every port of both blocks (--rtl-stalls 0.2):
# - data-loopback's and data-2nics's program (qemu-test/progs/verbs-data: transfers
#   errors rnr events quirks, and many on one NIC): SEND, SEND with immediate, WRITE,
#   WRITE with immediate, READ from 0 B to 2 MiB, the error completions, RNR, a completion
#   event, 16 QP pairs of 64 KiB, UCX's and NCCL's quirks, on one NIC and between the two;
#   every byte verified;
# - 16 QP pairs at once, a SEND and a WRITE of 2 MiB each (verbs-data many-2m), every
#   byte verified; and perftest's ib_write_bw with 16 QPs of 2 MiB between the NICs (QP
#   timeout 18, about 1 s: 80 WRITEs of 2 MiB in flight through the co-simulated RTL beside
#   other guests once ran out of the default's retries, RETRY_EXC_ERR, on 8 December);
# - ibv_rc_pingpong, unmodified, between the NICs, --chk, polling and with -e;
# - then each NIC's status: the RTL carried the traffic (rtl_beats, rtl_icrc_frames,
#   rtl_stall_cycles) and the scoreboard and the SystemVerilog assertions saw nothing wrong
#   (rtl_violations=0, rtl_assert_failures=0); no frame refused; no object left.
# nics: 2
# run-args: --nic-args 0 "--rtl --rtl-stalls 0.2 --rtl-seed 1" --nic-args 1 "--rtl --rtl-stalls 0.2 --rtl-seed 2"
# timeout: 400
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
counter() { # NIC KEY: the value of KEY= in NIC's status
	nic_ctl "$1" status | tr ' ' '\n' | sed -n "s/^$2=//p"
}
for n in 0 1; do
	[ "$(counter $n rtl)" = 1 ] || fail "NIC $n does not run the RTL datapath (no --rtl?): $(nic_ctl $n status)"
done

$VD transfers errors rnr events many quirks || fail "ordma-verbs-data on ordma0 (loopback) through the RTL"
$VD --dev ordma0 --dev2 ordma1 transfers errors rnr events quirks || fail "ordma-verbs-data between two NICs through the RTL"
$VD many-2m || fail "ordma-verbs-data: 16 QP pairs of 2 MiB through the RTL"

pair_run "ibv_rc_pingpong 4096 B" 18515 ibv_rc_pingpong -d ordma0 -s 4096 -n 200 -c -- ibv_rc_pingpong -d ordma1 -s 4096 -n 200 -c
grep -q "200 iters in" /tmp/cli.out || fail "ibv_rc_pingpong: no result line"
pair_run "ibv_rc_pingpong 64 KiB, events" 18516 ibv_rc_pingpong -d ordma0 -s 65536 -n 50 -c -e -- ibv_rc_pingpong -d ordma1 -s 65536 -n 50 -c -e
grep -q "50 iters in" /tmp/cli.out || fail "ibv_rc_pingpong -e: no result line"
echo "ok: ibv_rc_pingpong between ordma0 and ordma1, polling and with -e, --chk"

pair_run "ib_write_bw 16 QPs x 2 MiB" 18600 ib_write_bw -d ordma0 -F -q 16 -n 5 -s 2097152 -u 18 -- ib_write_bw -d ordma1 -F -q 16 -n 5 -s 2097152 -u 18
grep -Eq '^ *2097152 +80 ' /tmp/cli.out || fail "ib_write_bw: no result line for 2097152 B x 80 (16 QPs x 5)"
echo "ok: ib_write_bw with 16 QPs of 2 MiB between ordma0 and ordma1"

for n in 0 1; do
	s=$(nic_ctl $n status)
	echo "NIC $n: $s"
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC $n still holds $(objects $n)"
	[[ $s == *" bad_frames=0"* ]] || fail "NIC $n refused frames: $s"
	[ "$(counter $n rtl_violations)" = 0 ] || fail "NIC $n: the RTL scoreboard saw violations"
	[ "$(counter $n rtl_assert_failures)" = 0 ] || fail "NIC $n: SystemVerilog assertions failed"
	# ib_write_bw's 16 x 5 WRITEs of 2 MiB: NIC 1 read them (a one-beat request per 4 KiB;
	# read data comes back beside the mux), NIC 0 wrote them (every byte through the mux).
	if [ $n = 0 ]; then
		[ "$(counter $n rtl_beats)" -gt $((16 * 5 * (2 << 20) / 8)) ] || fail "NIC $n: too few beats through the RTL mux"
	else
		[ "$(counter $n rtl_requests)" -gt $((16 * 5 * (2 << 20) / 4096)) ] || fail "NIC $n: too few requests through the RTL mux"
	fi
	[ "$(counter $n rtl_icrc_frames)" -gt $((16 * 5 * (2 << 20) / 4096)) ] || fail "NIC $n: too few ICRCs from the RTL unit"
	[ "$(counter $n rtl_stall_cycles)" -gt 0 ] || fail "NIC $n: no stall injected"
done
echo "PASS: rtl-cosim"
