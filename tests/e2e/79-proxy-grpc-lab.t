#!/usr/bin/env bash
# 79-proxy-grpc-lab.t — gRPC per-call balancing through the node proxy in
# a lab (t74, 2 nodes, mesh on), with Debian's python3-grpcio as servers
# (three pods, two nodes) and client (a pod on node-a), by ClusterIP:
#   the L7 Service (zerohop.io/l7, port named grpc: HTTP/2 to the
#   backends; an HTTPRoute with round-robin) spreads 3,000 unary calls over 4 client connections
#   1/3 each (±5 %); the same calls through the L4 Service (connect-time
#   balancing) pin each connection to one backend: every backend's count
#   is a multiple of 750. Every kind of call works through the L7 Service.
#   A Service with only a GRPCRoute attached (no annotation) is sent to
#   the node proxy by the agent because of it: its method match sends
#   every t.T/Hello call to g3 (node-a), the other calls per weights.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup "${ZH_T74_LAB:-t74}"
/usr/bin/python3 -c 'import grpc' 2>/dev/null || skip_all "python3-grpcio missing (make deps)"
GPEER=$ROOT/tests/tools/clients/grpc_peer.py

{
	for k in 1 2 3; do
		node=node-a
		[ $k -eq 2 ] && node=node-b
		m_pod "g$k" $node "app: grpc, v: g$k" "$(m_ctr s "grpc:9000" /usr/bin/python3 "$GPEER" serve "g$k" 0.0.0.0:9000 0 600)"
	done
	m_svc grpc-l7 "app: grpc" "grpc=80:grpc" 10.96.0.174 'zerohop.io/l7: "true"'
	m_svc grpc-l4 "app: grpc" "grpc=80:grpc" 10.96.0.175
	cat <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: grpc-l7, annotations: {zerohop.io/lb-policy: round-robin}}
spec:
  parentRefs: [{group: "", kind: Service, name: grpc-l7, port: 80}]
  rules:
  - backendRefs: [{name: grpc-l7, port: 80}]
---
YAML
	m_svc grpc-gr "app: grpc" "grpc=80:grpc" 10.96.0.176
	m_svc grpc-g3 "v: g3" "grpc=80:grpc"
	cat <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc-gr}
spec:
  parentRefs: [{group: "", kind: Service, name: grpc-gr, port: 80}]
  rules:
  - matches: [{method: {service: t.T, method: Hello}}]
    backendRefs: [{name: grpc-g3, port: 80}]
  - backendRefs: [{name: grpc-gr, port: 80}]
---
YAML
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/m.yaml"
T0=$SECONDS
"$ZH" lab up --lab $LAB -f "$TMP/m.yaml" >"$TMP/up.out" 2>&1
rc=$?
ok $rc "lab $LAB up with the mesh ($((SECONDS - T0)) s)"
[ $rc -eq 0 ] || { sed 's/^/# /' "$TMP/up.out"; done_testing; }
peer() { lab_exec client /usr/bin/python3 "$GPEER" "$@" 2>>"$TMP/client.err"; }
ready() { [ "$(peer spread 10.96.0.175:80 6 6 | grep -o 'g[123]=' | sort -u | wc -l)" -eq 3 ]; }
wait_until 30 ready
ok $? "the three gRPC servers answer through the L4 Service"

l7=$(peer spread 10.96.0.174:80 3000 4)
diag "L7 Service, 3000 calls over 4 connections: $l7"
for k in 1 2 3; do
	c=$(sed -n "s/.*g$k=\([0-9]*\).*/\1/p" <<<"$l7")
	awk -v c="${c:-0}" 'BEGIN { exit !(c >= 850 && c <= 1150) }'
	ok $? "L7: g$k got ${c:-0} of 3000 calls (1000 ± 150)"
done
l4=$(peer spread 10.96.0.175:80 3000 4)
diag "L4 Service, the same calls: $l4"
pinned=0
for k in 1 2 3; do
	c=$(sed -n "s/.*g$k=\([0-9]*\).*/\1/p" <<<"$l4")
	[ $((${c:-0} % 750)) -eq 0 ] || pinned=1
done
ok $pinned "L4: each connection pinned to one backend (counts are multiples of 750)"
is "$(echo "$l4" | grep -o '=[0-9]*' | tr -d = | awk '{s += $1} END {print s}')" 3000 \
	"L4: all 3000 calls answered"
peer kinds 10.96.0.174:80 >"$TMP/kinds.out"
ok $? "every kind of gRPC call through the L7 Service"
is "$(grep -c "^ok " "$TMP/kinds.out")" 8 "... all eight checks answered"
# ---- a GRPCRoute alone makes the Service L7 (agent) and routes per call --------------
gr=$(peer calls 10.96.0.176:80 t.T/Hello 300 4)
is "$gr" "g3=300" "GRPCRoute method match in the lab: every t.T/Hello call on g3"
gw=$(peer calls 10.96.0.176:80 t.T/Who 300 4)
diag "GRPCRoute Service, 300 Who calls over 4 connections: $gw"
is "$(grep -o '=[0-9]*' <<<"$gw" | tr -d = | awk '{s += $1} END {print s}')" 300 \
	"... the other calls answered per the catch-all rule"
[ -s "$TMP/client.err" ] && diag "$(tail -3 "$TMP/client.err")"
done_testing
