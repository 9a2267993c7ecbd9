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

# perftest_six SERVER_DEV CLIENT_DEV PORT: perftest's ib_send_bw, ib_write_bw, ib_read_bw
# (64 KiB x 200) and ib_send_lat, ib_write_lat, ib_read_lat (64 B x 200), unmodified, each
# through pair_run on its own port from PORT on, each with its result line (few iterations:
# a test, not a benchmark; make bench measures).
perftest_six() {
	local srv=$1 cli=$2 port=$3 t
	for t in ib_send_bw ib_write_bw ib_read_bw; do
		pair_run "$t" $port $t -d "$srv" -F -n 200 -s 65536 -- $t -d "$cli" -F -n 200 -s 65536
		grep -Eq '^ *65536 +200 ' /tmp/cli.out || fail "$t: no result line for 65536 B x 200"
		port=$((port + 1))
	done
	for t in ib_send_lat ib_write_lat ib_read_lat; do
		pair_run "$t" $port $t -d "$srv" -F -n 200 -s 64 -- $t -d "$cli" -F -n 200 -s 64
		grep -Eq '^ *64 +200 ' /tmp/cli.out || fail "$t: no result line for 64 B x 200"
		port=$((port + 1))
	done
}
