#!/usr/bin/env bash
# 38-identity-agent.t — the node agent keeps its node's SVIDs up to date by
# itself (issue 20; identity.h I6, docs/identity.md): no `zerohop ca issue`
# anywhere here. After `ca init` every agent issues the SVIDs of its own
# pods; a new pod gets one, a deleted pod's files go, a pod re-created
# under another ServiceAccount gets a new SPIFFE ID; an SVID is renewed at
# half-life
# (ZH_AGENT_SVID_TTL=90s: due 15 s after its issue, since it is valid from
# one minute before); `ca rotate` makes every agent renew with the new CA.
# OpenSSL (not our code) checks each result.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t38id openssl
RUN=/run/zerohop/$LAB
A=$RUN/nodes/node-a/svid B=$RUN/nodes/node-b/svid
export ZH_AGENT_SVID_TTL=90s

pod() {	# NAME NODE SA
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: $1}}
spec: {nodeName: $2, serviceAccountName: $3, containers: [{name: c, command: [sleep, "100000"]}]}
---
YAML
}
pod client node-a default >"$TMP/app.yaml"
pod srv node-b web >>"$TMP/app.yaml"
lab_up "client on node-a, srv (ServiceAccount web) on node-b" -f "$TMP/app.yaml"
ok $([ ! -e "$A/default_client.crt" ]; echo $?) "no CA yet: no SVID, no error"
# The HBONE tunnel is on by default (docs/mtls.md; off: ZH_PROXY_HBONE=0)
ok $(lab_listening "$LAB-node-b" 15001 && lab_listening "$LAB-node-b" 15008; echo $?) \
	"node proxies up, serving HBONE (15008) by default"

serial() { openssl x509 -in "$1" -noout -serial 2>/dev/null; }
san() { openssl x509 -in "$1" -noout -ext subjectAltName 2>/dev/null | tail -n 1 | tr -d ' '; }
verifies() { openssl verify -CAfile "$2" "$1" >/dev/null 2>&1; }

"$ZH" ca init --lab $LAB >/dev/null
ok $? "ca init"
wait_until 10 test -s "$A/default_client.crt" -a -s "$B/default_srv.crt"
ok $? "both agents issued their pods' SVIDs by themselves"
ok $([ ! -e "$A/default_srv.crt" ] && [ ! -e "$B/default_client.crt" ]; echo $?) \
	"each node holds its own pods' SVIDs only"
verifies "$B/default_srv.crt" "$RUN/ca/ca.crt"
ok $? "openssl verify: srv's SVID chains to the CA"
is "$(san "$B/default_srv.crt")" "URI:spiffe://cluster.local/ns/default/sa/web" "srv's SAN"
is "$("$ZH" get identities --lab $LAB -o json | jq '[.[] | select(.svid.verified != true)] | length')" 0 \
	"get identities: every pod has a verified SVID"

# pod changes
pod late node-a web >"$TMP/late.yaml"
"$ZH" apply -f "$TMP/late.yaml" --lab $LAB >/dev/null
wait_until 15 test -s "$A/default_late.crt"
ok $? "a new pod on node-a gets an SVID"
"$ZH" delete -f "$TMP/late.yaml" --lab $LAB >/dev/null
wait_until 15 test ! -e "$A/default_late.crt" -a ! -e "$A/default_late.key"
ok $? "a deleted pod's SVID and key are removed"
# A pod's serviceAccountName is immutable (as in Kubernetes): a pod of the
# same name re-created under another ServiceAccount gets a new SPIFFE ID.
pod srv node-b web >"$TMP/srv1.yaml"
"$ZH" delete -f "$TMP/srv1.yaml" --lab $LAB >/dev/null
wait_until 15 test ! -e "$B/default_srv.crt"
ok $? "srv deleted: its SVID removed"
pod srv node-b other >"$TMP/srv2.yaml"
printf 'apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: other}\n' >>"$TMP/srv2.yaml"
"$ZH" apply -f "$TMP/srv2.yaml" --lab $LAB >/dev/null
wait_until 15 sh -c "openssl x509 -in '$B/default_srv.crt' -noout -ext subjectAltName 2>/dev/null | grep -q sa/other"
ok $? "srv re-created under ServiceAccount other: its SVID names spiffe://cluster.local/ns/default/sa/other"

