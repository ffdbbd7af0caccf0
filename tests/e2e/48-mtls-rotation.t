#!/usr/bin/env bash
# 48-mtls-rotation.t — certificates and the CA rotated under constant load
# through the HBONE tunnel, with zero failed requests (issue 20, docs/mtls.md
# "Rotation"). client (node-a) sends new connections at a fixed rate to srv
# (node-b, STRICT): each is a CONNECT stream through node-a's proxy, whose
# tunnel retires when the client's SVID or the bundle changes and is
# re-made with the new one (hbone_out.h O10). Checked:
#   - SVIDs with a 90 s TTL are renewed every ~15 s (half of their
#     lifetime, which starts 60 s back) by both agents during a 25 s run;
#     every request is answered 200, and node-a's proxy loaded new TLS
#     contexts and opened new tunnels for them;
#   - `ca rotate` then `ca rotate --finish` (retried until the nodes have
#     settled, identity.h I11) during a 20 s run: every request answered
#     200; afterwards the SVIDs verify against the new CA only;
#   - a certificate of the old CA, kept from before, is refused by node-b's
#     server with the reason logged (openssl s_client, not our code).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t48 openssl
RUN=/run/zerohop/$LAB
A=$RUN/nodes/node-a/svid B=$RUN/nodes/node-b/svid

{
	m_pod client node-a "app: client" "$(m_ctr c "" sleep 100000)"
	M_SPEC="serviceAccountName: web" m_pod srv node-b "app: srv" \
		"$(m_ctr c http:9000 "$ZH" echo --http 0.0.0.0:9000 --name srv)"
	cat <<YAML
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: srv}
spec: {selector: {matchLabels: {app: srv}}, mtls: {mode: STRICT}}
YAML
} >"$TMP/app.yaml"
ZH_AGENT_SVID_TTL=90s "$ZH" lab up --lab $LAB -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up (SVID TTL 90 s): client on node-a, srv (STRICT) on node-b" ||
	{ sed 's/^/#   /' "$TMP/up.log"; done_testing; }
"$ZH" ca init --lab $LAB >/dev/null
wait_until 10 test -s "$A/default_client.crt" -a -s "$B/default_srv.crt"
ok $? "ca init: SVIDs issued"
SRV=$(lab_pod_ip srv)
NB=$("$ZH" lab status --lab $LAB -o json | jq -r '.nodes[] | select(.name=="node-b") | .ip')
answered() { [ "$(lab_exec client curl -s -m 2 "http://$SRV:9000/" | jq -r .name 2>/dev/null)" = srv ]; }
wait_until 10 answered
ok $? "client -> srv through the tunnel"

serial() { openssl x509 -in "$1" -noout -serial 2>/dev/null; }
metric() { ip netns exec "$LAB-node-a" curl -s "http://$("$ZH" lab status --lab $LAB -o json |
	jq -r '.nodes[] | select(.name=="node-a") | .ip'):15090/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
load() {	# SECONDS JSON: new connections at 40/s
	lab_exec client "$ZH" bench -qps 40 -c 4 -t "${1}s" --keepalive=false --timeout 3s \
		--json "$2" "http://$SRV:9000/" >/dev/null 2>&1
}
codes() { jq -c '.RetCodes' "$1" 2>/dev/null; }
all_ok() { jq -e '(.RetCodes | keys) == ["200"] and .RetCodes["200"] > 0' "$1" >/dev/null 2>&1; }

# ---- certificate rotation (SVID renewal) under load ------------------------------
c0=$(serial "$A/default_client.crt") s0=$(serial "$B/default_srv.crt")
l0=$(metric zerohop_proxy_hbone_out_tls_contexts_total) t0=$(metric zerohop_proxy_hbone_out_tunnels_total)
load 25 "$TMP/r1.json"
all_ok "$TMP/r1.json"
ok $? "25 s at 40 new connections/s across SVID renewals: every request 200 ($(codes "$TMP/r1.json"))"
ok $([ "$(serial "$A/default_client.crt")" != "$c0" ] && [ "$(serial "$B/default_srv.crt")" != "$s0" ]; echo $?) \
	"  both the client's and srv's SVIDs were renewed meanwhile"
l1=$(metric zerohop_proxy_hbone_out_tls_contexts_total) t1=$(metric zerohop_proxy_hbone_out_tunnels_total)
ok $([ "${l1:-0}" -gt "${l0:-0}" ] && [ "${t1:-0}" -gt "${t0:-0}" ]; echo $?) \
	"  node-a's proxy loaded the new SVID and opened new tunnels with it (contexts ${l0:-?} -> ${l1:-?}, tunnels ${t0:-?} -> ${t1:-?})"

# ---- CA rotation under load ------------------------------------------------------
cp "$A/default_client.crt" "$TMP/old.crt"
cp "$A/default_client.key" "$TMP/old.key"
chmod 600 "$TMP/old.key"
load 20 "$TMP/r2.json" &
BG+=($!)
sleep 3
"$ZH" ca rotate --lab $LAB >"$TMP/rot.log" 2>&1
ok $? "ca rotate under load: a new CA, both in the bundle"
# identity.h I11: --finish is refused until every SVID is of the new CA and
# the proxies have re-read it (~7 s); it is retried as an operator would
wait_until 15 "$ZH" ca rotate --finish --lab $LAB >>"$TMP/rot.log" 2>&1
ok $? "ca rotate --finish under load, once accepted: the old CA leaves the bundle"
wait "${BG[-1]}"
all_ok "$TMP/r2.json"
ok $? "20 s at 40 new connections/s across the CA rotation: every request 200 ($(codes "$TMP/r2.json"))"
CA=$RUN/ca/ca.crt
wait_until 10 sh -c "openssl verify -CAfile '$CA' '$A/default_client.crt' && openssl verify -CAfile '$CA' '$B/default_srv.crt'" >/dev/null 2>&1
ok $? "  the SVIDs now verify against the new CA"
! openssl verify -CAfile "$CA" "$TMP/old.crt" >/dev/null 2>&1
ok $? "  the kept certificate does not"
answered
ok $? "  client -> srv still answered"

# ---- a certificate of the old CA is refused, with the reason logged ----------------
echo | lab_exec client timeout 5 openssl s_client -connect "$NB:15008" -servername srv.default \
	-alpn h2 -CAfile "$A/bundle.pem" -cert "$TMP/old.crt" -key "$TMP/old.key" -brief >/dev/null 2>&1
wait_until 5 grep -q "TLS refused: .*unable to get local issuer certificate" "$RUN/nodes/node-b/proxy.log"
ok $? "openssl s_client with the old CA's certificate: refused by node-b, reason logged"
! grep -q "PRIVATE KEY" "$RUN"/nodes/*/proxy.log "$RUN"/nodes/*/agent.log 2>/dev/null
ok $? "no key material in the proxies' and agents' logs"
done_testing
