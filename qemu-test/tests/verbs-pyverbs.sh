#!/bin/bash
# VM test: ordma through rdma-core's own Python binding, pyverbs (qemu-test/progs/
# pyverbs_rc.py): device and port queries, the CQ and QP limits with their exact errnos
# (PyverbsRDMAError.error_code), two RC QPs brought to RTS by pyverbs' QP.to_rts and
# checked with QP.query, then SEND/RECV, RDMA WRITE and RDMA READ of 64 KiB between pyverbs
# MRs, every byte; afterwards the NIC holds nothing.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
python3 $P/pyverbs_rc.py ordma0 || fail "pyverbs_rc.py"
objects=$(nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*')
[ "$objects" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $objects"
echo "PASS: verbs-pyverbs"
