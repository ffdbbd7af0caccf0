#!/usr/bin/env bash
# 70-proxy-manifests.t — the fields users' manifests carry that the node
# proxy used to accept and silently ignore (issue 21), end to end in
# explicit mode on loopback in front of echo backends:
#   HTTPRoute rules[].retry (attempts, codes, backoff) replaces the default
#   policy; redirect 303/307/308; RequestMirror sends a copy to the mirror
#   backend (fire and forget: the client gets the main answer, a mirror that
#   never answers costs nothing) and is bounded (64 in flight, the rest
#   dropped and counted); a GAMMA consumer route (namespace shop, parent
#   Service default/web) applies to shop's clients only (a client on
#   127.0.0.2 is a pod of shop); an SMI v1alpha4 TrafficSplit with
#   HTTPRouteGroup matches, applied before its backend Service exists: not
#   ready (matching requests 503, the rest to the root), then the Service is
#   applied and matching requests go to it.
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px70 25000 2000
ip -4 addr show lo | grep -q '127.0.0.1/8' || skip_all "needs 127.0.0.0/8 on lo"

# ---- backends -------------------------------------------------------------------
for k in 1 2 3; do lb_echo "v$k" $k; done
# B+4: a mirror backend that logs each request line and answers 200;
# B+5: one that accepts and never answers (mirrors stay in flight)
"$PY" "$HTTP_BACKEND" --body ok --log "$TMP/mirror.log" --log-what request $((B + 4)) 2>"$TMP/m1.err" &
PIDS+=($!)
"$PY" "$HTTP_BACKEND" --hold $((B + 5)) 2>"$TMP/m2.err" &
PIDS+=($!)

# ---- manifests ----------------------------------------------------------------------
{
	lb_svc web web $((B + 1)); lb_svc v1 v1 $((B + 1)); lb_svc v2 v2 $((B + 2)); lb_svc v3 v3 $((B + 3))
	lb_svc mirror mirror $((B + 4)); lb_svc hold hold $((B + 5)); lb_svc ab ab $((B + 3))
	lb_pod web-1 web; lb_pod v1-1 v1; lb_pod v2-1 v2; lb_pod v3-1 v3; lb_pod mirror-1 mirror
	lb_pod hold-1 hold; lb_pod ab-1 ab
	lb_pod client shop-client "" shop 127.0.0.2
	m_route web web <<'YAML'
  - matches: [{path: {type: PathPrefix, value: /retry3}}]
    retry: {attempts: 3, codes: [500], backoff: 100ms}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /noretry}}]
    retry: {attempts: 0}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /see-other}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: other.example, statusCode: 303}}]
  - matches: [{path: {type: PathPrefix, value: /temp}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /moved}, statusCode: 307}}]
  - matches: [{path: {type: PathPrefix, value: /perm}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 308}}]
  - matches: [{path: {type: PathPrefix, value: /mirrored}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: mirror, port: 80}}}]
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /half}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: mirror, port: 80}, percent: 50}}]
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /held}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: hold, port: 80}}}]
    backendRefs: [{name: v1, port: 80}]
  - backendRefs: [{name: v1, port: 80}]
YAML
	cat <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web-for-shop, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, namespace: default, name: web, port: 80}]
  rules:
  - backendRefs: [{name: v2, namespace: default, port: 80}]
YAML
} >"$TMP/base.yaml"
cat >"$TMP/ab.yaml" <<'YAML'
apiVersion: split.smi-spec.io/v1alpha4
kind: TrafficSplit
metadata: {name: ab-test}
spec:
  service: ab
  matches:
  - kind: HTTPRouteGroup
    name: firefox-users
    apiGroup: specs.smi-spec.io
  backends:
  - service: ab-v2
    weight: 100
---
apiVersion: specs.smi-spec.io/v1alpha4
kind: HTTPRouteGroup
metadata: {name: firefox-users}
spec:
  matches:
  - name: firefox
    headers:
    - user-agent: ".*Firefox.*"
  - name: beta-api
    pathRegex: "/beta/.*"
    methods: [POST]
YAML
cat >"$TMP/ab-v2.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: ab-v2}
spec:
  selector: {app: v2}
  ports: [{name: http, port: 80, targetPort: PORT}]
YAML
sed -i "s/PORT/$((B + 2))/" "$TMP/ab-v2.yaml"
mkdir -p "$TMP/state"

