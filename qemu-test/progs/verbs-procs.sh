# Sourced by VM tests: verbs processes (qemu-test/progs/verbs_ctx.py hold) under the test's
# control, each with its stdin a FIFO.
#   spawn NAME DEV NPDS [DBOFF]  start one: open DEV, allocate NPDS PDs (and write its
#                         doorbell page at DBOFF, which the NIC model counts per page)
#   report NAME           wait for (and print) its JSON report line
#   tell NAME CMD         send it CMD (free, after-remove), wait for it to exit 0
# Its whole output is in /tmp/NAME.out. The caller defines fail().
VERBS_CTX=/ordma/src/qemu-test/progs/verbs_ctx.py
spawn() {
	mkfifo "/tmp/$1.in"
	python3 "$VERBS_CTX" hold "$2" "$3" ${4:+"$4"} <"/tmp/$1.in" >"/tmp/$1.out" 2>&1 &
	eval "pid_$1=\$!"
	exec {fd}>"/tmp/$1.in"
	eval "in_$1=\$fd"
}
report() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ -s "/tmp/$1.out" ] && { head -n1 "/tmp/$1.out"; return; }
		sleep 0.1
	done
	fail "process $1 did not report: $(cat "/tmp/$1.out")"
}
tell() {
	local fd pid
	eval "fd=\$in_$1 pid=\$pid_$1"
	echo "$2" >&"$fd"
	exec {fd}>&-
	wait "$pid" || fail "process $1 failed: $(cat "/tmp/$1.out")"
}
