#!/usr/bin/env bash
# bench-proxy.sh — the node L7 proxy's benchmarks on loopback, one mode a run.
# Backends are `zerohop echo` (1 thread), 1 KiB responses (?size=1024);
# every process is ours and stopped by its PID; the ten loopback ports used
# are picked free at start (no fixed ports: the mode also runs unchanged in
# a private netns, `unshare --net bash -c 'ip link set lo up; ...'`).
#
#   scripts/bench-proxy.sh [PAIRS=5] [DURATION=5s] [CONNS=64]     (PAIRS=0: memory only)
#     against HAProxy 2.6 (nbthread 1, http-reuse always) and nginx
#     (worker_processes 1, upstream keepalive) as reverse proxies:
#     1. max rate: wrk -t1 -cCONNS, contenders interleaved Z H N Z H N ...;
#        median ratios zerohop/haproxy and zerohop/nginx with min..max spread.
#     2. p99 at a fixed rate of half HAProxy's median max (open loop,
#        coordinated omission corrected: `zerohop bench -qps`), interleaved.
#     3. memory: idle RSS, then RSS with 10,000 idle keep-alive client
#        connections that each completed one request (RLIMIT_NOFILE raised).
#   scripts/bench-proxy.sh idle OLD_ZEROHOP NEW_ZEROHOP [PAIRS=5] [DUR=3s]
#     max req/s of two builds' proxies (wrk -t1 -c64), interleaved old, new:
#     "old new new/old" per pair (the cost of features that are on but idle).
#   scripts/bench-proxy.sh p2c ZEROHOP [PAIRS=5]
#     p99 of round robin / P2C-EWMA with three backends, one of them a
#     Python server 10 ms slower: `zerohop bench -c 8 -qps 150 -t 3s` per
#     policy, interleaved: "rr p2c rr/p2c" per pair.
#   scripts/bench-proxy.sh metrics [PAIRS=9] [DUR=3s]
#     the cost of the Istio request metrics (docs/observability.md): one
#     binary, two proxies, one with ZH_PROXY_ISTIO_METRICS=off; wrk -t1 -c64
#     against each in turn (off, on, ...): req/s on/off and requests per
#     proxy CPU-second on/off (what a loaded machine distorts least).
# Not part of make check; docs/BENCHMARKS.md quotes it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/loopback.sh"
source "$ROOT/scripts/lib/stats.sh"
ZH=${ZH:-$ROOT/build/zerohop}
PY=$(command -v /usr/bin/python3 || command -v python3)
MODE=compare
case ${1:-} in idle | p2c | metrics) MODE=$1; shift ;; esac
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
bench_setup px-bench 23000

echo_start() {	# ZEROHOP PORT: one-thread HTTP echo on 127.0.0.1:PORT
	"$1" echo --threads 1 --http "127.0.0.1:$2" --tcp 127.0.0.1:0 --udp 127.0.0.1:0 >/dev/null 2>&1 &
	PIDS+=($!)
}
web_manifest() {	# PORT: Service web, its one pod on loopback, HTTPRoute / to it
	bench_web_manifest "" "$1" 'apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{group: "", kind: Service, name: web}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: web, port: 80}]'
}
wait_http() {	# PORT...: until each answers (5 s at most)
	for p in "$@"; do
		for _ in $(seq 50); do
			curl -s -o /dev/null "http://127.0.0.1:$p/?size=1024" && break
			sleep 0.1
		done
	done
}
need() { for t in "$@"; do command -v "$t" >/dev/null || { echo "missing $t (make deps; make)" >&2; exit 1; }; done; }

