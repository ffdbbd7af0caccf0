#!/usr/bin/env bash
# 86-proxy-h2-streams.t — more than one HTTP/2 connection to a backend
# whose SETTINGS_MAX_CONCURRENT_STREAMS is reached (src/proxy/h2up.c
# invariant 5), with Debian's python3-grpcio: a server that allows 2
# concurrent streams (grpc.max_concurrent_streams), 12 Slow(400 ms) calls
# at once from one client connection through `zerohop proxy` (explicit
# mode on loopback). One upstream connection would serve them in 6 waves
# (≥ 2.4 s); the proxy opens 6 connections (2 streams each) and the calls
# end together. The connections close once idle. With
# zerohop.io/max-connections: "2" on the Service, at most 2 are opened and
# 8 calls wait for a stream (2 waves of 2 × 2 streams).
# The pending limit (issue 18) applies to h2c backends: with
# max-connections 1 and max-pending-requests 2, of 6 calls at once 2 run,
# 2 wait and are served in the second wave, 2 are answered UNAVAILABLE at
# once (503, pending_full); calls longer than the connect timeout (1 s)
# leave the 2 waiting ones UNAVAILABLE after 1 s (pending_timeout).
# And an h2c backend that ends each answer with its DATA (nginx `return
# 200`, 1 KiB): 400 requests over one upstream connection all answered —
# the connection's flow-control window must get back what every released
# stream received (before, it shrank by each answer and stalled after
# 64 KiB).
# Answers before the request body (docs/proxy.md invariant 23, h2conn.c
# invariant 6), each client bounded by a timeout so a stall fails fast:
# the same nginx answers without reading the body. h2load -m 4 uploading
# 30 KB bodies: all answered (before a4c3a39 the client connection's
# window kept the unacknowledged DATA of every such stream and stalled);
# 200 KB bodies: all answered, each stream reset with NO_ERROR after its
# answer (before, the stream waited for a body the closed upstream stream
# could not take, and h2load hung); an HTTP/1.1 client sending 900 KB
# (length or chunked) before reading gets its answer and a second one on
# the same connection (before: stalled). A client whose upload never ends
# is closed at the discard bound (--discard-time, invariant 24). The same against an HTTP/1.1
# backend that answers at once and closes without reading
# (http_backend.py --early; its close resets the upload). And a client
# that cancels an upload the proxy holds (a backend that never reads,
# --hold) gets the connection's whole window back at once.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/wait.sh"
source "$(dirname "$0")/../lib/loopback.sh"
source "$(dirname "$0")/../../scripts/lib/nginx.sh"
loopback_setup px86 31000 2000
GPY=/usr/bin/python3
"$GPY" -c 'import grpc' 2>/dev/null || skip_all "python3-grpcio missing (make deps)"
PEER="$(dirname "$0")/../tools/clients/grpc_peer.py"
G=$((B + 1))

