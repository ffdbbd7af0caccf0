#!/usr/bin/env bash
# bench-connrate-v6.sh — new connections per second to one Service from
# IPv6 vs IPv4 clients, in one run, interleaved (the order alternates every
# pair: v4 v6, v6 v4, ...), PAIRS pairs of SECONDS each; prints conn/s per
# run and the median v6/v4 ratio with its spread (issue 14 target: >= 0.97).
#   usage: scripts/bench-connrate-v6.sh [--dual-stack] [PAIRS=7] [SECONDS=3]
#   env: ZH (binary), C (connections, 8), LAB (lab name, Cv6 / Cip6),
#        DIRECT (1), PIN (1)
# Default: AF_INET6 sockets to the v4-mapped ClusterIP (http://[::ffff:VIP]/:
# connect6 of bpf/lb.bpf.c) vs AF_INET sockets (http://VIP/: connect4).
# --dual-stack: a dual-stack lab and Service, its
# IPv6 ClusterIP (http://[VIP6]/: the native branch of connect6,
# docs/ipv6.md) vs its IPv4 ClusterIP (http://VIP4/: connect4).
# DIRECT=1 adds a pair to the pod IP itself in every round (no Service,
# nothing for the hooks to translate; v6 is ::ffff:POD, or the pod's IPv6
# address with --dual-stack): the kernel's own cost of the v6 path, so the
# Service ratio can be read against it (v6/v4 Service ÷ v6/v4 pod IP = what
# the hooks add).
# Lab: client pod on node-a, one `zerohop echo --http` pod on node-b (cross
# node: the same-node short-circuit plays no part), keep-alive off, 1 KiB
# responses (the Romana method, as scripts/bench-connrate.sh). As in
# scripts/bench-netpol-conn.sh: the client's netns gets tcp_tw_reuse=1 and
# the whole ephemeral port range (TIME_WAIT sockets otherwise make connect()
# scan the range), the server is pinned to CPU 1 and the client to CPU 0
# (PIN=0 turns that off). With build/tests/tools/netpol_cost it also reads
# the run time of the two connect programs (BPF_ENABLE_STATS, on only while
# a run lasts): ns per connect for connect4 in the v4 runs and connect6 in
# the v6 runs, the noise-free complement of the conn/s ratio. Not part of
# make check; docs/BENCHMARKS.md and docs/benchmarks/log/agent.md quote it.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
DUAL=0
[ "${1:-}" = --dual-stack ] && { DUAL=1; shift; }
PAIRS=${1:-7}
SECS=${2:-3}
C=${C:-8}
PIN=${PIN:-1}
DIRECT=${DIRECT:-1}
source "$ROOT/scripts/lib/stats.sh"
if [ "$DUAL" = 1 ]; then
	LAB=${LAB:-Cip6}
	CLUSTER="apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: $LAB}
spec:
  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]
  serviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]
---"
	LISTEN="[::]:8080" FAMILY="ipFamilyPolicy: PreferDualStack, "
else
	LAB=${LAB:-Cv6}
	CLUSTER="" LISTEN=8080 FAMILY=""
