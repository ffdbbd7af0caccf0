#!/usr/bin/env bash
# bench-accel.sh — same-node short-circuit (sock_ops + sk_msg): data-path
# modes interleaved in one run (the order rotates every round, so a drift in
# machine load favours no mode), median of PAIRS rounds. Two labs of the same
# topology (2 nodes, same pods): LAB with the mesh (agents), and, when a
# nomesh* mode is asked for, LAB-n started with --no-mesh (no agent, nothing
# attached to any cgroup).
# Modes:
#   on          mesh lab, zerohop's short-circuit (bpf/accel.bpf.c, `accel_ctl on`)
#   off         mesh lab, acceleration off (`accel_ctl off`); the agent's other
#               hooks (connect-time LB, policy cgroup_skb, ...) stay
#   ref         mesh lab, acceleration off, the reference redirect attached
#               to the node cgroup instead (tests/tools/accel_bare: a textbook
#               sock_ops + sk_msg and nothing else); on/ref = what our sk_msg
#               path costs over the textbook one
#   nomesh      no-mesh lab, nothing attached: "bare (pod IP, no mesh)";
#               Service traffic goes to the pod IP there
#   nomesh-ref  no-mesh lab + the reference redirect: the measured limit
#               (the node's cgroup carrying a bare sock_ops + sk_msg
#               redirect and nothing else)
# Workloads:
#   tcp-pod    TCP echo 1 KiB, 64 connections, max rate, pod -> pod same node
#   tcp-svc    same, pod -> Service ClusterIP (backend on the same node)
#   http-pod   HTTP/1.1 keep-alive, 1 KiB responses, 64 connections, max rate
#   tcp-cross  TCP echo 1 KiB x 64, pod -> pod on the other node (must be >= 0.98)
#   tcp-pod6, tcp-svc6  tcp-pod and tcp-svc over native IPv6 (pod IPv6, the
#              Service's IPv6 ClusterIP; the server listens on [::]:8079): any
#              *6 workload makes both labs dual-stack, and the reference
#              redirect then loads its IPv6 pair too (accel_bare on ... 46)
# Client `zerohop bench` (THREADS threads), server `zerohop echo` (one thread).
# Usage: scripts/bench-accel.sh [PAIRS=5] [SECS=3]
# Environment: B=build dir (build); MODES ("on off nomesh"; every non-base
#   mode gets a ratio column); BASE (the ratios' denominator: nomesh when
#   MODES has it ("bare"), else off); WORKLOADS; LAB (S43; the
#   no-mesh lab is LAB-n); OUT (/tmp/zhS-bench);
#   THREADS (1); PROFILE=1: kernel BPF run-time stats on during the run (a
#   global kernel setting, dropped when the script ends) and a table of
#   ns per call and calls per request of every program on the node cgroup and
#   of the sk_msg programs (warm-up calls included).
# Output: markdown tables on stdout; raw JSON in $OUT.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
ZH=$ROOT/$B/zerohop
CTL=$ROOT/$B/tests/tools/accel_ctl
REF=$ROOT/$B/tests/tools/accel_bare
PAIRS=${1:-5}
SECS=${2:-3}
LAB=${LAB:-S43}
LABN=$LAB-n
OUT=${OUT:-/tmp/zhS-bench}
WORKLOADS=${WORKLOADS:-"tcp-pod tcp-svc http-pod tcp-cross"}
MODES=${MODES:-"on off nomesh"}
THREADS=${THREADS:-1}
PROFILE=${PROFILE:-0}
set -- $MODES
modes=("$@")
NM=$#
has() { case " $MODES " in *" $1 "*) return 0 ;; esac; return 1; }
if has nomesh; then BASE=${BASE:-nomesh}; else BASE=${BASE:-off}; fi
has "$BASE" || { echo "MODES must include BASE ($BASE)" >&2; exit 2; }
NOMESH=0
for m in "${modes[@]}"; do
	case $m in
	on | off | ref) ;;
	nomesh | nomesh-ref) NOMESH=1 ;;
	*) echo "unknown mode $m (on off ref nomesh nomesh-ref)" >&2; exit 2 ;;
	esac
