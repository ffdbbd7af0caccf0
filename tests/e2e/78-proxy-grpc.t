#!/usr/bin/env bash
# 78-proxy-grpc.t — gRPC through `zerohop proxy` (explicit mode on
# loopback) with Debian's python3-grpcio on both ends: three gRPC servers
# (127.0.0.1-3) behind a Service whose port is named grpc (HTTP/2 to the
# backends, one multiplexed connection per endpoint), clients over
# HTTP/2 with prior knowledge. Unary and all three streaming kinds,
# ping-pong bidi, status + message + custom trailers, unknown method,
# deadline; per-call balancing over 4 client connections (round robin:
# 1/3 each ±5 %, and p2c-ewma: every backend used) where a direct
# connection pins to one server; an appProtocol port too.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/wait.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px73 27000 3000
GPY=/usr/bin/python3
"$GPY" -c 'import grpc' 2>/dev/null || skip_all "python3-grpcio missing (make deps)"
PEER="$(dirname "$0")/../tools/clients/grpc_peer.py"
G=$((B + 1))	# every server on its own address, same port

F=$((B + 3))	# flaky servers: UNAVAILABLE on every 5th call (20 %)
for k in 1 2 3; do
	"$GPY" "$PEER" serve "g$k" "127.0.0.$k:$G" 0 120 2>"$TMP/g$k.err" &
	PIDS+=($!)
	"$GPY" "$PEER" serve "f$k" "127.0.0.$k:$F" 5 120 2>"$TMP/f$k.err" &
	PIDS+=($!)
