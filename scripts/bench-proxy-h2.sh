#!/usr/bin/env bash
# bench-proxy-h2.sh — the node L7 proxy's HTTP/2 client side against
# HAProxy 2.6 (one thread, `bind ... proto h2`, same config as the other
# proxy benchmarks: scripts/lib/haproxy.sh) and nginx 1.22 (one worker,
# `listen ... http2`: cleartext HTTP/2 with prior knowledge, proxy_pass
# with upstream keep-alive: scripts/lib/nginx.sh), all on loopback in
# front of the same HTTP/1.1 `zerohop echo` (1 thread), 1 KiB responses:
# h2load (nghttp2-client) with 64 streams over 4 connections, contenders
# interleaved Z H N Z H N ...; prints each run, then the median ratios
# zerohop/haproxy and zerohop/nginx of req/s and of requests per proxy
# CPU-second, with the min..max spread of the rounds. Each round also
# prints the µs of CPU per request of the proxy, the backend and h2load,
# and the end a "budget": with all three on the same CPUs, raw req/s is
# bounded by their sum, so the line says what zerohop's own µs would have
# to be for 1.3x HAProxy's raw req/s behind that backend and h2load.
#
#   scripts/bench-proxy-h2.sh [PAIRS=5] [REQUESTS=100000]
#   BACKEND=h2 scripts/bench-proxy-h2.sh ...
#
# BACKEND=h2: HTTP/2 to the backend as well, the issue's setup: the backend
# is nginx itself answering 1 KiB over cleartext HTTP/2 (one worker,
# `return 200`), zerohop's Service port is named http2 (h2c upstream),
# HAProxy's server line has `proto h2`, the nginx contender uses
# `grpc_pass` (its HTTP/2 upstream module). Every process is ours and
# stopped by its PID.
#
# ZH=BINARY: the zerohop binary to measure (default build/zerohop), e.g. an
# older build kept aside for an A/B.
# P99=1: then p99 latency at half HAProxy's median max req/s, zerohop and
# HAProxy interleaved (P99_ROUNDS, default 3, of P99_SECS, default 5 s):
# h2load --rps (per connection) with the same 4 connections x 16 streams,
# p99 of the per-request times of its --log-file. h2load times a request
# from its send, so this is not corrected for coordinated omission; at
# half the max rate both contenders keep up, which is what makes it fair.
set -euo pipefail
PAIRS=${1:-5}
N=${2:-100000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/loopback.sh"
source "$ROOT/scripts/lib/haproxy.sh"
source "$ROOT/scripts/lib/nginx.sh"
source "$ROOT/scripts/lib/stats.sh"
ZH=${ZH:-$ROOT/build/zerohop}
for t in h2load haproxy nginx "$ZH"; do
	command -v "$t" >/dev/null || { echo "missing $t (make deps; make)" >&2; exit 1; }
done
bench_setup px-h2-bench 25000
EP=$((B + 1)); ZP=$B; HP=$((B + 2)); NP=$((B + 3))

if [ "${BACKEND:-h1}" = h2 ]; then
	mkdir -p "$TMP/be"
	nginx_h2c_origin_cfg "$TMP/be" "127.0.0.1:$EP" >"$TMP/be/nginx.conf"
	nginx -c "$TMP/be/nginx.conf" -e "$TMP/be/error.log" >/dev/null 2>&1 &
	PNAME=http2	# zerohop: an h2c upstream (docs/proxy.md)
	HSRV="127.0.0.1:$EP proto h2"
else
	"$ZH" echo --threads 1 --http "127.0.0.1:$EP" --tcp 127.0.0.1:0 --udp 127.0.0.1:0 \
		>/dev/null 2>&1 &
	PNAME=web
	HSRV="127.0.0.1:$EP"
fi
PIDS+=($!)
BEPID=$!	# the backend (one process: nginx without master, or the echo)
bench_web_manifest "$PNAME" "$EP" >"$TMP/m.yaml"
mkdir -p "$TMP/state"
"$ZH" apply --state "$TMP/state" -f "$TMP/m.yaml" >/dev/null
"$ZH" proxy --listen "127.0.0.1:$ZP" --service default/web --state "$TMP/state" 2>"$TMP/zp.err" &
ZPID=$!
PIDS+=($ZPID)
haproxy_cfg "127.0.0.1:$HP proto h2" $HSRV >"$TMP/haproxy.cfg"
haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/hp.out" 2>&1 &
HPID=$!
PIDS+=($HPID)
nginx_cfg "$TMP" "127.0.0.1:$NP http2" "127.0.0.1:$EP" >"$TMP/nginx.conf"
[ "${BACKEND:-h1}" = h2 ] &&	# HTTP/2 upstream: grpc_pass (no keep-alive pool needed)
	sed -i 's|location / {.*|location / { grpc_pass grpc://be; }|; /proxy_set_header/d' "$TMP/nginx.conf"
nginx -c "$TMP/nginx.conf" -e "$TMP/nginx-error.log" >"$TMP/ng.out" 2>&1 &
NPID=$!
PIDS+=($NPID)
sleep 1
# h2load's line: "finished in 1.23s, 81234.56 req/s, 90.12MB/s" and
# "requests: N total, N started, N done, N succeeded, ..."
# CPU of the whole run, not only the proxy's: the backend's (its process)
# and h2load's (the children times of this subshell, bash's `times`), in
# µs per request. On 2 vCPUs the three share the CPUs, so raw req/s is
# bounded by their sum, not by the proxy alone (the "budget" lines below).
child_cpu() { # (times, not $(times): a subshell has no children of its own)
	times >"$TMP/times"
	awk 'NR == 2 {split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1e6}' \
		"$TMP/times"
}
run() { # PORT PID: prints "req/s reqs-per-cpu-second backend-us/req h2load-us/req"
	local t0 t1 b0 b1 c0 c1 out rps ok
	local me=$BASHPID
	child_cpu >"$TMP/c0.$me"; t0=$(proc_ticks "$2"); b0=$(proc_ticks "$BEPID")
	out=$(h2load -n "$N" -c 4 -m 16 "http://127.0.0.1:$1/?size=1024" 2>&1)
	t1=$(proc_ticks "$2"); b1=$(proc_ticks "$BEPID"); child_cpu >"$TMP/c1.$me"
	c0=$(cat "$TMP/c0.$me"); c1=$(cat "$TMP/c1.$me")
	rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
	ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
	[ "${ok:-0}" -eq "$N" ] || { echo "run on :$1: $ok of $N succeeded" >&2; exit 1; }
	awk -v r="$rps" -v n="$N" -v d=$((t1 - t0)) -v b=$((b1 - b0)) -v c=$((c1 - c0)) \
		-v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%.0f %.0f %.2f %.2f\n", r, (d > 0 ? n / (d / hz) : 0), b / hz * 1e6 / n, c / n }'
}
run "$ZP" "$ZPID" >/dev/null	# warm both
run "$HP" "$HPID" >/dev/null
run "$NP" "$NPID" >/dev/null
: >"$TMP/r"
: >"$TMP/out"
for i in $(seq "$PAIRS"); do
	read -r zr zc zb zl < <(run "$ZP" "$ZPID")
	read -r hr hc hb hl < <(run "$HP" "$HPID")
	read -r nr nc nb nl < <(run "$NP" "$NPID")
	echo "round $i: zerohop $zr req/s ($zc per CPU-s), haproxy $hr req/s ($hc per CPU-s)," \
		"nginx $nr req/s ($nc per CPU-s)" | tee -a "$TMP/out"
	echo "  µs of CPU per request, proxy + backend + h2load: zerohop" \
		"$(awk -v c="$zc" 'BEGIN {printf "%.2f", 1e6 / c}') + $zb + $zl, haproxy" \
		"$(awk -v c="$hc" 'BEGIN {printf "%.2f", 1e6 / c}') + $hb + $hl"
	echo "$(ratio "$zr" "$hr") $(ratio "$zc" "$hc") $(ratio "$zr" "$nr") $(ratio "$zc" "$nc")" \
		>>"$TMP/r"
	echo "$zc $zb $zl $hc $hb $hl" >>"$TMP/cpu"
done
col() { cut -d' ' -f"$1" "$TMP/r"; }
echo "zerohop/haproxy req/s: $(col 1 | median)x ($(col 1 | spread))"
echo "zerohop/haproxy per CPU-second: $(col 2 | median)x ($(col 2 | spread))"
echo "zerohop/nginx req/s: $(col 3 | median)x ($(col 3 | spread))"
echo "zerohop/nginx per CPU-second: $(col 4 | median)x ($(col 4 | spread))"
# The budget: with proxy, backend and h2load on the same CPUs, raw req/s
# is at most CPUs / (their µs per request summed). For zerohop's raw req/s
# to be 1.3x HAProxy's, its own µs must fit in (HAProxy's sum) / 1.3 minus
# what the backend and h2load cost behind it.
cpu() { awk -v k="$1" '{print $k}' "$TMP/cpu" | median; }
awk -v zc="$(cpu 1)" -v zb="$(cpu 2)" -v zl="$(cpu 3)" -v hc="$(cpu 4)" -v hb="$(cpu 5)" -v hl="$(cpu 6)" 'BEGIN {
	z = 1e6 / zc; h = 1e6 / hc
	printf "budget (medians, µs of CPU per request): zerohop %.2f + backend %.2f + h2load %.2f = %.2f; haproxy %.2f + %.2f + %.2f = %.2f\n", z, zb, zl, z + zb + zl, h, hb, hl, h + hb + hl
	printf "budget: raw 1.3x HAProxy needs zerohop <= %.2f µs per request behind this backend and h2load (%.2fx HAProxy'"'"'s per CPU-second); it uses %.2f\n", (h + hb + hl) / 1.3 - zb - zl, h / ((h + hb + hl) / 1.3 - zb - zl), z
}'

