#!/usr/bin/env bash
# 39-identity.t — workload identity in the lab (issue 20, the part before
# the mTLS tunnel; docs/identity.md): every pod's SPIFFE ID from its
# ServiceAccount; `zerohop ca init` makes the cluster CA; `ca issue` gives
# each node X.509-SVIDs for its own pods only; OpenSSL (not our code)
# verifies them and completes a mutual TLS 1.3 handshake between two pods
# on different nodes with them, and refuses a client without one or with a
# certificate from another CA; keys are never group- or world-readable and
# never in a log; a CA rotation keeps old and new SVIDs trusted until
# `ca rotate --finish`; `lab down` removes it all.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t20id openssl
RUN=/run/zerohop/$LAB

{
	m_idle client node-a
	cat <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: web}
---
apiVersion: v1
kind: Pod
metadata: {name: srv, labels: {app: srv}}
spec: {nodeName: node-b, serviceAccountName: web, containers: [{name: c, command: [sleep, "100000"]}]}
---
YAML
} >"$TMP/app.yaml"
lab_up "client on node-a, srv (ServiceAccount web) on node-b" -f "$TMP/app.yaml"

ids() { "$ZH" get identities --lab $LAB -o json; }
id_of() { ids | jq -r ".[] | select(.name==\"$1\") | .$2"; }
is "$(id_of srv spiffeId)" "spiffe://cluster.local/ns/default/sa/web" "srv's SPIFFE ID: its ServiceAccount"
is "$(id_of client spiffeId)" "spiffe://cluster.local/ns/default/sa/default" "client's: sa/default"
is "$(id_of srv svid)" "null" "no SVID before the CA exists"

"$ZH" ca init --lab $LAB >"$TMP/ca.log" 2>&1
ok $? "ca init"
"$ZH" ca init --lab $LAB >"$TMP/ca2.log" 2>&1
ok $([ $? -ne 0 ] && grep -q "already exists" "$TMP/ca2.log"; echo $?) "ca init twice refused: $(cat "$TMP/ca2.log")"
for n in node-a node-b; do
	"$ZH" ca issue --lab $LAB --node $n >"$TMP/issue-$n.log" 2>&1
	ok $? "ca issue --node $n: $(cat "$TMP/issue-$n.log")"
done
A=$RUN/nodes/node-a/svid B=$RUN/nodes/node-b/svid
ok $([ -s "$A/default_client.crt" ] && [ ! -e "$A/default_srv.crt" ] && [ -s "$B/default_srv.crt" ]; echo $?) \
	"each node holds the SVIDs of its own pods only"
"$ZH" ca issue --lab $LAB --node node-a --pod default/srv >"$TMP/steal.log" 2>&1
ok $([ $? -ne 0 ] && grep -q "scheduled on node-b" "$TMP/steal.log"; echo $?) \
	"node-a asking for srv's SVID is refused: $(cat "$TMP/steal.log")"
is "$(id_of srv svid.verified)" true "get identities: srv's SVID verified"
NPODS=$(ids | jq 'length')
is "$(ids | jq '[.[] | select(.svid.verified == true)] | length')" "$NPODS" "get identities: every pod ($NPODS, cluster-dns too) has a verified SVID"
"$ZH" get identities --lab $LAB | sed 's/^/#   /'

# ---- OpenSSL's view ----------------------------------------------------------
openssl verify -CAfile "$RUN/ca/bundle.pem" "$A/default_client.crt" "$B/default_srv.crt" >"$TMP/verify.log" 2>&1
ok $? "openssl verify: both SVIDs chain to the bundle"
san=$(openssl x509 -in "$B/default_srv.crt" -noout -ext subjectAltName | tail -n 1 | tr -d ' ')
is "$san" "URI:spiffe://cluster.local/ns/default/sa/web" "openssl: srv's only SAN is its SPIFFE ID"

# mutual TLS 1.3 from client (node-a) to srv (node-b), with the SVIDs only
SRV=$(lab_pod_ip srv)
tls_server() {	# LOG: one handshake on srv:8443, client certificate required
	lab_exec srv sh -c "sleep 6 | timeout 8 openssl s_server -accept 8443 -tls1_3 \
		-cert $B/default_srv.crt -key $B/default_srv.key -CAfile $B/bundle.pem \
		-Verify 1 -verify_return_error -naccept 1" >"$1" 2>&1 &
	BG+=($!)
	wait_until 5 lab_listening "$LAB-p-default-srv" 8443 ||
		wait_until 3 grep -q ACCEPT "$1"
}
tls_client() {	# OPENSSL-ARGS...: one handshake from client
	echo hello | lab_exec client timeout 5 openssl s_client -connect "$SRV:8443" \
		-CAfile "$A/bundle.pem" -verify_return_error -brief "$@" 2>&1
}
tls_server "$TMP/s1.log"
out=$(tls_client -cert "$A/default_client.crt" -key "$A/default_client.key")
wait "${BG[-1]}" 2>/dev/null
echo "$out" | grep -q "Protocol version: TLSv1.3" && echo "$out" | grep -q "Verification: OK"
ok $? "client -> srv across nodes: TLS 1.3, srv's SVID verified by the client"
grep -q "spiffe://cluster.local/ns/default/sa/default" <(sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' "$TMP/s1.log" |
	openssl x509 -noout -ext subjectAltName 2>/dev/null)
