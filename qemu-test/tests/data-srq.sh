#!/bin/bash
# VM test: shared receive queues on one NIC (loopback), through libibverbs, the provider's
# fast path (ibv_post_srq_recv: a WQE in the SRQ's ring and a DB_SRQ doorbell, no system
# call) and the NIC's RC engine, and their lifetimes:
# - ibv_devinfo -v reports max_srq 16384, max_srq_wr 32767, max_srq_sge 16 (the model's);
# - qemu-test/progs/verbs-data (srq_checks.c): 400 SENDs with immediate of 0 B to 1 MiB + 3
#   from 4 QPs to 4 QPs on one SRQ, each receive reposted as it completes (slots come back
#   out of order): every message once, on its QP, every byte; the limit event
#   (IBV_EVENT_SRQ_LIMIT_REACHED, then the limit 0) and IBV_EVENT_QP_LAST_WQE_REACHED for a
#   QP moved to ERR, the SRQ's WQEs left then reaching another QP; the same 400 SENDs on
#   an SRQ of 7 WQEs resized to 40 after 100 of them (ibv_modify_srq IBV_SRQ_MAX_WR, with
#   SENDs in flight and receives unpolled; IBV_DEVICE_SRQ_RESIZE said), every message once
#   with its bytes; exact errnos (EINVAL, EOPNOTSUPP, ENOMEM, EBUSY; max_wr 4096 answered
#   8191; resizes above max_srq_wr EINVAL, to less a no-op, to 10000 and to 20000 with a
#   limit; max_srq SRQs then ENOMEM);
# - ibv_srq_pingpong, unmodified, server and client on ordma0 (16 QPs on one SRQ each),
#   polling and with -e (its -c writes and checks one zero byte per page of a zeroed
#   buffer: no byte check; verbs-data's above is);
# - perftest's ib_send_bw --use-srq, unmodified, with its result line;
# - rdma-core's own tests/test_srq.py (pyverbs; run_tests.py --dev ordma0): traffic through
#   an SRQ, the limit event and the resize (test_resize_srq) pass;
# - a process killed with SIGKILL holding 2 SRQs with QPs and posted WQEs leaves nothing on
#   the NIC, and the NIC holds no PD, MR, CQ, QP or SRQ afterwards.
# On the debug kernel the pingpongs, perftest and rdma-core's tests (user space only) are
# left to the default kernel's run.
# nics: 1
# debug: full
# timeout: 900
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*\|srqs=[0-9]*' | xargs; }

info=$(ibv_devinfo -v -d ordma0)
for want in "max_srq:[[:space:]]*16384" "max_srq_wr:[[:space:]]*32767" "max_srq_sge:[[:space:]]*16"; do
	echo "$info" | grep -Eq "$want\$" || { echo "$info"; fail "ibv_devinfo -v: no $want"; }
done
echo "ok: ibv_devinfo -v reports max_srq 16384, max_srq_wr 32767, max_srq_sge 16"

$VD srq-errnos srq-events srq srq-resize || fail "ordma-verbs-data's SRQ checks on ordma0"

# The rest is user space (the fast path, perftest, pyverbs) until the killed holder: on the
# debug kernel, where only the kernel's paths are the point, it runs on the default kernel.
source $P/debug-kernel.sh
if debug_kernel; then
	echo "the debug kernel: pingpong, perftest and rdma-core's tests run on the default kernel"
else
	pair_run "ibv_srq_pingpong 4096 B" 18515 ibv_srq_pingpong -d ordma0 -n 200 -c -- ibv_srq_pingpong -d ordma0 -n 200 -c
	grep -q "200 iters in" /tmp/cli.out || fail "ibv_srq_pingpong: no result line"
	! grep -q "invalid data" /tmp/srv.out /tmp/cli.out || fail "ibv_srq_pingpong: invalid data"
	pair_run "ibv_srq_pingpong 64 KiB, 4 QPs, events" 18516 ibv_srq_pingpong -d ordma0 -s 65536 -q 4 -r 8 -n 50 -e -- ibv_srq_pingpong -d ordma0 -s 65536 -q 4 -r 8 -n 50 -e
	grep -q "50 iters in" /tmp/cli.out || fail "ibv_srq_pingpong -e: no result line"
	echo "ok: ibv_srq_pingpong on ordma0, polling and with -e"

	pair_run "ib_send_bw --use-srq" 18610 ib_send_bw -d ordma0 -F --use-srq -n 200 -s 65536 -- ib_send_bw -d ordma0 -F --use-srq -n 200 -s 65536
	grep -Eq '^ *65536 +200 ' /tmp/cli.out || fail "ib_send_bw --use-srq: no result line for 65536 B x 200"
	echo "ok: ib_send_bw --use-srq on ordma0"

	# rdma-core's own SRQ tests (pyverbs, as Debian installs them, compressed): SRQ traffic,
	# the limit event and the resize pass.
	rm -rf /tmp/tests && cp -r /usr/share/doc/rdma-core/tests /tmp/tests && gunzip -f /tmp/tests/*.gz
	(cd /tmp && timeout 300 python3 /tmp/tests/run_tests.py --dev ordma0 -v -k SrqTestCase) >/tmp/rc-tests.out 2>&1 ||
		{ cat /tmp/rc-tests.out; fail "rdma-core's SrqTestCase"; }
	cat /tmp/rc-tests.out
	grep -q "^Ran 3 tests" /tmp/rc-tests.out && grep -qx "OK" /tmp/rc-tests.out &&
		grep -q "test_resize_srq.*ok$\|^Test modify_srq with IBV_SRQ_MAX_WR.* ... ok$" /tmp/rc-tests.out ||
		fail "rdma-core's SrqTestCase: not all 3 passed (the resize among them)"
	echo "ok: rdma-core's test_srq.py (traffic, the limit event, the resize)"
fi

# A process killed while it holds SRQs (with QPs on them and WQEs posted): uverbs destroys
# its QPs, then its SRQs, on the NIC.
$VD srq-hold >/tmp/hold.out 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q holding /tmp/hold.out && break; sleep 0.1; done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "srq-hold did not get to hold its SRQs"; }
held=$(objects)
[[ $held == *"qps=12 srqs=2" ]] || fail "the holder should have 12 QPs and 2 SRQs on the NIC: $held"
kill -KILL $pid
wait $pid 2>/dev/null || true
for _ in $(seq 100); do [ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0 srqs=0" ] && break; sleep 0.1; done
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0 srqs=0" ] || fail "after SIGKILL the NIC still holds $(objects)"
echo "ok: a process killed holding 2 SRQs ($held) left nothing on the NIC"

[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0 srqs=0" ] || fail "the NIC still holds $(objects)"
echo "PASS: data-srq"
