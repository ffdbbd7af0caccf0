#!/usr/bin/env bash
# 68-proxy-drain.t — graceful drain on SIGTERM and endpoint updates.
#  - SIGTERM under keep-alive load (`zerohop bench`, 300 requests/s, 16
#    connections): a replacement proxy listens beside the old one
#    (SO_REUSEPORT), the old one answers in-flight requests with
#    Connection: close, closes its listener and its idle clients, and exits
#    once its clients are gone: zero failed requests, every connection
#    reconnected, the exit well inside the deadline.
#  - a slow in-flight request finishes (200, Connection: close) and the
#    proxy exits right after it; an idle keep-alive client is closed; a
#    request that outlives --drain-timeout is cut at the deadline.
#  - endpoint update: an endpoint removed from the Service gets no new
#    request, its pooled upstream connection is closed at the reload, its
#    in-flight request still finishes.
# Backends: `zerohop echo` on loopback behind runtime Pods (podIP 127.0.0.1).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/loopback.sh"
LOOPBACK_SIG=INT	# the proxies are stopped at once, not drained
loopback_setup px68 19000 1000
S1=$((B + 8)); S2=$((B + 9))

lb_echo e1 1
lb_echo e2 2

{ lb_svc web web $((B + 1)); lb_pod web-1 web; } >"$TMP/m.yaml"
lb_apply

PROXY=
start_proxy() { # STATS [extra args]: sets PROXY
	local st=$1
	shift
	"$ZH" proxy --listen "127.0.0.1:$P" --service default/web --state "$TMP/state" \
		--stats-addr "127.0.0.1:$st" "$@" 2>>"$TMP/proxy-$st.err" &
	PROXY=$!
	PIDS+=($PROXY)
	wait_until 10 lb_http_up "$st" "$P"
}
metric() { # NAME STATSPORT
	curl -s "http://127.0.0.1:$2/" |
		awk -v k="$1" 'index($1, k) == 1 { s += $2 } END { printf "%d\n", s }'
}
metric_ge() { [ "$(metric "$1" "$2")" -ge "$3" ]; }	# NAME STATSPORT MIN
# wait_exit PID SECONDS → 0 when it exited in time (and reaped)
wait_exit() {
	local i
	for i in $(seq $(($2 * 20))); do
		kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
		sleep 0.05
	done
	return 1
}
ms() { date +%s%3N; }
U="http://127.0.0.1:$P"

# ---- SIGTERM under keep-alive load -------------------------------------------------
start_proxy $S1 --drain-timeout 10s; ok $? "proxy A up" || { cat "$TMP"/proxy-*.err; done_testing; }
A=$PROXY
"$ZH" bench -c 16 -qps 300 -t 4s --quiet --json "$TMP/load.json" "$U/load?delay=5ms" \
	>/dev/null 2>"$TMP/bench.err" &
BENCH=$!
sleep 1
start_proxy $S2; ok $? "replacement proxy B up beside A (SO_REUSEPORT)"
Bp=$PROXY
sleep 0.5
t0=$(ms)
kill -TERM "$A"
wait_exit "$A" 10
ok $? "A exited within the drain deadline"
dt=$(($(ms) - t0))
diag "A exited $dt ms after SIGTERM"
ok $([ $dt -lt 3000 ]; echo $?) "A exited once its clients left ($dt ms < 3000 ms, deadline 10 s)"
wait "$BENCH"
ok $? "bench finished"
set -- $("$PY" - "$TMP/load.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rc = r["RetCodes"]
print(rc.get("200", 0), sum(rc.values()), sum(r["Errors"].values()), r["SocketCount"])
PY
)
diag "bench: $1 x 200 of $2, errors $3, sockets $4"
ok $([ "$2" -ge 1000 ]; echo $?) "load ran (~1200 requests: $2)"
is "$1" "$2" "every request answered 200"
is "$3" 0 "zero failed requests"
ok $([ "$4" -gt 16 ]; echo $?) "clients reconnected after Connection: close ($4 sockets for 16 connections)"
grep -q "drained" "$TMP/proxy-$S1.err"
ok $? "A logged a complete drain"

