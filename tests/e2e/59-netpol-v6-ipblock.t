#!/usr/bin/env bash
# 59-netpol-v6-ipblock.t — NetworkPolicy ipBlocks with IPv6 CIDRs on a
# dual-stack lab (docs/ipv6.md "NetworkPolicy", src/policy/pol_compile.c
# invariant 7), both directions, with real clients (curl -6/-4, Python
# AF_INET6 TCP and UDP sockets, busybox nc):
#   ingress: app=web admits the pod CIDR fd00:10:244::/56 except c2's /128
#            (and 10.244.0.0/16 except c2's /32 for IPv4) on 8080, 9001/TCP
#            and 9000/UDP: c1 in, c2 out, across nodes and on the same node;
#   egress:  c3 may reach fd00:10:244::/56 except web-a's /128 on 8080/TCP
#            and 9000/UDP, and has no IPv4 block: web-b allowed, web-a
#            refused at connect()/sendto() with EPERM, every IPv4
#            connection refused (an IPv6 block opens no IPv4 address).
# IPv4 verdicts are those of the IPv4 blocks, as before. Revocation: an
# established IPv6 connection stops the moment a change excepts its client.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
lab_test_setup t59 curl busybox

srv() {
	m_ctr web "8080" "$PY" -m http.server --bind :: 8080 --directory "$TMP"
	printf ', '
	m_ctr echo "9001 9000/UDP" "$ZH" echo --tcp "[::]:9001" --udp "[::]:9000"
}
idle() { m_ctr c "" sleep 100000; }
cat >"$TMP/lab.yaml" <<EOF2
$(np_v6_cluster t59)
---
$(m_pod web-a node-a "app: web" "$(srv)")
$(m_pod web-b node-b "app: web" "$(srv)")
$(m_pod c1 node-a "app: c" "$(idle)")
$(m_pod c2 node-b "app: c" "$(idle)")
$(m_pod c3 node-b "app: egress" "$(idle)")
EOF2
echo hello >"$TMP/index.html"

X() { "$ZH" lab exec --lab $LAB "$@"; }
np_v6_up 5
py() { # FROM tcp|udp ADDR PORT: connected/reply, EPERM, timeout/none
	X "$1" -- "$PY" -c '
import socket, sys
kind, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
s.settimeout(2)
try:
    if kind == "tcp":
        s.connect((addr, port)); print("connected")
    else:
        s.sendto(b"ping\n", (addr, port)); s.recv(100); print("reply")
except socket.timeout:
    print("timeout" if kind == "tcp" else "none")
except OSError as e:
    print("EPERM" if e.errno == 1 else repr(e))' "$2" "$3" "$4"
}
nc6() { X "$1" -- timeout 3 sh -c "echo hi | busybox nc -w 2 $2 9001 2>/dev/null"; }
A4=$(np_ip4 web-a) A6=$(np_ip6 web-a) B4=$(np_ip4 web-b) B6=$(np_ip6 web-b)
C2_4=$(np_ip4 c2) C2_6=$(np_ip6 c2)
up6() { [ "$(np_get c2 6 "$B6")" = hello ]; }
wait_until 20 up6
ok $? "before any policy: curl -6 c2 -> web-b works"
is "$(nc6 c3 "$A6")" "hi" "before any policy: busybox nc c3 -> web-a [$A6]:9001 echoes"

cat >"$TMP/np.yaml" <<EOF2
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-block}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from:
    - ipBlock: {cidr: "fd00:10:244::/56", except: ["$C2_6/128"]}
    - ipBlock: {cidr: 10.244.0.0/16, except: ["$C2_4/32"]}
    ports: [{port: 8080}, {port: 9001}, {port: 9000, protocol: UDP}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: c3-to-block}
spec:
  podSelector: {matchLabels: {app: egress}}
  policyTypes: [Egress]
  egress:
  - to: [{ipBlock: {cidr: "fd00:10:244::/56", except: ["$A6/128"]}}]
    ports: [{port: 8080}, {port: 9000, protocol: UDP}]
