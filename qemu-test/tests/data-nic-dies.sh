#!/bin/bash
# VM test: a NIC dies in the middle of a transfer between two NICs. perftest's ib_write_bw
# (1 MiB messages) runs from ordma1 (client, the requester) to ordma0 (server, the WRITEs'
# target); NIC 0's model is killed once the WRITEs run (NIC 1 took more than 10 doorbells).
# Then:
# - the client, on the live NIC, gets an error completion (its WRITEs are not acknowledged:
#   the transport timer's retries run out, RETRY_EXC_ERR, status 12) and exits, no hang;
# - the server, on the dead NIC, is killed; its QP, CQ, MR and PD cannot be destroyed on the
#   NIC, so their pages stay pinned until unbind stops the NIC, then are released;
# - NIC 1 still moves bytes (ordma-verbs-data loopback on ordma1, every byte checked) and
#   holds nothing afterwards; NIC 1's model counted no bad frame;
# - no kernel warning (the harness), and the module unloads.
# nics: 2
# fresh-vm: yes
# tier: full
# timeout: 400
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
D=/sys/bus/pci/drivers/ordma
nic0=0000:00:06.0
VD=/ordma/payload/ordma-verbs-data
source /ordma/src/qemu-test/progs/pins.sh
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
pinned0=$(pins)

ib_write_bw -d ordma0 -F -s 1048576 -D 30 -p 19100 >/tmp/srv.out 2>&1 &
srv=$!
wait_listen 19100 $srv || { cat /tmp/srv.out; fail "the ib_write_bw server did not listen"; }
timeout 120 ib_write_bw -d ordma1 -F -s 1048576 -D 30 -p 19100 localhost >/tmp/cli.out 2>&1 &
cli=$!
# The transfer runs: more than 10 doorbells on NIC 1 (its WRITEs), waited for up to 60 s.
doorbells() { nic_ctl 1 status | sed -n 's/.* doorbells=\([0-9]*\).*/\1/p'; }
d0=$(doorbells)
d1=$d0
for _ in $(seq 300); do
	d1=$(doorbells)
	[ $((d1 - d0)) -gt 10 ] && break
	kill -0 $cli 2>/dev/null || break
	sleep 0.2
done
echo "NIC 1's doorbells since the client started: $((d1 - d0))"
[ $((d1 - d0)) -gt 10 ] || { cat /tmp/cli.out; fail "the transfer did not run"; }
pinned_during=$(pins)
kill_nic 0
echo "NIC model 0 killed mid-transfer ($((pinned_during - pinned0)) pages pinned by the two processes)"

t0=$SECONDS
rc=0
wait $cli || rc=$?
cat /tmp/cli.out
echo "the client exited with $rc after $((SECONDS - t0)) s"
[ $rc != 0 ] && [ $rc != 124 ] || fail "the client on the live NIC did not fail on its own (status $rc)"
grep -q "status 12" /tmp/cli.out || fail "the client's error completion is not RETRY_EXC_ERR (status 12)"

kill -KILL $srv 2>/dev/null || true
wait $srv 2>/dev/null || true
# The client's objects were destroyed on NIC 1; the server's could not be on NIC 0.
for _ in $(seq 300); do
	[ "$(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0" ] && break
	sleep 0.2
done
[ "$(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC 1 still holds $(objects 1)"
kept=$(($(pins) - pinned0))
echo "server killed: $kept pages still pinned (its MR and rings on the dead NIC)"
# perftest's buffer for 1 MiB messages is at least 1 MiB: 256 pages.
[ "$kept" -ge $((256 - SLACK)) ] || fail "the dead NIC's MR and rings were released while it could still write"
timeout 120 sh -c "echo $nic0 >$D/unbind" || fail "unbind of the dead NIC failed or hung"
# The dead NIC's objects' memory is released at unbind, once it is stopped.
left=$(($(pins) - pinned0))
echo "after unbind: $left pages pinned"
[ "$left" -le $SLACK ] || fail "$left pages still pinned after unbind"

# NIC 1 carries on.
$VD --dev ordma1 transfers || fail "ordma1 after NIC 0 died"
[ "$(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC 1 still holds $(objects 1)"
nic_ctl 1 status | grep -q ' bad_frames=0' || fail "NIC 1 counted bad frames: $(nic_ctl 1 status)"
rmmod ordma
echo "PASS: data-nic-dies"
