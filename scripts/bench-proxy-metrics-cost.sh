#!/usr/bin/env bash
# bench-proxy-metrics-cost.sh — the node proxy's cost of the Istio request
# metrics (docs/observability.md): one binary, two proxies side by side on
# loopback, one with ZH_PROXY_ISTIO_METRICS=off; wrk -t1 -c64 1 KiB
# keep-alive against each in turn, interleaved (off, on, off, on ...).
# Per pair: req/s on/off, and requests per proxy CPU-second on/off (the
# proxy's utime+stime from /proc over the run: what a loaded machine
# distorts least). Prints each pair and the medians.
# Run in a private network namespace (fixed loopback ports 19700-19703):
#   unshare --net bash -c 'ip link set lo up; scripts/bench-proxy-metrics-cost.sh [PAIRS=9] [DUR=3s]'
# Not part of make check; docs/BENCHMARKS.md quotes it.
set -eu
ZH=${ZH:-$(cd "$(dirname "$0")/.." && pwd)/build/zerohop}
PAIRS=${1:-9}
DUR=${2:-3s}
T=$(mktemp -d)
B=19700
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf $T' EXIT
"$ZH" echo --threads 1 --http 127.0.0.1:$((B + 1)) --tcp 127.0.0.1:0 --udp 127.0.0.1:0 >/dev/null 2>&1 &
PIDS+=($!)
cat >"$T/m.yaml" <<Y
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: $((B + 1))}]}
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
Y
ZH_PROXY_ISTIO_METRICS=off "$ZH" proxy --listen 127.0.0.1:$B --service default/web -f "$T/m.yaml" 2>/dev/null &
OFF=$!
PIDS+=($OFF)
"$ZH" proxy --listen 127.0.0.1:$((B + 2)) --service default/web -f "$T/m.yaml" \
	--stats-addr 127.0.0.1:$((B + 3)) 2>/dev/null &
ON=$!
PIDS+=($ON)
sleep 0.5
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }	# clock ticks
run() { # PORT PID -> "req/s requests-per-cpu-tick"
	local c0 c1 out
	c0=$(cpu "$2")
	out=$(wrk -t1 -c64 -d"$DUR" "http://127.0.0.1:$1/?size=1024")
	c1=$(cpu "$2")
	awk -v c=$((c1 - c0)) '/Requests\/sec/ { r = $2 } /requests in/ { n = $1 }
		END { printf "%s %.1f\n", r, (c > 0 ? n / c : 0) }' <<<"$out"
}
for i in $(seq "$PAIRS"); do
	read -r fo fc <<<"$(run $B $OFF)"
	read -r no nc <<<"$(run $((B + 2)) $ON)"
	awk -v i="$i" -v fo="$fo" -v no="$no" -v fc="$fc" -v nc="$nc" 'BEGIN {
		printf "pair %d: req/s on %s off %s ratio %.3f; req/cpu-tick on %s off %s ratio %.3f\n",
			i, no, fo, no / fo, nc, fc, nc / fc }'
done | tee "$T/pairs"
curl -s "http://127.0.0.1:$((B + 3))/metrics" | grep -q '^istio_requests_total{' ||
	echo "warning: the 'on' proxy shows no istio_requests_total" >&2
for k in 9 16; do	# fields: ratio of req/s, ratio per CPU
	awk -v k=$k '{ print $k + 0 }' "$T/pairs" | sort -n |
		awk -v k=$k '{ v[NR] = $1 } END { printf "%s median %.3f (%.3f-%.3f) over %d pairs\n",
			k == 9 ? "req/s on/off" : "req per CPU on/off", v[int((NR + 1) / 2)], v[1], v[NR], NR }'
done