EOF2
np_apply_sync "$TMP/np.yaml"
ok $? "ingress ipBlock v6 with except on app=web, egress ipBlock v6 with except on c3; synced"

# ingress: c1 inside the block, c2 its except
is "$(np_get c1 6 "$B6")" "hello" "ingress v6: curl -6 c1 -> web-b (in the cidr, across nodes)"
is "$(np_get c2 6 "$B6")" "" "ingress v6: curl -6 c2 -> web-b dropped (except, same node)"
is "$(py c2 tcp "$A6" 8080)" "timeout" "ingress v6: Python AF_INET6 c2 -> web-a dropped (except, across nodes)"
is "$(nc6 c1 "$A6")" "hi" "ingress v6: busybox nc c1 -> web-a:9001 echoes (in the cidr)"
is "$(nc6 c2 "$B6")" "" "ingress v6: busybox nc c2 -> web-b:9001 gets nothing (except)"
is "$(py c1 udp "$B6" 9000)" "reply" "ingress v6: UDP c1 -> web-b:9000 answered"
is "$(py c2 udp "$B6" 9000)" "none" "ingress v6: UDP c2 -> web-b:9000 dropped"
# egress: c3 may reach the block but web-a
is "$(np_get c3 6 "$B6")" "hello" "egress v6: curl -6 c3 -> web-b (in c3's block)"
is "$(py c3 tcp "$A6" 8080)" "EPERM" "egress v6: Python AF_INET6 c3 -> web-a fails at connect() (except: EPERM)"
is "$(np_get c3 6 "$A6")" "" "egress v6: curl -6 c3 -> web-a fails"
is "$(py c3 udp "$B6" 9000)" "reply" "egress v6: UDP c3 -> web-b:9000 answered"
is "$(py c3 udp "$A6" 9000)" "EPERM" "egress v6: UDP c3 -> web-a:9000 refused at sendto() (EPERM)"
is "$(nc6 c3 "$B6")" "" "egress v6: busybox nc c3 -> web-b:9001 refused (port not in c3's rule)"
# IPv4: the IPv4 blocks decide, the IPv6 ones open nothing
is "$(np_get c1 4 "$B4")" "hello" "IPv4: curl -4 c1 -> web-b (in 10.244.0.0/16)"
is "$(np_get c2 4 "$B4")" "" "IPv4: curl -4 c2 -> web-b dropped (its /32 excepted)"
is "$(py c3 tcp "$B4" 8080)" "EPERM" "IPv4: c3 -> web-b refused (c3's egress has an IPv6 block only)"
# revocation over IPv6: c1 holds an echo connection to web-b, then c1's
# /128 joins the excepts (netpol_hold: one line per 100 ms round)
[ -x "$TOOLS/netpol_hold" ] || skip_all "no $TOOLS/netpol_hold (make first)"
X c1 -- "$TOOLS/netpol_hold" "$B6" 9001 6 >"$TMP/hold.out" 2>&1 &
HOLD=$!
sleep 2
C1_6=$(np_ip6 c1)
sed "s|except: \[\"$C2_6/128\"\]|except: [\"$C2_6/128\", \"$C1_6/128\"]|" "$TMP/np.yaml" >"$TMP/np2.yaml"
np_apply_sync "$TMP/np2.yaml"
ok $? "c1's IPv6 /128 excepted too; synced"
wait "$HOLD"
early=$(awk '$1 < 1500 && $2 == "ok"' "$TMP/hold.out" | wc -l)
late=$(awk '$1 >= 3500 && $2 == "ok"' "$TMP/hold.out" | wc -l)
lost=$(awk '$2 == "lost"' "$TMP/hold.out" | wc -l)
[ "$early" -gt 5 ]
ok $? "IPv6 connection c1 -> web-b:9001 echoed before the change ($early pings)"
is "$late" 0 "... and not once after it (revoked: $lost pings lost)"
"$ZH" get policy-drops --lab $LAB 2>&1 | sed 's/^/# /'

"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
done_testing
