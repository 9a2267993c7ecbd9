#!/bin/bash
# VM test: NIC deaths that need no new boot. NIC 1 dies softly (the model's `die`,
# hardware.md "The model's control channel"): it forgets everything it holds and answers
# nothing, as a killed model process looks to the guest (nic-model-killed, data-nic-dies),
# while its model process and vfio-user connection live on, so a PCI function reset brings
# it back as a new NIC in the same boot.
# 1. Idle, after data through it: NIC 1 holds nothing and counts nothing once dead; BAR0
#    reads all ones through the resource file; its link going down reaches no driver (no
#    event, no interrupt); unbinding it completes without an oops and leaves no ib_device;
#    binding it fails with ENODEV (the probe reads all ones); NIC 0 moves verified data
#    meanwhile; `echo 1 > .../reset` (the PM capability's D3hot -> D0, the NIC's function
#    reset) revives it as a new NIC (no object, every count 0), which binds and moves
#    verified data.
# 2. Mid-transfer, as data-nic-dies: perftest's ib_write_bw (1 MiB WRITEs) from ordma0
#    (client, the requester, on the live NIC) to ordma1 (server, the WRITEs' target); NIC 1
#    dies softly once the WRITEs run: the client gets RETRY_EXC_ERR (status 12) and exits, no
#    hang; the server is killed, its MR and rings stay pinned (its destroys cannot reach the
#    dead NIC) until unbind stops NIC 1, then are released; NIC 0 holds nothing; a function
#    reset revives NIC 1, which binds and works.
# 3. `die fatal`: NIC 1 goes fatal (the driver logs its fatal event) and forgets everything;
#    the driver's own reset (unbind, bind) revives it.
# At the end both NICs are bound and move verified data between them, neither holds
# anything, and ordma unloads and loads again with both bound. Verified data is
# ordma-verbs-data's `transfers`; on the debug kernel, ibv_rc_pingpong --chk.
# nics: 2
# debug: full
# timeout: 900
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/pci-bind.sh
source $P/pins.sh
source $P/server-client.sh
source $P/debug-kernel.sh
D=/sys/bus/pci/drivers/ordma
nic0=0000:00:06.0
nic1=0000:00:07.0
VD=/ordma/payload/ordma-verbs-data

objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }
field() { nic_ctl "$1" status | sed -n "s/.* $2=\([0-9]*\).*/\1/p"; }
# Every value of NIC I's `status` that is not 0, but the link and bus mastering: a new NIC's
# (after a function reset, before the driver probes it) has none.
remembers() {
	nic_ctl "$1" status | awk '{
		for (i = 2; i <= NF; i++)
			if ($i !~ /=0$/ && $i !~ /^(link|bme)=/) { printf "%s%s", sep, $i; sep = " " }
	}'
}
ibdev() { ls "/sys/bus/pci/devices/$1/infiniband/" 2>/dev/null || true; }
# VERSION, STATUS and ERROR, read as 32-bit words through the PCI resource file.
bar0() {
	python3 - "$1" <<'PY'
import ctypes, mmap, os, sys
fd = os.open(f"/sys/bus/pci/devices/{sys.argv[1]}/resource0", os.O_RDWR | os.O_SYNC)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
print(" ".join(f"{ctypes.c_uint32.from_buffer(m, o).value:#x}" for o in (0x0, 0x4, 0xc)))
PY
}
# The interrupts function $1 took, on all its vectors and CPUs.
irqs() {
	awk -v d="$1" '$0 ~ d { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts
}
# data WHAT DEV [DEV2]: verified data from DEV to DEV2 (default DEV: loopback): every
# transfer ordma-verbs-data checks (SEND, WRITE, READ of 0 B to 2 MiB, every byte). On the
# debug kernel, where the kernel's paths (objects made and destroyed) are what is checked
# and user space is only slower, ibv_rc_pingpong --chk (4 KiB x 100) instead.
pp_port=19400
data() {
	local what=$1 a=$2 b=${3:-$2}
	if debug_kernel; then
		pp_port=$((pp_port + 1))
		pair_run "$what" $pp_port ibv_rc_pingpong -d "$b" -s 4096 -n 100 --chk -- \
			ibv_rc_pingpong -d "$a" -s 4096 -n 100 --chk
		echo "$what: ibv_rc_pingpong --chk from $a to $b, passed"
		return
	fi
	"$VD" --dev "$a" --dev2 "$b" transfers >/tmp/vd.out 2>&1 ||
		{ cat /tmp/vd.out; fail "$what: ordma-verbs-data --dev $a --dev2 $b transfers"; }
	echo "$what: ordma-verbs-data --dev $a --dev2 $b transfers: $(grep -c '' /tmp/vd.out) lines, passed"
}
# Unbinds NIC 1 (dead: its reset at unbind times out), bounded in time.
unbind1() {
	local t0=$SECONDS
	timeout 120 sh -c "echo $nic1 >$D/unbind" || fail "unbind of NIC 1 failed or hung"
	[ ! -e $D/$nic1 ] || fail "NIC 1 still bound after unbind"
	[ -z "$(ibdev $nic1)" ] || fail "NIC 1's ib_device outlived the unbind"
	echo "NIC 1 unbound in $((SECONDS - t0)) s, no ib_device"
}
# The function reset of NIC 1: a new NIC, which the driver probes.
revive1() {
	local got left regs
	got=$(pci_reset $nic1)
	[ "$got" = ok ] || fail "reset of NIC 1: $got"
	left=$(remembers 1)
	[ -z "$left" ] || fail "NIC 1 after its function reset is not a new NIC: $left"
	regs=$(bar0 $nic1)
	[ "$regs" = "$(bar0 $nic0 | cut -d' ' -f1) 0x1 0x0" ] || fail "NIC 1's registers after its reset: $regs"
	got=$(bind_result $nic1)
	[ "$got" = ok ] || fail "bind of the revived NIC 1: $got"
	[ "$(ibdev $nic1)" = ordma1 ] || fail "the revived NIC 1 has no ib_device ordma1: $(ibdev $nic1)"
	echo "NIC 1 reset: a new NIC (nothing held or counted; VERSION, STATUS, ERROR $regs), bound as ordma1"
}