done
pods() { # APP
	for k in 1 2 3; do
		printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: %s-%s, labels: {app: g}}\n' "$1" $k
		printf 'spec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {podIP: 127.0.0.%s, phase: Running}\n' $k
	done
}
{
	pods g
	cat <<YAML
---
apiVersion: v1
kind: Service
metadata: {name: g}
spec: {selector: {app: g}, ports: [{name: grpc, port: 80, targetPort: $G}]}
---
apiVersion: v1
kind: Service
metadata: {name: rr}
spec: {selector: {app: g}, ports: [{name: web, appProtocol: kubernetes.io/h2c, port: 80, targetPort: $G}]}
---
apiVersion: v1
kind: Service
metadata: {name: f}
spec: {selector: {app: g}, ports: [{name: grpc-flaky, port: 80, targetPort: $F}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: g}
spec:
  parentRefs: [{group: "", kind: Service, name: g, port: 80}]
  rules:
  - matches: [{path: {type: Exact, value: /t.T/Slow}}]
    timeouts: {request: 300ms}
    backendRefs: [{name: g, port: 80}]
  - backendRefs: [{name: g, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: f0}
spec: {selector: {app: g}, ports: [{name: grpc-flaky, port: 80, targetPort: $F}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: f0, annotations: {zerohop.io/retries: "0"}}
spec:
  parentRefs: [{group: "", kind: Service, name: f0, port: 80}]
  rules:
  - backendRefs: [{name: f0, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: rr, annotations: {zerohop.io/lb-policy: round-robin}}
spec:
  parentRefs: [{group: "", kind: Service, name: rr, port: 80}]
  rules:
  - backendRefs: [{name: rr, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply
lb_proxy g $P $S --access-log "$TMP/access.log"
lb_proxy rr $((B + 2)) $((B + 6)) --upstream-idle-timeout 400ms
lb_proxy f $((B + 4)) $((B + 5))
lb_proxy f0 $((B + 7)) $((B + 8))
grpc_up() { "$GPY" "$PEER" spread "127.0.0.$1:$G" 1 1 >/dev/null 2>&1; }
wait_until 15 grpc_up 1 && wait_until 5 grpc_up 2 && wait_until 5 grpc_up 3
ok $? "three gRPC servers answer directly"
T="127.0.0.1:$P"

# ---- per-call balancing over 4 connections (first: the deadline call below
# would make p2c-ewma shun g1 for a while, as it should) ---------------------
direct=$("$GPY" "$PEER" spread "127.0.0.1:$G" 300 4)
diag "300 calls straight to one server address (an L4 pick): $direct"
rr=$("$GPY" "$PEER" spread "127.0.0.1:$((B + 2))" 3000 4)
diag "3000 calls over 4 connections, round-robin: $rr"
within() { # COUNT TOTAL: within 1/3 ± 5 % of TOTAL
	awk -v c="$1" -v t="$2" 'BEGIN { exit !(c >= t / 3 - t * 0.05 && c <= t / 3 + t * 0.05) }'
}
for k in 1 2 3; do
	c=$(sed -n "s/.*g$k=\([0-9]*\).*/\1/p" <<<"$rr")
	within "${c:-0}" 3000
	ok $? "round-robin: g$k got ${c:-0} of 3000 calls (1/3 ± 5 %)"
done
rrm() { curl -s "http://127.0.0.1:$((B + 6))/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
is "$(rrm 'zerohop_proxy_h2_connections_total{side="upstream"}')" 3 \
	"round-robin proxy: one HTTP/2 connection per backend for all 3000 calls"
idle3() { [ "$(rrm 'zerohop_proxy_timeouts_total{kind="upstream_idle"}')" = 3 ]; }
wait_until 5 idle3
ok $? "... all three closed by the upstream idle timeout (400 ms) once unused"
p2c=$("$GPY" "$PEER" spread "$T" 600 4)
diag "600 calls over 4 connections, p2c-ewma (default): $p2c"
n=$(grep -o 'g[123]=' <<<"$p2c" | sort -u | wc -l)
# (p2c-ewma shuns a server whose one call was slow until its cost decays:
# on a loaded machine one server may get few calls)
ok $([ "$n" -ge 2 ]; echo $?) "p2c-ewma: calls of the same 4 connections reach several servers ($n)"
# ---- every kind of call through the proxy ------------------------------------------
"$GPY" "$PEER" kinds "$T" >"$TMP/kinds.out" 2>"$TMP/kinds.err"
ok $? "gRPC calls of every kind through the proxy"
has() { grep -qxF "$1" "$TMP/kinds.out"; ok $? "$2"; }
has "ok unary hello" "unary call answered"
has "ok server-stream 0,1,2,3,4" "server streaming: 5 messages in order"
has "ok client-stream 200005" "client streaming: 200 KB across the HTTP/2 windows"
has "ok bidi 1,2,3" "bidirectional streaming"
has "ok ping-pong m0,m1,m2,m3,m4" "bidi streams through: each answer before the next request"
has "ok status NOT_FOUND nothing here x-trailer=t1" \
	"grpc-status, grpc-message and a custom trailer passed through"
has "ok unknown-method UNIMPLEMENTED" "trailers-only answer (unknown method) passed through"
has "ok deadline DEADLINE_EXCEEDED" "client deadline ends the call"
[ -s "$TMP/kinds.err" ] && diag "$(head -5 "$TMP/kinds.err")"

# ---- retries on grpc-status UNAVAILABLE (a trailers-only answer) --------------------
direct=$("$GPY" "$PEER" flaky "127.0.0.1:$F" 100)
is "$direct" "ok=80 failed=20" "straight to a flaky server: 20 % UNAVAILABLE"
fl=$("$GPY" "$PEER" flaky "127.0.0.1:$((B + 4))" 1000)
diag "1000 calls through the proxy (default retry policy): $fl"
okc=$(sed -n 's/ok=\([0-9]*\).*/\1/p' <<<"$fl")
ok $([ "${okc:-0}" -ge 995 ]; echo $?) "≥ 99.5 % of calls succeed through the proxy (${okc:-0}/1000)"
m=$(curl -s "http://127.0.0.1:$((B + 5))/metrics")
rt=$(sed -n 's/^zerohop_proxy_retries_total \([0-9]*\)/\1/p' <<<"$m")
diag "retries counted: $rt"
ok $([ "${rt:-0}" -ge 150 ] && [ "${rt:-0}" -le 400 ]; echo $?) \
	"retries counted, about the failure rate (${rt:-0} for 1000 calls)"
# ---- gRPC status counts as the backend's result (retries off) ------------------------
f0=$("$GPY" "$PEER" flaky "127.0.0.1:$((B + 7))" 200)
diag "200 calls, retries off: $f0"
fails=$(sed -n 's/.*failed=\([0-9]*\)/\1/p' <<<"$f0")
af=$(curl -s "http://127.0.0.1:$((B + 8))/metrics" |
	awk '$1 ~ /^zerohop_proxy_upstream_attempts_total\{.*result="failure"/ { s += $2 } END { print s + 0 }')
ok $([ "${fails:-0}" -ge 20 ] && [ "$af" = "$fails" ]; echo $?) \
	"UNAVAILABLE answers (HTTP 200) count as failed attempts: $af = $fails failed calls"
# ---- local answers to gRPC clients are gRPC ones --------------------------------------
out=$("$GPY" "$PEER" slow "$T" 2000 5)
diag "Slow(2 s) under a 300 ms route timeout, client deadline 5 s: $out"
ms=$(sed -n 's/.* ms=\([0-9]*\)/\1/p' <<<"$out")
is "${out% ms=*}" "DEADLINE_EXCEEDED details=request timed out" \
	"route timeout: a trailers-only DEADLINE_EXCEEDED from the proxy, with its reason"
ok $([ "${ms:-0}" -ge 250 ] && [ "${ms:-0}" -le 1500 ]; echo $?) "... after ${ms:-?} ms (300 ms timeout)"
grep -q '"POST /t.T/Slow HTTP/1.1" 504 .*request timed out' "$TMP/access.log"
ok $? "... logged as 504 with the reason"
if command -v nghttp >/dev/null; then
	# grpc-timeout alone (no route timeout on Who, no client deadline of
	# nghttp's): a Who call to a server that takes no time is answered,
	# a Slow(2 s) call with grpc-timeout 200m is ended by the proxy
	printf '\0\0\0\0\0042000' >"$TMP/slow.bin"
	t0=$(date +%s%N)
	out=$(nghttp -v -t 10 -H 'content-type: application/grpc' -H 'te: trailers' \
		-H 'grpc-timeout: 200m' -d "$TMP/slow.bin" "http://127.0.0.1:$((B + 2))/t.T/Slow" 2>&1)
	el=$(( ($(date +%s%N) - t0) / 1000000 ))
	grep -q 'grpc-status: 4' <<<"$out"
	ok $? "grpc-timeout 200m honoured by the proxy: DEADLINE_EXCEEDED after $el ms"
fi
grep -q 'POST /t.T/Who HTTP/1.1" 200' "$TMP/access.log"
ok $? "gRPC calls in the access log"
done_testing
