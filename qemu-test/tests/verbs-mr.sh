#!/bin/bash
# VM test: MRs over user memory through libibverbs and the provider
# (qemu-test/progs/verbs_mr.py): keys, the page size the NIC is given (4 KiB pages,
# a hugetlbfs 2 MiB page, transparent huge pages), several MRs over one buffer,
# access flags, RLIMIT_MEMLOCK for an ordinary user, and a killed process's MRs.
# nics: 1
# debug: yes
# run-args: --nic-args 0 "--log-level debug"
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
mr() { python3 $P/verbs_mr.py "$@" || fail "verbs_mr.py $*"; }
mrs() { nic_ctl 0 status | sed -n 's/.* mrs=\([0-9]*\).*/\1/p'; }
pins() { awk '/^nr_foll_pin_acquired/ {a=$2} /^nr_foll_pin_released/ {r=$2} END {print a-r}' /proc/vmstat; }

pinned0=$(pins)
echo "pages pinned (FOLL_PIN) before: $pinned0"

mr basic

# One 2 MiB hugetlbfs page.
echo 4 >/proc/sys/vm/nr_hugepages
[ "$(cat /proc/sys/vm/nr_hugepages)" -ge 1 ] || fail "no 2 MiB huge pages reserved"
mkdir -p /mnt/huge
mount -t hugetlbfs -o pagesize=2M none /mnt/huge
mr huge /mnt/huge
rm -f /mnt/huge/mr
umount /mnt/huge

mr thp
mr shared
mr access

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
[ $((pinned_during - pinned0)) -ge 2048 ] || fail "8 MiB held but only $((pinned_during - pinned0)) pages pinned"
kill -KILL $holder
wait $holder 2>/dev/null || true
after=
for _ in $(seq 100); do
	after=$(mrs)
	[ "$after" = 0 ] && break
	sleep 0.1
done
pinned_after=$(pins)
echo "after SIGKILL: $after MR(s) on the NIC, $((pinned_after - pinned0)) pages pinned"
[ "$after" = 0 ] || fail "$after MR(s) left on the NIC after the process was killed"
[ "$pinned_after" = "$pinned0" ] || fail "$((pinned_after - pinned0)) page(s) still pinned"

if dmesg | grep -E 'ordma.*(failed|error|leak)'; then
	fail "errors in dmesg"
fi
echo "PASS: verbs-mr"
