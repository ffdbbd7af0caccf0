#!/usr/bin/env bash
# bench-mtls.sh — what mutual TLS between nodes costs (issue 20, docs/mtls.md):
# the same traffic to a PERMISSIVE pod (plain text) and to a STRICT pod
# (through the HBONE tunnel of the two node proxies), in one lab with the
# tunnel on, interleaved per pair (the order alternates), medians:
#   bulk       iperf3 -t SECONDS, client pod (node-a) -> server pod (node-b):
#              throughput STRICT / plain
#   rr         1 KiB responses, one keep-alive connection, closed loop: p50
#              and p99 added by the tunnel (microseconds), and req/s ratio
#   conn       new connections per second (keep-alive off, 8 at a time): a
#              new CONNECT stream on a reused tunnel per connection
#   near       same-node keep-alive requests/s to a STRICT pod vs a
#              PERMISSIVE one (STRICT must stay in the kernel: ~1.0)
#   usage: scripts/bench-mtls.sh [PAIRS=5] [SECONDS=3]
#   env: ZH (binary), LAB (lab name, Mt), ONLY=bulk|rr|conn|near
# Kernel TLS is not measured: the kernel this was built on has no tls ULP
# (docs/mtls.md). Not part of make check; docs/BENCHMARKS.md quotes it.
set -u
ZH=${ZH:-$(cd "$(dirname "$0")/.." && pwd)/build/zerohop}
PAIRS=${1:-5}
SECS=${2:-3}
LAB=${LAB:-Mt}
TMP=$(mktemp -d /tmp/zh-bench-mtls.XXXXXX)
chmod 755 "$TMP"
cleanup() { "$ZH" lab down --lab "$LAB" >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
command -v iperf3 >/dev/null || { echo "iperf3 missing (make deps)"; exit 1; }

pod() {	# NAME NODE [iperf]: an echo on 8080 (and an iperf3 server on 5201)
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: $1}}
spec:
  nodeName: $2
  containers:
  - {name: echo, command: ["$ZH", "echo", "--http", "8080", "--tcp", "0", "--udp", "0"], ports: [{containerPort: 8080}]}
YAML
	[ -n "${3:-}" ] && echo '  - {name: iperf, command: [iperf3, -s, -p, "5201"], ports: [{containerPort: 5201}]}'
	echo ---
}
{
	pod plain node-b iperf
	pod strict node-b iperf
	pod near-plain node-a
	pod near-strict node-a
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client}
spec: {nodeName: node-a, containers: [{name: c, command: ["sleep", "100000"]}]}
---
YAML
	for p in strict near-strict; do
		cat <<YAML
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: $p}
spec: {selector: {matchLabels: {app: $p}}, mtls: {mode: STRICT}}
---
YAML
	done
} >"$TMP/app.yaml"
"$ZH" lab up --lab "$LAB" -f "$TMP/app.yaml" >/dev/null 2>&1 || { echo "lab up failed"; exit 1; }
"$ZH" ca init --lab "$LAB" >/dev/null || exit 1
ip_of() { "$ZH" lab status --lab "$LAB" -o json | jq -r ".pods[] | select(.name==\"$1\") | .ip"; }
P=$(ip_of plain) S=$(ip_of strict) NP=$(ip_of near-plain) NS=$(ip_of near-strict)
X() { "$ZH" lab exec --lab "$LAB" client -- "$@"; }
for i in $(seq 50); do	# the SVIDs, and the tunnel's first handshake
	[ "$(X curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$S:8080/")" = 200 ] && break
	sleep 0.2
done
[ "$i" -lt 50 ] || { echo "no answer from the STRICT pod through the tunnel"; exit 1; }
redir() { "$ZH" get --lab "$LAB" stats -o json | jq '."node-a".connect_hbone_redirect // 0'; }

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
span() { echo "$(median <"$1") ($(sort -g "$1" | head -1)–$(sort -g "$1" | tail -1))"; }
bulk() { X iperf3 -c "$1" -p 5201 -t "$SECS" -J 2>/dev/null | jq '.end.sum_received.bits_per_second / 1e9'; }
bench() {	# URL KEEPALIVE CONNS -> "qps p50us p99us"
	X "$ZH" bench -c "$3" -t "${SECS}s" --warmup 300ms --keepalive="$2" --json "$TMP/r.json" "$1" >/dev/null 2>&1
	jq -r '"\(.ActualQPS) \(.DurationHistogram.Percentiles[] | select(.Percentile == 50) | .Value * 1e6) \(.DurationHistogram.Percentiles[] | select(.Percentile == 99) | .Value * 1e6)"' "$TMP/r.json"
}
pair() {	# KIND i -> "plain strict [p50p p50s p99p p99s]"
	local a b
	case $1 in
	bulk) a="bulk $P" b="bulk $S" ;;
	rr) a="bench http://$P:8080/?size=1024 true 1" b="bench http://$S:8080/?size=1024 true 1" ;;
	conn) a="bench http://$P:8080/ false 8" b="bench http://$S:8080/ false 8" ;;
	near) a="bench http://$NP:8080/ true 8" b="bench http://$NS:8080/ true 8" ;;
	esac
	if [ $(($2 % 2)) -eq 1 ]; then ra=$($a); rb=$($b); else rb=$($b); ra=$($a); fi
	echo "$ra|$rb"
}
r0=$(redir)
for k in bulk rr conn near; do
	[ -n "${ONLY:-}" ] && [ "$ONLY" != "$k" ] && continue
	: >"$TMP/ratio"; : >"$TMP/d50"; : >"$TMP/d99"
	for i in $(seq "$PAIRS"); do
		IFS='|' read -r ra rb <<<"$(pair $k $i)"
		read -r qa p50a p99a <<<"$ra"
		read -r qb p50b p99b <<<"$rb"
		r=$(awk -v a="$qa" -v b="$qb" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')
		echo "$r" >>"$TMP/ratio"
		if [ -n "${p50a:-}" ]; then
			awk -v a="$p50a" -v b="$p50b" 'BEGIN { printf "%.1f\n", b - a }' >>"$TMP/d50"
			awk -v a="$p99a" -v b="$p99b" 'BEGIN { printf "%.1f\n", b - a }' >>"$TMP/d99"
			echo "$k pair $i: plain $qa/s p50 ${p50a}us p99 ${p99a}us; mTLS $qb/s p50 ${p50b}us p99 ${p99b}us; ratio $r"
		else
			echo "$k pair $i: plain $qa Gbit/s; mTLS $qb Gbit/s; ratio $r"
		fi
	done
	echo "$k: median mTLS/plain $(span "$TMP/ratio"), $PAIRS pairs"
	[ -s "$TMP/d50" ] && echo "$k: p50 added $(span "$TMP/d50") us, p99 added $(span "$TMP/d99") us"
done
echo "connections sent into the tunnel by node-a's connect hook during the run: $(( $(redir) - r0 ))"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
