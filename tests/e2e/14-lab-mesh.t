#!/usr/bin/env bash
# The lab with the mesh on (the default): one `zerohop agent` per node, in
# the node's network namespace and in a lab cgroup outside the node's (so its
# own connects are not translated), started before the pods; the cluster DNS
# pod and the kube-dns Service; pods resolve Service names through their
# resolv.conf and reach them. --accel and --service-proxy reach the agents'
# command lines. `lab down` removes the agents' pins.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t14 curl

{
	m_idle client node-a
	M_NS=shop REPLICAS=2 m_deploy echo "" "app: echo" "$(m_img echo mendhak/http-https-echo http:8080)"
	M_NS=shop m_svc echo "app: echo" "80:http"
} >"$TMP/lab.yaml"

"$ZH" lab up --lab $LAB --accel off -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "lab up with the mesh: $(head -1 "$TMP/up.out")"
[ -s "$TMP/up.out" ] && grep -qv "up:" "$TMP/up.out" && diag "$(cat "$TMP/up.out")"
"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
J() { jq -r "$1" "$TMP/st.json"; }
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
for n in node-a node-b; do
	A=$(J ".nodes[] | select(.name==\"$n\") | .agentPid")
	ok $([ "$A" -gt 0 ] && [ -e /proc/$A ]; echo $?) "agent of $n runs (pid $A)"
	is "$(readlink /proc/$A/ns/net)" "$(ip netns exec $LAB-$n readlink /proc/self/ns/net)" \
		"... in $n's network namespace"
	is "$(grep '^0::' /proc/$A/cgroup)" "0::/zerohop-$LAB/system/agent-$n" \
		"... in its own lab cgroup, not under the node's"
	CMD=$(tr '\0' ' ' </proc/$A/cmdline)
	echo "$CMD" | grep -qE -- "agent --node $n --lab $LAB --cgroup $CG/zerohop-$LAB/$n --state /run/zerohop/$LAB/state --pin-dir /sys/fs/bpf/zerohop/$LAB/$n --health-file /run/zerohop/$LAB/nodes/$n/agent.health --metrics-addr [0-9.]+:15020 --accel off"
	ok $? "... with the lab's node, cgroup, state, pin dir, health file, metrics address and --accel off"
done
is "$(J '.pods[] | select(.namespace=="kube-system") | .name + "@" + .node + ":" + .phase')" \
	"cluster-dns@node-a:Running" "cluster DNS pod on the first node"
X() { "$ZH" lab exec --lab $LAB "$@"; }
is "$(X client -- getent hosts kube-dns.kube-system | awk '{print $1}')" "10.96.0.10" \
	"kube-dns Service has clusterIP service CIDR + 10, and resolves"
SIP=$(X client -- getent hosts echo.shop | awk '{print $1}')
echo "$SIP" | awk -F. '{ exit !($1 == 10 && $2 >= 96 && $2 < 112) }'
ok $? "a Service name resolves to a ClusterIP in 10.96.0.0/12 ($SIP)"
R=$(X client -- curl -s -m 5 http://echo.shop/)
echo "$R" | grep -q "echo-"
ok $? "curl http://echo.shop/ from a pod reaches an echo pod"
X -n shop deploy/echo -- hostname | grep -q "^echo-"
ok $? "lab exec -n shop deploy/echo picks an echo pod"
X deploy/shop/echo -- hostname | grep -q "^echo-"
ok $? "lab exec deploy/shop/echo, too"
ls /sys/fs/bpf/zerohop/$LAB/node-a >/dev/null 2>&1
ok $? "the agent pinned its state under /sys/fs/bpf/zerohop/$LAB/node-a"
"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down"
[ ! -e /sys/fs/bpf/zerohop/$LAB ]
ok $? "pins removed"
alive=0
for p in $(J '.nodes[].agentPid'); do
	s=$(awk '{print $3}' /proc/$p/stat 2>/dev/null)
	[ -n "$s" ] && [ "$s" != Z ] && alive=1
done
ok $alive "agents stopped"

"$ZH" lab up --lab $LAB --service-proxy nft >"$TMP/up2.out" 2>&1
ok $? "lab up --service-proxy nft"
"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
A=$(J '.nodes[0].agentPid')
tr '\0' ' ' </proc/$A/cmdline | grep -q -- "--mode nft"
ok $? "... runs the agents with --mode nft"
"$ZH" lab up --lab $LAB --no-mesh --service-proxy nft >/dev/null 2>&1
ok $(($? == 0)) "--no-mesh with --service-proxy nft is refused"
"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down"
done_testing
