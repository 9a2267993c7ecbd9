#!/bin/bash
# VM test: the data path's share of the kernel, on both test kernels (on the debug kernel
# under KASAN, lockdep and kmemleak): the fast path itself never enters the kernel, but its
# completion events do (the NIC's event queue, the driver's per-CQ event table under its
# IRQ-safe lock, ib_core's completion handler, ibv_get_cq_event), and so do the MRs and rings
# it moves bytes through. qemu-test/progs/verbs-data moves SEND, WRITE and READ of every size
# it knows (every byte) and takes a completion event on an armed CQ, and resizes CQs
# (ibv_resize_cq: new rings pinned, the old released) with completions not yet polled and
# under traffic (cq_resize.c: every completion in order, every byte); ibv_rc_pingpong runs
# with -e (a CQ event per iteration) while a second pair does so at the same time; the NIC
# holds nothing afterwards.
# nics: 1
# debug: full
# timeout: 900
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload"
objects() { nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }

$VD transfers events cq-resize || fail "ordma-verbs-data transfers events cq-resize"

# Two ibv_rc_pingpong pairs with -e at once: CQ events from four CQs interleaved.
spids=() cpids=()
for port in 18601 18602; do
	ibv_rc_pingpong -d ordma0 -p $port -s 4096 -n 100 -c -e >/tmp/pp-s$port.out 2>&1 &
	spids+=($!)
done
for i in 0 1; do
	port=$((18601 + i))
	wait_listen $port ${spids[$i]} || { cat /tmp/pp-s$port.out; fail "pingpong server $port did not listen"; }
	timeout 300 ibv_rc_pingpong -d ordma0 -p $port -s 4096 -n 100 -c -e localhost >/tmp/pp-c$port.out 2>&1 &
	cpids+=($!)
done
for i in 0 1; do
	port=$((18601 + i))
	wait ${cpids[$i]} || { cat /tmp/pp-c$port.out; fail "pingpong client $port"; }
	timeout 60 tail --pid=${spids[$i]} -f /dev/null || fail "pingpong server $port did not finish"
	wait ${spids[$i]} || { cat /tmp/pp-s$port.out; fail "pingpong server $port"; }
	grep "iters in" /tmp/pp-c$port.out
done
echo "ok: two ibv_rc_pingpong -e pairs at once, --chk"
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $(objects)"
echo "PASS: data-debug"
