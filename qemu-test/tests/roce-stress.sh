#!/bin/bash
# VM test: RoCEv2 under stress across two machines over a wire that fails on request. Two
# guests (--vms 2), one Ethernet ordma NIC each (netdev 10.78.<G>.1/16), QPs addressed by
# GRH (the RoCE v2 GID of each netdev's IPv4 address, the MAC resolved by ib_core); the
# side channel is eth0. Both ports lose 1% and reorder 1% of the frames they send (the
# control channel's `wire`). qemu-test/progs/verbs-data's stress, vm0 sending (--peer),
# vm1 receiving and checking (--listen): rounds of 16 QP pairs, each a fresh 2 MiB RDMA
# WRITE and four SENDs of 1 B to 4 KiB, every byte of every buffer compared on vm1 against
# the stream vm0 wrote, not one byte wrong or missing: 40 rounds in `make test` (640 WRITEs
# of 2 MiB, 2,560 SENDs), 625 in `make test-full` (10,000 WRITEs of 2 MiB, 40,000 SENDs).
# Then: the recoveries counted (vm0's NIC resent on its transport timer and took
# sequence NAKs, vm1's sent them; each port lost and reordered frames), nothing left on
# either NIC, no page left pinned.
# nics: 1
# run-args: --vms 2
# run-args: --link-layer ethernet
# timeout: 1800
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
source $P/vms.sh
source $P/pins.sh
[ "$ORDMA_VMS" = 2 ] || fail "wants two guests (--vms 2), not $ORDMA_VMS"
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
counter() { nic_ctl 0 status | tr ' ' '\n' | sed -n "s/^$1=//p"; }
ibv_devinfo -d ordma0 | grep -q 'link_layer:[[:space:]]*Ethernet' || { ibv_devinfo -d ordma0; fail "not Ethernet"; }
pins0=$(pins)
nic_mark 0

for w in "loss 0.01" "reorder 0.01"; do
	# shellcheck disable=SC2086
	nic_ctl 0 wire $w >/dev/null || fail "the NIC refused 'wire $w'"
done
echo "vm$ORDMA_VM: ordma0's port loses 1% and reorders 1% of the frames it sends"
case $ORDMA_VM in
0) args=(--peer "$(vm_ip 1):18800") ;;
1) args=(--listen 18800) ;;
esac
rounds=$([ "${ORDMA_TIER:-}" = full ] && echo 625 || echo 40)
timeout 1500 $VD --dev ordma0 "${args[@]}" stress=$rounds | tee /tmp/stress.out || fail "verbs-data stress (vm$ORDMA_VM)"
grep -q "^ok stress: $((rounds * 16)) WRITEs of 2 MiB and $((rounds * 64)) SENDs" /tmp/stress.out ||
	fail "the stress did not complete"
nic_ctl 0 wire clear >/dev/null || fail "wire clear"
echo "vm$ORDMA_VM: $(nic_ctl 0 status | tr ' ' '\n' | grep -E '^(timer_resends|seq_naks_sent|seq_naks_received|wire_lost|wire_reordered|bad_frames)=' | tr '\n' ' ')"
for c in wire_lost wire_reordered; do
	[ "$(nic_since 0 $c)" -gt 0 ] || fail "vm$ORDMA_VM: $c did not grow"
done
# The requester's NIC (vm0) resends; the responder's (vm1) sends sequence NAKs.
if [ "$ORDMA_VM" = 0 ]; then
	[ "$(nic_since 0 timer_resends)" -gt 0 ] || fail "vm0's NIC never resent on its transport timer"
	[ "$(nic_since 0 seq_naks_received)" -gt 0 ] || fail "vm0's NIC took no sequence NAK"
else
	[ "$(nic_since 0 seq_naks_sent)" -gt 0 ] || fail "vm1's NIC sent no sequence NAK"
fi
[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "vm$ORDMA_VM's NIC still holds $(objects)"
[ $(($(pins) - pins0)) -le $SLACK ] || fail "vm$ORDMA_VM: $(($(pins) - pins0)) pages still pinned"
echo "ok: $((rounds * 16)) verified 2 MiB WRITEs and $((rounds * 64)) SENDs over 16 QP pairs between two machines, 1% loss and 1% reordering; recoveries counted"
echo "PASS: roce-stress (vm$ORDMA_VM)"
