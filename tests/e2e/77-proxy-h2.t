#!/usr/bin/env bash
# 77-proxy-h2.t — cleartext HTTP/2 with prior knowledge into `zerohop
# proxy` (explicit mode on loopback, echo backends speaking HTTP/1.1), with
# real third-party clients: curl --http2-prior-knowledge and nghttp
# (nghttp2-client). Routing by path, a 1:2:3 split balanced per request on
# ONE connection, request bodies (length and chunk-less streaming), a
# large response under flow control, HEAD, concurrent streams on one
# connection, local answers (404), HTTP/1.1 still served on the same port,
# and a broken HTTP/2 client closed while others are served.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/wait.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px72 24000 3000
command -v nghttp >/dev/null || skip_all "nghttp missing (make deps: nghttp2-client)"
curl -V | grep -qw HTTP2 || skip_all "curl without HTTP/2"

for k in 1 2 3; do lb_echo "v$k" $k; done
# a backend whose answer to /many/N carries N fields x-f1..x-fN (and
# Content-Length): more than an HTTP/2 client's view can forward once the
# route adds its own
"$PY" - $((B + 4)) <<'PY' >/dev/null 2>&1 &
import socket, sys, threading
def serve(c):
    f = c.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            return
        n = int(line.split()[1].rsplit(b"/", 1)[1])
        while f.readline() not in (b"\r\n", b""):
            pass
        c.sendall(b"HTTP/1.1 200 OK\r\n" + b"".join(b"x-f%d: %d\r\n" % (i, i) for i in range(1, n + 1)) +
                  b"Content-Length: 2\r\n\r\nok")
l = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    threading.Thread(target=serve, args=(l.accept()[0],), daemon=True).start()
PY
PIDS+=($!)
{
	lb_svc web web $((B + 1)); lb_svc v1 v1 $((B + 1)); lb_svc v2 v2 $((B + 2)); lb_svc v3 v3 $((B + 3))
	lb_svc many many $((B + 4))
	lb_pod web-1 web; lb_pod v1-1 v1; lb_pod v2-1 v2; lb_pod v3-1 v3; lb_pod many-1 many
	cat <<YAML
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{group: "", kind: Service, name: web, port: 80}]
  rules:
  - matches: [{path: {type: Exact, value: /exact}}]
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /none}}]
    backendRefs: [{name: nosuch, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /split}}]
    backendRefs: [{name: v1, port: 80, weight: 1}, {name: v2, port: 80, weight: 2}, {name: v3, port: 80, weight: 3}]
  - matches: [{path: {type: PathPrefix, value: /hdr}}]
    filters:
    - {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: x-resp, value: r}]}}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /many}}]
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        add: [{name: x-a1, value: a}, {name: x-a2, value: a}, {name: x-a3, value: a},
              {name: x-a4, value: a}, {name: x-a5, value: a}, {name: x-a6, value: a},
              {name: x-a7, value: a}, {name: x-a8, value: a}, {name: x-a9, value: a}]
    backendRefs: [{name: many, port: 80}]
  - backendRefs: [{name: v1, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply
lb_proxy web $P $S --access-log "$TMP/access.log" --max-headers 128
lb_up "proxy answers HTTP/1.1" $P $((B + 3))
U="http://127.0.0.1:$P"
H2=(curl -s --http2-prior-knowledge --max-time 10)
name() { sed -n 's/.*"name":"\([^"]*\)".*/\1/p'; }

# ---- curl --http2-prior-knowledge -------------------------------------------
is "$("${H2[@]}" -o /dev/null -w '%{http_version} %{http_code}' "$U/")" "2 200" \
	"curl --http2-prior-knowledge: HTTP/2, 200"
is "$("${H2[@]}" "$U/" | name)" v1 "catch-all rule → v1 over HTTP/2"
is "$("${H2[@]}" "$U/exact" | name)" v2 "Exact path → v2 over HTTP/2"
is "$("${H2[@]}" -o /dev/null -w '%{http_code}' "$U/none")" 500 \
	"a rule whose backend does not exist: 500, as over HTTP/1.1"
"${H2[@]}" -D "$TMP/h.txt" -o /dev/null "$U/hdr"
grep -qi '^x-resp: r' "$TMP/h.txt"
ok $? "ResponseHeaderModifier applies to HTTP/2 responses"
! grep -qiE '^(connection|transfer-encoding|keep-alive):' "$TMP/h.txt"
ok $? "no HTTP/1.1 connection-specific fields in HTTP/2 responses"
# the echo backend answers a POST with its body
head -c 3000 /dev/urandom >"$TMP/small.bin"
is "$("${H2[@]}" --data-binary @"$TMP/small.bin" "$U/" | md5sum)" "$(md5sum <"$TMP/small.bin")" \
	"POST body with content-length echoed back whole"
head -c 300000 /dev/urandom >"$TMP/big.bin"
# curl -T - streams stdin with no content-length: re-framed as chunked
is "$("${H2[@]}" -T - "$U/" <"$TMP/big.bin" | md5sum)" "$(md5sum <"$TMP/big.bin")" \
	"300 KB PUT without length (beyond the 64 KiB windows) echoed back whole"
is "$(nghttp -d "$TMP/big.bin" "$U/" | md5sum)" "$(md5sum <"$TMP/big.bin")" \
	"nghttp: 300 KB POST echoed back whole"
n=$("${H2[@]}" "$U/?size=250000" | wc -c)
is "$n" 250000 "250 KB response through HTTP/2 flow control"
is "$("${H2[@]}" -I -o /dev/null -w '%{http_code}' "$U/")" 200 "HEAD over HTTP/2"
# an answer with more fields than the HTTP/2 head can carry: the stream is
# reset, never forwarded with fields missing (100 + 9 added fit; 127 + 9
# added + Content-Length do not)
out=$("${H2[@]}" -D - -o /dev/null -w 'code=%{http_code}\n' "$U/many/100")
is "$(grep -c '^x-[fa][0-9]*: ' <<<"$out") $(grep '^code=' <<<"$out")" "109 code=200" \
	"an answer with 100 fields plus the route's 9: all 109 forwarded"
"${H2[@]}" -D "$TMP/many.txt" -o /dev/null "$U/many/127"
rc=$?
diag "127 fields + 9 added: curl exit $rc, $(grep -c '^x-' "$TMP/many.txt") fields seen"
ok $([ "$rc" -ne 0 ] && ! grep -q '^HTTP/2 200' "$TMP/many.txt"; echo $?) \
	"an answer with 127 fields plus the route's 9: the stream is reset, not truncated"
is "$(curl -s "http://127.0.0.1:$S/metrics" |
	awk '$1 == "zerohop_proxy_h2_too_many_fields_total{part=\"headers\"}" { print $2 }')" 1 \
	"... counted as too_many_fields{part=headers}"
is "$("${H2[@]}" "$U/exact" | name)" v2 "... and the connection's others are served"

# ---- per-request balancing on one connection ----------------------------------
# (nghttp -m: curl 7.88 cannot reuse a prior-knowledge connection, curl#10634)
nghttp -t 60 -m 600 "$U/split" | grep -o '"name":"v[123]"' | tr -d '"' | cut -d: -f2 >"$TMP/split.txt"
c1=$(grep -c '^v1$' "$TMP/split.txt"); c2=$(grep -c '^v2$' "$TMP/split.txt"); c3=$(grep -c '^v3$' "$TMP/split.txt")
diag "600 requests on one HTTP/2 connection, weights 1:2:3: v1=$c1 v2=$c2 v3=$c3"
is $((c1 + c2 + c3)) 600 "600 split requests answered"
ok $([ "$c1" -ge 60 ] && [ "$c1" -le 140 ] && [ "$c2" -ge 150 ] && [ "$c2" -le 250 ] &&
	[ "$c3" -ge 240 ] && [ "$c3" -le 360 ]; echo $?) \
	"each request of one connection split on its own (1:2:3 within ±40 %)"

# ---- nghttp: concurrent streams on one connection -------------------------------
out=$(nghttp -n -v -t 10 "$U/exact" "$U/" "$U/split" "$U/?size=100000" 2>&1)
rc=$?
ok $rc "nghttp: 4 concurrent streams on one connection"
is "$(grep -c ':status: 200' <<<"$out")" 4 "nghttp: all four answered 200"
is "$(grep -c 'recv SETTINGS frame' <<<"$out" | awk '{print ($1 >= 1)}')" 1 "nghttp: got the proxy's SETTINGS"
grep -q 'SETTINGS_MAX_CONCURRENT_STREAMS(0x03):100' <<<"$out"
ok $? "proxy advertises MAX_CONCURRENT_STREAMS 100"

# ---- HTTP/1.1 on the same port; a broken HTTP/2 client ------------------------------
is "$(curl -s --http1.1 "$U/exact" | name)" v2 "HTTP/1.1 still served on the same port"
"$PY" - "$P" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x04\x99garbage-frame-bytes" * 4)
d = b""
try:
    while True:
        x = s.recv(65536)
        if not x: break
        d += x
except socket.timeout:
    sys.exit(2)
# the proxy's answer ends with a GOAWAY (type 7) before the close
sys.exit(0 if b"\x07" in d else 1)
PY
ok $? "a client sending a broken frame gets GOAWAY and the connection closes"
is "$("${H2[@]}" "$U/exact" | name)" v2 "the proxy serves others after it"

# ---- defences (crafted clients: python3-h2 and raw frames) ------------------------
ATT="$(dirname "$0")/../tools/clients/h2_attack.py"
metric() { curl -s "http://127.0.0.1:$S/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
out=$(/usr/bin/python3 "$ATT" streams "$P" 150)
diag "150 streams at once: $out"
is "$out" "refused=50 answered=100" "over MAX_CONCURRENT_STREAMS: 50 streams refused, 100 answered"
is "$(metric 'zerohop_proxy_h2_defence_total{action="refused_stream"}')" 50 "... counted"
out=$(/usr/bin/python3 "$ATT" rapid-reset "$P" 500)
diag "500 HEADERS+RST_STREAM pairs: $out"
is "$out" "goaway=-1 closed=0" "500 resets at once: within the burst, the connection stays"
out=$(/usr/bin/python3 "$ATT" rapid-reset "$P" 3000)
diag "3000 HEADERS+RST_STREAM pairs: $out"
is "$out" "goaway=2 closed=1" "rapid reset (CVE-2023-44487): GOAWAY and the connection closed"
n=$(metric zerohop_proxy_h2_client_resets_total)
ok $([ "${n:-0}" -ge 1500 ]; echo $?) "client resets counted ($n)"
out=$(/usr/bin/python3 "$ATT" continuation "$P" 50)
diag "HEADERS + 50 CONTINUATION frames: $out"
is "$out" "goaway=11 closed=1" "CONTINUATION flood: GOAWAY ENHANCE_YOUR_CALM, connection closed"
n=$(metric 'zerohop_proxy_h2_defence_total{action="goaway_error"}')
ok $([ "${n:-0}" -ge 2 ]; echo $?) "GOAWAYs with an error counted ($n)"
out=$(/usr/bin/python3 "$ATT" big-header "$P" 100)
diag "a 100 KiB header: $out"
is "$out" "reset=1 then=200" "header list over the limit: that stream reset, the connection serves on"
is "$(metric 'zerohop_proxy_h2_defence_total{action="header_list_too_large"}')" 1 "... counted"
# control-frame floods of a client that reads (src/proxy/h2flood.c: 500 of
# a kind at once, then 100 a second plus credit for work done)
for kind in ping settings window priority; do
	out=$(/usr/bin/python3 "$ATT" $kind-flood "$P" 400)
	is "$out" "goaway=-1 closed=0" "$kind: 400 frames at once: within the budget, the connection stays"
	out=$(/usr/bin/python3 "$ATT" $kind-flood "$P" 3000)
	is "$out" "goaway=11 closed=1" "$kind flood: 3000 frames: GOAWAY ENHANCE_YOUR_CALM, closed"
done
for a in settings_flood ping_flood window_update_flood priority_flood; do
	is "$(metric "zerohop_proxy_h2_defence_total{action=\"$a\"}")" 1 "... $a counted once"
done
is "$("${H2[@]}" "$U/exact" | name)" v2 "the proxy serves others after every attack"

# ---- idle memory (src/proxy/h2mem.c): an idle connection's spare pages go back
t0=$(metric zerohop_proxy_h2_idle_trimmed_bytes_total)
out=$(/usr/bin/python3 "$ATT" idle-again "$P" 3000)
is "$out" "first=200 second=200" "a connection idle 3 s (trimmed meanwhile) serves its next request"
t1=$(metric zerohop_proxy_h2_idle_trimmed_bytes_total)
ok $([ "${t1:-0}" -gt "${t0:-0}" ]; echo $?) \
	"... idle connections gave pages back: zerohop_proxy_h2_idle_trimmed_bytes_total ${t0:-none} -> ${t1:-none}"

# ---- metrics and access log ------------------------------------------------------------
grep -q '"GET /exact HTTP/1.1" 200' "$TMP/access.log"
ok $? "HTTP/2 requests are in the access log like any other"

# ---- drain (last: the proxy exits) ---------------------------------------------------------
/usr/bin/python3 "$ATT" drain "$P" 800 >"$TMP/drain.out" 2>&1 &
DC=$!
sleep 0.3
kill -TERM $PX
wait $DC
is "$(cat "$TMP/drain.out")" "goaway=0 last=1 status=200 closed=1" \
	"SIGTERM: GOAWAY(NO_ERROR, last stream 1), the in-flight stream answered, then closed"
wait $PX
ok $? "the proxy exits 0 once drained"
done_testing
