#!/usr/bin/env bash
# 47-obs-grpc.t — grpc_response_status on the node proxy's Istio metrics
# (docs/observability.md "L7"): Debian's python3-grpcio servers behind
# `zerohop proxy` (explicit mode on loopback, retries off) answer every
# 5th Flaky call UNAVAILABLE (14, a trailers-only answer); a Trailers call
# ends NOT_FOUND (5) in trailers after the head, an unknown method
# UNIMPLEMENTED (12). istio_requests_total per grpc_response_status must
# equal what the gRPC client saw, with request_protocol="grpc" and
# response_code 200; the request log (/flows, `zerohop observe`) carries
# the same codes, and so does zerohop_proxy_grpc_requests_total{route,
# backend,grpc_status} (by code name); a plain HTTP Service's requests keep
# grpc_response_status="" and request_protocol="http", as Istio does.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/wait.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup obs47 28000 2000
GPY=/usr/bin/python3
"$GPY" -c 'import grpc' 2>/dev/null || skip_all "python3-grpcio missing (make deps)"
PEER="$(dirname "$0")/../tools/clients/grpc_peer.py"
F=$((B + 1))	# flaky gRPC servers 127.0.0.1-3:F (UNAVAILABLE on every 5th call)
E=$((B + 2))	# HTTP echo 127.0.0.4:E (its own pod IP: workloads are found by IP)
for k in 1 2 3; do
	"$GPY" "$PEER" serve "f$k" "127.0.0.$k:$F" 5 90 2>"$TMP/f$k.err" &
	PIDS+=($!)
done
"$ZH" echo --http "127.0.0.4:$E" --name web >/dev/null 2>"$TMP/echo.err" &
PIDS+=($!)
{
	for k in 1 2 3; do
		printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: f-%s, labels: {app: f}}\n' $k
		printf 'spec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {podIP: 127.0.0.%s, phase: Running}\n' $k
	done
	cat <<YAML
---
apiVersion: v1
kind: Service
metadata: {name: f}
spec: {selector: {app: f}, ports: [{name: grpc, port: 80, targetPort: $F}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f, annotations: {zerohop.io/retries: "0"}}
spec:
  parentRefs: [{group: "", kind: Service, name: f, port: 80}]
  rules:
  - backendRefs: [{name: f, port: 80}]
YAML
	printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-1, labels: {app: web}}\n'
	printf 'spec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {podIP: 127.0.0.4, phase: Running}\n'
	lb_svc web web "$E"
} >"$TMP/m.yaml"
lb_apply
lb_proxy f $P $S
lb_proxy web $((B + 3)) $((B + 4))
grpc_up() { "$GPY" "$PEER" spread "127.0.0.$1:$F" 1 1 >/dev/null 2>&1; }
wait_until 15 grpc_up 1 && wait_until 5 grpc_up 2 && wait_until 5 grpc_up 3 &&
	wait_until 10 lb_http_up "$((B + 3))" "$S" "$((B + 4))"
ok $? "gRPC servers, echo and both proxies answer"

fl=$("$GPY" "$PEER" flaky "127.0.0.1:$P" 200)
diag "200 Flaky calls through the proxy, retries off: $fl"
okc=$(sed -n 's/ok=\([0-9]*\).*/\1/p' <<<"$fl")
fails=$(sed -n 's/.*failed=\([0-9]*\)/\1/p' <<<"$fl")
ok $([ "${fails:-0}" -ge 20 ] && [ $((okc + fails)) = 200 ]; echo $?) \
	"the client saw UNAVAILABLE answers ($fails of 200)"
"$GPY" "$PEER" kinds "127.0.0.1:$P" >"$TMP/kinds.out" 2>"$TMP/kinds.err"
grep -qxF "ok status NOT_FOUND nothing here x-trailer=t1" "$TMP/kinds.out" &&
	grep -qxF "ok unknown-method UNIMPLEMENTED" "$TMP/kinds.out"
ok $? "the client saw NOT_FOUND (in trailers) and UNIMPLEMENTED (trailers-only)"

