#!/usr/bin/env bash
# The node daemons stand without the lab: `zerohop agent` and `zerohop
# proxy` run from flags only (cgroup, pin dir, node address, state dir), as
# on a node that no `zerohop lab` made — here a network namespace, two
# cgroups and a state directory this test makes itself, with no lab.conf
# anywhere. A client in the node cgroup reaches an L4 Service (translated at
# connect, getpeername shows the ClusterIP) and an L7 Service (captured to
# the proxy, routed per request), both answered by `zerohop echo` backends.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
test_setup t18 jq curl nsenter /usr/bin/python3
NS=zh-t18-node
CG2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
[ -n "$CG2" ] || { mkdir -p /run/zerohop/cgroup2; mount -t cgroup2 none /run/zerohop/cgroup2; CG2=/run/zerohop/cgroup2; }
BASE=$CG2/zh-t18
NODECG=$BASE/node
PXCG=$BASE/proxy
PIN=/sys/fs/bpf/zh-t18-node
DMCG=$BASE/daemons	# the agent and the echo servers: every process this test starts is in one of its cgroups
# Stop every process in the test's cgroups (ours alone: the test made them),
# then remove pins, cgroups and the namespace.
test_cleanup() {
	local cg p
	for cg in $DMCG $PXCG $NODECG; do
		[ -f $cg/cgroup.procs ] || continue
		for p in $(cat $cg/cgroup.procs); do kill "$p" 2>/dev/null; done
	done
	for cg in $DMCG $PXCG $NODECG; do
		for _ in $(seq 50); do [ -s $cg/cgroup.procs ] || break; sleep 0.1; done
		rmdir $cg 2>/dev/null
	done
	rmdir $BASE 2>/dev/null
	"$ZH" agent --cleanup --node node-a --pin-dir $PIN >/dev/null 2>&1
	rm -rf $PIN
	ip netns del $NS 2>/dev/null
}
test_cleanup
ls /run/zerohop/*/lab.conf >/dev/null 2>&1 && diag "(labs of other tests may be up; this test uses none of them)"

# The node: a network namespace with its address, the proxy's upstream
# source (.1 of the pod range) and two pod addresses, all on lo.
ip netns add $NS
ip -n $NS link set lo up
for a in 10.250.0.1 10.244.0.1 10.244.0.2 10.244.0.3; do ip -n $NS addr add $a/32 dev lo; done
mkdir -p $NODECG $PXCG $DMCG
IN() { nsenter --net=/run/netns/$NS "$@"; }
# run CMD in cgroup CG inside the node's netns (the teardown stops what is
# in the test's cgroups, so no PID needs keeping)
RUNIN() { nsenter --net=/run/netns/$NS sh -c 'echo $$ > "$0"/cgroup.procs && exec "$@"' "$@"; }
# run CMD in the node cgroup (a pod's view)
POD() { RUNIN $NODECG "$@"; }

mkdir -p "$TMP/state"
cat >"$TMP/m.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.96.18.10
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web7}
spec:
  clusterIP: 10.96.18.11
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web7}
spec:
  parentRefs: [{group: "", kind: Service, name: web7, port: 80}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {add: [{name: x-via, value: zerohop-proxy}]}
    backendRefs: [{name: web7, port: 80}]
YAML
for i in 1 2; do
	cat >>"$TMP/m.yaml" <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: web-$i, labels: {app: web}}
spec: {nodeName: node-a, containers: [{name: c}]}
status: {podIP: 10.244.0.$((i + 1)), phase: Running}
YAML
done
"$ZH" apply --state "$TMP/state" -f "$TMP/m.yaml" >"$TMP/apply.out" 2>&1
ok $? "apply into a plain state directory ($(head -1 "$TMP/apply.out"))"

for i in 1 2; do
	RUNIN $DMCG "$ZH" echo --http 10.244.0.$((i + 1)):8080 --tcp 10.244.0.$((i + 1)):8078 --udp 10.244.0.$((i + 1)):8078 --name web-$i \
		>"$TMP/echo$i.log" 2>&1 &
done

RUNIN $DMCG "$ZH" agent --node node-a --cgroup $NODECG --pin-dir $PIN --state "$TMP/state" \
	--health-file "$TMP/agent.health" >"$TMP/agent.log" 2>&1 &
for _ in $(seq 100); do grep -q '^state ready' "$TMP/agent.health" 2>/dev/null && break; sleep 0.1; done
grep -q '^state ready' "$TMP/agent.health"
ok $? "the agent started from flags and published 'state ready'"
[ "$(awk '$1 == "generation" {print $2}' "$TMP/agent.health")" -ge 1 ]
ok $? "with a synced generation"
ls /run/zerohop/*/lab.conf 2>/dev/null | grep -q zh-t18
is $? 1 "no lab.conf of this node anywhere"

RUNIN $PXCG "$ZH" proxy --node node-a --cgroup $NODECG \
	--pin-dir $PIN --node-ip 10.250.0.1 --state "$TMP/state" >"$TMP/proxy.log" 2>&1 &
for _ in $(seq 100); do IN ss -Htln 'sport = :15001' | grep -q 15001 && break; sleep 0.1; done
IN ss -Htln 'sport = :15001' | grep -q 10.250.0.1
ok $? "the proxy started from flags and listens on 10.250.0.1:15001"

# L4: translated at connect; getpeername shows the ClusterIP
cat >"$TMP/peer.py" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], 80), timeout=5)
s.sendall(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")
d = b""
while True:
    x = s.recv(65536)
    if not x: break
    d += x
print(s.getpeername()[0], d.split(b"\r\n\r\n", 1)[1].decode())
PY
out=$(POD $PY "$TMP/peer.py" 10.96.18.10 2>&1)
is "${out%% *}" "10.96.18.10" "L4: getpeername shows the ClusterIP"
host=$(echo "${out#* }" | jq -r .name 2>/dev/null)
case "$host" in web-1|web-2) r=0 ;; *) r=1 ;; esac
ok $r "L4: answered by a backend ($host)"
seen=$(for _ in $(seq 20); do POD curl -s -m 5 http://10.96.18.10/ | jq -r .name; done | sort -u | tr '\n' ' ')
is "$seen" "web-1 web-2 " "L4: 20 connections reach both backends"

# L7: captured by the proxy, the route's filter applied
body=$(POD curl -s -m 5 http://10.96.18.11/)
is "$(echo "$body" | jq -r '.headers["x-via"]')" "zerohop-proxy" "L7: the request went through the proxy (route filter applied)"
case "$(echo "$body" | jq -r .name)" in web-1|web-2) r=0 ;; *) r=1 ;; esac
ok $r "L7: answered by a backend"
case "$(echo "$body" | jq -r .remote)" in 10.244.0.1:*) r=0 ;; *) r=1 ;; esac
ok $r "L7: the backend saw the proxy's upstream source ($(echo "$body" | jq -r .remote))"

# Counters the agent keeps in its own pin dir
stats=$(bpftool map dump pinned $PIN/lb_stats 2>/dev/null | grep -c value)
[ "${stats:-0}" -ge 1 ]
ok $? "the agent's maps are pinned in the pin dir it was given ($PIN)"

test_cleanup
left=$(pgrep -f "zh-t18|--name web-[12]$" | tr '\n' ' ')
is "$left" "" "teardown: no process of this test left"
ok $([ ! -e $BASE ] && [ ! -e $PIN ] && ! ip netns list | grep -q "^$NS"; echo $?) "teardown: no cgroup, pin or namespace left"
done_testing
