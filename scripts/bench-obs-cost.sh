#!/usr/bin/env bash
# bench-obs-cost.sh — the cost of the L4 signals (bpf/obs.bpf.c, docs/
# observability.md): new connections per second to a Service (keep-alive
# off, the Romana method) with the signals on vs off, and same-node
# keep-alive requests/s (the short-circuit path) on vs off. Two labs side by
# side, the same topology (client pod on node-a; echo pods on node-b for the
# cross-node Service, on node-a for the same-node one): Ob with the agents'
# metrics on, Of with ZH_AGENT_METRICS=off. Interleaved on, off, off, on,
# on, off ... (the order alternates per pair) PAIRS times; prints each pair's ratio on/off and the median,
# and the same for requests per busy CPU-second of the machine and per
# CPU-second of the lab's own cgroup (pods, agents, proxies: what other
# helpers' load on the shared machine does not add to; the cost as efficiency).
#   usage: scripts/bench-obs-cost.sh [PAIRS=7] [SECONDS=3]
#   env: ZH (binary), C (connections, 8), LAB_ON / LAB_OFF (lab names, Ob / Of),
#        ONLY=new-conn|same-node-keepalive (one of the two measurements),
#        ZH_OFF (the binary of the second lab's agents; ZH) and METRICS_OFF
#        (its signals: off) — ZH_OFF=OLD METRICS_OFF=on compares two builds
#        with the signals on in both (the ratio is then ZH / ZH_OFF)
# Not part of make check; docs/BENCHMARKS.md quotes it.
set -u
ZH=${ZH:-$(cd "$(dirname "$0")/.." && pwd)/build/zerohop}
PAIRS=${1:-7}
SECS=${2:-3}
C=${C:-8}
LON=${LAB_ON:-Ob}
LOFF=${LAB_OFF:-Of}
TMP=$(mktemp -d /tmp/zh-bench-obs.XXXXXX)
chmod 755 "$TMP"
cleanup() { "$ZH" lab down --lab $LON >/dev/null 2>&1; "${ZH_OFF:-$ZH}" lab down --lab $LOFF >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT

cat >"$TMP/app.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: far}
spec:
  replicas: 1
  selector: {matchLabels: {app: far}}
  template:
    metadata: {labels: {app: far}}
    spec:
      nodeName: node-b
      containers: [{name: echo, command: ["$ZH", "echo", "--http", "8080", "--tcp", "0", "--udp", "0"], ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: near}
spec:
  replicas: 1
  selector: {matchLabels: {app: near}}
  template:
    metadata: {labels: {app: near}}
    spec:
      nodeName: node-a
      containers: [{name: echo, command: ["$ZH", "echo", "--http", "8080", "--tcp", "0", "--udp", "0"], ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: far}
spec: {clusterIP: 10.96.0.90, selector: {app: far}, ports: [{port: 80, targetPort: http}]}
---
apiVersion: v1
kind: Service
metadata: {name: near}
spec: {clusterIP: 10.96.0.91, selector: {app: near}, ports: [{port: 80, targetPort: http}]}
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: node-a
  containers: [{name: c, command: ["sleep", "100000"]}]
YAML
"$ZH" lab up --lab $LON -f "$TMP/app.yaml" >/dev/null || exit 1
MOFF=${METRICS_OFF:-off}
ZH_AGENT_METRICS=$MOFF "${ZH_OFF:-$ZH}" lab up --lab $LOFF -f "$TMP/app.yaml" >/dev/null || exit 1
[ -e /sys/fs/bpf/zerohop/$LON/node-a/obs_link_sockops ] || { echo "signals not on in $LON"; exit 1; }
if [ "$MOFF" = off ]; then
	[ ! -e /sys/fs/bpf/zerohop/$LOFF/node-a/obs_link_sockops ] || { echo "signals not off in $LOFF"; exit 1; }
fi

busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }	# user nice system irq softirq (no idle, iowait, steal)
# the lab's own CPU, microseconds (cgroup v2 usage of zerohop-LAB)
labcpu() { local d; for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do
	[ -f "$d/zerohop-$1/cpu.stat" ] && { awk '$1 == "usage_usec" { print $2 }' "$d/zerohop-$1/cpu.stat"; return; }; done; echo 0; }
run() {	# LAB URL KEEPALIVE -> "req/s CPU-us-per-request lab-CPU-us-per-request"
	local b0 b1 l0 l1
	b0=$(busy); l0=$(labcpu "$1")
	"$ZH" lab exec --lab "$1" client -- "$ZH" bench -c "$C" -t "${SECS}s" --warmup 500ms \
		--keepalive="$3" --json "$TMP/r.json" "$2" >/dev/null 2>&1
	b1=$(busy); l1=$(labcpu "$1")
	# the lab's CPU includes the warm-up: divided by everything bench sent
	jq -r --argjson j $((b1 - b0)) --argjson l $((l1 - l0)) --argjson hz "$(getconf CLK_TCK)" \
		'"\(.ActualQPS) \($j / $hz * 1e6 / (.DurationHistogram.Count + 0.001)) \($l / (.DurationHistogram.Count + 0.001))"' "$TMP/r.json"
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for t in "new-conn http://10.96.0.90/ false" "same-node-keepalive http://10.96.0.91/ true"; do
	set -- $t
	[ -n "${ONLY:-}" ] && [ "$ONLY" != "$1" ] && continue
	: >"$TMP/ratios"
	: >"$TMP/cratios"
	: >"$TMP/lratios"
	for i in $(seq "$PAIRS"); do
		# the order alternates, so neither side always runs right after
		# a lab-wide warm-up or on the other's leftovers (TIME_WAIT, caches)
		if [ $((i % 2)) -eq 1 ]; then
			read on con lon <<<"$(run $LON "$2" "$3")"
			read off coff loff <<<"$(run $LOFF "$2" "$3")"
		else
			read off coff loff <<<"$(run $LOFF "$2" "$3")"
			read on con lon <<<"$(run $LON "$2" "$3")"
		fi
		r=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3f", a / b }')
		# CPU efficiency: requests per CPU-second, on / off (steal and
		# idle excluded, so a noisy neighbour moves it less than req/s)
		cr=$(awk -v a="$con" -v b="$coff" 'BEGIN { printf "%.3f", b / a }')
		lr=$(awk -v a="$lon" -v b="$loff" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')
		echo "$1 pair $i: on $on off $off ratio $r; CPU us/request on $con off $coff, efficiency $cr; lab CPU us/request on $lon off $loff, efficiency $lr"
		echo "$r" >>"$TMP/ratios"
		echo "$cr" >>"$TMP/cratios"
		echo "$lr" >>"$TMP/lratios"
	done
	echo "$1: median on/off $(median <"$TMP/ratios") (min $(sort -g "$TMP/ratios" | head -1), max $(sort -g "$TMP/ratios" | tail -1)), $PAIRS pairs"
	echo "$1: requests per CPU-second, median on/off $(median <"$TMP/cratios") (min $(sort -g "$TMP/cratios" | head -1), max $(sort -g "$TMP/cratios" | tail -1))"
	echo "$1: requests per lab CPU-second, median on/off $(median <"$TMP/lratios") (min $(sort -g "$TMP/lratios" | head -1), max $(sort -g "$TMP/lratios" | tail -1))"
done
