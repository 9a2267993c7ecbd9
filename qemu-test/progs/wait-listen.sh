# Sourced by guest tests: wait_listen PORT PID waits until something listens on TCP PORT
# (a server started in the background: ibv_rc_pingpong, perftest), at most 30 s; it fails
# at once if PID (the server) has exited. A fixed sleep instead races a loaded machine: the
# client connects too early, fails, and the server waits for it forever.
wait_listen() {
	local _
	for _ in $(seq 300); do
		ss -ltn | grep -q ":$1 " && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
