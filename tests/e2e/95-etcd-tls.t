#!/usr/bin/env bash
# 95-etcd-tls.t — the etcd state source over TLS with client certificates
# (docs/state-etcd.md "TLS", include/zerohop/etcd.h T1-T4): a real etcd
# (Debian's etcd-server) on loopback, ephemeral ports, --client-cert-auth,
# certificates from scripts/etcd-certs.sh (openssl CLI). apply/get work with the right
# CA and client certificate (environment and flags); no client certificate,
# a wrong CA, a name the server's certificate does not carry, a plain client
# and a key of another certificate each fail with an error naming the
# cause; a listing of two pages (> 4,096 keys) reaches an agent --once's
# maps; a running agent's watch over TLS sees a change and comes back after
# etcd restarts. Nothing here leaves loopback or the test's cgroup.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
TAG=zh-t95${ZH_TEST_LAB_SUFFIX:+-$ZH_TEST_LAB_SUFFIX}
test_setup "${TAG#zh-}" etcd etcdctl openssl python3 jq
CG2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
CG=$CG2/$TAG
PIN=/sys/fs/bpf/$TAG
ETCD_PID=
ETCD2_PID=
AGENT_PID=
test_cleanup() {
	local p
	for p in $AGENT_PID $ETCD_PID $ETCD2_PID; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	[ -d "$PIN" ] && "$ZH" agent --cleanup --node node-a --pin-dir "$PIN" >/dev/null 2>&1
	rm -rf "$PIN"
	[ -d "$CG" ] && rmdir "$CG"
}
cd "$TMP" || exit 1

# ---- certificates (scripts/etcd-certs.sh): the cluster's PKI in ., and a
# second one in other/ (another CA, and a client key of another cert) ----
"$ROOT/scripts/etcd-certs.sh" . IP:127.0.0.1 >openssl.log 2>&1 &&
	"$ROOT/scripts/etcd-certs.sh" other IP:127.0.0.1 >>openssl.log 2>&1
ok $? "certificates made with openssl (scripts/etcd-certs.sh)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
CP=$(free_port)
PP=$(free_port)
etcd_start() {
	timeout 300 etcd --name t95 --data-dir "$TMP/etcd" \
		--listen-client-urls "https://127.0.0.1:$CP" --advertise-client-urls "https://127.0.0.1:$CP" \
		--listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
		--initial-cluster "t95=http://127.0.0.1:$PP" \
		--cert-file server.crt --key-file server.key --trusted-ca-file ca.crt --client-cert-auth \
		--max-txn-ops 20000 --max-request-bytes 33554432 >>etcd.log 2>&1 &
	ETCD_PID=$!
}
ECTL() { etcdctl --endpoints "https://127.0.0.1:$CP" --cacert ca.crt --cert client.crt --key client.key "$@"; }
healthy() { ECTL endpoint health >/dev/null 2>&1; }
etcd_start
wait_until 20 healthy
ok $? "etcd up with TLS and --client-cert-auth (etcdctl over TLS)"

S=https://127.0.0.1:$CP
cat >web.yaml <<'YAML'
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: t95}
spec:
  nodes: [{name: node-a}]
  podCIDR: 10.128.0.0/9
  serviceCIDR: 10.96.0.0/12
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.96.95.10
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
YAML

fails() {	# PATTERN NAME CMD...: CMD fails and its stderr matches PATTERN
	local pat=$1 name=$2 rc
	shift 2
	"$@" >fail.out 2>fail.err
	rc=$?
	[ "$rc" -ne 0 ] && grep -q -- "$pat" fail.err
	ok $? "$name: $(grep -m1 -- "$pat" fail.err || head -c 300 fail.err)"
}
tls_env() { export ZEROHOP_ETCD_CACERT=$TMP/ca.crt ZEROHOP_ETCD_CERT=$TMP/client.crt ZEROHOP_ETCD_KEY=$TMP/client.key; }