# ---- a slow in-flight request finishes; an idle client is closed --------------------
"$PY" - "$P" >"$TMP/idle.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(10)
d = b""
while b"\r\n\r\n" not in d:
    d += s.recv(4096)
print("answered", flush=True)
t = time.time()
try:
    while True:
        c = s.recv(4096)
        if not c:
            break
except Exception as e:
    print("error", e)
print("closed after %.1f s" % (time.time() - t), flush=True)
PY
IDLE=$!
PIDS+=($IDLE)
sleep 0.3
curl -s -D "$TMP/slow.h" -o "$TMP/slow.b" "$U/slow?delay=1500ms" &
CURL=$!
sleep 0.3
t0=$(ms)
kill -TERM "$Bp"
sleep 0.2
is "$(metric zerohop_proxy_draining $S2)" 1 "B reports draining (its stats listener stays open)"
wait "$CURL"
ok $? "the in-flight request completed"
grep -q "^HTTP/1.1 200" "$TMP/slow.h"
ok $? "it was answered 200"
grep -qi "^connection: close" "$TMP/slow.h"
ok $? "with Connection: close"
wait_exit "$Bp" 5
ok $? "B exited"
dt=$(($(ms) - t0))
diag "B exited $dt ms after SIGTERM"
ok $([ $dt -ge 1000 ] && [ $dt -lt 2800 ]; echo $?) "right after the slow request ($dt ms)"
wait "$IDLE"
grep -q "closed after" "$TMP/idle.out"
ok $? "the idle keep-alive client was closed ($(tail -1 "$TMP/idle.out"))"
curl -s -m 2 -o /dev/null "$U/"
ok $([ $? -ne 0 ]; echo $?) "nothing listens after the drain"

# ---- the deadline -----------------------------------------------------------------------
start_proxy $S1 --drain-timeout 500ms; ok $? "proxy C up (--drain-timeout 500ms)"
C=$PROXY
curl -s -m 10 -o /dev/null -w '%{http_code}' "$U/stuck?delay=5s" >"$TMP/stuck.code" 2>/dev/null &
CURL=$!
sleep 0.3
t0=$(ms)
kill -TERM "$C"
wait_exit "$C" 5
ok $? "C exited"
dt=$(($(ms) - t0))
ok $([ $dt -ge 450 ] && [ $dt -lt 1200 ]; echo $?) "at the 500 ms deadline ($dt ms)"
wait "$CURL"
is "$(cat "$TMP/stuck.code")" "000" "the request still in flight at the deadline was cut"
grep -q "drain deadline reached" "$TMP/proxy-$S1.err"
ok $? "the deadline was logged"

