#!/usr/bin/env bash
# bench-kinvolk.sh — zerohop against a sidecar mesh, measured the way Kinvolk
# measured Istio and Linkerd (docs/sidecar-baseline.md "The Kinvolk method"):
# constant-rate load (`zerohop bench -qps`, open loop, latency from the
# intended send time: coordinated omission corrected, as wrk2) at several
# rates scaled to this machine (percentages of the bare maximum), several
# repetitions, contenders interleaved, p50..p99.99 and max, plus CPU seconds
# and memory of every mesh component per 1,000 requests.
#
# Contenders (each in its own lab, all labs up at once, same topology:
# client pod on node-a, one echo pod on node-b, 1 KiB responses, keep-alive):
#   bare           --no-mesh, the client asks the echo pod's IP
#   sidecar        --mesh sidecar: HAProxy sidecars in both pods (istio-init's
#                  capture), the client asks ClusterIP 10.96.0.80
#   sidecar-accel  the same with --accel on: Merbridge's BPF capture, and the
#                  short-circuit on each pod's app<->sidecar loopback leg (the
#                  hop between the sidecars is cross-node here, so it stays
#                  on the wire: docs/sidecar-baseline.md)
#   l4             zerohop, ClusterIP 10.96.0.80 (connect-time BPF)
#   l7             zerohop, ClusterIP 10.96.0.81, a Service annotated
#                  zerohop.io/l7: every request through the node L7 proxy
# Mesh components measured: sidecar* = every HAProxy in the lab's pod
# cgroups; l4/l7 = the node agents and node proxies (kernel time spent in
# BPF programs is charged to the applications' own syscalls and is not in
# these figures); bare = none.
#
# Usage: scripts/bench-kinvolk.sh [REPS=3] [DUR=10s] [RATES="25 50 75"]
# Environment: REF (bare | slowest: what the rates are percentages of,
# Phase 1 below), CONTENDERS ("bare sidecar l4 l7"; the first is the baseline
# of the "latency added" lines), CONNS (16), SIZE (1024), WARMUP (2s),
# MAXQPS (skip the max-rate phase and use this bare maximum), OUT (results
# dir; default a new /tmp/zh-kinvolk.XXXXXX, kept), LAB (KV; labs
# LAB-bare, LAB-sc, LAB-sca, LAB-zh plus $ZH_TEST_LAB_SUFFIX), B (build),
# ZH (the zerohop binary; default $B/zerohop).
# Output in OUT: runs.jsonl (one line per run), kinvolk.json (summary +
# runs), RATE.html per rate (`zerohop bench report`: percentile spectra of
# every contender overlaid, the median-p99 run of each), run JSONs, table.txt.
# A run is rejected (kept, flagged, left out of the medians unless every run
# of that cell was) when it had errors or reached < 99 % of the asked rate.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
ZH=${ZH:-$ROOT/$B/zerohop}
KV="/usr/bin/python3 $ROOT/scripts/lib/kinvolk.py"
REPS=${1:-3}
DUR=${2:-10s}
RATES=${3:-25 50 75}
CONTENDERS=${CONTENDERS:-bare sidecar l4 l7}
CONNS=${CONNS:-16}
REF=${REF:-bare}
SIZE=${SIZE:-1024}
WARMUP=${WARMUP:-2s}
L=${LAB:-KV}${ZH_TEST_LAB_SUFFIX:-}
OUT=${OUT:-$(mktemp -d /tmp/zh-kinvolk.XXXXXX)}
mkdir -p "$OUT" && chmod 755 "$OUT" && : >"$OUT/table.txt"
for t in jq haproxy /usr/bin/python3 "$ZH"; do
	command -v "$t" >/dev/null || { echo "missing $t (make deps; make)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "needs root (labs)" >&2; exit 1; }

# 1500ms, 2s or a bare number of seconds (integers) -> ms
dur_ms() { case "$1" in *ms) echo "${1%ms}" ;; *s) echo $((${1%s} * 1000)) ;; *) echo $(($1 * 1000)) ;; esac; }
lab_of() { case "$1" in bare) echo $L-bare ;; sidecar) echo $L-sc ;; sidecar-accel) echo $L-sca ;; l4|l7) echo $L-zh ;; *) return 1 ;; esac; }
kind_of() { case "$1" in bare) echo none ;; sidecar*) echo sidecar ;; *) echo zerohop ;; esac; }
LABS=()
for c in $CONTENDERS; do
	l=$(lab_of "$c") || { echo "unknown contender '$c' (bare sidecar sidecar-accel l4 l7)" >&2; exit 2; }
	case " ${LABS[*]:-} " in *" $l "*) ;; *) LABS+=("$l") ;; esac
