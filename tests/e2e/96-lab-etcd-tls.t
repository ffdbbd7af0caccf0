#!/usr/bin/env bash
# 96-lab-etcd-tls.t — `zerohop lab up --state etcd-tls` (docs/state-etcd.md
# "In the lab"): the lab's 3 etcd members serve the fabric over TLS with
# --client-cert-auth and a PKI of the lab's (RUNDIR/etcd/pki, made with the
# openssl CLI); the agents sync over https:// with the lab's client
# certificate, a client without one is refused, an apply --lab reaches a
# pod's connections through an agent's TLS watch, and lab down removes the
# PKI with the members' data.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t96 etcd etcdctl openssl curl

{
	m_pod client node-b "app: client" "$(m_ctr c "" sleep 100000)"
	for n in a b; do m_who who-$n node-$n "svc: who, side: $n"; done
	m_svc who "svc: who, side: a" "80:http"
} > "$TMP/app.yaml"
"$ZH" lab up --lab $LAB --state etcd-tls -f "$ROOT/examples/lab/cluster.yaml" -f "$TMP/app.yaml" \
	> "$TMP/up.log" 2>&1
ok $? "lab up --state etcd-tls ($(tail -1 "$TMP/up.log"))" || cat "$TMP/up.log"
PKI=/run/zerohop/$LAB/etcd/pki

case_status_and_pki() {
	"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
	is "$(jq -r '.etcd.spec' "$TMP/st.json")" "https://10.250.0.201:2379,10.250.0.202:2379,10.250.0.203:2379" \
		"lab status: the agents' spec is https://"
	is "$(jq '[.etcd.members[] | select(.healthy)] | length' "$TMP/st.json")" 3 "lab status: 3 healthy members"
	openssl verify -CAfile $PKI/ca.crt $PKI/server.crt $PKI/client.crt >/dev/null
	ok $? "the lab's PKI: server and client certificates signed by its CA"
}

# etcd itself, from node-a's namespace, with third-party clients
ECTL() { ip netns exec $LAB-node-a etcdctl --endpoints https://10.250.0.202:2379 "$@"; }
case_members_want_client_certs() {
	local n
	n=$(ECTL --cacert $PKI/ca.crt --cert $PKI/client.crt --key $PKI/client.key get --prefix /zerohop/ --keys-only | grep -c '^/zerohop/')
	[ "$n" -ge 4 ]
	ok $? "etcdctl with the lab's client certificate reads the state over TLS ($n keys)"
	ECTL --cacert $PKI/ca.crt --command-timeout=2s get /zerohop/ --prefix --keys-only >/dev/null 2>&1
	[ $? -ne 0 ]
	ok $? "without a client certificate etcd refuses (--client-cert-auth)"
	ip netns exec $LAB-node-a curl -s -m 2 -X POST http://10.250.0.201:2379/v3/maintenance/status -d '{}' >/dev/null
	[ $? -ne 0 ]
	ok $? "plain HTTP to a member's fabric listener gets nothing"
}

who() { lab_exec client python3 "$PROBE" conns who 80 1 2>/dev/null | jq -r '.counts | keys[0]' | cut -d- -f1-2; }
who_is() { [ "$(who)" = "$1" ]; }
case_agents_over_tls() {
	wait_until 20 lab_running 3
	wait_until 10 who_is who-a
	is "$(who)" who-a "client on node-b reaches who through the ClusterIP (agents synced over TLS)"
	grep -q -- "--etcd-cert $PKI/client.crt" <(tr '\0' ' ' </proc/"$(pgrep -f "agent --node node-b --lab $LAB " | head -1)"/cmdline 2>/dev/null)
	ok $? "node-b's agent runs with the lab's client certificate"
	m_svc who "svc: who, side: b" "80:http" >"$TMP/who-b.yaml"
	"$ZH" apply --lab $LAB -f "$TMP/who-b.yaml" >/dev/null
	ok $? "apply --lab (the host side: the members' Unix sockets)"
	wait_until 5 who_is who-b
	is "$(who)" who-b "the change reached node-b's kernel through its TLS watch: who-b"
	"$ZH" lab status --lab $LAB -o json | jq -e '[.nodes[] | .agent.last_error // "" | select(. != "")] | length == 0' >/dev/null
	ok $? "no agent reports an error"
}

case_down() {
	"$ZH" lab down --lab $LAB >/dev/null
	ok $? "lab down"
	[ ! -e /run/zerohop/$LAB/etcd ]
	ok $? "the members' data and the PKI are removed"
	is "$(ip netns list | grep -c "^$LAB-etcd")" 0 "no member namespace left"
}

run_cases case_status_and_pki case_members_want_client_certs case_agents_over_tls case_down
done_testing
