#!/usr/bin/env bash
# 100-proxy-h2-idle.t — idle HTTP/2 streams cost the proxy a bounded amount
# of memory each (issue 18: "10,000 idle streams bounded"; docs/proxy.md
# "Flow control and memory"), with Debian's python3-h2
# (tests/tools/clients/h2_idle.py) against `zerohop proxy` on loopback:
# path /idle goes to a cleartext HTTP/2 backend that takes every stream and
# never answers, the rest to a `zerohop echo`.
#  - 2,000 idle streams over 20 connections (the proxy's limit is 100 per
#    connection), three rounds of POSTs whose body never comes and one of
#    GETs the backend never answers: every stream reaches the backend and
#    stays open, and the proxy's resident size grows by at most
#    IDLE_MAX bytes per stream in every round (below: what an idle stream
#    holds by design, 8 KiB), while curl over HTTP/2 and HTTP/1.1 is answered
#    within a second throughout;
#  - once the clients go, every upstream stream goes too (the backend
#    holds none) and nothing is in flight;
#  - 150 streams at once on one connection: 50 refused with REFUSED_STREAM
#    and counted, 100 kept.
# The bound is memory, not time: rounds and probes only wait for states.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/wait.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px100 30000 2000	# below the ephemeral ports (32768-)
GPY=/usr/bin/python3
"$GPY" -c 'import h2' 2>/dev/null || skip_all "python3-h2 missing (make deps)"
IDLE="$(dirname "$0")/../tools/clients/h2_idle.py"
N=2000

# What one idle stream may hold (docs/proxy.md "Idle streams"; h2conn.c
# invariant 7; src/proxy/px_int.h, sizeof on x86-64): no DATA in flight,
# so no window's worth of bytes, and no buffer (each is handed back to the
# pool when empty; the replay copy of the head moves into an allocation of
# its own size) — the objects: px_stream (976 B: a rewrite's path and a
# redirect's Location are allocated only when a route sets them, proxy.h
# px_decision; none here), the view (0.5 KiB), the upstream stream and
# both libnghttp2 streams (under 1 KiB together), the replay copy (at most
# 4 KiB, px_buf_fit's limit), and the connections' share (20 client
# connections, each its libnghttp2 session and two 16 KiB buffers, and 2
# upstream ones, over 2,000 streams: under 0.5 KiB): under 7 KiB, rounded
# up to 8 KiB (measured: about 3 KB). Before invariant 7 three 16 KiB
# buffers stayed (19.6 KB per stream fresh, up to 56 KiB warm): this bound
# catches that. It would not catch the decision's 4.3 KiB of arrays coming
# back into px_stream (7.4 KB measured with them, the replay copy's 4 KiB
# allowance covering them): stream.c asserts px_stream's size for that.
IDLE_MAX=8192

lb_echo v1 1
"$GPY" "$IDLE" backend $((B + 2)) 1000 300 "$TMP/count" &	# (ended by the harness)
PIDS+=($!)
{
	lb_svc web web $((B + 1)); lb_svc v1 v1 $((B + 1)); lb_pod web-1 web; lb_pod v1-1 v1
	cat <<YAML
---
apiVersion: v1
kind: Service
metadata: {name: idle}
spec: {selector: {app: idle}, ports: [{name: http2, port: 80, targetPort: $((B + 2))}]}
YAML
	lb_pod idle-1 idle
	m_route web web <<YAML
  - matches: [{path: {type: PathPrefix, value: /idle}}]
    backendRefs: [{name: idle, port: 80}]
  - backendRefs: [{name: v1, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply
lb_proxy web $P $S
lb_up "proxy answers" $P $((B + 1))
U="http://127.0.0.1:$P"
served() { # both protocols answer 200 within a second
	[ "$(curl -s --http2-prior-knowledge -m 1 -o /dev/null -w '%{http_code}' "$U/")" = 200 ] &&
		[ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$U/")" = 200 ]
}
metric() { curl -s "http://127.0.0.1:$S/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
field() { sed -n "s/.* $1=\([-0-9]*\).*/\1/p" <<<" $2"; }
backend_none() { [ "$(cat "$TMP/count" 2>/dev/null)" = 0 ]; }
conns() { ss -Htn state established "( sport = :$P )" | wc -l; }
no_conns() { [ "$(conns)" -eq 0 ]; }

# one round: N idle streams held 6 s while others are probed every 0.5 s
round() { # WHAT MODE
	local out n_ok=0 i h r0 r1
	"$GPY" "$IDLE" hold $P $N 6 "$PX" "$TMP/count" "$2" >"$TMP/hold.out" 2>&1 &
	h=$!
	for i in $(seq 10); do
		sleep 0.5
		served && n_ok=$((n_ok + 1))
	done
	wait "$h"
	out=$(cat "$TMP/hold.out")
	diag "$1: $out"
	is "$(field open "$out") $(field refused "$out") $(field backend "$out")" "$N 0 $N" \
		"$1: $N idle streams over $(field conns "$out") connections, none refused, all at the backend"
	r0=$(field rss0 "$out")
	r1=$(field rss1 "$out")
	ok $([ $(((r1 - r0) * 1024)) -le $((N * IDLE_MAX)) ]; echo $?) \
		"... the proxy's RSS grows by $(((r1 - r0) * 1024 / N)) bytes per stream (bound $IDLE_MAX)"
	is "$n_ok" 10 "... while others are served (HTTP/2 and HTTP/1.1, 10 of 10 within 1 s)"
	wait_until 5 backend_none
	ok $? "... once the clients go, the backend holds no stream"
	wait_until 5 no_conns
	ok $? "... and no client connection is left"
}

case_idle() {
	local base
	base=$(awk '/^VmRSS/ { print $2 }' "/proc/$PX/status")
	round "POST without a body, round 1" open
	round "POST without a body, round 2" open
	round "POST without a body, round 3" open
	round "GET never answered" get
	is "$(metric "zerohop_proxy_endpoint_inflight{endpoint=\"127.0.0.1:$((B + 2))\"}")" 0 \
		"nothing in flight to the backend after the rounds"
	ok $([ $((($(awk '/^VmRSS/ { print $2 }' "/proc/$PX/status") - base) * 1024)) -le \
		$((N * IDLE_MAX)) ]; echo $?) \
		"after $((4 * N)) idle streams in 4 rounds the proxy holds at most one round's bound"
}

case_over() {
	local out before
	before=$(metric 'zerohop_proxy_h2_defence_total{action="refused_stream"}')
	out=$("$GPY" "$IDLE" over $P 150)
	is "$out" "refused=50 answered=0 open=100" \
		"150 idle streams at once on one connection: 50 refused (REFUSED_STREAM), 100 kept"
	is "$(metric 'zerohop_proxy_h2_defence_total{action="refused_stream"}')" \
		$((${before:-0} + 50)) "... counted"
	served
	ok $? "others are served after it"
}

run_cases case_idle case_over
kill -0 $PX 2>/dev/null
ok $? "the proxy is still running"
done_testing
