#!/bin/bash
# The VM half of qemu-test/run; runs inside the build root (scripts/in-root), as PID 1 of its
# own PID namespace. Builds the initramfs, starts QEMU (one per guest: --vms N), streams the
# console, enforces the timeout, and turns what each guest left in its results folder into
# an exit status.
#
# One guest (the default): its results are /ordma/results itself. Several (--vms N, N >= 2):
# guest I's are /ordma/results/vm<I>, its NIC models are numbered I*NICS+J (LID I*NICS+J+1)
# on the one wire of the run (/tmp/wire), its eth0 is on one L2 segment with the others'
# (qemu-test/segment.py, captured to /ordma/results/shared/segment.pcap), and every guest
# mounts /ordma/results/shared at /ordma/shared. The run's status: 124 if the deadline
# passed, 123 if a guest did not boot, else the first failing guest's (by index), 125 if
# the only failures were guests stopped because another one failed; summary.txt has each.
set -euo pipefail
NICS=1
VMS=1
SEGMENT_ARGS=
TIMEOUT=600
MODULE=/ordma/src/drivers/infiniband/hw/ordma/ordma.ko
KMEMLEAK=
BOOT_WARNING=
BOOT_HANG=
# The boot watchdog (below): how long the guest has to reach its init's mounts.
BOOT_LIMIT=
GRACE=30
LINK_LAYER=infiniband
CAPTURE=
KAPPEND=
declare -A EXTRA=()
while [ $# -gt 0 ]; do
	case $1 in
	--nics) NICS=$2; shift 2 ;;
	--link-layer) LINK_LAYER=$2; shift 2 ;;
	--capture) CAPTURE=1; shift ;;
	--append) KAPPEND=" $2"; shift 2 ;; # more kernel command line (qemu-test/run --append)
	--vms) VMS=$2; shift 2 ;;
	--segment-args) SEGMENT_ARGS=$2; shift 2 ;;
	--module) MODULE=$2; shift 2 ;;
	--model) MODEL=$2; shift 2 ;;
	--kmemleak) KMEMLEAK=1; shift ;;
	--boot-warning) BOOT_WARNING=1; shift ;; # the harness self-test's: a warning before insmod
	--boot-hang) BOOT_HANG=1; shift ;; # the harness self-test's: a guest that never boots
	--boot-limit) BOOT_LIMIT=$2; shift 2 ;;
	--stop-grace) GRACE=$2; shift 2 ;; # the others' time once a guest failed (default 30 s)
	--nic-args) EXTRA[$2]=$3; shift 3 ;; # NIC J of every guest, or "I:J": guest I's NIC J
	--timeout) TIMEOUT=$2; shift 2 ;;
	*) echo "vm-inner: unknown argument $1" >&2; exit 127 ;;
	esac
done
R=/ordma/results
K=/ordma/kernel
G=/ordma/src/qemu-test/guest
# VM: "vm<I>: " in the log lines of guest I's part when there are several guests.
VM=
log() { printf '[ordma %s] %s%s\n' "$(date +%H:%M:%S)" "$VM" "$*" | tee -a /ordma/results/harness.log >&2; }

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
# The test tier (scripts/test.sh): the guest exports ORDMA_TIER=full for the tests' long forms.
[ "${ORDMA_TIER:-}" != full ] || touch $P/tier-full
[ -z "$BOOT_WARNING" ] || touch $P/boot-warning

MODEL=${MODEL:-/ordma/cache/target/release/ordma-model}
# The wire between the NICs: one directory, one L2 segment for every NIC of the run, of
# every guest; each model binds /tmp/wire/<its MAC>.sock (02-6f-72-64-00-<model number + 1>:
# derived from its LID on an InfiniBand port, its own on an Ethernet one) and sends frames
# to its peers' sockets. An Ethernet port also carries its netdev's frames (--link-layer
# ethernet): the guest's virtio-net device of the NIC's MAC is a QEMU dgram netdev whose
# peer is the model.
mkdir -p /tmp/wire

