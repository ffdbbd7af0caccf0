#!/usr/bin/env bash
# 16-lab-drain.t — pods leave like a kubelet removes them, with endpoint
# propagation (docs/lab.md "Pod termination"): a removed pod leaves the
# endpoints at once (its runtime Pod gets a deletionTimestamp: an in-place
# change) but keeps running, Terminating in `lab status` and `get pods`,
# until every agent
# applied its removal and the drain delay (`lab up --drain-delay 8s`) passed
# (8 s: room for the checks in between on a loaded machine):
#  - during the drain window it still accepts connections (to its pod IP),
#    while new connections to the Service, once node-a's agent carries the
#    removal, go only to the remaining pod;
#  - it is gone after the drain delay (not before), and the annotation
#    zerohop.io/drain-delay: "0" overrides the lab's delay for one pod;
#  - a bad --drain-delay or annotation value is an error naming it.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t16
chmod 755 "$TMP"

# ---- option checks (nothing is built) -------------------------------------------
out=$("$ZH" lab up --lab $LAB --drain-delay 5x 2>&1)
rc=$?
ok $([ $rc -ne 0 ] && echo "$out" | grep -q "drain-delay.*'5x'"; echo $?) \
	"lab up --drain-delay 5x: error naming the value (rc $rc)"
out=$("$ZH" lab status --lab $LAB --drain-delay 1s 2>&1)
ok $([ $? -ne 0 ] && echo "$out" | grep -q "options of lab up"; echo $?) \
	"--drain-delay is refused outside lab up"

who() { REPLICAS=$1 m_who who "" "app: who"; }	# REPLICAS
{
	who 2
	m_svc who "app: who" "80:http"
	m_idle client node-a
} > "$TMP/app.yaml"

"$ZH" lab up --lab $LAB --drain-delay 8s -f "$TMP/app.yaml" > "$TMP/up.log" 2>&1
ok $? "lab up --drain-delay 8s" || { sed 's/^/# /' "$TMP/up.log"; done_testing; }
x() { "$ZH" lab exec --lab $LAB client -- "$@"; }
for i in $(seq 50); do
	r=$(x python3 "$PROBE" conns who 80 4 2>/dev/null) && [ "$(echo "$r" | jq .fails)" = 0 ] && break
	sleep 0.2
done
ST="$TMP/st.json"
status() { "$ZH" lab status --lab $LAB -o json >"$ST" 2>/dev/null; }
status
is "$(jq '[.pods[] | select(.owner=="who" and .phase=="Running")] | length' "$ST")" 2 \
	"2 who pods Running"

# ---- scale 2 -> 1: one pod drains ------------------------------------------------
who 1 > "$TMP/who.yaml"
"$ZH" apply --lab $LAB -f "$TMP/who.yaml" >/dev/null
ok $? "scale who to 1"
T0=$(date +%s.%N)
GONE= GONE_IP= KEEP=
for i in $(seq 100); do
	status
	GONE=$(jq -r '.pods[] | select(.owner=="who" and .phase=="Terminating") | .name' "$ST")
	[ -n "$GONE" ] && break
	sleep 0.02
done
KEEP=$(jq -r '.pods[] | select(.owner=="who" and .phase=="Running") | .name' "$ST")
GONE_IP=$(jq -r ".pods[] | select(.name==\"$GONE\") | .ip" "$ST")
ok $([ -n "$GONE" ] && [ -n "$KEEP" ]; echo $?) \
	"lab status shows the removed pod Terminating ($GONE), the other Running ($KEEP)"
grep -q "deletionTimestamp" "/run/zerohop/$LAB/state/pods/default_$GONE.yaml"
ok $? "the Terminating pod left the endpoints: its runtime Pod carries a deletionTimestamp"
"$ZH" get --lab $LAB pods | grep -q "^default *$GONE .*Terminating"
ok $? "  get pods shows it Terminating (still a pod: NetworkPolicy keeps judging its traffic)"

