# scripts/lib/loopback.sh — what every loopback benchmark sets up first:
# a temporary directory, ten free ports, and processes ended by their PID
# (never by name) when the script exits.
#
#   source "$ROOT/scripts/lib/loopback.sh"
#   bench_setup NAME BASE	# TMP=/tmp/zh-NAME.XXXXXX; B..B+9 free, from
#				# BASE..BASE+2000; PIDS=() killed and waited
#				# for on exit, then TMP removed
#   ... & PIDS+=($!)
#
# A range is free when no TCP socket of any state uses it (a range inside
# the ephemeral ports may hold another process's connections).

bench_setup() {
	local name=$1 base=$2 i
	TMP=$(mktemp -d "/tmp/zh-$name.XXXXXX")
	for i in $(seq 0 30); do
		B=$((base + ($$ + i * 37) % 2000 / 10 * 10))
		[ -z "$(ss -Htan "( sport >= :$B and sport <= :$((B + 9)) )" 2>/dev/null)" ] && break
	done
	PIDS=()
	trap bench_cleanup EXIT
}

bench_cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
