#!/usr/bin/env bash
# The lab as kubelet + Deployment controller on a running lab: `zerohop apply`
# of a Deployment scales it up and down, a changed template rolls the pods
# one at a time (maxSurge 1, maxUnavailable 0: never more than replicas+1
# pods that are not Terminating, never fewer than replicas Running; a
# Terminating pod drains and counts for nothing), Pod manifests create and replace
# pods, `zerohop delete` removes them; the runtime Pod objects in the state
# source follow (that is what the agents see).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t13
export ZH_LAB=$LAB

deploy() { # replicas version
	cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: $1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web, version: "$2"}
    spec:
      containers:
      - name: web
        image: fortio/fortio
        ports:
        - containerPort: 8080
EOF
}
deploy 2 v1 >"$TMP/d.yaml"
ST="$TMP/st.json"
status() { "$ZH" lab status --lab $LAB -o json >"$ST"; }
J() { jq -r "$1" "$ST"; }
web_pods() { J '[.pods[] | select(.owner=="web")] | length'; }
web_running() { J '[.pods[] | select(.owner=="web" and .phase=="Running")] | length'; }
wait_for() { # jq-expr value: poll status until it matches (<= 10 s)
	for _ in $(seq 100); do status; [ "$(J "$1")" = "$2" ] && return 0; sleep 0.1; done
	return 1
}
state_pods() { ls "/run/zerohop/$LAB/state/pods" | grep -c "^default_web-"; }

"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/d.yaml" >/dev/null 2>"$TMP/up.err"
ok $? "lab up with a 2-replica Deployment"
status
is "$(web_running)" 2 "2 pods Running"
HASH1=$(J '[.pods[] | select(.owner=="web")][0].name' | awk -F- '{print $2}')
J '.pods[] | select(.owner=="web") | .name' | grep -qvE "^web-$HASH1-[a-z0-9]{5}$"
ok $((! $?)) "pods are named web-<10 hex>-<5 chars> (web-$HASH1-...)"
is "$(J '[.pods[] | select(.owner=="web") | .node] | sort | join(",")')" "node-a,node-b" \
	"spread over both nodes"
is "$(state_pods)" 2 "2 runtime Pod objects in the state source"
grep -q "podIP: 10.244" /run/zerohop/$LAB/state/pods/default_web-*.yaml
ok $? "... carrying status.podIP"

deploy 5 v1 >"$TMP/d.yaml"
"$ZH" apply -f "$TMP/d.yaml" >/dev/null
wait_for '[.pods[] | select(.owner=="web" and .phase=="Running")] | length' 5
ok $? "scale up to 5: 5 pods Running"
is "$(J '[.pods[] | select(.owner=="web" and .node=="node-a")] | length')" 3 \
	"least-loaded placement: 3 on node-a, 2 on node-b"

deploy 3 v1 >"$TMP/d.yaml"
"$ZH" apply -f "$TMP/d.yaml" >/dev/null
wait_for '[.pods[] | select(.owner=="web")] | length' 3
ok $? "scale down to 3: 3 pods left"
for _ in $(seq 30); do [ "$(state_pods)" = 3 ] && break; sleep 0.1; done
is "$(state_pods)" 3 "removed pods left the state source"

# Rolling update, sampled all along.
(
	while :; do
		"$ZH" lab status --lab $LAB -o json 2>/dev/null |
			jq -r '[([.pods[] | select(.owner=="web" and .phase!="Terminating")] | length),
				([.pods[] | select(.owner=="web" and .phase=="Running")] | length)] | @tsv'
		sleep 0.02
	done
) >"$TMP/samples" &
SAMPLER=$!
BG+=($SAMPLER)
LOG=/run/zerohop/$LAB/supervisor.log
LOGN=$(wc -l <"$LOG")
deploy 3 v2 >"$TMP/d.yaml"
"$ZH" apply -f "$TMP/d.yaml" >/dev/null
HASH2=""
for _ in $(seq 100); do
	status
	HASH2=$(J '[.pods[] | select(.owner=="web")] | map(.name | split("-")[1]) | unique | join(",")')
	[ "$HASH2" != "$HASH1" ] && [ "${HASH2#*,}" = "$HASH2" ] && [ "$(web_running)" = 3 ] && break
	sleep 0.1