px() { # PORT SERVICE STATS
	"$ZH" proxy --listen "127.0.0.1:$1" --service "$2" --state "$TMP/state" \
		--stats-addr "127.0.0.1:$3" 2>>"$TMP/proxy.err" &
	PIDS+=($!)
}
U="http://127.0.0.1:$P"
AB="http://127.0.0.1:$((B + 6))"
name() { curl -s "$@" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p'; }
name_is() { local want=$1; shift; [ "$(name "$@")" = "$want" ]; }	# for wait_until
metric() { curl -s "http://127.0.0.1:${2:-$S}/" | awk -v k="$1" '$1 == k { print $2 }'; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }	# KEY WANT, for wait_until

# ---- the state: a split applied before its backend Service exists
case_state_split_not_ready() {
	"$ZH" apply --state "$TMP/state" -f "$TMP/base.yaml" >"$TMP/apply.out" 2>&1
	ok $? "manifests applied to a state directory"
	out=$("$ZH" apply --state "$TMP/state" -f "$TMP/ab.yaml" 2>&1); rc=$?
	is $rc 0 "a split naming a Service that does not exist yet is applied"
	echo "$out" | grep -q "^warning: $TMP/ab.yaml:11: spec.backends\[0\].service: backend Service default/ab-v2 does not exist (yet)"
	ok $? "... with a warning naming file:line: field"
	"$ZH" get --state "$TMP/state" splits | grep -E "^default +ab-test " | grep -q "not ready: backend Service default/ab-v2 does not exist (yet)"
	ok $? "get splits: not ready, with the reason"
}

# ---- two proxies in explicit mode
case_proxies_up() {
	px $P default/web $S
	px $((B + 6)) default/ab $((B + 7))
	wait_until 10 lb_http_up $P $((B + 6)) $((B + 3))
	up=$?
	ok $up "proxies answer"
	[ $up -eq 0 ] || { cat "$TMP/proxy.err"; done_testing; }
}

# ---- retry (Gateway API rules[].retry) -------------------------------------------------
case_retry() {
	r0=$(metric zerohop_proxy_retries_total)
	t0=$(date +%s%N)
	is "$(curl -s -o /dev/null -w '%{http_code}' "$U/retry3?status=500")" 500 "retry: a backend always 500 still answers 500"
	t1=$(date +%s%N)
	r1=$(metric zerohop_proxy_retries_total)
	is "$((r1 - r0))" 3 "retry: attempts: 3 → exactly 3 retries (codes: [500])"
	ms=$(((t1 - t0) / 1000000))
	ok $([ "$ms" -ge 300 ] && [ "$ms" -lt 1500 ]; echo $?) "retry: backoff 100ms x 3 → $ms ms (300..1500)"
	curl -s -o /dev/null "$U/retry3?status=503"
	is "$(($(metric zerohop_proxy_retries_total) - r1))" 0 "retry: 503 is not in codes: [500], not retried"
	r2=$(metric zerohop_proxy_retries_total)
	curl -s -o /dev/null "$U/other?status=503"
	is "$(($(metric zerohop_proxy_retries_total) - r2))" 2 "no retry field: the default policy (2 retries on 503)"
	r3=$(metric zerohop_proxy_retries_total)
	curl -s -o /dev/null "$U/noretry?status=503"
	is "$(($(metric zerohop_proxy_retries_total) - r3))" 0 "retry: attempts: 0 → none"
}

# ---- redirects 303 / 307 / 308 -----------------------------------------------------------
case_redirects() {
	is "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$U/see-other/x")" \
		"303 http://other.example/see-other/x" "RequestRedirect 303"
	is "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' -X POST -d a=1 "$U/temp/x?q=1")" \
		"307 http://127.0.0.1:$P/moved/x?q=1" "RequestRedirect 307 (POST, prefix replaced, query kept)"
	is "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$U/perm")" \
		"308 https://127.0.0.1/perm" "RequestRedirect 308 (scheme https: its well-known port)"
}

