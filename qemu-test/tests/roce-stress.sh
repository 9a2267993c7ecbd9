#!/bin/bash
# VM test: RoCEv2 under stress over a wire that fails on request. Two Ethernet ordma NICs
# in one guest (--nics 2 --link-layer ethernet: each a port with its netdev and GIDs; their
# frames go through the NIC models' wire, as between two machines), QPs addressed by GRH
# (the RoCE v2 GID of each netdev's IPv4 address):
# - qemu-test/progs/verbs-data's transfers between the two (every size, SGE layout and
#   opcode, every byte) on a clean wire;
# - then both ports lose 1% and reorder 1% of the frames they send (the control channel's
#   `wire`), and verbs-data's stress: 625 rounds of 16 QP pairs, each a fresh 2 MiB RDMA
#   WRITE and four SENDs of 1 B to 4 KiB, every byte compared: 10,000 WRITEs of 2 MiB,
#   40,000 SENDs, not one byte wrong or missing;
# - the recovery counters moved (transport timer resends, sequence NAKs sent and taken)
#   and the wire's (lost, reordered); nothing left on either NIC.
# nics: 2
# run-args: --link-layer ethernet
# fresh-vm: yes
# timeout: 1800
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
counter() { nic_ctl "$1" status | tr ' ' '\n' | sed -n "s/^$2=//p"; }
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
for d in ordma0 ordma1; do
	ibv_devinfo -d $d | grep -q 'link_layer:[[:space:]]*Ethernet' || { ibv_devinfo -d $d; fail "$d is not Ethernet"; }
done

$VD --dev ordma0 --dev2 ordma1 transfers || fail "verbs-data transfers over RoCE"
echo "ok: verbs-data transfers between ordma0 and ordma1 by GID"

for n in 0 1; do
	nic_ctl $n wire loss 0.01 >/dev/null && nic_ctl $n wire reorder 0.01 >/dev/null || fail "NIC $n refused 'wire'"
done
$VD --dev ordma0 --dev2 ordma1 stress=625 | tee /tmp/stress.out
grep -q '^ok stress: 10000 WRITEs of 2 MiB and 40000 SENDs' /tmp/stress.out || fail "the stress did not complete"
for n in 0 1; do
	nic_ctl $n wire clear >/dev/null || fail "wire clear"
	echo "NIC $n: $(nic_ctl $n status | tr ' ' '\n' | grep -E '^(timer_resends|seq_naks_sent|seq_naks_received|wire_lost|wire_reordered|bad_frames)=' | tr '\n' ' ')"
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC $n still holds $(objects $n)"
	for c in wire_lost wire_reordered; do
		[ "$(counter $n $c)" -gt 0 ] || fail "NIC $n: $c is 0"
	done
done
# The requester's NIC (ordma0) resends; the responder's (ordma1) sends sequence NAKs.
[ "$(counter 0 timer_resends)" -gt 0 ] || fail "ordma0 never resent on its transport timer"
[ "$(counter 1 seq_naks_sent)" -gt 0 ] || fail "ordma1 sent no sequence NAK"
[ "$(counter 0 seq_naks_received)" -gt 0 ] || fail "ordma0 took no sequence NAK"
echo "ok: 10,000 verified 2 MiB WRITEs and 40,000 SENDs over 16 QP pairs with 1% loss and 1% reordering; recoveries counted"
echo "PASS: roce-stress"