done
sleep 0.2
kill $SAMPLER 2>/dev/null
wait $SAMPLER 2>/dev/null
SAMPLER=""
ok $([ "$HASH2" != "$HASH1" ] && [ "${HASH2#*,}" = "$HASH2" ]; echo $?) \
	"template change rolled every pod to the new template ($HASH1 -> $HASH2)"
is "$(web_running)" 3 "3 pods Running after the rollout"
MAX=$(awk '{print $1}' "$TMP/samples" | sort -n | tail -1)
MINR=$(awk '{print $2}' "$TMP/samples" | sort -n | head -1)
diag "$(wc -l <"$TMP/samples") samples: at most $MAX pods, at least $MINR Running"
NS=$(wc -l <"$TMP/samples")
ok $((NS < 3)) "the rollout was sampled ($NS samples)"
ok $((MAX > 4)) "maxSurge 1: never more than 4 pods (Terminating ones aside)"
ok $((MINR < 3)) "maxUnavailable 0: never fewer than 3 Running"
# The supervisor's own event log gives the exact sequence (sampling may miss
# a short moment): replay it from the 3 Running pods before the apply. A pod
# leaves the count when it starts terminating (its later "deleted" is the
# end of its drain).
read -r LMAX LMIN < <(awk -v from="$LOGN" 'NR > from && $4 == "pod" && $5 ~ /^default\/web-/ {
	if ($6 == "created") { total++; st[$5] = "c" }
	else if ($6 == "running") { running++; st[$5] = "r" }
	else if ($6 == "terminating") { total--; if (st[$5] != "c") running--; st[$5] = "t" }
	else if ($6 == "deleted" && st[$5] != "t") { total--; if (st[$5] != "c") running-- }
	if (total > max) max = total; if (running < min) min = running
} BEGIN { total = 3; running = 3; max = 3; min = 3 } END { print max, min }' "$LOG")
diag "supervisor log replay: at most $LMAX pods, at least $LMIN Running"
is "$LMAX" 4 "supervisor events: exactly one surge pod at a time (max 4 pods)"
is "$LMIN" 3 "supervisor events: never fewer than 3 Running"
J '.pods[] | select(.owner=="web") | .name' | while read -r p; do
	"$ZH" lab exec --lab $LAB "$p" -- cat /proc/self/cgroup
done | grep -c "zerohop-$LAB" | grep -qx 3
ok $? "new pods are exec-able"

# Plain Pods: create, replace on change, delete.
cat >"$TMP/p.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: solo
  labels: {app: solo}
spec:
  nodeName: node-b
  containers:
  - name: s
    image: busybox
    command: ["sleep", "1000"]
EOF
"$ZH" apply -f "$TMP/p.yaml" >/dev/null
wait_for '.pods[] | select(.name=="solo") | .phase + "@" + .node' "Running@node-b"
ok $? "apply of a Pod creates it on its nodeName"
PID1=$(J '.pods[] | select(.name=="solo") | .pid')
sed -i 's/sleep", "1000"/sleep", "2000"/' "$TMP/p.yaml"
"$ZH" apply -f "$TMP/p.yaml" >/dev/null
for _ in $(seq 100); do
	status
	PID2=$(J '.pods[] | select(.name=="solo" and .phase=="Running") | .pid')
	[ -n "$PID2" ] && [ "$PID2" != "$PID1" ] && break
	sleep 0.1
done
ok $([ -n "$PID2" ] && [ "$PID2" != "$PID1" ]; echo $?) "a changed Pod is replaced"
grep -q "sleep 2000" /proc/$PID2/cmdline 2>/dev/null || tr '\0' ' ' </proc/$PID2/cmdline | grep -q "sleep 2000"
ok $? "... running the new command"
"$ZH" delete -f "$TMP/p.yaml" >/dev/null
wait_for '[.pods[] | select(.name=="solo")] | length' 0
ok $? "zerohop delete removes the pod"
"$ZH" delete -f "$TMP/d.yaml" >/dev/null
wait_for '[.pods[] | select(.owner=="web")] | length' 0
ok $? "deleting the Deployment removes its pods"
for _ in $(seq 30); do [ "$(state_pods)" = 0 ] && break; sleep 0.1; done
is "$(state_pods)" 0 "... and their runtime objects"
ip netns list | grep -q "^$LAB-p-"
ok $((! $?)) "... and their namespaces"
"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down"
done_testing
