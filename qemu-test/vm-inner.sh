#!/bin/bash
# The VM half of qemu-test/run; runs inside the build root (scripts/in-root), as PID 1 of its
# own PID namespace. Builds the initramfs, starts QEMU, streams the console, enforces the
# timeout, and turns what the guest left in /ordma/results into an exit status.
set -euo pipefail
NICS=1
TIMEOUT=600
MODULE=/ordma/src/drivers/infiniband/hw/ordma/ordma.ko
KMEMLEAK=
BOOT_WARNING=
BOOT_HANG=
# The boot watchdog (below): how long the guest has to reach its init's mounts.
BOOT_LIMIT=
declare -A EXTRA=()
while [ $# -gt 0 ]; do
	case $1 in
	--nics) NICS=$2; shift 2 ;;
	--module) MODULE=$2; shift 2 ;;
	--model) MODEL=$2; shift 2 ;;
	--kmemleak) KMEMLEAK=1; shift ;;
	--boot-warning) BOOT_WARNING=1; shift ;; # the harness self-test's: a warning before insmod
	--boot-hang) BOOT_HANG=1; shift ;; # the harness self-test's: a guest that never boots
	--boot-limit) BOOT_LIMIT=$2; shift 2 ;;
	--nic-args) EXTRA[$2]=$3; shift 3 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	*) echo "vm-inner: unknown argument $1" >&2; exit 127 ;;
	esac
