#!/usr/bin/env bash
# 55-netpol-agent.t — NetworkPolicy enforced by the node agents themselves
# (no stand-in loader): `zerohop apply` of a policy is in force on both nodes
# within 1 s, by pod IP and by Service ClusterIP; a bad policy is refused and
# leaves enforcement unchanged; a pod label change flips the verdict; a policy
# change revokes an established connection (cross-node and same-node
# short-circuited); `zerohop get policy-drops` counts the drops; deleting the
# policies opens traffic again.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
netpol_lab_setup t55 netpol_probe netpol_hold

pod() { # NAME NODE LABEL CMD...
	local n=$1 node=$2 app=$3; shift 3
	cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $n, labels: {app: $app}}
spec: {nodeName: $node, containers: [{name: c, command: [$(echo "$@" | sed 's/ /, /g')], ports: [{containerPort: 80}]}]}
YAML
}
{
	pod client node-a client sleep 100000
	pod other node-a other sleep 100000
	pod near node-a server "$ZH" echo --tcp 80
	pod far node-b server "$ZH" echo --tcp 80
	cat <<YAML
---
apiVersion: v1
kind: Service
metadata: {name: far}
spec: {selector: {app: server}, ports: [{port: 8080, targetPort: 80}]}
YAML
} >"$TMP/app.yaml"
allow() { # PORT: default-deny ingress + servers admit app=client on PORT
	cat <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: servers-from-client}
spec:
  podSelector: {matchLabels: {app: server}}
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: $1}]}]
YAML
}

"$ZH" lab up --lab $LAB --accel on -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up (agents on, accelerator on)" || { sed 's/^/# /' "$TMP/up.log"; done_testing; exit; }
NEAR=$(lab_pod_ip near) FAR=$(lab_pod_ip far)
VIP=$("$ZH" get services --lab $LAB -o json | jq -r '.[] | select(.name=="far") | .clusterIP')
diag "near $NEAR far $FAR vip $VIP"
# probe FROM: one line per target, "ok" or "fail"
probe() {
	local from=$1; shift
	"$ZH" lab exec --lab $LAB "$from" -- "$TOOLS/netpol_probe" --timeout-ms 500 "$@" | awk '{print $2}' | tr '\n' ' '
}
TARGETS="tcp:$FAR:80 tcp:$NEAR:80 tcp:$VIP:8080"
is "$(probe other $TARGETS)" "ok ok ok " "no policy: other reaches far, near, the ClusterIP"
# the per-packet programs are on a node's cgroup only while a pod of that
# node is isolated (pol_load.c invariant 6): a node without policy pays nothing
skb_links() { for n in node-a node-b; do
	[ -e /sys/fs/bpf/zerohop/$LAB/$n/pol_link_ingress ] && [ -e /sys/fs/bpf/zerohop/$LAB/$n/pol_link_egress ] && echo -n "$n:on " || echo -n "$n:off "
done; }
is "$(skb_links)" "node-a:off node-b:off " "no policy: no per-packet policy program on either node"
# a connection that began while they were detached is judged on its next
# packet once a policy isolates its server: other -> far is denied below
"$ZH" lab exec --lab $LAB other -- "$TOOLS/netpol_hold" "$FAR" 80 4 >"$TMP/pre.out" 2>&1 &
BG+=($!)
sleep 1

allow 80 >"$TMP/np80.yaml"
"$ZH" apply --lab $LAB -f "$TMP/np80.yaml" >/dev/null
ok $? "apply default-deny + allow client:80"
is "$(skb_links)" "node-a:on node-b:on " "  per-packet programs attached on both nodes (every pod isolated)"
T0=$(date +%s%N)
sleep 0.3
A=$(probe client $TARGETS)
B=$(probe other $TARGETS)
T1=$(date +%s%N)
is "$A" "ok ok ok " "client admitted by pod IP (both nodes) and by ClusterIP"
is "$B" "fail fail fail " "other denied by pod IP (both nodes) and by ClusterIP"
ok $([ $(( (T1 - T0) / 1000000 )) -lt 1500 ]; echo $?) "  (both probed within $(( (T1 - T0) / 1000000 )) ms of apply returning, 0.3 s after)"

wait
BG=()
# pings every 100 ms for 4 s; the policy came ~1 s in
is "$(awk '$1 >= 2000 && $2 == "ok"' "$TMP/pre.out" | wc -l)" 0 \
	"a connection opened before any policy is revoked once one denies it"
ok $([ "$(awk '$1 < 900 && $2 == "ok"' "$TMP/pre.out" | wc -l)" -gt 3 ]; echo $?) \
	"  (it echoed before: $(awk '$1 < 900 && $2 == "ok"' "$TMP/pre.out" | wc -l) pings)"

"$ZH" get policy-drops --lab $LAB >"$TMP/drops1.txt" 2>&1
ok $? "get policy-drops runs"
D=$("$ZH" get policy-drops --lab $LAB -o json | jq '[.[] | .by_reason.ingress_denied] | add')
ok $([ "${D:-0}" -gt 0 ]; echo $?) "get policy-drops counts ingress_denied ($D)"
jq -e '.["node-b"].by_policy[] | select(.policy=="default/default-deny")' \
	< <("$ZH" get policy-drops --lab $LAB -o json) >/dev/null
