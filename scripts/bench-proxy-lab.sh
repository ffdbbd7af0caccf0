#!/usr/bin/env bash
# bench-proxy-lab.sh — the node L7 proxy against HAProxy and nginx *in the
# lab*, every contender in the proxy's place: same node network namespace,
# same cgroup (zerohop-LAB/system/proxy-node-a), so with --accel on all get
# the same-node short-circuit on both legs (docs/accel.md "Node proxy legs").
#   Z  zerohop proxy as the lab runs it (capture mode): the client pod asks
#      the ClusterIP of a Service annotated zerohop.io/l7 with an HTTPRoute
#      (PathPrefix /, as scripts/bench-proxy.sh), connect4
#      sends it to NODE_IP:15001; the proxy routes each request and checks
#      NetworkPolicy (none here), upstream from the node proxy address .1
#   H  HAProxy (scripts/lib/haproxy.sh: nbthread 1, http-reuse always),
#      started in the proxy cgroup, bind NODE_IP:15002, upstream `source`
#      the node proxy address
#   N  nginx (scripts/lib/nginx.sh: 1 worker, upstream keepalive), the same
#      way, bind NODE_IP:15003, proxy_bind the node proxy address
#   NODE_IP:15002 and :15003 are added to accel_proxy by hand (accel_ctl
#   proxy), as the agent does for 15001.
# Client: wrk -t1 -cCONNS -dDUR in a client pod on node-a; server: zerohop
# echo --threads 1 in a pod on node-a; 1 KiB responses, keep-alive.
# 1. Max rate: interleaved rounds (the order rotates), per round the ratios
#    Z/H and Z/N of requests/s and of requests per CPU-second of the proxy
#    process; median and spread. The accel proxy counter must move.
# 2. p99 at a fixed rate of half HAProxy's median max: `zerohop bench -c
#    CONNS -qps HALF --spin 0` (open loop, coordinated-omission corrected)
#    in the client pod, Z and H interleaved, P99PAIRS pairs; ratio of p99s.
#    --spin 0: the load generator shares CPU 0 with the echo server, and
#    busy-waiting for send times (its default, widened to the VM's timer
#    lateness) took that CPU from the server: every latency then measured
#    the starved server (p50 4-6 ms for both proxies), not the proxies.
# Usage: scripts/bench-proxy-lab.sh [PAIRS=5] [DUR=5s] [CONNS=64]
# Environment: B=build dir (build), LAB (A5), ACCEL (on|off, on), PINCPU
# (1: proxies on CPU 1, load and server on CPU 0; 0: unpinned), QUOTA (a
# percentage of one CPU: every proxy is limited to it by a cgroup-v1 cpu
# quota, so the proxy, not the load side, is what saturates; unset: no
# quota; with a quota the default PHASES is "max": a proxy held at its quota
# is throttled, so the p99 phase runs without one, at HALF req/s given),
# PHASES ("max p99" by default; either alone), P99PAIRS (PAIRS), HALF,
# BUSY (a duration: zerohop's proxies run with --busy-poll BUSY, through
# ZEROHOP_PROXY_BUSY_POLL, and HAProxy with busy-polling; nginx has none:
# the latency mode of both p99 contenders, at the price of a CPU each).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/haproxy.sh"
source "$ROOT/scripts/lib/nginx.sh"
source "$ROOT/scripts/lib/stats.sh"
B=${B:-build}
ZH=$ROOT/$B/zerohop
TOOLS=$(dirname "$ZH")/tests/tools
PAIRS=${1:-5}
DUR=${2:-5s}
CONNS=${3:-64}
LAB=${LAB:-A5}
ACCEL=${ACCEL:-on}
for t in wrk haproxy nginx jq "$ZH" "$TOOLS/accel_ctl"; do
	command -v "$t" >/dev/null || { echo "missing $t (make deps; make B=$B)" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/zh-pxlab.XXXXXX)
QCG=
cleanup() {
	"$ZH" lab down --lab $LAB >/dev/null 2>&1
	# The quota group empties when the lab's processes end.
	[ -n "$QCG" ] && for _ in 1 2 3 4 5; do rmdir "$QCG" 2>/dev/null && break; sleep 0.2; done
	rm -rf "$TMP"
}
trap cleanup EXIT
"$ZH" lab down --lab $LAB >/dev/null 2>&1

