#!/usr/bin/env bash
# 30-agent-svc.t — Services resolved at connect() in the lab: backends on the
# client's node and on the other node, getpeername = ClusterIP, connected and
# unconnected UDP, cluster DNS names, ECONNREFUSED without endpoints, a route
# that needs L7 (on its own Service, who-l7, so `who` stays at L4) reported
# as enforced by the node proxy, every bad input rejected with the state
# unchanged.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t30

{
	for n in a b; do
		m_deploy who-$n node-$n "svc: who" \
			"$(m_ctr who http:8080 python3 "$PROBE" who-tcp 8080)" \
			"$(m_ctr udp dns:5353/UDP python3 "$PROBE" who-udp 5353)"
	done
	m_pod client node-a "app: client" "$(m_ctr c "" sleep 100000)"
	m_svc who "svc: who" "http=80:http dns=53:dns/UDP"
	m_svc empty "app: nothing-here" "80:80"
	m_route by-header who-l7 <<YAML
    - matches: [{headers: [{name: x-canary, value: "1"}]}]
      backendRefs: [{name: who-l7, port: 80}]
YAML
	m_svc who-l7 "svc: who" "http=80:http"
} > "$TMP/app.yaml"

lab_up "with 2 backends (node-a, node-b) and a client on node-a" -f "$TMP/app.yaml"

VIP=$("$ZH" get --lab $LAB services -o json | jq -r '.[] | select(.name=="who") | .clusterIP')
diag "who ClusterIP $VIP"

# Wait until the client's node agent has the service (pods start under the hooks).
wait_until 20 lab_conns_ok client who 80

# ---- TCP: backends on both nodes, getpeername = ClusterIP
case_tcp_both_nodes() {
	r=$(lab_exec client python3 "$PROBE" conns who 80 200)
	diag "$r"
	is "$(echo "$r" | jq .fails)" 0 "200 TCP connections to who:80 from a pod, none failed"
	is "$(echo "$r" | jq -r '.counts | keys | map(select(startswith("who-a"))) | length')" 1 "a backend on the client's own node answered"
	is "$(echo "$r" | jq -r '.counts | keys | map(select(startswith("who-b"))) | length')" 1 "a backend on the other node answered"
	is "$(echo "$r" | jq -r .peer)" "$VIP:80" "getpeername shows the ClusterIP"
}

# ---- unconnected UDP: a backend chosen per datagram
case_udp_unconnected() {
	r=$(lab_exec client python3 "$PROBE" udp who 53 60 unconnected)
	diag "$r"
	is "$(echo "$r" | jq .lost)" 0 "unconnected UDP: 60 datagrams answered"
	is "$(echo "$r" | jq -r '.sources | keys | join(",")')" "$VIP:53" "unconnected UDP: every reply comes from the ClusterIP"
	is "$(echo "$r" | jq '.counts | length')" 2 "unconnected UDP: chosen per datagram (both backends answered)"
}

# ---- connected UDP: one backend per socket
case_udp_connected() {
	r=$(lab_exec client python3 "$PROBE" udp who 53 20 connected)
	diag "$r"
	is "$(echo "$r" | jq .lost)" 0 "connected UDP: 20 datagrams answered"
	is "$(echo "$r" | jq -r '.sources | keys | join(",")')" "$VIP:53" "connected UDP: replies come from the ClusterIP"
	is "$(echo "$r" | jq -r .peer)" "$VIP:53" "connected UDP: getpeername is the ClusterIP"
	is "$(echo "$r" | jq '.counts | length')" 1 "connected UDP: one backend per connected socket"
}

# ---- cluster DNS names over UDP and TCP
case_dns() {
	for n in who who.default who.default.svc who.default.svc.cluster.local; do
		got=$(lab_exec client python3 -c "import socket,sys; print(socket.gethostbyname(sys.argv[1]))" "$n" 2>&1)
		is "$got" "$VIP" "DNS (through the kube-dns ClusterIP, UDP): $n"
	done
	lab_exec client python3 -c "import socket; socket.gethostbyname('nosuch.default.svc.cluster.local')" >/dev/null 2>&1
	ok $((! $?)) "DNS: an unknown name does not resolve (NXDOMAIN)"
	got=$(lab_exec client python3 - <<'PY'
import socket, struct
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in "who.default.svc.cluster.local".split(".")) + b"\0"
q += struct.pack(">HH", 1, 1)
with open("/etc/resolv.conf") as f:
    ns = [l.split()[1] for l in f if l.startswith("nameserver")][0]
s = socket.create_connection((ns, 53), timeout=2)
s.sendall(struct.pack(">H", len(q)) + q)
n = struct.unpack(">H", s.recv(2))[0]
a = b""
while len(a) < n:
    a += s.recv(n - len(a))
print(socket.inet_ntoa(a[-4:]) if struct.unpack(">H", a[6:8])[0] == 1 else "no answer")
PY
	)
	is "$got" "$VIP" "DNS over TCP to the kube-dns ClusterIP"
}

