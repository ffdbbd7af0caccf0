#!/usr/bin/env bash
# 35-agent-v6mapped.t — Services from AF_INET6 sockets (issue 14): a
# dual-stack client (gRPC, the JVM, Node.js) connects to a v4-mapped
# ClusterIP ::ffff:VIP and must get exactly what an AF_INET client gets:
#  - the two-line reproduction: socket(AF_INET6).connect(('::ffff:'+VIP, 80))
#    works and getpeername() shows ::ffff:VIP;
#  - weighted choice over backends on both nodes;
#  - an L7 Service (annotation zerohop.io/l7) through the node proxy;
#  - NetworkPolicy: an egress-denied connect fails at once with EPERM, as
#    from AF_INET; a Service without endpoints: ECONNREFUSED at once;
#  - UDP: unconnected (sendto/recvfrom) and connected, replies from
#    ::ffff:VIP; a DNS query to the v4-mapped kube-dns ClusterIP;
#  - the same-node short-circuit takes the AF_INET6 client's connection
#    (accel counters move, bytes redirected between a v6 and a v4 socket),
#    and an AF_INET client's connection to a dual-stack server (AF_INET6
#    listener on [::], accepting v4-mapped);
#  - a native IPv6 destination ([::1]) is left alone.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
lab_test_setup t14v6
V6=$(cd "$(dirname "$0")/../bpf/lib" && pwd)/v6probe.py

who_pod() {	# NAME NODE: the backends, on both nodes
	m_pod "$1" "$2" "app: $1, svc: who" \
		"$(m_ctr who http:8080 python3 "$PROBE" who-tcp 8080)" \
		"$(m_ctr udp dns:5353/UDP python3 "$PROBE" who-udp 5353)" \
		"$(m_ctr web web:9090 "$ZH" echo --http 9090 --tcp 9091 --udp 9092)" \
		"$(m_ctr dual "" /usr/bin/python3 "$V6" echo6 9093)"
}
{
	who_pod who-a node-a
	who_pod who-b node-b
	m_idle client node-a
	m_idle intruder node-a
	m_idle limited node-a
	m_pod dual node-b "app: dual" "$(m_ctr s "" /usr/bin/python3 "$V6" echo6 9093)"
	m_svc dual "app: dual" "7:9093"
	m_svc who "svc: who" "http=80:http dns=53:dns/UDP"
	m_svc near "app: who-a" "echo=7:9091"
	m_svc near6 "app: who-a" "echo=7:9093"
	m_svc empty "app: nothing-here" "80:80"
	m_svc web-l7 "svc: who" "web=80:web" "" 'zerohop.io/l7: "true"'
	m_ingress_from dual-from-client "app: dual" "app: client"
	cat <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: limited-dns-only}
spec:
  podSelector: {matchLabels: {app: limited}}
  policyTypes: [Egress]
  egress: [{ports: [{port: 53, protocol: UDP}, {port: 5353, protocol: UDP}]}]
YAML
} >"$TMP/app.yaml"

lab_up "backends on node-a and node-b, clients on node-a, accel on" --accel on -f "$TMP/app.yaml"

x() { timeout 60 "$ZH" lab exec --lab $LAB "$@"; }
vip() { "$ZH" get --lab $LAB services -o json | jq -r ".[] | select(.name==\"$1\") | .clusterIP"; }
VIP=$(vip who); NEAR=$(vip near); NEAR6=$(vip near6); DUAL=$(vip dual); EMPTY=$(vip empty); L7=$(vip web-l7)
st() { "$ZH" get --lab $LAB stats -o json | jq ".\"node-a\".$1 // 0"; }
diag "who $VIP near $NEAR empty $EMPTY web-l7 $L7"

# wait until node-a's agent serves the Service to AF_INET clients
v4_served() {
	local r
	r=$(x client -- /usr/bin/python3 "$V6" tcp 4 "$VIP" 80 1 2>/dev/null) &&
		[ "$(echo "$r" | jq '.errors | length')" = 0 ]
}
wait_until 5 v4_served

