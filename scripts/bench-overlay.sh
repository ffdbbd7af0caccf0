#!/usr/bin/env bash
# bench-overlay.sh — the Calico vs Flannel experiment in the lab: iperf3 TCP
# throughput between two pods on different nodes, plain L3 routing (no
# encapsulation) vs VXLAN overlay, same topology, same pods, same client.
#
#   scripts/bench-overlay.sh [--pairs N] [--time SECONDS] [--json FILE] [--zerohop PATH]
#
# Two labs are up at once (bov-l3 and bov-vx, mesh off so only the network
# differs); runs are interleaved L3, VXLAN, L3, VXLAN ... (N pairs, default 5,
# 3 s each) and the report gives each run, the VXLAN/L3 ratio per pair, and
# the median ratio with its spread. Traffic stays inside the lab namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=5
TIME=3
JSON=""
ZH=${ZH:-$PWD/build/zerohop}
while [ $# -gt 0 ]; do
	case "$1" in
	--pairs) PAIRS=$2; shift 2 ;;
	--time) TIME=$2; shift 2 ;;
	--json) JSON=$2; shift 2 ;;
	--zerohop) ZH=$2; shift 2 ;;
	*) echo "usage: $0 [--pairs N] [--time SECONDS] [--json FILE] [--zerohop PATH]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-overlay: needs root" >&2; exit 1; }
for c in iperf3 jq; do command -v $c >/dev/null || { echo "bench-overlay: $c missing (make deps)" >&2; exit 1; }; done
[ -x "$ZH" ] || { echo "bench-overlay: $ZH not built (make)" >&2; exit 1; }
[ "$PAIRS" -ge 1 ] && [ "$PAIRS" -le 50 ] && [ "$TIME" -ge 1 ] && [ "$TIME" -le 60 ] ||
	{ echo "bench-overlay: --pairs 1..50, --time 1..60" >&2; exit 2; }

L3=bov-l3
VX=bov-vx
TMP=$(mktemp -d /tmp/zh-bench-overlay.XXXXXX)
cleanup() { "$ZH" lab down --lab $L3 >/dev/null 2>&1 || true; "$ZH" lab down --lab $VX >/dev/null 2>&1 || true; rm -rf "$TMP"; }
trap cleanup EXIT

cat >"$TMP/lab.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: iperf-server
spec:
  nodeName: node-b
  containers:
  - name: iperf3
    image: networkstatic/iperf3
    command: ["iperf3", "-s"]
    ports:
    - containerPort: 5201
---
apiVersion: v1
kind: Pod
metadata:
  name: iperf-client
spec:
  nodeName: node-a
  containers:
  - name: sleep
    image: busybox
    command: ["sleep", "1000000"]
EOF
"$ZH" lab up --lab $L3 --no-mesh -f "$TMP/lab.yaml" >&2
"$ZH" lab up --lab $VX --no-mesh --overlay vxlan -f "$TMP/lab.yaml" >&2
server_ip() { "$ZH" lab status --lab "$1" -o json | jq -r '.pods[] | select(.name=="iperf-server") | .ip'; }
IP_L3=$(server_ip $L3)
IP_VX=$(server_ip $VX)

run() { # lab ip -> "Gbit/s-received cpu%" (cpu = iperf3 sender + receiver, % of one core)
	"$ZH" lab exec --lab "$1" iperf-client -- iperf3 -c "$2" -t "$TIME" -J >"$TMP/run.json"
	jq -r '"\(.end.sum_received.bits_per_second / 1e9) \(.end.cpu_utilization_percent.host_total + .end.cpu_utilization_percent.remote_total)"' "$TMP/run.json"
}
run $L3 "$IP_L3" >/dev/null	# warm-up (ARP, page cache), not counted
run $VX "$IP_VX" >/dev/null
printf "%-5s %10s %10s %8s %8s %8s %11s\n" pair "L3 Gbit/s" "VX Gbit/s" ratio "L3 cpu%" "VX cpu%" "Gbit/cpu VX/L3"
: >"$TMP/pairs"
for i in $(seq "$PAIRS"); do
	read -r a ac < <(run $L3 "$IP_L3")
	read -r b bc < <(run $VX "$IP_VX")
	r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')
	e=$(awk -v a="$a" -v b="$b" -v ac="$ac" -v bc="$bc" 'BEGIN { printf "%.3f", (b / bc) / (a / ac) }')
	printf "%-5s %10.2f %10.2f %8s %8.0f %8.0f %11s\n" "$i" "$a" "$b" "$r" "$ac" "$bc" "$e"
	echo "$a $b $r $e" >>"$TMP/pairs"
done
# Median of one column (mawk has no asort).
median() { awk -v c="$1" '{ print $c }' "$TMP/pairs" | sort -g |
	awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
MED=$(median 3)
MIN=$(awk '{ print $3 }' "$TMP/pairs" | sort -g | head -1)
MAX=$(awk '{ print $3 }' "$TMP/pairs" | sort -g | tail -1)
L3MED=$(median 1)
VXMED=$(median 2)
EFF=$(median 4)
echo "VXLAN / plain L3 throughput: median ratio $MED (min $MIN, max $MAX) over $PAIRS interleaved pairs of ${TIME}s iperf3 runs; medians L3 $L3MED Gbit/s, VXLAN $VXMED Gbit/s; throughput per iperf3 CPU, VXLAN / L3: median $EFF"
if [ -n "$JSON" ]; then
	jq -n --argjson pairs "$(awk '{ printf "%s[%s,%s,%s,%s]", (NR > 1 ? "," : ""), $1, $2, $3, $4 }' "$TMP/pairs" | sed 's/^/[/; s/$/]/')" \
		--arg med "$MED" --arg min "$MIN" --arg max "$MAX" --arg t "$TIME" --arg eff "$EFF" \
		'{experiment: "iperf3 pod-to-pod across nodes, VXLAN vs plain L3",
		  seconds_per_run: ($t | tonumber),
		  pairs_gbps_l3_vxlan_ratio_cpuefficiency: $pairs,
		  median_cpu_efficiency_ratio: ($eff | tonumber),
		  median_ratio: ($med | tonumber), min_ratio: ($min | tonumber), max_ratio: ($max | tonumber)}' >"$JSON"
fi
