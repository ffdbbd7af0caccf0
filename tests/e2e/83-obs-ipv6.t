#!/usr/bin/env bash
# 83-obs-ipv6.t — the L4 golden signals of native IPv6 connections (dual-
# stack lab t83, 2 nodes, mesh on; docs/observability.md "IPv6",
# src/agent/obs.c O12). A client on node-a drives `zerohop bench`, one new
# connection per request, to a dual-stack Service whose backend is on
# node-b, once by its IPv6 ClusterIP and once by its IPv4 one; each
# agent's own /metrics must then show, in ONE series per side (the Service,
# not the address family), connections opened and closed = both runs'
# requests, response bytes = what bench counted over both families, and
# the server side (node-b) the same connections, labelled with the
# Service; a connect to the IPv6 ClusterIP of a Service without endpoints
# is a no_backend drop; the flow log shows the IPv6 addresses.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t83 curl

dual() { M_SPEC="ipFamilyPolicy: PreferDualStack" m_svc "$@"; }
{
	m_cluster t83 "node-a node-b" dual
	REPLICAS=1 m_deploy web node-b "app: web" "$(m_ctr echo http:8080 "$ZH" echo --http "[::]:8080")"
	REPLICAS=1 m_deploy client node-a "app: client" "$(m_ctr shell "" sleep infinity)"
	dual web "name: web" "http=80:http"
	dual empty "name: nothing" "http=80:8080"
} >"$TMP/m.yaml"
lab_up "dual-stack, with the mesh" -f "$TMP/m.yaml"
wait_until 30 lab_running 2 && wait_until 30 lab_synced node-a && wait_until 30 lab_synced node-b
ok $? "pods run, both agents applied the state"

read -r V4 V6 <<<"$(lab_svc_ips web)"
E6=$(lab_svc_ips empty | cut -d' ' -f2)

# metric NODE NAME LABEL...: the sum of NAME's series on NODE's agent whose
# labels include every LABEL (k="v")
metric() {
	local node=$1 name=$2
	shift 2
	curl -s -m 3 --unix-socket "/run/zerohop/$LAB/nodes/$node/agent.sock" http://x/metrics |
		awk -v n="$name" -v want="$*" '
			index($0, n "{") != 1 { next }
			{ k = split(want, w, " "); for (i = 1; i <= k; i++) if (index($0, w[i]) == 0) next; s += $NF }
			END { printf "%d\n", s }'
}
bench() {	# URL OUT.json
	lab_exec deploy/client "$ZH" bench -c 2 -qps 40 -t 1s --keepalive=false \
		--json "$2" "$1" >/dev/null 2>>"$TMP/bench.err"
}
up6() { lab_exec deploy/client curl -6 -s -o /dev/null -m 2 "http://[$V6]/"; }
wait_until 20 up6
ok $? "the IPv6 ClusterIP answers"
SVC='destination_service="web.default.svc.cluster.local"'
SRC="reporter=\"source\" source_workload=\"client\" $SVC destination_workload=\"web\""
DST="reporter=\"destination\" source_workload=\"client\" $SVC"
o0=$(metric node-a istio_tcp_connections_opened_total $SRC)
c0=$(metric node-a istio_tcp_connections_closed_total $SRC)
b0=$(metric node-a istio_tcp_sent_bytes_total $SRC)
d0=$(metric node-b istio_tcp_connections_opened_total $DST)
closes6() {	# client-side closes between IPv6 addresses in the flow log
	"$ZH" observe --lab $LAB --service web --type close -o json 2>/dev/null |
		jq -s '[.[] | select(.reporter == "source" and (.destination.ip | test(":")))] | length'
}
sleep 0.2	# the probes' closes drained (ZH_OBS_DRAIN_MS)
f0=$(closes6)
bench "http://[$V6]/" "$TMP/v6.json"
ok $? "bench → [IPv6 ClusterIP] (node-b): 40 req/s for 1 s, a new connection per request"
bench "http://$V4/" "$TMP/v4.json"
ok $? "bench → IPv4 ClusterIP, the same Service"
n6=$(jq '.DurationHistogram.Count' "$TMP/v6.json") n4=$(jq '.DurationHistogram.Count' "$TMP/v4.json")
n=$((n6 + n4)) rx=$(($(jq '.Sizes.Sum' "$TMP/v6.json") + $(jq '.Sizes.Sum' "$TMP/v4.json")))
closed() { [ $(($(metric node-a istio_tcp_connections_closed_total $SRC) - c0)) -ge "$n" ]; }
wait_until 10 closed
is "$(($(metric node-a istio_tcp_connections_opened_total $SRC) - o0))" "$n" \
	"client side: connections opened = $n6 over IPv6 + $n4 over IPv4, one Service series"
is "$(($(metric node-a istio_tcp_connections_closed_total $SRC) - c0))" "$n" "client side: connections closed = $n"
# exact: docs/observability.md "Bytes", bpf/obs.bpf.c invariant 11
is "$(($(metric node-a istio_tcp_sent_bytes_total $SRC) - b0))" "$rx" \
	"client side: response bytes = $rx, what bench counted over both families"
served() { [ $(($(metric node-b istio_tcp_connections_opened_total $DST) - d0)) -ge "$n" ]; }
wait_until 10 served
is "$(($(metric node-b istio_tcp_connections_opened_total $DST) - d0))" "$n" \
	"server side (node-b): the same $n connections, labelled with the Service (its endpoint's, O7/O12)"
is "$(($(closes6) - f0))" "$n6" "flow log: $n6 client-side closes between IPv6 addresses (the backend pod's IPv6)"
flows=$("$ZH" observe --lab $LAB --service web --type close -o json 2>/dev/null)
is "$(echo "$flows" | jq -s -r '[.[] | select(.reporter == "source" and (.source.ip | test(":")))][0].source.workload')" \
	client "... whose source is the client pod by its IPv6 address"

is "$(lab_exec deploy/client "$PY" "$ROOT/tests/tools/clients/connect_errno.py" "$E6")" 111 "connect to empty's IPv6 ClusterIP: ECONNREFUSED"
dropped() { [ "$(metric node-a zerohop_drops_total reason=\"no_backend\" source_workload=\"client\" destination_service=\"empty.default.svc.cluster.local\")" = 1 ]; }
wait_until 10 dropped
ok $? "zerohop_drops_total{reason=no_backend, destination_service=empty...} = 1 for the IPv6 connect"
is "$("$ZH" observe --lab $LAB --verdict DROPPED -o json | jq -r 'select(.reason=="no_backend") | .destination.ip')" \
	"$E6" "observe: the drop's destination is the IPv6 ClusterIP asked for"
plain() {	# NAME: the sum of an unlabelled metric over both agents
	local node
	for node in node-a node-b; do
		curl -s -m 3 --unix-socket "/run/zerohop/$LAB/nodes/$node/agent.sock" http://x/metrics
	done | awk -v n="$1" '$1 == n { s += $2 } END { printf "%d\n", s }'
}
is "$(plain zerohop_obs_events_lost_total)" 0 "no event lost (both agents)"
diag "closes read twice (a segment overlapped the release's read): $(plain zerohop_obs_release_rereads_total), torn: $(plain zerohop_obs_release_torn_total)"
done_testing
