# Sourced by VM tests: fault injection through the harness (qemu-test/vm-inner.sh).
#   kill_nic I   ask the harness to kill NIC model I and wait until it has
# The caller defines fail().
kill_nic() {
	touch "/ordma/results/control/kill-nic$1"
	for _ in $(seq 100); do
		[ -e "/ordma/results/control/killed-nic$1" ] && return
		sleep 0.1
	done
	fail "the harness did not kill NIC model $1"
}
