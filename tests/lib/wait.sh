# wait.sh — polling without hand-written loops (source it; tap.sh does).
#	wait_until SECONDS CMD [ARG...]
# runs CMD every $WAIT_STEP seconds (default 0.1) until it succeeds or
# SECONDS have passed; returns 0 as soon as CMD succeeds, 1 on timeout (CMD
# ran at least once, and once more at the deadline). CMD is a command or a
# shell function with its arguments, run as is (no eval): put a compound
# condition in a small function. Its output is not captured.
#	wait_for_file SECONDS FILE	a non-empty FILE
#	wait_pid_gone SECONDS PID	process PID has exited
#	seen_within TRIES WANT CMD [ARG...]
# runs CMD up to TRIES times and prints the distinct lines it printed, sorted
# and space-joined ("a b "), stopping as soon as that equals WANT. For "new
# connections reach every backend": a random choice over k backends misses
# one in n tries with p <= k(1-1/k)^n, so give TRIES for p < 1e-6 (two
# backends: 21; three: 36) and the check still costs one try per backend
# when all is well.
wait_until() {
	local secs=$1 end
	shift
	end=$(($(date +%s%N) + ${secs%.*} * 1000000000))
	case "$secs" in *.*) end=$((end + 10#$(printf '%-9s' "${secs#*.}" | tr ' ' 0) )) ;; esac
	while :; do
		"$@" && return 0
		[ "$(date +%s%N)" -lt "$end" ] || break
		sleep "${WAIT_STEP:-0.1}"
	done
	"$@"
}

wait_for_file() { wait_until "$1" test -s "$2"; }

wait_pid_gone() { wait_until "$1" wait_pid_gone_ "$2"; }
wait_pid_gone_() { ! kill -0 "$1" 2>/dev/null; }

seen_within() {
	local tries=$1 want=$2 seen="" i
	shift 2
	for ((i = 0; i < tries; i++)); do
		seen=$( { printf '%s' "$seen" | tr ' ' '\n'; "$@"; } | sed '/^$/d' | sort -u | tr '\n' ' ')
		[ "$seen" = "$want" ] && break
	done
	printf '%s' "$seen"
}