# The removed pod still accepts connections on its own address.
r=$(x python3 "$PROBE" conns "$GONE_IP" 8080 10 2>/dev/null)
diag "direct to $GONE ($GONE_IP) while draining: $r"
is "$(echo "$r" | jq -r ".counts[\"$GONE\"] // 0")" 10 \
	"during the drain window the removed pod still accepts connections (10/10)"

# New connections to the Service: only the remaining pod, once node-a's agent
# carries the generation that removed the pod.
g=$(cat /run/zerohop/$LAB/state/generation)
for i in $(seq 100); do
	mg=$("$ZH" get --lab $LAB stats -o json | jq '."node-a".generation')
	[ "$mg" -ge "$g" ] && break
	sleep 0.02
done
r=$(x python3 "$PROBE" conns who 80 40 2>/dev/null)
diag "service while draining: $r"
is "$(echo "$r" | jq -c '[.counts | keys[]]')" "[\"$KEEP\"]" \
	"new Service connections go only to the remaining pod"
is "$(echo "$r" | jq .fails)" 0 "... and none fails"
status
is "$(jq -r ".pods[] | select(.name==\"$GONE\") | .phase" "$ST")" Terminating \
	"the checks above ran inside the drain window"
# Scaling back up is not blocked by the draining pod (it counts for nothing).
for i in $(seq 250); do
	status
	[ "$(jq "[.pods[] | select(.name==\"$GONE\")] | length" "$ST")" = 0 ] && break
	sleep 0.05
done
T1=$(date +%s.%N)
el=$(awk "BEGIN { printf \"%.2f\", $T1 - $T0 }")
diag "the removed pod was gone $el s after the scale-down"
ok $(awk "BEGIN { exit !($el >= 7.9 && $el < 13) }"; echo $?) \
	"gone after the 8 s drain delay, not before, and promptly after ($el s)"
grep -q "pod default/$GONE deleted" /run/zerohop/$LAB/supervisor.log
ok $? "supervisor log: the pod was deleted after terminating"
ok $([ ! -e "/run/zerohop/$LAB/state/pods/default_$GONE.yaml" ]; echo $?) \
	"  and its runtime Pod object is gone from the state with it"

# ---- annotation overrides the lab's delay; a bad one is an error ------------------
cat > "$TMP/quick.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: quick
  annotations: {zerohop.io/drain-delay: "0"}
spec:
  nodeName: node-b
  containers:
    - name: q
      command: ["python3", "$PROBE", "who-tcp", "8080"]
      ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: badanno
  annotations: {zerohop.io/drain-delay: "soon"}
spec:
  containers:
    - name: q
      command: ["sleep", "1000"]
YAML
"$ZH" apply --lab $LAB -f "$TMP/quick.yaml" >/dev/null
for i in $(seq 100); do
	status
	[ "$(jq -r '.pods[] | select(.name=="quick") | .phase' "$ST")" = Running ] && break
	sleep 0.05
done
is "$(jq -r '.pods[] | select(.name=="quick") | .phase' "$ST")" Running "pod quick Running"
is "$(jq '[.pods[] | select(.name=="badanno")] | length' "$ST")" 0 \
	"a pod with a bad drain-delay annotation is not created"
grep -q "badanno: annotation zerohop.io/drain-delay: .*'soon'" /run/zerohop/$LAB/supervisor.log
ok $? "... and the supervisor log names the annotation and the value"
"$ZH" delete --lab $LAB -f "$TMP/quick.yaml" >/dev/null
T0=$(date +%s.%N)
for i in $(seq 100); do
	status
	[ "$(jq '[.pods[] | select(.name=="quick")] | length' "$ST")" = 0 ] && break
	sleep 0.02
done
el=$(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $T0 }")
ok $(awk "BEGIN { exit !($el < 2.5) }"; echo $?) \
	"zerohop.io/drain-delay: \"0\" overrides the lab's 8 s (gone in $el s)"

"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
ip netns list | grep -q "^$LAB-"
ok $((! $?)) "no namespace left"
done_testing
