#!/usr/bin/env bash
# 29-netpol-v6-failclosed.t — NetworkPolicy on a dual-stack lab fails closed
# over native IPv6 (bpf/policy.bpf.c invariant 10, docs/ipv6.md
# "NetworkPolicy"): there are no IPv6 rules yet, so a pod selected by a
# policy gets no native IPv6 in either direction (incoming curl -6 times
# out, its own outgoing AF_INET6 connect fails at once with EPERM), while a
# pod no policy selects keeps its IPv6 and IPv4 policy (allow-by-label over
# a default-deny) is unchanged. Real clients: curl -6/-4, Python sockets.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
lab_test_setup t29 curl
export ZEROHOP_IPV6_PREVIEW=1

web() { m_ctr web "8080" "$PY" -m http.server --bind :: 8080 --directory "$TMP"; }
cat >"$TMP/lab.yaml" <<EOF
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: t29}
spec:
  nodes: [node-a, node-b]
  podCIDRs: [10.244.0.0/16, "fd00:10:244::/56"]
  serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
---
$(m_pod client node-a "app: client" "$(web)")
$(m_pod other node-a "app: other" "$(web)")
$(m_pod srv-a node-a "app: srv" "$(web)")
$(m_pod srv-b node-b "app: srv" "$(web)")
EOF
echo hello >"$TMP/index.html"
cat >"$TMP/np.yaml" <<'EOF'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny}
spec: {podSelector: {matchLabels: {app: srv}}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: srv-from-client}
spec:
  podSelector: {matchLabels: {app: srv}}
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: 8080}]}]
EOF

"$ZH" lab up --lab $LAB -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "dual-stack lab up with the mesh: $(tail -1 "$TMP/up.out")"
wait_until 30 lab_running 4 && wait_until 30 lab_synced node-a && wait_until 30 lab_synced node-b
ok $? "four pods Running, both agents synced"
"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
p4() { jq -r ".pods[] | select(.name==\"$1\") | .ip" "$TMP/st.json"; }
p6() { jq -r ".pods[] | select(.name==\"$1\") | .ip6" "$TMP/st.json"; }
X() { "$ZH" lab exec --lab $LAB "$@"; }
get() {	# FROM FAMILY ADDR: the page, or "" on failure
	local u="http://$3:8080/index.html"
	[ "$2" = 6 ] && u="http://[$3]:8080/index.html"
	X "$1" -- curl -"$2" -s --max-time 2 "$u"
}
B4=$(p4 srv-b) B6=$(p6 srv-b) A6=$(p6 srv-a) C6=$(p6 client)
up6() { [ "$(get client 6 "$B6")" = hello ]; }
wait_until 20 up6
ok $? "before any policy: curl -6 client -> srv-b ($B6) works"
is "$(get srv-b 6 "$C6")" "hello" "before any policy: curl -6 srv-b -> client works"

np_apply_sync "$TMP/np.yaml"
ok $? "default-deny + allow app=client applied to app=srv, both agents synced"

# IPv4: the policy as written
is "$(get client 4 "$B4")" "hello" "IPv4: client (allowed by label) -> srv-b across nodes"
is "$(get client 4 "$(p4 srv-a)")" "hello" "IPv4: client -> srv-a on the same node"
is "$(get other 4 "$B4")" "" "IPv4: other (no label) -> srv-b denied"
# IPv6: no rules yet, so the isolated pods have no native IPv6 at all
is "$(get client 6 "$B6")" "" "IPv6: client -> isolated srv-b dropped (fail closed, across nodes)"
is "$(get client 6 "$A6")" "" "IPv6: client -> isolated srv-a dropped (same node)"
out=$(X srv-b -- "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect((sys.argv[1], 8080)); print("connected")
except OSError as e:
    print(e.errno == 1 and "EPERM" or repr(e))' "$C6")
is "$out" "EPERM" "IPv6: isolated srv-b's own AF_INET6 connect fails at once (connect6)"
is "$(get other 6 "$C6")" "hello" "IPv6: pods no policy selects keep their IPv6 (other -> client)"
is "$(X srv-b -- "$PY" -c '
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.settimeout(3)
s.connect(("::1", 8080)); print("ok")')" "ok" "IPv6 loopback inside an isolated pod still works"
"$ZH" get policy-drops --lab $LAB 2>&1 | sed 's/^/# /'

"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
done_testing
