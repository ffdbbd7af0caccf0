#!/usr/bin/env bash
# bench-echo-vs-nginx.sh — `zerohop echo --threads 1` against Debian's nginx
# (worker_processes 1, `return 200 "<SIZE bytes>"`) on loopback, same body
# size, driven by the same wrk command, interleaved A B A B ... (PAIRS pairs).
# Prints each run and the median ratio echo/nginx with its spread, for
# requests/s and for requests per server CPU-second (user+sys of the server
# process: less sensitive to other load on a shared machine).
#
#   scripts/bench-echo-vs-nginx.sh [PAIRS=5] [DURATION=5s] [CONNS=64] [SIZE=1024]
#
# nginx runs with a private prefix and config in a temp dir, on a loopback
# port, and is stopped by its PID (as is the echo server).
set -euo pipefail
PAIRS=${1:-5}
DUR=${2:-5s}
CONNS=${3:-64}
SIZE=${4:-1024}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
for t in wrk nginx "$ZH"; do
	command -v "$t" >/dev/null || { echo "missing $t (make deps; make)" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/zh-echo-bench.XXXXXX)
for i in $(seq 0 30); do	# two free loopback ports
	BASE=$((20000 + ($$ + i * 37) % 1000))
	[ -z "$(ss -Htln "( sport = :$BASE or sport = :$((BASE + 1)) )" 2>/dev/null)" ] && break
done
EPORT=$BASE
NPORT=$((BASE + 1))
EPID=
NPID=
cleanup() {
	[ -n "$EPID" ] && kill "$EPID" 2>/dev/null && wait "$EPID" 2>/dev/null
	[ -n "$NPID" ] && kill "$NPID" 2>/dev/null && wait "$NPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

BODY=$(head -c "$SIZE" /dev/zero | tr '\0' 'a')
mkdir -p "$TMP/logs"
cat >"$TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $TMP/nginx.pid;
error_log $TMP/logs/error.log;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	default_type application/octet-stream;
	server {
		listen 127.0.0.1:$NPORT;
		location / { return 200 "$BODY"; }
	}
}
CONF
nginx -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/logs/error.log" &
NPID=$!
"$ZH" echo --threads 1 --http "127.0.0.1:$EPORT" --tcp 127.0.0.1:0 --udp 127.0.0.1:0 >/dev/null &
EPID=$!
for i in $(seq 50); do
	curl -s -o /dev/null "http://127.0.0.1:$NPORT/" && curl -s -o /dev/null "http://127.0.0.1:$EPORT/" && break
	sleep 0.1
done
# Same response body size on both sides (checked, not assumed).
es=$(curl -s "http://127.0.0.1:$EPORT/?size=$SIZE" | wc -c)
ns=$(curl -s "http://127.0.0.1:$NPORT/" | wc -c)
[ "$es" = "$SIZE" ] && [ "$ns" = "$SIZE" ] || { echo "body sizes differ: echo $es nginx $ns" >&2; exit 1; }

# Server CPU time (user + sys, clock ticks) from /proc/PID/stat.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
# run URL PID: prints "req/s requests-per-server-cpu-second".
run() {
	local c0 c1 out
	c0=$(cpu "$2")
	out=$(wrk -t1 -c"$CONNS" -d"$DUR" "$1")
	c1=$(cpu "$2")
	awk -v c="$((c1 - c0))" -v hz="$HZ" '/requests in/ { n = $1 } /^Requests\/sec:/ { r = $2 }
		END { printf "%s %.0f\n", r, (c > 0 ? n / (c / hz) : 0) }' <<<"$out"
}
ratios=()
cratios=()
echo "wrk -t1 -c$CONNS -d$DUR, body $SIZE bytes, $PAIRS interleaved pairs ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
for p in $(seq "$PAIRS"); do
	read -r e ec < <(run "http://127.0.0.1:$EPORT/?size=$SIZE" "$EPID")
	read -r n nc < <(run "http://127.0.0.1:$NPORT/" "$NPID")
	r=$(awk -v e="$e" -v n="$n" 'BEGIN { printf "%.3f", e / n }')
	cr=$(awk -v e="$ec" -v n="$nc" 'BEGIN { printf "%.3f", (n > 0 ? e / n : 0) }')
	ratios+=("$r")
	cratios+=("$cr")
	echo "pair $p: echo $e req/s ($ec req per CPU-s), nginx $n req/s ($nc req per CPU-s), ratio $r (per CPU-s $cr)"
done
med() { sort -n | awk -v what="$1" '{ a[NR] = $1 } END {
	m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
	printf "median ratio echo/nginx %s %.3f (min %.3f, max %.3f, %d pairs)\n", what, m, a[1], a[NR], NR }'; }
printf '%s\n' "${ratios[@]}" | med "req/s"
printf '%s\n' "${cratios[@]}" | med "req per server CPU-second"
