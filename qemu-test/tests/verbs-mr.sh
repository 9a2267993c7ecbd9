#!/bin/bash
# VM test: MRs over user memory through libibverbs and the provider
# (qemu-test/progs/verbs_mr.py): keys, the page size the NIC is given (4 KiB pages,
# a hugetlbfs 2 MiB page, transparent huge pages), several MRs over one buffer,
# access flags, RLIMIT_MEMLOCK for an ordinary user, a killed process's MRs, and an MR over
# dma-bufs (udmabuf from a memfd of 4 KiB pages and of a 2 MiB hugetlb page, each with
# the page size the NIC is given checked). Last, the NIC's model dies under a process holding
# MRs, which registers one more (CREATE_MR times out) and is then killed: neither the
# create nor the destroys are acknowledged, so the pages stay pinned until unbind has
# stopped the NIC (bus mastering off, since the dead NIC does not reset), then released;
# the same for a CQ and a QP (their rings and record) another process holds.
# nics: 1
# fresh-vm: yes
# debug: full
# run-args: --nic-args 0 "--log-level debug"
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
mr() { python3 $P/verbs_mr.py "$@" || fail "verbs_mr.py $*"; }
mrs() { nic_ctl 0 status | sed -n 's/.* mrs=\([0-9]*\).*/\1/p'; }
source /ordma/src/qemu-test/progs/pins.sh

pinned0=$(pins)
echo "pages pinned (FOLL_PIN) before: $pinned0"

# One process for the checks that need nothing in between (a process costs seconds on the
# debug kernel): 4 KiB pages, one 2 MiB hugetlbfs page, THP, shared buffers, access flags,
# and (udmabuf) dma-buf MRs of 4 KiB pages and of a 2 MiB hugetlb page.
echo 4 >/proc/sys/vm/nr_hugepages
[ "$(cat /proc/sys/vm/nr_hugepages)" -ge 2 ] || fail "fewer than 2 huge pages of 2 MiB reserved"
mkdir -p /mnt/huge
mount -t hugetlbfs -o pagesize=2M none /mnt/huge
[ -e /dev/udmabuf ] || fail "no /dev/udmabuf in the guest"
mr basic huge /mnt/huge thp shared access dmabuf dmabuf-huge
rm -f /mnt/huge/mr
umount /mnt/huge

# An ordinary user over RLIMIT_MEMLOCK (64 KiB) registering 1 MiB: ENOMEM.
chmod 755 /root 2>/dev/null || true
setpriv --reuid=nobody --regid=65534 --clear-groups --inh-caps=-all \
	bash -c "ulimit -l 64 && exec python3 $P/verbs_mr.py memlock $((1 << 20))" ||
	fail "the memlock check failed"

# A process killed while holding 8 MRs of 1 MiB: nothing left on the NIC, nothing pinned.
python3 $P/verbs_mr.py hold 8 >/tmp/hold.out 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding /tmp/hold.out && break; sleep 0.1; done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "the MR holder did not start"; }
during=$(mrs)
pinned_during=$(pins)
echo "held: $during MR(s) on the NIC, $((pinned_during - pinned0)) pages pinned"
[ "$during" = 8 ] || fail "$during MR(s) on the NIC while 8 are held"
[ $((pinned_during - pinned0)) -ge $((2048 - SLACK)) ] || fail "8 MiB held but only $((pinned_during - pinned0)) pages pinned"
kill -KILL $holder
wait $holder 2>/dev/null || true
after=
for _ in $(seq 300); do
	after=$(mrs)
	[ "$after" = 0 ] && break
	sleep 0.1
done
pinned_after=$(pins)
echo "after SIGKILL: $after MR(s) on the NIC, $((pinned_after - pinned0)) pages pinned"
[ "$after" = 0 ] || fail "$after MR(s) left on the NIC after the process was killed"
[ $((pinned_after - pinned0)) -le $SLACK ] || fail "$((pinned_after - pinned0)) page(s) still pinned"


# Nothing so far made the driver complain: no error or warning line from an ordma device
# (whatever its words).
if dmesg -l err,warn | grep -E 'ordma [0-9a-f]{4}:'; then
	fail "errors or warnings from ordma in dmesg"
fi
echo "ok: no driver errors or warnings in dmesg"

# The NIC dies under a process holding 4 MRs and another holding a CQ and a QP (769 pages
# of rings and record, made through the raw uverbs interface). The first registers one
# more MR: CREATE_MR times out (ETIMEDOUT), the NIC may have the MR, so its memory stays
# pinned too. Then both are killed: their 4 DESTROY_MRs, DESTROY_QP and DESTROY_CQ fail
# (the timeout made the NIC a failed one) and their memory stays pinned.
nic=0000:00:06.0
D=/sys/bus/pci/drivers/ordma
[ -e $D/$nic ] || fail "the NIC is not at $nic"
rm -f /tmp/reg-now
python3 $P/verbs_mr.py hold 4 --then-reg /tmp/reg-now >/tmp/hold.out 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding /tmp/hold.out && break; sleep 0.1; done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "the MR holder did not start"; }
python3 $P/uverbs_raw.py --hold ordma0 >/tmp/hold-qp.out 2>&1 &
qp_holder=$!
for _ in $(seq 300); do grep -q holding /tmp/hold-qp.out && break; sleep 0.1; done
grep -q holding /tmp/hold-qp.out || { cat /tmp/hold-qp.out; fail "the CQ/QP holder did not start"; }
kill_nic 0
touch /tmp/reg-now
for _ in $(seq 300); do grep -q '^reg ' /tmp/hold.out && break; sleep 0.1; done
echo "registering on the dead NIC: $(grep '^reg ' /tmp/hold.out || echo 'no answer')"
grep -q '^reg ETIMEDOUT ' /tmp/hold.out || fail "CREATE_MR on a NIC that does not answer: expected ETIMEDOUT"
kill -KILL $holder $qp_holder
wait $holder 2>/dev/null || true
wait $qp_holder 2>/dev/null || true
kept=$(($(pins) - pinned0))
echo "NIC dead, holders killed: $kept pages still pinned"
# Each MR's 256 pages, the CQ's and QP's 769: all of them, and nothing else.
[ "$kept" -ge $((1280 + 769 - SLACK)) ] ||
	fail "only $kept pages pinned: the memory of unacknowledged MRs, CQs or QPs was released"
[ "$kept" -le $((1280 + 769 + SLACK)) ] || fail "$kept pages pinned: more than the kept objects'"
timeout 120 sh -c "echo $nic >$D/unbind" || fail "unbind of the dead NIC failed or hung"
# The kept MRs', CQ's and QP's memory is released at unbind, once the NIC is stopped.
released=$(($(pins) - pinned0))
echo "after unbind: $released pages pinned"
[ "$released" -le $SLACK ] || fail "$released page(s) still pinned after unbind"
echo "PASS: verbs-mr"
