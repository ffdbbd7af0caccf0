#!/usr/bin/env bash
# bench_conn.sh [ROUNDS] — new connections/s between two pods with 0, 200,
# 10,000 and 50,000 non-matching NetworkPolicies plus the one that admits the
# traffic (issue 6; the Romana experiment). Lab P2: client and intruder on
# node-a, echo server on node-b; the policy datapath loaded by netpol_load on
# both nodes (--extra: the policies are added to the state for the sync only).
# Each measurement: `zerohop bench -n 3000 -c 1 --keepalive=false` GET
# /echo?size=1024 (1 KiB responses, a new TCP connection per request), sizes
# interleaved (0 200 10000 50000, repeated ROUNDS times, default 5); the
# intruder must be refused in every round (else the figure is void).
# Prints requests/s per run and the median ratio vs 0 policies per size.
set -u
ROUNDS=${1:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
TOOLS=$(dirname "$ZH")/tests/tools
LAB=P2
TMP=$(mktemp -d /tmp/zhP-bench.XXXXXX)
cleanup() { "$ZH" lab down --lab $LAB >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
"$ZH" lab down --lab $LAB >/dev/null 2>&1
cat >"$TMP/app.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {app: client}}
spec: {nodeName: node-a, containers: [{name: c, command: [sleep, "100000"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: intruder, labels: {app: intruder}}
spec: {nodeName: node-a, containers: [{name: c, command: [sleep, "100000"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: server, labels: {app: server}}
spec:
  nodeName: node-b
  containers: [{name: echo, command: [$ZH, echo, --http, "8080"], ports: [{name: http, containerPort: 8080}]}]
YAML
"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/app.yaml" >/dev/null || { echo "lab up failed"; exit 1; }
python3 - "$TMP" <<'PY'
import sys
tmp = sys.argv[1]
allow = """apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-client, namespace: default}
spec: {podSelector: {matchLabels: {app: server}}, ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: 8080}]}]}
"""
for n in (0, 200, 10000, 50000):
    with open(f"{tmp}/np_{n}.yaml", "w") as f:
        f.write(allow)
        for i in range(n):
            f.write("---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
                    f"metadata: {{name: nm-{i}, namespace: default}}\n")
            if i % 2:
                f.write("spec: {podSelector: {matchLabels: {app: server}}, ingress: [{from: "
                        "[{podSelector: {matchLabels: {app: client}}}], ports: "
                        f"[{{port: {20000 + i % 40000}}}]}}]}}\n")
            else:
                f.write("spec: {podSelector: {matchLabels: {app: server}}, ingress: [{from: "
                        f"[{{podSelector: {{matchLabels: {{app: nobody-{i}}}}}}}]}}]}}\n")
PY
SERVER=$("$ZH" lab status --lab $LAB -o json | python3 -c 'import json,sys; print([p["ip"] for p in json.load(sys.stdin)["pods"] if p["name"]=="server"][0])')
URL="http://$SERVER:8080/echo?size=1024"
load() { # N
	for node in node-a node-b; do
		"$ZH" lab exec --lab $LAB --node $node -- "$TOOLS/netpol_load" --lab $LAB --node $node \
			--extra "$TMP/np_$1.yaml" >"$TMP/load_$node.log" 2>&1 &
	done
	wait
	grep -h synced "$TMP"/load_node-*.log | tr '\n' ' '
}
: >"$TMP/results"
for r in $(seq "$ROUNDS"); do
	for n in 0 200 10000 50000; do
		info=$(load $n)
		sleep 1	# let the kernel finish freeing the replaced tables
		intr=$("$ZH" lab exec --lab $LAB intruder -- "$TOOLS/netpol_probe" --timeout-ms 300 "tcp:$SERVER:8080" | awk '{print $2}')
		qps=$("$ZH" lab exec --lab $LAB client -- "$ZH" bench -n 3000 -c 1 --keepalive=false \
			--json - --quiet "$URL" 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["ActualQPS"],1))')
		echo "round $r policies $n conn/s $qps intruder $intr ($info)"
		echo "$r $n $qps $intr" >>"$TMP/results"
	done
done
python3 - "$TMP/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
base = {r: float(q) for r, n, q, i in rows if n == "0"}
void = [r for r in rows if r[3] != "fail"]
print(f"intruder refused in {len(rows) - len(void)} of {len(rows)} runs")
for size in ("200", "10000", "50000"):
    ratios = [float(q) / base[r] for r, n, q, i in rows if n == size and r in base]
    print(f"{size:>6} policies / 0: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} pairs)")
print("0-policy conn/s per round:", " ".join(f"{base[r]:.0f}" for r in sorted(base)))
PY
