#!/usr/bin/env bash
# 72-obs-l4.t — L4 golden signals from the kernel, checked through the lab's
# real Prometheus (lab up --prometheus) with PromQL over its HTTP API (lab
# t72, 2 nodes, mesh on). A client Deployment on node-a drives `zerohop
# bench` at a fixed rate, one new connection per request, to
#   web   an L4 Service whose echo backend is on node-b (through TCP/IP)
#   near  an L4 Service whose echo backend is on node-a (same node: the
#         short-circuit moves the bytes, the kernel's TCP counters miss them)
# and Prometheus must show, for reporter="source" (client side, node-a), as
# many connections opened and closed as bench made requests,
# istio_tcp_sent_bytes_total (Istio: the response direction) equal to the
# response bytes bench counted, and istio_tcp_received_bytes_total (the
# request direction) equal to what the server side (reporter="destination")
# counted; the server side names the Service too (its endpoint's). Then a connect to a
# Service without endpoints and one denied by NetworkPolicy show up in
# `zerohop observe` with their reasons and in zerohop_drops_total.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
source "$(dirname "$0")/../lib/obs_lab.sh"
lab_test_setup t72 curl /usr/bin/prometheus

{
	m_echo web node-b
	m_echo near node-a
	REPLICAS=1 m_deploy client node-a "app: client" "$(m_ctr shell "" sleep infinity)"
	m_pod blocked node-a "app: blocked" "$(m_ctr shell "" sleep infinity)"
	m_svc web "name: web" "http=80:http" 10.96.0.72
	m_svc near "name: near" "http=80:http" 10.96.0.73
	m_svc empty "name: nothing" "http=80:8080" 10.96.0.74
	m_deny_egress blocked
} >"$TMP/m.yaml"
obs_lab_up --prometheus
grep -q "prometheus: http://$PROM (in netns $LAB-node-a)" "$TMP/up.out"
ok $? "lab up prints where Prometheus listens: $PROM, in node-a's netns"
ss -Hltn "sport = :${PROM##*:}" | grep -q "${PROM%:*}"
ok $((! $?)) "nothing listens on $PROM in the root netns"
wait_until 10 lab_running 5

wait_until 15 prom_is 4 'count(up{job="zerohop-agent"} == 1) + count(up{job="zerohop-proxy"} == 1)'
ok $? "Prometheus scrapes both agents and both proxies"

bench() {	# SERVICE_IP OUT.json
	lab_exec deploy/client "$ZH" bench -c 2 -qps 50 -t 1s --keepalive=false \
		--json "$2" "http://$1/?status=503:20" >/dev/null 2>"$TMP/bench.err"
}
bench 10.96.0.72 "$TMP/web.json"
ok $? "bench → web (node-b): 50 req/s for 1 s, a new connection per request"
bench 10.96.0.73 "$TMP/near.json"
ok $? "bench → near (same node)"