ok $? "srv received the client's SVID (spiffe://cluster.local/ns/default/sa/default)"

tls_server "$TMP/s2.log"
tls_client >/dev/null
wait "${BG[-1]}" 2>/dev/null
grep -q "peer did not return a certificate" "$TMP/s2.log"
ok $? "a client without a certificate is refused"

# a certificate from another CA
"$ZH" ca init --ca-dir "$TMP/rogue" >/dev/null && "$ZH" ca issue --lab $LAB --ca-dir "$TMP/rogue" \
	--node node-a --out "$TMP/rogue-svid" >/dev/null
ok $? "a rogue CA issues node-a an SVID for client"
tls_server "$TMP/s3.log"
tls_client -cert "$TMP/rogue-svid/default_client.crt" -key "$TMP/rogue-svid/default_client.key" >/dev/null
wait "${BG[-1]}" 2>/dev/null
grep -q "unable to get local issuer certificate\|certificate verify failed" "$TMP/s3.log"
ok $? "a client certificate from an unknown CA is refused ($(grep -o 'unable to get local issuer certificate\|certificate verify failed' "$TMP/s3.log" | head -n 1))"

# ---- keys stay private --------------------------------------------------------
open_keys=$(find "$RUN/ca" "$RUN/nodes" -name '*.key' -perm /077 | wc -l)
n_keys=$(find "$RUN/ca" "$RUN/nodes" -name '*.key' | wc -l)
ok $([ "$n_keys" -eq $((NPODS + 1)) ] && [ "$open_keys" -eq 0 ]; echo $?) "$n_keys private keys (the CA's, one per pod), none group- or world-readable"
ok $([ "$(stat -c %a "$RUN/ca")" = 700 ] && [ "$(stat -c %a "$A")" = 700 ]; echo $?) "CA and SVID directories 0700"
! grep -rqs "PRIVATE KEY" "$RUN" --include='*.log' "$TMP"/*.log
ok $? "no private key in any log"

# ---- CA rotation --------------------------------------------------------------
cp "$B/default_srv.crt" "$TMP/srv-old.crt"
"$ZH" ca rotate --lab $LAB >/dev/null
ok $? "ca rotate"
is "$("$ZH" get certs --lab $LAB -o json | jq -r '[.[].role] | join(",")')" "ca,previous-ca" "get certs: the new CA and the previous one"
openssl verify -CAfile "$RUN/ca/bundle.pem" "$TMP/srv-old.crt" >/dev/null 2>&1
ok $? "an SVID of the old CA still verifies against the bundle"
"$ZH" ca rotate --lab $LAB >"$TMP/rot2.log" 2>&1
ok $([ $? -ne 0 ] && grep -q "in progress" "$TMP/rot2.log"; echo $?) "a second rotation before --finish is refused"
# node-b's agent renews too (38-identity-agent.t): issued by either, once
out=$("$ZH" ca issue --lab $LAB --node node-b)
openssl verify -CAfile "$RUN/ca/ca.crt" "$B/default_srv.crt" >/dev/null 2>&1
ok $? "srv's SVID renewed with the new CA ($out)"
"$ZH" ca rotate --lab $LAB --finish >"$TMP/fin.log" 2>&1
ok $([ $? -ne 0 ] && grep -q "try again in .* (--force ends it now)" "$TMP/fin.log"; echo $?) \
	"ca rotate --finish at once: refused until the nodes have settled: $(head -n 1 "$TMP/fin.log")"
wait_until 20 "$ZH" ca rotate --lab $LAB --finish >"$TMP/fin.log" 2>&1
ok $? "ca rotate --finish once every node's SVIDs are of the new CA ($(tail -n 1 "$TMP/fin.log"))"
! openssl verify -CAfile "$RUN/ca/bundle.pem" "$TMP/srv-old.crt" >/dev/null 2>&1
ok $? "the old CA's SVID no longer verifies"
openssl verify -CAfile "$RUN/ca/bundle.pem" "$B/default_srv.crt" >/dev/null 2>&1
ok $? "the renewed one does"

"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $([ ! -e "$RUN" ]; echo $?) "lab down removes the CA and every SVID"
done_testing