cat >"$TMP/m.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: echo, labels: {app: web}}
spec:
  nodeName: node-a
  containers: [{name: e, command: ["$ZH", "echo", "--threads", "1", "--http", "0.0.0.0:8080", "--tcp", "127.0.0.1:0", "--udp", "127.0.0.1:0"], ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, annotations: {zerohop.io/l7: "true"}}
spec:
  clusterIP: 10.96.0.71
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{group: "", kind: Service, name: web}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: node-a
  containers: [{name: c, command: ["sleep", "100000"]}]
YAML
if [ -n "${BUSY:-}" ]; then export ZEROHOP_PROXY_BUSY_POLL=$BUSY HAPROXY_BUSY=1; fi
"$ZH" lab up --lab $LAB --accel "$ACCEL" -f "$TMP/m.yaml" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; exit 1; }
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
PCG=$CG/zerohop-$LAB/system/proxy-node-a
NCG=$CG/zerohop-$LAB/node-a
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
NODE_IP=$("$ZH" lab status --lab $LAB -o json | jq -r '.nodes[] | select(.name=="node-a") | .ip')
ECHO_IP=$("$ZH" get --lab $LAB pods -o json | jq -r '.[] | select(.name=="echo") | .ip')
PXA=${ECHO_IP%.*}.1
ZPID=$("$ZH" lab status --lab $LAB -o json | jq -r '.nodes[] | select(.name=="node-a") | .proxyPid')

# start_in_proxy_cgroup NAME URL CMD... — start CMD in node-a's network
# namespace after joining the proxy cgroup (so its listener, every socket
# it accepts and its upstream sockets are the proxy cgroup's), wait until
# URL answers from the client pod; prints the new process's pid.
start_in_proxy_cgroup() {
	local name=$1 url=$2 pid= known
	shift 2
	known=$(cat "$PCG/cgroup.procs")
	"$ZH" lab exec --lab $LAB --node node-a -- sh -c \
		"echo \$\$ > $PCG/cgroup.procs && exec $*" >/dev/null 2>"$TMP/$name.err" &
	for _ in $(seq 50); do
		pid=$(grep -vxF "$known" "$PCG/cgroup.procs" | head -1)
		[ -n "$pid" ] && "$ZH" lab exec --lab $LAB client -- curl -s -o /dev/null "$url" && break
		sleep 0.1
	done
	[ -n "$pid" ] || { echo "$name did not start: $(cat "$TMP/$name.err")" >&2; return 1; }
	echo "$pid"
}
haproxy_cfg "$NODE_IP:15002" $ECHO_IP:8080 source $PXA >"$TMP/haproxy.cfg"
nginx_cfg "$TMP" "$NODE_IP:15003" "$ECHO_IP:8080" "$PXA" >"$TMP/nginx.conf"
HPID=$(start_in_proxy_cgroup haproxy "http://$NODE_IP:15002/?size=1024" \
	haproxy -f "$TMP/haproxy.cfg" -db) || exit 1
