#!/bin/bash
# VM test: the NIC model of NIC 1 dies while the guest runs (the harness kills it on request).
# The driver reports it (unbind: reset fails; bind: the NIC does not respond) with errors,
# not an oops; NIC 0 keeps working; rmmod is clean.
# nics: 2
# debug: yes
# fresh-vm: yes
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
D=/sys/bus/pci/drivers/ordma
nic0=0000:00:06.0
nic1=0000:00:07.0
[ -e $D/$nic0 ] && [ -e $D/$nic1 ] || fail "both NICs must be bound first"
kill_nic 1
echo "NIC model 1 killed"
echo $nic1 >$D/unbind
dmesg | grep -q "ordma $nic1: the NIC did not come out of reset" || fail "no error message on unbind"
if echo $nic1 >$D/bind 2>/dev/null; then fail "bind of a dead NIC succeeded"; fi
dmesg | grep -q "ordma $nic1: the NIC does not respond" || fail "no error message on bind"
# The other NIC is unaffected.
echo $nic0 >$D/unbind
echo $nic0 >$D/bind
[ -e $D/$nic0 ] || fail "NIC 0 did not rebind"
dmesg | grep "ordma 0000" | tail -n 4
rmmod ordma
echo "PASS: nic-model-killed"
