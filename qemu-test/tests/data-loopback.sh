#!/bin/bash
# VM test: the data path on one NIC (QP to QP loopback), through libibverbs, the provider's
# fast path and the NIC's RC engine, every byte verified:
# - qemu-test/progs/verbs-data (C, built with cc): SEND, SEND with immediate, WRITE, WRITE
#   with immediate and READ from 0 B to 2 MiB on 4 KiB pages, 2 MiB hugetlbfs pages and a
#   udmabuf dma-buf MR; each error completion provoked (bad lkey, bad rkey, out of range,
#   no remote write, receive too small, RNR retries exceeded) with the QP in ERR and later
#   WRs flushed; RNR retried until a receive is posted; a completion event; 16 QP pairs at
#   once in one process, and in 4 processes at once; what UCX and NCCL do that plain tests
#   do not (quirks.c: zero-length WRITEs with no SGE, no-SGE receives, a QP READing from
#   itself, dma-buf fd -1, iova2 MRs, 5 send SGEs and 64 B inline);
# - ibv_rc_pingpong, unmodified, client and server on this NIC, --chk, polling and with -e;
# - perftest's ib_send_bw, ib_write_bw, ib_read_bw, ib_send_lat, ib_write_lat, ib_read_lat,
#   unmodified, server and client on this NIC, and ib_write_bw with 64 QPs at once (-q 64,
#   200 WRITEs of 64 KiB each), its result line required;
# - MRs under the data path: two over one buffer surviving the deregistration of either,
#   and an MR of 1 GiB + 4 MiB of 4 KiB pages whose page list has three levels;
# - afterwards the NIC holds no PD, MR, CQ or QP.
# nics: 1
# run-args: --nic-args 0 "--log-level debug"
# timeout: 500
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
source $P/server-client.sh
VD=/ordma/payload/ordma-verbs-data
[ -x $VD ] || fail "no ordma-verbs-data in the payload (the provider-build step builds it)"
objects() { nic_ctl 0 status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*'; }

$VD transfers errors rnr events many quirks || fail "ordma-verbs-data on 4 KiB pages"

# Several processes at once, each with 16 QP pairs of its own (64 QPs on the NIC).
pids=()
for i in 1 2 3 4; do
	$VD many >/tmp/many$i.out 2>&1 &
	pids+=($!)
done
for i in 1 2 3 4; do
	wait "${pids[$((i - 1))]}" || { cat /tmp/many$i.out; fail "process $i of 4 running 16 QP pairs"; }
	grep '^ok' /tmp/many$i.out
done
echo "ok: 4 processes with 16 QP pairs each at once"

# MRs under the data path: two over one buffer, either deregistered; and one of 263168
# pages of 4 KiB (a 4 MiB memfd mapped 514 times over 1 GiB + 4 MiB), which needs a
# three-level page list: while it exists, the model says what the NIC was given for it.
cat >/tmp/mr-levels.sh <<'EOF2'
#!/bin/bash
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
m=$(nic_ctl 0 mr "$1") || fail "no MR $1 on the NIC: $m"
echo "the NIC's MR $1: $m"
[[ " $m " == *" length=$(((1 << 30) + (4 << 20))) npages=263168 page_shift=12 levels=3 "* ]] ||
	fail "the NIC did not get MR $1 as 263168 pages of 4 KiB in a three-level page list"
EOF2
chmod +x /tmp/mr-levels.sh
ORDMA_VD_MR_CHECK=/tmp/mr-levels.sh $VD shared levels | tee /tmp/mr-checks.out ||
	fail "ordma-verbs-data shared levels"
grep -q '^the NIC.s MR 0x[0-9a-f]*: ok ' /tmp/mr-checks.out || fail "the MR check did not run"
echo "ok: the NIC got the 263168-page MR as a three-level page list"

echo 8 >/proc/sys/vm/nr_hugepages
[ "$(cat /proc/sys/vm/nr_hugepages)" -ge 6 ] || fail "fewer than 6 huge pages of 2 MiB reserved"
mkdir -p /mnt/huge
mount -t hugetlbfs -o pagesize=2M none /mnt/huge
$VD --mem huge:/mnt/huge transfers || fail "ordma-verbs-data on 2 MiB huge pages"
umount /mnt/huge

modprobe udmabuf 2>/dev/null || true
$VD --mem dmabuf transfers || fail "ordma-verbs-data on a udmabuf dma-buf"

# ibv_rc_pingpong: server in the background, client against it over TCP on this machine;
# both QPs on ordma0.
pingpong() { # PORT ARGS...
	local port=$1 spid rc=0
	shift
	ibv_rc_pingpong -d ordma0 -p "$port" "$@" >/tmp/pp-server.out 2>&1 &
	spid=$!
	wait_listen "$port" $spid || { cat /tmp/pp-server.out; fail "the ibv_rc_pingpong server did not listen"; }
	timeout 120 ibv_rc_pingpong -d ordma0 -p "$port" "$@" localhost >/tmp/pp-client.out 2>&1 || rc=$?
	timeout 30 tail --pid=$spid -f /dev/null || { kill $spid 2>/dev/null; rc=124; }
	wait $spid || rc=$?
	cat /tmp/pp-server.out /tmp/pp-client.out
	[ $rc = 0 ] || fail "ibv_rc_pingpong $* exited with $rc"
	grep -q "iters in" /tmp/pp-client.out || fail "ibv_rc_pingpong $*: no result line"
}
pingpong 18515 -s 4096 -n 500 -c
pingpong 18516 -s 1 -n 500 -c
pingpong 18517 -s 65536 -n 100 -c -e
echo "ok: ibv_rc_pingpong, polling and with -e, --chk"

perftest_six ordma0 ordma0 18610
echo "ok: perftest's bandwidth and latency tests on ordma0 (loopback)"
pair_run "ib_write_bw -q 64" 18620 ib_write_bw -d ordma0 -F -q 64 -n 200 -s 65536 -- ib_write_bw -d ordma0 -F -q 64 -n 200 -s 65536
grep -Eq '^ *65536 +12800 ' /tmp/cli.out || fail "ib_write_bw -q 64: no result line for 64 QPs x 200 WRITEs"
echo "ok: ib_write_bw -q 64 on ordma0 (loopback): $(grep -E '^ *65536 +12800 ' /tmp/cli.out | xargs)"

[ "$(objects)" = "pds=0 mrs=0 cqs=0 qps=0" ] || fail "the NIC still holds $(objects)"
echo "PASS: data-loopback"
