#!/usr/bin/env bash
# bench-loadgen-vs-wrk.sh — zerohop bench against wrk, and its send lag.
#
#   scripts/bench-loadgen-vs-wrk.sh [PAIRS] [SECONDS]     (defaults 5 and 5)
#
# 1. Closed loop, maximum rate: loopback nginx (private config in a temp dir,
#    worker_processes 1, `return 200` with a 1 KiB body), 1 thread, 16
#    connections; wrk and zerohop bench interleaved (wrk, zerohop, wrk, ...),
#    PAIRS pairs of SECONDS each; prints each pair's ratio zerohop/wrk and
#    the median and spread.
# 2. Open loop at a fixed 10,000 req/s against the same nginx, 16 and 64
#    connections, and 16 with --nice -10, 3 runs each: send lag (actual − intended send time) of all
#    requests, and timer lag (the same, only for requests whose connection
#    was idle at their tick, i.e. the generator's own timing error).
# Loopback only; nginx is started and stopped by its PID.
set -euo pipefail
PAIRS=${1:-5}
SECS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
command -v wrk >/dev/null || { echo "wrk not installed (scripts/deps.sh)"; exit 1; }
command -v nginx >/dev/null || { echo "nginx not installed (scripts/deps.sh)"; exit 1; }
command -v jq >/dev/null || { echo "jq not installed (scripts/deps.sh)"; exit 1; }
[ -x "$ZH" ] || { echo "$ZH not built (make)"; exit 1; }

TMP=$(mktemp -d /tmp/zh-bench-loadgen.XXXXXX)
NGINX_PID=
cleanup() {
	[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# a free loopback port
for _ in $(seq 20); do
	PORT=$((20000 + RANDOM % 20000))
	ss -Htln "sport = :$PORT" | grep -q . || break
done
BODY=$(head -c 1024 /dev/zero | tr '\0' x)
cat >"$TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$PORT;
		location / { return 200 "$BODY"; }
	}
}
CONF
nginx -p "$TMP" -c "$TMP/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT/"

echo "# closed loop, max rate: nginx 1 worker, 1 KiB, 1 thread, 16 connections, ${SECS}s runs"
echo "# pair  wrk_rps  zerohop_rps  ratio"
ratios=()
for i in $(seq "$PAIRS"); do
	W=$(wrk -t1 -c16 -d"${SECS}s" "$URL" | awk '/^Requests\/sec:/ { print $2 }')
	"$ZH" bench -c 16 --threads 1 -t "${SECS}s" --quiet --json "$TMP/z.json" "$URL"
	Z=$(jq .ActualQPS "$TMP/z.json")
	E=$(jq '[.Errors[]] | add' "$TMP/z.json")
	R=$(awk -v z="$Z" -v w="$W" 'BEGIN { printf "%.3f", z / w }')
	ratios+=("$R")
	printf "  %d  %10.0f  %10.0f  %sx  (zerohop errors %s)\n" "$i" "$W" "$Z" "$R" "$E"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END {
	printf "median ratio zerohop/wrk: %.3fx (min %.3fx, max %.3fx, %d pairs)\n",
		(NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2, r[1], r[NR], NR }'

echo
echo "# open loop at 10000 req/s, ${SECS}s: send lag = actual - intended send time (all requests);"
echo "# timer lag = the same for requests whose connection was idle at their tick (no queueing)"
pct() { jq -r "(.$1.Percentiles[] | select(.Percentile == $2) | .Value) * 1e6 | floor" "$TMP/o.json"; }
for opt in "-c 16" "-c 64" "-c 16 --nice -10"; do
	for i in 1 2 3; do
		# shellcheck disable=SC2086
		"$ZH" bench -qps 10000 $opt -t "${SECS}s" --quiet --json "$TMP/o.json" "$URL"
		printf "  %s run %d: send lag p50 %s us p99 %s us | timer lag p50 %s us p99 %s us p99.9 %s us | backlogged %s of %s | %s req/s, latency p50 %s us p99 %s us\n" \
			"$opt" "$i" "$(pct SendLagHistogram 50)" "$(pct SendLagHistogram 99)" \
			"$(pct TimerLagHistogram 50)" "$(pct TimerLagHistogram 99)" "$(pct TimerLagHistogram 99.9)" \
			"$(jq .Backlogged "$TMP/o.json")" "$(jq .Requests "$TMP/o.json")" \
			"$(jq '.ActualQPS | floor' "$TMP/o.json")" \
			"$(pct DurationHistogram 50)" "$(pct DurationHistogram 99)"
	done
done
echo "# load average during the run: $(cut -d' ' -f1-3 /proc/loadavg)"
