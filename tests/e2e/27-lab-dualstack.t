#!/usr/bin/env bash
# A dual-stack lab (docs/ipv6.md): a Cluster with an IPv4 and
# an IPv6 pod CIDR gives every node a fabric IPv6 and a /64, every pod an
# IPv6 /128 next to its IPv4 (same host byte), and plain L3 IPv6 routing
# between nodes. curl -6 and a Python AF_INET6 socket reach a server pod by
# its IPv6 on the same node and across nodes (the peer is the pod itself:
# nothing translates native IPv6 yet), IPv4 still works, `lab status` shows
# both families, the mesh serves a dual-stack Service on both ClusterIPs,
# and the root network namespace gains nothing. No switch is needed
# (there was an IPv6 preview switch until every part had an IPv6 path).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t27 curl

cat >"$TMP/lab.yaml" <<EOF
$(m_cluster t27 "node-a node-b" dual)
$(m_pod client node-a "app: client" "$(m_ctr c "" sleep 100000)")
$(m_pod client-b node-b "app: client" "$(m_ctr c "" sleep 100000)")
$(m_pod srv-a node-a "app: srv" "$(m_ctr web "8080" "$PY" -m http.server --bind :: 8080 --directory "$TMP")")
EOF
echo hello >"$TMP/index.html"

root_net() {	# the root namespace's IPv6 addresses and routes
	{ ip -o -6 addr | awk '{ print $2, $4 }'; ip -o -6 route | sed 's/ expires [0-9]*sec//'; } |
		sort
}
root_net >"$TMP/root.before"

"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "lab up builds the dual-stack Cluster, no switch needed: $(tail -1 "$TMP/up.out")"
wait_until 20 lab_running 3
ok $? "three pods Running"

"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
J() { jq -r "$1" "$TMP/st.json"; }
is "$(J '.podCIDR6')" "fd00:10:244::/56" "status: the IPv6 pod CIDR"
is "$(J '[.nodes[] | .ip6 + "," + .podCIDR6] | join(" ")')" \
	"fd7a:fab::1,fd00:10:244::/64 fd7a:fab::2,fd00:10:244:1::/64" \
	"each node: a fabric IPv6 and the i-th /64"
pod6() { J ".pods[] | select(.name==\"$1\") | .ip6"; }
pod4() { J ".pods[] | select(.name==\"$1\") | .ip"; }
A4=$(pod4 srv-a) A6=$(pod6 srv-a) C6=$(pod6 client) B6=$(pod6 client-b)
is "$A6" "fd00:10:244::${A4##*.}" "a pod's IPv6: its node's /64 + its IPv4 host byte ($A4, $A6)"
case "$B6" in fd00:10:244:1::*) r=0 ;; *) r=1 ;; esac
ok $r "the node-b pod is in node-b's /64 ($B6)"
"$ZH" lab status --lab $LAB >"$TMP/st.txt"
grep -q "srv-a .* $A6\$" "$TMP/st.txt"
ok $? "lab status (table) shows the pod's IPv6"

X() { "$ZH" lab exec --lab $LAB "$@"; }
X client -- ip -6 -o addr show dev eth0 | grep -q "inet6 $C6/128"
ok $? "the pod has its IPv6 /128 on eth0"
X client -- ip -6 route show default | grep -q "via fe80::1 dev eth0"
ok $? "and an IPv6 default route via fe80::1"

up6() { X client -- curl -6 -s -o /dev/null --max-time 2 "http://[$A6]:8080/index.html"; }
wait_until 20 up6
ok $? "the server answers over IPv6"
is "$(X client -- curl -6 -s --max-time 5 "http://[$A6]:8080/index.html")" "hello" \
	"curl -6 to the pod's IPv6, same node"
is "$(X client-b -- curl -6 -s --max-time 5 "http://[$A6]:8080/index.html")" "hello" \
	"curl -6 to the pod's IPv6, across nodes (plain L3 over the fabric)"
is "$(X client-b -- curl -4 -s --max-time 5 "http://$A4:8080/index.html")" "hello" \
	"IPv4 still works across nodes"
is "$(X client-b -- "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.settimeout(5)
s.connect((sys.argv[1], 8080))
print(s.getpeername()[0], s.getsockname()[0])' "$A6")" "$A6 $B6" \
	"Python AF_INET6: the peer is the pod's IPv6, the source the client's own"

# The mesh on the same cluster: agents and the cluster DNS load the
# dual-stack state; a PreferDualStack Service gets both ClusterIPs and the
# DNS serves both; both ClusterIPs are translated.
"$ZH" lab down --lab $LAB >/dev/null 2>&1
m_svc web "app: srv" "80:8080" >>"$TMP/lab.yaml"
sed -i 's/^spec: {selector: {app: srv}/spec: {ipFamilyPolicy: PreferDualStack, selector: {app: srv}/' "$TMP/lab.yaml"
"$ZH" lab up --lab $LAB -f "$TMP/lab.yaml" >"$TMP/up2.out" 2>&1
ok $? "lab up with the mesh: $(tail -1 "$TMP/up2.out")"
wait_until 30 lab_synced node-a && wait_until 30 lab_synced node-b
ok $? "both agents run and applied the dual-stack state"
"$ZH" get services --lab $LAB -o json >"$TMP/svc.json"
V4=$(jq -r '.[] | select(.name=="web") | .clusterIPs[0]' "$TMP/svc.json")
V6=$(jq -r '.[] | select(.name=="web") | .clusterIPs[1]' "$TMP/svc.json")
is "$(jq -r '.[] | select(.name=="web") | .ipFamilies | join(",")' "$TMP/svc.json")" "IPv4,IPv6" \
	"the Service is dual-stack ($V4, $V6)"
dns_both() { [ "$(X client-b -- getent ahosts web.default.svc.cluster.local | awk '{print $1}' |
	sort -u | tr '\n' ' ')" = "$V4 $V6 " ]; }
wait_until 20 dns_both
ok $? "the cluster DNS gives a pod both ClusterIPs (getent ahosts)"
is "$(X client-b -- curl -4 -s --max-time 5 "http://web.default.svc.cluster.local/index.html")" "hello" \
	"curl -4 by name through the IPv4 ClusterIP, across nodes"
is "$(X client-b -- curl -6 -s --max-time 5 "http://[$V6]/index.html")" "hello" \
	"curl -6 through the IPv6 ClusterIP, across nodes (tests/e2e/28-svc-ipv6.t has more)"

"$ZH" lab down --lab $LAB >"$TMP/down.out" 2>&1
ok $? "lab down"
ip netns list | grep -q "^$LAB-"
ok $((! $?)) "no namespace of the lab left"
root_net >"$TMP/root.after"
diff "$TMP/root.before" "$TMP/root.after" >"$TMP/root.diff"
ok $? "the root namespace's IPv6 addresses and routes are untouched"
done_testing
