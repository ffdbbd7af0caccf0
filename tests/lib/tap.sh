# tap.sh — TAP helpers for shell tests (source it). Mirrors tests/lib/tap.h.
#   ok COND_EXIT_STATUS "name"   e.g.  cmd; ok $? "cmd works"
#   is GOT WANT "name"           a failure prints got/want on stderr (in CI logs)
#   is_near GOT WANT SLACK "name"  integers within SLACK of each other
#   skip_all "reason"            whole file skipped (prints 1..0 # SKIP)
#   done_testing                 prints the plan; exit status = failures
#   run_cases NAME...            runs each function NAME (a named case) in
#                                turn, a "# case NAME" line before its results
# Also brings wait_until (wait.sh).
TAP_N=0
TAP_FAILED=0
ZH=${ZH:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/zerohop}

# ok and is return the check's verdict (0 passed, 1 failed), so that
# `ok $? "what" || diag "why"` prints its diagnostics only on a failure.
ok() {
	TAP_N=$((TAP_N + 1))
	if [ "$1" -eq 0 ]; then echo "ok $TAP_N - $2"; return 0; fi
	echo "not ok $TAP_N - $2"; TAP_FAILED=$((TAP_FAILED + 1)); return 1
}
is() {
	TAP_N=$((TAP_N + 1))
	if [ "$1" = "$2" ]; then echo "ok $TAP_N - $3"; return 0; fi
	echo "not ok $TAP_N - $3"; echo "#   got '$1', want '$2'" >&2
	TAP_FAILED=$((TAP_FAILED + 1)); return 1
}
is_near() {
	local d
	TAP_N=$((TAP_N + 1))
	if [[ "$1" =~ ^-?[0-9]+$ && "$2" =~ ^-?[0-9]+$ ]]; then
		d=$(($1 - $2))
		if [ "${d#-}" -le "$3" ]; then echo "ok $TAP_N - $4"; return 0; fi
	fi
	echo "not ok $TAP_N - $4"; echo "#   got '$1', want '$2' (± $3)" >&2
	TAP_FAILED=$((TAP_FAILED + 1)); return 1
}
diag() { echo "# $*"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
run_cases() {	# a NAME that is no function is a failed check, not a skip
	local c
	for c in "$@"; do
		diag "case $c"
		if [ "$(type -t "$c")" = function ]; then "$c"; else ok 1 "case $c: no such function"; fi
	done
}
done_testing() { echo "1..$TAP_N"; [ "$TAP_FAILED" -eq 0 ]; exit $?; }
source "$(dirname "${BASH_SOURCE[0]}")/wait.sh"