fi
TMP=$(mktemp -d /tmp/zh-bench-v6.XXXXXX)
cleanup() { "$ZH" lab down --lab "$LAB" >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
cat >"$TMP/app.yaml" <<YAML
$CLUSTER
apiVersion: v1
kind: Pod
metadata: {name: srv, labels: {app: srv}}
spec:
  nodeName: node-b
  containers: [{name: echo, command: ["$ZH", "echo", "--http", "$LISTEN", "--tcp", "0", "--udp", "0"]}]
---
apiVersion: v1
kind: Service
metadata: {name: srv}
spec: {${FAMILY}selector: {app: srv}, ports: [{port: 80, targetPort: 8080}]}
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
PJ=$("$ZH" lab status --lab "$LAB" -o json)
if [ "$PIN" = 1 ]; then
	SPID=$(echo "$PJ" | jq -r '.pods[] | select(.name=="srv") | .pid')
	taskset -apc 1 "$SPID" >/dev/null || { echo "cannot pin the server (pid $SPID)" >&2; exit 1; }
	CPU=(taskset -c 0)
fi
SJ=$("$ZH" get --lab "$LAB" services -o json)
POD=$(echo "$PJ" | jq -r '.pods[] | select(.name=="srv") | .ip')
if [ "$DUAL" = 1 ]; then
	VIP=$(echo "$SJ" | jq -r '.[] | select(.name=="srv") | .clusterIPs[0]')
	VIP6=$(echo "$SJ" | jq -r '.[] | select(.name=="srv") | .clusterIPs[1]')
	POD6=$(echo "$PJ" | jq -r '.pods[] | select(.name=="srv") | .ip6')
else
	VIP=$(echo "$SJ" | jq -r '.[] | select(.name=="srv") | .clusterIP')
	VIP6=::ffff:$VIP POD6=::ffff:$POD
fi
for _ in $(seq 50); do
	"$ZH" lab exec --lab "$LAB" client -- curl -s -m 1 -o /dev/null "http://[$VIP6]/" && break
	sleep 0.2
done
PINDIR=/sys/fs/bpf/zerohop/$LAB/node-a
COST=$(dirname "$ZH")/tests/tools/netpol_cost
[ -x "$COST" ] || COST=
run() {	# URL OUT -> conn/s (and OUT.cost: the connect programs' run time)
	${COST:+"$COST" "$PINDIR/lb_link_connect4" "$PINDIR/lb_link_connect6" --} \
		"$ZH" lab exec --lab "$LAB" client -- "${CPU[@]}" "$ZH" bench --keepalive=false -c "$C" \
		-t "${SECS}s" --warmup 500ms --quiet --json "$2" "$1?size=1024" >"$2.cost" 2>/dev/null
	jq .ActualQPS "$2"
}
pair() {	# ROUND URL4 URL6 OUT -> "v4 v6" in that round's order (OUT.4, OUT.6)
	local a b
	if [ $(($1 % 2)) = 1 ]; then
		a=$(run "$2" "$4.4"); b=$(run "$3" "$4.6")
	else
		b=$(run "$3" "$4.6"); a=$(run "$2" "$4.4")
	fi
	echo "$a $b"
}
nsrun() {	# OUT PROG -> ns per run of PROG (connect4|connect6) during that run
	sed -n "s|.*lb_link_$2 runs [0-9]* ns [0-9]* ns/run \([0-9.]*\)|\1|p" "$1.cost"
}
stat() { "$ZH" get --lab "$LAB" stats -o json | jq ".\"node-a\".$1 // 0"; }
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $PAIRS pairs x ${SECS}s, $C connections, keep-alive off, 1 KiB, pin=$PIN; ClusterIPs $VIP [$VIP6]"
printf "%-5s %-12s %-12s %-7s %s\n" pair "v4 conn/s" "v6 conn/s" "v6/v4" "ns/run connect4 connect6"
m0=$(stat v6_socket_v4mapped_service); x0=$(stat connect_translated)
: >"$TMP/ratios"
for i in $(seq "$PAIRS"); do
	read -r a b < <(pair "$i" "http://$VIP/" "http://[$VIP6]/" "$TMP/s")
	r=$(ratio "$b" "$a")
	echo "$r" >>"$TMP/ratios"
	if [ "$DIRECT" = 1 ]; then
		read -r pa pb < <(pair "$i" "http://$POD:8080/" "http://[$POD6]:8080/" "$TMP/p")
		pr=$(ratio "$pb" "$pa")
		echo "$pr" >>"$TMP/pratios"
		ratio "$r" "$pr" >>"$TMP/qratios"
		printf "#     pod IP: v4 %.0f v6 %.0f v6/v4 %s\n" "$pa" "$pb" "$pr"
	fi
	n4=$(nsrun "$TMP/s.4" connect4); n6=$(nsrun "$TMP/s.6" connect6)
	echo "${n4:-0}" >>"$TMP/ns4"; echo "${n6:-0}" >>"$TMP/ns6"
	printf "%-5s %-12.0f %-12.0f %-7s %s %s\n" "$i" "$a" "$b" "$r" "${n4:--}" "${n6:--}"
done
m1=$(stat v6_socket_v4mapped_service); x1=$(stat connect_translated)
echo "# connect_translated +$((x1 - x0)), of which from AF_INET6 sockets to v4-mapped Services (v6_socket_v4mapped_service) +$((m1 - m0)); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "v6/v4 median $(median <"$TMP/ratios") spread $(spread <"$TMP/ratios") over $PAIRS pairs"
[ "$DIRECT" = 1 ] && echo "pod IP (no Service) v6/v4 median $(median <"$TMP/pratios") spread $(spread <"$TMP/pratios"); Service ratio / pod-IP ratio per round: median $(median <"$TMP/qratios") spread $(spread <"$TMP/qratios")"
[ -n "$COST" ] && echo "kernel cost per connect (BPF run time, node-a): connect4 median $(median <"$TMP/ns4") ns ($(spread <"$TMP/ns4")), connect6 median $(median <"$TMP/ns6") ns ($(spread <"$TMP/ns6"))"