# ---- endpoint update: removed endpoint drains -----------------------------------------
start_proxy $S1; ok $? "proxy D up"
D=$PROXY
curl -s -o /dev/null "$U/?delay=300ms" & curl -s -o /dev/null "$U/?delay=300ms"; wait $!
n0=$(metric zerohop_proxy_upstream_idle_connections $S1)
ok $([ "$n0" -ge 2 ]; echo $?) "pooled upstreams to e1 ($n0)"
curl -s -o "$TMP/inflight.b" -w '%{http_code}' "$U/inflight?delay=2s" >"$TMP/inflight.code" &
CURL=$!
sleep 0.2
# e1's pod goes away, e2's arrives (a rollout step): the Service now selects e2
{ lb_svc web web2 $((B + 2)); lb_pod web-2 web2; } >"$TMP/m2.yaml"
"$ZH" apply --state "$TMP/state" -f "$TMP/m2.yaml" >"$TMP/apply2.out" 2>&1
WAIT_STEP=0.05 wait_until 2 metric_ge zerohop_proxy_route_reloads_total $S1 1
is "$(metric zerohop_proxy_route_reloads_total $S1)" 1 "routes reloaded"
gone=$(metric zerohop_proxy_upstream_gone_total $S1)
ok $([ "$gone" -ge 1 ]; echo $?) "the idle upstream to the removed endpoint was closed at the reload ($gone)"
wait "$CURL"
is "$(cat "$TMP/inflight.code")" 200 "the request in flight on the removed endpoint finished"
grep -q "e1" "$TMP/inflight.b"
ok $? "... answered by the removed endpoint"
for i in $(seq 20); do curl -s "$U/after"; echo; done >"$TMP/after.b"
is "$(grep -c e2 "$TMP/after.b")" 20 "every new request goes to the new endpoint"
g2=$(metric zerohop_proxy_upstream_gone_total $S1)
ok $([ "$g2" -ge $((gone + 1)) ]; echo $?) "the in-flight request's upstream was not pooled afterwards ($g2)"
is "$(metric zerohop_proxy_endpoint_inflight $S1)" 0 "no try in flight"
lb_svc other other 1 >"$TMP/m3.yaml"
"$ZH" apply --state "$TMP/state" -f "$TMP/m3.yaml" >"$TMP/apply3.out" 2>&1
WAIT_STEP=0.05 wait_until 2 metric_ge zerohop_proxy_route_reloads_total $S1 2
curl -s "http://127.0.0.1:$S1/" | grep -q "endpoint=\"127.0.0.1:$((B + 1))\""
ok $([ $? -ne 0 ]; echo $?) "the removed endpoint's state was pruned at the next reload"
kill -INT "$D"

# ---- connection pools: limits, fast 503 on overflow, bounded memory -------------------
poolsvc() { # NAME MAXCONN MAXPENDING MAXRPC
	printf -- '---\napiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  annotations:\n' "$1"
	printf '    zerohop.io/max-connections: "%s"\n    zerohop.io/max-pending-requests: "%s"\n' "$2" "$3"
	printf '    zerohop.io/max-requests-per-connection: "%s"\n' "$4"
	printf 'spec: {selector: {app: web}, ports: [{port: 80, targetPort: %s}]}\n' $((B + 1))
}
{ poolsvc small 2 2 0; poolsvc rpc 1024 1024 3; lb_pod web-1 web; } >"$TMP/pool.yaml"
"$ZH" proxy --listen "127.0.0.1:$P" --service default/small -f "$TMP/pool.yaml" \
	--stats-addr "127.0.0.1:$S1" --connect-timeout 400ms 2>>"$TMP/proxy-pool.err" &
E=$!
PIDS+=($E)
wait_until 10 lb_http_up $S1
# 20 concurrent requests of 200 ms against 2 connections + 2 pending: one
# process opens 20 keep-alive connections, then sends the 20 requests at
# once; prints "STATUS MS" per request (latency from its send)
cat >"$TMP/burst.py" <<'PY'
import socket, sys, time, select
port, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
socks = [socket.create_connection(("127.0.0.1", port)) for i in range(n)]
t0 = {}
for i, s in enumerate(socks):
    t0[s] = time.monotonic()
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
buf = {s: b"" for s in socks}
out = []
left = set(socks)
end = time.monotonic() + 10
while left and time.monotonic() < end:
    r, _, _ = select.select(list(left), [], [], 0.5)
    for s in r:
        d = s.recv(65536)
        buf[s] += d
        if b"\r\n\r\n" in buf[s] or not d:
            out.append("%s %.2f" % (buf[s].split(b" ")[1].decode() if buf[s] else "EOF",
                                    (time.monotonic() - t0[s]) * 1000))
            left.discard(s)
