#!/usr/bin/env bash
# bench-connrate.sh — new connections per second to a Service (keep-alive off,
# 1 KiB responses: the Romana method), zerohop connect-time LB vs nftables
# DNAT (kube-proxy style) vs the pod IP directly, with 10, 1,000 and 10,000
# Services in the cluster. Two labs side by side (Ab: zerohop, An: nft), the
# same topology: client pod on node-a, one echo server pod on node-b (cross
# node, so the same-node acceleration plays no part). Contenders interleaved
# direct, zerohop, nft, ... PAIRS times per size; prints the median ratios.
#   usage: scripts/bench-connrate.sh [PAIRS=5] [SECONDS=3] [SIZES="10 1000 10000"]
#   env: ZH (binary), C (connections, 8), LAB_B / LAB_N (lab names, Ab / An)
# Before the rounds of each size it waits until every agent of both labs has
# synced the current state (the nft agents need ~90 s at 10,000 Services on
# 2 CPUs) and afterwards prints how many agent syncs ran during the rounds.
# Not part of make check (it takes minutes); docs/benchmarks/log/agent.md quotes it.
set -u
ZH=${ZH:-$(cd "$(dirname "$0")/.." && pwd)/build/zerohop}
PAIRS=${1:-5}
SECS=${2:-3}
SIZES=${3:-"10 1000 10000"}
C=${C:-8}
LB=${LAB_B:-Ab}	# lab names (override to run beside someone else's run)
LN=${LAB_N:-An}
TMP=$(mktemp -d /tmp/zh-bench-connrate.XXXXXX)
cleanup() { "$ZH" lab down --lab $LB >/dev/null 2>&1; "$ZH" lab down --lab $LN >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT

cat > "$TMP/app.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: srv}
spec:
  replicas: 1
  selector: {matchLabels: {app: srv}}
  template:
    metadata: {labels: {app: srv}}
    spec:
      nodeName: node-b
      containers:
        - name: echo
          command: ["$ZH", "echo", "--http", "8080", "--tcp", "0", "--udp", "0"]
          ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: srv}
spec:
  selector: {app: srv}
  ports: [{port: 80, targetPort: http}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: node-a
  containers:
    - name: c
      command: ["sleep", "100000"]
YAML
"$ZH" lab up --lab $LB -f "$TMP/app.yaml" >/dev/null || exit 1
"$ZH" lab up --lab $LN --service-proxy nft -f "$TMP/app.yaml" >/dev/null || exit 1

fillers() {	# N: N-1 extra Services (the srv Service makes N), each with the server as endpoint
	python3 - "$1" <<'PY'
import sys
for i in range(int(sys.argv[1]) - 1):
    print("apiVersion: v1\nkind: Service\nmetadata: {name: f%d}\nspec:\n  selector: {app: srv}\n  ports: [{port: 80, targetPort: http}]\n---" % i)
PY
}
run() {	# LAB URL OUT
	"$ZH" lab exec --lab "$1" client -- "$ZH" bench --keepalive=false -c $C -t ${SECS}s --quiet \
		--json "$3" "$2" >/dev/null 2>&1
	jq .ActualQPS "$3"
}
# Wait until every agent of lab $1 has synced the state's current generation
# (its log says "agent: generation N:" with N >= the state's). Without this
# the rounds at 10,000 Services ran while the nft lab's agents were still in
# `nft -f` (over a minute of CPU each on 2 cores): every contender starved.
synced() {
	local gen t0=$SECONDS
	gen=$(cat /run/zerohop/$1/state/generation)
	while :; do
		local ok=1 f
		for f in /run/zerohop/$1/nodes/*/agent.log; do
			[ "$(grep -o 'agent: generation [0-9]*:' "$f" | tr -dc '0-9\n' | sort -n | tail -n 1)" -ge "$gen" ] 2>/dev/null || ok=0
		done
		[ $ok = 1 ] && break
		[ $((SECONDS - t0)) -gt 600 ] && { echo "# $1: agents not synced after 600 s" >&2; break; }
		sleep 0.5
	done
	echo $((SECONDS - t0))
}
syncs() { cat /run/zerohop/$LB/nodes/*/agent.log /run/zerohop/$LN/nodes/*/agent.log 2>/dev/null | grep -c 'agent: generation'; }
vip() { "$ZH" get --lab "$1" services -o json | jq -r '.[] | select(.name=="srv") | .clusterIP'; }
podip() { "$ZH" get --lab "$1" pods -o json | jq -r '.[] | select(.name | startswith("srv-")) | .ip'; }

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $PAIRS rounds x ${SECS}s, $C connections, keep-alive off, 1 KiB"
printf "%-8s %-10s %-10s %-10s %-16s %-16s\n" services direct zerohop nft "zerohop/direct" "nft/direct"
for n in $SIZES; do
	fillers "$n" > "$TMP/fill.yaml"
	if [ "$n" -gt 1 ]; then
		"$ZH" apply --lab $LB -f "$TMP/fill.yaml" >/dev/null || exit 1
		"$ZH" apply --lab $LN -f "$TMP/fill.yaml" >/dev/null || exit 1
	fi
	wb=$(synced $LB) wn=$(synced $LN)
	echo "# $n services: agents synced after ${wb} s ($LB, BPF) and ${wn} s more ($LN, nft)"
	want=$(( n + 1 ))	# + kube-dns (2 ports) - the count is of Services
	got=$("$ZH" get --lab "$LB" services -o json | jq length)
	VB=$(vip $LB) VN=$(vip $LN) PB=$(podip $LB)
	rm -f "$TMP"/r.*
	s0=$(syncs)
	for i in $(seq "$PAIRS"); do
		d=$(run $LB "http://$PB:8080/?size=1024" "$TMP/d.json")
		z=$(run $LB "http://$VB/?size=1024" "$TMP/z.json")
		f=$(run $LN "http://$VN/?size=1024" "$TMP/f.json")
		echo "$d $z $f" >> "$TMP/r.$n"
	done
	echo "# $got services: $(( $(syncs) - s0 )) agent syncs in $LB and $LN during the rounds (should be 0); load $(cut -d' ' -f1-3 /proc/loadavg)"
	python3 - "$TMP/r.$n" "$got" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
zr = [z / d for d, z, f in rows]
fr = [f / d for d, z, f in rows]
print("%-8s %-10.0f %-10.0f %-10.0f %.3f (%.3f-%.3f) %.3f (%.3f-%.3f)" % (
    sys.argv[2], med([r[0] for r in rows]), med([r[1] for r in rows]), med([r[2] for r in rows]),
    med(zr), min(zr), max(zr), med(fr), min(fr), max(fr)))
PY
done
