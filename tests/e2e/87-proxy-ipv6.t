#!/usr/bin/env bash
# 87-proxy-ipv6.t — L7 Services reached by their IPv6 ClusterIP (dual-stack
# lab t87, 2 nodes, mesh on; docs/ipv6.md "L7 over IPv6"): connect6 sends a
# native IPv6 client's connection to its node's proxy, which listens on the
# node's IPv6 address too (bpf/lb.bpf.c invariant 9), and the proxy routes
# each request by the Service's HTTPRoute, as it does for IPv4:
#   header and path matches pick the backend over IPv6 from both nodes, by
#   address and by name (the cluster DNS's AAAA); getpeername shows the IPv6
#   ClusterIP; requests reach the backends from the proxy's address; an
#   annotated (zerohop.io/l7) Service goes through the proxy too; the IPv4
#   ClusterIP of the same Service is routed the same; an IPV6_V6ONLY
#   client socket (Python, as wget -6 makes) reaches it too;
#   an IPv6 single-stack L7 Service (no IPv4 ClusterIP; backends listening
#   on [::]:8080) is routed by its IPv6 ClusterIP: its HTTPRoute's path
#   and header matches pick between two IPv6 single-stack backends from
#   both nodes, by address and by name, each request reaching its backend
#   over IPv6 from the proxy (the echo server reports an IPv6 peer that is
#   not the client's), the proxy's endpoint metrics name [IPv6]:port, and
#   get backends says so;
#   NetworkPolicy: an egress-isolated client is admitted to the proxy's
#   IPv6 listener only through the redirect and judged per request by the
#   proxy (200 when its policy allows the backend, 403 when not, for an
#   IPv6 backend too: judged with the IPv6 tables), and connecting to
#   [NODE_IP6]:15001 by hand is denied (EPERM).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t87 curl
V6P=$ROOT/tests/bpf/lib/v6probe.py

echo_pod() { # NAME NODE VERSION
	m_deploy "$1" "$2" "app: web, version: $3" "$(m_img echo mendhak/http-https-echo http:8080)"
}
dual() { M_SPEC="ipFamilyPolicy: PreferDualStack" m_svc "$@"; }
six() { M_SPEC="ipFamilies: [IPv6]" m_svc "$@"; }
canary_route() { # PARENT: /v2... and x-version: canary -> PARENT-v2, the rest -> PARENT-v1
	m_route "$1" "$1" <<YAML
  - matches: [{path: {type: PathPrefix, value: /v2}}]
    backendRefs: [{name: $1-v2, port: 80}]
  - matches: [{headers: [{name: x-version, value: canary}]}]
    backendRefs: [{name: $1-v2, port: 80}]
  - backendRefs: [{name: $1-v1, port: 80}]
YAML
}
echo6_pod() { # NAME NODE VERSION: the echo server on [::]:8080 (both families)
	m_deploy "$1" "$2" "app: sx, version: $3" "$(m_ctr echo http:8080 "$ZH" echo --http "[::]:8080")"
}
{
	m_cluster t87 "node-a node-b" dual
	echo_pod web-v1 node-a v1
	echo_pod web-v2 node-b v2
	dual web "app: web" "http=80:http"
	dual web-v1 "version: v1" "http=80:http"
	dual web-v2 "version: v2" "http=80:http"
	dual ann "version: v2" "http=80:http" "" 'zerohop.io/l7: "true"'
	echo6_pod sx-v1 node-a s1
	echo6_pod sx-v2 node-b s2
	six six "app: sx" "http=80:http" "" 'zerohop.io/l7: "true"'
	six six-v1 "version: s1" "http=80:http"
	six six-v2 "version: s2" "http=80:http"
	canary_route web
	canary_route six
	m_idle client node-a
	m_idle client-b node-b
	m_idle egok node-a
	m_idle egno node-a
	m_idle egsx node-a
} >"$TMP/m.yaml"

lab_up "dual-stack, with the mesh" -f "$TMP/m.yaml"
wait_until 30 lab_running 9 && wait_until 30 lab_synced node-a && wait_until 30 lab_synced node-b
ok $? "pods run, both agents applied the state"

read -r V4 V6 <<<"$(lab_svc_ips web)"
A6=$(lab_svc_ips ann | cut -d' ' -f2) SIX=$(lab_svc_ips six)
case "$V6 $A6 $SIX" in fd00:10:96::*\ fd00:10:96::*\ fd00:10:96::*) r=0 ;; *) r=1 ;; esac
ok $r "IPv6 ClusterIPs allocated (web $V6, ann $A6, six $SIX)"
st() { "$ZH" lab status --lab $LAB -o json; }
pxaddr() { st | jq -r ".nodes[] | select(.name==\"$1\") | .podCIDR" | awk -F'[./]' '{print $1"."$2"."$3"."$4+1}'; }
PXA=$(pxaddr node-a) PXB=$(pxaddr node-b)