# ---- a Service without endpoints
case_no_endpoints_refused() {
	r=$(lab_exec client python3 "$PROBE" refused empty 80)
	diag "$r"
	is "$(echo "$r" | jq -r .result)" ECONNREFUSED "service without endpoints: ECONNREFUSED"
	ok $([ "$(echo "$r" | jq '.ms < 200')" = true ]; echo $?) "ECONNREFUSED at once (< 200 ms)"
}

# ---- a route that needs L7 is reported as enforced by the node proxy
case_l7_route_reported() {
	"$ZH" get --lab $LAB routes | grep by-header | grep -q "enforced by the node L7 proxy"
	ok $? "get routes: a route with matches is reported as enforced by the node proxy"
	"$ZH" get --lab $LAB backends | grep -A1 default/who-l7 | grep -q "L7: connections go through the node proxy"
	ok $? "get backends: the parent service says its connections go through the node proxy"
	is "$("$ZH" get --lab $LAB services -o json | jq -c '[.[] | select(.name=="who" or .name=="who-l7") | .name + "=" + (.l7Proxy | tostring)] | sort')" \
		'["who-l7=true","who=false"]' "get services: who-l7 through the node proxy, who at L4"
}

# ---- the agent's counters
case_stats_counted() {
	st=$("$ZH" get --lab $LAB stats -o json)
	ok $([ "$(echo "$st" | jq '."node-a".connect_translated > 0 and ."node-a".sendmsg_translated > 0 and ."node-a".connect_refused_no_backend > 0')" = true ]; echo $?) "get stats: node-a counted translations and refusals"
}

# ---- bad input: error with file:line:field, state untouched ----------------
bad() { cat >"$TMP/$1.yaml"; }	# bad NAME <<YAML: writes $TMP/NAME.yaml
case_bad_inputs_rejected() {
	bad unknown-kind <<'YAML'
apiVersion: v1
kind: Gizmo
metadata: {name: what}
YAML
	bad bad-weight <<'YAML'
apiVersion: split.smi-spec.io/v1alpha1
kind: TrafficSplit
metadata: {name: s}
spec:
  service: who
  backends:
    - {service: who, weight: -1}
YAML
	bad bad-quantity <<'YAML'
apiVersion: split.smi-spec.io/v1alpha1
kind: TrafficSplit
metadata: {name: s}
spec:
  service: who
  backends:
    - {service: who, weight: 12xyz}
YAML
	bad bad-selector <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: bad-sel}
spec:
  selector: {"app": ["not", "a", "string"]}
  ports: [{port: 80}]
YAML
	bad port-range <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: bad-port}
spec:
  selector: {app: x}
  ports: [{port: 70000}]
YAML
	bad duplicate <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: dup}
spec:
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: dup}
spec:
  ports: [{port: 81}]
YAML
	bad grpcroute <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g}
spec:
  parentRefs: [{group: "", kind: Service, name: who, port: 80}]
  rules:
    - backendRefs:
        - name: who
          port: 80
          filters: [{type: RequestMirror, requestMirror: {backendRef: {name: who, port: 80}}}]
YAML
	bad redirect-code <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: who, port: 80}]
  rules:
    - filters: [{type: RequestRedirect, requestRedirect: {statusCode: 304}}]
YAML

	before_gen=$(cat /run/zerohop/$LAB/state/generation)
	before_svc=$("$ZH" get --lab $LAB backends -o json)
	for f in unknown-kind bad-weight bad-quantity bad-selector port-range duplicate grpcroute redirect-code; do
		err=$("$ZH" apply --lab $LAB -f "$TMP/$f.yaml" 2>&1 >/dev/null)
		rc=$?
		is $rc 1 "bad input $f: apply exits 1"
		echo "$err" | grep -Eq "^$TMP/$f.yaml:[0-9]+: [^ ]+: ." 
		ok $? "bad input $f: error names file:line: field: $err"
	done
	is "$(cat /run/zerohop/$LAB/state/generation)" "$before_gen" "bad inputs: state generation unchanged"
	is "$("$ZH" get --lab $LAB backends -o json)" "$before_svc" "bad inputs: services and backends unchanged"
	r=$(lab_exec client python3 "$PROBE" conns who 80 20)
	is "$(echo "$r" | jq .fails)" 0 "bad inputs: the datapath still serves the previous state"
}

run_cases case_tcp_both_nodes case_udp_unconnected case_udp_connected case_dns \
	case_no_endpoints_refused case_l7_route_reported case_stats_counted \
	case_bad_inputs_rejected
done_testing