done
mkdir -p "$OUT"
[ -x "$ZH" ] && [ -x "$CTL" ] && [ -x "$REF" ] || { echo "build first: make B=$B" >&2; exit 1; }
if [ "$PROFILE" = 1 ] && ! command -v bpftool >/dev/null; then echo "PROFILE=1 needs bpftool" >&2; exit 2; fi

PIN=/sys/fs/bpf/zerohop/$LAB/node-a
PINN=/sys/fs/bpf/zerohop/$LABN/node-a
CGROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG=${CGROOT:-/run/zerohop/cgroup2}/zerohop-$LAB/node-a
CGN=${CGROOT:-/run/zerohop/cgroup2}/zerohop-$LABN/node-a
STATS_PID=
cleanup() {
	[ -n "$STATS_PID" ] && kill "$STATS_PID" 2>/dev/null
	"$REF" off "$PIN" 2>/dev/null
	"$REF" off "$PINN" 2>/dev/null
	rmdir "$PINN" "$(dirname "$PINN")" 2>/dev/null
	"$ZH" lab down --lab $LAB >/dev/null 2>&1
	"$ZH" lab down --lab $LABN >/dev/null 2>&1
}
trap cleanup EXIT INT TERM
cleanup

DUAL=0
case " $WORKLOADS " in *6" "*) DUAL=1 ;; esac
{
if [ $DUAL = 1 ]; then cat <<YAML
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: bench}
spec:
  nodes: [node-a, node-b]
  podCIDRs: [10.244.0.0/16, "fd00:10:244::/56"]
  serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
---
YAML
fi
cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: echo-a, labels: {app: echo-a}}
spec:
  nodeName: node-a
  containers:
    - name: e
      command: ["$ZH", "echo", "--tcp", "8078", "--tcp", "[::]:8079", "--http", "8080"]
---
apiVersion: v1
kind: Pod
metadata: {name: echo-b, labels: {app: echo-b}}
spec:
  nodeName: node-b
  containers:
    - name: e
      command: ["$ZH", "echo", "--tcp", "8078", "--http", "8080"]
---
apiVersion: v1
kind: Pod
metadata: {name: cli}
spec:
  nodeName: node-a
  containers:
    - name: c
      command: ["sleep", "100000"]
---
apiVersion: v1
kind: Service
metadata: {name: echo-a}
spec:
  $([ $DUAL = 1 ] && echo "ipFamilyPolicy: PreferDualStack")
  selector: {app: echo-a}
  ports:
    - {name: tcp, port: 8078}
    - {name: tcp6, port: 8079}
    - {name: http, port: 8080}
YAML
} > "$OUT/app.yaml"
"$ZH" lab up --lab $LAB --accel on -f "$OUT/app.yaml" >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log"; exit 1; }
if [ $NOMESH = 1 ]; then
	"$ZH" lab up --lab $LABN --no-mesh -f "$OUT/app.yaml" >"$OUT/up-n.log" 2>&1 ||
		{ cat "$OUT/up-n.log"; exit 1; }
	mkdir -p "$PINN"
fi
declare -A ADDR	# "LAB WORKLOAD" -> target URL
for l in $LAB $([ $NOMESH = 1 ] && echo $LABN); do
	pods=$("$ZH" get --lab "$l" pods -o json)
	a=$(echo "$pods" | jq -r '.[] | select(.name=="echo-a") | .ip')
	b=$(echo "$pods" | jq -r '.[] | select(.name=="echo-b") | .ip')
	vip=$("$ZH" get --lab "$l" services -o json | jq -r '.[] | select(.name=="echo-a") | .clusterIP')
	a6=$(echo "$pods" | jq -r '.[] | select(.name=="echo-a") | .ips[1] // empty')
	vip6=$("$ZH" get --lab "$l" services -o json | jq -r '.[] | select(.name=="echo-a") | .clusterIPs[1] // empty')
	[ "$l" = "$LABN" ] && vip=$a vip6=$a6	# no mesh, no ClusterIP translation: the pod itself
	ADDR["$l tcp-pod6"]="tcp://[$a6]:8079"
	ADDR["$l tcp-svc6"]="tcp://[$vip6]:8079"
	ADDR["$l tcp-pod"]="tcp://$a:8078"
	ADDR["$l tcp-svc"]="tcp://$vip:8078"
	ADDR["$l http-pod"]="http://$a:8080/?size=1024"
	ADDR["$l tcp-cross"]="tcp://$b:8078"
	[ "$l" = "$LAB" ] && LOCAL_IPS=$(echo "$pods" | jq -r '.[] | select(.node=="node-a") | .ips[]? // .ip')