[ "${P99:-0}" = 1 ] || exit 0
# p99 at half HAProxy's max rate (header): "p99-in-us" of one timed run
p99() { # PORT RPS_PER_CONNECTION
	rm -f "$TMP/lat"
	h2load -c 4 -m 16 --rps="$2" -D "${P99_SECS:-5}" --log-file="$TMP/lat" \
		"http://127.0.0.1:$1/?size=1024" >/dev/null 2>&1
	awk '$2 != 200 {bad++} {print $3} END {if (bad) print "bad", bad > "/dev/stderr"}' \
		"$TMP/lat" | sort -n | awk '{a[NR] = $1} END {print a[int(NR * 0.99 + 0.5)]}'
}
HMAX=$(sed -n 's/^round [0-9]*: .* haproxy \([0-9]*\) req\/s.*/\1/p' "$TMP/out" | median)
RPS=$(awk -v m="$HMAX" 'BEGIN {printf "%d", m / 2 / 4}')
: >"$TMP/p"
for i in $(seq "${P99_ROUNDS:-3}"); do
	zp=$(p99 "$ZP" "$RPS")
	hp=$(p99 "$HP" "$RPS")
	echo "p99 round $i at $((RPS * 4)) req/s: zerohop $zp us, haproxy $hp us"
	echo "$(ratio "$zp" "$hp")" >>"$TMP/p"
done
echo "zerohop/haproxy p99 at half HAProxy's max ($((RPS * 4)) req/s): $(median <"$TMP/p")x ($(spread <"$TMP/p"))"
