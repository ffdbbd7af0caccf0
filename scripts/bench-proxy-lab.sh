#!/usr/bin/env bash
# bench-proxy-lab.sh — the node L7 proxy against HAProxy *in the lab*, both
# in the proxy's place: same node network namespace, same cgroup
# (zerohop-LAB/system/proxy-node-a), so with --accel on both get the
# same-node short-circuit on both legs (docs/accel.md "Node proxy legs").
#   Z  zerohop proxy as the lab runs it (capture mode): the client pod asks
#      the ClusterIP of a Service annotated zerohop.io/l7 with an HTTPRoute
#      (PathPrefix /, as scripts/bench-proxy.sh), connect4
#      sends it to NODE_IP:15001; the proxy routes each request and checks
#      NetworkPolicy (none here), upstream from the node proxy address .1
#   H  HAProxy (nbthread 1, http-reuse always, as scripts/bench-proxy.sh),
#      started in the proxy cgroup, bind NODE_IP:15002, upstream `source`
#      the node proxy address; NODE_IP:15002 is added to accel_proxy by hand
#      (accel_ctl proxy), as the agent does for 15001
# Client: wrk -t1 -cCONNS -dDUR in a client pod on node-a; server: zerohop
# echo --threads 1 in a pod on node-a; 1 KiB responses, keep-alive. Runs
# interleaved Z H, H Z, ...; per pair the ratios Z/H of requests/s and of
# requests per CPU-second of the proxy process; median and spread. The
# accel proxy counter is checked to move for both contenders (with accel on).
# Usage: scripts/bench-proxy-lab.sh [PAIRS=5] [DUR=5s] [CONNS=64]
# Environment: B=build dir (build), LAB (A5), ACCEL (on|off, on), PINCPU
# (1: proxies on CPU 1, load and server on CPU 0; 0: unpinned).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/haproxy.sh"
B=${B:-build}
ZH=$ROOT/$B/zerohop
TOOLS=$(dirname "$ZH")/tests/tools
PAIRS=${1:-5}
DUR=${2:-5s}
CONNS=${3:-64}
LAB=${LAB:-A5}
ACCEL=${ACCEL:-on}
for t in wrk haproxy jq "$ZH" "$TOOLS/accel_ctl"; do
	command -v "$t" >/dev/null || { echo "missing $t (make deps; make B=$B)" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/zh-pxlab.XXXXXX)
trap '"$ZH" lab down --lab $LAB >/dev/null 2>&1; rm -rf "$TMP"' EXIT
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
"$ZH" lab up --lab $LAB --accel "$ACCEL" -f "$TMP/m.yaml" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; exit 1; }
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
PCG=$CG/zerohop-$LAB/system/proxy-node-a
NCG=$CG/zerohop-$LAB/node-a
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
NODE_IP=$("$ZH" lab status --lab $LAB -o json | jq -r '.nodes[] | select(.name=="node-a") | .ip')
ECHO_IP=$("$ZH" get --lab $LAB pods -o json | jq -r '.[] | select(.name=="echo") | .ip')
PXA=${ECHO_IP%.*}.1
ZPID=$("$ZH" lab status --lab $LAB -o json | jq -r '.nodes[] | select(.name=="node-a") | .proxyPid')

haproxy_cfg "$NODE_IP:15002" $ECHO_IP:8080 source $PXA >"$TMP/haproxy.cfg"
# Join the proxy cgroup first, so the listener (and every socket it
# accepts) and the upstream sockets are the proxy cgroup's.
"$ZH" lab exec --lab $LAB --node node-a -- sh -c \
	"echo \$\$ > $PCG/cgroup.procs && exec haproxy -f $TMP/haproxy.cfg -db" \
	>/dev/null 2>"$TMP/haproxy.err" &
for _ in $(seq 50); do
	HPID=$(grep -vx "$ZPID" "$PCG/cgroup.procs" | head -1)
	[ -n "$HPID" ] && "$ZH" lab exec --lab $LAB client -- curl -s -o /dev/null \
		"http://$NODE_IP:15002/?size=1024" && break
	sleep 0.1
