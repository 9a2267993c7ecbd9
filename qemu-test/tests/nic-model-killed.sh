#!/bin/bash
# VM test: the NIC model of NIC 1 dies while the guest runs (the harness kills it on request).
# Unbinding it (its reset fails) completes, without an oops, and leaves no ib_device; binding
# it again fails with ENODEV (the NIC does not respond: reads return all ones); NIC 0 keeps
# working; rmmod is clean.
# nics: 2
# debug: full
# fresh-vm: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
source /ordma/src/qemu-test/progs/pci-bind.sh
D=/sys/bus/pci/drivers/ordma
nic0=0000:00:06.0
nic1=0000:00:07.0
[ -e $D/$nic0 ] && [ -e $D/$nic1 ] || fail "both NICs must be bound first"
ls /sys/bus/pci/devices/$nic1/infiniband/ | grep -q . || fail "NIC 1 has no ib_device"
kill_nic 1
echo "NIC model 1 killed"
echo $nic1 >$D/unbind
[ ! -e $D/$nic1 ] || fail "NIC 1 still bound after unbind"
[ ! -e /sys/bus/pci/devices/$nic1/infiniband ] || fail "NIC 1's ib_device outlived the unbind"
got=$(bind_result $nic1)
echo "bind of the dead NIC: $got"
[ "$got" = ENODEV ] || fail "bind of a dead NIC: want ENODEV"
[ ! -e $D/$nic1 ] || fail "the dead NIC is bound"
# The other NIC is unaffected.
echo $nic0 >$D/unbind
echo $nic0 >$D/bind
[ -e $D/$nic0 ] || fail "NIC 0 did not rebind"
ls /sys/bus/pci/devices/$nic0/infiniband/ | grep -q . || fail "NIC 0 has no ib_device after rebinding"
rmmod ordma
echo "PASS: nic-model-killed"