done
for _ in $(seq 50); do [ -e "$PIN/accel_sockops_link" ] && break; sleep 0.1; done

REFF=4	# the reference's families
[ $DUAL = 1 ] && REFF=46
lab_of() { case $1 in nomesh*) echo $LABN ;; *) echo $LAB ;; esac; }
setmode() {	# MODE: the mesh lab's node as MODE asks; the no-mesh lab's too
	case $1 in
	on) "$REF" off "$PIN" && "$CTL" on "$CG" "$PIN" $LOCAL_IPS ;;
	off) "$REF" off "$PIN" && "$CTL" off "$PIN" ;;
	ref) "$CTL" off "$PIN" && "$REF" on "$CG" "$PIN" $REFF ;;
	nomesh) "$REF" off "$PINN" ;;
	nomesh-ref) "$REF" on "$CGN" "$PINN" $REFF ;;
	esac
}

# PROFILE=1: "id name run_cnt run_time_ns" of the programs that can run on the
# path: every program attached to node-a's cgroup of either lab (agent hooks,
# accel sock_ops, the reference sock_ops) and the sk_msg programs (ours:
# pinned; the reference's: the newest program named bare_msg).
prog_snap() {
	local ids id
	# (a lab not up in this run's MODES answers {"error": ...}: no ids)
	ids=$( (bpftool cgroup show "$CG" -j; bpftool cgroup show "$CGN" -j) 2>/dev/null |
		jq -r '.[]? | objects | .id')
	ids="$ids $(bpftool prog show pinned "$PIN/accel_msg" -j 2>/dev/null | jq -r .id)"
	ids="$ids $(bpftool prog show -j 2>/dev/null | jq -r '[.[] | select(.name=="bare_msg") | .id] | max // empty')"
	for id in $ids; do
		bpftool prog show id "$id" -j 2>/dev/null |
			jq -r '"\(.id) \(.name) \(.run_cnt // 0) \(.run_time_ns // 0)"'
	done | sort -u
}
run() {	# WORKLOAD MODE I -> "qps p50"
	local f="$OUT/$1-$2-$3.json" l
	l=$(lab_of "$2")
	setmode "$2" || exit 1
	[ "$PROFILE" = 1 ] && prog_snap >"$OUT/$1-$2-$3.before"
	"$ZH" lab exec --lab "$l" cli -- "$ZH" bench -c 64 --threads "$THREADS" -t "${SECS}s" \
		--warmup 500ms --payload-size 1024 --quiet --json "$f" "${ADDR["$l $1"]}" >/dev/null 2>&1
	if [ "$PROFILE" = 1 ]; then
		prog_snap >"$OUT/$1-$2-$3.after"
		# join: id name cnt0 ns0 name cnt1 ns1 -> mode prog calls ns requests
		join <(sort "$OUT/$1-$2-$3.before") <(sort "$OUT/$1-$2-$3.after") |
			awk -v req="$(jq '.DurationHistogram.Count' "$f")" -v m="$2" \
				'{ c = $6 - $3; t = $7 - $4; if (c > 0) print m, $2, c, t, req }' \
				>"$OUT/$1-$2-$3.prof"
	fi
	echo "$(jq .ActualQPS "$f") $(jq '.DurationHistogram.Percentiles[] | select(.Percentile==50) | .Value' "$f")"
}
source "$ROOT/scripts/lib/stats.sh"	# median
idx_of() { local i; for i in "${!modes[@]}"; do [ "${modes[$i]}" = "$1" ] && echo "$i"; done; }
# ratio FILE N D F: per round, mode N over mode D; F 0 = req/s, 1 = p50
ratio() { awk -v n="$2" -v d="$3" -v f="$4" '{ print $(2 * n + 1 + f) / $(2 * d + 1 + f) }' "$1"; }
spread() {	# FILE N D -> "median [min–max]" of req/s ratios
	local r
	r=$(ratio "$1" "$2" "$3" 0 | sort -g)
	printf "%.2fx [%.2f–%.2f]" "$(echo "$r" | median)" "$(echo "$r" | head -1)" "$(echo "$r" | tail -1)"
}