"$GPY" "$PEER" serve s1 "127.0.0.1:$G" 0 120 2 2>"$TMP/s1.err" &
PIDS+=($!)
svc() { # NAME [ANNOTATIONS]
	printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: %s%s}\n' "$1" "${2:+, annotations: {$2\}}"
	printf 'spec: {selector: {app: s}, ports: [{name: grpc, port: 80, targetPort: %s}]}\n' $G
}
{
	printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: s1, labels: {app: s}}\n'
	printf 'spec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {podIP: 127.0.0.1, phase: Running}\n'
	svc wide
	svc capped 'zerohop.io/max-connections: "2"'
	svc pend 'zerohop.io/max-connections: "1", zerohop.io/max-pending-requests: "2"'
	printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: ng, labels: {app: ng}}\n'
	printf 'spec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {podIP: 127.0.0.1, phase: Running}\n'
	printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: ng}\n'
	printf 'spec: {selector: {app: ng}, ports: [{name: http2, port: 80, targetPort: %s}]}\n' $((B + 4))
	lb_svc early early $((B + 7))
	lb_pod early-1 early
	lb_svc hold hold $((B + 8))
	lb_pod hold-1 hold
	m_route ng ng <<YAML
  - matches: [{path: {type: PathPrefix, value: /early}}]
    backendRefs: [{name: early, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /hold}}]
    backendRefs: [{name: hold, port: 80}]
  - backendRefs: [{name: ng, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply
lb_proxy wide $P $S --upstream-idle-timeout 1500ms
lb_proxy capped $((B + 2)) $((B + 3))
# (the block's 10 ports are taken: this proxy listens on 127.0.0.2)
"$ZH" proxy --listen "127.0.0.2:$P" --service default/pend --state "$TMP/state" \
	--stats-addr "127.0.0.2:$S" 2>"$TMP/proxy-pend.err" &
PIDS+=($!)
up() { "$GPY" "$PEER" spread "$1" 1 1 >/dev/null 2>&1; }
wait_until 15 up "127.0.0.1:$G"
ok $? "the gRPC server answers directly"
wait_until 10 up "127.0.0.1:$P" && wait_until 10 up "127.0.0.1:$((B + 2))" &&
	wait_until 10 up "127.0.0.2:$P"
ok $? "the proxies answer (each now holds one connection that saw the server's SETTINGS)"
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
UPC='zerohop_proxy_h2_connections_total{side="upstream"}'

c0=$(metric $S "$UPC")
i0=$(metric $S 'zerohop_proxy_timeouts_total{kind="upstream_idle"}')
out=$("$GPY" "$PEER" burst "127.0.0.1:$P" 12 400)
diag "through the proxy, 12 calls of 400 ms at once over one client connection: $out"
is "${out% ms=*}" "ok=12" "all 12 calls answered"
ms=${out#*ms=}
ok $([ "${ms:-9999}" -lt 1600 ]; echo $?) \
	"... together in ${ms:-?} ms (one connection at 2 streams: 6 waves, ≥ 2400 ms)"
# (6 with 2 streams each: the warm-up one and 5 more, or 6 new when the
# warm-up one idled out first on a slow machine — the endpoint's limit is
# remembered, so a new first connection also takes only 2)
c1=$(metric $S "$UPC")
ok $([ $((c1 - c0)) -ge 5 ] && [ $((c1 - c0)) -le 6 ]; echo $?) \
	"6 upstream connections for the burst, 2 streams each ($((c1 - c0)) new)"
idle() { [ "$(metric $S 'zerohop_proxy_timeouts_total{kind="upstream_idle"}')" -ge $((i0 + c1 - c0)) ]; }
wait_until 8 idle
ok $? "all closed by the upstream idle timeout (1.5 s) once unused"
direct=$("$GPY" "$PEER" burst "127.0.0.1:$G" 4 400)
diag "straight to the server, 4 calls of 400 ms at once: $direct (2 streams at a time)"

out=$("$GPY" "$PEER" burst "127.0.0.1:$((B + 2))" 8 400)
diag "max-connections 2: 8 calls of 400 ms at once: $out"
is "${out% ms=*}" "ok=8" "all 8 calls answered under max-connections 2"
ms=${out#*ms=}
ok $([ "${ms:-0}" -ge 750 ]; echo $?) \
	"... in 2 waves (${ms:-?} ms ≥ 750): the calls waited for a stream of the 2 connections"
is "$(metric $((B + 3)) "$UPC")" 2 "... over 2 upstream connections, no more"

# ---- the pending limit on an h2c backend -------------------------------------------
OVF='zerohop_proxy_pool_overflow_total{reason="pending_full"}'
OVT='zerohop_proxy_pool_overflow_total{reason="pending_timeout"}'
pmetric() { curl -s "http://127.0.0.2:$S/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
f0=$(pmetric "$OVF"); t0=$(pmetric "$OVT"); q0=$(pmetric zerohop_proxy_pool_pending_total)
out=$("$GPY" "$PEER" burst "127.0.0.2:$P" 6 400 2>"$TMP/pend.err")
diag "max-connections 1, max-pending 2: 6 calls of 400 ms at once: $out; $(sort "$TMP/pend.err" | uniq -c | tr -s ' \n' ' ')"
is "${out% ms=*}" "ok=4" "4 of 6 calls answered: 2 streams of the one connection + 2 pending"
is "$(grep -c '^failed UNAVAILABLE' "$TMP/pend.err")" 2 "... the other 2 UNAVAILABLE (a 503 at once: pending full)"
is "$(($(pmetric "$OVF") - f0))" 2 "... counted as $OVF"
is "$(($(pmetric zerohop_proxy_pool_pending_total) - q0))" 2 "... 2 calls waited (pool_pending_total)"
ms=${out#*ms=}
ok $([ "${ms:-0}" -ge 750 ]; echo $?) "... the waiting ones served in a second wave (${ms:-?} ms ≥ 750)"
out=$("$GPY" "$PEER" burst "127.0.0.2:$P" 4 1800 2>"$TMP/pend2.err")
diag "4 calls of 1.8 s at once (connect timeout 1 s): $out; $(sort "$TMP/pend2.err" | uniq -c | tr -s ' \n' ' ')"
is "${out% ms=*}" "ok=2" "calls longer than the connect timeout: 2 served"
is "$(grep -c '^failed UNAVAILABLE' "$TMP/pend2.err")" 2 "... the 2 waiting ones UNAVAILABLE"
is "$(($(pmetric "$OVT") - t0))" 2 "... after waiting the connect timeout ($OVT)"
is "$(pmetric zerohop_proxy_pool_pending)" 0 "... and nothing left waiting"
is "$(pmetric "$UPC")" 1 "... all over 1 upstream connection"

# (nginx-light and nghttp2-client are in scripts/deps.sh)
mkdir -p "$TMP/ng"
nginx_h2c_origin_cfg "$TMP/ng" "127.0.0.1:$((B + 4))" >"$TMP/ng/nginx.conf"
nginx -c "$TMP/ng/nginx.conf" -e "$TMP/ng/error.log" 2>"$TMP/ng.err" &
PIDS+=($!)
"$ZH" proxy --listen "127.0.0.1:$((B + 5))" --service default/ng --state "$TMP/state" \
	--stats-addr "127.0.0.1:$((B + 6))" 2>"$TMP/proxy-ng.err" &
PIDS+=($!)
ng_up() { curl -s --http2-prior-knowledge -m 2 -o /dev/null "http://127.0.0.1:$1/"; }
wait_until 10 ng_up $((B + 4)) && wait_until 10 ng_up $((B + 5))
ok $? "nginx h2c backend and its proxy answer"
out=$(timeout 30 h2load -n 400 -c 1 -m 4 "http://127.0.0.1:$((B + 5))/" 2>&1 | grep '^requests:')
diag "400 requests of 1 KiB through one h2c upstream connection: $out"
grep -q ' 400 succeeded' <<<"$out"
ok $? "all 400 answered: the upstream connection window does not leak"
is "$(metric $((B + 6)) "$UPC")" 1 "... over one upstream connection"

# ---- answers before the request body (invariant 23) ----------------------------
"$PY" "$HTTP_BACKEND" --early --body early $((B + 7)) 2>"$TMP/early.err" &
PIDS+=($!)
wait_until 10 lb_http_up $((B + 7))
ok $? "an HTTP/1.1 backend that answers before reading the body"
NG=http://127.0.0.1:$((B + 5))
head -c 30000 /dev/urandom >"$TMP/30k.bin"
head -c 200000 /dev/urandom >"$TMP/200k.bin"
e0=$(metric $((B + 6)) zerohop_proxy_early_answers_total)
h2up() { # NAME URL BODY: h2load -n 40 -c 2 -m 4 uploading BODY, 20 s at most
	local out
	out=$(timeout 20 h2load -n 40 -c 2 -m 4 -d "$3" "$2" 2>&1 | grep '^requests:')
	diag "$1: ${out:-no summary: stalled, killed after 20 s}"
	grep -q ' 40 succeeded' <<<"$out"
}
h2up "30 KB bodies to nginx h2c" "$NG/" "$TMP/30k.bin"
ok $? "h2load -m 4, 30 KB bodies, answered before read: all 40 (client window given back)"
h2up "200 KB bodies to nginx h2c" "$NG/" "$TMP/200k.bin"
ok $? "h2load -m 4, 200 KB bodies, answered before read: all 40 (no stall)"
# (nghttp -v: a frame's line, then its flags and fields on the next ones)
out=$(timeout 10 nghttp -v -d "$TMP/200k.bin" "$NG/" 2>&1 | tr -d '\n' |
	grep -o 'recv DATA frame <[^>]*stream_id=13> *; END_STREAM.*')
grep -qE '^recv DATA[^;]*; END_STREAM\[[ 0-9.]*\] recv RST_STREAM frame <[^>]*stream_id=13> *\(error_code=NO_ERROR' <<<"$out"
ok $? "nghttp: the answer ends (END_STREAM), then RST_STREAM(NO_ERROR) (RFC 9113 8.1)"
UPL="$ROOT/tests/tools/clients/h1_upload.py"
is "$(timeout 15 "$PY" "$UPL" $((B + 5)) / 900000)" "first=200 second=200" \
	"HTTP/1.1 client, 900 KB sent before reading: answered, then keep-alive (nginx h2c)"
is "$(timeout 15 "$PY" "$UPL" $((B + 5)) / 900000 chunked)" "first=200 second=200" \
	"... chunked body"
h2up "200 KB bodies to an HTTP/1.1 backend that answers and closes" "$NG/early" "$TMP/200k.bin"
ok $? "h2load -m 4, 200 KB bodies, HTTP/1.1 backend answering and closing: all 40"
r=""
for i in 1 2 3 4 5; do r+="$(timeout 15 "$PY" "$UPL" $((B + 5)) /early 900000) "; done
is "$r" "$(printf 'first=200 second=200 %.0s' 1 2 3 4 5)" \
	"HTTP/1.1 client, 900 KB to a backend that answers and resets: answered 5/5, keep-alive"
# a4c3a39's give-back where nothing else hides it: an upload to a backend
# that never reads, cancelled by the client once the proxy holds its
# window; the bytes the stream took must come back to the connection
"$PY" "$HTTP_BACKEND" --hold $((B + 8)) 2>"$TMP/hold.err" &
PIDS+=($!)
listening() { ss -Htln "( sport = :$1 )" | grep -q .; }
wait_until 10 listening $((B + 8))
out=$(timeout 20 /usr/bin/python3 "$ROOT/tests/tools/clients/h2_attack.py" cancel-upload $((B + 5)) 32768)
diag "upload to a backend that never reads, then RST_STREAM(CANCEL): $out"
is "$out" "stalled=1 window=65535" \
	"... the connection's window comes back whole (0 on 8c48326 and before the flush fix)"
# ---- the bound on a dropped body (invariant 24) ---------------------------------
# a client whose upload never ends (1 GiB announced, ~6 MB/s) to the backend
# that answers at once: with --discard-time 2s its connection is closed
# about 2 s after the answer; with the default (30 s) it is still open 4 s on
"$ZH" proxy --listen "127.0.0.2:$((B + 5))" --service default/ng --state "$TMP/state" \
	--stats-addr "127.0.0.2:$((B + 6))" --discard-time 2s 2>"$TMP/proxy-ng2.err" &
PIDS+=($!)
ng2_up() { curl -s --http2-prior-knowledge -m 2 -o /dev/null "http://127.0.0.2:$((B + 5))/"; }
wait_until 10 ng2_up
ok $? "a proxy with --discard-time 2s answers"
m2() { curl -s "http://127.0.0.2:$((B + 6))/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
END="$ROOT/tests/tools/clients/h1_endless.py"
d0=$(m2 zerohop_proxy_discard_closed_total)
out=$(timeout 20 "$PY" "$END" 127.0.0.2 $((B + 5)) /early 8)
diag "endless upload, --discard-time 2s: $out"
t=$(sed -n 's/.* closed=\([0-9.]*\) .*/\1/p' <<<"$out")
ok $([ "${out%% *}" = status=200 ] && [ -n "$t" ] &&
	awk -v t="$t" 'BEGIN { exit !(t >= 1.8 && t <= 4) }'; echo $?) \
	"... answered 200, then closed ${t:-never} s later (bound 2 s, nginx's lingering_time)"
is "$(($(m2 zerohop_proxy_discard_closed_total) - d0))" 1 "... counted: zerohop_proxy_discard_closed_total +1"
out=$(timeout 20 "$PY" "$END" 127.0.0.1 $((B + 5)) /early 4)
diag "endless upload, default bound (30 s): $out"
ok $([ "${out%% *}" = status=200 ] && grep -q ' open=' <<<"$out"; echo $?) \
	"... with the default bound (30 s) the connection stays open while the client sends"
is "$(ng2_up && echo up)" up "... and that proxy serves on"
e1=$(metric $((B + 6)) zerohop_proxy_early_answers_total)
ok $([ $((e1 - e0)) -ge 10 ]; echo $?) "early answers counted ($((e1 - e0)))"
is "$(curl -s -m 5 --http2-prior-knowledge "$NG/" | wc -c)" 1024 "the proxy serves on"
done_testing
