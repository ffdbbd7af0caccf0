#!/usr/bin/env bash
# bench-connrate-ipv6.sh — new connections per second to one dual-stack
# Service through its IPv6 ClusterIP (http://[VIP6]/: the native branch of
# connect6, docs/ipv6.md) vs its IPv4 ClusterIP (http://VIP4/: connect4),
# in one run, interleaved (the order alternates every pair), PAIRS pairs
# of SECONDS each; prints conn/s per run and the median v6/v4 ratio with
# its spread (issue 14 target: >= 0.97). Same lab layout and method as
# scripts/bench-connrate-v6.sh (client on node-a, one `zerohop echo` on
# node-b listening on [::], keep-alive off, 1 KiB, tcp_tw_reuse and the
# whole port range in the client's netns, client and server pinned), on a
# dual-stack lab (ZEROHOP_IPV6_PREVIEW=1). The pod-IP pair (DIRECT=1,
# default) compares the two families without a Service: the kernel's own
# IPv6 vs IPv4 cost, against which the Service ratio is read.
#   usage: scripts/bench-connrate-ipv6.sh [PAIRS=7] [SECONDS=3]
#   env: ZH (binary), C (connections, 8), LAB (lab name, Cip6), DIRECT (1), PIN (1)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
PAIRS=${1:-7}
SECS=${2:-3}
C=${C:-8}
LAB=${LAB:-Cip6}
PIN=${PIN:-1}
DIRECT=${DIRECT:-1}
export ZEROHOP_IPV6_PREVIEW=1
source "$ROOT/scripts/lib/stats.sh"
TMP=$(mktemp -d /tmp/zh-bench-ip6.XXXXXX)
cleanup() { "$ZH" lab down --lab "$LAB" >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
cat >"$TMP/app.yaml" <<YAML
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: $LAB}
spec:
  podCIDRs: [10.244.0.0/16, "fd00:10:244::/56"]
  serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
---
apiVersion: v1
kind: Pod
metadata: {name: srv, labels: {app: srv}}
spec:
  nodeName: node-b
  containers: [{name: echo, command: ["$ZH", "echo", "--http", "[::]:8080", "--tcp", "0", "--udp", "0"]}]
---
apiVersion: v1
kind: Service
metadata: {name: srv}
spec: {ipFamilyPolicy: PreferDualStack, selector: {app: srv}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec: {nodeName: node-a, containers: [{name: c, command: [sleep, "100000"]}]}
YAML
"$ZH" lab up --lab "$LAB" -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; exit 1; }
ip netns exec "$LAB-p-default-client" sysctl -qw net.ipv4.tcp_tw_reuse=1 \
	net.ipv4.ip_local_port_range="1024 65535" ||
	{ echo "cannot set tcp_tw_reuse / ip_local_port_range in the client's netns" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || PIN=0
CPU=()
if [ "$PIN" = 1 ]; then
	SPID=$("$ZH" lab status --lab "$LAB" -o json | jq -r '.pods[] | select(.name=="srv") | .pid')
	taskset -apc 1 "$SPID" >/dev/null || { echo "cannot pin the server (pid $SPID)" >&2; exit 1; }
	CPU=(taskset -c 0)
fi
SJ=$("$ZH" get --lab "$LAB" services -o json)
V4=$(echo "$SJ" | jq -r '.[] | select(.name=="srv") | .clusterIPs[0]')
V6=$(echo "$SJ" | jq -r '.[] | select(.name=="srv") | .clusterIPs[1]')
PJ=$("$ZH" lab status --lab "$LAB" -o json)
P4=$(echo "$PJ" | jq -r '.pods[] | select(.name=="srv") | .ip')
P6=$(echo "$PJ" | jq -r '.pods[] | select(.name=="srv") | .ip6')
for _ in $(seq 50); do
	"$ZH" lab exec --lab "$LAB" client -- curl -s -m 1 -o /dev/null "http://[$V6]/" && break
	sleep 0.2
done
run() {	# URL OUT -> conn/s
	"$ZH" lab exec --lab "$LAB" client -- "${CPU[@]}" "$ZH" bench --keepalive=false -c "$C" \
		-t "${SECS}s" --warmup 500ms --quiet --json "$2" "$1?size=1024" >/dev/null 2>&1
	jq .ActualQPS "$2"
}
pair() {	# round URL4 URL6 -> "v4 v6" in that round's order
	local a b
	if [ $(($1 % 2)) = 1 ]; then
		a=$(run "$2" "$TMP/a.json"); b=$(run "$3" "$TMP/b.json")
	else
		b=$(run "$3" "$TMP/b.json"); a=$(run "$2" "$TMP/a.json")
	fi
	echo "$a $b"
}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $PAIRS pairs x ${SECS}s, $C connections, keep-alive off, 1 KiB, pin=$PIN; ClusterIPs $V4 $V6"
printf "%-5s %-12s %-12s %-7s\n" pair "v4 conn/s" "v6 conn/s" "v6/v4"
: >"$TMP/ratios"
for i in $(seq "$PAIRS"); do
	read -r a b < <(pair "$i" "http://$V4/" "http://[$V6]/")
	r=$(ratio "$b" "$a")
	echo "$r" >>"$TMP/ratios"
	printf "%-5s %-12.0f %-12.0f %-7s\n" "$i" "$a" "$b" "$r"
	if [ "$DIRECT" = 1 ]; then
		read -r pa pb < <(pair "$i" "http://$P4:8080/" "http://[$P6]:8080/")
		pr=$(ratio "$pb" "$pa")
		echo "$pr" >>"$TMP/pratios"
		ratio "$r" "$pr" >>"$TMP/qratios"
		printf "#     pod IP: v4 %.0f v6 %.0f v6/v4 %s\n" "$pa" "$pb" "$pr"
	fi
done
echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "IPv6/IPv4 ClusterIP median $(median <"$TMP/ratios") spread $(spread <"$TMP/ratios") over $PAIRS pairs"
[ "$DIRECT" = 1 ] && echo "pod IP (no Service) IPv6/IPv4 median $(median <"$TMP/pratios") spread $(spread <"$TMP/pratios"); Service ratio / pod-IP ratio per round: median $(median <"$TMP/qratios") spread $(spread <"$TMP/qratios")"
