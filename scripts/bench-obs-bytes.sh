#!/usr/bin/env bash
# bench-obs-bytes.sh — are the L4 byte counters exact under the heaviest
# close traffic this machine makes (docs/observability.md "Bytes")? Lab
# tobsbytes, 2 nodes, mesh on: a client on node-a runs `zerohop bench -c 4
# -qps 0 --keepalive=false` (a new connection per request, as fast as it
# goes) for 3 s a round against an echo Service on node-b; after each
# round, the client side's istio_tcp_sent_bytes_total (reporter="source",
# the response direction) against the response bytes bench read: the
# difference is what the release hook (bpf/obs.bpf.c invariant 11) got
# wrong. Also the agent's zerohop_obs_release_rereads_total / _torn_total
# (node-a, cumulative; an agent without them shows 0).
#   usage: scripts/bench-obs-bytes.sh [ROUNDS=3] [SIZE=20000]
#   env: ZH (binary: compare two builds by running it with each),
#        ZH_TEST_LAB_SUFFIX (lab name suffix)
# Not part of make check. Every process is the lab's, bounded, and the
# lab goes down at exit.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
SIZE=${2:-20000}
source "$ROOT/tests/lib/tap.sh"
source "$ROOT/tests/lib/lab_test.sh"
lab_test_setup tobsbytes curl
{
	m_cluster tobsbytes "node-a node-b"
	REPLICAS=1 m_deploy web node-b "app: web" "$(m_ctr echo http:8080 "$ZH" echo --http "0.0.0.0:8080")"
	REPLICAS=1 m_deploy client node-a "app: client" "$(m_ctr shell "" sleep infinity)"
	m_svc web "name: web" "http=80:http"
} >"$TMP/m.yaml"
lab_up "2 nodes, an echo Service" -f "$TMP/m.yaml"
wait_until 30 lab_running 2 && wait_until 30 lab_synced node-a && wait_until 30 lab_synced node-b
ok $? "pods run, both agents applied the state"
read -r V4 _ <<<"$(lab_svc_ips web)"
sum() {	# NODE NAME FILTER: the sum of NAME's series on NODE that contain FILTER
	curl -s -m 3 --unix-socket "/run/zerohop/$LAB/nodes/$1/agent.sock" http://x/metrics |
		awk -v n="$2" -v f="$3" 'index($0, n) == 1 && index($0, f) { s += $NF } END { printf "%.0f\n", s }'
}
SRC='reporter="source"'
for r in $(seq "$ROUNDS"); do
	b0=$(sum node-a istio_tcp_sent_bytes_total "$SRC")
	c0=$(sum node-a istio_tcp_connections_closed_total "$SRC")
	timeout 60 "$ZH" lab exec --lab "$LAB" deploy/client -- "$ZH" bench -c 4 -qps 0 -t 3s \
		--keepalive=false --json "$TMP/b.json" "http://$V4/?size=$SIZE" >/dev/null 2>&1
	n=$(jq '.DurationHistogram.Count' "$TMP/b.json") rx=$(jq '.Sizes.Sum' "$TMP/b.json")
	closed() { [ $(($(sum node-a istio_tcp_connections_closed_total "$SRC") - c0)) -ge "$n" ]; }
	wait_until 10 closed
	b1=$(sum node-a istio_tcp_sent_bytes_total "$SRC")
	echo "round $r: $n connections, bench read $rx bytes, the metric $((b1 - b0)): off by" \
		"$((b1 - b0 - rx)); rereads $(sum node-a zerohop_obs_release_rereads_total '')" \
		"torn $(sum node-a zerohop_obs_release_torn_total '') (load $(cut -d' ' -f1 /proc/loadavg))"
done
done_testing