done
R=/ordma/results
K=/ordma/kernel
G=/ordma/src/qemu-test/guest
log() { printf '[ordma %s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$R/harness.log" >&2; }

children=()
cleanup() {
	local p
	for p in "${children[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${children[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'log "signal: stopping QEMU"; cleanup; exit 130' INT TERM HUP

# The initramfs: busybox and our init, which mounts the real root and switches to it.
I=/tmp/initramfs
mkdir -p "$I"/{bin,dev,proc,sys,lower,rw,newroot}
cp /bin/busybox "$I/bin/busybox"
cp "$G/init" "$I/init"
chmod +x "$I/init"
mknod -m 600 "$I/dev/console" c 5 1
(cd "$I" && find . | cpio -o -H newc --quiet | gzip -1) >/tmp/initrd.gz

# What the guest installs (stage2), in a share of its own: ordma.ko for this kernel, the
# provider, and whether to check for leaks.
P=/tmp/payload
mkdir -p $P
cp "$MODULE" $P/ordma.ko
cp /ordma/cache/target/release/libordma.so $P/libordma-rdmav34.so
# The data-path test program (qemu-test/progs/verbs-data), built with the provider.
[ ! -x /ordma/cache/target/release/ordma-verbs-data ] || cp /ordma/cache/target/release/ordma-verbs-data $P/
[ -z "$KMEMLEAK" ] || touch $P/kmemleak
[ -z "$BOOT_WARNING" ] || touch $P/boot-warning

# The NICs: one model process per NIC, each on its own vfio-user socket. They run in this
# PID namespace, so they end with it whatever happens.
MODEL=${MODEL:-/ordma/cache/target/release/ordma-model}
# The wire between the NICs: one directory, one L2 segment; each model binds
# /tmp/wire/lid-<LID>.sock (LID = index + 1) and sends RoCEv2 frames to its peers' sockets.
mkdir -p /tmp/wire
NIC_ARGS=()
NIC_PIDS=()
for ((i = 0; i < NICS; i++)); do
	sock=/tmp/nic$i.sock
	mkfifo "/tmp/nic$i.ready"
	read -r -a extra <<<"${EXTRA[$i]:-}"
	"$MODEL" --socket "$sock" --index "$i" --log "$R/nic$i.log" --log-level "${ORDMA_MODEL_LOG:-info}" \
		--control "/tmp/nic$i.ctl" --wire /tmp/wire "${extra[@]}" --ready-fd 3 3>"/tmp/nic$i.ready" &
	children+=("$!")
	NIC_PIDS+=("$!")
	# Readiness: the model writes "ready" once it listens; EOF means it died.
	if ! read -r -t 30 line <"/tmp/nic$i.ready" || [ "$line" != ready ]; then
		log "NIC model $i did not start (see nic$i.log)"
		tail -n 5 "$R/nic$i.log" >&2 || true
		exit 125
	fi
	log "NIC model $i ready (pid ${children[-1]}, log nic$i.log${extra[*]:+, args: ${extra[*]}})"
	NIC_ARGS+=(-device "{\"driver\":\"vfio-user-pci\",\"socket\":{\"type\":\"unix\",\"path\":\"$sock\"}}")
done

: >"$R/console.log"
MEM=2G
QEMU=(qemu-system-x86_64
	-machine q35,memory-backend=mem0 -accel tcg -cpu max -smp 2 -m "$MEM"
	-object memory-backend-memfd,id=mem0,size="$MEM",share=on
	-name "${ORDMA_RUN_ID:-ordma}" -nodefaults -display none -no-reboot
	-monitor unix:/tmp/qemu-monitor.sock,server=on,wait=off
	-chardev file,id=con,path="$R/console.log" -serial chardev:con
	-kernel "$K/arch/x86/boot/bzImage" -initrd /tmp/initrd.gz
	-append "console=ttyS0 panic=-1 quiet nokaslr${BOOT_HANG:+ ordma.test_boot_hang}"
	-fsdev local,id=fsroot,path=/ordma/guestroot,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-pci,fsdev=fsroot,mount_tag=root
	-fsdev local,id=fssrc,path=/ordma/src,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-pci,fsdev=fssrc,mount_tag=src
	-fsdev local,id=fsmods,path="$K/mods",security_model=none,readonly=on
	-device virtio-9p-pci,fsdev=fsmods,mount_tag=mods
	-fsdev local,id=fsres,path="$R",security_model=none
	-device virtio-9p-pci,fsdev=fsres,mount_tag=results
	-netdev user,id=net0 -device virtio-net-pci,netdev=net0,romfile=
	"${NIC_ARGS[@]}"
	# After the NICs, so their PCI addresses (00:06.0, 00:07.0, ...) stay where tests
	# expect. JSON like theirs: QEMU creates JSON -devices after all the others.
	-fsdev local,id=fspay,path=$P,security_model=none,readonly=on
	-device '{"driver":"virtio-9p-pci","fsdev":"fspay","mount_tag":"payload"}'
)
printf '%q ' "${QEMU[@]}" >"$R/qemu-cmdline.txt"
log "booting the guest (TCG; timeout ${TIMEOUT}s)"
START=$SECONDS
"${QEMU[@]}" >"$R/qemu.log" 2>&1 &
QPID=$!
children+=("$QPID")
# The console, live, until QEMU exits.
tail -n +1 -F --pid="$QPID" "$R/console.log" 2>/dev/null &
children+=("$!")
# Fault injection for tests: the guest asks for NIC model i to die by creating
# /ordma/results/control/kill-nic<i>; the harness kills it and renames the file killed-nic<i>.
# The control channel: the guest writes req-<id> holding "<nic-index> <request words>"; the
# harness sends the request to that model (ordma-model ctl, its --control socket), writes the
# reply line to resp-<id> (a temporary name, then mv) and removes the request.
mkdir -p "$R/control"
(
	while kill -0 "$QPID" 2>/dev/null; do
		for f in "$R"/control/kill-nic*; do
			[ -e "$f" ] || continue
			i=${f##*kill-nic}
			if [[ $i =~ ^[0-9]+$ ]] && [ "$i" -lt "$NICS" ]; then
				kill -KILL "${NIC_PIDS[$i]}" 2>/dev/null || true
				log "killed NIC model $i (the guest asked for it)"
			fi
			mv "$f" "$R/control/killed-nic$i"
		done
		for f in "$R"/control/req-*; do
			[ -e "$f" ] || continue
			id=${f##*/req-}
			i= words=
			read -r i words <"$f" || true
			read -r -a w <<<"$words"
			if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -ge "$NICS" ]; then
				out="error: no NIC '$i'"
			elif [ ${#w[@]} = 0 ]; then
				out="error: empty request"
			else
				out=$("$MODEL" ctl --control "/tmp/nic$i.ctl" -- "${w[@]}" 2>&1 | head -n 1) || true
			fi
			printf '%s\n' "$out" >"$R/control/.resp-$id.tmp"
			mv "$R/control/.resp-$id.tmp" "$R/control/resp-$id"
			rm -f "$f"
			log "control: NIC $i '$words' -> $out"
		done
		sleep 0.2
	done
) &
children+=("$!")
# The timeout: a deadline, not a synchronisation.
(sleep "$TIMEOUT" && touch /tmp/timed-out && kill -TERM "$QPID") 2>/dev/null &
WATCHDOG=$!
children+=("$WATCHDOG")
# The boot watchdog: the guest's init creates results/.booted once its shares are mounted,
# a few seconds into a normal boot (40 s for the debug kernel on a loaded machine). A guest
# not there after BOOT_LIMIT s is stuck in the kernel's own boot, before any ordma code (seen
# once under TCG, with nothing on the console): each vCPU's registers and the kernel symbol
# it is in (nokaslr, System.map) go to boot-hang.txt, QEMU is stopped and the run ends with
# 123, which qemu-test/run answers by booting once more.
[ -n "$BOOT_LIMIT" ] || BOOT_LIMIT=$([ -n "$KMEMLEAK" ] && echo 300 || echo 120)
if [ "$BOOT_LIMIT" -lt "$TIMEOUT" ]; then
	(
		sleep "$BOOT_LIMIT"
		[ ! -e "$R/.booted" ] || exit 0
		touch /tmp/boot-hung
		python3 /ordma/src/qemu-test/boot-hang.py /tmp/qemu-monitor.sock "$K/System.map" \
			>"$R/boot-hang.txt" 2>&1 || true
		kill -TERM "$QPID"
	) 2>/dev/null &
	children+=("$!")
fi

qrc=0
wait "$QPID" || qrc=$?
kill "$WATCHDOG" 2>/dev/null || true
sleep 0.2 # let tail print the console's last lines before we summarise
log "guest ran $((SECONDS - START)) s; QEMU exit status $qrc"

# Any kernel warning, BUG, oops, hung task or RCU stall fails the run, whatever the command
# said. Read from the kernel's own log (kernel.log, streamed from /dev/kmsg by the guest;
# dmesg.txt if that is missing), never from the console, where the command's output is too.
# Reported on every path (a hung task shows up in a timed-out run's log too).
KLOG=$R/kernel.log
# /dev/kmsg records ("level,seq,usec,flags;text", continuation lines " KEY=value") in
# dmesg's format.
awk '/^ / { next } { i = index($0, ";"); if (i) { split(substr($0, 1, i - 1), h, ",");
	printf "[%12.6f] %s\n", h[3] / 1e6, substr($0, i + 1) } else print }' \
	"$R/kernel.kmsg" >"$KLOG" 2>/dev/null && rm -f "$R/kernel.kmsg" || true
[ -s "$KLOG" ] || KLOG=$R/dmesg.txt
splat=
if grep -E -f /ordma/src/qemu-test/kernel-splats.txt "$KLOG" >"$R/kernel-splats.txt" 2>/dev/null; then
	splat=1
	log "KERNEL WARNING in the guest (see $(basename "$KLOG")):"
	head -n 5 "$R/kernel-splats.txt" >&2
	# The first report whole (its call trace and what follows), so a log that is all one
	# has (CI's) says where it happened.
	first=$(grep -n -m1 -E -f /ordma/src/qemu-test/kernel-splats.txt "$KLOG" | cut -d: -f1)
	log "the first report, from line $first of $(basename "$KLOG"):"
	sed -n "${first},$((first + 59))p" "$KLOG" >&2
else
	rm -f "$R/kernel-splats.txt"
fi
if [ -e /tmp/boot-hung ]; then
	log "BOOT HANG: the guest did not reach its init within ${BOOT_LIMIT}s (see boot-hang.txt):"
	grep -E '^CPU|^ *RIP' "$R/boot-hang.txt" >&2 || cat "$R/boot-hang.txt" >&2 || true
	exit 123
fi
if [ -e /tmp/timed-out ]; then
	log "TIMEOUT: the guest did not finish within ${TIMEOUT}s"
	exit 124
fi
if [ ! -s "$R/rc" ]; then
	log "VM FAILURE: the guest stopped before the command finished (see console.log, qemu.log)"
	tail -n 5 "$R/qemu.log" >&2 || true
	exit 125
fi
rc=$(cat "$R/rc")
[ -z "$splat" ] || [ "$rc" != 0 ] || rc=126
# kmemleak (debug kernel): objects still unreferenced after ordma was unloaded.
if [ -s "$R/kmemleak.txt" ]; then
	log "KMEMLEAK: unreferenced objects after the run (see kmemleak.txt):"
	grep -m 5 'unreferenced object\|comm "' "$R/kmemleak.txt" >&2 || true
	[ "$rc" != 0 ] || rc=126
fi
exit "$rc"