done
cleanup() { for l in "${LABS[@]}"; do "$ZH" lab down --lab "$l" >/dev/null 2>&1; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# web7: the annotation alone sends every request through the node proxy
# (docs/proxy.md "Capture").
cat >"$OUT/m.yaml" <<YAML
{apiVersion: v1, kind: Pod, metadata: {name: echo, labels: {app: web}}, spec: {nodeName: node-b,
  containers: [{name: e, command: ["$ZH", echo, --http, "8080", --tcp, "127.0.0.1:0", --udp, "127.0.0.1:0"],
                ports: [{name: http, containerPort: 8080}]}]}}
---
{apiVersion: v1, kind: Pod, metadata: {name: client}, spec: {nodeName: node-a, containers: [{name: c, command: [sleep, "100000"]}]}}
---
{apiVersion: v1, kind: Service, metadata: {name: web},
 spec: {clusterIP: 10.96.0.80, selector: {app: web}, ports: [{name: http, port: 80, targetPort: http}]}}
---
{apiVersion: v1, kind: Service, metadata: {name: web7, annotations: {zerohop.io/l7: "true"}},
 spec: {clusterIP: 10.96.0.81, selector: {app: web}, ports: [{name: http, port: 80, targetPort: http}]}}
YAML
for l in "${LABS[@]}"; do
	case "$l" in
	*-bare) flags=(--no-mesh) ;;
	*-sc) flags=(--mesh sidecar) ;;
	*-sca) flags=(--mesh sidecar --accel on) ;;
	*) flags=() ;;
	esac
	"$ZH" lab down --lab "$l" >/dev/null 2>&1
	"$ZH" lab up --lab "$l" "${flags[@]}" -f "$OUT/m.yaml" >"$OUT/up-$l.log" 2>&1 ||
		{ cat "$OUT/up-$l.log"; exit 1; }
done
url_of() {
	local c=$1 ip
	case "$c" in
	bare) ip=$("$ZH" lab status --lab "$(lab_of bare)" -o json | jq -r '.pods[] | select(.name=="echo") | .ip')
	      echo "http://$ip:8080/?size=$SIZE" ;;
	l7) echo "http://10.96.0.81/?size=$SIZE" ;;
	*) echo "http://10.96.0.80/?size=$SIZE" ;;
	esac
}
# Every contender answers before anything is measured.
for c in $CONTENDERS; do
	u=$(url_of "$c")
	for _ in $(seq 50); do
		"$ZH" lab exec --lab "$(lab_of "$c")" client -- curl -sf -o /dev/null "$u" && break
		sleep 0.2
	done || { echo "$c: $u does not answer" >&2; exit 1; }
done

# Phase 1: the reference maximum (closed loop) the rates are scaled to:
# REF=bare (default, the issue's "bare maximum": the first contender's) or
# REF=slowest (the lowest maximum of all contenders: every contender can
# hold every rate, as Kinvolk chose 500 RPS; at a share of the bare
# maximum a sidecar mesh may be saturated and its latency is queueing).
first=${CONTENDERS%% *}
[ -n "${MAXQPS:-}" ] && REF=given
if [ -z "${MAXQPS:-}" ]; then
	for c in $CONTENDERS; do
		[ "$REF" = slowest ] || [ "$c" = "$first" ] || continue
		"$ZH" lab exec --lab "$(lab_of "$c")" client -- "$ZH" bench -c "$CONNS" -t "$DUR" \
			--warmup "$WARMUP" --quiet --json "$OUT/max-$c.json" "$(url_of "$c")" >/dev/null 2>&1
		m=$(jq -r '.ActualQPS | floor' "$OUT/max-$c.json" 2>/dev/null)
		[ -n "$m" ] && [ "$m" -gt 0 ] || { echo "max-rate run of $c failed" >&2; exit 1; }
		echo "maximum of $c (closed loop, $CONNS connections): $m req/s" | tee -a "$OUT/table.txt"
		[ -z "${MAXQPS:-}" ] || [ "$m" -lt "$MAXQPS" ] && MAXQPS=$m
	done
