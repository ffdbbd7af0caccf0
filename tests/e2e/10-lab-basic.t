#!/usr/bin/env bash
# The lab, plain L3 (no mesh): two nodes, a client and an echo server on
# node-a, an echo server on node-b. Pods reach each other by pod IP over HTTP
# and TCP echo on the same node and across nodes; each pod has its own host
# name, resolv.conf, hosts file and cgroup; `lab exec` passes exit codes;
# `lab status -o json` describes it all; a crashed pod command is restarted;
# and `lab down` leaves no namespace, veth, cgroup, mount, pin or process,
# while the root network namespace never gains a route, address or link.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t10 curl

# The echo server is `zerohop echo`, through its well-known image.
ECHO=$(m_img echo mendhak/http-https-echo "8080 8078")
{
	cat <<EOF
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata:
  name: t10
spec:
  nodes:
  - name: node-a
  - name: node-b
---
EOF
	m_idle client node-a
	m_pod srv-a node-a "app: echo" "$ECHO"
	M_NS=other m_pod srv-b node-b "app: echo" "$ECHO"
} >"$TMP/lab.yaml"

# Root network namespace: addresses (without their counting-down lifetimes),
# routes (without RA expiry timers), link names, rules.
root_net() {
	{
		ip -o addr | awk '{ print $2, $3, $4 }'
		ip -o route
		ip -o -6 route | sed 's/ expires [0-9]*sec//'
		ip -o link | awk -F': ' '{ print $2 }' | sed 's/@.*//'
		ip rule
	} 2>&1 | sort
}
root_net >"$TMP/root.before"

START=$(date +%s.%N)
"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "lab up: $(head -1 "$TMP/up.out")"
grep -q "$LAB up" "$TMP/up.out" || diag "$(cat "$TMP/up.out")"

"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
ok $? "lab status -o json"
J() { jq -r "$1" "$TMP/st.json"; }
is "$(J '.lab')" "$LAB" "status names the lab"
is "$(J '[.nodes[].name] | join(",")')" "node-a,node-b" "two nodes"
is "$(J '.nodes[0].ip + " " + .nodes[1].ip')" "10.250.0.1 10.250.0.2" "nodes have fabric IPs"
is "$(J '.nodes[0].podCIDR + " " + .nodes[1].podCIDR')" "10.244.0.0/24 10.244.1.0/24" "each node a /24 of the pod CIDR"
is "$(J '[.pods[] | .namespace + "/" + .name + "@" + .node + ":" + .phase] | join(" ")')" \
	"default/client@node-a:Running default/srv-a@node-a:Running other/srv-b@node-b:Running" \
	"pods placed by nodeName, all Running"
IP_A=$(J '.pods[] | select(.name=="srv-a") | .ip')
IP_B=$(J '.pods[] | select(.name=="srv-b") | .ip')
IP_C=$(J '.pods[] | select(.name=="client") | .ip')
case "$IP_A $IP_B $IP_C" in
10.244.0.*\ 10.244.1.*\ 10.244.0.*) ok 0 "pod IPs come from their node's range ($IP_C, $IP_A, $IP_B)" ;;
*) ok 1 "pod IPs come from their node's range ($IP_C, $IP_A, $IP_B)" ;;
esac
PID_A=$(J '.pods[] | select(.name=="srv-a") | .pid')

X() { "$ZH" lab exec --lab $LAB "$@"; }
is "$(X client -- hostname)" "client" "hostname in a pod is the pod name"
is "$(X other/srv-b -- hostname)" "srv-b" "lab exec NAMESPACE/NAME"
is "$(X -n other srv-b -- hostname)" "srv-b" "lab exec -n NAMESPACE NAME"
is "$(X client -- cat /etc/resolv.conf | head -2 | tr '\n' '|')" \
	"nameserver 10.96.0.10|search default.svc.cluster.local svc.cluster.local cluster.local|" \
	"pod resolv.conf: cluster DNS, search domains of its namespace"
X other/srv-b -- grep -q "search other.svc.cluster.local" /etc/resolv.conf
ok $? "resolv.conf search domain follows the pod's namespace"
X client -- grep -q "^$IP_C[[:space:]]client$" /etc/hosts
ok $? "pod /etc/hosts names the pod"
grep -q "^nameserver 10.96.0.10" /etc/resolv.conf
ok $((! $?)) "the host's /etc/resolv.conf is untouched"
X client -- cat /proc/self/cgroup | grep -q "^0::/zerohop-$LAB/node-a/default_client$"
ok $? "lab exec runs in the pod's cgroup"
grep -q "^0::/zerohop-$LAB/node-a/default_srv-a$" /proc/$PID_A/cgroup
ok $? "the pod's command runs in its cgroup under its node's"
is "$(readlink /proc/$PID_A/ns/net)" "$(X srv-a -- readlink /proc/self/ns/net)" \
	"lab exec joins the pod's network namespace"
