#!/usr/bin/env bash
# 74-obs-l7.t — Istio request metrics from the node proxy, checked through
# the lab's real Prometheus (lab t74, 2 nodes, mesh on): `zerohop bench`
# at a fixed rate from a client Deployment on node-a to an L7 Service
# (zerohop.io/l7) whose echo backend on node-b answers status=503:20.
# istio_requests_total must equal what bench counted, per response_code;
# the duration histogram's count and the response bytes must agree too
# (retries off on the route: a retried 503 would reach bench as a 200).
# `zerohop observe --type request` must list the same requests, and
# `observe --follow` started before the traffic must stream them.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
source "$(dirname "$0")/../lib/obs_lab.sh"
lab_test_setup t74 curl /usr/bin/prometheus

{
	m_echo web node-b
	REPLICAS=1 m_deploy client node-a "app: client" "$(m_ctr shell "" sleep infinity)"
	m_l7_svc web 10.96.0.74
} >"$TMP/m.yaml"
obs_lab_up --prometheus
wait_until 10 lab_running 3
wait_until 15 prom_is 2 'count(up{job="zerohop-proxy"} == 1)'
ok $? "Prometheus scrapes both node proxies"

# a follower started before the traffic streams every request as it ends
"$ZH" observe --lab $LAB --follow --type request --timeout 7 -o json >"$TMP/follow.json" \
	2>"$TMP/follow.err" &
FPID=$!
BG+=($FPID)
sleep 1
lab_exec deploy/client "$ZH" bench -c 4 -qps 100 -t 2s --json "$TMP/b.json" \
	'http://10.96.0.74/?status=503:20' >/dev/null 2>"$TMP/bench.err"
ok $? "bench → web (L7 Service): 100 req/s for 2 s, keep-alive"
n=$(jq '.DurationHistogram.Count' "$TMP/b.json")
n503=$(jq '.RetCodes["503"] // 0' "$TMP/b.json")
n200=$(jq '.RetCodes["200"] // 0' "$TMP/b.json")
rx=$(jq '.Sizes.Sum' "$TMP/b.json")
diag "bench: $n requests, 200: $n200, 503: $n503, $rx response bytes"
ok $([ "$n503" -gt 0 ] && [ "$n200" -gt 0 ]; echo $?) "the backend answered both 200 and 503"

SEL='reporter="source",source_workload="client",source_workload_namespace="default",destination_service="web.default.svc.cluster.local",destination_workload="web",destination_workload_namespace="default"'
wait_until 10 prom_is "$n" "sum(istio_requests_total{$SEL})"
is "$(promq "sum(istio_requests_total{$SEL})")" "$n" "istio_requests_total = $n requests bench made"
is "$(promq "sum(istio_requests_total{$SEL,response_code=\"503\"})")" "$n503" "response_code=503: $n503"
is "$(promq "sum(istio_requests_total{$SEL,response_code=\"200\"})")" "$n200" "response_code=200: $n200"
share=$(promq "sum(istio_requests_total{$SEL,response_code=~\"5..\"}) / sum(istio_requests_total{$SEL})")
ok $(awk -v s="$share" -v a="$n503" -v n="$n" 'BEGIN { d = s - a / n; exit !(d < 1e-9 && d > -1e-9) }'; echo $?) \
	"5xx share $share = bench's $n503/$n"
is "$(promq "sum(istio_request_duration_milliseconds_count{$SEL})")" "$n" "duration histogram count = $n"
is "$(promq "sum(istio_request_duration_milliseconds_bucket{$SEL,le=\"+Inf\"})")" "$n" "its +Inf bucket = $n"
p99=$(promq "histogram_quantile(0.99, sum by (le) (rate(istio_request_duration_milliseconds_bucket{$SEL}[1m])))")
ok $(awk -v v="$p99" 'BEGIN { exit !(v > 0 && v < 10000) }'; echo $?) "p99 from the histogram: $p99 ms"
is "$(promq "sum(istio_response_bytes_count{$SEL})")" "$n" "response bytes histogram count = $n"
rb=$(promq "sum(istio_response_bytes_sum{$SEL})")
ok $([ "$rb" != none ] && [ "${rb%.*}" -gt 0 ] && [ "${rb%.*}" -lt "$rx" ]; echo $?) \
	"response body bytes $rb > 0 and < $rx bench counted with headers"
is "$(promq 'sum(zerohop_proxy_istio_series_overflow_total)')" 0 "no label set overflow"
# the TCP view of the same traffic (docs/observability.md "reporter"):
# client -> zerohop-proxy from node-a's agent, zerohop-proxy -> web from
# node-b's, with the backend's Service (the proxy's source address is
# known from the cluster state: obs.c O8, O7)
PXS='source_workload="zerohop-proxy",source_workload_namespace="zerohop-system"'
up_legs() {
	local v
	v=$(promq "sum(istio_tcp_connections_opened_total{reporter=\"destination\",$PXS,destination_workload=\"web\",destination_service=\"web.default.svc.cluster.local\"})")
	[ "$v" != none ] && [ "$v" -ge 1 ]
}
wait_until 10 up_legs
ok $? "node-b's agent: proxy -> web connections with source_workload zerohop-proxy and destination_service web"
is "$(promq "sum(istio_tcp_connections_opened_total{reporter=\"source\",source_workload=\"client\",destination_workload=\"zerohop-proxy\"}) > 0")" 4 \
	"node-a's agent: client -> zerohop-proxy, bench's 4 connections"
# the proxies' request log through zerohop observe
"$ZH" observe --lab $LAB --type request --service web -o json >"$TMP/req.json"
is "$(jq -s 'length' "$TMP/req.json")" "$n" "observe --type request: $n requests to default/web"
is "$(jq -s '[.[] | select(.status == 503 and .verdict == "ERROR" and .reason == "http_5xx")] | length' "$TMP/req.json")" \
	"$n503" "... $n503 of them 503, verdict ERROR, reason http_5xx"
is "$(jq -s -r '[.[] | .source.workload + ">" + .destination.workload + " " + .method + " " + .path] | unique | join(";")' "$TMP/req.json")" \
	"client>web GET /" "... from workload client to workload web, GET / (query string dropped)"
wait "$FPID"
ok $? "observe --follow --type request ended at its --timeout"
is "$(jq -s '[.[] | select(.type == "request" and .node == "node-a" and .destination.service == "default/web")] | length' "$TMP/follow.json")" \
	"$n" "observe --follow streamed all $n requests from node-a's proxy as they happened"
is "$(jq -s '[.[] | select(.status == 503 and .verdict == "ERROR")] | length' "$TMP/follow.json")" \
	"$n503" "... $n503 of them 503, verdict ERROR"
line=$("$ZH" observe --lab $LAB --type request --pod client | tail -1)
diag "$line"
echo "$line" | grep -qE '^[A-Z][a-z]{2} [0-9]{2} [0-9:]{8} node-a +default/client:[0-9]+ -> default/web:8080 \(svc default/web\) request (FORWARDED|ERROR)( reason=http_5xx)? GET / (200|503) [0-9.]+ms$'
ok $? "observe --pod client: one line per request"

done_testing