fi
echo "reference maximum (REF=$REF): $MAXQPS req/s" | tee -a "$OUT/table.txt"

# Phase 2: constant rates, contenders interleaved (the order rotates).
: >"$OUT/runs.jsonl"
set -- $CONTENDERS
n=$#
for rep in $(seq "$REPS"); do
	for pct in $RATES; do
		qps=$((MAXQPS * pct / 100))
		for k in $(seq 0 $((n - 1))); do
			i=$(( (k + rep - 1) % n + 1 ))
			c=${!i}
			lab=$(lab_of "$c")
			j="$OUT/run-$c-$pct-$rep.json"
			u0=$($KV usage "$lab" "$(kind_of "$c")")
			"$ZH" lab exec --lab "$lab" client -- "$ZH" bench -qps "$qps" -c "$CONNS" \
				-t "$DUR" --warmup "$WARMUP" --spin 0 --quiet --json "$j" "$(url_of "$c")" \
				>"$OUT/run-$c-$pct-$rep.txt" 2>&1
			u1=$($KV usage "$lab" "$(kind_of "$c")")
			[ -s "$j" ] || { echo "run $c $pct% rep $rep: no JSON" >&2; cat "$OUT/run-$c-$pct-$rep.txt" >&2; exit 1; }
			# Requests during warm-up + measured phase all cost CPU.
			all=$((qps * ($(dur_ms "$WARMUP") + $(dur_ms "$DUR")) / 1000))
			pods=$("$ZH" lab status --lab "$lab" -o json | jq '[.pods[] | select(.namespace != "kube-system")] | length')
			jq -c -n --arg c "$c" --argjson pct "$pct" --argjson qps "$qps" --argjson rep "$rep" \
				--arg json "$j" --argjson u0 "$u0" --argjson u1 "$u1" --argjson all "$all" \
				--argjson pods "$pods" --slurpfile b "$j" '
				$b[0] as $b |
				{contender: $c, rate_pct: $pct, qps: $qps, rep: $rep, json: $json,
				 requests_all: $all,
				 cpu_s: ($u1.cpu_s - $u0.cpu_s),
				 cpu_s_per_1k: (if $all > 0 then ($u1.cpu_s - $u0.cpu_s) / $all * 1000 else 0 end),
				 mem_pss_kib: $u1.pss_kib, mem_hwm_kib: $u1.rss_hwm_kib, mesh_procs: $u1.procs,
				 mem_kib_per_pod: (if $c == "bare" then 0
				                   elif $u1.pods > 0 then $u1.pss_kib / $u1.pods
				                   else $u1.pss_kib / $pods end),
				 rejected: (([$b.Errors[]] | add) > 0 or $b.ActualQPS < 0.99 * $qps),
				 bench: $b}' >>"$OUT/runs.jsonl"
		done
	done
done

# Phase 3: table, JSON, one HTML per rate (spectra overlaid).
$KV summarize "$OUT" "$REF=$MAXQPS req/s" | tee -a "$OUT/table.txt"
for pct in $RATES; do
	files=() labels=()
	for c in $CONTENDERS; do
		f=$(jq -r --arg c "$c" --argjson p "$pct" \
			'.summary[] | select(.contender == $c and .rate_pct == $p) | .median_run' "$OUT/kinvolk.json")
		[ -n "$f" ] && files+=("$f") && labels+=("$c")
	done
	"$ZH" bench report "${files[@]}" --labels "$(IFS=,; echo "${labels[*]}")" \
		--title "Kinvolk method: $pct % of the reference maximum ($REF) ($((MAXQPS * pct / 100)) req/s), median-p99 run of $REPS" \
		--html "$OUT/$pct.html" >/dev/null || { echo "bench report failed for $pct %" >&2; exit 1; }
done
echo "results: $OUT (table.txt, kinvolk.json, runs.jsonl, $(echo $RATES | sed 's/\([0-9]*\)/\1.html/g'))"
