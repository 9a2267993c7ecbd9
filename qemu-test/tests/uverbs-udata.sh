#!/bin/bash
# VM test: the driver data of ordma's uverbs commands and the doorbell mmap, through the
# raw uverbs write() interface (qemu-test/progs/uverbs_raw.py): malformed requests get the
# documented errnos, not oopses; good ones the documented responses; the doorbell page
# maps and a write to it reaches the NIC's page; CREATE_CQ's request is checked before the
# NIC sees it, and good CQs reach the NIC on the context's doorbell page and leave it;
# 63 contexts exhaust the doorbell pages.
# Uses ordma0 only; NIC 1 is verbs-provider's, so the tests share one boot in make test.
# nics: 2
# run-args: --nic-args 0 "--log-level debug"
# run-args: --nic-args 1 "--attr max_qp=77 --attr max_pd=4 --attr max_cq=5 --attr max_mr=6"
# debug: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
. /ordma/src/qemu-test/progs/nic-control.sh
out=$(python3 /ordma/src/qemu-test/progs/uverbs_raw.py ordma0) || { echo "$out"; fail "uverbs_raw.py"; }
echo "$out"
page=$(echo "$out" | sed -n 's/^doorbell-page //p')
echo "$page" | grep -qx '[0-9]\+' || fail "no doorbell page reported"
# The model saw the write on that page, at offset 0x10 (its log is in the results share).
grep "doorbell write" /ordma/results/nic0.log || true
grep -q "doorbell write.*page=$page offset=16 len=4" /ordma/results/nic0.log \
	|| fail "the model did not see the doorbell write on page $page"
# Only the good CQs (3, and 1 for the QPs, on this page; 1 of a second context) and QPs
# reached the NIC, on their contexts' pages,
# and all are gone.
created=$(grep -c "CQ created cqn=[0-9]* db_page=$page\$" /ordma/results/nic0.log || true)
[ "$created" = 4 ] || fail "the NIC saw $created CQs created on page $page, expected 4"
[ "$(grep -c "CQ created" /ordma/results/nic0.log)" = 5 ] || fail "a refused CREATE_CQ reached the NIC (or the second context's CQ did not)"
[ "$(grep -c "QP created qpn=[0-9]* db_page=$page\$" /ordma/results/nic0.log)" = 2 ] ||
	fail "the NIC did not see exactly the 2 good QPs created on page $page"
status=$(nic_ctl 0 status) || fail "status: $status"
echo "NIC 0: $status"
echo "$status" | grep -q " pds=0 mrs=0 cqs=0 qps=0 " || fail "objects left on the NIC: $status"
# Doorbell ownership: the arm from the other context's page was ignored and counted, the
# owner's was taken.
echo "$out" | grep -q "^foreign-cq [0-9]*$" || fail "no foreign doorbell check ran"
echo "$status" | grep -q " doorbells=1 " || fail "the owner's CQ arm was not taken: $status"
echo "$status" | grep -q " foreign_doorbells=1\( \|\$\)" || fail "the foreign CQ arm was not counted as such: $status"
# Object limits (NIC 1's model reports max_pd 4, max_cq 5, max_qp 77, max_mr 6): exactly
# that many of each, then ENOMEM, and a freed one's room is reused.
out=$(python3 /ordma/src/qemu-test/progs/uverbs_raw.py --limits ordma1 4 5 77 6) ||
	{ echo "$out"; fail "limits on ordma1"; }
echo "$out"
status=$(nic_ctl 1 status) || fail "status: $status"
echo "NIC 1: $status"
echo "$status" | grep -q " pds=0 mrs=0 cqs=0 qps=0 " || fail "objects left on NIC 1: $status"
rmmod ordma
echo "PASS: uverbs-udata"