done
[ -n "$HPID" ] || { echo "haproxy did not start: $(cat "$TMP/haproxy.err")" >&2; exit 1; }
if [ "$ACCEL" = on ]; then
	"$TOOLS/accel_ctl" proxy "$NCG" "$PIN" "$NODE_IP:15001" "$PXA" "$NODE_IP:15002" ||
		{ echo "accel_ctl proxy failed" >&2; exit 1; }
fi
# Fixed CPUs (PINCPU=1, the default on 2+ CPUs): the proxy under test on
# CPU 1, the load (wrk) and the echo server on CPU 0, the same for both
# contenders. Unpinned, the three busy processes share 2 CPUs as the
# scheduler places them and pairs swing 0.7-2.6x; pinned, the proxy's own
# CPU is what limits it, which is what the comparison is about.
WRKCPU=()
if [ "${PINCPU:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
	EPID=$("$ZH" lab status --lab $LAB -o json | jq -r '.pods[] | select(.name=="echo") | .pid')
	taskset -apc 0 "$EPID" >/dev/null && taskset -apc 1 "$ZPID" >/dev/null &&
		taskset -apc 1 "$HPID" >/dev/null || { echo "taskset failed" >&2; exit 1; }
	WRKCPU=(taskset -c 0)
	echo "# pinned: proxies on CPU 1 (zerohop $ZPID, haproxy $HPID), echo ($EPID) and wrk on CPU 0"
fi
echo "# lab $LAB accel $ACCEL: node-a $NODE_IP, echo $ECHO_IP, proxy address $PXA; zerohop proxy pid $ZPID, haproxy pid $HPID ($(haproxy -v | head -1 | awk '{print $3}'))"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
pstat() { "$TOOLS/accel_ctl" stats "$PIN" 2>/dev/null | sed -n 's/^proxy=//p'; }
rps() { # URL PID → "requests/s requests-per-proxy-CPU-second accel-proxy-sockets"
	local t0 t1 r p0 p1
	t0=$(ticks "$2"); p0=$(pstat)
	r=$("$ZH" lab exec --lab $LAB client -- "${WRKCPU[@]}" wrk -t1 -c"$CONNS" -d"$DUR" "$1" |
		awk '/^Requests\/sec/ {print $2}')
	t1=$(ticks "$2"); p1=$(pstat)
	awk -v r="$r" -v d="${DUR%s}" -v c=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
		-v p=$(( ${p1:-0} - ${p0:-0} )) \
		'BEGIN {printf "%s %.0f %d\n", r, (c > 0 ? r * d / (c / hz) : 0), p}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
spread() { sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s..%s", lo, hi}'; }

ZURL="http://10.96.0.71/?size=1024"
HURL="http://$NODE_IP:15002/?size=1024"
: >"$TMP/rh"; : >"$TMP/ch"
echo "== wrk -t1 -c$CONNS -d$DUR /?size=1024 in a pod, interleaved x$PAIRS"
echo "   (each: requests/s, requests per CPU-second of the proxy process, accel proxy sockets inserted)"
for i in $(seq "$PAIRS"); do
	if [ $((i % 2)) -eq 1 ]; then
		read -r z zc zp < <(rps "$ZURL" "$ZPID"); read -r h hc hp < <(rps "$HURL" "$HPID")
	else
		read -r h hc hp < <(rps "$HURL" "$HPID"); read -r z zc zp < <(rps "$ZURL" "$ZPID")
	fi
	echo "pair $i: zerohop $z ($zc/cpu-s, +$zp accel proxy sockets)  haproxy $h ($hc/cpu-s, +$hp)"
	awk -v a="$z" -v b="$h" 'BEGIN {printf "%.2f\n", a / b}' >>"$TMP/rh"
	awk -v a="$zc" -v b="$hc" 'BEGIN {printf "%.2f\n", (b > 0 ? a / b : 0)}' >>"$TMP/ch"
done
echo "req/s zerohop/haproxy: median $(median <"$TMP/rh") (spread $(spread <"$TMP/rh"))"
echo "req per proxy CPU-s zerohop/haproxy: median $(median <"$TMP/ch") (spread $(spread <"$TMP/ch"))"