# ---- RequestMirror ---------------------------------------------------------------------------
case_mirror() {
	: >"$TMP/mirror.log"
	is "$(curl -s -d 'hello=1' "$U/mirrored/a")" "hello=1" "mirror: the client gets the main backend's answer (echo of its body)"
	wait_for_file 2 "$TMP/mirror.log"
	is "$(cat "$TMP/mirror.log")" "POST /mirrored/a HTTP/1.1 hello=1" "mirror: the copy (head and body) reached the mirror backend"
	wait_until 3 metric_is 'zerohop_proxy_mirrors_total{result="sent"}' 1
	is "$(metric 'zerohop_proxy_mirrors_total{result="sent"}')" 1 "mirror: counted as sent"
	is "$(name "$U/mirrored/b")" v1 "mirror: a GET is answered by the main backend (v1)"
	: >"$TMP/mirror.log"
	for i in $(seq 200); do echo "url = \"$U/half/$i\""; echo "output = /dev/null"; done >"$TMP/half.cfg"
	curl -s -K "$TMP/half.cfg"
	sleep 0.5
	n=$(wc -l <"$TMP/mirror.log")
	# 99.999 %: 100 ± 4.417 * 7.07
	ok $([ "$n" -ge 69 ] && [ "$n" -le 131 ]; echo $?) "mirror percent: 50 → $n of 200 mirrored (69..131)"
}

# ---- bounded: a mirror backend that never answers holds every copy in flight
case_mirror_bounded() {
	wait_until 4 metric_is zerohop_proxy_mirrors_inflight 0
	is "$(metric zerohop_proxy_mirrors_inflight)" 0 "no mirror in flight before the silent backend's turn"
	d0=$(metric 'zerohop_proxy_mirror_dropped_total{reason="limit"}')
	t0=$(date +%s%N)
	for i in $(seq 80); do echo "url = \"$U/held/$i\""; echo "output = /dev/null"; echo "write-out = \"%{http_code}\\n\""; done >"$TMP/held.cfg"
	codes=$(curl -s -K "$TMP/held.cfg" | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
	t1=$(date +%s%N)
	is "$codes" "200x80 " "mirror to a silent backend: the 80 requests are answered 200"
	ok $([ $(((t1 - t0) / 1000000)) -lt 3000 ]; echo $?) "... without waiting for the mirrors ($(((t1 - t0) / 1000000)) ms)"
	is "$(metric zerohop_proxy_mirrors_inflight)" 64 "mirror: at most 64 in flight"
	# counted from before this step: under load, the /half step's copies can
	# also have met the limit (its mirror backend slow to answer)
	dropped() { echo $(( $(metric 'zerohop_proxy_mirror_dropped_total{reason="limit"}') - d0 )); }
	is "$(dropped)" 16 "mirror: the 16 beyond the limit dropped and counted"
}

# ---- GAMMA consumer route ------------------------------------------------------------------
case_gamma_consumer_route() {
	is "$(name "$U/x")" v1 "consumer route: a client of namespace default gets the producer route (v1)"
	is "$(name --interface 127.0.0.2 "$U/x")" v2 "consumer route: a client of namespace shop (127.0.0.2) gets shop's route (v2)"
	is "$(name --interface 127.0.0.3 "$U/x")" v1 "consumer route: a client that is no pod gets the producer route"
	"$ZH" get --state "$TMP/state" routes | grep -E "^shop +web-for-shop " | grep -q "consumer route: clients in namespace shop only"
	ok $? "get routes: the consumer route says whose clients it applies to"
}

# ---- SMI TrafficSplit with matches, before its backend exists ----------------------------------
case_smi_split_with_matches() {
	is "$(name "$AB/")" v3 "split with matches, backend missing: a non-matching request goes to the root (v3)"
	is "$(curl -s -o /dev/null -w '%{http_code}' -A 'Mozilla/5.0 Firefox/120' "$AB/")" 503 \
		"... a matching request has nothing servable: 503"
	"$ZH" apply --state "$TMP/state" -f "$TMP/ab-v2.yaml" >/dev/null 2>&1
	ok $? "the backend Service is applied"
	wait_until 4 name_is v2 -A 'Mozilla/5.0 Firefox/120' "$AB/"
	is "$(name -A 'Mozilla/5.0 Firefox/120' "$AB/")" v2 "split takes effect: user-agent Firefox → the split's backend (v2)"
	is "$(name -A 'curl/8' "$AB/")" v3 "... other user agents → the root Service (v3)"
	is "$(name -X POST "$AB/beta/q")" v2 "... POST /beta/... (second match of the group) → v2"
	is "$(name "$AB/beta/q")" v3 "... GET /beta/... (method not listed) → v3"
	"$ZH" get --state "$TMP/state" splits | grep -E "^default +ab-test " | grep -q "ready (matching requests only"
	ok $? "get splits: ready now"
}

run_cases case_state_split_not_ready case_proxies_up case_retry case_redirects \
	case_mirror case_mirror_bounded case_gamma_consumer_route \
	case_smi_split_with_matches
done_testing
