#!/usr/bin/env bash
# The lab after crashes and bad input: a `lab up` killed with SIGKILL while it
# builds leaves pieces behind, and the next `lab up` cleans them and works; a
# killed supervisor likewise; bad manifests fail with file:line before
# anything is built; `lab down` of a lab that never existed succeeds.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t12

cat >"$TMP/lab.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sleeper
spec:
  replicas: 8
  selector:
    matchLabels: {app: sleeper}
  template:
    metadata:
      labels: {app: sleeper}
    spec:
      containers:
      - name: s
        image: busybox
        command: ["sleep", "100000"]
EOF
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
count_netns() { ip netns list | grep -c "^$LAB-"; }

# 1. SIGKILL `lab up` in the middle of building the cluster.
# (Started by a helper shell, so the test shell does not report the kill.)
bash -c '"$@" >/dev/null 2>&1 & echo $! >"$0.pid"; wait' "$TMP/up" "$ZH" lab up --lab $LAB --no-mesh -f "$TMP/lab.yaml" 2>/dev/null &
HELPER=$!
for _ in $(seq 500); do [ -e "/run/netns/$LAB-node-b" ] && break; sleep 0.01; done
kill -9 "$(cat "$TMP/up.pid")"
wait $HELPER
ok $([ -e "/run/netns/$LAB-fabric" ]; echo $?) "a killed lab up left pieces behind ($(count_netns) namespaces)"
"$ZH" lab status --lab $LAB >/dev/null 2>&1
ok $(($? == 0)) "... and the lab does not count as up"

"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "lab up after a killed lab up works"
grep -q "cleaning leftovers" "$TMP/up.out"
ok $? "... after cleaning the leftovers"
"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
is "$(jq '[.pods[] | select(.phase=="Running")] | length' "$TMP/st.json")" 8 "8 pods Running"
is "$(count_netns)" 11 "exactly fabric + 2 nodes + 8 pods namespaces (no stale ones)"
IP=$(jq -r '.pods[0].ip' "$TMP/st.json")
# Nothing listens on port 9: a quick "refused" (RST) proves the path works.
"$ZH" lab exec --lab $LAB "$(jq -r '.pods[1].name' "$TMP/st.json")" -- \
	timeout 3 bash -c "</dev/tcp/$IP/9" 2>&1 | grep -q "refused"
ok $? "pods reach each other"

# 2. The supervisor dies (SIGKILL): the lab is not up; lab up starts afresh.
SUP=$(jq -r '.supervisorPid' "$TMP/st.json")
OLD=$(jq -r '.pods[].pid' "$TMP/st.json")
kill -9 "$SUP"
sleep 0.2
"$ZH" lab status --lab $LAB >/dev/null 2>&1
ok $(($? == 0)) "with its supervisor killed the lab is not up"
"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/lab.yaml" >"$TMP/up2.out" 2>&1
ok $? "lab up after a killed supervisor works"
is "$(pids_alive $OLD)" "" "the old run's pod processes are gone"
is "$(count_netns)" 11 "no stale namespaces"
"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down"
ok $([ ! -e "$CG/zerohop-$LAB" ] && [ ! -e /run/zerohop/$LAB ] && [ "$(count_netns)" = 0 ]; echo $?) \
	"nothing left"

# 3. Bad input fails before anything is built.
cat >"$TMP/bad.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: ok
spec:
  containers:
  - name: s
    image: busybox
    command: ["sleep", "1000"]
---
apiVersion: v1
kind: Pod
metadata:
  name: redis
spec:
  containers:
  - name: r
    image: redis:7
EOF
"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/bad.yaml" >/dev/null 2>"$TMP/bad.err"
ok $(($? == 0)) "an image without a built-in command and no command: lab up fails"
grep -q "bad.yaml:1[0-9]:.*default/redis.*redis:7.*command" "$TMP/bad.err"
ok $? "... naming file:line, pod, image and the fix: $(head -1 "$TMP/bad.err")"
ok $([ ! -e /run/zerohop/$LAB ] && [ "$(count_netns)" = 0 ]; echo $?) "... and builds nothing"

cat >"$TMP/badcl.yaml" <<EOF
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata:
  name: small
spec:
  podCIDR: 10.1.0.0/24
  nodes:
  - name: a
  - name: b
EOF
"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/badcl.yaml" >/dev/null 2>"$TMP/badcl.err"
ok $(($? == 0)) "a pod CIDR too small for one /24 per node is refused"
grep -q "badcl.yaml:.*podCIDR" "$TMP/badcl.err"
ok $? "... naming the file and field: $(head -1 "$TMP/badcl.err")"

"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/nonexistent.yaml" >/dev/null 2>&1
ok $(($? == 0)) "a missing file is an error"
"$ZH" lab down --lab t12never >/dev/null 2>&1
ok $? "lab down of a lab that never existed succeeds"
done_testing
