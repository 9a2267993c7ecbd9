#!/bin/bash
# VM test: the scale of a real NIC (issue 20, item 5). `ordma-verbs-data scale` (scale.c) on
# ordma0: 2047 contexts at once (one per doorbell page; at least 1024 required), the 2048th
# ENOMEM; then PDs, MRs, CQs and QPs each created up to the limit ibv_query_device reports
# (16384, 65536, 16384, 16384), the next ENOMEM, one destroyed and created again, all
# destroyed; the rates of creates and destroys printed. The same objects on soft-RoCE
# (rxe0, `scale=2000`: its limits are too large to reach here) for the rates beside it
# (performance.md). ordma0 holds nothing afterwards; ibv_devinfo -v reports the limits.
# nics: 1
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"

info=$(ibv_devinfo -v -d ordma0)
for a in "max_qp:.*16384" "max_cq:.*16384" "max_mr:.*65536" "max_pd:.*16384"; do
	grep -q "$a" <<<"$info" || fail "ibv_devinfo -v does not report $a"
done
$VD --dev ordma0 scale || fail "ordma-verbs-data scale on ordma0"
modprobe rdma_rxe
nd=$(ip -br link | awk '$1 != "lo" { print $1; exit }')
ip link set "$nd" up
rdma link add rxe0 type rxe netdev "$nd"
$VD --dev rxe0 scale=2000 || fail "ordma-verbs-data scale=2000 on rxe0"
rdma link del rxe0
objects=$(nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*')
[ "$objects" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $objects"
echo "PASS: scale"
