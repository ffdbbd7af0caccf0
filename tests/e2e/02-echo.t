#!/usr/bin/env bash
# 02-echo.t — `zerohop echo` on loopback, black box: JSON echo, fortio
# parameters and their probability forms (tolerances far outside chance),
# pipelining on a raw socket, chunked uploads, malformed requests answered
# with the right status and a closed connection, TCP and UDP echo.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
test_setup echo-e2e --user curl jq python3

# Two free ports (HTTP P; TCP and UDP P+1). The server uses SO_REUSEPORT
# (two threads), so a port taken by another root process would be shared
# silently: check first.
for i in $(seq 0 30); do
	P=$((18000 + ($$ + i * 37) % 1000))
	T=$((P + 1))
	[ -z "$(ss -Htuln "( sport = :$P or sport = :$T )" 2>/dev/null)" ] && break
done
TEST_REAP=1

"$ZH" echo --http "127.0.0.1:$P" --tcp "127.0.0.1:$T" --udp "127.0.0.1:$T" --threads 2 \
	--name e2e-echo >"$TMP/out" 2>"$TMP/err" &
PID=$!
PIDS+=($PID)
wait_until 5 curl -s -o /dev/null "http://127.0.0.1:$P/"
up=$?
ok $up "echo server answers on 127.0.0.1:$P"
[ $up -eq 0 ] || { cat "$TMP/err"; done_testing; }
U="http://127.0.0.1:$P"

# raw REQUEST_BYTES: send on a fresh connection, print all the server sends
# until it closes (or 3 s). printf-style escapes in the argument.
raw() {
	"$PY" - "$P" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(sys.argv[2].encode("latin-1").decode("unicode_escape").encode("latin-1"))
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            out += b"<EOF>"
            break
        out += b
except socket.timeout:
    out += b"<TIMEOUT>"
sys.stdout.buffer.write(out)
PY
}

# --- JSON echo ---
case_json_echo() {
	j=$(curl -s -H 'X-Test: hello' "$U/some/path?a=1&b=two%20words&a=3")
	is "$(jq -r .hostname <<<"$j")" "$(hostname)" "JSON echo has the host name"
	is "$(jq -r .name <<<"$j")" "e2e-echo" "JSON echo has --name"
	is "$(jq -r '.headers["x-test"]' <<<"$j")" "hello" "JSON echo has request headers"
	is "$(jq -r .method <<<"$j")" "GET" "method"
	is "$(jq -r .path <<<"$j")" "/some/path" "path"
	is "$(jq -c .query <<<"$j")" '{"a":["1","3"],"b":"two words"}' "query object, repeated key as array"
	is "$(jq -r .body_length <<<"$j")" "0" "body_length"
}

# --- fortio parameters ---
case_fortio_parameters() {
	is "$(curl -s "$U/?size=1024" | wc -c)" "1024" "size=1024 gives 1024 bytes"
	is "$(curl -s -o /dev/null -w '%{http_code}' "$U/?status=418")" "418" "status=418"
	h=$(curl -s -D - -o /dev/null "$U/?header=X-Zh:yes&header=X-Two:2")
	grep -qi '^X-Zh: yes' <<<"$h"; ok $? "header=X-Zh:yes added"
	grep -qi '^X-Two: 2' <<<"$h"; ok $? "second header= added"
	t=$(curl -s -o /dev/null -w '%{time_total}' "$U/?delay=300ms")
	awk -v t="$t" 'BEGIN { exit !(t >= 0.3 && t < 1.5) }'; ok $? "delay=300ms took ${t}s"
	h=$(curl -s -D - -o /dev/null "$U/?close=true")
	grep -qi '^Connection: close' <<<"$h"; ok $? "close=true answers Connection: close"
	is "$(curl -s -o /dev/null -w '%{http_code}' "$U/?status=99")" "400" "bad parameter value: 400"
	grep -q "status" <(curl -s "$U/?status=99"); ok $? "and the message names the parameter"
	b=$(printf 'hello body' | curl -s --data-binary @- -H 'Content-Type: text/x-zh' -D "$TMP/h" "$U/")
	is "$b" "hello body" "POST body echoed without size="
	grep -qi '^Content-Type: text/x-zh' "$TMP/h"; ok $? "with the request's Content-Type"
	is "$(curl -s -I -o /dev/null -w '%{http_code}' "$U/?size=10")" "200" "HEAD works"
	grep -q "GET /debug?x=1 HTTP/1.1" <(curl -s "$U/debug?x=1"); ok $? "/debug dumps the request"
}

