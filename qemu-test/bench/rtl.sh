#!/bin/bash
# `make bench B=rtl`, inside the guest: co-simulation's speed as a program sees it. Four
# ordma NICs on one wire: NIC models 0 and 1 run with --rtl (every DMA through the
# Verilated DMA channel mux, every frame's ICRC from the Verilated ICRC unit; no stall
# injected), 2 and 3 the model alone. Rows, device rtl (ordma0 to ordma1) and model
# (ordma2 to ordma3):
#   a register read (VERSION, BAR0 0x000) and a register write (a doorbell for a queue no
#   context has, at BAR2's last page: the NIC ignores it and counts it in bad_doorbells,
#   checked), in µs each as the guest sees them: 2000 accesses from Python through the
#   BAR's sysfs resource file, less the same loop over ordinary memory;
#   ib_write_lat 4 KiB and 2 MiB (median and mean µs: one WRITE, doorbell to completion
#   seen, each way), ib_write_bw 4 KiB and 2 MiB (MiB/s).
# Raw outputs in /ordma/results/bench/, the rows in /ordma/results/bench/results.tsv:
#   test  bytes  device  value  unit
set -uo pipefail
OUT=/ordma/results/bench
mkdir -p $OUT
TSV=$OUT/results.tsv
printf 'test\tbytes\tdevice\tvalue\tunit\n' >$TSV
say() { echo "[bench $(date +%H:%M:%S)] $*"; }
fail() { echo "FAIL: $*"; exit 1; }
source /ordma/src/qemu-test/progs/nic-control.sh
counter() { nic_ctl "$1" status | tr ' ' '\n' | sed -n "s/^$2=//p"; }

for n in 0 1 2 3; do
	want=$([ $n -lt 2 ] && echo 1 || echo "")
	[ "$(counter $n rtl)" = "$want" ] || fail "NIC model $n: rtl=$(counter $n rtl), expected ${want:-none}"
done

# mmio DEVICE NIC: the register read and write rows of ordmaDEVICE (NIC model NIC).
mmio() {
	local dev=$1 nic=$2 kind=$3 pci before after out
	pci=$(readlink -f /sys/class/infiniband/$dev/device)
	before=$(counter $nic bad_doorbells)
	out=$(python3 - "$pci" <<'EOF'
import mmap, os, sys, time, ctypes
N = 2000
pci = sys.argv[1]

def region(path):
    fd = os.open(path, os.O_RDWR | os.O_SYNC)
    size = os.fstat(fd).st_size
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    return m, size

def per_access(word, write):
    # One 32-bit access per iteration (ctypes: a single load or store of the word).
    t = time.perf_counter()
    if write:
        for _ in range(N):
            word.value = 0
    else:
        for _ in range(N):
            word.value
    return (time.perf_counter() - t) / N * 1e6

bar0, _ = region(pci + "/resource0")
bar2, size2 = region(pci + "/resource2")
version = ctypes.c_uint32.from_buffer(bar0, 0)
assert version.value >> 16 == 1, hex(version.value)
# The last doorbell page's first word: no context owns the last page while nothing runs.
db = ctypes.c_uint32.from_buffer(bar2, size2 - 4096)
plain = ctypes.c_uint32.from_buffer(bytearray(4096), 0)
base_r, base_w = per_access(plain, False), per_access(plain, True)
r = per_access(version, False) - base_r
w = per_access(db, True) - base_w
print(f"{r:.1f} {w:.1f} {base_r:.2f} {base_w:.2f}")
del version, db
EOF
) || fail "$dev: the register timing failed: $out"
	after=$(counter $nic bad_doorbells)
	[ $((after - before)) -ge 2000 ] || fail "$dev: the NIC saw $((after - before)) of the 2000 doorbell writes"
	read -r r w br bw <<<"$out"
	say "$dev ($kind): register read $r µs, write $w µs (the loop alone: $br, $bw µs)"
	printf 'register read\t4\t%s\t%s\tus\n' $kind "$r" >>$TSV
	printf 'register write\t4\t%s\t%s\tus\n' $kind "$w" >>$TSV
}

port=19500
# run NAME KIND TOOL ARGS...: server on the first NIC of KIND, client on the second.
run() {
	local name=$1 kind=$2 srv cli spid rc=0
	shift 2
	case $kind in
	rtl) srv=ordma0 cli=ordma1 ;;
	model) srv=ordma2 cli=ordma3 ;;
	esac
	port=$((port + 1))
	"$1" -d $srv -p $port "${@:2}" >"$OUT/$name-$kind.server.txt" 2>&1 &
	spid=$!
	for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.1; done
	timeout 600 "$1" -d $cli -p $port "${@:2}" 127.0.0.1 >"$OUT/$name-$kind.txt" 2>&1 || rc=$?
	timeout 30 tail --pid=$spid -f /dev/null || kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	[ $rc = 0 ] || say "$name on $kind exited with $rc (see $OUT/$name-$kind.txt)"
}
row() { grep -E "^ *$2 +[0-9]+ " "$OUT/$1.txt" | tail -n1; }
col() { awk -v n="$3" '{ v = $n } END { print (v ~ /^[0-9]+(\.[0-9]+)?$/ && v + 0 > 0) ? v : "fail" }' <<<"$(row "$1" "$2")"; }

for kind in rtl model; do
	case $kind in rtl) mmio ordma0 0 $kind ;; model) mmio ordma2 2 $kind ;; esac
	say "$kind: ib_write_lat, ib_write_bw"
	for size in 4096 2097152; do
		n=$([ $size = 4096 ] && echo 200 || echo 20)
		run "ib_write_lat-$size" $kind ib_write_lat -F -s $size -n $n
		printf 'ib_write_lat\t%s\t%s\t%s\tus median\n' $size $kind "$(col "ib_write_lat-$size-$kind" $size 5)" >>$TSV
		printf 'ib_write_lat\t%s\t%s\t%s\tus mean\n' $size $kind "$(col "ib_write_lat-$size-$kind" $size 6)" >>$TSV
		run "ib_write_bw-$size" $kind ib_write_bw -F -s $size -n $((n * 5))
		printf 'ib_write_bw\t%s\t%s\t%s\tMiB/s\n' $size $kind "$(col "ib_write_bw-$size-$kind" $size 4)" >>$TSV
	done
done
for n in 0 1; do
	s=$(nic_ctl $n status)
	[ "$(counter $n rtl_violations)" = 0 ] && [ "$(counter $n rtl_assert_failures)" = 0 ] ||
		fail "NIC model $n: the RTL's checks failed: $s"
	echo "NIC model $n: $s" | tr ' ' '\n' | grep -E '^rtl_' | tr '\n' ' '
	echo
done
cat $TSV
