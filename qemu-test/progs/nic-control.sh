# Sourced by VM tests: fault injection and the NIC models' control channel, through the
# harness (qemu-test/vm-inner.sh).
#   kill_nic I        ask the harness to kill NIC model I and wait until it has (the model
#                     process is gone for good: the guest needs a new boot to get it back)
#   soft_kill_nic I [fatal]  kill NIC I softly (the model's `die`, hardware.md "The model's
#                     control channel"): the NIC forgets everything it holds and stops
#                     answering (BAR0 reads all ones, as kill_nic's) while its model process
#                     lives on; a PCI function reset (pci_reset in pci-bind.sh) revives it as a
#                     new NIC. With `fatal`: it goes fatal and forgets everything, and the
#                     driver's own reset (unbind, bind) revives it
#   nic_ctl I WORDS   send a control request (link up|down, fatal [CODE], inject FAULT
#                     [until-reset], die [fatal], event KIND DATA [COUNT], mr KEY, status) to
#                     NIC model I; prints the reply line; status 0 for "ok...",
#                     1 for "error..." or no reply within 30 s
#   nic_mark I        remember NIC model I's counters (`status`) now
#   nic_since I NAME  how much its counter NAME grew since nic_mark I: what a test must
#                     check, not the counter itself, when it may share a boot with others
# The caller defines fail().
nic_mark() { declare -g "_nic_mark_$1=$(nic_ctl "$1" status)"; }
nic_since() {
	local v=_nic_mark_$1 now was
	now=$(nic_ctl "$1" status | tr ' ' '\n' | sed -n "s/^$2=//p")
	was=$(tr ' ' '\n' <<<"${!v:-}" | sed -n "s/^$2=//p")
	echo $((${now:-0} - ${was:-0}))
}
kill_nic() {
	# Created under another name, then renamed: the harness renames the request away as
	# soon as it sees it, which would fail a `touch` still setting the file's times.
	: >"/ordma/results/control/.kill-nic$1.tmp"
	mv "/ordma/results/control/.kill-nic$1.tmp" "/ordma/results/control/kill-nic$1"
	for _ in $(seq 300); do
		[ -e "/ordma/results/control/killed-nic$1" ] && return
		sleep 0.1
	done
	fail "the harness did not kill NIC model $1"
}

soft_kill_nic() {
	local reply
	reply=$(nic_ctl "$1" die ${2:+"$2"}) || fail "NIC $1 did not die${2:+ ($2)}: $reply"
}

# Waits `1/10` s without starting a process (a `sleep` costs an exec, which is slow under the
# debug kernel's KASAN): a read with a timeout on a FIFO nobody writes.
_nic_ctl_tick() {
	if [ -z "${_NIC_CTL_FD:-}" ]; then
		local f=/tmp/.nic-ctl-tick.$$
		rm -f "$f"
		mkfifo "$f"
		exec {_NIC_CTL_FD}<>"$f"
		rm -f "$f"
	fi
	read -r -t 0.1 -u "$_NIC_CTL_FD" _ || true
}

nic_ctl() {
	local i=$1 d=/ordma/results/control id reply
	shift
	id="$$-$RANDOM-${EPOCHREALTIME/./}"
	# Bash builtins only (an exec costs about a second under the debug kernel): the request
	# written in place (the harness takes it once its line ends), the response read and
	# left (the harness removes old ones).
	printf '%s %s\n' "$i" "$*" >"$d/req-$id"
	for _ in {1..300}; do
		if [ -e "$d/resp-$id" ]; then
			read -r reply <"$d/resp-$id" || true
			printf '%s\n' "$reply"
			[ "$reply" = ok ] || [ "${reply#ok }" != "$reply" ]
			return
		fi
		_nic_ctl_tick
	done
	rm -f "$d/req-$id"
	echo "error: no reply from the harness within 30 s"
	return 1
}