[ -e $D/$nic0 ] && [ -e $D/$nic1 ] || fail "both NICs must be bound first"
[ "$(ibdev $nic0) $(ibdev $nic1)" = "ordma0 ordma1" ] || fail "ib_devices: $(ibdev $nic0) $(ibdev $nic1)"

echo "== 1. NIC 1 dies softly while idle"
data "before" ordma0 ordma1
[ "$(field 1 qps_created)" -gt 0 ] || fail "NIC 1 took no QP"
irq1=$(irqs $nic1)
soft_kill_nic 1
left=$(remembers 1)
[ "$left" = "dead=1" ] || fail "the dead NIC 1 remembers: $left"
got=$(bar0 $nic1)
[ "$got" = "0xffffffff 0xffffffff 0xffffffff" ] || fail "the dead NIC's BAR0: $got"
echo "NIC 1 dead: holds and counts nothing, BAR0 reads $got"
nic_ctl 1 link down >/dev/null || fail "link down"
sleep 1
state=$(cat /sys/class/infiniband/ordma1/ports/1/state)
[ "$state" = "4: ACTIVE" ] || fail "the dead NIC's link change reached the driver: $state"
nic_ctl 1 link up >/dev/null || fail "link up"
[ "$(irqs $nic1)" = "$irq1" ] || fail "the dead NIC raised interrupts ($irq1, then $(irqs $nic1))"
echo "its link down and up: no event, no interrupt (port still $state)"
unbind1
got=$(bind_result $nic1)
[ "$got" = ENODEV ] || fail "bind of the dead NIC: $got, want ENODEV"
[ ! -e $D/$nic1 ] || fail "the dead NIC is bound"
echo "bind of the dead NIC: ENODEV"
data "NIC 0 while NIC 1 is dead" ordma0
revive1
data "the revived NIC 1" ordma1
[ "$(objects 0) $(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0 pds=0 mrs=0 cqs=0 qps=0" ] ||
	fail "left on the NICs: $(objects 0), $(objects 1)"

