#!/usr/bin/env bash
# 29-netpol-v6-label.t — NetworkPolicy rules by label hold over native IPv6
# on a dual-stack lab exactly as over IPv4 (bpf/policy.bpf.c invariant 10,
# docs/ipv6.md "NetworkPolicy"): a pod's IPv6 has its IPv4's identity, so
# default-deny + allow app=client admits client's curl -6 and drops
# other's, client's egress (to app=srv only) makes its AF_INET6 connect to
# anything else fail at once with EPERM (and its IPv4 one too), replies to
# a connection another pod opened pass, a pod isolated for ingress only
# still connects out over IPv6, loopback works. Real clients: curl -6/-4,
# Python sockets. (Before IPv6 rules, every isolated pod lost all native
# IPv6: four of these checks fail on that datapath.)
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
lab_test_setup t29 curl

web() { m_ctr web "8080" "$PY" -m http.server --bind :: 8080 --directory "$TMP"; }
cat >"$TMP/lab.yaml" <<EOF2
$(np_v6_cluster t29)
---
$(m_pod client node-a "app: client" "$(web)")
$(m_pod other node-a "app: other" "$(web)")
$(m_pod srv-a node-a "app: srv" "$(web)")
$(m_pod srv-b node-b "app: srv" "$(web)")
EOF2
echo hello >"$TMP/index.html"
cat >"$TMP/np.yaml" <<'EOF2'
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
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client-to-srv}
spec:
  podSelector: {matchLabels: {app: client}}
  policyTypes: [Egress]
  egress: [{to: [{podSelector: {matchLabels: {app: srv}}}], ports: [{port: 8080}]}]
EOF2

X() { "$ZH" lab exec --lab $LAB "$@"; }
np_v6_up 4
conn() { # FROM FAMILY ADDR: Python's connect() to ADDR:8080: connected, EPERM or the error
	X "$1" -- "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET6 if sys.argv[1] == "6" else socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect((sys.argv[2], 8080)); print("connected")
except OSError as e:
    print(e.errno == 1 and "EPERM" or repr(e))' "$2" "$3"
}
B4=$(np_ip4 srv-b) B6=$(np_ip6 srv-b) A6=$(np_ip6 srv-a) C6=$(np_ip6 client) O4=$(np_ip4 other) O6=$(np_ip6 other)
up6() { [ "$(np_get client 6 "$B6")" = hello ]; }
wait_until 20 up6
ok $? "before any policy: curl -6 client -> srv-b ($B6) works"
is "$(np_get other 6 "$B6")" "hello" "before any policy: curl -6 other -> srv-b works"

np_apply_sync "$TMP/np.yaml"
ok $? "default-deny + allow app=client on app=srv, client egress to app=srv only; both agents synced"

# IPv4: the policy as written (unchanged)
is "$(np_get client 4 "$B4")" "hello" "IPv4: client (allowed by label) -> srv-b across nodes"
is "$(np_get other 4 "$B4")" "" "IPv4: other (no label) -> srv-b denied"
is "$(conn client 4 "$O4")" "EPERM" "IPv4: client's connect to other fails at once (egress)"
drops() { # REASON: packets over both nodes
	"$ZH" get policy-drops --lab $LAB 2>/dev/null | awk -v r="$1" '$1 == r {n += $2} END {print n + 0}'
}
IN0=$(drops ingress_denied) EG0=$(drops egress_denied)
# IPv6: the same rules
is "$(np_get client 6 "$B6")" "hello" "IPv6: client (allowed by label) -> srv-b across nodes"
is "$(np_get client 6 "$A6")" "hello" "IPv6: client -> srv-a on the same node"
is "$(np_get other 6 "$B6")" "" "IPv6: other (no label) -> srv-b denied (ingress, across nodes)"
is "$(np_get other 6 "$A6")" "" "IPv6: other -> srv-a denied (ingress, same node)"
t0=$(date +%s%N)
is "$(conn client 6 "$O6")" "EPERM" "IPv6: client's AF_INET6 connect to other fails with EPERM (egress, connect6)"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 2500 ]
ok $? "... at once, not after a SYN timeout (${ms} ms with lab exec)"
is "$(np_get other 6 "$C6")" "hello" "IPv6: other -> client passes (client's egress policy does not judge replies)"
is "$(conn srv-b 6 "$C6")" "connected" "IPv6: srv-b (isolated for ingress only) connects out to client"
is "$(X srv-b -- "$PY" -c '
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.settimeout(3)
s.connect(("::1", 8080)); print("ok")')" "ok" "IPv6 loopback inside an isolated pod works"
"$ZH" get policy-drops --lab $LAB 2>&1 | sed 's/^/# /'
[ "$(drops ingress_denied)" -gt "$IN0" ] && [ "$(drops egress_denied)" -gt "$EG0" ]
ok $? "get policy-drops counts the IPv6 ingress and egress denials (from $IN0 / $EG0)"

"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
done_testing
