#!/bin/bash
# VM test: the driver data of ordma's uverbs commands and the doorbell mmap, through the
# raw uverbs write() interface (qemu-test/progs/uverbs_raw.py): malformed requests get the
# documented errnos, not oopses; good ones the documented responses; the doorbell page
# maps and a write to it reaches the NIC's page; 63 contexts exhaust the doorbell pages.
# Uses ordma0 only; NIC 1 is verbs-provider's, so the tests share one boot in make test.
# nics: 2
# run-args: --nic-args 0 "--log-level debug"
# run-args: --nic-args 1 "--attr max_qp=77 --attr max_pd=4"
# debug: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
out=$(python3 /ordma/src/qemu-test/progs/uverbs_raw.py ordma0) || { echo "$out"; fail "uverbs_raw.py"; }
echo "$out"
page=$(echo "$out" | sed -n 's/^doorbell-page //p')
echo "$page" | grep -qx '[0-9]\+' || fail "no doorbell page reported"
# The model saw the write on that page, at offset 0x10 (its log is in the results share).
grep "doorbell write" /ordma/results/nic0.log || true
grep -q "doorbell write.*page=$page offset=16 len=4" /ordma/results/nic0.log \
	|| fail "the model did not see the doorbell write on page $page"
rmmod ordma
echo "PASS: uverbs-udata"
