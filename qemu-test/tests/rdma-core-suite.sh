#!/bin/bash
# VM test: rdma-core 56.1's own test suite (pyverbs' tests as Debian ships them, run_tests.py),
# the whole of it, on ordma0 and on soft-RoCE (rxe0 over the guest's eth0) in the same guest,
# compared by qemu-test/progs/rdma_core_suite.py: no test fails on ordma0, every test that
# passes on rxe0 passes on ordma0 (test_rdmacm aside: rdma_cm needs kernel QPs), and every
# other test is skipped by the test itself for the reason it prints (the list, by reason, is
# in the output; testing.md says why ordma does not claim each capability). The tally line
# ("rdma-core suite: ordma0 P passed, S skipped, F failed of N; rxe0 ...") is the result.
# ordma0 holds no object afterwards.
# nics: 1
# timeout: 1500
# fresh-vm: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh

modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
mkdir -p /tmp/rdma-core-tests
cp -r /usr/share/doc/rdma-core/tests /tmp/rdma-core-tests/
gunzip -f /tmp/rdma-core-tests/tests/*.gz
suite() { # DEV: the whole suite on DEV into /tmp/suite-DEV.out
	local rc=0 t0=$SECONDS
	(cd /tmp/rdma-core-tests/tests && timeout 600 python3 run_tests.py --dev "$1" -v) \
		>/tmp/suite-"$1".out 2>&1 || rc=$?
	echo "run_tests.py --dev $1: exit $rc in $((SECONDS - t0)) s; $(grep -E '^Ran [0-9]+ tests' /tmp/suite-"$1".out || echo 'no "Ran" line')"
	[ $rc != 124 ] || fail "rdma-core's suite on $1 did not end within 600 s"
}
suite ordma0
suite rxe0
python3 $P/rdma_core_suite.py /tmp/suite-ordma0.out /tmp/suite-rxe0.out || {
	echo "----- ordma0's failures:"
	sed -n '/^=\{20,\}$/,$p' /tmp/suite-ordma0.out | head -300
	fail "rdma-core's suite on ordma0 against rxe0"
}
objects=$(nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*')
[ "$objects" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $objects"
echo "PASS: rdma-core-suite"