if [ "$PROFILE" = 1 ]; then
	coproc STATS { exec "$REF" stats-hold; }
	read -r _ <&"${STATS[0]}" || { echo "cannot enable BPF stats" >&2; exit 1; }
fi
BI=$(idx_of "$BASE")
# Extra columns: ours over each reference.
EXTRA=()
has on && has ref && EXTRA+=("on ref")
has on && has nomesh-ref && EXTRA+=("on nomesh-ref")

hdr="| workload"; sep="|---"
for m in "${modes[@]}"; do hdr="$hdr | $m req/s"; sep="$sep|---"; done
for m in "${modes[@]}"; do
	[ "$m" = "$BASE" ] && continue
	hdr="$hdr | $m/$BASE req/s: median [min–max] | $m/$BASE p50"; sep="$sep|---|---"
done
for e in "${EXTRA[@]}"; do set -- $e; hdr="$hdr | $1/$2 req/s"; sep="$sep|---"; done
echo "$hdr |"; echo "$sep|"
for w in $WORKLOADS; do
	: >"$OUT/$w.rounds"
	for i in $(seq "$PAIRS"); do
		# Rotate the order every round (ON OFF, OFF ON, ... for two modes).
		declare -A q=() p=()
		for k in $(seq 0 $((NM - 1))); do
			m=${modes[$(((k + i - 1) % NM))]}
			read -r q[$m] p[$m] < <(run "$w" "$m" "$i")
		done
		line=
		for m in "${modes[@]}"; do line="$line ${q[$m]} ${p[$m]}"; done
		echo "$line" >>"$OUT/$w.rounds"
		unset q p
	done
	row="| $w"
	for k in "${!modes[@]}"; do
		row="$row | $(awk -v k="$k" '{ print $(2 * k + 1) }' "$OUT/$w.rounds" | median | xargs printf %.0f)"
	done
	for k in "${!modes[@]}"; do
		[ "$k" = "$BI" ] && continue
		row="$row | $(spread "$OUT/$w.rounds" "$k" "$BI") | $(ratio "$OUT/$w.rounds" "$k" "$BI" 1 | median | xargs printf %.2f)"
	done
	for e in "${EXTRA[@]}"; do
		set -- $e
		row="$row | $(spread "$OUT/$w.rounds" "$(idx_of "$1")" "$(idx_of "$2")")"
	done
	echo "$row |"
done
if [ "$PROFILE" = 1 ]; then
	echo
	echo "| workload | mode | program | ns per call (median of runs) | calls per request |"
	echo "|---|---|---|---|---|"
	for w in $WORKLOADS; do
		for m in "${modes[@]}"; do
			cat "$OUT/$w-$m-"[0-9]*.prof 2>/dev/null | awk '{ print $2 }' | sort -u | while read -r prog; do
				ns=$(cat "$OUT/$w-$m-"[0-9]*.prof | awk -v p="$prog" '$2 == p { print $4 / $3 }' | median)
				cpr=$(cat "$OUT/$w-$m-"[0-9]*.prof | awk -v p="$prog" '$2 == p && $5 > 0 { print $3 / $5 }' | median)
				printf "| %s | %s | %s | %.0f | %.2f |\n" "$w" "$m" "$prog" "$ns" "$cpr"
			done
		done
	done
fi
"$REF" off "$PIN"
"$CTL" stats "$PIN" | tr '\n' ' ' | sed 's/^/counters after the run: /'; echo
