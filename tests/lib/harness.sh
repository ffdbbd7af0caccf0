# harness.sh — the set-up every e2e test shares, lab or not (source it
# after tap.sh; lab_test.sh and loopback.sh build on it):
#	test_setup TAG [--user] [COMMAND...]
# skips the test unless run as root (not with --user), with $ZH built and
# each COMMAND on the PATH; sets
#	ROOT	the source tree
#	PY	python3 (Debian's /usr/bin/python3 when there is one)
#	TOOLS	the helper programs ($ZH_TOOLS, else build/tests/tools)
#	TMP	a temp dir /tmp/zh-TAG.XXXXXX, mode 755 (pods read files from it)
#	PIDS	an array: append the PID of every background process started
#		(BG is the same array, the lab tests' older name)
# and traps EXIT (INT and TERM exit) to run, in order: the test's own
# `test_cleanup` (or `lab_test_more_cleanup`, its older name) when it
# defines one, a kill (signal $TEST_KILL_SIG, default TERM) of every PID in
# PIDS, and their reaping when $TEST_REAP is set (loopback.sh sets it: its
# processes die on TERM; a lab test's `lab exec` may outlive it), the
# harness's `test_cleanup_hook` (lab_test.sh takes its lab down there), and
# the removal of TMP (kept when $KEEP is set, for a look after a failure).
#	test_tools TOOL...	skip unless each TOOL is built in $TOOLS
#	pids_alive PID...	the PIDs that still run (not zombies), space-
#				separated with a leading space; "" when none
test_setup() {
	local tag=$1 c root=1
	shift
	[ "$1" = --user ] && { root=; shift; }
	[ -z "$root" ] || [ "$(id -u)" -eq 0 ] || skip_all "needs root"
	[ -x "$ZH" ] || skip_all "no $ZH (make first)"
	for c in "$@"; do command -v "$c" >/dev/null || skip_all "no $c (make deps)"; done
	ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	PY=$(command -v /usr/bin/python3 || command -v python3)
	TOOLS=${ZH_TOOLS:-$(dirname "$ZH")/tests/tools}
	TMP=$(mktemp -d "/tmp/zh-$tag.XXXXXX")
	chmod 755 "$TMP"
	PIDS=()
	declare -gn BG=PIDS
	trap test_teardown EXIT
	trap 'exit 130' INT TERM
}

test_tools() {
	local t
	for t in "$@"; do [ -x "$TOOLS/$t" ] || skip_all "no $TOOLS/$t (make first)"; done
}

test_teardown() {
	local p
	if declare -F test_cleanup >/dev/null; then test_cleanup
	elif declare -F lab_test_more_cleanup >/dev/null; then lab_test_more_cleanup; fi
	for p in "${PIDS[@]}"; do kill -"${TEST_KILL_SIG:-TERM}" "$p" 2>/dev/null; done
	if [ -n "${TEST_REAP:-}" ]; then for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done; fi
	declare -F test_cleanup_hook >/dev/null && test_cleanup_hook
	[ -n "${KEEP:-}" ] || rm -rf "$TMP"
}

pids_alive() {
	local p s alive=""
	for p in "$@"; do
		s=$(awk '{print $3}' /proc/$p/stat 2>/dev/null)
		[ -n "$s" ] && [ "$s" != Z ] && alive="$alive $p"
	done
	echo "$alive"
}
