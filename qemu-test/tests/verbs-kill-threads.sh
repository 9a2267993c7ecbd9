#!/bin/bash
# VM test: a process killed (SIGKILL) while 8 threads allocate and free PDs on one
# context leaves nothing behind: ib_core destroys what it held through the driver, and the
# NIC's PD table (its model's `status`, through the control channel) is empty again.
# nics: 1
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh

pds() { nic_ctl 0 status | sed -n 's/.* pds=\([0-9]*\).*/\1/p'; }
[ "$(pds)" = 0 ] || fail "the NIC has PDs before the test"

python3 - <<'PY' &
import sys, threading
sys.path.insert(0, "/ordma/src/qemu-test/progs")
from ibv import ibv, open_device
ctx = open_device("ordma0")
def churn():
    held = []
    while True:
        pd = ibv.ibv_alloc_pd(ctx)
        if pd:
            held.append(pd)
        if len(held) > 6 or not pd:
            ibv.ibv_dealloc_pd(held.pop(0))
for _ in range(8):
    threading.Thread(target=churn, daemon=True).start()
open("/tmp/churning", "w").close()
threading.Event().wait()
PY
churner=$!
for _ in $(seq 300); do [ -e /tmp/churning ] && break; sleep 0.1; done
[ -e /tmp/churning ] || fail "the PD churner did not start"
# The threads hold PDs from their first allocations on (each keeps up to 7): wait for the
# NIC to hold some (up to 60 s on a loaded machine), then let them churn a while more.
during=0
for _ in $(seq 300); do
	during=$(pds)
	[ "${during:-0}" -gt 0 ] && break
	sleep 0.2
done
echo "PDs on the NIC while 8 threads churn: $during"
[ "${during:-0}" -gt 0 ] || fail "no PDs on the NIC while the threads run"
sleep 1
kill -KILL $churner
wait $churner 2>/dev/null || true
after=
for _ in $(seq 300); do
	after=$(pds)
	[ "$after" = 0 ] && break
	sleep 0.1
done
echo "PDs on the NIC after SIGKILL: $after"
[ "$after" = 0 ] || fail "$after PD(s) left on the NIC after the process was killed"
echo "PASS: verbs-kill-threads"
