#!/bin/bash
# VM test: a NIC goes away under a process that holds a context and PDs on it.
# 1. sysfs unbind of a working NIC: returns at once (no wait for the process), the NIC
#    frees the PDs (and another process's QPs, CQs and MRs: ib_core destroys them through
#    the driver while the NIC still answers), the process gets EIO and closes cleanly;
#    rebind gives the device back and a new process can use it.
# 2. the NIC's model dies, then the NIC is unbound: freeing the PDs cannot reach the NIC;
#    the first DEALLOC_PD times out, the driver treats the NIC as failed and reports it
#    once, the rest fail at once without waiting again, and unbind completes; the process
#    gets EIO and closes cleanly. No oops either way.
# nics: 2
# run-args: --nic-args 0 "--log-level debug"
# debug: full
# fresh-vm: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/verbs-procs.sh
source /ordma/src/qemu-test/progs/nic-control.sh
D=/sys/bus/pci/drivers/ordma
nic0=0000:00:06.0
nic1=0000:00:07.0
[ -e $D/$nic0 ] && [ -e $D/$nic1 ] || fail "both NICs must be bound first"
ibdev() { ls "/sys/bus/pci/devices/$1/infiniband" 2>/dev/null; }
dev0=$(ibdev $nic0)
dev1=$(ibdev $nic1)
echo "$nic0 is $dev0, $nic1 is $dev1"

# 1. Unbind under a live context, and another holding QPs, CQs and MRs.
spawn A "$dev0" 2
echo "A: $(report A)"
python3 /ordma/src/qemu-test/progs/verbs_cq_qp.py hold >/tmp/hold.out 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding /tmp/hold.out && break; sleep 0.1; done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "the CQ/QP holder did not start"; }
# The NIC's count of objects destroyed by a command (`status`; its reset frees without
# counting): KIND in pds mrs cqs qps.
destroyed() { sed -n "s/.* $1_destroyed=\([0-9]*\).*/\1/p" <<<" $(nic_ctl 0 status) "; }
pds0=$(destroyed pds) qps0=$(destroyed qps) cqs0=$(destroyed cqs) mrs0=$(destroyed mrs)
t0=$(date +%s%N)
timeout 60 sh -c "echo $nic0 >$D/unbind" || fail "unbind under a live context failed or hung"
echo "unbind took $((($(date +%s%N) - t0) / 1000000)) ms"
[ -z "$(ibdev $nic0)" ] || fail "$dev0 still registered after unbind"
freed=$(($(destroyed pds) - pds0))
[ "$freed" = 3 ] || fail "the NIC freed $freed PDs at unbind, expected 3 (A's 2, the holder's 1)"
[ $(($(destroyed qps) - qps0)) = 2 ] && [ $(($(destroyed cqs) - cqs0)) = 2 ] &&
	[ $(($(destroyed mrs) - mrs0)) = 2 ] ||
	fail "the holder's 2 QPs, 2 CQs and 2 MRs were not destroyed on the NIC at unbind"
echo "ok: the NIC destroyed the holder's 2 QPs, 2 CQs and 2 MRs and freed 3 PDs before its reset"
kill $holder
wait $holder 2>/dev/null || true
tell A after-remove
grep -qx 'alloc_pd errno 5' /tmp/A.out || fail "A: ALLOC_PD after unbind is not EIO: $(cat /tmp/A.out)"
grep -qx closed /tmp/A.out || fail "A did not close cleanly"
echo $nic0 >$D/bind
dev0=$(ibdev $nic0)
[ -n "$dev0" ] || fail "no ib_device after rebind"
spawn A2 "$dev0" 1
echo "A2 on the rebound $dev0: $(report A2)"
tell A2 free
echo "ok: unbind under a live context, then rebind"

# 2. The NIC dies under a live context, then is unbound.
spawn B "$dev1" 3
echo "B: $(report B)"
kill_nic 1
t0=$(date +%s%N)
timeout 120 sh -c "echo $nic1 >$D/unbind" || fail "unbind of a dead NIC under a live context failed or hung"
echo "unbind of the dead NIC took $((($(date +%s%N) - t0) / 1000000)) ms"
[ -z "$(ibdev $nic1)" ] || fail "$dev1 still registered"
dmesg | grep "ordma $nic1" | tail -n 6
[ "$(dmesg | grep -c "ordma $nic1: admin command 0x4 timed out")" = 1 ] ||
	fail "expected exactly one DEALLOC_PD timeout (then the NIC is treated as failed)"
tell B after-remove
grep -qx 'alloc_pd errno 5' /tmp/B.out || fail "B: ALLOC_PD after unbind is not EIO: $(cat /tmp/B.out)"
grep -qx closed /tmp/B.out || fail "B did not close cleanly"
echo "ok: a dead NIC under a live context unbinds"
rmmod ordma
echo "PASS: verbs-unbind"