echo "== 2. NIC 1 dies softly in the middle of a transfer"
pinned0=$(pins)
ib_write_bw -d ordma1 -F -s 1048576 -D 30 -p 19300 >/tmp/srv.out 2>&1 &
srv=$!
wait_listen 19300 $srv || { cat /tmp/srv.out; fail "the ib_write_bw server did not listen"; }
timeout 120 ib_write_bw -d ordma0 -F -s 1048576 -D 30 -p 19300 localhost >/tmp/cli.out 2>&1 &
cli=$!
# The transfer runs: more than 10 doorbells on NIC 0 (its WRITEs), waited for up to 60 s.
d0=$(field 0 doorbells)
d1=$d0
for _ in $(seq 300); do
	d1=$(field 0 doorbells)
	[ $((d1 - d0)) -gt 10 ] && break
	kill -0 $cli 2>/dev/null || break
	sleep 0.2
done
echo "NIC 0's doorbells since the client started: $((d1 - d0))"
[ $((d1 - d0)) -gt 10 ] || { cat /tmp/srv.out /tmp/cli.out; fail "the transfer did not run"; }
pinned_during=$(pins)
soft_kill_nic 1
echo "NIC 1 died softly mid-transfer ($((pinned_during - pinned0)) pages pinned by the two processes)"
t0=$SECONDS
rc=0
wait $cli || rc=$?
cat /tmp/cli.out
echo "the client exited with $rc after $((SECONDS - t0)) s"
[ $rc != 0 ] && [ $rc != 124 ] || fail "the client on the live NIC did not fail on its own (status $rc)"
grep -q "status 12" /tmp/cli.out || fail "the client's error completion is not RETRY_EXC_ERR (status 12)"
kill -KILL $srv 2>/dev/null || true
wait $srv 2>/dev/null || true
# The client's objects were destroyed on NIC 0; the server's could not be on NIC 1.
for _ in $(seq 300); do
	[ "$(objects 0)" = "pds=0 mrs=0 cqs=0 qps=0" ] && break
	sleep 0.2
done
[ "$(objects 0)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "NIC 0 still holds $(objects 0)"
kept=$(($(pins) - pinned0))
echo "server killed: $kept pages still pinned (its MR and rings on the dead NIC)"
# perftest's buffer for 1 MiB messages is at least 1 MiB: 256 pages.
[ "$kept" -ge $((256 - SLACK)) ] || fail "the dead NIC's MR and rings were released while it could still write"
unbind1
left=$(($(pins) - pinned0))
echo "after unbind: $left pages pinned"
[ "$left" -le $SLACK ] || fail "$left pages still pinned after unbind"
nic_ctl 0 status | grep -q ' bad_frames=0' || fail "NIC 0 counted bad frames: $(nic_ctl 0 status)"
revive1
data "the revived NIC 1 to NIC 0" ordma1 ordma0

echo "== 3. NIC 1 dies fatal"
soft_kill_nic 1 fatal
for _ in $(seq 100); do
	dmesg | grep -q "$nic1: the NIC stopped with a fatal error 5" && break
	sleep 0.1
done
dmesg | grep -q "$nic1: the NIC stopped with a fatal error 5" || fail "the driver did not hear of the fatal error"
# (The fatal event may still be unread by the time the driver has logged it.)
left=$(remembers 1)
left=${left/ events_unread=1/}
[ "$left" = "fatal=1 error=5" ] || fail "the fatal NIC 1 remembers: $left"
echo "NIC 1 fatal: the driver heard of it, the NIC holds and counts nothing"
t0=$SECONDS
echo $nic1 >$D/unbind
got=$(bind_result $nic1)
[ "$got" = ok ] || fail "bind after the fatal death: $got"
echo "unbind and bind (the driver's reset revives it): $((SECONDS - t0)) s"
data "NIC 1 after its fatal death" ordma1

echo "== the end"
data "between the NICs" ordma0 ordma1
[ "$(objects 0) $(objects 1)" = "pds=0 mrs=0 cqs=0 qps=0 pds=0 mrs=0 cqs=0 qps=0" ] ||
	fail "left on the NICs: $(objects 0), $(objects 1)"
rmmod ordma
insmod /ordma/payload/ordma.ko
[ -e $D/$nic0 ] && [ -e $D/$nic1 ] || fail "not both NICs bound after rmmod and insmod"
[ "$(ibdev $nic0) $(ibdev $nic1)" = "ordma0 ordma1" ] || fail "ib_devices: $(ibdev $nic0) $(ibdev $nic1)"
echo "rmmod clean; insmod: both NICs bound"
echo "PASS: nic-soft-death"