# Probability forms: counts with tolerances of >= 5 standard deviations.
urls() { for i in $(seq "$1"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$2"; done; }
case_probability_forms() {
	urls 1000 "$U/?status=503:30" >"$TMP/c1"
	n=$(curl -s -K "$TMP/c1" -w '%{http_code}\n' | grep -c '^503$')
	awk -v n="$n" 'BEGIN { exit !(n >= 200 && n <= 400) }'; ok $? "status=503:30: $n of 1000 were 503 (want 200..400)"
	urls 1000 "$U/?status=503:30,429:10" >"$TMP/c2"
	curl -s -K "$TMP/c2" -w '%{http_code}\n' >"$TMP/codes"
	n5=$(grep -c '^503$' "$TMP/codes"); n4=$(grep -c '^429$' "$TMP/codes"); n2=$(grep -c '^200$' "$TMP/codes")
	awk -v a="$n5" -v b="$n4" -v c="$n2" 'BEGIN { exit !(a >= 200 && a <= 400 && b >= 40 && b <= 160 && c >= 480 && c <= 720 && a + b + c == 1000) }'
	ok $? "status=503:30,429:10: 503 x$n5, 429 x$n4, 200 x$n2"
	urls 400 "$U/?size=1024:50" >"$TMP/c3"
	n=$(curl -s -K "$TMP/c3" -w '%{size_download}\n' | grep -c '^1024$')
	awk -v n="$n" 'BEGIN { exit !(n >= 150 && n <= 250) }'; ok $? "size=1024:50: $n of 400 got 1024 bytes (want 150..250)"
	urls 200 "$U/?delay=50ms:10" >"$TMP/c4"
	n=$(curl -s -K "$TMP/c4" -w '%{time_total}\n' | awk '$1 >= 0.045' | wc -l)
	awk -v n="$n" 'BEGIN { exit !(n >= 3 && n <= 45) }'; ok $? "delay=50ms:10: $n of 200 delayed (want 3..45)"
	urls 200 "$U/?close=50" >"$TMP/c5"
	n=$(curl -s -K "$TMP/c5" -w '%{num_connects}\n' | awk '{ s += $1 } END { print s }')
	awk -v n="$n" 'BEGIN { exit !(n >= 60 && n <= 140) }'; ok $? "close=50: $n new connections for 200 requests (want 60..140)"
}

# in_order TEXT PAT...: each (escape-decoded) PAT found after the previous.
in_order() {
	"$PY" - "$@" <<'PY'
import sys
text, pos = sys.argv[1], 0
for pat in sys.argv[2:]:
    pat = pat.encode().decode("unicode_escape")
    i = text.find(pat, pos)
    if i < 0:
        sys.exit(1)
    pos = i + len(pat)
PY
}

# --- pipelining on one raw connection: answered in order ---
case_pipelining() {
	out=$(raw 'GET /?size=3 HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\nPOST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyzGET /?size=2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
	is "$(grep -o "HTTP/1.1 200" <<<"$out" | wc -l)" "4" "four pipelined requests, four responses"
	in_order "$out" '\r\n\r\nabc' '"path":"/second"' '\r\n\r\nxyz' '\r\n\r\nab<EOF>'
	ok $? "responses in request order, then close"
	out=$(raw 'GET /?delay=200ms&size=1 HTTP/1.1\r\nHost: a\r\n\r\nGET /?size=2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
	in_order "$out" 'Content-Length: 1' '\r\n\r\na' 'Content-Length: 2' '\r\n\r\nab<EOF>'
	ok $? "a delayed response is not overtaken by the next one"
}

# Half-close after sending (nc -N style): every complete request is answered.
case_half_close() {
	"$PY" - "$P" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(b"GET /?delay=100ms&size=1 HTTP/1.1\r\nHost: a\r\n\r\nGET /?size=2 HTTP/1.1\r\nHost: a\r\n\r\n")
s.shutdown(socket.SHUT_WR)
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
sys.exit(0 if out.count(b"HTTP/1.1 200") == 2 and out.endswith(b"\r\n\r\nab") else 1)
PY
	ok $? "a client that half-closes gets every answer, then the close"
}

# --- chunked uploads ---
case_chunked_uploads() {
	head -c 100000 /dev/urandom >"$TMP/blob"
	curl -s -T "$TMP/blob" -H 'Transfer-Encoding: chunked' "$U/up" -o "$TMP/back"
	cmp -s "$TMP/blob" "$TMP/back"; ok $? "100 kB chunked upload echoed intact (curl, Expect: 100-continue)"
	out=$(raw 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\nGET /?size=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
	in_order "$out" 'Content-Length: 11' '\r\n\r\nhello world' 'HTTP/1.1 200' '\r\n\r\na<EOF>'
	ok $? "raw chunked body with extension and trailer, then a pipelined request"
	is "$(curl -s -H 'Transfer-Encoding: chunked' --data-binary 'abc' "$U/?size=5" | wc -c)" "5" "chunked upload with size= is discarded, size honoured"
}

# --- malformed requests: right status, Connection: close, nothing more parsed ---
bad() { # NAME WANT_STATUS REQUEST
	local out
	out=$(raw "$3GET /?size=1 HTTP/1.1\r\nHost: a\r\n\r\n")
	is "$(head -1 <<<"$out" | cut -d' ' -f2)" "$2" "$1: $2"
	ok "$([[ "$out" == *'Connection: close'*'<EOF>' && $(grep -o "HTTP/1.1 [0-9]" <<<"$out" | wc -l) == 1 ]] && echo 0 || echo 1)" \
		"$1: Connection: close, closed, the pipelined request after it ignored"
}
case_malformed_requests() {
	bad "CL + TE" 400 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n'
	bad "duplicate CL" 400 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx'
	bad "TE gzip, chunked" 501 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n'
	bad "TE not ending in chunked" 400 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n'
	bad "bad chunk size" 400 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5x\r\nhello\r\n0\r\n\r\n'
	bad "obs-fold" 400 'GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n'
	bad "space before colon" 400 'GET / HTTP/1.1\r\nHost : a\r\n\r\n'
	bad "NUL in header" 400 'GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n'
	bad "missing Host" 400 'GET / HTTP/1.1\r\n\r\n'
	bad "bad method" 400 'G(T / HTTP/1.1\r\nHost: a\r\n\r\n'
	bad "HTTP/0.9" 505 'GET /\r\n'
	bad "HTTP/2.0 version" 505 'GET / HTTP/2.0\r\nHost: a\r\n\r\n'
	bad "request line over 8 KiB" 414 "GET /$(head -c 9000 /dev/zero | tr '\0' a) HTTP/1.1\r\nHost: a\r\n\r\n"
	bad "headers over 64 KiB" 431 "GET / HTTP/1.1\r\nHost: a\r\nX: $(head -c 70000 /dev/zero | tr '\0' a)\r\n\r\n"
	bad "101 headers" 431 "GET / HTTP/1.1\r\nHost: a\r\n$(for i in $(seq 101); do printf 'X-%d: 1\\r\\n' "$i"; done)\r\n"
}

# --- TCP and UDP echo ---
case_tcp_udp_echo() {
	"$PY" - "$T" <<'PY'
import socket, sys, os, threading
data = os.urandom(1 << 20)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
t = threading.Thread(target=lambda: (s.sendall(data), s.shutdown(socket.SHUT_WR)))
t.start()
got = b""
while len(got) < len(data):
    b = s.recv(65536)
    if not b:
        break
    got += b
t.join()
sys.exit(0 if got == data else 1)
PY
	ok $? "TCP echo: 1 MiB back intact"
	"$PY" - "$T" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
okc = 0
for i in range(20):
    msg = b"datagram %d" % i
    s.sendto(msg, ("127.0.0.1", int(sys.argv[1])))
    try:
        if s.recvfrom(65536)[0] == msg:
            okc += 1
    except socket.timeout:
        pass
sys.exit(0 if okc == 20 else 1)
PY
	ok $? "UDP echo: 20 datagrams back to the sender"
}

# --- the server is still healthy, and stops on SIGTERM ---
case_healthy_then_sigterm() {
	is "$(curl -s -o /dev/null -w '%{http_code}' "$U/")" "200" "still serving after the bad input"
	kill -TERM "$PID"
	wait "$PID"
	is "$?" "0" "exits 0 on SIGTERM"
	PIDS=()
}

run_cases case_json_echo case_fortio_parameters case_probability_forms case_pipelining \
	case_half_close case_chunked_uploads case_malformed_requests case_tcp_udp_echo \
	case_healthy_then_sigterm
done_testing