# PeerAuthentication / AuthorizationPolicy (security.istio.io, docs/mtls.md):
# validated with file:line:field errors, all or nothing; modes per pod
cat >"$TMP/pa.yaml" <<YAML
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: client-off}
spec:
  selector: {matchLabels: {app: client}}
  mtls: {mode: DISABLE}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: srv-deny}
spec:
  selector: {matchLabels: {app: srv}}
  action: DENY
  rules:
  - from:
    - source: {namespaces: [evil]}
YAML
"$ZH" apply -f "$TMP/pa.yaml" --lab $LAB >"$TMP/pa.log" 2>&1
ok $? "apply PeerAuthentication + AuthorizationPolicy: $(grep -c warning "$TMP/pa.log") warnings (where they are enforced)"
mtls_of() { "$ZH" get identities --lab $LAB -o json | jq -r ".[] | select(.name==\"$1\") | .mtls"; }
is "$(mtls_of srv)" STRICT "get identities: srv under the namespace's STRICT"
is "$(mtls_of client)" DISABLE "client: its workload policy DISABLE"
cat >"$TMP/bad.yaml" <<YAML
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: bad}
spec:
  rules:
  - to:
    - operation: {methods: [GET]}
YAML
"$ZH" apply -f "$TMP/bad.yaml" --lab $LAB >"$TMP/bad.log" 2>&1
ok $([ $? -ne 0 ] && grep -q "bad.yaml:7: spec.rules\[0\].to\[0\].operation.methods: not supported" "$TMP/bad.log"; echo $?) \
	"an HTTP attribute is refused with file:line:field: $(head -n 1 "$TMP/bad.log")"
"$ZH" delete -f "$TMP/pa.yaml" --lab $LAB >/dev/null 2>&1
is "$(mtls_of srv)" PERMISSIVE "deleted: PERMISSIVE again (Istio's default)"

# half-life: TTL 90 s -> due 15 s after issue; the agent wakes by itself
S1=$(serial "$B/default_srv.crt")
C1=$(serial "$A/default_client.crt")
wait_until 25 sh -c "[ \"\$(openssl x509 -in '$A/default_client.crt' -noout -serial)\" != '$C1' ]"
ok $? "client's SVID renewed at half-life without any change to the state"
nb=$(openssl x509 -in "$A/default_client.crt" -noout -startdate | cut -d= -f2)
na=$(openssl x509 -in "$A/default_client.crt" -noout -enddate | cut -d= -f2)
is "$(( $(date -d "$na" +%s) - $(date -d "$nb" +%s) ))" 150 "renewed with the agent's TTL (90 s + the minute before)"

# CA rotation: every agent renews with the new CA (I4, I5)
"$ZH" ca rotate --lab $LAB >/dev/null
ok $? "ca rotate"
wait_until 10 sh -c "openssl verify -CAfile '$RUN/ca/ca.crt' '$A/default_client.crt' '$B/default_srv.crt' >/dev/null 2>&1"
ok $? "both agents renewed their SVIDs with the new CA"
is "$(grep -c 'BEGIN CERTIFICATE' "$B/bundle.pem")" 2 "node-b's bundle holds both CAs during the rotation"
wait_until 15 "$ZH" ca rotate --lab $LAB --finish >/dev/null 2>&1	# I11: once settled
wait_until 10 sh -c "[ \$(grep -c 'BEGIN CERTIFICATE' '$B/bundle.pem') = 1 ]"
ok $? "rotate --finish: node-b's bundle copy holds the new CA only"

# keys private, never logged
ok $([ "$(find "$RUN/nodes" -name '*.key' -perm /077 | wc -l)" -eq 0 ] && [ "$(stat -c %a "$A")" = 700 ]; echo $?) \
	"SVID keys 0600 in a 0700 directory"
grep -h "identity:" "$RUN"/nodes/*/agent.log | sed 's/^/#   /' | head -n 12
! grep -rqs "PRIVATE KEY" "$RUN" --include='*.log'
ok $? "no private key in any log"
ok $(grep -q "SVIDs issued" "$RUN/nodes/node-b/agent.log"; echo $?) "the agent logs what it issued"
done_testing
