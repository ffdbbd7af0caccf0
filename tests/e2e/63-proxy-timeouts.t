#!/usr/bin/env bash
# 63-proxy-timeouts.t — HTTPRoute timeouts.request / timeouts.backendRequest
# (504 on time, the client connection kept, the late upstream never pooled),
# the upstream connect timeout (503 against a listener whose accept queue is
# full, so SYNs are dropped), client and upstream idle timeouts, and no
# timeout at all when the route sets none. Backends: `zerohop echo` on
# loopback behind runtime Pods with status.podIP 127.0.0.1.
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px63 19000 1000

lb_echo v1 1
# A listener that never accepts, its queue filled: connects to it hang.
cat >"$TMP/hole.py" <<'PY'
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(0)
fill = []
for i in range(3):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", int(sys.argv[1])))
    except BlockingIOError: pass
    fill.append(c)
print("ready", flush=True)
time.sleep(600)
PY
"$PY" "$TMP/hole.py" $((B + 2)) >"$TMP/hole.out" 2>&1 &
PIDS+=($!)

{
	lb_svc web web $((B + 1)); lb_svc v1 v1 $((B + 1)); lb_svc hole hole $((B + 2))
	lb_pod web-1 web; lb_pod v1-1 v1; lb_pod hole-1 hole
	m_route web web 'zerohop.io/retries: "0"' <<YAML
  - matches: [{path: {type: PathPrefix, value: /rt}}]
    timeouts: {request: 500ms}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /bt}}]
    timeouts: {request: 5s, backendRequest: 300ms}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /hole}}]
    backendRefs: [{name: hole, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /holert}}]
    timeouts: {request: 100ms}
    backendRefs: [{name: hole, port: 80}]
  - backendRefs: [{name: v1, port: 80}]
