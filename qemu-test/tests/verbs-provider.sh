#!/bin/bash
# VM test: the libibverbs provider end to end, with two NICs. Standard tools see both
# devices with the attributes the models report (NIC 1's model reports max_qp 77 and
# max_pd 4, so its output differs from NIC 0's); two processes hold contexts and PDs at
# once, each with its own doorbell page mapped (their writes reach the NIC on distinct
# pages) and 16 distinct NIC PDs between them; the NIC's PD limit reaches the user as
# ENOMEM; rmmod under a live context disassociates it (Documentation/uapi.md): rmmod
# succeeds, the NIC frees the PDs, the process gets EIO and exits cleanly.
# nics: 2
# run-args: --nic-args 0 "--log-level debug --guid 0x02000000000000b0 --attr fw_ver=4.5.6 --attr max_qp=1000 --attr max_pd=1000 --attr max_cq=1000 --attr max_mr=4000 --attr max_qp_wr=4096 --attr max_cqe=32768"
# run-args: --nic-args 1 "--guid 0x02000000000000b1 --attr max_qp=77 --attr max_pd=4 --attr max_cq=5 --attr max_mr=6"
# debug: full
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=/ordma/src/qemu-test/progs/verbs_ctx.py

# Tools: ibv_devices, ibv_devinfo -v, rdma link.
ibv_devices | tee /tmp/devices
grep -Eq '^[[:space:]]+ordma0[[:space:]]+02000000000000b0$' /tmp/devices || fail "ibv_devices does not list ordma0"
grep -Eq '^[[:space:]]+ordma1[[:space:]]+02000000000000b1$' /tmp/devices || fail "ibv_devices does not list ordma1"
for d in 0 1; do ibv_devinfo -v -d ordma$d >/tmp/devinfo$d || fail "ibv_devinfo -v -d ordma$d"; done
cat /tmp/devinfo1
field() { sed -n "s/^[[:space:]]*$2:[[:space:]]*//p" /tmp/devinfo$1 | head -n1; }
# What NIC 0's model was started with (the header's run-args), not its defaults.
for f in "fw_ver 4.5.6" "vendor_id 0x4f52" "vendor_part_id 1" "max_qp 1000" "max_pd 1000" \
	"max_cq 1000" "max_mr 4000" "max_qp_wr 4096" "max_cqe 32768" "state PORT_ACTIVE (4)" \
	"port_lid 1" "link_layer InfiniBand" "active_mtu 4096 (5)"; do
	[ "$(field 0 "${f%% *}")" = "${f#* }" ] || fail "ordma0 ${f%% *} is '$(field 0 "${f%% *}")', expected '${f#* }'"
done
[ "$(field 1 max_qp)" = 77 ] || fail "ordma1 max_qp is '$(field 1 max_qp)', the model reports 77"
[ "$(field 1 max_pd)" = 4 ] || fail "ordma1 max_pd is '$(field 1 max_pd)', the model reports 4"
[ "$(field 1 port_lid)" = 2 ] || fail "ordma1 port_lid"
grep -q 'GID\[  0\]:[[:space:]]*fe80:0000:0000:0000:0200:0000:0000:00b1' /tmp/devinfo1 || fail "ordma1 GID 0"
rdma link show ordma0/1 | grep -q 'state ACTIVE' || fail "ordma0/1 not ACTIVE"
rdma link show ordma1/1 | grep -q 'state ACTIVE' || fail "ordma1/1 not ACTIVE"
echo "ok: ibv_devices, ibv_devinfo -v and rdma link show both NICs as the models report them"

source /ordma/src/qemu-test/progs/verbs-procs.sh

