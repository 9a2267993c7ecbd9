# Sourced by guest tests that run rdma-core's own test suite (pyverbs' tests, as Debian
# ships them in /usr/share/doc/rdma-core/tests, compressed): rdma_core_tests DEV ARGS...
# runs `run_tests.py --dev DEV -v ARGS` from an uncompressed copy, prints its output, and
# fails the test (the caller's `fail`) unless it ends in OK with at least one test run and
# none failed (skipped tests are allowed: printed). The output stays in
# /tmp/rdma-core-tests/last.out, for rdma_core_passed.
rdma_core_tests() {
	local dev=$1 out rc=0
	shift
	if [ ! -d /tmp/rdma-core-tests/tests ]; then
		mkdir -p /tmp/rdma-core-tests
		cp -r /usr/share/doc/rdma-core/tests /tmp/rdma-core-tests/
		gunzip -f /tmp/rdma-core-tests/tests/*.gz
	fi
	out=$(cd /tmp/rdma-core-tests/tests && timeout 300 python3 run_tests.py --dev "$dev" -v "$@" 2>&1) || rc=$?
	echo "----- rdma-core tests on $dev: $*"
	echo "$out"
	echo "$out" >/tmp/rdma-core-tests/last.out
	[ $rc = 0 ] || fail "rdma-core's tests ($*) on $dev exited with $rc"
	echo "$out" | grep -Eq '^Ran [1-9][0-9]* tests? ' || fail "rdma-core's tests ($*): none ran"
	echo "$out" | grep -Eq '^OK( \(skipped=[0-9]+\))?$' || fail "rdma-core's tests ($*) on $dev did not pass"
}

# rdma_core_passed TEST...: each test of the last rdma_core_tests run ran and passed (not
# skipped), or the caller's `fail`. unittest's verbose line is "NAME (module.Class.NAME) ...
# ok", the "... ok" on the next line when the test has a docstring, and the outcome on a
# line of its own when a warning printed while the test ran came between.
rdma_core_passed() {
	local t
	for t in "$@"; do
		awk -v t="$t" 'index($0, t " (") == 1 { found = 1 }
			found && /(^| \.\.\. )(ok|FAIL|ERROR|skipped .*|expected failure|unexpected success)$/ {
				ok = /(^| \.\.\. )ok$/; done = 1; exit }
			END { exit !(done && ok) }' /tmp/rdma-core-tests/last.out ||
			fail "rdma-core's $t did not run and pass: $(grep -A1 "^$t (" /tmp/rdma-core-tests/last.out)"
	done
}