mode_compare() {
PAIRS=${1:-5}
DUR=${2:-5s}
CONNS=${3:-64}
source "$ROOT/scripts/lib/haproxy.sh"
source "$ROOT/scripts/lib/nginx.sh"
need wrk nginx haproxy "$ZH" "$PY"
EP=$((B + 1)); ZP=$B; HP=$((B + 2)); NP=$((B + 3))
echo_start "$ZH" $EP
web_manifest $EP >"$TMP/m.yaml"
"$ZH" proxy --listen "127.0.0.1:$ZP" --service default/web -f "$TMP/m.yaml" 2>"$TMP/zp.err" &
ZPID=$!
PIDS+=($ZPID)
haproxy_cfg "127.0.0.1:$HP" 127.0.0.1:$EP >"$TMP/haproxy.cfg"
haproxy -f "$TMP/haproxy.cfg" -db >/dev/null 2>"$TMP/haproxy.err" &
HPID=$!
PIDS+=($HPID)
nginx_cfg "$TMP" "127.0.0.1:$NP" "127.0.0.1:$EP" >"$TMP/nginx.conf"
nginx -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/nginx-error.log" &
NPID=$!
PIDS+=($NPID)
wait_http $ZP $HP $NP

rps() { # PORT PID → "requests/s requests-per-proxy-CPU-second"
	local t0 t1 r
	t0=$(proc_ticks "$2")
	r=$(wrk -t1 -c"$CONNS" -d"$DUR" "http://127.0.0.1:$1/?size=1024" |
		awk '/^Requests\/sec/ {print $2}')
	t1=$(proc_ticks "$2")
	awk -v r="$r" -v d="${DUR%s}" -v c=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
		'BEGIN {printf "%s %.0f\n", r, (c > 0 ? r * d / (c / hz) : 0)}'
}

if [ "$PAIRS" -gt 0 ]; then
echo "== max rate: wrk -t1 -c$CONNS -d$DUR /?size=1024, interleaved zerohop haproxy nginx x$PAIRS"
echo "   (each: requests/s, requests per CPU-second of the proxy process)"
: >"$TMP/rh"; : >"$TMP/rn"; : >"$TMP/h"; : >"$TMP/ch"; : >"$TMP/cn"
for i in $(seq "$PAIRS"); do
	read -r z zc < <(rps $ZP $ZPID); read -r h hc < <(rps $HP $HPID)
	read -r n nc < <(rps $NP $NPID)
	echo "pair $i: zerohop $z ($zc/cpu-s)  haproxy $h ($hc/cpu-s)  nginx $n ($nc/cpu-s)"
	echo "$h" >>"$TMP/h"
	ratio "$z" "$h" >>"$TMP/rh"
	ratio "$z" "$n" >>"$TMP/rn"
	ratio "$zc" "$hc" >>"$TMP/ch"
	ratio "$zc" "$nc" >>"$TMP/cn"
done
echo "req/s zerohop/haproxy: median $(median <"$TMP/rh") (spread $(spread <"$TMP/rh"))"
echo "req/s zerohop/nginx:   median $(median <"$TMP/rn") (spread $(spread <"$TMP/rn"))"
echo "req per proxy CPU-s zerohop/haproxy: median $(median <"$TMP/ch") (spread $(spread <"$TMP/ch"))"
echo "req per proxy CPU-s zerohop/nginx:   median $(median <"$TMP/cn") (spread $(spread <"$TMP/cn"))"

HALF=$(median <"$TMP/h" | awk '{printf "%d", $1 / 2}')
echo "== p99 at $HALF req/s (half of HAProxy's median max), zerohop bench -c $CONNS -qps $HALF -t $DUR, interleaved x$PAIRS"
p99() { # PORT → p99 in ms
	"$ZH" bench -c "$CONNS" -qps "$HALF" --spin 0 -t "$DUR" --warmup 1s --quiet --json "$TMP/j.json" \
		"http://127.0.0.1:$1/?size=1024" >/dev/null 2>&1
	"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1]))
print("%.3f" % (1000 * [p["Value"] for p in j["DurationHistogram"]["Percentiles"] if p["Percentile"] == 99][0]))' "$TMP/j.json"
}
: >"$TMP/rp"
for i in $(seq "$PAIRS"); do
	z=$(p99 $ZP); h=$(p99 $HP)
	echo "pair $i: p99 zerohop ${z} ms  haproxy ${h} ms"
	ratio "$z" "$h" >>"$TMP/rp"
done
echo "p99 zerohop/haproxy: median $(median <"$TMP/rp") (spread $(spread <"$TMP/rp"))"
fi

echo "== memory (zerohop proxy)"
rss() { awk '/VmRSS/ {print $2}' /proc/$ZPID/status; }
echo "RSS after the load runs, idle: $(rss) KiB"
"$PY" - "$ZP" "$ZPID" <<'PY'
import socket, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
base = rss(); socks = []
req = b"GET /?size=16 HTTP/1.1\r\nHost: x\r\n\r\n"
for i in range(10000):
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(req); socks.append(s)
for s in socks:  # read each whole response (Content-Length framed)
    d = b""
    while True:
        h = d.find(b"\r\n\r\n")
        if h >= 0:
            cl = [l for l in d[:h].split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if len(d) >= h + 4 + (int(cl[0].split(b":")[1]) if cl else 0): break
        x = s.recv(4096)
        if not x: sys.exit("connection closed by the proxy")
        d += x
time.sleep(0.5)
full = rss()
print(f"RSS idle before: {base} KiB; with 10000 idle keep-alive clients: {full} KiB; "
      f"per idle connection: {(full - base) * 1024 / 10000:.0f} bytes")
PY
}

mode_idle() {
[ $# -ge 2 ] || { echo "usage: $0 idle OLD_ZEROHOP NEW_ZEROHOP [PAIRS] [DUR]" >&2; exit 2; }
local OLD=$1 NEW=$2 PAIRS=${3:-5} DUR=${4:-3s} EP=$((B + 1))
need wrk "$OLD" "$NEW"
echo_start "$NEW" $EP
web_manifest $EP >"$TMP/m.yaml"
"$OLD" proxy --listen 127.0.0.1:$B --service default/web -f "$TMP/m.yaml" 2>/dev/null & PIDS+=($!)
"$NEW" proxy --listen 127.0.0.1:$((B + 2)) --service default/web -f "$TMP/m.yaml" 2>/dev/null & PIDS+=($!)
wait_http $B $((B + 2))
rate() { wrk -t1 -c64 -d"$DUR" "http://127.0.0.1:$1/?size=1024" | awk '/Requests\/sec/ { print $2 }'; }
for i in $(seq "$PAIRS"); do
	o=$(rate $B); n=$(rate $((B + 2)))
	echo "$o $n $(ratio "$n" "$o")"
done
}

mode_p2c() {
[ $# -ge 1 ] || { echo "usage: $0 p2c ZEROHOP [PAIRS]" >&2; exit 2; }
local ZH=$1 PAIRS=${2:-5}
need "$ZH" "$PY"
for k in 1 2; do "$ZH" echo --http 127.0.0.1:$((B + k)) --name f$k >/dev/null 2>&1 & PIDS+=($!); done
"$PY" "$ROOT/tests/tools/http_backend.py" --delay 0.010 --body $'slow\n' $((B + 3)) & PIDS+=($!)
{
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80, targetPort: http}]}\n'
for k in 1 2 3; do printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: w%s, labels: {app: web}}\nspec: {nodeName: n, containers: [{name: c, ports: [{name: http, containerPort: %s}]}]}\nstatus: {podIP: 127.0.0.1, phase: Running}\n' $k $((B + k)); done
for r in "p2c /p2c {}" "rr /rr {zerohop.io/lb-policy: round-robin}"; do set -- $r
printf -- '---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s, annotations: %s %s}\nspec:\n  parentRefs: [{group: "", kind: Service, name: web, port: 80}]\n  rules:\n  - matches: [{path: {type: PathPrefix, value: %s}}]\n    backendRefs: [{name: web, port: 80}]\n' $1 $3 "${4:-}" $2; done
} >"$TMP/m.yaml"
"$ZH" proxy --listen 127.0.0.1:$B --stats-addr 127.0.0.1:$((B + 9)) --service default/web -f "$TMP/m.yaml" 2>"$TMP/px.err" & PIDS+=($!)
sleep 0.7
p99() { "$ZH" bench -c 8 -qps 150 -t 3s --quiet --json "$TMP/p.json" "http://127.0.0.1:$B$1" >/dev/null
	"$PY" -c 'import json,sys; print([x["Value"] for x in json.load(open(sys.argv[1]))["DurationHistogram"]["Percentiles"] if x["Percentile"]==99][0])' "$TMP/p.json"; }
