#!/usr/bin/env bash
# 60-proxy-http.t — `zerohop proxy` in explicit mode on loopback in front of
# echo backends (pods whose status.podIP is 127.0.0.1): each match type and
# filter, hop-by-hop and tracing headers, a table of bad requests (exact
# status + close, never forwarded), malformed upstream → 502, refused
# upstream → 503, pipelining, chunked both ways, 100-continue, HTTP/1.0,
# a 3000-request split (chi-square at 99.999 %), a weight change picked up by
# an existing keep-alive connection, and a 100 MiB body with bounded RSS.
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px60 21000 3000

# ---- backends: three echo servers and a scripted bad upstream ----------------
for k in 1 2 3; do lb_echo "v$k" $k; done
cat >"$TMP/badsrv.py" <<'PY'
# Scripted upstream: the request path picks the (possibly broken) answer.
import socket, sys, threading
R = {
 b"/up/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n",
 b"/up/badstatus": b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
 b"/up/clte": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
 b"/up/badchunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n",
 b"/up/short": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
 b"/up/none": b"",
 b"/up/eof": b"HTTP/1.0 200 OK\r\n\r\nbody until close",
 b"/up/hdr": b"HTTP/1.1 200 OK\r\nBad Header: x\r\nContent-Length: 0\r\n\r\n",
}
def serve(c):
    d = b""
    while b"\r\n\r\n" not in d:
        x = c.recv(65536)
        if not x: return c.close()
        d += x
    path = d.split(b" ")[1].split(b"?")[0]
    c.sendall(R.get(path, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
"$PY" "$TMP/badsrv.py" $((B + 4)) 2>"$TMP/bad.err" &
PIDS+=($!)

# ---- manifests --------------------------------------------------------------
{
	lb_svc web web $((B + 1)); lb_svc v1 v1 $((B + 1)); lb_svc v2 v2 $((B + 2)); lb_svc v3 v3 $((B + 3))
	lb_svc bad bad $((B + 4)); lb_svc dead dead $((B + 5))
	lb_pod web-1 web; lb_pod v1-1 v1; lb_pod v2-1 v2; lb_pod v3-1 v3; lb_pod bad-1 bad; lb_pod dead-1 dead
} >"$TMP/base.yaml"
route() { # W1 W2 W3 for /split
	m_route web web <<YAML
  - matches: [{path: {type: Exact, value: /exact}}]
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /pre}}]
    backendRefs: [{name: v3, port: 80}]
  - matches: [{path: {type: RegularExpression, value: "/re/[a-z]+/[0-9]+"}}]
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /m}, method: DELETE}]
    backendRefs: [{name: v3, port: 80}]
  - matches: [{headers: [{name: x-canary, value: "yes"}]}]
    backendRefs: [{name: v3, port: 80}]
  - matches: [{headers: [{type: RegularExpression, name: x-user, value: "admin-[0-9]+"}]}]
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /q}, queryParams: [{name: ver, value: "2"}]}]
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /hdr}}]
    filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-set, value: s}], add: [{name: x-add, value: a}], remove: [x-gone]}}
    - {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: x-resp, value: r}], remove: [server]}}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 301}}]
  - matches: [{path: {type: PathPrefix, value: /rw}}]
    filters: [{type: URLRewrite, urlRewrite: {hostname: rewritten.local, path: {type: ReplacePrefixMatch, replacePrefixMatch: /inner}}}]
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /up}}]
    backendRefs: [{name: bad, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /dead}}]
    backendRefs: [{name: dead, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /split}}]
    backendRefs: [{name: v1, port: 80, weight: $1}, {name: v2, port: 80, weight: $2}, {name: v3, port: 80, weight: $3}]
  - backendRefs: [{name: v1, port: 80}]
YAML
}
route 1 2 3 >"$TMP/route.yaml"
cat "$TMP/base.yaml" "$TMP/route.yaml" >"$TMP/m.yaml"
lb_apply "manifests applied to a state directory"

lb_proxy web $P $S --access-log "$TMP/access.log"
lb_up "proxy on 127.0.0.1:$P answers" $P $((B + 3))
U="http://127.0.0.1:$P"