NPID=$(start_in_proxy_cgroup nginx "http://$NODE_IP:15003/?size=1024" \
	nginx -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/nginx-error.log") || exit 1
if [ "$ACCEL" = on ]; then
	"$TOOLS/accel_ctl" proxy "$NCG" "$PIN" "$NODE_IP:15001" "$PXA" "$NODE_IP:15002" "$NODE_IP:15003" ||
		{ echo "accel_ctl proxy failed" >&2; exit 1; }
fi
# Fixed CPUs (PINCPU=1, the default on 2+ CPUs): the proxy under test on
# CPU 1, the load (wrk) and the echo server on CPU 0, the same for every
# contender. Unpinned, the three busy processes share 2 CPUs as the
# scheduler places them and pairs swing 0.7-2.6x; pinned, the proxy's own
# CPU is what limits it, which is what the comparison is about.
WRKCPU=()
EPID=$("$ZH" lab status --lab $LAB -o json | jq -r '.pods[] | select(.name=="echo") | .pid')
if [ "${PINCPU:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
	taskset -apc 0 "$EPID" >/dev/null && taskset -apc 1 "$ZPID" >/dev/null &&
		taskset -apc 1 "$HPID" >/dev/null && taskset -apc 1 "$NPID" >/dev/null ||
		{ echo "taskset failed" >&2; exit 1; }
	WRKCPU=(taskset -c 0)
	echo "# pinned: proxies on CPU 1 (zerohop $ZPID, haproxy $HPID, nginx $NPID), echo ($EPID) and load on CPU 0"
fi
# QUOTA=P: every proxy process may use at most P % of one CPU (cgroup v1
# cpu controller, a group of this run's own). With the load side on a CPU
# of its own and the proxy held below it, the proxy is what saturates, so
# raw requests/s compare the proxies' capacity directly on 2 cores.
if [ -n "${QUOTA:-}" ]; then
	[ -d /sys/fs/cgroup/cpu ] || { echo "QUOTA needs the cgroup v1 cpu controller at /sys/fs/cgroup/cpu" >&2; exit 1; }
	QCG=/sys/fs/cgroup/cpu/zerohop-$LAB-proxyquota
	mkdir -p "$QCG" && echo 100000 >"$QCG/cpu.cfs_period_us" &&
		echo $((QUOTA * 1000)) >"$QCG/cpu.cfs_quota_us" || { echo "cannot set the quota" >&2; exit 1; }
	for p in $ZPID $HPID $NPID; do
		for t in /proc/$p/task/*; do echo "${t##*/}" >"$QCG/tasks"; done
	done
	echo "# quota: each proxy at most $QUOTA % of one CPU ($QCG)"
fi
[ -n "${BUSY:-}" ] && echo "# busy polling: zerohop --busy-poll $BUSY, haproxy busy-polling"
echo "# lab $LAB accel $ACCEL: node-a $NODE_IP, echo $ECHO_IP, proxy address $PXA; zerohop $ZPID, haproxy $HPID ($(haproxy -v | head -1 | awk '{print $3}')), nginx $NPID ($(nginx -v 2>&1 | sed 's/.*\///'))"

pstat() { "$TOOLS/accel_ctl" stats "$PIN" 2>/dev/null | sed -n 's/^proxy=//p'; }
rps() { # URL PID → "requests/s requests-per-proxy-CPU-second accel-proxy-sockets"
	local t0 t1 r p0 p1
	t0=$(proc_ticks "$2"); p0=$(pstat)
	r=$("$ZH" lab exec --lab $LAB client -- "${WRKCPU[@]}" wrk -t1 -c"$CONNS" -d"$DUR" "$1" |
		awk '/^Requests\/sec/ {print $2}')
	t1=$(proc_ticks "$2"); p1=$(pstat)
	awk -v r="$r" -v d="${DUR%s}" -v c=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
		-v p=$(( ${p1:-0} - ${p0:-0} )) \
		'BEGIN {printf "%s %.0f %d\n", r, (c > 0 ? r * d / (c / hz) : 0), p}'
}

# Only the contender under test runs: HAProxy and nginx are stopped
# (SIGSTOP) while the others are measured, so an idle contender's timers, or
# HAProxy's busy-polling (which spins even when idle), never take CPU 1 from
# the one measured. (The lab's zerohop proxy sleeps when idle.)
hold() { # KEY: stop every contender we started but KEY's, which runs
	local k
	for k in h n; do
		if [ "$k" = "$1" ]; then kill -CONT "${PID[$k]}"; else kill -STOP "${PID[$k]}"; fi
	done
}
release() { kill -CONT "$HPID" "$NPID"; }
trap 'release 2>/dev/null; cleanup' EXIT
declare -A URL=([z]="http://10.96.0.71/?size=1024" [h]="http://$NODE_IP:15002/?size=1024"
	[n]="http://$NODE_IP:15003/?size=1024")
declare -A PID=([z]=$ZPID [h]=$HPID [n]=$NPID)
if [ -n "${QUOTA:-}" ]; then PHASES=${PHASES:-max}; else PHASES=${PHASES:-max p99}; fi
[ -n "${QUOTA:-}" ] && [[ " $PHASES " = *" p99 "* ]] &&
	{ echo "QUOTA and the p99 phase do not mix (a throttled proxy): run p99 without QUOTA" >&2; exit 1; }
HALF=${HALF:-}
if [[ " $PHASES " = *" max "* ]]; then
	: >"$TMP/h"; : >"$TMP/rh"; : >"$TMP/ch"; : >"$TMP/rn"; : >"$TMP/cn"
	echo "== wrk -t1 -c$CONNS -d$DUR /?size=1024 in a pod, interleaved rounds x$PAIRS (the order rotates)"
	echo "   (each: requests/s, requests per CPU-second of the proxy process, accel proxy sockets inserted)"
	ORDERS=("z h n" "h n z" "n z h")
	for i in $(seq "$PAIRS"); do
		declare -A R=() C=() P=()
		for c in ${ORDERS[$(( (i - 1) % 3 ))]}; do
			hold "$c"
			read -r "R[$c]" "C[$c]" "P[$c]" < <(rps "${URL[$c]}" "${PID[$c]}")
			release
		done
		echo "round $i: zerohop ${R[z]} (${C[z]}/cpu-s, +${P[z]})  haproxy ${R[h]} (${C[h]}/cpu-s, +${P[h]})  nginx ${R[n]} (${C[n]}/cpu-s, +${P[n]})"
		echo "${R[h]}" >>"$TMP/h"
		ratio "${R[z]}" "${R[h]}" >>"$TMP/rh"; ratio "${C[z]}" "${C[h]}" >>"$TMP/ch"
		ratio "${R[z]}" "${R[n]}" >>"$TMP/rn"; ratio "${C[z]}" "${C[n]}" >>"$TMP/cn"
	done
	echo "req/s zerohop/haproxy: median $(median <"$TMP/rh") (spread $(spread <"$TMP/rh"))"
	echo "req/s zerohop/nginx: median $(median <"$TMP/rn") (spread $(spread <"$TMP/rn"))"
	echo "req per proxy CPU-s zerohop/haproxy: median $(median <"$TMP/ch") (spread $(spread <"$TMP/ch"))"
	echo "req per proxy CPU-s zerohop/nginx: median $(median <"$TMP/cn") (spread $(spread <"$TMP/cn"))"
	HALF=$(median <"$TMP/h" | awk '{printf "%d", $1 / 2}')
fi
if [[ " $PHASES " = *" p99 "* ]]; then
	[ -n "$HALF" ] || { echo "PHASES=p99 alone needs HALF=req/s" >&2; exit 1; }
	echo "== p99 at $HALF req/s (half of HAProxy's median max): zerohop bench -c $CONNS -qps $HALF --spin ${SPIN:-0} -t $DUR in a pod, interleaved x${P99PAIRS:-$PAIRS}"
	echo "   (each: p50 and p99 in ms, CO-corrected; proxy CPU share; context switches per request of the echo server and of the proxy)"
	# context switches of the echo server (the load side's CPU): how the
	# proxy's send pattern shows up on the other side
	csw() { awk '/ctxt_switches/ {s += $2} END {print s}' /proc/"${1:-$EPID}"/task/*/status; }
	# and the proxy's own (each one a sleep and a wake-up between requests)
	p99() { # URL PID → "p50 p99 cpu% echo-csw/req proxy-csw/req" (ms)
		local t0 t1 s0 s1 x0 x1
		t0=$(proc_ticks "$2"); s0=$(csw); x0=$(csw "$2")
		"$ZH" lab exec --lab $LAB client -- "${WRKCPU[@]}" "$ZH" bench -c "$CONNS" -qps "$HALF" --spin "${SPIN:-0}" \
			-t "$DUR" --warmup 1s --quiet --json "$TMP/j.json" "$1" >/dev/null 2>&1
		t1=$(proc_ticks "$2"); s1=$(csw); x1=$(csw "$2")
		jq -r --arg cs "$(awk -v d=$((s1 - s0)) -v q="$HALF" -v t="${DUR%s}" 'BEGIN {printf "%.2f", d / (q * (t + 1))}')" \
			--arg ps "$(awk -v d=$((x1 - x0)) -v q="$HALF" -v t="${DUR%s}" 'BEGIN {printf "%.2f", d / (q * (t + 1))}')" --arg cpu "$(awk -v c=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v d="${DUR%s}" \
			'BEGIN {printf "%.0f", 100 * c / hz / (d + 1)}')" \
			'[.DurationHistogram.Percentiles[] | select(.Percentile == 50 or .Percentile == 99) | .Value * 1000]
			 | "\(.[0]) \(.[1]) \($cpu) \($cs) \($ps)"' "$TMP/j.json"
	}
	: >"$TMP/rp"
	for i in $(seq "${P99PAIRS:-$PAIRS}"); do
		if [ $((i % 2)) -eq 1 ]; then
			hold z; read -r z50 z99 zc zs zp < <(p99 "${URL[z]}" "$ZPID")
			hold h; read -r h50 h99 hc hs hp < <(p99 "${URL[h]}" "$HPID"); release
		else
			hold h; read -r h50 h99 hc hs hp < <(p99 "${URL[h]}" "$HPID")
			hold z; read -r z50 z99 zc zs zp < <(p99 "${URL[z]}" "$ZPID"); release
		fi
		printf 'pair %d: zerohop p50 %.3f p99 %.3f ms (cpu %s%%, csw/req echo %s proxy %s)  haproxy p50 %.3f p99 %.3f ms (cpu %s%%, csw/req echo %s proxy %s)\n' \
			"$i" "$z50" "$z99" "$zc" "$zs" "$zp" "$h50" "$h99" "$hc" "$hs" "$hp"
		ratio "$z99" "$h99" >>"$TMP/rp"
	done
	echo "p99 zerohop/haproxy: median $(median <"$TMP/rp") (spread $(spread <"$TMP/rp"))"
fi