for i in $(seq "$PAIRS"); do
	r=$(p99 "/rr/x?delay=1ms"); p=$(p99 "/p2c/x?delay=1ms")
	echo "$r $p $(awk -v r="$r" -v p="$p" 'BEGIN { printf "%.2f", r / p }')"
done
}

mode_metrics() {
local PAIRS=${1:-9} DUR=${2:-3s} OFF ON
need wrk "$ZH"
echo_start "$ZH" $((B + 1))
web_manifest $((B + 1)) >"$TMP/m.yaml"
ZH_PROXY_ISTIO_METRICS=off "$ZH" proxy --listen 127.0.0.1:$B --service default/web -f "$TMP/m.yaml" 2>/dev/null &
OFF=$!
PIDS+=($OFF)
"$ZH" proxy --listen 127.0.0.1:$((B + 2)) --service default/web -f "$TMP/m.yaml" \
	--stats-addr 127.0.0.1:$((B + 3)) 2>/dev/null &
ON=$!
PIDS+=($ON)
wait_http $B $((B + 2))
run() { # PORT PID -> "req/s requests-per-cpu-tick"
	local c0 c1 out
	c0=$(proc_ticks "$2")
	out=$(wrk -t1 -c64 -d"$DUR" "http://127.0.0.1:$1/?size=1024")
	c1=$(proc_ticks "$2")
	awk -v c=$((c1 - c0)) '/Requests\/sec/ { r = $2 } /requests in/ { n = $1 }
		END { printf "%s %.1f\n", r, (c > 0 ? n / c : 0) }' <<<"$out"
}
for i in $(seq "$PAIRS"); do
	read -r fo fc <<<"$(run $B $OFF)"
	read -r no nc <<<"$(run $((B + 2)) $ON)"
	awk -v i="$i" -v fo="$fo" -v no="$no" -v fc="$fc" -v nc="$nc" 'BEGIN {
		printf "pair %d: req/s on %s off %s ratio %.3f; req/cpu-tick on %s off %s ratio %.3f\n",
			i, no, fo, no / fo, nc, fc, nc / fc }'
done | tee "$TMP/pairs"
curl -s "http://127.0.0.1:$((B + 3))/metrics" >"$TMP/metrics" || true
grep -q '^istio_requests_total{' "$TMP/metrics" ||
	echo "warning: the 'on' proxy shows no istio_requests_total" >&2
for k in 9 16; do	# fields: ratio of req/s, ratio per CPU
	awk -v k=$k '{ print $k + 0 }' "$TMP/pairs" | sort -n |
		awk -v k=$k '{ v[NR] = $1 } END { printf "%s median %.3f (%.3f-%.3f) over %d pairs\n",
			k == 9 ? "req/s on/off" : "req per CPU on/off", v[int((NR + 1) / 2)], v[1], v[NR], NR }'
done
}

mode_"$MODE" "$@"
