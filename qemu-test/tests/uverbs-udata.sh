#!/bin/bash
# VM test: the driver data of ordma's uverbs commands and the doorbell mmap, through the
# raw uverbs write() interface (qemu-test/progs/uverbs_raw.py): malformed requests get the
# documented errnos, not oopses; good ones the documented responses; the doorbell page
# maps and a write to it reaches the NIC's page; CREATE_CQ's request is checked before the
# NIC sees it, and good CQs reach the NIC on the context's doorbell page and leave it;
# 2047 contexts exhaust the doorbell pages.
# Uses ordma0 only; NIC 1 is verbs-provider's, so the tests share one boot in make test.
# nics: 2
# run-args: --nic-args 0 "--log-level debug --guid 0x02000000000000b0 --attr fw_ver=4.5.6 --attr max_qp=1000 --attr max_pd=1000 --attr max_cq=1000 --attr max_mr=4000 --attr max_qp_wr=4096 --attr max_cqe=32768"
# run-args: --nic-args 1 "--guid 0x02000000000000b1 --attr max_qp=77 --attr max_pd=4 --attr max_cq=5 --attr max_mr=6"
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
. /ordma/src/qemu-test/progs/nic-control.sh
field() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" <<<" $1 "; }
s0=$(nic_ctl 0 status) || fail "status: $s0"
pages0=$(nic_ctl 0 doorbell-pages) || fail "doorbell-pages: $pages0"
out=$(python3 /ordma/src/qemu-test/progs/uverbs_raw.py ordma0) || { echo "$out"; fail "uverbs_raw.py"; }
echo "$out"
page=$(echo "$out" | sed -n 's/^doorbell-page //p')
echo "$page" | grep -qx '[0-9]\+' || fail "no doorbell page reported"
status=$(nic_ctl 0 status) || fail "status: $status"
echo "NIC 0: $status"
# The write at offset 0x10 of the page reached the model on that page, which ignored and
# counted it (no doorbell lives there).
w0=$(field "$pages0" "$page")
for _ in $(seq 300); do
	pages=$(nic_ctl 0 doorbell-pages) || fail "doorbell-pages: $pages"
	w=$(field "$pages" "$page")
	[ "${w:-0}" -gt "${w0:-0}" ] && break
	sleep 0.1
done
echo "doorbell page writes: $pages0, then $pages"
[ "${w:-0}" -gt "${w0:-0}" ] || fail "the model took no write on doorbell page $page"
status=$(nic_ctl 0 status) || fail "status: $status"
[ $(($(field "$status" bad_doorbells) - $(field "$s0" bad_doorbells))) = 1 ] ||
	fail "the model did not see the write at offset 0x10 of the doorbell page"
# Only the good CQs (3, and 1 for the QPs; 1 of a second context) and QPs (2) reached the
# NIC, and all are gone.
cqs=$(($(field "$status" cqs_created) - $(field "$s0" cqs_created)))
qps=$(($(field "$status" qps_created) - $(field "$s0" qps_created)))
[ "$cqs $qps" = "5 2" ] ||
	fail "the NIC saw $cqs CQs and $qps QPs created, not the 5 and 2 good ones (a refused one reached it, or a good one did not)"
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
