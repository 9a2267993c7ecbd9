#!/bin/bash
# VM test: Open MPI (Debian's 5.0.7, unmodified) over UCX over ordma, in one guest: 4 ranks,
# ranks 0 and 2 on ordma0, ranks 1 and 3 on ordma1 (UCX_NET_DEVICES per rank), with UCX's
# shared-memory transports and TCP off (UCX_TLS=rc_verbs,ud_verbs,self: UCP's wire-up over
# ordma's UD, the data over its RC) and Open MPI's shared-memory collectives off, so that
# every byte between ranks goes through the NICs. qemu-test/progs/mpi/collectives.c (built here with mpicc):
# allreduce, broadcast and alltoall at 8 B, 64 KiB, 1 MiB and 4 MiB per rank, every element
# on every rank checked. Both NICs took doorbells for it (their traffic), hold nothing
# afterwards and refused no frame. Open MPI's UCX pml takes priority only for mlx* devices
# unless told otherwise (pml_ucx_devices, opal_common_ucx_devices: any).
# nics: 2
# timeout: 600
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs
source $P/nic-control.sh
command -v mpicc >/dev/null || fail "no mpicc in the build root (libopenmpi-dev)"
doorbells() { nic_ctl "$1" status | grep -o ' doorbells=[0-9]*' | cut -d= -f2; }
ud_sent() { nic_ctl "$1" status | grep -o ' ud_sent=[0-9]*' | cut -d= -f2; }
objects() { nic_ctl "$1" status | grep -o 'pds=[0-9]* mrs=[0-9]* cqs=[0-9]* qps=[0-9]*\|srqs=[0-9]*' | xargs; }

mpicc -O2 -Wall -Werror -o /tmp/collectives $P/mpi/collectives.c || fail "mpicc"
cat >/tmp/rank.sh <<'EOF'
#!/bin/bash
# One rank: its NIC by rank (even ordma0, odd ordma1); no shared-memory transport.
export UCX_NET_DEVICES=ordma$((OMPI_COMM_WORLD_RANK % 2)):1 UCX_TLS=rc_verbs,ud_verbs,self
exec "$@"
EOF
chmod +x /tmp/rank.sh
d0=$(doorbells 0) d1=$(doorbells 1)
u0=$(ud_sent 0) u1=$(ud_sent 1)
rc=0
timeout 400 mpirun --allow-run-as-root --oversubscribe -np 4 \
	--mca pml ucx --mca pml_ucx_devices any --mca opal_common_ucx_devices any \
	--mca btl self --mca coll basic,libnbc,self,tuned \
	/tmp/rank.sh /tmp/collectives >/tmp/mpi.out 2>&1 || rc=$?
cat /tmp/mpi.out
[ $rc = 0 ] || fail "mpirun exited with $rc"
grep -qx 'PASS: 0 rank(s) x collective(s) wrong' /tmp/mpi.out || fail "no PASS line from rank 0"
[ "$(grep -c ': ok$' /tmp/mpi.out)" = 12 ] || fail "want 12 ok lines from rank 0 (3 collectives x 4 sizes)"
d0=$(($(doorbells 0) - d0)) d1=$(($(doorbells 1) - d1))
echo "doorbells during the job: ordma0 $d0, ordma1 $d1"
# 12 collectives on 4 ranks, MiBs each: thousands of WQEs on each NIC; TCP alone gives 0.
[ $d0 -ge 100 ] && [ $d1 -ge 100 ] || fail "the job's bytes did not go through both NICs"
u0=$(($(ud_sent 0) - u0)) u1=$(($(ud_sent 1) - u1))
echo "UD datagrams during the job (UCP's wire-up): ordma0 $u0, ordma1 $u1"
[ $u0 -gt 0 ] && [ $u1 -gt 0 ] || fail "UCP's wire-up did not go over ordma's UD"
for n in 0 1; do
	[ "$(objects $n)" = "pds=0 mrs=0 cqs=0 qps=0 srqs=0" ] || fail "NIC $n still holds $(objects $n)"
	s=$(nic_ctl $n status)
	[[ " $s " == *" bad_frames=0 "* ]] || fail "NIC $n refused frames: $s"
done
echo "PASS: mpi"
