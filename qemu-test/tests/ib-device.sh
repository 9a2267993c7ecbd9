#!/bin/bash
# VM test: each NIC is an ib_device ordma%d (CA, fw from the NIC), with port state, LID,
# GID 0 (fe80::/64 + port GUID) and PKey 0xffff from the NIC; NIC 1's model has its link
# down, so its port is DOWN. Unload unregisters both.
# nics: 2
# run-args: --nic-args 1 "--link down"
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
rdma link
rdma dev
rdma link show ordma0/1 | grep -q 'lid 1 .*state ACTIVE physical_state LINK_UP' || fail "ordma0/1 not ACTIVE with LID 1"
rdma link show ordma1/1 | grep -q 'lid 2 .*state DOWN physical_state DISABLED' || fail "ordma1/1 not DOWN with LID 2"
rdma dev show ordma0 | grep -q 'node_type ca protocol ib fw 0.1.0 node_guid 0200:0000:0000:0000' || fail "ordma0 attributes"
P=/sys/class/infiniband/ordma0/ports/1
[ "$(cat $P/gids/0)" = fe80:0000:0000:0000:0200:0000:0000:0000 ] || fail "GID 0"
[ "$(cat $P/pkeys/0)" = 0xffff ] || fail "PKey 0"
rmmod ordma
[ ! -e /sys/class/infiniband/ordma0 ] || fail "ordma0 still registered after rmmod"
echo "PASS: ib-device"