# ---- the right CA and client certificate ----
case_right_certs() {
	tls_env
	"$ZH" apply --state "$S" -f web.yaml >apply.out 2>&1
	ok $? "apply --state https:// with CA + client cert from ZEROHOP_ETCD_* ($(tail -1 apply.out))"
	ECTL get /zerohop/v1/service/default/web --print-value-only | grep -q '10.96.95.10'
	ok $? "etcdctl over TLS reads the Service apply wrote"
	"$ZH" get services --state "$S" | grep -q '^default  *web  *10.96.95.10'
	ok $? "get services over TLS shows it"
	unset ZEROHOP_ETCD_CACERT ZEROHOP_ETCD_CERT ZEROHOP_ETCD_KEY
	"$ZH" get services --state "etcds://127.0.0.1:$CP" --etcd-cacert ca.crt --etcd-cert client.crt \
		--etcd-key client.key | grep -q '^default  *web'
	ok $? "the flags --etcd-cacert/--etcd-cert/--etcd-key and the etcds:// alias work too"
}

# ---- each wrong setting fails, naming why, and writes nothing ----
case_wrong_settings() {
	unset ZEROHOP_ETCD_CACERT ZEROHOP_ETCD_CERT ZEROHOP_ETCD_KEY	# flags only
	fails "etcd https://127.0.0.1:$CP: .*no client certificate given" "no client certificate" \
		"$ZH" get services --state "$S" --etcd-cacert ca.crt
	fails "etcd https://127.0.0.1:$CP: certificate verify failed: unable to get local issuer" "a wrong CA" \
		"$ZH" get services --state "$S" --etcd-cacert other/ca.crt --etcd-cert client.crt --etcd-key client.key
	fails "etcd https://localhost:$CP: certificate verify failed: hostname mismatch" \
		"a name the server certificate does not carry (only IP 127.0.0.1)" \
		"$ZH" get services --state "https://localhost:$CP" --etcd-cacert ca.crt --etcd-cert client.crt \
		--etcd-key client.key
	fails "etcd 127.0.0.1:$CP unreachable" "plain etcd:// to the TLS port" \
		"$ZH" get services --state "etcd://127.0.0.1:$CP"
	fails "etcd client key other/client.key does not match the certificate client.crt" \
		"a key of another cert" \
		"$ZH" get services --state "$S" --etcd-cacert ca.crt --etcd-cert client.crt --etcd-key other/client.key
	fails "etcd CA file $TMP/nope.crt: No such file" "an unreadable CA file" \
		"$ZH" get services --state "$S" --etcd-cacert "$TMP/nope.crt"
	fails "hostname mismatch" "ZEROHOP_ETCD_* from the environment are what is used" \
		env ZEROHOP_ETCD_CACERT=ca.crt ZEROHOP_ETCD_CERT=client.crt ZEROHOP_ETCD_KEY=client.key \
		"$ZH" get services --state "https://localhost:$CP"
	"$ZH" get services --state "$S" --etcd-cacert other/ca.crt >/dev/null 2>&1
	ECTL get /zerohop/v1/service/default/web --print-value-only | grep -q '10.96.95.10'
	ok $? "nothing written by the failed commands (the Service is as applied)"
}

# ---- etcd's certificate without clientAuth: its gateway cannot reach its
# own gRPC port (etcd 3.4); the error says so, not just "HTTP 503" ----
case_etcd_cert_without_clientauth() {
	unset ZEROHOP_ETCD_CACERT ZEROHOP_ETCD_CERT ZEROHOP_ETCD_KEY
	openssl req -new -key server.key -subj /CN=noclient -addext subjectAltName=IP:127.0.0.1 \
		-addext extendedKeyUsage=serverAuth -out noclient.csr 2>>openssl.log &&
		openssl x509 -req -in noclient.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
			-copy_extensions copyall -out noclient.crt 2>>openssl.log
	CP2=$(free_port)
	PP2=$(free_port)
	timeout 60 etcd --name t95b --data-dir "$TMP/etcd2" \
		--listen-client-urls "https://127.0.0.1:$CP2" --advertise-client-urls "https://127.0.0.1:$CP2" \
		--listen-peer-urls "http://127.0.0.1:$PP2" --initial-advertise-peer-urls "http://127.0.0.1:$PP2" \
		--initial-cluster "t95b=http://127.0.0.1:$PP2" --cert-file noclient.crt --key-file server.key \
		--trusted-ca-file ca.crt --client-cert-auth >etcd2.log 2>&1 &
	ETCD2_PID=$!
	healthy2() { etcdctl --endpoints "https://127.0.0.1:$CP2" --cacert ca.crt --cert client.crt --key client.key endpoint health >/dev/null 2>&1; }
	wait_until 20 healthy2
	fails "certificate lacks clientAuth" "etcd's certificate without clientAuth (etcdctl over gRPC works)" \
		"$ZH" get services --state "https://127.0.0.1:$CP2" --etcd-cacert ca.crt --etcd-cert client.crt \
		--etcd-key client.key
	kill "$ETCD2_PID" && wait "$ETCD2_PID" 2>/dev/null
	ETCD2_PID=
}