# ---- the two-line reproduction ----------------------------------------------
got=$(x client -- /usr/bin/python3 -c "
import socket, sys
s = socket.socket(socket.AF_INET6); s.settimeout(3)
s.connect(('::ffff:' + sys.argv[1], 80)); print(s.getpeername()[:2])" "$VIP" 2>&1)
is "$got" "('::ffff:$VIP', 80)" "AF_INET6 connect to ::ffff:ClusterIP works, getpeername is the v4-mapped ClusterIP"

# ---- TCP: weighted choice, both nodes ----------------------------------------
r=$(x client -- /usr/bin/python3 "$V6" tcp 6 "$VIP" 80 100)
diag "$r"
is "$(echo "$r" | jq '.errors | length')" 0 "AF_INET6: 100 connections to ::ffff:$VIP:80, none failed"
is "$(echo "$r" | jq -c '.counts | keys')" '["who-a","who-b"]' "AF_INET6: both backends answered (same node and other node)"
is "$(echo "$r" | jq -r .peer)" "[::ffff:$VIP]:80" "AF_INET6: getpeername shows [::ffff:ClusterIP]:80"
r4=$(x client -- /usr/bin/python3 "$V6" tcp 4 "$VIP" 80 20)
is "$(echo "$r4" | jq -r .peer)" "$VIP:80" "AF_INET (unchanged): getpeername shows ClusterIP:80"

# ---- L7 Service through the node proxy ----------------------------------------
r=$(x client -- /usr/bin/python3 "$V6" http 6 "$L7" 80 /)
diag "$r"
is "$(echo "$r" | jq -r .status)" "HTTP/1.1 200 OK" "AF_INET6 to an L7 Service: 200 through the node proxy"
is "$(echo "$r" | jq -r .peer)" "[::ffff:$L7]:80" "AF_INET6 to an L7 Service: getpeername shows the ClusterIP"
r=$(x client -- /usr/bin/python3 "$V6" http 4 "$L7" 80 /)
is "$(echo "$r" | jq -r .status)" "HTTP/1.1 200 OK" "AF_INET to the same L7 Service: 200"

# ---- refusals: no backend, policy ---------------------------------------------
r=$(x client -- /usr/bin/python3 "$V6" tcp 6 "$EMPTY" 80 1)
is "$(echo "$r" | jq -c .errors)" '{"ECONNREFUSED":1}' "AF_INET6 to a Service without endpoints: ECONNREFUSED"
ok "$(echo "$r" | jq '.fail_ms < 200' | grep -q true; echo $?)" "  at once ($(echo "$r" | jq .fail_ms) ms)"
for fam in 4 6; do
	r=$(x limited -- /usr/bin/python3 "$V6" tcp $fam "$VIP" 80 1)
	is "$(echo "$r" | jq -c .errors)" '{"EPERM":1}' "AF_INET$([ $fam = 6 ] && echo 6) from an egress-denied pod to the ClusterIP: EPERM"
	ok "$(echo "$r" | jq '.fail_ms < 500' | grep -q true; echo $?)" "  fails fast ($(echo "$r" | jq .fail_ms) ms)"
done
r=$(x limited -- /usr/bin/python3 "$V6" udp 6 "$VIP" 53 4 unconnected)
is "$(echo "$r" | jq .lost)" 0 "the same pod's allowed UDP via AF_INET6 still passes"
# ingress policy in front of a dual-stack server (AF_INET6 listener on [::],
# node-b): its accepted sockets are AF_INET6 with v4-mapped ends
for fam in 6 4; do
	r=$(x client -- /usr/bin/python3 "$V6" rtt $fam "$DUAL" 7 5)
	is "$(echo "$r" | jq -c '[.bytes, .error]')" '[5000,null]' \
		"AF_INET$([ $fam = 6 ] && echo 6) client -> dual-stack server admitted by its ingress policy: 5 round trips"
done
r=$(x intruder -- /usr/bin/python3 "$V6" rtt 6 "$DUAL" 7 1)
is "$(echo "$r" | jq -r .error)" TIMEOUT "AF_INET6 from a pod the server's ingress policy denies: SYN dropped (timeout)"

# ---- UDP ----------------------------------------------------------------------
r=$(x client -- /usr/bin/python3 "$V6" udp 6 "$VIP" 53 40 unconnected)
diag "$r"
is "$(echo "$r" | jq .lost)" 0 "AF_INET6 unconnected UDP (sendto/recvfrom): 40 datagrams answered"
is "$(echo "$r" | jq -r '.sources | keys | join(",")')" "[::ffff:$VIP]:53" "  every reply comes from [::ffff:ClusterIP]:53"
is "$(echo "$r" | jq '.counts | length')" 2 "  chosen per datagram (both backends answered)"
r=$(x client -- /usr/bin/python3 "$V6" udp 6 "$VIP" 53 10 connected)
diag "$r"
is "$(echo "$r" | jq .lost)" 0 "AF_INET6 connected UDP: 10 datagrams answered"
is "$(echo "$r" | jq -r '.sources | keys | join(",")')" "[::ffff:$VIP]:53" "  replies from [::ffff:ClusterIP]:53"
is "$(echo "$r" | jq -r .peer)" "[::ffff:$VIP]:53" "  getpeername is [::ffff:ClusterIP]:53"
r=$(x client -- /usr/bin/python3 "$V6" dns 6 who.default.svc.cluster.local)
diag "$r"
NS=$(echo "$r" | jq -r .ns)
is "$(echo "$r" | jq -r .answer)" "$VIP" "DNS over AF_INET6 UDP to ::ffff:kube-dns: who resolves to its ClusterIP"
is "$(echo "$r" | jq -r .source)" "[::ffff:$NS]:53" "  the reply's source is [::ffff:kube-dns ClusterIP]:53"

# ---- same-node short-circuit ---------------------------------------------------
s0=$(st accel_sockets); m0=$(st accel_msgs)
got=$(x client -- /usr/bin/python3 -c "
import socket, sys
s = socket.socket(socket.AF_INET6); s.settimeout(3)
s.connect(('::ffff:' + sys.argv[1], 7))
n = 0
for i in range(20):
    s.sendall(b'x' * 1000)
    b = b''
    while len(b) < 1000:
        b += s.recv(1000 - len(b))
    n += len(b)
print(n)" "$NEAR" 2>&1)
s1=$(st accel_sockets); m1=$(st accel_msgs)
is "$got" 20000 "AF_INET6 client <-> same-node echo backend: 20 round trips intact"
diag "accel sockets $s0 -> $s1, msgs $m0 -> $m1"
ok "$([ $((s1 - s0)) -ge 2 ]; echo $?)" "  both ends short-circuited (accel_sockets +$((s1 - s0)))"
ok "$([ $((m1 - m0)) -ge 20 ]; echo $?)" "  messages redirected between the v6 client and the v4 server (accel_msgs +$((m1 - m0)))"

s0=$(st accel_sockets); m0=$(st accel_msgs)
r=$(x client -- /usr/bin/python3 "$V6" rtt 4 "$NEAR6" 7 20)
s1=$(st accel_sockets); m1=$(st accel_msgs)
is "$(echo "$r" | jq .bytes)" 20000 "AF_INET client <-> same-node dual-stack ([::]) server: 20 round trips intact"
diag "accel sockets $s0 -> $s1, msgs $m0 -> $m1"
ok "$([ $((s1 - s0)) -ge 2 ]; echo $?)" "  both ends short-circuited (accel_sockets +$((s1 - s0)))"
ok "$([ $((m1 - m0)) -ge 20 ]; echo $?)" "  messages redirected between the v4 client and the v6 server (accel_msgs +$((m1 - m0)))"

# ---- native IPv6 left alone, counters ------------------------------------------
r=$(x client -- /usr/bin/python3 "$V6" native6)
is "$(echo "$r" | jq -r .result)" OK "native IPv6 ([::1]) from an AF_INET6 socket: untouched, connects"
ok "$([ "$(st v6_native_passed)" -ge 1 ]; echo $?)" "get stats: v6_native_passed counted it"
ok "$([ "$(st v6_socket_v4mapped_service)" -ge 100 ]; echo $?)" \
	"get stats: v6_socket_v4mapped_service counts the AF_INET6 translations ($(st v6_socket_v4mapped_service))"
done_testing