ok $? "  drops charged to default/default-deny on node-b"
G=$("$ZH" get stats --lab $LAB -o json | jq -r '."node-b".policy_generation')
ok $([ "${G:-0}" -gt 0 ]; echo $?) "get stats shows the policy generation ($G)"

cat >"$TMP/bad.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad}
spec:
  podSelector: {}
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/33}}]}]
YAML
"$ZH" apply --lab $LAB -f "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1
is "$?" 1 "a bad policy is refused by apply"
grep -q "bad.yaml:[0-9]*:" "$TMP/bad.out"
ok $? "  with an error naming file:line ($(head -1 "$TMP/bad.out"))"
sleep 0.3
is "$(probe client $TARGETS)$(probe other $TARGETS)" "ok ok ok fail fail fail " "enforcement unchanged after the bad policy"

# A bare Pod's label change replaces it (the lab hashes labels into the pod,
# like a kubelet would see a new pod): wait for the replacement — a new pid,
# Running — not just any "other" that is Running (the old one still is until
# the supervisor has read the apply, and then it is Terminating for a while).
other_pid() { "$ZH" lab status --lab $LAB -o json | jq -r '[.pods[] | select(.name=="other")] | if length == 1 and .[0].phase == "Running" then .[0].pid else "" end'; }
OLDPID=$(other_pid)
pod other node-a client sleep 100000 >"$TMP/other-relabel.yaml"
"$ZH" apply --lab $LAB -f "$TMP/other-relabel.yaml" >/dev/null
ok $? "relabel pod other app=other -> app=client"
other_new() { P=$(other_pid); [ -n "$P" ] && [ "$P" != "$OLDPID" ]; }
WAIT_STEP=0.2 wait_until 30 other_new
P=$(other_pid)
diag "other: pid $OLDPID -> ${P:-none}"
sleep 0.5
is "$(probe other $TARGETS)" "ok ok ok " "  the label change flips the verdict: other admitted"

# revocation through the agents: hold client -> far and client -> near
# (same node, short-circuited) and change the policy to port 81
np_hold_near_far 5
sleep 1.5
grep -q " ok" "$TMP/near.out" && grep -q " ok" "$TMP/far.out"
ok $? "both held connections echo before the change"
allow 81 >"$TMP/np81.yaml"
"$ZH" apply --lab $LAB -f "$TMP/np81.yaml" >/dev/null
ok $? "policy changed: port 80 no longer admitted"
wait
BG=()
np_revoked_ok "1.5 s after the change"
R=$("$ZH" get policy-drops --lab $LAB -o json | jq '[.[] | .by_reason.revoked] | add')
ok $([ "${R:-0}" -gt 0 ]; echo $?) "get policy-drops counts revoked ($R)"

"$ZH" delete --lab $LAB -f "$TMP/np81.yaml" >/dev/null
ok $? "delete the policies"
sleep 0.3
is "$(probe client $TARGETS)" "ok ok ok " "traffic passes again after delete"
is "$(skb_links)" "node-a:off node-b:off " "  and the per-packet programs are detached again"

# a new pod is isolated before its command starts (docs/policy.md,
# "Ordering"): its very first connect, made by its command at once, is
# already judged by its own egress policy
cat >"$TMP/newbie-np.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: newbie-no-egress}
spec: {podSelector: {matchLabels: {app: newbie}}, policyTypes: [Egress]}
YAML
"$ZH" apply --lab $LAB -f "$TMP/newbie-np.yaml" >/dev/null
ok $? "apply an egress deny-all policy for app=newbie (no such pod yet)"
cat >"$TMP/newbie.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: newbie, labels: {app: newbie}}
spec: {nodeName: node-a, containers: [{name: c, command: [sh, -c, "$TOOLS/netpol_probe --timeout-ms 500 tcp:$FAR:80 tcp:$NEAR:80; exec sleep 100000"]}]}
YAML
"$ZH" apply --lab $LAB -f "$TMP/newbie.yaml" >/dev/null
ok $? "create pod newbie whose command connects at once"
LOG=/run/zerohop/$LAB/pods/default_newbie/log
wait_until 5 grep -q "tcp:$NEAR:80" "$LOG" 2>/dev/null
is "$(grep -o '^tcp:[0-9.]*:80 [a-z]*' "$LOG" 2>/dev/null | awk '{print $2}' | tr '\n' ' ')" "fail fail " \
	"  the command's first connects were already denied by its egress policy"
is "$(probe other tcp:$FAR:80 tcp:$NEAR:80)" "ok ok " "  other pods are not affected"
is "$(skb_links)" "node-a:on node-b:off " "  per-packet programs only on newbie's node"
"$ZH" get policy-drops --lab $LAB | sed 's/^/# /'
done_testing
