#!/usr/bin/env bash
# 97-mtls-strict.t — ordinary pod traffic to a STRICT workload goes through
# the HBONE tunnel between node proxies, and nothing else reaches it in
# plain text (issue 20, docs/mtls.md "Client side" and "STRICT"). The lab
# runs with the tunnel on (the default); srv (sa/web, HTTP echo on
# node-b) is STRICT through a PeerAuthentication. Checked, with curl as the
# client: before `ca init` the client has no certificate and is refused;
# then its requests to srv's pod IP and to the Service reach srv through
# the tunnel (connect4 counts the redirect; getpeername shows the Service's
# ClusterIP); a capture on the fabric sees no plaintext of the request and
# TLS 1.3 to port 15008; iperf3 through the tunnel runs without error and
# node-a short-circuits none of the legs into it (accel.bpf.c invariant
# 12); a pod on srv's own node still reaches it directly
# (no tunnel); plain text from node-a's host is refused at node-b, counted
# as mtls_plaintext; an AuthorizationPolicy denying the client's namespace
# refuses it and its removal restores access; PERMISSIVE again: plain text,
# no redirect.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t97 curl tcpdump tshark
RUN=/run/zerohop/$LAB

{
	cat <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
YAML
	m_pod client node-a "app: client" "$(m_ctr c "" sleep 100000)"
	M_NS=shop m_pod cli2 node-a "app: cli2" "$(m_ctr c "" sleep 100000)"
	m_pod near node-b "app: near" "$(m_ctr c "" sleep 100000)"
	M_SPEC="serviceAccountName: web" m_pod srv node-b "app: srv" "$(m_ctr c http:9000 "$ZH" echo --http 0.0.0.0:9000 --name srv)" \
		"$(m_ctr i bulk:5201 iperf3 -s -p 5201)"
	m_svc web "app: srv" "http=80:9000"
} >"$TMP/app.yaml"
cat >"$TMP/strict.yaml" <<YAML
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: srv}
spec:
  selector: {matchLabels: {app: srv}}
  mtls: {mode: STRICT}
YAML
cat "$TMP/strict.yaml" >>"$TMP/app.yaml"
"$ZH" lab up --lab $LAB -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up with the tunnel on: client, cli2 (ns shop) on node-a; srv (STRICT), near on node-b" ||
	{ sed 's/^/#   /' "$TMP/up.log"; done_testing; }
wait_until 20 lab_synced node-a && wait_until 20 lab_synced node-b
SRV=$(lab_pod_ip srv)
VIP=$(lab_svc_ips web | tr ' ' '\n' | grep -v : | head -1)
get() { lab_exec "$1" curl -s -m 3 "$2" | jq -r .name 2>/dev/null; }
redirects() { "$ZH" get --lab $LAB stats -o json | jq '."node-a".connect_hbone_redirect // 0'; }
mtls_drops() { "$ZH" get --lab $LAB policy-drops 2>/dev/null | awk '/^node node-b/ {b = 1} b && $1 == "mtls_plaintext" {print $2; exit}'; }

# ---- no certificate yet: refused, never plain text ---------------------------
r0=$(redirects)
is "$(get client "http://$SRV:9000/")" "" "before ca init: client -> srv refused (no SVID for the client on node-a)"
ok $([ "$(redirects)" -gt "${r0:-0}" ]; echo $?) "  connect4 sent it to the tunnel, not to srv ($r0 -> $(redirects) redirects)"
grep -q "hbone" "$RUN/nodes/node-a/proxy.log"
ok $? "  node-a's proxy logged why ($(grep -m1 hbone "$RUN/nodes/node-a/proxy.log" | cut -c1-120))"

"$ZH" ca init --lab $LAB >/dev/null
wait_until 10 test -s "$RUN/nodes/node-a/svid/default_client.crt" -a -s "$RUN/nodes/node-b/svid/default_srv.crt"
ok $? "ca init: the agents issued the SVIDs"

