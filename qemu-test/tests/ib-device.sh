#!/bin/bash
# VM test: each NIC is an ib_device ordma%d (CA, fw and node GUID from the NIC: set on the
# models' command lines), with port state, LID, GID 0 (fe80::/64 + port GUID) and PKey
# 0xffff from the NIC; NIC 1's model has its link down, so its port is DOWN. Unload
# unregisters both.
# nics: 2
# run-args: --nic-args 0 "--guid 0x02000000000000a0 --attr fw_ver=3.14.15 --attr max_qp=1000"
# run-args: --nic-args 1 "--link down --guid 0x02000000000000a1 --attr fw_ver=2.7.1 --attr max_qp=900"
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
rdma link
rdma dev
rdma link show ordma0/1 | grep -q 'lid 1 .*state ACTIVE physical_state LINK_UP' || fail "ordma0/1 not ACTIVE with LID 1"
rdma link show ordma1/1 | grep -q 'lid 2 .*state DOWN physical_state DISABLED' || fail "ordma1/1 not DOWN with LID 2"
rdma dev show ordma0 | grep -q 'node_type ca protocol ib fw 3.14.15 node_guid 0200:0000:0000:00a0' || fail "ordma0 attributes"
P=/sys/class/infiniband/ordma0/ports/1
[ "$(cat $P/gids/0)" = fe80:0000:0000:0000:0200:0000:0000:00a0 ] || fail "GID 0"
[ "$(cat $P/pkeys/0)" = 0xffff ] || fail "PKey 0"
rmmod ordma
[ ! -e /sys/class/infiniband/ordma0 ] || fail "ordma0 still registered after rmmod"
echo "PASS: ib-device"
