#!/usr/bin/env bash
# bench-accel.sh — same-node short-circuit (sock_ops + sk_msg), acceleration
# ON vs OFF, interleaved in one run (ON OFF OFF ON ON OFF ...), median of
# PAIRS ratios, in one lab (2 nodes, the agent on):
#   tcp-pod    TCP echo 1 KiB, 64 connections, max rate, pod -> pod same node
#   tcp-svc    same, pod -> Service ClusterIP (backend on the same node)
#   http-pod   HTTP/1.1 keep-alive, 1 KiB responses, 64 connections, max rate
#   tcp-cross  TCP echo 1 KiB x 64, pod -> pod on the other node (must be >= 0.98)
# Client `zerohop bench`, server `zerohop echo` (one thread each).
# Usage: scripts/bench-accel.sh [PAIRS=5] [SECS=3]   (B=build dir, default build)
# Output: a markdown table on stdout; raw JSON in $OUT (default /tmp/zhS-bench).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
ZH=$ROOT/$B/zerohop
CTL=$ROOT/$B/tests/tools/accel_ctl
PAIRS=${1:-5}
SECS=${2:-3}
LAB=${LAB:-S43}
OUT=${OUT:-/tmp/zhS-bench}
WORKLOADS=${WORKLOADS:-"tcp-pod tcp-svc http-pod tcp-cross"}
mkdir -p "$OUT"
[ -x "$ZH" ] && [ -x "$CTL" ] || { echo "build first: make B=$B" >&2; exit 1; }

cleanup() { "$ZH" lab down --lab $LAB >/dev/null 2>&1; }
trap cleanup EXIT INT TERM
cleanup

cat > "$OUT/app.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: echo-a, labels: {app: echo-a}}
spec:
  nodeName: node-a
  containers:
    - name: e
      command: ["$ZH", "echo", "--tcp", "8078", "--http", "8080"]
---
apiVersion: v1
kind: Pod
metadata: {name: echo-b, labels: {app: echo-b}}
spec:
  nodeName: node-b
  containers:
    - name: e
      command: ["$ZH", "echo", "--tcp", "8078", "--http", "8080"]
---
apiVersion: v1
kind: Pod
metadata: {name: cli}
spec:
  nodeName: node-a
  containers:
    - name: c
      command: ["sleep", "100000"]
---
apiVersion: v1
kind: Service
metadata: {name: echo-a}
spec:
  selector: {app: echo-a}
  ports:
    - {name: tcp, port: 8078}
    - {name: http, port: 8080}
YAML
"$ZH" lab up --lab $LAB --accel on -f "$OUT/app.yaml" >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log"; exit 1; }
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
CGROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG=${CGROOT:-/run/zerohop/cgroup2}/zerohop-$LAB/node-a
pods=$("$ZH" get --lab $LAB pods -o json)
ip_of() { echo "$pods" | jq -r ".[] | select(.name==\"$1\") | .ip"; }
LOCAL_IPS=$(echo "$pods" | jq -r '.[] | select(.node=="node-a") | .ip')
VIP=$("$ZH" get --lab $LAB services -o json | jq -r '.[] | select(.name=="echo-a") | .clusterIP')
A=$(ip_of echo-a); Bip=$(ip_of echo-b)
for _ in $(seq 50); do [ -e "$PIN/accel_sockops_link" ] && break; sleep 0.1; done

accel() {
	if [ "$1" = on ]; then "$CTL" on "$CG" "$PIN" $LOCAL_IPS; else "$CTL" off "$PIN"; fi
}
target() {
	case $1 in
	tcp-pod) echo "tcp://$A:8078" ;;
	tcp-svc) echo "tcp://$VIP:8078" ;;
	http-pod) echo "http://$A:8080/?size=1024" ;;
	tcp-cross) echo "tcp://$Bip:8078" ;;
	esac
}
run() {	# WORKLOAD MODE I
	local f="$OUT/$1-$2-$3.json"
	accel "$2" || exit 1
	"$ZH" lab exec --lab $LAB cli -- "$ZH" bench -c 64 -t "${SECS}s" --warmup 500ms \
		--payload-size 1024 --quiet --json "$f" "$(target "$1")" >/dev/null 2>&1
	echo "$(jq .ActualQPS "$f") $(jq '.DurationHistogram.Percentiles[] | select(.Percentile==50) | .Value' "$f")"
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "| workload | ON req/s (median) | OFF req/s (median) | ON/OFF req/s: median [min–max] of $PAIRS pairs | p50 ON/OFF: median |"
echo "|---|---|---|---|---|"
for w in $WORKLOADS; do
	: >"$OUT/$w.pairs"
	for i in $(seq "$PAIRS"); do
		# ABBA order: odd pairs ON first, even pairs OFF first, so a drift
		# in machine load does not favour one side.
		if [ $((i % 2)) = 1 ]; then
			read -r qon pon < <(run "$w" on "$i")
			read -r qoff poff < <(run "$w" off "$i")
		else
			read -r qoff poff < <(run "$w" off "$i")
			read -r qon pon < <(run "$w" on "$i")
		fi
		echo "$qon $qoff $pon $poff" >>"$OUT/$w.pairs"
	done
	r=$(awk '{ print $1 / $2 }' "$OUT/$w.pairs" | median)
	rmin=$(awk '{ print $1 / $2 }' "$OUT/$w.pairs" | sort -g | head -1)
	rmax=$(awk '{ print $1 / $2 }' "$OUT/$w.pairs" | sort -g | tail -1)
	pr=$(awk '{ print $3 / $4 }' "$OUT/$w.pairs" | median)
	qon=$(awk '{ print $1 }' "$OUT/$w.pairs" | median)
	qoff=$(awk '{ print $2 }' "$OUT/$w.pairs" | median)
	printf "| %s | %.0f | %.0f | %.2fx [%.2f–%.2f] | %.2f |\n" "$w" "$qon" "$qoff" "$r" "$rmin" "$rmax" "$pr"
done
"$CTL" stats "$PIN" | tr '\n' ' ' | sed 's/^/counters after the run: /'; echo
