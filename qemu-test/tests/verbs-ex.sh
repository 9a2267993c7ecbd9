#!/bin/bash
# VM test: the extended verbs and MR re-registration, on one NIC (loopback: ordma0 to
# itself) and between two NICs (ordma0 and ordma1 over the wire):
# - qemu-test/progs/verbs-data `ex` (ex.c): CQs from ibv_create_cq_ex polled with
#   ibv_start_poll/ibv_next_poll/ibv_end_poll and the ibv_wc_read_* accessors, RC QPs from
#   ibv_create_qp_ex posting with ibv_wr_*: SEND, SEND with immediate, WRITE, WRITE with
#   immediate and READ from 0 B to 2 MiB (three SGEs) and inline SENDs from two buffers,
#   every byte and completion field; 16 WRITEs in one batch, their completions in one
#   pass; a batch with a failed call posts nothing (EINVAL); ibv_post_send in an open batch
#   is EBUSY, ibv_wr_abort drops the batch; and the fast path makes no system call: a
#   thread in seccomp's strict mode posts a batch and polls both CQs (any system call
#   would kill the process); ATOMIC WRITE and FLUSH (ibv_wr_atomic_write, ibv_wr_flush)
#   through an MR and a QP allowing IBV_ACCESS_FLUSH_GLOBAL, the bytes and completions, and
#   a FLUSH to the persistence domain IBV_WC_REM_ACCESS_ERR;
# - qemu-test/progs/verbs-data `rereg` (mr_checks.c): ibv_rereg_mr of a new translation
#   (WRITEs and READs use the new buffer, the old untouched, the old range through the new
#   key REM_ACCESS_ERR), of access (READ-only: WRITE REM_ACCESS_ERR), of the PD (not the
#   QP's: REM_ACCESS_ERR; back), the old key refused after a re-registration, flags 0 EINVAL;
# - qemu-test/progs/verbs-data `mw` (mw.c): memory windows (NIC interface 1.9): the device
#   claims types 1 and 2B; type 1 bound by ibv_bind_mw, WRITE and READ through it, rebound,
#   unbound (REM_ACCESS_ERR); type 2 bound by IBV_WR_BIND_MW, WRITE and READ, past its end
#   REM_ACCESS_ERR, invalidated by IBV_WR_LOCAL_INV, by the peer's IBV_WR_SEND_WITH_INV
#   (IBV_WC_WITH_INV, invalidated_rkey) and by ibv_dealloc_mw, each then REM_ACCESS_ERR; the
#   errors (type 3 EINVAL, ibv_bind_mw of type 2 EINVAL, an MR without MW_BIND
#   IBV_WC_MW_BIND_ERR, LOCAL_INV of type 1 LOC_QP_OP_ERR, a PD with a window EBUSY);
# - rdma-core's own tests of the extended CQ and QP (run_tests.py test_cqex test_qpex: RC,
#   UC and UD traffic through the extended API, atomics with their values, the creation
#   flags and bad flows, IBTA 1.5's ATOMIC WRITE and FLUSH and a FLUSH to persistence
#   refused, ibv_wr_bind_mw) pass on ordma0, the tests of what ordma does not have (XRC)
#   skipped by the tests themselves; its memory window tests (test_mr -k mw: types 1 and 2,
#   each invalidation, a wrong type) pass; and its MR
#   re-registration tests (test_mr -k rereg: access, atomic access, PD, address, with
#   traffic) pass;
# - neither NIC holds a PD, MR, CQ, QP or memory window afterwards.
# On the debug kernel (`# debug: full`) the ex, rereg and mw checks alone, loopback: the
# kernel's part (CREATE_CQ's extended command, CREATE_QP from ibv_create_qp_ex, REREG_MR,
# ALLOC_MW and DEALLOC_MW).
# nics: 2
# timeout: 600
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/rdma-core-tests.sh
source $P/debug-kernel.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*\| mws=[0-9]*' | tr -d '\n'; }
NONE="pds=0 mrs=0 cqs=0 qps=0 mws=0"

$VD --dev ordma0 ex rereg mw || fail "ordma-verbs-data ex rereg mw, loopback"
if debug_kernel; then
	[ "$(objects 0)" = "$NONE" ] || fail "NIC 0 still holds $(objects 0)"
	echo "the debug kernel: the rest runs on the default kernel"
	echo "PASS: verbs-ex"
	exit 0
fi
$VD --dev ordma0 --dev2 ordma1 ex rereg mw || fail "ordma-verbs-data ex rereg mw, between the NICs"

rdma_core_tests ordma0 tests.test_cqex tests.test_qpex
# What must have run, not been skipped: traffic on each transport ordma has, the atomics,
# the bad flows.
rdma_core_passed test_rc_traffic_cq_ex test_ud_traffic_cq_ex test_create_cq_ex \
	test_create_cq_ex_bad_flow test_qp_ex_rc_send test_qp_ex_ud_send test_qp_ex_rc_rdma_write \
	test_qp_ex_rc_rdma_read test_qp_ex_rc_atomic_cmp_swp test_qp_ex_rc_atomic_fetch_add \
	test_qp_ex_rc_send_imm test_qp_ex_rc_rdma_write_imm test_post_send_qp_state_bad_flow \
	test_qp_ex_rc_atomic_write test_qp_ex_rc_flush test_qp_ex_rc_flush_type_violate \
	test_qp_ex_rc_bind_mw
echo "ok: rdma-core's extended CQ and QP tests on ordma0, traffic, atomics, ATOMIC WRITE, FLUSH, binding a window and bad flows among them"
rdma_core_tests ordma0 -k mw tests.test_mr
rdma_core_passed test_mw_type1 test_invalidate_mw_type1 test_mw_type2 \
	test_mw_type2_invalidate_local test_mw_type2_invalidate_remote \
	test_mw_type2_invalidate_dealloc test_reg_mw_wrong_type
echo "ok: rdma-core's memory window tests on ordma0"
rdma_core_tests ordma0 -k rereg tests.test_mr
rdma_core_passed test_mr_rereg_access test_mr_rereg_access_bad_flow test_mr_rereg_pd \
	test_mr_rereg_addr test_mr_rereg_atomic
echo "ok: rdma-core's MR re-registration tests on ordma0"

for n in 0 1; do
	[ "$(objects $n)" = "$NONE" ] || fail "NIC $n still holds $(objects $n)"
done
echo "PASS: verbs-ex"