name() { curl -s "$@" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p'; }

# ---- routing --------------------------------------------------------------------
is "$(name "$U/")" v1 "catch-all rule → v1"
is "$(name "$U/exact")" v2 "Exact path → v2"
is "$(name "$U/exact/more")" v1 "Exact does not match a sub-path"
is "$(name "$U/pre/x")" v3 "PathPrefix → v3"
is "$(name "$U/prefix")" v1 "PathPrefix respects segment boundaries"
is "$(name "$U/re/abc/42")" v2 "RegularExpression → v2"
is "$(name "$U/re/abc/x")" v1 "RegularExpression anchored"
is "$(name -X DELETE "$U/m")" v3 "method DELETE → v3"
is "$(name "$U/m")" v1 "GET falls through"
is "$(name -H 'x-canary: yes' "$U/any")" v3 "header Exact → v3"
is "$(name -H 'x-user: admin-7' "$U/any")" v2 "header RegularExpression → v2"
is "$(name "$U/q?a=b&ver=2")" v2 "queryParam → v2"
is "$(name "$U/q?ver=1")" v1 "queryParam mismatch falls through"

# ---- filters --------------------------------------------------------------------
out=$(curl -s -i -H 'x-gone: 1' -H 'x-set: old' "$U/hdr")
echo "$out" | grep -q '"x-set":"s"'; ok $? "RequestHeaderModifier set replaces"
echo "$out" | grep -q '"x-add":"a"'; ok $? "RequestHeaderModifier add"
echo "$out" | grep -q 'x-gone'; ok $((! $?)) "RequestHeaderModifier remove"
echo "$out" | grep -qi '^x-resp: r'; ok $? "ResponseHeaderModifier add"
echo "$out" | grep -qi '^server:'; ok $((! $?)) "ResponseHeaderModifier remove"
out=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$U/old/page?x=1")
is "$out" "301 http://127.0.0.1:$P/new/page?x=1" "RequestRedirect 301 with prefix replaced"
out=$(curl -s "$U/rw/a/b?k=v")
echo "$out" | grep -q '"path":"/inner/a/b"'; ok $? "URLRewrite ReplacePrefixMatch"
echo "$out" | grep -q '"host":"rewritten.local"'; ok $? "URLRewrite hostname"

# ---- headers ----------------------------------------------------------------------
out=$(curl -s -H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' \
	-H 'b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1' -H 'Connection: keep-alive, x-hop' \
	-H 'x-hop: 1' -H 'Keep-Alive: timeout=5' -H 'TE: trailers' -H 'Proxy-Connection: x' "$U/")
echo "$out" | grep -q '"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"'
ok $? "traceparent passed through"
echo "$out" | grep -q '"b3":"80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1"'; ok $? "b3 passed through"
echo "$out" | grep -q '"x-request-id":"[0-9a-f]\{32\}"'; ok $? "x-request-id added when absent"
echo "$out" | grep -Eqi '"(x-hop|keep-alive|te|proxy-connection)"'; ok $((! $?)) "hop-by-hop headers removed (incl. Connection-listed)"
echo "$(curl -s -H 'x-request-id: keep-me' "$U/")" | grep -q '"x-request-id":"keep-me"'
ok $? "x-request-id kept when present"

# ---- raw client helper --------------------------------------------------------------
cat >"$TMP/raw.py" <<'PY'
import socket, sys, time
port = int(sys.argv[1]); mode = sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
def readall(t=3):
    out = b""; s.settimeout(t)
    try:
        while True:
            x = s.recv(65536)
            if not x: return out, "closed"
            out += x
    except socket.timeout:
        return out, "open"
if mode == "raw":
    s.sendall(sys.argv[3].encode("latin-1").decode("unicode_escape").encode("latin-1"))
    out, st = readall(2)
    line = out.split(b"\r\n")[0].decode("latin-1")
    print(line.split(" ")[1] if line.startswith("HTTP/") else "none", st, out.count(b"HTTP/1.1 "))
elif mode == "continue":
    s.sendall(b"POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    s.settimeout(3); first = s.recv(4096)
    ok = first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    s.sendall(b"hello"); out, _ = readall(1)
    print("100" if ok else "no100", "echoed" if out.endswith(b"hello") or b"hello" in out else "missing")
elif mode == "ka":  # N requests on one connection, PATH; prints name counts
    import collections
    n = int(sys.argv[3]); path = sys.argv[4]; c = collections.Counter(); buf = b""
    for i in range(n):
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        while True:
            h = buf.find(b"\r\n\r\n")
            if h >= 0:
                cl = [l for l in buf[:h].split(b"\r\n") if l.lower().startswith(b"content-length:")]
                ln = int(cl[0].split(b":")[1]) if cl else 0
                if len(buf) >= h + 4 + ln: break
            x = s.recv(65536)
            if not x: print("closed after", i); sys.exit(1)
            buf += x
        body = buf[h + 4:h + 4 + ln]; buf = buf[h + 4 + ln:]
        import re
        m = re.search(rb'"name":"([^"]*)"', body); c[m.group(1).decode() if m else "?"] += 1
        if len(sys.argv) > 5 and i == n // 2 - 1:
            # pause for an external change, keeping this connection open
            print("PAUSE", flush=True); sys.stdin.readline()
            c2 = dict(c); c.clear()
    if len(sys.argv) > 5: print(" ".join(f"{k}={v}" for k, v in sorted(c2.items())), "|", end=" ")
    print(" ".join(f"{k}={v}" for k, v in sorted(c.items())))
PY
raw() { "$PY" "$TMP/raw.py" "$P" raw "$1"; }

# ---- bad input: each case → exact status, connection closed, nothing forwarded ----
# (a bad chunk is found after the head went upstream: that upstream connection
# is then closed mid-body, never reused, and the client gets 400)
sleep 0.2; before=$(wc -l <"$TMP/access.log")
while IFS='|' read -r want req what; do
	[ -z "$want" ] && continue
	is "$(raw "$req")" "$want closed 1" "bad input: $what → $want + close"
done <<'CASES'
400|POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n|Content-Length with Transfer-Encoding
400|POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n|Transfer-Encoding not ending in chunked
501|POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n|unknown coding before chunked
400|POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n|chunked twice
400|POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello|duplicate Content-Length
400|POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello|conflicting Content-Length list
400|POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello|signed Content-Length
400|POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n|bad chunk size
400|POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;a b\r\nhello\r\n0\r\n\r\n|bad chunk extension
400|POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n|missing CRLF after chunk data
400|GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n  folded\r\n\r\n|obsolete line folding
400|GET / HTTP/1.1\r\nHost: x\r\nX-A: b\x00c\r\n\r\n|NUL in a header value
400|GET / HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n|CR in a header value
400|GET / HTTP/1.1\r\nHost: x\r\nX\x00A: b\r\n\r\n|NUL in a header name
400|GET / HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n|whitespace before the colon
400|GET / HTTP/1.1\r\nHost: x\r\n: b\r\n\r\n|empty header name
400|G(T / HTTP/1.1\r\nHost: x\r\n\r\n|invalid method
400|GET /a b HTTP/1.1\r\nHost: x\r\n\r\n|space in the target
400|GET a HTTP/1.1\r\nHost: x\r\n\r\n|relative target
400|GET / HTTP/1.1\r\n\r\n|HTTP/1.1 without Host
400|GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n|two Host lines
505|GET / HTTP/2.0\r\nHost: x\r\n\r\n|HTTP/2.0 on an HTTP/1 connection
505|GET /\r\n\r\n|HTTP/0.9
400|GET / http/1.1\r\nHost: x\r\n\r\n|lowercase version
CASES
is "$("$PY" - "$P" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
out = b""
try:
    while True:
        x = s.recv(65536)
        if not x: break
        out += x
except Exception: pass
print(out.split(b" ")[1].decode() if out else "none")
PY
)" 414 "request line over 8 KiB → 414"
is "$("$PY" - "$P" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(101)) + b"\r\n")
out = s.recv(65536)
print(out.split(b" ")[1].decode() if out else "none")
PY
)" 431 "101 header lines → 431"
is "$("$PY" - "$P" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
try:
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"v" * 70000 + b"\r\n\r\n")
except Exception: pass
out = s.recv(65536)
print(out.split(b" ")[1].decode() if out else "none")
PY
)" 431 "header block over 64 KiB → 431"
# access log: 3 "METHOD 4 TARGET 5 VERSION" 6 status ... 11 backend 12 endpoint
tail -n +$((before + 1)) "$TMP/access.log" | head -27 >"$TMP/bad.log"
n_bad=$(awk '$6 >= 400 && $11 == "-" && $12 == "-:0"' "$TMP/bad.log" | wc -l)
n_chunk=$(awk '$6 == 400 && $11 != "-" && $14 == "\"bad"' "$TMP/bad.log" | wc -l)
is "$n_bad:$n_chunk" "24:3" "24 bad heads never reached a backend; 3 bad chunks cut mid-body"