# ---- through the tunnel --------------------------------------------------------
ip netns exec "$LAB-fabric" timeout 20 tcpdump -i any -U -w "$TMP/fabric.pcap" tcp >/dev/null 2>&1 &
BG+=($!)
sleep 1
MARK="zerohop-marker-$$"
wait_until 10 test "$(get client "http://$SRV:9000/$MARK")" = srv
ok $? "client -> srv's pod IP:9000 (node-b): answered by srv through the tunnel"
is "$(get client "http://web/$MARK")" srv "client -> Service web by name: answered by srv"
peer=$(lab_exec client python3 -c 'import socket,sys
s = socket.create_connection((sys.argv[1], 80), 3); print(s.getpeername()[0])' "$VIP" 2>&1)
is "$peer" "$VIP" "  getpeername shows the ClusterIP, not the proxy"
sleep 1
kill "${BG[-1]}" 2>/dev/null; wait "${BG[-1]}" 2>/dev/null
! tcpdump -r "$TMP/fabric.pcap" -A 2>/dev/null | grep -q "$MARK"
ok $? "tcpdump on the fabric: the request never appears in plain text"
v=$(tshark -r "$TMP/fabric.pcap" -d tcp.port==15008,tls -Y "tls.handshake.type == 2" \
	-T fields -e tls.handshake.extensions.supported_version 2>/dev/null | head -n 1)
is "$v" "0x0304" "tshark: TLS 1.3 to port 15008"
n=$(tshark -r "$TMP/fabric.pcap" -Y "tcp.dstport == 9000" 2>/dev/null | wc -l)
is "$n" 0 "  and no packet to srv's port 9000 crossed the fabric"

# ---- bulk through the tunnel: TCP paces the client (accel invariant 12) -----------------
out=$(lab_exec client iperf3 -c "$SRV" -p 5201 -t 2 -J 2>&1)
bps=$(jq '.end.sum_received.bits_per_second // 0 | floor' <<<"$out" 2>/dev/null)
ok $([ -z "$(jq -r '.error // empty' <<<"$out" 2>/dev/null)" ] && [ "${bps:-0}" -gt 0 ]; echo $?) \
	"iperf3 for 2 s through the tunnel: no error ($(( ${bps:-0} / 1000000 )) Mbit/s; a short-circuited leg once got ENOMEM)"
is "$("$ZH" get --lab $LAB stats -o json | jq '."node-a".accel_sockets // 0')" 0 \
	"  node-a short-circuited none of the client legs into the tunnel"

# ---- same node: no tunnel; plain text from another node: refused ------------------
is "$(get near "http://$SRV:9000/")" srv "near (srv's node) -> srv directly: same-node traffic stays in the kernel"
is "$("$ZH" get --lab $LAB stats -o json | jq '."node-b".connect_hbone_redirect // 0')" 0 "  node-b's connect hook sent nothing to the tunnel"
d0=$(mtls_drops)
is "$(ip netns exec "$LAB-node-a" curl -s -m 2 "http://$SRV:9000/" | jq -r .name 2>/dev/null)" "" \
	"node-a's host -> srv in plain text: refused at node-b"
ok $([ "$(mtls_drops)" -gt "${d0:-0}" ]; echo $?) "  counted as mtls_plaintext at node-b (${d0:-0} -> $(mtls_drops))"

# ---- AuthorizationPolicy at the destination --------------------------------------
is "$(get shop/cli2 "http://$SRV:9000/")" srv "cli2 (namespace shop) -> srv: allowed"
cat >"$TMP/deny.yaml" <<YAML
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: srv-deny-shop}
spec:
  selector: {matchLabels: {app: srv}}
  action: DENY
  rules:
  - from:
    - source: {namespaces: [shop]}
YAML
"$ZH" apply --lab $LAB -f "$TMP/deny.yaml" >/dev/null 2>&1
cli2_gets() { [ "$(get shop/cli2 "http://$SRV:9000/")" = "$1" ]; }
wait_until 10 cli2_gets ""
ok $? "DENY namespace shop: cli2 refused"
is "$(get client "http://$SRV:9000/")" srv "  client (namespace default) still allowed"
"$ZH" delete --lab $LAB -f "$TMP/deny.yaml" >/dev/null 2>&1
wait_until 10 cli2_gets srv
ok $? "  policy deleted: cli2 allowed again"

# ---- PERMISSIVE: plain text, no tunnel ----------------------------------------------
"$ZH" delete --lab $LAB -f "$TMP/strict.yaml" >/dev/null 2>&1
wait_until 10 test -z "$(bpftool map dump pinned /sys/fs/bpf/zerohop/$LAB/node-a/lb_mtls 2>/dev/null | grep key)"
ok $? "PeerAuthentication deleted: node-a's lb_mtls is empty"
r1=$(redirects)
is "$(get client "http://$SRV:9000/")" srv "client -> srv in plain text (PERMISSIVE)"
is "$(redirects)" "$r1" "  no redirect to the tunnel"
is "$(ip netns exec "$LAB-node-a" curl -s -m 2 "http://$SRV:9000/" | jq -r .name 2>/dev/null)" srv \
	"  node-a's host reaches srv again"
done_testing
