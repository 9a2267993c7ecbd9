# Sourced by VM tests of several guests (qemu-test/run --vms N; ORDMA_VM, ORDMA_VMS and
# /ordma/shared come from the harness): a server in one guest, its client in another, the
# TCP side channel over the guests' eth0 (10.0.0.<G+1>). Rendezvous through /ordma/shared:
# the server's guest creates <name>.ready there once the server listens; the client's guest
# waits for it (connecting earlier would race the server's start, and a probe connection
# would be taken for the client by tools that serve one connection).
#   vm_ip G                   guest G's address
#   vm_serve NAME PORT CMD... the server (CMD gets -p PORT), in the background until it
#                             listens, then NAME.ready; waits for it (120 s at most), prints
#                             its output (/tmp/NAME.srv); fails (the caller's fail) unless 0
#   vm_connect NAME G PORT CMD... the client: waits for NAME.ready (300 s at most: the
#                             other guest may still be booting), runs CMD -p PORT <G's address>
#                             (120 s at most), prints its output (/tmp/NAME.cli); fails unless 0
#   vm_pair NAME PORT CMD...  the same command as vm0's server and vm1's client
#   vm_flag NAME / vm_wait_flag NAME [SECONDS]: a flag in /ordma/shared, and waiting for it
#   seg_ctl WORDS, seg_counter NAME: the segment, failing on request (below)
#   vm_poweroff               this guest powered off at once by the harness (its QEMU and
#                             NIC models killed, as pulling the plug); does not return
# Needs qemu-test/progs/server-client.sh's wait_listen.
[ -n "${ORDMA_VM:-}" ] && [ -d /ordma/shared ] || { echo "FAIL: not a guest of qemu-test/run --vms"; exit 1; }
# A batch of several guests (qemu-test/guest/batch.sh) gives each test a folder of its own.
VM_SHARED=${ORDMA_VM_SHARED:-/ordma/shared}
vm_ip() { echo "10.0.0.$(($1 + 1))"; }
vm_flag() {
	: >"$VM_SHARED/.$1.tmp"
	mv "$VM_SHARED/.$1.tmp" "$VM_SHARED/$1"
}
vm_poweroff() {
	: >/ordma/results/control/.poweroff.tmp
	mv /ordma/results/control/.poweroff.tmp /ordma/results/control/poweroff
	sleep 600
	fail "the harness did not power this guest off"
}
vm_wait_flag() {
	local _
	for _ in $(seq $((${2:-300} * 10))); do
		[ -e "$VM_SHARED/$1" ] && return 0
		sleep 0.1
	done
	return 1
}
vm_serve() {
	local name=$1 port=$2 spid rc=0
	shift 2
	"$@" -p "$port" >"/tmp/$name.srv" 2>&1 &
	spid=$!
	wait_listen "$port" $spid || { cat "/tmp/$name.srv"; fail "$name: the server did not listen"; }
	vm_flag "$name.ready"
	timeout 120 tail --pid=$spid -f /dev/null || { kill $spid 2>/dev/null; rc=124; }
	wait $spid || rc=$?
	echo "----- $name (server, vm$ORDMA_VM)"
	cat "/tmp/$name.srv"
	[ $rc = 0 ] || fail "$name: the server exited with $rc"
}
vm_connect() {
	local name=$1 g=$2 port=$3 rc=0
	shift 3
	vm_wait_flag "$name.ready" 300 || fail "$name: the server in vm$g never listened"
	timeout 120 "$@" -p "$port" "$(vm_ip "$g")" >"/tmp/$name.cli" 2>&1 || rc=$?
	echo "----- $name (client, vm$ORDMA_VM, server in vm$g)"
	cat "/tmp/$name.cli"
	[ $rc = 0 ] || fail "$name: the client exited with $rc"
}
# vm_pair NAME PORT CMD...: the same command as server in vm0 and as its client in vm1 (the
# other guests do nothing); output in /tmp/NAME.out either way.
vm_pair() {
	local name=$1 port=$2
	shift 2
	case $ORDMA_VM in
	0) vm_serve "$name" "$port" "$@"; cp "/tmp/$name.srv" "/tmp/$name.out" ;;
	1) vm_connect "$name" 0 "$port" "$@"; cp "/tmp/$name.cli" "/tmp/$name.out" ;;
	esac
}
# seg_ctl WORDS...: a request to the run's segment (qemu-test/segment.py: loss|duplicate|
# corrupt|reorder P, delay MS, link G up|down, clear, status) through the harness; prints the
# reply line, status 0 for "ok ..." (needs qemu-test/progs/nic-control.sh's nic_ctl).
# seg_counter NAME: one number of the segment's status (frames, lost, duplicated, ...).
seg_ctl() { nic_ctl segment "$@"; }
seg_counter() { seg_ctl status | tr ' ' '\n' | sed -n "s/^$1=//p"; }
