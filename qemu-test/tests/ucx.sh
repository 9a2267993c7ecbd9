#!/bin/bash
# VM test: UCX (Debian's 1.18.1, unmodified) over ordma, between two NICs:
# - `ucx_info -d` lists the rc_verbs and ud_verbs transports on ordma0:1 and ordma1:1 (UCX
#   opens ordma's memory domain, an RC interface on it, which asks for an SRQ of 4096 WQEs
#   and relies on QP_LAST_WQE_REACHED, and a UD one: UD QPs and address handles);
# - ucx_perftest at the transport level (UCT) on rc_verbs, server on ordma0:1, client on
#   ordma1:1: put_bw (zero-copy RDMA WRITE, 64 KiB), get_bw (zero-copy RDMA READ, 64 KiB),
#   am_bw (active messages, buffered SENDs of 8 KiB into UCX's SRQ), put_lat (8 B), am_lat and
#   add_lat (64-bit fetch and add), and on ud_verbs am_bw (1 KiB) and am_lat: each prints
#   its result line, and the client's NIC took at least one doorbell per iteration (the
#   model's `status`), so the traffic went through ordma; 200 iterations each (1000 in
#   `make test-full`);
# - ucx_perftest at the UCP level (tag matching, what MPI uses), tag_bw of 64 KiB and tag_lat,
#   with UCX_TLS=rc_verbs,ud_verbs,self (no TCP): UCP's wire-up goes over ud_verbs (both NICs
#   sent UD datagrams) and the data over rc_verbs (the client's NIC took a doorbell per
#   message), and tag_lat with ud_verbs alone;
# - afterwards neither NIC holds a PD, MR, CQ, QP or SRQ, and no frame was refused.
# ucx_perftest checks no bytes; ordma-verbs-data's SRQ, atomic and quirks checks (data-srq,
# atomics, data-loopback) check the same operations' bytes.
# nics: 2
# timeout: 600
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
command -v ucx_perftest >/dev/null || fail "no ucx_perftest in the build root (ucx-utils)"
doorbells() { nic_ctl "$1" status | grep -o ' doorbells=[0-9]*' | cut -d= -f2; }
ud_sent() { nic_ctl "$1" status | grep -o ' ud_sent=[0-9]*' | cut -d= -f2; }
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*\|srqs=[0-9]*' | xargs; }

info=$(ucx_info -d 2>&1)
for n in 0 1; do
	for t in rc_verbs ud_verbs; do
		# The transport's block for ordma$n: "Transport: $t" then "Device: ordma$n:1".
		grep -A1 "Transport: $t" <<<"$info" | grep -q "Device: ordma$n:1" ||
			{ echo "$info"; fail "ucx_info -d lists no $t on ordma$n:1"; }
	done
done
echo "ok: ucx_info -d lists rc_verbs and ud_verbs on ordma0:1 and ordma1:1"

port=13400
# uct TRANSPORT NAME ITERS ARGS...: one UCT test, server on ordma0, client on ordma1.
uct() {
	local tl=$1 name=$2 n=$3 before after
	shift 3
	port=$((port + 1))
	before=$(doorbells 1)
	pair_run "ucx_perftest $name over $tl" $port ucx_perftest -P 0 -d ordma0:1 -x "$tl" -- \
		ucx_perftest -P 0 -d ordma1:1 -x "$tl" -t "$name" -n "$n" "$@"
	grep -q '^Final:' /tmp/cli.out || fail "ucx_perftest $name: no result line"
	after=$(doorbells 1)
	[ $((after - before)) -ge "$n" ] ||
		fail "ucx_perftest $name: ordma1 took $((after - before)) doorbells for $n iterations"
	echo "ok: ucx_perftest $name over $tl: $(grep '^Final:' /tmp/cli.out | xargs), $((after - before)) doorbells on ordma1"
}
# Iterations: 200 in `make test` (each run's start costs more than its traffic), 1000 in
# `make test-full`.
n=200
[ "${ORDMA_TIER:-}" != full ] || n=1000
uct rc_verbs put_bw $n -D zcopy -s 65536
uct rc_verbs get_bw $n -D zcopy -s 65536
uct rc_verbs am_bw $n -D bcopy -s 8192
uct rc_verbs put_lat $n -s 8
uct rc_verbs am_lat $n -s 8
uct rc_verbs add_lat $n -s 8
uct ud_verbs am_bw $n -D bcopy -s 1024
uct ud_verbs am_lat $n -s 8

# UCP (tag matching) over ordma alone: TLS the transports UCP may use, no TCP.
ucp() {
	local tls=$1 name=$2 n=$3 before after u0 u1
	shift 3
	port=$((port + 1))
	before=$(doorbells 1) u0=$(ud_sent 0) u1=$(ud_sent 1)
	pair_run "ucx_perftest $name over $tls" $port \
		env UCX_TLS=$tls UCX_NET_DEVICES=ordma0:1 ucx_perftest -P 0 -- \
		env UCX_TLS=$tls UCX_NET_DEVICES=ordma1:1 ucx_perftest -P 0 -t "$name" -n "$n" "$@"
	grep -q '^Final:' /tmp/cli.out || fail "ucx_perftest $name: no result line"
	after=$(doorbells 1) u0=$(($(ud_sent 0) - u0)) u1=$(($(ud_sent 1) - u1))
	[ $((after - before)) -ge "$n" ] ||
		fail "ucx_perftest $name: ordma1 took $((after - before)) doorbells for $n messages"
	[ $u0 -gt 0 ] && [ $u1 -gt 0 ] || fail "ucx_perftest $name: no UD datagram from a NIC (UCP's wire-up)"
	echo "ok: ucx_perftest $name over UCP ($tls): $(grep '^Final:' /tmp/cli.out | xargs), $((after - before)) doorbells on ordma1, $u0 + $u1 UD datagrams"
}
ucp rc_verbs,ud_verbs,self tag_bw $((n / 2)) -s 65536
ucp rc_verbs,ud_verbs,self tag_lat $((n / 2)) -s 8
ucp ud_verbs,self tag_lat $((n / 2)) -s 8

for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0 srqs=0" ] || fail "NIC $n still holds $(objects $n)"
	s=$(nic_ctl $n status)
	[[ " $s " == *" bad_frames=0 "* ]] || fail "NIC $n refused frames: $s"
done
echo "PASS: ucx"