# sum of istio_requests_total over the series whose labels include every
# given label="value" (awk: plain substring matches on the label block)
reqs() { # STATS_PORT LABEL...
	local port=$1
	shift
	curl -s "http://127.0.0.1:$port/metrics" | awk -v want="$*" '
		$1 ~ /^istio_requests_total\{/ {
			n = split(want, w, " "); hit = 1
			for (i = 1; i <= n; i++) if (index($1, w[i]) == 0) hit = 0
			if (hit) s += $2 }
		END { print s + 0 }'
}
F_FLAKY='destination_service_name="f"'
is "$(reqs "$S" "$F_FLAKY" 'grpc_response_status="14"')" "$fails" \
	"istio_requests_total{grpc_response_status=\"14\"} = the client's UNAVAILABLE calls ($fails)"
is "$(reqs "$S" 'grpc_response_status="14"' 'response_code="200"' 'request_protocol="grpc"')" \
	"$fails" "... all with response_code 200 and request_protocol grpc"
is "$(reqs "$S" 'grpc_response_status="5"')" 1 "one NOT_FOUND (5): grpc-status in trailers after the head"
is "$(reqs "$S" 'grpc_response_status="12"')" 1 "one UNIMPLEMENTED (12): a trailers-only answer"
# kinds adds 4 OK calls (unary and the 3 streaming kinds); its ping-pong
# leaves its stream to be cancelled (200 without trailers: "2", UNKNOWN, as
# Envoy maps it) or not, the deadline call is cancelled (response_code 0)
z=$(reqs "$S" 'grpc_response_status="0"')
ok $([ "$z" -ge $((okc + 4)) ] && [ "$z" -le $((okc + 5)) ]; echo $?) \
	"istio_requests_total{grpc_response_status=\"0\"} = $z: the $okc OK Flaky calls + kinds' 4-5"
is "$(reqs "$S" 'grpc_response_status=""' 'request_protocol="http"')" 0 \
	"no gRPC request is reported without a status or as http"
h0=$(reqs "$((B + 4))" 'grpc_response_status=""' 'request_protocol="http"' 'response_code="200"')
for i in 1 2 3 4 5; do curl -s -o /dev/null "http://127.0.0.1:$((B + 3))/x"; done
is $(($(reqs "$((B + 4))" 'grpc_response_status=""' 'request_protocol="http"' 'response_code="200"') - h0)) 5 \
	"plain HTTP Service: 5 requests with grpc_response_status=\"\", request_protocol http"
is "$(reqs "$((B + 4))" 'request_protocol="grpc"')" 0 "... none as grpc"
# zerohop's own counter by gRPC result, per route and backend (issue 18)
gq() { curl -s "http://127.0.0.1:$S/metrics" |
	awk -v st="grpc_status=\"$1\"" '$1 ~ /^zerohop_proxy_grpc_requests_total\{/ && index($1, st) { s += $2 }
		END { print s + 0 }'; }
is "$(gq UNAVAILABLE)" "$fails" "zerohop_proxy_grpc_requests_total{grpc_status=\"UNAVAILABLE\"} = $fails"
is "$(gq NOT_FOUND)" 1 "... NOT_FOUND 1 (in trailers), UNIMPLEMENTED $(gq UNIMPLEMENTED) (trailers-only)"
is "$(gq UNIMPLEMENTED)" 1 "... UNIMPLEMENTED 1"
is "$(gq OK)" "$z" "... OK = istio's grpc_response_status=\"0\" ($z)"
curl -s "http://127.0.0.1:$S/metrics" | grep -q \
	'^zerohop_proxy_grpc_requests_total{route="default/f#0",backend="default/f",grpc_status="UNAVAILABLE"} '
ok $? "... labelled by route and backend" ||
	diag "$(curl -s "http://127.0.0.1:$S/metrics" | grep zerohop_proxy_grpc_requests_total)"
is "$(curl -s "http://127.0.0.1:$((B + 4))/metrics" | grep -c '^zerohop_proxy_grpc_requests_total{')" 0 \
	"... and no series for a plain HTTP Service"
n14=$(curl -s "http://127.0.0.1:$S/flows" | grep -c '"grpc_status":14,')
is "$n14" "$fails" "request log (/flows, zerohop observe): $n14 requests with grpc_status 14"
done_testing