# Several guests: their eth0s on one segment, a hub process of the run (qemu-test/segment.py)
# that floods each frame to the other guests and captures it.
if [ "$VMS" -gt 1 ]; then
	mkdir -p /tmp/segment "$R/shared"
	mkfifo /tmp/segment.ready
	read -r -a seg_args <<<"$SEGMENT_ARGS"
	python3 /ordma/src/qemu-test/segment.py --dir /tmp/segment --ports "$VMS" --control /tmp/segment.ctl \
		--pcap "$R/shared/segment.pcap" --log "$R/segment.log" "${seg_args[@]}" --ready-fd 3 3>/tmp/segment.ready &
	children+=("$!")
	if ! read -r -t 30 line </tmp/segment.ready || [ "$line" != ready ]; then
		log "the segment's hub did not start (see segment.log)"
		exit 125
	fi
	log "segment ready (hub pid ${children[-1]}, capture shared/segment.pcap${SEGMENT_ARGS:+, args: $SEGMENT_ARGS})"
fi

# times_split DIR START END: DIR/times.txt, where the guest's wall time went: boot (QEMU's
# start to the command's: firmware, kernel, init, stage2, the first insmod), tests (the
# command, less the kmemleak scans in it), kmemleak (the scans, the guest's own count: a
# batch's after each test in DIR/kmemleak-seconds, one line each, and the last one after the
# command in DIR/kmemleak-final-seconds) and teardown (the command's end to QEMU's exit, less
# that last scan: rmmod, dmesg, power off). "-" where the guest never got there.
times_split() {
	local d=$1 start=$2 end=$3 c= ce= k kf
	[ -e "$d/.t-command" ] && c=$(stat -c %.9Y "$d/.t-command")
	[ -e "$d/.t-command-end" ] && ce=$(stat -c %.9Y "$d/.t-command-end")
	k=$(awk '{ s += $1 } END { printf "%d", s }' "$d/kmemleak-seconds" 2>/dev/null || echo 0)
	kf=$(cat "$d/kmemleak-final-seconds" 2>/dev/null || echo 0)
	awk -v s="$start" -v e="$end" -v c="$c" -v ce="$ce" -v k="${k:-0}" -v kf="${kf:-0}" 'BEGIN {
		boot = c == "" ? "-" : sprintf("%d", c - s)
		tests = ce == "" ? "-" : sprintf("%d", ce - c - k)
		down = ce == "" ? "-" : sprintf("%d", e - ce - kf)
		printf "boot=%s tests=%s kmemleak=%d teardown=%s total=%d\n", boot, tests, k + kf, down, e - s
	}' >"$d/times.txt"
}