# request lines "PATH [HEADER: VALUE]" on one keep-alive connection
# (tests/tools/clients/http_keepalive.py); hostnames without the
# Deployment's suffixes
req() { # POD HOST, request lines on stdin
	lab_exec "$1" "$PY" "$ROOT/tests/tools/clients/http_keepalive.py" "$2" 80 2>>"$TMP/cl.err" |
		awk 'NR > 1 { sub(/-[^-]*-[^-]*$/, "", $2) } { print }'
}
routes='/\n/v2/x\n/ x-version: canary\n/other x-version: stable\n'
up6() { printf '/\n' | req client "$V6" | grep -q '^200 '; }
wait_until 20 up6
ok $? "the IPv6 ClusterIP of an L7 Service answers"

for pod in client client-b; do
	px=$PXA
	[ $pod = client-b ] && px=$PXB
	out=$(printf "$routes" | req $pod "$V6")
	is "$(echo "$out" | head -1)" "peer [$V6]:80" "$pod: an AF_INET6 socket, getpeername shows the IPv6 ClusterIP"
	is "$(echo "$out" | sed 1d | awk '{ print $1, $2 }' | tr '\n' ' ')" \
		"200 web-v1 200 web-v2 200 web-v2 200 web-v1 " \
		"$pod: / → v1, /v2/x → v2, x-version: canary → v2, other header → v1 (one keep-alive connection over IPv6)"
	is "$(echo "$out" | sed 1d | awk '{ print $3 }' | sort -u | tr '\n' ' ')" "$px " \
		"$pod: every request reached the backends from its node's proxy ($px)"
done

r=$(lab_exec client curl -6 -s --max-time 5 -H 'x-version: canary' http://web.default.svc.cluster.local/ |
	jq -r '.hostname' | sed 's/-[^-]*-[^-]*$//')
is "$r" web-v2 "curl -6 by name (AAAA → the IPv6 ClusterIP), header match → v2"
r=$(lab_exec client curl -6 -s --max-time 5 "http://[$A6]/" | jq -r '.hostname + " " + .remote' | sed 's/-[^-]*-[^-]* / /; s/:[0-9]*$//')
is "$r" "web-v2 $PXA" "an annotated L7 Service over IPv6 goes through the proxy too"

# ---- an IPv6 single-stack L7 Service: routed by its IPv6 ClusterIP --------
case "$SIX" in *.*|*\ *|"") r=1 ;; *) r=0 ;; esac
ok $r "the single-stack Service has an IPv6 ClusterIP only ($SIX)"
up6six() { printf '/\n' | req client "$SIX" | grep -q '^200 sx-v1 \['; }
wait_until 20 up6six
ok $? "the IPv6 ClusterIP of an IPv6 single-stack L7 Service answers (no longer refused)"
pod6() { # POD or Deployment: its IPv6 address (status.podIPs, IPv4 first)
	"$ZH" get pods --lab $LAB -o json | jq -r --arg n "$1" \
		'([.[] | select(.name == $n)] + [.[] | select(.name | startswith($n + "-"))])[0].ips[1] // empty'
}
for pod in client client-b; do
	out=$(printf "$routes" | req $pod "$SIX")
	is "$(echo "$out" | head -1)" "peer [$SIX]:80" "$pod: getpeername shows the single-stack IPv6 ClusterIP"
	is "$(echo "$out" | sed 1d | awk '{ print $1, $2 }' | tr '\n' ' ')" \
		"200 sx-v1 200 sx-v2 200 sx-v2 200 sx-v1 " \
		"$pod: / → sx-v1, /v2/x → sx-v2, x-version: canary → sx-v2, other header → sx-v1 (HTTPRoute over IPv6)"
	node=node-a
	[ $pod = client-b ] && node=node-b
	# the proxy's IPv6 source: ::1 of its node's /64 (pol_node_proxy_ip6,
	# on the node's lo); a request that bypassed it would show the
	# client's address ($(pod6 $pod))
	n6=$(st | jq -r ".nodes[] | select(.name==\"$node\") | .podCIDR6" | sed 's|/64$|1|')
	is "$(echo "$out" | sed 1d | awk '{ print $3 }' | sort -u | tr '\n' ' ')" "[$n6] " \
		"$pod: every request reached its backend over IPv6 from its node's proxy address ([$n6])"
done
r=$(lab_exec client curl -6 -s --max-time 5 http://six.default.svc.cluster.local/v2/ |
	jq -r '.hostname + " " + .remote' | sed 's/-[^-]*-[^-]* / /; s/\]:[0-9]*$/]/')