# ---- a two-page listing (K5) reaches an agent's maps ----
case_two_pages() {
	tls_env
	python3 "$ROOT/scripts/gen-big-state.py" big 450 10 &&
		"$ZH" apply --state "$S" -f big/manifests/services.yaml >/dev/null &&
		"$ZH" apply --state "$S" -f big/pods/pods.yaml >/dev/null
	ok $? "450 Services and 4,500 pods applied over TLS"
	keys=$(ECTL get --prefix /zerohop/ --keys-only | grep -c '^/zerohop/')
	[ "$keys" -gt 4096 ]
	ok $? "$keys keys: more than one page of 4,096"
	# pods sort first (/zerohop/runtime/ < /zerohop/v1/): the Services are on page 2
	is "$("$ZH" get services --state "$S" | grep -c '^default  *s[0-9]')" 450 \
		"get lists both pages over TLS (450 Services)"
	mkdir -p "$CG"
	"$ZH" agent --once --node node-a --state "$S" --pin-dir "$PIN" --cgroup "$CG" --accel off \
		--metrics off >once.log 2>&1
	ok $? "agent --once over TLS"
	grep -q "451 services" once.log && grep -q "alias +4500" once.log
	ok $? "agent --once programmed 451 Services, 4,500 endpoints: $(grep -o 'generation [0-9]*: [0-9]* services[^;]*' once.log)"
	"$ZH" agent --cleanup --node node-a --pin-dir "$PIN" >/dev/null 2>&1
}

# ---- a running agent watches over TLS ----
health() { awk -v k="$1" '$1 == k {print $2}' agent.health 2>/dev/null; }
gen_is() { [ "$(health generation)" = "$1" ]; }
state_is() { [ "$(health state)" = "$1" ]; }
rv() { ECTL get /zerohop/v1/service/default/web -w json | jq -r '.kvs[0].mod_revision'; }
case_watch() {
	tls_env
	"$ZH" agent --node node-a --state "$S" --pin-dir "$PIN" --cgroup "$CG" --accel off --metrics off \
		--health-file agent.health >agent.log 2>&1 &
	AGENT_PID=$!
	r0=$(ECTL get /zerohop/ --prefix -w json --limit 1 | jq -r .header.revision)
	wait_until 20 gen_is "$r0"
	ok $? "the agent synced over TLS to revision $r0 (generation $(health generation))"
	sed -i 's/10.96.95.10/10.96.95.11/' web.yaml
	"$ZH" apply --state "$S" -f web.yaml >/dev/null
	r1=$(rv)
	[ -n "$r1" ] && [ "$r1" -gt "$r0" ] && wait_until 10 gen_is "$r1"
	ok $? "a change through etcd reaches the agent's kernel through the TLS watch (generation $r0 -> $(health generation), want $r1)"
	grep -q "10.96.95.11" <("$ZH" get services --state "$S")
	ok $? "the changed ClusterIP is what etcd holds"
	kill "$ETCD_PID" && wait "$ETCD_PID" 2>/dev/null
	ETCD_PID=
	wait_until 10 state_is degraded
	ok $? "etcd stopped: the agent reports degraded ($(awk '$1 == "error"' agent.health | cut -c1-120))"
	etcd_start
	wait_until 20 healthy
	sed -i 's/10.96.95.11/10.96.95.12/' web.yaml
	"$ZH" apply --state "$S" -f web.yaml >/dev/null
	r2=$(rv)
	wait_until 15 gen_is "$r2" && wait_until 5 state_is ready
	ok $? "etcd back: the agent reconnects over TLS and catches up (generation $(health generation), want $r2, state $(health state))"
	kill "$AGENT_PID" && wait "$AGENT_PID" 2>/dev/null
	AGENT_PID=
	grep -qi "certificate\|alert" agent.log
	[ $? -ne 0 ]
	ok $? "no TLS error in the agent's log"
}

run_cases case_right_certs case_wrong_settings case_etcd_cert_without_clientauth \
	case_two_pages case_watch
done_testing