SRC='reporter="source",source_workload="client",source_workload_namespace="default"'
for svc in web near; do
	n=$(jq '.DurationHistogram.Count' "$TMP/$svc.json")
	rx=$(jq '.Sizes.Sum' "$TMP/$svc.json")
	sel="$SRC,destination_service=\"$svc.default.svc.cluster.local\",destination_workload=\"$svc\""
	wait_until 10 prom_is "$n" "sum(istio_tcp_connections_closed_total{$sel})"
	is "$(promq "sum(istio_tcp_connections_closed_total{$sel})")" "$n" \
		"$svc: connections closed = $n requests bench made"
	is "$(promq "sum(istio_tcp_connections_opened_total{$sel})")" "$n" "$svc: connections opened = $n"
	# exact: docs/observability.md "Bytes", bpf/obs.bpf.c invariant 11
	is "$(promq "sum(istio_tcp_sent_bytes_total{$sel})")" "$rx" \
		"$svc: sent bytes (response direction) = $rx response bytes bench counted"
	req=$(promq "sum(istio_tcp_received_bytes_total{$sel})")
	dst='reporter="destination",source_workload="client",destination_workload="'$svc'"'
	is "$(promq "sum(istio_tcp_received_bytes_total{$dst})")" "$req" \
		"$svc: received bytes (request direction, $req) = what the server side counted"
	is "$(promq "sum(istio_tcp_sent_bytes_total{$dst})")" "$rx" \
		"$svc: the server side's response bytes = $rx too"
	ok $([ "$req" != none ] && [ "$req" -gt 0 ] && [ $((req % n)) -eq 0 ]; echo $?) \
		"$svc: $n identical requests: request bytes a multiple of $n"
	is "$(promq "sum(istio_tcp_connections_opened_total{$dst})")" "$n" \
		"$svc: the server side counted $n connections too"
	# the server's socket never saw the ClusterIP: the agent names the
	# Service whose endpoint it is (docs/observability.md, obs.c O7)
	is "$(promq "sum(istio_tcp_connections_opened_total{$dst,destination_service=\"$svc.default.svc.cluster.local\",destination_service_namespace=\"default\"})")" \
		"$n" "$svc: the server side labels them destination_service=$svc.default.svc.cluster.local"
done
# the same-node pair went through the short-circuit: the flow log says so
nsc=$("$ZH" observe --lab $LAB --service near --type close -o json |
	jq -s '[.[] | select(.reporter == "source" and .short_circuit)] | length')
is "$nsc" "$(jq '.DurationHistogram.Count' "$TMP/near.json")" \
	"near: every client connection was short-circuited (observe: short_circuit)"
nsc=$("$ZH" observe --lab $LAB --service web --type close -o json |
	jq -s '[.[] | select(.short_circuit)] | length')
is "$nsc" 0 "web (other node): none short-circuited"
srtt=$(promq "sum(zerohop_tcp_srtt_microseconds_sum{$SRC}) / sum(zerohop_tcp_srtt_microseconds_count{$SRC})")
ok $(awk -v v="$srtt" 'BEGIN { exit !(v > 0 && v < 1000000) }'; echo $?) "mean srtt from the kernel: ${srtt} us"

# drops: no endpoints, and policy
# a follower started before the drops sees them as they happen
"$ZH" observe --lab $LAB --follow --timeout 8 --verdict DROPPED -o json >"$TMP/follow.json" &
FPID=$!
BG+=($FPID)
sleep 0.5
is "$(lab_exec deploy/client "$PY" "$ROOT/tests/tools/clients/connect_errno.py" 10.96.0.74)" 111 "connect to empty: ECONNREFUSED"
is "$(lab_exec blocked "$PY" "$ROOT/tests/tools/clients/connect_errno.py" 10.96.0.72)" 1 "connect from blocked (egress denied): EPERM"
follow_has() { [ "$(jq -s 'map(.reason) | sort | join(",")' "$TMP/follow.json")" = '"no_backend,policy"' ]; }
wait_until 8 follow_has
ok $? "observe --follow streamed both drops as they happened: $(jq -s -c 'map(.reason)' "$TMP/follow.json")"
kill $FPID 2>/dev/null
# event times are wall-clock (obs.c O9: kernel time + the drain's offset)
skew=$(jq -s --arg now "$(date +%s.%N)" 'map(($now | tonumber) - .time) | max' "$TMP/follow.json")
ok $(awk -v s="$skew" 'BEGIN { exit !(s >= 0 && s < 30) }'; echo $?) "flow times are wall-clock: both drops within ${skew} s"
out=$("$ZH" observe --lab $LAB --verdict DROPPED)
diag "$out"
echo "$out" | grep -q "default/client-[^ ]* -> 10.96.0.74:80 (svc default/empty) drop DROPPED reason=no_backend"
ok $? "observe: client -> empty DROPPED reason=no_backend"
echo "$out" | grep -q "default/blocked:0 -> default/web-[^ ]*:8080 (svc default/web) drop DROPPED reason=policy"
ok $? "observe: blocked -> web DROPPED reason=policy"
is "$("$ZH" observe --lab $LAB --pod blocked -o json | jq -r 'select(.verdict=="DROPPED") | .reason')" policy \
	"observe --pod blocked -o json: reason policy"
wait_until 10 prom_is 1 'sum(zerohop_drops_total{reason="no_backend",source_workload="client",destination_service="empty.default.svc.cluster.local"})'
ok $? "zerohop_drops_total{reason=no_backend, destination_service=empty...} = 1"
wait_until 10 prom_is 1 'sum(zerohop_drops_total{reason="policy",source_workload="blocked",destination_service="web.default.svc.cluster.local"})'
ok $? "zerohop_drops_total{reason=policy, source_workload=blocked} = 1"
is "$(promq 'sum(zerohop_obs_events_lost_total)')" 0 "no event lost"
diag "closes read twice (a segment overlapped the release's read): $(promq 'sum(zerohop_obs_release_rereads_total)'), torn: $(promq 'sum(zerohop_obs_release_torn_total)')"

P=$(cat /run/zerohop/$LAB/prometheus/pid)
"$ZH" lab down --lab $LAB >/dev/null 2>&1
wait_pid_gone 10 "$P"
ok $? "lab down ends Prometheus (pid $P)"
ok $([ ! -e /run/zerohop/$LAB ]; echo $?) "and removes its data with the run dir"
done_testing