for x in out: print(x)
PY
"$PY" "$TMP/burst.py" "$P" 20 "/p?delay=200ms" >"$TMP/pool.out"
n200=$(grep -c '^200 ' "$TMP/pool.out")
n503=$(grep -c '^503 ' "$TMP/pool.out")
diag "20 concurrent: $n200 x 200, $n503 x 503"
is "$n200" 4 "2 connections + 2 pending requests served (max-connections 2, max-pending-requests 2)"
is "$n503" 16 "the other 16 overflow: 503"
slow=$(awk '$1 == 503 && $2 > 100' "$TMP/pool.out" | wc -l)
lat=$(awk '$1 == 503 {print $2}' "$TMP/pool.out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[NR]}')
diag "overflow 503 latency (ms): median max = $lat"
is "$slow" 0 "every overflow 503 is fast (< 100 ms, the backend takes 200; median, max: $lat ms)"
pend=$(awk '$1 == 200 {print $2}' "$TMP/pool.out" | sort -n | tail -1)
ok $(awk -v x="$pend" 'BEGIN {exit !(x >= 380)}'; echo $?) \
	"the pending requests waited for a connection (slowest 200: $pend ms)"
is "$(metric 'zerohop_proxy_pool_overflow_total{reason="pending_full"}' $S1)" 16 "overflow counted"
is "$(metric zerohop_proxy_pool_pending_total $S1)" 2 "2 requests waited for a connection"
is "$(metric 'zerohop_proxy_endpoint_connections{' $S1)" 2 "never more than 2 upstream connections open"
# pending wait bounded by the connect timeout: 1 connection busy for 2 s
curl -s -o /dev/null "$U/a?delay=2s" & C1=$!
curl -s -o /dev/null "$U/b?delay=2s" & C2=$!
sleep 0.2
out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/c")
diag "pending request with both connections busy: $out"
ok $(echo "$out" | awk '{exit !($1 == 503 && $2 >= 0.35 && $2 < 0.9)}'; echo $?) \
	"a pending request gets 503 at the connect timeout (400 ms): $out"
is "$(metric 'zerohop_proxy_pool_overflow_total{reason="pending_timeout"}' $S1)" 1 "pending timeout counted"
wait $C1 $C2
# bounded memory under a flood of overflow
rss() { awk '/^VmRSS/ {print $2}' /proc/$1/status; }
r0=$(rss $E)
"$ZH" bench -c 200 -t 3s --quiet --json "$TMP/flood.json" "$U/f?delay=100ms" >/dev/null 2>&1
r1=$(rss $E)
sleep 0.5	# streams of closed clients still pending end at the 400 ms wait bound
set -- $("$PY" - "$TMP/flood.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rc = r["RetCodes"]
print(rc.get("200", 0), rc.get("503", 0), sum(rc.values()))
PY
)
diag "flood (200 connections, closed loop, 3 s): $1 x 200, $2 x 503 of $3; RSS $r0 -> $r1 KiB"
ok $([ "$2" -gt 1000 ]; echo $?) "the flood overflowed ($2 x 503)"
ok $([ $((r1 - r0)) -lt 12288 ]; echo $?) "proxy RSS stayed bounded (+$((r1 - r0)) KiB < 12 MiB)"
is "$(curl -s "http://127.0.0.1:$S1/" | awk '$1 == "zerohop_proxy_pool_pending" {print $2}')" 0 \
	"nothing left pending"
kill -INT "$E"; wait "$E" 2>/dev/null
# max requests per connection
"$ZH" proxy --listen "127.0.0.1:$P" --service default/rpc -f "$TMP/pool.yaml" \
	--stats-addr "127.0.0.1:$S1" 2>>"$TMP/proxy-pool.err" &
E=$!
PIDS+=($E)
wait_until 10 lb_http_up $S1
for i in $(seq 9); do curl -s -o /dev/null "$U/r$i"; done
is "$(metric zerohop_proxy_pool_max_requests_closed_total $S1)" 3 \
	"max-requests-per-connection 3: 9 requests, 3 connections retired"
kill -INT "$E"; wait "$E" 2>/dev/null
# a bad annotation is named
{ poolsvc bad 0 2 0; } >"$TMP/bad.yaml"
"$ZH" proxy --listen "127.0.0.1:$P" --service default/bad -f "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1
ok $([ $? -ne 0 ] && grep -q 'service default/bad: annotation zerohop.io/max-connections "0"' "$TMP/bad.out"; echo $?) \
	"a bad pool annotation is refused, naming the service: $(head -1 "$TMP/bad.out")"
done_testing
