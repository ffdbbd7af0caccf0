# obs_lab.sh — shared pieces of the observability lab tests (tests/e2e/72-76).
# Source after lab_test.sh.
#	m_echo NAME NODE			a Deployment of one `zerohop echo` on :8080
#						(port "http"), label name: NAME
#	m_l7_svc NAME CLUSTERIP			an L7 Service (zerohop.io/l7) on NAME's pods
#						with an HTTPRoute that turns retries off (the
#						proxy retries 503 by default, as Istio does;
#						tests compare the backend's 503s with bench)
#	m_deny_egress APP			a NetworkPolicy denying all egress of app=APP
#	obs_lab_up [FLAGS...]			lab up -f $TMP/m.yaml; ok/not ok; on failure
#						prints the output and ends the test; sets PROM
#						when --prometheus was given
#	promq QUERY				one PromQL instant query against the lab's
#						Prometheus: the first value, or "none"
#	prom_is EXPECTED QUERY			promq QUERY gives EXPECTED (for wait_until)
#	obs_load SECS URL QPS URL2 QPS2		background load from deploy/client for SECS:
#						bench -c 4 keep-alive at QPS to URL, and
#						-c 2 a new connection per request at QPS2 to
#						URL2 (PIDs in BG)

m_echo() {
	REPLICAS=1 m_deploy "$1" "$2" "app: $1" "$(m_ctr echo http:8080 "$ZH" echo --http 8080)"
}

m_l7_svc() {
	m_svc "$1" "name: $1" "http=80:http" "$2" 'zerohop.io/l7: "true"'
	cat <<YAML
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: $1, annotations: {zerohop.io/retries: "0"}}
spec:
  parentRefs: [{group: "", kind: Service, name: $1, port: 80}]
  rules:
  - backendRefs: [{name: $1, port: 80}]
---
YAML
}

m_deny_egress() {
	cat <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: $1-egress}
spec:
  podSelector: {matchLabels: {app: $1}}
  policyTypes: [Egress]
  egress: []
---
YAML
}

obs_lab_up() {
	local rc
	"$ZH" lab up --lab $LAB "$@" -f "$TMP/m.yaml" >"$TMP/up.out" 2>&1
	rc=$?
	ok $rc "lab $LAB up $*"
	[ $rc -eq 0 ] || { sed 's/^/# /' "$TMP/up.out"; done_testing; }
	case " $* " in *" --prometheus "*) PROM=$(cat /run/zerohop/$LAB/prometheus/addr) ;; esac
}

promq() {
	ip netns exec $LAB-node-a curl -s --max-time 3 "http://$PROM/api/v1/query" \
		--data-urlencode "query=$1" | jq -r '.data.result[0].value[1] // "none"'
}

prom_is() { [ "$(promq "$2")" = "$1" ]; }

obs_load() {
	lab_exec deploy/client "$ZH" bench -c 4 -qps "$3" -t "$1s" --quiet "$2" >/dev/null 2>&1 &
	BG+=($!)
	lab_exec deploy/client "$ZH" bench -c 2 -qps "$5" -t "$1s" --keepalive=false --quiet "$4" \
		>/dev/null 2>&1 &
	BG+=($!)
}
