# Sourced by guest tests that run a server and its client (ibv_rc_pingpong, perftest).
#
# wait_listen PORT PID waits until something listens on TCP PORT (the server started in the
# background), at most 30 s; it fails at once if PID (the server) has exited. A fixed sleep
# instead races a loaded machine: the client connects too early, fails, and the server
# waits for it forever.
wait_listen() {
	local _
	for _ in $(seq 300); do
		ss -ltn | grep -q ":$1 " && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# pair_run NAME PORT SERVER_CMD... -- CLIENT_CMD...: the server in the background on PORT,
# its client against it over TCP on this machine (each command gets -p PORT; the client
# also "localhost"); both bounded in time; their outputs in /tmp/srv.out and /tmp/cli.out,
# printed; fails the test (the caller's `fail`) unless both exit 0.
pair_run() {
	local name=$1 port=$2 spid rc=0 srv=() cli=()
	shift 2
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	"${srv[@]}" -p "$port" >/tmp/srv.out 2>&1 &
	spid=$!
	wait_listen "$port" $spid || { cat /tmp/srv.out; fail "$name: the server did not listen"; }
	timeout 120 "${cli[@]}" -p "$port" localhost >/tmp/cli.out 2>&1 || rc=$?
	timeout 30 tail --pid=$spid -f /dev/null || { kill $spid 2>/dev/null; rc=124; }
	wait $spid || rc=$?
	echo "----- $name (server, client)"
	cat /tmp/srv.out /tmp/cli.out
	[ $rc = 0 ] || fail "$name exited with $rc"
}