ip netns list | grep -q "^$LAB-p-other-srv-b"
ok $? "pod network namespaces are registered with ip netns"

X client -- sh -c 'exit 7'
is $? 7 "lab exec returns the command's exit status"
X client -- /nonexistent/cmd 2>/dev/null
is $? 127 "lab exec of a missing command: 127"
X nosuchpod -- true 2>/dev/null
ok $(($? == 0)) "lab exec to an unknown pod fails"
is "$("$ZH" lab exec --lab $LAB --node node-b -- ip -o -4 addr show eth0 | awk '{print $4}')" \
	"10.250.0.2/24" "lab exec --node runs in the node's namespace"

# Reachability by pod IP: same node and across nodes, HTTP and TCP echo.
http() { X client -- curl -s -m 5 "http://$1:8080/hello?x=1"; }
R=$(http "$IP_A"); echo "$R" | grep -q "srv-a"
ok $? "HTTP same node (client -> srv-a) answered by srv-a"
R=$(http "$IP_B"); echo "$R" | grep -q "srv-b"
ok $? "HTTP across nodes (client -> srv-b) answered by srv-b"
R=$(X other/srv-b -- curl -s -m 5 "http://$IP_A:8080/")
echo "$R" | grep -q "srv-a"
ok $? "HTTP across nodes, the other way (srv-b -> srv-a)"
tcp_echo() { X client -- bash -c "exec 3<>/dev/tcp/$1/8078 && printf 'ping-%s\n' $2 >&3 && read -t 5 l <&3 && echo \$l"; }
is "$(tcp_echo "$IP_A" same)" "ping-same" "TCP echo same node"
is "$(tcp_echo "$IP_B" cross)" "ping-cross" "TCP echo across nodes"
head -c 300000 /dev/urandom >"$TMP/blob"
X client -- bash -c "exec 3<>/dev/tcp/$IP_B/8078; cat $TMP/blob >&3 & head -c 300000 <&3" >"$TMP/blob.back"
cmp -s "$TMP/blob" "$TMP/blob.back"
ok $? "300 kB through TCP echo across nodes comes back intact"

root_net >"$TMP/root.during"
diff "$TMP/root.before" "$TMP/root.during" >"$TMP/root.diff"
ok $? "root netns: no new route, address, link or rule while the lab is up"
[ -s "$TMP/root.diff" ] && diag "$(cat "$TMP/root.diff")"

# Restart of a crashed pod command (restartPolicy Always).
kill -9 "$PID_A"
NEW=""
for _ in $(seq 50); do
	"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
	NEW=$(J '.pods[] | select(.name=="srv-a") | "\(.pid) \(.restarts)"')
	[ "${NEW%% *}" != "$PID_A" ] && [ "${NEW%% *}" != 0 ] && break
	sleep 0.1
done
is "${NEW#* }" "1" "killed pod command restarted (restarts=1, pid $PID_A -> ${NEW%% *})"
for _ in $(seq 30); do R=$(http "$IP_A") && break; sleep 0.1; done
echo "$R" | grep -q "srv-a"
ok $? "restarted pod serves again"
grep -q "restart 1" "/run/zerohop/$LAB/pods/default_srv-a/log"
ok $? "pod log records the restart"

"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/lab.yaml" >/dev/null 2>"$TMP/again.err"
ok $(($? == 0)) "lab up on a lab that is up is an error"
grep -q "already up" "$TMP/again.err"
ok $? "... saying it is already up"

# Everything this lab made, to check it is gone after down.
"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
LAB_PIDS="$(J '.supervisorPid') $(J '.pods[].pid')"
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down"
ip netns list | grep -q "^$LAB-"
ok $((! $?)) "no network namespace of the lab left"
[ ! -e "$CG/zerohop-$LAB" ]
ok $? "no cgroup of the lab left ($CG/zerohop-$LAB)"
[ ! -e "/run/zerohop/$LAB" ]
ok $? "run dir removed"
[ ! -e "/sys/fs/bpf/zerohop/$LAB" ]
ok $? "no BPF pin dir left"
grep -q "/run/zerohop/$LAB\|/run/netns/$LAB-" /proc/self/mountinfo
ok $((! $?)) "no mount of the lab left"
is "$(pids_alive $LAB_PIDS)" "" "no process of the lab left"
ip -o link | grep -q "@.*link-netns $LAB-\|p[0-9a-f]\{10\}"
ok $((! $?)) "no veth of the lab in the root namespace"
root_net >"$TMP/root.after"
diff "$TMP/root.before" "$TMP/root.after" >"$TMP/root.diff"
ok $? "root netns after down: identical routes, addresses, links, rules"
"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down again (idempotent)"
done_testing