# guest I: starts its NIC models and QEMU, streams its console, serves its control channel,
# watches its boot, and exits with its status (as a one-guest run's). Run in a subshell of
# its own. /tmp/vm<I>.qpid: its QEMU's pid; /tmp/vm<I>.seconds: how long it ran.
guest() {
	local i=$1 R=$R
	[ "$VMS" = 1 ] || { R=$R/vm$i; VM="vm$i: "; }
	children=()
	trap cleanup EXIT
	trap 'log "signal: stopping QEMU"; cleanup; exit 130' INT TERM HUP
	mkdir -p "$R"

	# The NICs: one model process per NIC, each on its own vfio-user socket. They run in
	# this PID namespace, so they end with it whatever happens.
	local NIC_ARGS=() ETH_ARGS=() NIC_PIDS=() j n sock extra line mac
	for ((j = 0; j < NICS; j++)); do
		n=$((i * NICS + j))
		sock=/tmp/vm$i-nic$j.sock
		mkfifo "/tmp/vm$i-nic$j.ready"
		read -r -a extra <<<"${EXTRA[$i:$j]:-${EXTRA[$j]:-}}"
		if [ "$LINK_LAYER" = ethernet ]; then
			# The NIC's netdev: QEMU binds .qeth, the model .eth; each sends to the other.
			mac=$(printf '02:6f:72:64:%02x:%02x' $(((n + 1) >> 8)) $(((n + 1) & 255)))
			extra=(--link-layer ethernet --mac "$mac" --netdev "/tmp/vm$i-nic$j.eth"
				--netdev-peer "/tmp/vm$i-nic$j.qeth" "${extra[@]}")
			ETH_ARGS+=(-netdev "{\"type\":\"dgram\",\"id\":\"eth$j\",\"local\":{\"type\":\"unix\",\"path\":\"/tmp/vm$i-nic$j.qeth\"},\"remote\":{\"type\":\"unix\",\"path\":\"/tmp/vm$i-nic$j.eth\"}}"
				-device "{\"driver\":\"virtio-net-pci\",\"netdev\":\"eth$j\",\"mac\":\"$mac\",\"romfile\":\"\"}")
		fi
		[ -z "$CAPTURE" ] || extra=(--pcap "$R/nic$j.pcap" "${extra[@]}")
		"$MODEL" --socket "$sock" --index "$n" --log "$R/nic$j.log" --log-level "${ORDMA_MODEL_LOG:-info}" \
			--control "/tmp/vm$i-nic$j.ctl" --wire /tmp/wire "${extra[@]}" --ready-fd 3 3>"/tmp/vm$i-nic$j.ready" &
		children+=("$!")
		NIC_PIDS+=("$!")
		# Readiness: the model writes "ready" once it listens; EOF means it died.
		if ! read -r -t 30 line <"/tmp/vm$i-nic$j.ready" || [ "$line" != ready ]; then
			log "NIC model $j did not start (see nic$j.log)"
			tail -n 5 "$R/nic$j.log" >&2 || true
			exit 125
		fi
		log "NIC model $j ready (pid ${children[-1]}, log nic$j.log${extra[*]:+, args: ${extra[*]}}${VM:+, LID $((n + 1))})"
		NIC_ARGS+=(-device "{\"driver\":\"vfio-user-pci\",\"socket\":{\"type\":\"unix\",\"path\":\"$sock\"}}")
	done

	# The guest's eth0: QEMU's user network alone; on the segment, with a MAC of its own,
	# with others. Guests on a segment also share /ordma/results/shared (9p, uncached).
	local NET=(-netdev user,id=net0 -device virtio-net-pci,netdev=net0,romfile=) SHARED=() APPEND=
	if [ "$VMS" -gt 1 ]; then
		NET=(-netdev "dgram,id=net0,local.type=unix,local.path=/tmp/segment/vm$i.sock,remote.type=unix,remote.path=/tmp/segment/hub.sock"
			-device "virtio-net-pci,netdev=net0,romfile=,mac=52:54:00:00:00:$(printf %02x $((i + 1)))")
		SHARED=(-fsdev "local,id=fsshared,path=/ordma/results/shared,security_model=none"
			-device '{"driver":"virtio-9p-pci","fsdev":"fsshared","mount_tag":"shared"}')
		APPEND=" ordma.vm=$i ordma.vms=$VMS"
	fi

	: >"$R/console.log"
	local MEM=2G
	local QEMU=(qemu-system-x86_64
		-machine q35,memory-backend=mem0 -accel tcg -cpu max,la57=off -smp 2 -m "$MEM"
		-object memory-backend-memfd,id=mem0,size="$MEM",share=on
		-name "${ORDMA_RUN_ID:-ordma}${VM:+-vm$i}" -nodefaults -display none -no-reboot
		-monitor unix:/tmp/vm$i-monitor.sock,server=on,wait=off
		-chardev file,id=con,path="$R/console.log" -serial chardev:con
		-kernel "$K/arch/x86/boot/bzImage" -initrd /tmp/initrd.gz
		-append "console=ttyS0 panic=-1 quiet nokaslr pty.legacy_count=0 tsc=reliable${BOOT_HANG:+ ordma.test_boot_hang}$APPEND$KAPPEND"
		-fsdev local,id=fsroot,path=/ordma/guestroot,security_model=none,readonly=on,multidevs=remap
		-device virtio-9p-pci,fsdev=fsroot,mount_tag=root
		-fsdev local,id=fssrc,path=/ordma/src,security_model=none,readonly=on,multidevs=remap
		-device virtio-9p-pci,fsdev=fssrc,mount_tag=src
		-fsdev local,id=fsmods,path="$K/mods",security_model=none,readonly=on
		-device virtio-9p-pci,fsdev=fsmods,mount_tag=mods
		-fsdev local,id=fsres,path="$R",security_model=none
		-device virtio-9p-pci,fsdev=fsres,mount_tag=results
		"${NET[@]}"
		"${NIC_ARGS[@]}"
		# After the NICs, so their PCI addresses (00:06.0, 00:07.0, ...) stay where tests
		# expect. JSON like theirs: QEMU creates JSON -devices after all the others.
		-fsdev local,id=fspay,path=$P,security_model=none,readonly=on
		-device '{"driver":"virtio-9p-pci","fsdev":"fspay","mount_tag":"payload"}'
		"${SHARED[@]}"
		# The Ethernet ports' netdevs, last (JSON too): the NICs keep their addresses.
		"${ETH_ARGS[@]}"
	)
	# The kernel's command line: pty.legacy_count=0 (no legacy PTYs: 7 s of the debug kernel's
	# boot), tsc=reliable (the clocksource watchdog does not check the TSC: under TCG a debug
	# guest's boot was seen to spin in watchdog_check_skew until the boot watchdog stopped it,
	# 5 min lost, twice in a day; qemu-test/boot-profile.sh).
	printf '%q ' "${QEMU[@]}" >"$R/qemu-cmdline.txt"
	log "booting the guest (TCG; timeout ${TIMEOUT}s)"
	local START=$SECONDS QPID
	# Where the time goes (times.txt, below): the guest marks the command's start and end
	# with .t-command and .t-command-end, whose modification times are the host's clock.
	rm -f "$R"/.t-command "$R"/.t-command-end "$R"/kmemleak-seconds "$R"/kmemleak-final-seconds
	local T_START
	T_START=$(date +%s.%N)
	"${QEMU[@]}" >"$R/qemu.log" 2>&1 &
	QPID=$!
	children+=("$QPID")
	echo "$QPID" >"/tmp/vm$i.qpid"
	# The console, live, until QEMU exits (each line marked with its guest when several).
	if [ -z "$VM" ]; then
		tail -n +1 -F --pid="$QPID" "$R/console.log" 2>/dev/null &
	else
		tail -n +1 -F --pid="$QPID" "$R/console.log" 2>/dev/null | sed -u "s/^/[vm$i] /" &
	fi
	children+=("$!")
	# Fault injection for tests: the guest asks for NIC model j to die by creating
	# /ordma/results/control/kill-nic<j>; the harness kills it (SIGKILL, by kill-model.py) and
	# renames the file killed-nic<j>.
	# The control channel: the guest writes req-<id> holding "<nic-index> <request words>"; the
	# harness takes it once its line is complete, sends the request to that model (ordma-model
	# ctl, its --control socket), writes the reply line to resp-<id> (a temporary name, then mv)
	# and removes the request; the guest leaves the response, removed a minute later. With several
	# guests, "segment <request words>" goes to the segment's hub (segment.py ctl).
	# With several guests, a guest powered off mid-run (pulling its plug): it creates
	# /ordma/results/control/poweroff; the harness kills its QEMU and its NIC models at once,
	# and the guest's verdict is the others' (its kernel log is still checked up to then).
	mkdir -p "$R/control"
	(
		polls=0
		while kill -0 "$QPID" 2>/dev/null; do
			if [ "$VMS" -gt 1 ] && [ -e "$R/control/poweroff" ]; then
				touch "/tmp/vm$i.powered-off"
				kill -KILL "$QPID" "${NIC_PIDS[@]}" 2>/dev/null || true
				log "powered off (the guest asked for it): QEMU and its NIC models killed"
				break
			fi
			for f in "$R"/control/kill-nic*; do
				[ -e "$f" ] || continue
				j=${f##*kill-nic}
				if [[ $j =~ ^[0-9]+$ ]] && [ "$j" -lt "$NICS" ]; then
					# SIGKILL, QEMU's side of the socket ending in an end of file
					# (qemu-test/kill-model.py: QEMU aborts on a reset one).
					out=$(python3 /ordma/src/qemu-test/kill-model.py "${NIC_PIDS[$j]}" "/tmp/vm$i-nic$j.sock" 2>&1) ||
						kill -KILL "${NIC_PIDS[$j]}" 2>/dev/null || true
					log "killed NIC model $j (the guest asked for it)${out:+: $out}"
				fi
				mv "$f" "$R/control/killed-nic$j"
			done
			for f in "$R"/control/req-*; do
				[ -e "$f" ] || continue
				# The guest writes a request in place (a rename would cost it an exec, a
				# second under the debug kernel): complete once its line ends.
				content=
				IFS= read -r -d '' content <"$f" || true
				[[ $content == *$'\n' ]] || continue
				id=${f##*/req-}
				j= words=
				read -r j words <<<"$content" || true
				read -r -a w <<<"$words"
				if [ "$j" = segment ] && [ "$VMS" -gt 1 ] && [ ${#w[@]} -gt 0 ]; then
					out=$(python3 /ordma/src/qemu-test/segment.py ctl --control /tmp/segment.ctl -- "${w[@]}" 2>&1 |
						head -n 1) || true
				elif ! [[ $j =~ ^[0-9]+$ ]] || [ "$j" -ge "$NICS" ]; then
					out="error: no NIC '$j'"
				elif [ ${#w[@]} = 0 ]; then
					out="error: empty request"
				else
					out=$("$MODEL" ctl --control "/tmp/vm$i-nic$j.ctl" -- "${w[@]}" 2>&1 | head -n 1) || true
				fi
				printf '%s\n' "$out" >"$R/control/.resp-$id.tmp"
				mv "$R/control/.resp-$id.tmp" "$R/control/resp-$id"
				rm -f "$f"
				log "control: $([ "$j" = segment ] || echo "NIC ")$j '$words' -> $out"
			done
			# The guest reads a response and leaves it (removing it would cost an exec):
			# those a minute old go, every 20 s.
			if ((++polls % 100 == 0)); then
				find "$R/control" -maxdepth 1 -name 'resp-*' -mmin +1 -delete 2>/dev/null || true
			fi
			sleep 0.2
		done
	) &
	children+=("$!")
	# The boot watchdog: the guest's init creates results/.booted once its shares are
	# mounted, a few seconds into a normal boot (40 s for the debug kernel on a loaded
	# machine). A guest not there after BOOT_LIMIT s is stuck in the kernel's own boot, before
	# any ordma code (seen once under TCG, with nothing on the console): each vCPU's registers
	# and the kernel symbol it is in (nokaslr, System.map) go to boot-hang.txt, QEMU is
	# stopped and the guest ends with 123, which qemu-test/run answers by booting once more.
	if [ "$BOOT_LIMIT" -lt "$TIMEOUT" ]; then
		(
			sleep "$BOOT_LIMIT"
			[ ! -e "$R/.booted" ] || exit 0
			touch "/tmp/vm$i.boot-hung"
			python3 /ordma/src/qemu-test/boot-hang.py "/tmp/vm$i-monitor.sock" "$K/System.map" \
				>"$R/boot-hang.txt" 2>&1 || true
			kill -TERM "$QPID"
		) 2>/dev/null &
		children+=("$!")
	fi

	local qrc=0
	wait "$QPID" || qrc=$?
	local T_END
	T_END=$(date +%s.%N)
	sleep 0.2 # let tail print the console's last lines before we summarise
	echo $((SECONDS - START)) >"/tmp/vm$i.seconds"
	log "guest ran $((SECONDS - START)) s; QEMU exit status $qrc"
	times_split "$R" "$T_START" "$T_END"

	# Any kernel warning, BUG, oops, hung task or RCU stall fails the run, whatever the command
	# said. Read from the kernel's own log (kernel.log, streamed from /dev/kmsg by the guest;
	# dmesg.txt if that is missing), never from the console, where the command's output is too.
	# Reported on every path (a hung task shows up in a timed-out run's log too).
	local KLOG=$R/kernel.log splat= first rc
	# /dev/kmsg records ("level,seq,usec,flags;text", continuation lines " KEY=value") in
	# dmesg's format.
	awk '/^ / { next } { i = index($0, ";"); if (i) { split(substr($0, 1, i - 1), h, ",");
		printf "[%12.6f] %s\n", h[3] / 1e6, substr($0, i + 1) } else print }' \
		"$R/kernel.kmsg" >"$KLOG" 2>/dev/null && rm -f "$R/kernel.kmsg" || true
	[ -s "$KLOG" ] || KLOG=$R/dmesg.txt
	if grep -E -f /ordma/src/qemu-test/kernel-splats.txt "$KLOG" >"$R/kernel-splats.txt" 2>/dev/null; then
		splat=1
		log "KERNEL WARNING in the guest (see ${VM:+vm$i/}$(basename "$KLOG")):"
		head -n 5 "$R/kernel-splats.txt" >&2
		# The first report whole (its call trace and what follows), so a log that is all one
		# has (CI's) says where it happened.
		first=$(grep -n -m1 -E -f /ordma/src/qemu-test/kernel-splats.txt "$KLOG" | cut -d: -f1)
		log "the first report, from line $first of ${VM:+vm$i/}$(basename "$KLOG"):"
		sed -n "${first},$((first + 59))p" "$KLOG" >&2
	else
		rm -f "$R/kernel-splats.txt"
	fi
	if [ -e "/tmp/vm$i.powered-off" ]; then
		log "POWERED OFF on request: the run's verdict is the other guests'"
		[ -z "$splat" ] || exit 126
		exit 0
	fi
	if [ -e "/tmp/vm$i.boot-hung" ]; then
		log "BOOT HANG: the guest did not reach its init within ${BOOT_LIMIT}s (see boot-hang.txt):"
		grep -E '^CPU|^ *RIP' "$R/boot-hang.txt" >&2 || cat "$R/boot-hang.txt" >&2 || true
		exit 123
	fi
	if [ -e /tmp/timed-out ]; then
		log "TIMEOUT: the guest did not finish within ${TIMEOUT}s"
		exit 124
	fi
	if [ -e "/tmp/vm$i.stopped" ] && [ ! -s "$R/rc" ]; then
		log "STOPPED: another guest of the run failed, and this one had not finished"
		exit 125
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
}

[ -n "$BOOT_LIMIT" ] || BOOT_LIMIT=$([ -n "$KMEMLEAK" ] && echo 300 || echo 120)
declare -A GUEST_OF=()
GUESTS=()
for ((g = 0; g < VMS; g++)); do
	# Each guest runs the run's command (cmd.sh), in its own results folder.
	[ "$VMS" = 1 ] || { mkdir -p "$R/vm$g"; cp "$R/cmd.sh" "$R/vm$g/cmd.sh"; rm -f "$R/vm$g/rc"; }
	(guest "$g") &
	children+=("$!")
	GUESTS+=("$!")
	GUEST_OF[$!]=$g
done
# The timeout: a deadline, not a synchronisation; for every guest at once.
(sleep "$TIMEOUT" && touch /tmp/timed-out && kill -TERM $(cat /tmp/vm*.qpid)) 2>/dev/null &
WATCHDOG=$!
children+=("$WATCHDOG")

# As the guests end: one that failed while others still run stops them after GRACE seconds
# (a peer waiting for it would wait until the deadline); they end with 125, "stopped".
declare -A RCS=()
stopping=
for ((left = VMS; left > 0; left--)); do
	done_pid= grc=0
	wait -n -p done_pid "${GUESTS[@]}" || grc=$?
	[ -n "$done_pid" ] || break
	g=${GUEST_OF[$done_pid]}
	RCS[$g]=$grc
	running=()
	for p in "${GUESTS[@]}"; do [ "$p" = "$done_pid" ] || running+=("$p"); done
	GUESTS=("${running[@]}")
	if [ "$grc" != 0 ] && [ "$left" -gt 1 ] && [ -z "$stopping" ] && [ ! -e /tmp/timed-out ]; then
		stopping=1
		log "vm$g failed (status $grc): stopping the other guests in ${GRACE}s unless they finish"
		(
			sleep "$GRACE"
			for ((o = 0; o < VMS; o++)); do
				[ -e "/tmp/vm$o.seconds" ] || [ ! -e "/tmp/vm$o.qpid" ] || {
					touch "/tmp/vm$o.stopped"
					kill -TERM "$(cat "/tmp/vm$o.qpid")"
				}
			done
		) 2>/dev/null &
		children+=("$!")
	fi
done
kill "$WATCHDOG" 2>/dev/null || true
[ "$VMS" -gt 1 ] || exit "${RCS[0]:-125}"

# Several guests: one summary, one status.
rc=0
for ((g = 0; g < VMS; g++)); do
	s=${RCS[$g]:-125}
	note=
	[ ! -e "/tmp/vm$g.stopped" ] || note=" (stopped: another guest failed)"
	printf 'vm%d rc=%s seconds=%s%s\n' "$g" "$s" "$(cat "/tmp/vm$g.seconds" 2>/dev/null || echo -)" "$note"
	[ "$rc" = 0 ] && [ "$s" != 0 ] && [ -z "$note" ] && rc=$s
done >"$R/summary.txt"
if [ -e /tmp/timed-out ]; then
	rc=124
elif compgen -G '/tmp/vm*.boot-hung' >/dev/null; then
	rc=123
elif [ "$rc" = 0 ] && compgen -G '/tmp/vm*.stopped' >/dev/null; then
	rc=125
fi
VM=
log "guests: $(tr '\n' ';' <"$R/summary.txt" | sed 's/;$//; s/;/; /g'); status $rc"
exit "$rc"