# Two processes at once, each with a context and 8 PDs on ordma0; each writes its doorbell
# page (A at offset 0x10, B at 0x20). The provider exports nothing, so the NIC model says
# which pages were written (`doorbell-pages`) and how many PDs it holds (`status`).
source /ordma/src/qemu-test/progs/nic-control.sh
field() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" <<<" $1 "; }
s0=$(nic_ctl 0 status) || fail "status: $s0"
declare -A writes0=()
for kv in $(nic_ctl 0 doorbell-pages | sed 's/^ok//'); do writes0[${kv%=*}]=${kv#*=}; done
spawn A ordma0 8 0x10
spawn B ordma0 8 0x20
a=$(report A)
b=$(report B)
echo "A: $a"
echo "B: $b"
python3 - "$a" "$b" <<'PY' || fail "the two contexts overlap"
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
assert a["pid"] != b["pid"]
for p in (a, b):
    # One doorbell page mapped, write-only, shared.
    assert p["maps"] == [[4096, "-w-s"]], f"mappings {p['maps']}"
PY
# The pages the NIC took new writes on, as PAGE:WRITES (QEMU posts the writes: wait for both).
written=
for _ in $(seq 300); do
	written=$(for kv in $(nic_ctl 0 doorbell-pages | sed 's/^ok//'); do
		n=$((${kv#*=} - ${writes0[${kv%=*}]:-0}))
		[ $n = 0 ] || echo "${kv%=*}:$n"
	done | tr '\n' ' ')
	[ "$(wc -w <<<"$written")" -ge 2 ] && break
	sleep 0.1
done
echo "the NIC took the doorbell writes on (page:writes) $written"
# (glibc's memmove of 4 bytes stores them twice, overlapping: 2 writes each.)
read -r wa wb rest <<<"$written"
[ -z "${rest:-}" ] && [ -n "${wb:-}" ] && [ "${wa%:*}" -ge 1 ] && [ "${wb%:*}" -ge 1 ] &&
	[ "${wa%:*}" -lt 64 ] && [ "${wb%:*}" -lt 64 ] ||
	fail "the writes did not land on exactly two distinct user doorbell pages: $written"
s1=$(nic_ctl 0 status) || fail "status: $s1"
[ $(($(field "$s1" pds) - $(field "$s0" pds))) = 16 ] && [ $(($(field "$s1" pds_created) - $(field "$s0" pds_created))) = 16 ] ||
	fail "the NIC holds $(($(field "$s1" pds) - $(field "$s0" pds))) new PDs, expected 16 (distinct: one table slot each)"
echo "the NIC holds 16 more PDs"
tell A free
tell B free
grep -qx closed /tmp/A.out && grep -qx closed /tmp/B.out || fail "a process did not close cleanly"
echo "ok: two processes held contexts, distinct doorbell pages and 16 distinct NIC PDs at once"

# The NIC's PD limit (max_pd 4 on ordma1) is the user's ENOMEM.
r=$(python3 "$P" exhaust ordma1)
[ "$r" = "allocated 4 errno 12" ] || fail "ordma1 PD limit: $r"
echo "ok: ordma1 gives 4 PDs, then ENOMEM"

# rmmod under a live context: disassociation, not "module in use", not a hang.
spawn C ordma0 3
c=$(report C)
echo "C: $c"
s0=$(nic_ctl 0 status) || fail "status: $s0"
timeout 60 rmmod ordma || fail "rmmod with a live context failed"
[ ! -e /sys/class/infiniband/ordma0 ] || fail "ordma0 still registered"
# Freed by DEALLOC_PD before the NIC's reset (a reset frees without counting).
s1=$(nic_ctl 0 status) || fail "status: $s1"
freed=$(($(field "$s1" pds_destroyed) - $(field "$s0" pds_destroyed)))
[ "$freed" = 3 ] || fail "the NIC freed $freed PDs at rmmod, expected 3"
tell C after-remove
cat /tmp/C.out
grep -qx 'alloc_pd errno 5' /tmp/C.out || fail "ALLOC_PD after removal is not EIO"
grep -qx 'doorbell write ok' /tmp/C.out || fail "the zapped doorbell mapping faulted"
grep -qx closed /tmp/C.out || fail "process C did not close cleanly"
echo "ok: rmmod disassociated a live context (PDs freed on the NIC, EIO to the process)"
echo "PASS: verbs-provider"
