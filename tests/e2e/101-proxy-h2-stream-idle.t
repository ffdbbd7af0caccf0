#!/usr/bin/env bash
# 101-proxy-h2-stream-idle.t — the stream idle timeout (issue 18; Envoy's
# stream_idle_timeout; docs/proxy.md "Timeouts"; h2conn.c invariant 9),
# with Debian's python3-h2 (tests/tools/clients/h2_stream_idle.py) against
# `zerohop proxy --stream-idle-timeout 1s` on loopback, a `zerohop echo`
# backend and, for /stall, a backend whose answer starts and stalls. On one
# HTTP/2 connection, at once:
#  - a POST whose body never comes: 408 after about 1 s (the timeout plus
#    at most one sweep period, a quarter of it; checked within 0.9-2.5 s,
#    slack for a loaded machine);
#  - the same as a gRPC call: trailers-only grpc-status 2 (UNKNOWN, Envoy's
#    mapping of 408);
#  - a GET whose backend answers after 3 s: 408 after about 1 s;
#  - a GET whose answer started (200 and 5 of 100 bytes) and stalled:
#    RST_STREAM NO_ERROR after about 1 s;
#  - a POST sending 4 bytes every 250 ms for 4 s: never ended, answered
#    200 when its body is complete;
# all four counted in zerohop_proxy_timeouts_total{kind="stream_idle"},
# while curl over HTTP/2 and HTTP/1.1 is served throughout. With
# --stream-idle-timeout 0 the idle POST is still open after 3 s.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/wait.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px101 15000 2000	# below the ephemeral ports (32768-)
GPY=/usr/bin/python3
"$GPY" -c 'import h2' 2>/dev/null || skip_all "python3-h2 missing (make deps)"
SI="$(dirname "$0")/../tools/clients/h2_stream_idle.py"

"$ZH" echo --http "127.0.0.1:$((B + 1))" --name v1 --max-delay 10s >/dev/null 2>"$TMP/echo.err" &
PIDS+=($!)
"$GPY" "$SI" stall-backend $((B + 2)) 120 &	# (ended by the harness)
PIDS+=($!)
{
	lb_svc web web $((B + 1)); lb_svc v1 v1 $((B + 1)); lb_pod web-1 web; lb_pod v1-1 v1
	lb_svc stall stall $((B + 2)); lb_pod stall-1 stall
	m_route web web 'zerohop.io/retries: "0"' <<YAML
  - matches: [{path: {type: PathPrefix, value: /stall}}]
    backendRefs: [{name: stall, port: 80}]
  - backendRefs: [{name: v1, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply
lb_proxy web $P $S --stream-idle-timeout 1s
lb_up "proxy answers" $P $((B + 1))
U="http://127.0.0.1:$P"
metric() { curl -s "http://127.0.0.1:$S/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
served() { # both protocols answer 200 within a second
	[ "$(curl -s --http2-prior-knowledge -m 1 -o /dev/null -w '%{http_code}' "$U/")" = 200 ] &&
		[ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$U/")" = 200 ]
}
field() { awk -v n="$1" -v k="$2" '$1 == n { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) print a[2] } }' "$TMP/run.out"; }
within() { awk -v t="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(t != "-" && t >= lo && t <= hi) }'; }

case_idle() {
	local rp n_ok=0 i t
	"$GPY" "$SI" run $P 1 4 >"$TMP/run.out" 2>&1 &
	rp=$!
	for i in $(seq 12); do
		sleep 0.5
		served && n_ok=$((n_ok + 1))
	done
	wait "$rp"
	diag "$(tr '\n' ';' <"$TMP/run.out")"
	t=$(field idle t)
	is "$(field idle status) $(field idle end)" "408 end" \
		"a POST whose body never comes: 408 (Envoy's answer), stream ended"
	within "$t" 0.9 2.5
	ok $? "... after ${t}s (timeout 1 s, sweep every 250 ms)"
	is "$(field grpc status) $(field grpc grpc) $(field grpc end)" "200 2 end" \
		"the same gRPC call: trailers-only grpc-status 2 (UNKNOWN, Envoy's mapping of 408)"
	t=$(field slow t)
	is "$(field slow status) $(field slow end)" "408 end" \
		"a GET whose backend answers after 3 s: 408"
	within "$t" 0.9 2.5
	ok $? "... after ${t}s"
	t=$(field stall t)
	is "$(field stall status) $(field stall body) $(field stall end)" "200 5 reset:0" \
		"an answer that started and stalled (5 of 100 bytes): RST_STREAM NO_ERROR"
	within "$t" 0.9 2.5
	ok $? "... after ${t}s"
	t=$(field busy t)
	is "$(field busy status) $(field busy end)" "200 end" \
		"a POST sending 4 bytes every 250 ms for 4 s on the same connection: served whole"
	within "$t" 3.9 6.0
	ok $? "... when its body was complete (${t}s)"
	is "$(metric 'zerohop_proxy_timeouts_total{kind="stream_idle"}')" 4 \
		"the four idle streams counted as stream_idle timeouts"
	is "$n_ok" 12 "others are served throughout (HTTP/2 and HTTP/1.1, 12 of 12 within 1 s)"
}

case_off() {
	local P0=$((B + 3)) S0=$((B + 4)) out
	lb_proxy web $P0 $S0 --stream-idle-timeout 0
	wait_until 10 lb_http_up $P0
	out=$(timeout 20 "$GPY" "$SI" run $P0 0.75 0 | awk '$1 == "idle"')
	is "$out" "idle status=- grpc=- body=0 end=open t=-" \
		"--stream-idle-timeout 0: the idle POST is still open 3 s on"
}

run_cases case_idle case_off
kill -0 $PX 2>/dev/null
ok $? "the proxy is still running"
done_testing
