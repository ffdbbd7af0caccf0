#!/usr/bin/env bash
# 71-lab-manifests.t — users' manifests as they are written (issue 21), in
# the lab (t21a, 2 nodes, mesh on), checked with real requests from pods
# (curl to ClusterIPs, echo backends answering with their pod name):
#   - bookinfo-like and Online-Boutique-like applications (ServiceAccounts,
#     Deployments using them, Services; PDB, HPA, RBAC, Secret beside them,
#     listed as ignored) come up with `lab up -f`; an emojivoto-like one (its own
#     Namespace, ServiceAccounts) is applied with -n emojivoto and lists
#     kubectl-style lines; ServiceAccounts and serviceAccountName are kept;
#   - a file mixing an HTTPRoute with a Gateway, a VirtualService, a
#     DestinationRule and Linkerd resources applies: the others are listed as
#     ignored, the route is enforced (path match, 307 redirect);
#   - a TrafficSplit applied before its backend Service: not ready, every
#     connection to the root's other backend; once the Service is applied
#     the split takes effect;
#   - an SMI v1alpha4 split with HTTPRouteGroup matches: only requests with
#     the header go to the split's backend, through the node proxy;
#   - a GAMMA consumer route in emojivoto on default/productpage applies to
#     emojivoto's clients only;
#   - --strict refuses the mixed file, nothing applied.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t21a curl
M=$(cd "$(dirname "$0")/manifests21" && pwd)

T0=$SECONDS
"$ZH" lab up --lab $LAB -f "$M/bookinfo-like.yaml" -f "$M/boutique-like.yaml" >"$TMP/up.out" 2>"$TMP/up.err"
rc=$?
ok $rc "bookinfo-like and boutique-like applications (ServiceAccounts, PDB, HPA, RBAC, Secret) up ($((SECONDS - T0)) s)"
[ $rc -eq 0 ] || { sed 's/^/# /' "$TMP/up.out" "$TMP/up.err"; done_testing; }
is "$(grep -c ' ignored (' "$TMP/up.err")" 5 "lab up lists the 5 objects it does not act on"

vip() { "$ZH" get --lab $LAB services -o json | jq -r ".[] | select(.namespace == \"${2:-default}\" and .name == \"$1\") | .clusterIP"; }
# curl from a pod; prints "STATUS HOSTNAME-PREFIX" (the Deployment's name)
hit() {	# POD URL [curl args]
	local pod=$1 url=$2 ns=default
	shift 2
	case $pod in */*) ns=${pod%/*}; pod=${pod#*/} ;; esac
	"$ZH" lab exec --lab $LAB -n "$ns" "$pod" -- curl -s -m 3 -o "$TMP/body" -w '%{http_code} %{redirect_url}\n' "$@" "$url" >"$TMP/code" 2>/dev/null
	printf '%s %s\n' "$(awk '{print $1}' "$TMP/code")" \
		"$(jq -r '.hostname // "-"' "$TMP/body" 2>/dev/null | sed 's/-[^-]*-[^-]*$//')"
}
# hit_is WANT POD URL [curl args]: for wait_until (a route or split applied)
hit_is() { local want=$1; shift; [ "$(hit "$@")" = "$want" ]; }

# ---- emojivoto applied into its namespace; ServiceAccounts kept --------------------
case_emojivoto_and_serviceaccounts() {
	out=$("$ZH" apply --lab $LAB -n emojivoto -f "$M/emojivoto-like.yaml" 2>&1)
	ok $? "emojivoto-like application applied with -n emojivoto"
	is "$(echo "$out" | grep -E '^(namespace|serviceaccount|deployment|service)' | sort | tr '\n' ' ')" \
		"deployment.apps/emoji created deployment.apps/web created namespace/emojivoto created service/emoji-svc created service/web-svc created serviceaccount/emoji created serviceaccount/web created " \
		"... one kubectl-style line per object"
	is "$("$ZH" get --lab $LAB serviceaccounts -o json | jq -c '[.[] | .namespace + "/" + .name] | sort')" \
		'["default/bookinfo-details","default/bookinfo-productpage","default/bookinfo-ratings","default/bookinfo-reviews","default/cartservice","default/frontend","emojivoto/emoji","emojivoto/web"]' \
		"get serviceaccounts: all eight kept"
	is "$("$ZH" get --lab $LAB -n emojivoto serviceaccounts | awk 'NR > 1 { print $1 "/" $2 }' | tr '\n' ' ')" \
		"emojivoto/emoji emojivoto/web " "get -n emojivoto serviceaccounts: that namespace only"

	# wait for every pod to run
	wait_until 60 lab_running 12
	ok $? "the 12 pods run"
	is "$("$ZH" get --lab $LAB serviceaccounts | awk 'NR > 1 { print $2 "=" $3 }' | tr '\n' ' ')" \
		"bookinfo-details=1 bookinfo-productpage=1 bookinfo-ratings=1 bookinfo-reviews=2 cartservice=1 frontend=1 emoji=1 web=1 " \
		"get serviceaccounts: the running pods of each (serviceAccountName kept)"
}

