#!/bin/bash
# VM test: rdma-core 56.1's own test suite (pyverbs' tests as Debian ships them, run_tests.py),
# the whole of it, on ordma0 (its RoCEv2 port: --link-layer ethernet, as soft-RoCE's) and on
# soft-RoCE (rxe0 over another netdev of the guest) in the same guest,
# compared by qemu-test/progs/rdma_core_suite.py: no test fails on ordma0, every test that
# passes on rxe0 passes on ordma0 (test_rdmacm aside: rdma_cm needs kernel QPs), and every
# other test is skipped by the test itself for the reason it prints (the list, by reason, is
# in the output; testing.md says why ordma does not claim each capability). One python
# process per test module, so that a crash (pyverbs on rxe0 crashes in some) costs that
# module's later tests only: on ordma0 any crash fails the step. The tally line
# ("rdma-core suite: ordma0 P passed, S skipped, ...") is the result; both runs' outputs
# are in the results folder (suite-ordma0.out, suite-rxe0.out).
# In `make test` soft-RoCE's results come from their recording
# (qemu-test/progs/rdma-core-suite-rxe0.txt: rdma-core and the kernel are pinned, so they are
# too), and only ordma0 runs the suite, its modules in which soft-RoCE passes a test; `make test-full` (ORDMA_TIER=full) runs soft-RoCE
# live, compares with that, and fails if the recording is no longer what soft-RoCE does
# (the results folder's rxe0-record.txt is the new one, to copy over it).
# ordma0 holds no object afterwards.
# nics: 1
# run-args: --link-layer ethernet
# timeout: 1500
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh

# soft-RoCE on a netdev that is not ordma0's own.
mine=$(rdma link show ordma0/1 | grep -o 'netdev [^ ]*' | cut -d' ' -f2)
[ -n "$mine" ] || fail "ordma0 has no netdev: $(rdma link show ordma0/1)"
other=$(ip -br link | awk -v m="$mine" '$1 != "lo" && $1 != m { print $1; exit }')
[ -n "$other" ] || fail "no netdev for soft-RoCE besides ordma0's $mine: $(ip -br link)"
ip link set "$other" up
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev "$other"
echo "ordma0 on $mine, rxe0 on $other"
mkdir -p /tmp/rdma-core-tests
cp -r /usr/share/doc/rdma-core/tests /tmp/rdma-core-tests/
gunzip -f /tmp/rdma-core-tests/tests/*.gz
MODULES=($(cd /tmp/rdma-core-tests/tests && ls test_*.py | sed 's/\.py$//'))
REC=$P/rdma-core-suite-rxe0.txt
if [ "${ORDMA_TIER:-}" != full ] && [ -f "$REC" ]; then
	# `make test`: the modules with a test soft-RoCE passes (test_rdmacm aside: not compared),
	# 14 of 47; the others (mlx5's, efa's, CUDA's: every test skips on both) in make test-full.
	MODULES=($(awk -F'\t' '$1 == "ok" { split($2, a, "."); if (a[2] != "test_rdmacm") print a[2] }' "$REC" | sort -u))
	echo "make test: the ${#MODULES[@]} modules in which soft-RoCE passes a test: ${MODULES[*]}"
fi
suite() { # DEV: every module on DEV into /ordma/results/suite-DEV.out
	local dev=$1 out=/ordma/results/suite-$1.out m rc t0=$SECONDS crashed=0
	: >"$out"
	for m in "${MODULES[@]}"; do
		rc=0
		(cd /tmp/rdma-core-tests/tests && timeout 300 python3 run_tests.py --dev "$dev" -v "tests.$m") \
			>>"$out" 2>&1 || rc=$?
		case $rc in
		0 | 1) ;; # passed; a test failed (the comparison says which)
		*) echo "CRASHED: tests.$m (exit $rc)" | tee -a "$out"; crashed=$((crashed + 1)) ;;
		esac
	done
	echo "run_tests.py --dev $dev: ${#MODULES[@]} modules in $((SECONDS - t0)) s, $crashed crashed"
}
suite ordma0
if [ "${ORDMA_TIER:-}" = full ] || [ ! -f "$REC" ]; then
	suite rxe0
	against=(/ordma/results/suite-rxe0.out --record /ordma/results/rxe0-record.txt)
	if [ -f "$REC" ]; then
		against+=(--check-record "$REC")
	else
		echo "NOTE: no recording of soft-RoCE's results ($REC): rxe0 ran live; its recording is the results folder's rxe0-record.txt"
	fi
else
	echo "soft-RoCE's results: the recording ($REC; make test-full runs soft-RoCE live)"
	against=("$REC")
fi
python3 $P/rdma_core_suite.py /ordma/results/suite-ordma0.out "${against[@]}" || {
	echo "----- ordma0's failures:"
	sed -n '/^=\{20,\}$/,/^Ran /p' /ordma/results/suite-ordma0.out | head -300
	fail "rdma-core's suite on ordma0 against rxe0"
}
objects=$(nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*')
[ "$objects" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $objects"
echo "PASS: rdma-core-suite"