YAML
	m_route web-retry web <<YAML
  - matches: [{path: {type: PathPrefix, value: /rbt}}]
    timeouts: {backendRequest: 300ms}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /rhole}}]
    backendRefs: [{name: hole, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply

lb_proxy web $P $S --access-log "$TMP/access.log" --connect-timeout 200ms \
	--client-idle-timeout 400ms --upstream-idle-timeout 400ms
all_up() { lb_http_up $P $((B + 1)) && grep -q ready "$TMP/hole.out"; }
wait_until 10 all_up
up=$?
ok $up "proxy, echo and the black-hole listener are up"
[ $up -eq 0 ] || { cat "$TMP/proxy.err" "$TMP/hole.out"; done_testing; }
U="http://127.0.0.1:$P"
metric() { curl -s "http://127.0.0.1:$S/" | awk -v k="$1" '$1 == k { print $2 }'; }

# in [lo, hi + LATE] seconds (floats). Early is never allowed (a timer
# firing before its time is a bug); late gets LATE more, for the curl and
# proxy processes being scheduled late on a loaded machine (check 4 failed
# once at +50 ms under 5 helpers' load; a timer that does not fire still
# fails: the backends answer after 1-2 s)
LATE=0.100
within() { awk -v t="$1" -v lo="$2" -v hi="$3" -v late="$LATE" 'BEGIN { exit !(t >= lo && t <= hi + late) }'; }

# ---- timeouts.request: 500 ms against a 2 s backend --------------------------
for k in 1 2 3; do
	out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/rt/$k?delay=2s")
	set -- $out
	is "$1" 504 "request timeout $k: 504"
	within "$2" 0.450 0.550; ok $? "request timeout $k: answered at $2 s (500 ms ± 50 ms)"
done
grep -q '"GET /rt/1?delay=2s HTTP/1.1" 504 .* "request timed out"' "$TMP/access.log"
ok $? "access log names the timeout"

# ---- timeouts.backendRequest 300 ms (request 5 s) ------------------------------
out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/bt/x?delay=2s")
set -- $out
is "$1" 504 "backendRequest timeout: 504"
within "$2" 0.250 0.350; ok $? "backendRequest timeout at $2 s (300 ms ± 50 ms)"

# ---- within the timeouts nothing changes ----------------------------------------
out=$(curl -s -o /dev/null -w '%{http_code}' "$U/rt/fast?delay=100ms")
is "$out" 200 "a 100 ms answer under a 500 ms timeout: 200"
out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/none?delay=1s")
set -- $out
is "$1" 200 "no route timeout: a 1 s answer passes (no default request timeout)"

# ---- 504 keeps the client connection; the late upstream is never reused --------
out=$(curl -s -w '|%{http_code} %{num_connects}\n' "$U/rt/late?delay=800ms" "$U/rt/next")
l1=$(echo "$out" | sed -n 's/.*|\([0-9]* [0-9]*\)$/\1/p' | head -1)
l2=$(echo "$out" | sed -n 's/.*|\([0-9]* [0-9]*\)$/\1/p' | tail -1)
is "$l1" "504 1" "timed-out request: 504"
is "$l2" "200 0" "the next request reuses the client connection and gets 200"
echo "$out" | grep -q '"path":"/rt/next"'; ok $? "the next answer is its own (not the late one)"
sleep 1	# the late answer (800 ms) would have arrived by now
out=$(curl -s "$U/rt/after")
echo "$out" | grep -q '"path":"/rt/after"'; ok $? "after the late bytes arrived, answers still match requests"

# ---- connect timeout: SYNs dropped by a full accept queue ---------------------
out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/hole")
set -- $out
is "$1" 503 "connect timeout: 503"
within "$2" 0.180 0.300; ok $? "connect timeout at $2 s (200 ms)"
out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/holert")
set -- $out
is "$1" 504 "request timeout shorter than the connect timeout: 504"
within "$2" 0.080 0.150; ok $? "… at $2 s (100 ms)"
is "$(metric 'zerohop_proxy_timeouts_total{kind="connect"}')" 1 "connect timeouts counted"
is "$(metric 'zerohop_proxy_timeouts_total{kind="request"}')" 6 "request timeouts counted (3 + 1 + 1 + 1)"

# ---- with the default retries (2), each try gets its own timeout ---------------
out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/rhole")
set -- $out
is "$1" 503 "connect timeout, retried twice: 503"
within "$2" 0.580 0.780; ok $? "… after three 200 ms tries + backoff (0-25, 0-50 ms) ($2 s)"
out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$U/rbt/x?delay=2s")
set -- $out
is "$1" 504 "backendRequest 300 ms, retried twice: 504"
within "$2" 0.880 1.080; ok $? "… after three 300 ms tries + backoff ($2 s)"
out=$(curl -s -w '\n|%{http_code}' "$U/rbt/y?delay=200ms")
echo "$out" | grep -q '"path":"/rbt/y"' && echo "$out" | grep -qx '|200'
ok $? "a 200 ms answer within the per-try timeout: 200"
is "$(metric 'zerohop_proxy_timeouts_total{kind="connect"}')" 4 "connect timeouts counted per try (1 + 3)"

# ---- idle timeouts --------------------------------------------------------------
t=$("$PY" - "$P" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t0 = time.time(); s.settimeout(5)
d = s.recv(1)
print("%.3f %d" % (time.time() - t0, len(d)))
PY
)
set -- $t
is "$2" 0 "a silent client connection is closed (EOF)"
within "$1" 0.350 0.600; ok $? "… after the 400 ms client idle timeout ($1 s)"
curl -s -o /dev/null "$U/idle"
n1=$(metric zerohop_proxy_upstream_idle_connections)
ok $([ "${n1:-0}" -ge 1 ]; echo $?) "an upstream is pooled after a request ($n1)"
sleep 0.7
is "$(metric zerohop_proxy_upstream_idle_connections)" 0 "the pooled upstream is closed after 400 ms idle"
ok $([ "$(metric 'zerohop_proxy_timeouts_total{kind="upstream_idle"}')" -ge 1 ]; echo $?) \
	"upstream idle closes counted"

# ---- bad option ------------------------------------------------------------------
"$ZH" proxy --listen 127.0.0.1:1 --service default/web -f "$TMP/m.yaml" --connect-timeout 5x \
	>/dev/null 2>"$TMP/bad.err"
is $? 2 "a bad duration is a usage error"
grep -q -- '--connect-timeout 5x' "$TMP/bad.err"; ok $? "… naming the option and value"

kill "${PIDS[@]:2:1}" 2>/dev/null
done_testing