case "$r" in "sx-v2 ["*:*"]") rr=0 ;; *) rr=1 ;; esac
ok $rr "curl -6 by name (AAAA only) → the path match's backend, reached over IPv6 ($r)"
r=$(lab_exec client curl -6 -s --max-time 5 "http://[$SIX]/" | jq -r '.hostname' | sed 's/-[^-]*-[^-]*$//')
is "$r" sx-v1 "curl -6 by address → the default rule's backend"
"$ZH" get backends --lab $LAB >"$TMP/be.out" 2>&1
grep -q "default/six port 80: IPv6 single-stack, .*routes it by its IPv6 ClusterIP" "$TMP/be.out"
ok $? "get backends says the proxy routes it by its IPv6 ClusterIP" || sed 's/^/# /' "$TMP/be.out"
! grep -q "refuses" "$TMP/be.out"
ok $? "... and no ClusterIP refuses"
px_metrics() { "$ZH" lab exec --lab $LAB --node $1 -- curl -s -m 3 "http://$(st | jq -r ".nodes[] | select(.name==\"$1\") | .ip"):15090/"; }
e6=$(pod6 sx-v1)
px_metrics node-a | grep -q "^zerohop_proxy_endpoint_connections{endpoint=\"\[$e6\]:8080\"}"
ok $? "the proxy's endpoint metrics name the IPv6 endpoint as [$e6]:8080"

cat >"$TMP/v6only.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.settimeout(5)
s.connect((sys.argv[1], 80))
s.sendall(b"GET /v2/ HTTP/1.0\r\nHost: web\r\n\r\n")
d = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    d += b
print(d.split(b" ")[1].decode(), b'"hostname":"web-v2' in d)
PY
is "$(lab_exec client "$PY" "$TMP/v6only.py" "$V6" 2>&1)" "200 True" \
	"an IPV6_V6ONLY socket reaches the L7 Service by its IPv6 ClusterIP (the proxy's IPv6 listener)"

# ---- NetworkPolicy: the kernel admits the redirected socket, the proxy judges
{
	m_egress_only eg-ok "app: egok" "app: web" 8080
	m_egress_only eg-no "app: egno" "app: web" 9999
	m_egress_only eg-sx "app: egsx" "app: sx" 8080
} >"$TMP/np.yaml"
"$ZH" apply --lab $LAB -f "$TMP/np.yaml" >"$TMP/apply.out" 2>&1
ok $? "apply egress policies (egok: app=web:8080, egno: app=web:9999)" || sed 's/^/# /' "$TMP/apply.out"
sleep 1.2	# in force within 1 s
code() { lab_exec "$1" curl -6 -s -o /dev/null -m 3 -w '%{http_code}' "http://[$V6]$2"; }
is "$(code egok / ) $(code egok /v2/)" "200 200" \
	"egress-isolated client allowed to app=web:8080: 200 over IPv6 through the proxy (admitted to its IPv6 listener)"
is "$(code egno /)" "403" "egress-isolated client allowed only app=web:9999: 403 from the proxy (judged per request)"
code6() { lab_exec "$1" curl -6 -s -o /dev/null -m 3 -w '%{http_code}' "http://[$SIX]$2"; }
is "$(code6 egsx /) $(code6 egsx /v2/)" "200 200" \
	"egress-isolated client allowed to app=sx:8080: 200 from the IPv6 single-stack Service (IPv6 endpoints judged with the IPv6 tables)"
is "$(code6 egok /)" "403" "egress-isolated client allowed only app=web:8080: 403 for the IPv6 single-stack Service's backends"
# the backends' own ingress policy: only egsx may reach app=sx. The proxy
# judges that per request; the backend's node admits the proxy's IPv6
# source (POL_F_PROXY), so a cross-node IPv6 upstream is not refused as
# an outside address (before pol_node_proxy_ip6 it was: the node's IPv6)
m_ingress_from sx-in "app: sx" "app: egsx" 8080 >"$TMP/np2.yaml"
"$ZH" apply --lab $LAB -f "$TMP/np2.yaml" >"$TMP/apply2.out" 2>&1
ok $? "apply an ingress policy on the IPv6 backends (only app=egsx)" || sed 's/^/# /' "$TMP/apply2.out"
sleep 1.2
is "$(code6 egsx /v2/) $(code6 egsx /)" "200 200" \
	"the allowed client: 200 from sx-v2 on the other node and sx-v1 on its own (the proxy's IPv6 source admitted)"
is "$(code6 client /v2/)" "403" "a client the backends' ingress does not allow: 403 from the proxy"
N6=$(st | jq -r '.nodes[] | select(.name=="node-a") | .ip6')
r=$(lab_exec egno "$PY" -c "
import socket
s = socket.socket(socket.AF_INET6)
s.settimeout(2)
try:
    s.connect(('$N6', 15001)); print('connected')
except OSError as e:
    print(e.strerror)")
is "$r" "Operation not permitted" "egno connecting to [$N6]:15001 by hand (no redirect): denied at connect (EPERM)"

out=$(printf "$routes" | req client "$V4")
is "$(echo "$out" | head -1)" "peer $V4:80" "the IPv4 ClusterIP of the same Service"
is "$(echo "$out" | sed 1d | awk '{ print $1, $2 }' | tr '\n' ' ')" \
	"200 web-v1 200 web-v2 200 web-v2 200 web-v1 " "... is routed the same"
done_testing
