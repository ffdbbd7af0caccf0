#!/usr/bin/env bash
# bench-proxy.sh — the node L7 proxy against HAProxy 2.6 (nbthread 1,
# http-reuse always) and nginx (worker_processes 1, upstream keepalive) as
# reverse proxies, all on loopback in the same place: client → proxy →
# `zerohop echo` (1 thread), 1 KiB responses (?size=1024), CONNS connections.
#
#   scripts/bench-proxy.sh [PAIRS=5] [DURATION=5s] [CONNS=64]     (PAIRS=0: memory only)
#
# 1. max rate: wrk -t1 -cCONNS, contenders interleaved Z H N Z H N ...;
#    median ratios zerohop/haproxy and zerohop/nginx with min..max spread.
# 2. p99 at a fixed rate of half HAProxy's median max (open loop, coordinated
#    omission corrected: `zerohop bench -qps`), interleaved Z H, PAIRS pairs.
# 3. memory: zerohop proxy idle RSS, then RSS with 10,000 idle keep-alive
#    client connections that each completed one request (RLIMIT_NOFILE raised).
# Every process is ours and stopped by its PID.
set -euo pipefail
PAIRS=${1:-5}
DUR=${2:-5s}
CONNS=${3:-64}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/haproxy.sh"
source "$ROOT/scripts/lib/nginx.sh"
source "$ROOT/scripts/lib/stats.sh"
ZH=${ZH:-$ROOT/build/zerohop}
PY=$(command -v /usr/bin/python3 || command -v python3)
for t in wrk nginx haproxy "$ZH" "$PY"; do
	command -v "$t" >/dev/null || { echo "missing $t (make deps; make)" >&2; exit 1; }
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
TMP=$(mktemp -d /tmp/zh-px-bench.XXXXXX)
for i in $(seq 0 30); do
	B=$((23000 + ($$ + i * 37) % 2000 / 10 * 10))
	[ -z "$(ss -Htln "( sport >= :$B and sport <= :$((B + 9)) )" 2>/dev/null)" ] && break
done
EP=$((B + 1)); ZP=$B; HP=$((B + 2)); NP=$((B + 3))
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT

"$ZH" echo --threads 1 --http "127.0.0.1:$EP" --tcp 127.0.0.1:0 --udp 127.0.0.1:0 >/dev/null 2>&1 &
PIDS+=($!)
cat >"$TMP/m.yaml" <<YAML
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: $EP}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec: {nodeName: node-a, containers: [{name: c}]}
status: {podIP: 127.0.0.1, phase: Running}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{group: "", kind: Service, name: web}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: web, port: 80}]
YAML
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
for p in $ZP $HP $NP; do
	for i in $(seq 50); do
		curl -s -o /dev/null "http://127.0.0.1:$p/?size=1024" && break
		sleep 0.1
	done
done

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