# ---- the three applications answer on their ClusterIPs -----------------------------
case_applications_answer() {
	PP=$(vip productpage)
	is "$(hit client "http://$PP:9080/")" "200 productpage-v1" "client → productpage ClusterIP: answered by productpage-v1"
	is "$(hit client "http://$(vip frontend):80/")" "200 frontend" "client → the boutique-like frontend Service: answered by frontend"
	is "$(hit emojivoto/vote-bot "http://$(vip web-svc emojivoto):80/")" "200 web" "emojivoto's vote-bot → web-svc: answered by web"
}

# ---- a file mixing our kinds with other projects' ---------------------------------
case_mixed_file() {
	out=$("$ZH" apply --lab $LAB --strict -f "$M/mixed.yaml" 2>&1); rc=$?
	is $rc 1 "--strict: the mixed file is refused"
	echo "$out" | grep -q "mixed.yaml:5: kind: Gateway (gateway.networking.k8s.io/v1) is not acted on by zerohop"
	ok $? "... naming the first kind zerohop does not act on"
	"$ZH" get --lab $LAB routes | grep -q "^default +reviews "
	ok $((! $?)) "... and nothing of it was applied"
	out=$("$ZH" apply --lab $LAB -f "$M/mixed.yaml" 2>&1)
	ok $? "the mixed file applies"
	is "$(echo "$out" | grep ignored | awk '{print $1}' | tr '\n' ' ')" \
		"gateway.gateway.networking.k8s.io/bookinfo-gateway virtualservice.networking.istio.io/reviews destinationrule.networking.istio.io/reviews serviceprofile.linkerd.io/reviews.default.svc.cluster.local server.policy.linkerd.io/reviews-http " \
		"... the Gateway and the other meshes' resources are listed as ignored"
	echo "$out" | grep -q "^httproute.gateway.networking.k8s.io/reviews created$"
	ok $? "... the HTTPRoute is created"
	RV=$(vip reviews)
	wait_until 12 hit_is "200 reviews-v2" client "http://$RV:9080/v2/x"
	is "$(hit client "http://$RV:9080/v2/x")" "200 reviews-v2" "route enforced: /v2 → reviews-v2"
	is "$(hit client "http://$RV:9080/x")" "200 reviews-v1" "route enforced: / → reviews-v1"
	is "$("$ZH" lab exec --lab $LAB client -- curl -s -m 3 -o /dev/null -w '%{http_code} %{redirect_url}' -X POST "http://$RV:9080/old/page?a=1")" \
		"307 http://$RV:9080/new/page?a=1" "route: 307 redirect to /new, query kept (from a pod)"
}

# ---- a TrafficSplit before its backend Service (the SMI canary order) ----------------
case_split_before_backend() {
	cat >"$TMP/split.yaml" <<'YAML'
apiVersion: split.smi-spec.io/v1alpha4
kind: TrafficSplit
metadata: {name: ratings-rollout}
spec:
  service: ratings
  backends:
  - service: ratings-v1
    weight: 1
  - service: ratings-v2
    weight: 1
---
apiVersion: v1
kind: Service
metadata: {name: ratings-v1}
spec:
  selector: {app: ratings, version: v1}
  ports: [{name: http, port: 9080, targetPort: 8080}]
YAML
	cat >"$TMP/ratings-v2.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ratings-v2
  labels: {app: ratings, version: v2}
spec:
  replicas: 1
  selector:
    matchLabels: {app: ratings, version: v2}
  template:
    metadata:
      labels: {app: ratings, version: v2}
    spec:
      serviceAccountName: bookinfo-ratings
      containers:
      - name: ratings
        image: mendhak/http-https-echo
        ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: ratings-v2}
spec:
  selector: {app: ratings, version: v2}
  ports: [{name: http, port: 9080, targetPort: 8080}]