# ---- upstream failures ---------------------------------------------------------------
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/up/badstatus")" 502 "malformed upstream status line → 502"
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/up/clte")" 502 "upstream CL + TE → 502"
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/up/hdr")" 502 "upstream bad header → 502"
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/up/none")" 502 "upstream closed without answering → 502"
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/dead")" 503 "upstream connect refused → 503"
curl -s -o /dev/null "$U/up/short"; ok $(( $? == 0 )) "truncated upstream body → client connection cut (curl fails)"
curl -s -o /dev/null "$U/up/badchunk"; ok $(( $? == 0 )) "bad upstream chunk after the head → client connection cut"

# ---- framing ---------------------------------------------------------------------------
is "$(curl -s "$U/up/chunked")" "hello, world" "chunked response decoded and re-chunked"
is "$(curl -s --http1.0 "$U/up/chunked")" "hello, world" "chunked response to an HTTP/1.0 client (close-delimited)"
is "$(curl -s "$U/up/eof")" "body until close" "close-delimited upstream body re-chunked"
head -c 300000 /dev/urandom >"$TMP/body"
curl -s -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/body" "$U/echo" >"$TMP/back"
cmp -s "$TMP/body" "$TMP/back"; ok $? "chunked request body (300 KB) streamed to the backend intact"
curl -s --data-binary @"$TMP/body" "$U/echo" >"$TMP/back"
cmp -s "$TMP/body" "$TMP/back"; ok $? "Content-Length request body (300 KB) intact"
is "$(raw 'GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n\r\nGET /p3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')" \
	"200 closed 3" "three pipelined requests → three responses, then close"
