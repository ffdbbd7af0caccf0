#!/usr/bin/env bash
# bench-cap.sh — what the transparent capture into the node L7 proxy costs:
# a client pod asks one ClusterIP for the same echo pod (same node) through
#   l4   a plain Service: connect4 picks the backend, no proxy hop
#   l7   the same pods behind a Service annotated zerohop.io/l7: "true":
#        connect4 redirects to the node proxy (NODE_IP:15001), which routes
#        each request (capture: sock_ops + zh_l7cap_* maps)
# Workloads (client `zerohop bench` in the client pod, server `zerohop echo`):
#   http-ka   HTTP/1.1 keep-alive, 1 KiB responses, 64 connections, max rate
#   http-new  a new connection per request (keep-alive off), 1 KiB, 8 connections
# Contenders interleaved (order alternates every round), PAIRS rounds of SECS
# seconds each; the table gives the median l7/l4 ratio and its spread.
# Usage: scripts/bench-cap.sh [PAIRS=5] [SECS=2]
# Environment: B=build dir (build), LAB (A3), OUT (/tmp/zh-bench-cap).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
ZH=$ROOT/$B/zerohop
PAIRS=${1:-5}
SECS=${2:-2}
LAB=${LAB:-A3}
OUT=${OUT:-/tmp/zh-bench-cap}
[ -x "$ZH" ] || { echo "no $ZH (make B=$B)" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq missing" >&2; exit 1; }
mkdir -p "$OUT"
trap '"$ZH" lab down --lab $LAB >/dev/null 2>&1' EXIT
"$ZH" lab down --lab $LAB >/dev/null 2>&1

cat >"$OUT/m.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: echo, labels: {app: echo}}
spec:
  nodeName: node-a
  containers: [{name: echo, image: mendhak/http-https-echo, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: l4}
spec:
  clusterIP: 10.96.0.91
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: l7, annotations: {zerohop.io/l7: "true"}}
spec:
  clusterIP: 10.96.0.92
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: node-a
  containers: [{name: c, command: ["sleep", "100000"]}]
YAML
"$ZH" lab up --lab $LAB -f "$OUT/m.yaml" >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log"; exit 1; }

declare -A VIP=([l4]=10.96.0.91 [l7]=10.96.0.92)
run() {	# WORKLOAD CONTENDER ROUND -> "req/s p50_seconds"
	local f="$OUT/$1-$2-$3.json" args
	case $1 in
	http-ka) args="-c 64" ;;
	http-new) args="-c 8 --keepalive=false" ;;
	esac
	"$ZH" lab exec --lab $LAB client -- "$ZH" bench $args -t "$SECS" --warmup 500ms --quiet \
		--json "$f" "http://${VIP[$2]}/?size=1024" >/dev/null 2>>"$OUT/bench.err"
	echo "$(jq .ActualQPS "$f") $(jq '.DurationHistogram.Percentiles[] | select(.Percentile==50) | .Value' "$f")"
}
source "$ROOT/scripts/lib/stats.sh"	# median

echo "| workload | l4 req/s | l7 req/s | l7/l4 req/s: median [min–max] | l7/l4 p50 |"
echo "|---|---|---|---|---|"
for w in http-ka http-new; do
	: >"$OUT/$w.rounds"
	for i in $(seq "$PAIRS"); do
		if [ $((i % 2)) -eq 1 ]; then
			read -r q4 p4 < <(run $w l4 $i); read -r q7 p7 < <(run $w l7 $i)
		else
			read -r q7 p7 < <(run $w l7 $i); read -r q4 p4 < <(run $w l4 $i)
		fi
		echo "$q4 $p4 $q7 $p7" >>"$OUT/$w.rounds"
	done
	r=$(awk '{ print $3 / $1 }' "$OUT/$w.rounds" | sort -g)
	printf "| %s | %.0f | %.0f | %.2fx [%.2f–%.2f] | %.2fx |\n" "$w" \
		"$(awk '{ print $1 }' "$OUT/$w.rounds" | median)" \
		"$(awk '{ print $3 }' "$OUT/$w.rounds" | median)" \
		"$(echo "$r" | median)" "$(echo "$r" | head -1)" "$(echo "$r" | tail -1)" \
		"$(awk '{ print $4 / $2 }' "$OUT/$w.rounds" | median)"
done
# Sanity: the l7 runs went through the proxy, the l4 runs did not.
"$ZH" get --lab $LAB stats -o json | jq -c '."node-a" | {connect_translated, connect_l7_redirect}'