YAML
	out=$("$ZH" apply --lab $LAB -f "$TMP/split.yaml" 2>&1)
	ok $? "a split naming ratings-v2 before it exists is applied"
	echo "$out" | grep -q "^warning: $TMP/split.yaml:9: spec.backends\[1\].service: backend Service default/ratings-v2 does not exist (yet)"
	ok $? "... with a warning"
	"$ZH" get --lab $LAB splits | grep -E "^default +ratings-rollout " | grep -q "not ready: backend Service default/ratings-v2 does not exist (yet)"
	ok $? "get splits: not ready, with the reason"
	RT=$(vip ratings)
	sleep 0.5
	n=0
	for i in $(seq 20); do [ "$(hit client "http://$RT:9080/")" = "200 ratings-v1" ] && n=$((n + 1)); done
	is $n 20 "meanwhile every connection goes to ratings-v1 (the missing backend's weight is not served)"
	"$ZH" apply --lab $LAB -f "$TMP/ratings-v2.yaml" >/dev/null 2>&1
	ok $? "ratings-v2 Deployment and Service applied"
	wait_until 60 lab_running 13
	v2=0
	wait_until 15 ratings_v2_thrice
	ok $? "the split takes effect: ratings-v2 answers now"
	"$ZH" get --lab $LAB splits | grep -E "^default +ratings-rollout " | grep -q " ready$"
	ok $? "get splits: ready"
}
# ratings_v2_thrice: counts in v2 the answers from ratings-v2; true at the third
ratings_v2_thrice() {
	[ "$(hit client "http://$RT:9080/")" = "200 ratings-v2" ] && v2=$((v2 + 1))
	[ $v2 -ge 3 ]
}

# ---- SMI v1alpha4 split with matches (A/B) ----------------------------------------------
case_smi_ab_matches() {
	cat >"$TMP/ab.yaml" <<'YAML'
apiVersion: specs.smi-spec.io/v1alpha4
kind: HTTPRouteGroup
metadata: {name: testers}
spec:
  matches:
  - name: testers
    headers:
    - x-group: "^testers$"
---
apiVersion: split.smi-spec.io/v1alpha4
kind: TrafficSplit
metadata: {name: details-ab}
spec:
  service: details
  matches:
  - kind: HTTPRouteGroup
    name: testers
  backends:
  - service: reviews-v2
    weight: 100
YAML
	"$ZH" apply --lab $LAB -f "$TMP/ab.yaml" >/dev/null 2>&1
	ok $? "SMI v1alpha4 split with matches applied"
	DT=$(vip details)
	wait_until 12 hit_is "200 reviews-v2" client "http://$DT:9080/" -H 'x-group: testers'
	# one connection per request: each is a new connect through the node proxy
	is "$(hit client "http://$DT:9080/" -H 'x-group: testers')" "200 reviews-v2" "matching request (x-group: testers) → the split's backend"
	is "$(hit client "http://$DT:9080/" -H 'x-group: others')" "200 details-v1" "other request → the root Service (details-v1)"
	is "$(hit client "http://$DT:9080/")" "200 details-v1" "request without the header → details-v1"
	is "$("$ZH" get --lab $LAB services -o json | jq -r '.[] | select(.name == "details") | .l7Proxy')" true \
		"get services: details goes through the node proxy"
}

# ---- GAMMA consumer route -----------------------------------------------------------------
case_gamma_consumer_route() {
	cat >"$TMP/consumer.yaml" <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: productpage-for-emojivoto}
spec:
  parentRefs:
  - group: ""
    kind: Service
    name: productpage
    namespace: default
    port: 9080
  rules:
  - backendRefs:
    - name: web-svc
      port: 80
YAML
	PP=$(vip productpage)
	out=$("$ZH" apply --lab $LAB -n emojivoto -f "$TMP/consumer.yaml" 2>&1)
	ok $? "consumer route (namespace emojivoto, parent default/productpage) applied"
	wait_until 12 hit_is "200 web" emojivoto/vote-bot "http://$PP:9080/"
	is "$(hit emojivoto/vote-bot "http://$PP:9080/")" "200 web" "emojivoto's client → productpage: the consumer route (web)"
	is "$(hit client "http://$PP:9080/")" "200 productpage-v1" "default's client → productpage: unaffected (productpage-v1)"
}

run_cases case_emojivoto_and_serviceaccounts case_applications_answer case_mixed_file \
	case_split_before_backend case_smi_ab_matches case_gamma_consumer_route
done_testing
