#!/usr/bin/env bash
# 52-netpol-failfast.t — how denials look to clients, in the lab, through the
# Service load balancer: a TCP connect that the client's egress policy denies
# fails at once with EPERM (cgroup/connect4), by pod IP and by ClusterIP; a
# SYN that the server's ingress policy denies is dropped (the client times
# out); drops are counted per reason and per policy. The policy datapath is
# loaded by the node agents (docs/policy.md).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
netpol_lab_setup t52 netpol_probe

{
	m_idle client node-a
	m_idle intruder node-a
	m_pod server node-b "app: server" "$(m_ctr echo "" "$ZH" echo --tcp 80 --tcp 81)"
	m_svc server "app: server" "a=80:80 b=81:81"
} >"$TMP/app.yaml"
cat >"$TMP/np.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client-only-81}
spec:
  podSelector: {matchLabels: {app: client}}
  policyTypes: [Egress]
  egress: [{ports: [{port: 81}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: server-from-client}
spec:
  podSelector: {matchLabels: {app: server}}
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}]}]
YAML
"$ZH" lab up --lab $LAB -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up (with the agent: Services translated at connect)"
GEN=$("$ZH" apply --lab $LAB -f "$TMP/np.yaml" | awk '/^applied/ {print $NF}')
ok $([ -n "$GEN" ]; echo $?) "apply the policies"
np_wait_agents "$GEN"
ok $? "both agents synced generation $GEN (policy in force)"
SERVER=$("$ZH" lab status --lab $LAB -o json | jq -r '.pods[] | select(.name=="server") | .ip')
VIP=$("$ZH" get services --lab $LAB -o json | jq -r '.[] | select(.name=="server") | .clusterIP')
probe() { # POD TIMEOUT_MS TARGET -> "ok|fail ELAPSED_MS"
	local t0 t1 r
	t0=$(date +%s%N)
	r=$("$ZH" lab exec --lab $LAB "$1" -- "$TOOLS/netpol_probe" --timeout-ms "$2" "$3" | awk '{print $2}')
	t1=$(date +%s%N)
	echo "$r $(( (t1 - t0) / 1000000 ))"
}
read -r r ms <<<"$(probe client 3000 tcp:$SERVER:81)"
is "$r" ok "client -> server:81 allowed by both policies"
read -r r ms <<<"$(probe client 3000 tcp:$SERVER:80)"
is "$r" fail "client -> server:80 (pod IP) denied by the client's egress policy"
ok $([ "$ms" -lt 1000 ]; echo $?) "  and fails fast: ${ms} ms, not the 3 s timeout"
read -r r ms <<<"$(probe client 3000 tcp:$VIP:80)"
is "$r" fail "client -> Service ClusterIP:80 denied (judged on the backend)"
ok $([ "$ms" -lt 1000 ]; echo $?) "  and fails fast: ${ms} ms"
read -r r ms <<<"$(probe client 3000 tcp:$VIP:81)"
is "$r" ok "client -> Service ClusterIP:81 allowed"
read -r r ms <<<"$(probe intruder 800 tcp:$SERVER:81)"
is "$r" fail "intruder -> server:81 denied by the server's ingress policy"
ok $([ "$ms" -ge 700 ]; echo $?) "  its SYN is dropped: the client times out (${ms} ms)"
"$ZH" get policy-drops --lab $LAB -o json >"$TMP/drops.json"
jq -r '."node-a".by_policy[] | "\(.policy) \(.reason)"' "$TMP/drops.json" >"$TMP/drops-a.txt"
ok $? "drop counters of node-a readable (zerohop get policy-drops)"
grep -q "default/client-only-81 *egress_denied" "$TMP/drops-a.txt"
ok $? "egress drops charged to default/client-only-81"
jq -r '."node-b".by_policy[] | "\(.policy) \(.reason)"' "$TMP/drops.json" >"$TMP/drops-b.txt"
grep -q "default/server-from-client *ingress_denied" "$TMP/drops-b.txt"
ok $? "ingress drops charged to default/server-from-client on node-b"
sed 's/^/# /' "$TMP/drops-a.txt" "$TMP/drops-b.txt"
done_testing