out=$("$PY" - "$P" <<'PY'
import socket, sys, re
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(b"".join(b"GET /order/%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(5)) +
          b"GET /order/5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
out = b""
while True:
    x = s.recv(65536)
    if not x: break
    out += x
print(" ".join(m.decode() for m in re.findall(rb'"path":"/order/(\d)"', out)))
PY
)
is "$out" "0 1 2 3 4 5" "pipelined responses in request order"
is "$("$PY" "$TMP/raw.py" "$P" continue)" "100 echoed" "Expect: 100-continue answered, body forwarded"
is "$(raw 'GET / HTTP/1.0\r\n\r\n')" "200 closed 1" "HTTP/1.0 request without keep-alive: answered then closed"
is "$(raw 'GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n')" "200 open 1" "HTTP/1.0 keep-alive honoured"
is "$(raw 'GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n')" "200 open 1" \
	"Upgrade refused cleanly (stripped; plain answer, connection stays HTTP)"

# ---- per-request split: 3000 requests, weights 1:2:3, chi-square at 99.999 % -----------
out=$("$PY" "$TMP/raw.py" "$P" ka 3000 /split)
diag "split 1:2:3 over 3000: $out"
chi=$(echo "$out" | "$PY" -c '
import sys
c = dict(kv.split("=") for kv in sys.stdin.read().split())
o = [int(c.get(k, 0)) for k in ("v1", "v2", "v3")]
e = [500, 1000, 1500]
print("%.2f" % sum((a - b) ** 2 / b for a, b in zip(o, e)) if sum(o) == 3000 else 999)')
awk -v c="$chi" 'BEGIN { exit !(c < 23.026) }'
ok $? "chi-square $chi < 23.026 (df 2, 99.999 %)"

# ---- weight change applies to new requests on an existing keep-alive connection -----
route 1 0 0 >"$TMP/route.yaml"
"$ZH" apply --state "$TMP/state" -f "$TMP/route.yaml" >/dev/null 2>&1
sleep 0.5
coproc KA { "$PY" "$TMP/raw.py" "$P" ka 400 /split pause; }
# bash closes a coproc's fds and unsets KA_PID once it has exited: keep
# copies, or a reply read after a fast exit fails and `wait` waits for all
exec {KA_R}<&"${KA[0]}" {KA_W}>&"${KA[1]}"
KA_P=$KA_PID
read -r -t 30 line <&$KA_R
is "$line" PAUSE "first 200 requests sent on one connection"
route 0 0 1 >"$TMP/route.yaml"
"$ZH" apply --state "$TMP/state" -f "$TMP/route.yaml" >/dev/null 2>&1
reloaded() { [ "$(curl -s "http://127.0.0.1:$S/" | awk '/^zerohop_proxy_route_reloads_total/ {print $2}')" -ge 2 ] 2>/dev/null; }
wait_until 3 reloaded
echo go >&$KA_W
read -r -t 30 line <&$KA_R
wait $KA_P 2>/dev/null
exec {KA_R}<&- {KA_W}>&-
is "$line" "v1=200 | v3=200" "weights 1:0:0 then 0:0:1 on the same keep-alive connection"

# ---- 100 MiB streamed body, bounded proxy memory ------------------------------------------
code=$(head -c 104857600 /dev/zero | curl -s -o /dev/null -w '%{http_code}' -H 'Expect:' \
	--data-binary @- "$U/drop?size=10")
is "$code" 200 "100 MiB upload streamed through the proxy (echo drops it)"
hwm=$(awk '/VmHWM/ {print $2}' /proc/$PX/status)
diag "proxy peak RSS (VmHWM) after 100 MiB: ${hwm} KiB"
ok $(( hwm < 30720 ? 0 : 1 )) "peak RSS stays under 30 MiB (${hwm} KiB)"
code=$(curl -s -o "$TMP/big" -w '%{http_code}' "$U/big?size=262144")
is "$code:$(stat -c %s "$TMP/big")" "200:262144" "256 KiB response streamed back"

# ---- clients that reset while their answer is on its way ---------------------------------
# 20 clients ask for 1 MiB after 30 ms and reset (SO_LINGER 0) while it is
# being sent: whichever the proxy sees first (a failed batched send, batch.c,
# or the error on a read), each connection is closed, nothing is left
# behind, and the proxy keeps serving.
"$PY" - "$P" <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1]); socks = []
for i in range(20):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /?size=1048576&delay=30ms HTTP/1.1\r\nHost: web\r\n\r\n")
    socks.append(s)
time.sleep(0.05)   # the answers are being sent
for s in socks:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
PY
act=
for _ in $(seq 40); do
	act=$(curl -s "http://127.0.0.1:$S/metrics" | awk '$1 == "zerohop_proxy_active_connections" {print $2}')
	[ "$act" = 0 ] && break
	sleep 0.05
done
is "$act" 0 "20 clients reset during their 1 MiB answers: every connection closed"
is "$(name "$U/exact")" v2 "and the proxy still serves"

# ---- observability --------------------------------------------------------------------------
m=$(curl -s "http://127.0.0.1:$S/metrics")
echo "$m" | grep -q 'zerohop_proxy_requests_total{route="default/web#12",backend="default/v3",class="2xx"}'
ok $? "per route and backend counters by status class"
echo "$m" | grep -q 'zerohop_proxy_request_duration_seconds{route="default/web#13",backend="default/v1",quantile="0.99"}'
ok $? "per route and backend latency quantiles"
echo "$m" | grep -q '^zerohop_proxy_active_connections '; ok $? "active connections gauge"
# batched socket I/O (src/proxy/batch.c): io_uring unless ZEROHOP_NO_URING
# (60-proxy-http-alt.t runs this file that way, busy polling too), and the
# pipelined and split runs above gave it batches of more than one send
want=1; [ -n "${ZEROHOP_NO_URING:-}" ] && want=0
is "$(echo "$m" | awk '$1 == "zerohop_proxy_busy_poll_microseconds" {print $2}')" \
	"$([ -n "${ZEROHOP_PROXY_BUSY_POLL:-}" ] && echo 50 || echo 0)" "busy polling as configured"
is "$(echo "$m" | awk '$1 == "zerohop_proxy_io_uring" {print $2}')" "$want" \
	"batched I/O on $([ $want = 1 ] && echo io_uring || echo 'send(2)/recv(2) (ZEROHOP_NO_URING)')"
ok "$(echo "$m" | awk '$1 == "zerohop_proxy_batched_sends_total" {s = $2} $1 == "zerohop_proxy_send_batches_total" {b = $2} END {print (s > b && b > 0) ? 0 : 1}')" \
	"sends went out in batches (more sends than batches)"
grep -q '"GET /exact HTTP/1.1" 200 .* default/web#0 default/v2 127.0.0.1:' "$TMP/access.log"
ok $? "access log line names route, backend and endpoint"

out=$("$ZH" proxy --busy-poll 20x --listen 127.0.0.1:1 --service default/web -f "$TMP/base.yaml" 2>&1)
is "$?:$(echo "$out" | head -1)" "2:zerohop proxy: --busy-poll 20x: want a duration from 0 to 10ms, like 50us" \
	"a bad --busy-poll is refused, naming the flag"

kill -TERM $PX; wait $PX; rc=$?
is "$rc" 0 "SIGTERM stops the proxy cleanly"
done_testing
