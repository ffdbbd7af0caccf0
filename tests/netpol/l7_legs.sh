#!/usr/bin/env bash
# l7_legs.sh [LAB] — what the policy datapath does today with the two legs of
# a connection to an L7 Service once the agent redirects it to the node proxy
# (docs/proxy.md "Capture"; docs/policy.md "L7 Services"). Not a test: it
# prints a table. The legs are played with plain sockets from the same places
# and addresses the real ones use, so it runs before the capture is wired:
#   leg 1: client pod -> node fabric IP:15099 (a listener in the node's netns,
#          outside the node cgroup, like the proxy)
#   leg 2: a process in node-a's netns, outside the node cgroup (like the
#          proxy), -> backend pod:8080 on node-a and on node-b; source = the
#          node's fabric IP
# next to the direct pod -> pod connection Kubernetes semantics judge, under
# four policy sets. Lab LAB (default E3): up, run, down (also on failure).
# The hand-made listener uses port 15099 (the lab's proxy holds 15001; a
# hand-made connection is judged the same on either port).
# Since the proxy judges policy per request and sends from the node's proxy
# address (docs/policy.md "L7 Services"), these hand-played legs show what a
# pod or host process gets WITHOUT the redirect: leg 1 judged as any
# connection, leg 2 from the fabric IP as before. tests/e2e/57-netpol-l7.t
# checks the real legs.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
PR=$(dirname "$ZH")/tests/tools/netpol_probe
LAB=${1:-E3}
T=$(mktemp -d /tmp/zh-l7legs.XXXXXX)
EPID=""
cleanup() {
	[ -n "$EPID" ] && kill "$EPID" 2>/dev/null
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
cat >"$T/app.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {app: client}}
spec: {nodeName: node-a, containers: [{name: c, command: [sleep, "100000"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: other, labels: {app: other}}
spec: {nodeName: node-a, containers: [{name: c, command: [sleep, "100000"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-near, labels: {app: web}}
spec: {nodeName: node-a, containers: [{name: e, command: [$ZH, echo, --tcp, "8080"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-far, labels: {app: web}}
spec: {nodeName: node-b, containers: [{name: e, command: [$ZH, echo, --tcp, "8080"]}]}
YAML
np() { # NAME SPEC
	printf 'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: %s}\nspec: %s\n' "$1" "$2"
}
np web '{podSelector: {matchLabels: {app: web}}, ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: 8080}]}]}' >"$T/p1.yaml"
np web '{podSelector: {matchLabels: {app: web}}, policyTypes: [Ingress]}' >"$T/p2.yaml"
np client '{podSelector: {matchLabels: {app: client}}, policyTypes: [Egress], egress: [{to: [{podSelector: {matchLabels: {app: web}}}], ports: [{port: 8080}]}]}' >"$T/p3.yaml"
"$ZH" lab up --lab "$LAB" -f "$T/app.yaml" >"$T/up.log" 2>&1 || { cat "$T/up.log"; exit 1; }
ip_of() { "$ZH" lab status --lab "$LAB" -o json | jq -r ".pods[] | select(.name==\"$1\") | .ip"; }
NEAR=$(ip_of web-near) FAR=$(ip_of web-far)
NODEA=$("$ZH" lab status --lab "$LAB" -o json | jq -r '.nodes[] | select(.name=="node-a") | .ip')
"$ZH" lab exec --lab "$LAB" --node node-a -- "$ZH" echo --tcp 15099 >/dev/null 2>&1 &
EPID=$!
sleep 0.5
pr() { "$ZH" lab exec --lab "$LAB" "$@" | awk '{printf "%s ", $2}'; }
legs() {
	printf '%-34s| %-9s %-9s| %-9s %-9s| %-9s %-9s\n' "$1" \
		"$(pr client -- "$PR" --timeout-ms 500 "tcp:$NEAR:8080")" \
		"$(pr client -- "$PR" --timeout-ms 500 "tcp:$FAR:8080")" \
		"$(pr client -- "$PR" --timeout-ms 500 "tcp:$NODEA:15099")" \
		"$(pr other -- "$PR" --timeout-ms 500 "tcp:$NODEA:15099")" \
		"$(pr --node node-a -- "$PR" --timeout-ms 500 "tcp:$NEAR:8080")" \
		"$(pr --node node-a -- "$PR" --timeout-ms 500 "tcp:$FAR:8080")"
}
sync() { sleep 0.5; }	# the agents sync within a few ms (docs/policy.md)
printf '%-34s| %-19s| %-19s| %-19s\n' "" "direct client->web" "leg 1 ->node:15099" "leg 2 node-a->web"
printf '%-34s| %-9s %-9s| %-9s %-9s| %-9s %-9s\n' "policies" near far client other near far
legs "none"
"$ZH" apply --lab "$LAB" -f "$T/p1.yaml" >/dev/null; sync
legs "web: ingress from client:8080"
"$ZH" apply --lab "$LAB" -f "$T/p2.yaml" >/dev/null; sync
legs "web: deny all ingress"
"$ZH" delete --lab "$LAB" -f "$T/p2.yaml" >/dev/null
"$ZH" apply --lab "$LAB" -f "$T/p3.yaml" >/dev/null; sync
legs "client: egress to web:8080 only"
