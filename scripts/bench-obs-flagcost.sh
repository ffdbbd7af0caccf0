#!/usr/bin/env bash
# bench-obs-flagcost.sh — what the state callbacks alone cost a new
# connection (docs/observability.md, "Cost"): in ONE lab without the
# signals (ZH_AGENT_METRICS=off), zh_obs_stateflag (bpf/obs_opcount.bpf.c:
# asks for the state callbacks obs asks for, does nothing at them) is
# attached to both node cgroups and detached again, alternately, PAIRS
# times; each run is a keep-alive-off bench from a client pod on node-a to
# an echo Service on node-b, and the lab's own CPU (its cgroup: pods,
# agents, proxies) is divided by its connections. One lab, so the pairs
# differ only by the flag: the callbacks' kernel path and the other
# programs' runs at them, which BPF_ENABLE_STATS sees only in part.
#   usage: scripts/bench-obs-flagcost.sh [PAIRS=9] [SECONDS=3]
#   env: ZH (binary), C (connections, 8), ZH_TEST_LAB_SUFFIX
# Not part of make check; docs/BENCHMARKS.md quotes it.

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
PAIRS=${1:-9}
SECS=${2:-3}
C=${C:-8}
source "$ROOT/tests/lib/tap.sh"
source "$ROOT/tests/lib/lab_test.sh"
source "$ROOT/scripts/bench-obs-lib.sh"
OPC=$ROOT/build/bpf/obs_opcount.bpf.o
[ -f "$OPC" ] || { echo "no $OPC (make first)" >&2; exit 1; }
lab_test_setup tobsflag bpftool
PIN=/sys/fs/bpf/zh-flagcost-$LAB
detach() { local cg; for cg in ${CGS:-}; do bpftool cgroup detach "$cg" sock_ops pinned "$PIN/zh_obs_stateflag" 2>/dev/null; done; }
lab_test_more_cleanup() { detach; rm -rf "$PIN"; }
obs_bench_app >"$TMP/app.yaml"
ZH_AGENT_METRICS=off "$ZH" lab up --lab "$LAB" -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; exit 1; }
wait_until 30 lab_exec client python3 -c "import urllib.request as u; u.urlopen('http://10.96.0.90/', timeout=1)" 2>/dev/null ||
	{ echo "Service not answering" >&2; exit 1; }
CGS=$(obs_node_cgroups)
[ -n "$CGS" ] || { echo "no node cgroup with pol_sockops found" >&2; exit 1; }
CGD=$(lab_cgroup_v2)
[ -n "$CGD" ] || { echo "no cgroup of lab $LAB" >&2; exit 1; }
rm -rf "$PIN"
bpftool prog loadall "$OPC" "$PIN" || exit 1
labcpu() { awk '$1 == "usage_usec" { print $2 }' "$CGD/cpu.stat"; }
run() {	# -> "conn/s lab-CPU-us-per-connection"
	local l0 l1
	l0=$(labcpu)
	lab_exec client "$ZH" bench -c "$C" -t "${SECS}s" --keepalive=false --json "$TMP/r.json" http://10.96.0.90/ >/dev/null 2>&1
	l1=$(labcpu)
	jq -r --argjson l $((l1 - l0)) '"\(.ActualQPS) \($l / (.DurationHistogram.Count + 0.001))"' "$TMP/r.json"
}
flag() { local cg; for cg in $CGS; do bpftool cgroup attach "$cg" sock_ops pinned "$PIN/zh_obs_stateflag" multi || exit 1; done; }
: >"$TMP/d"
for i in $(seq "$PAIRS"); do
	if [ $((i % 2)) -eq 1 ]; then
		flag; read qf cf <<<"$(run)"; detach; read qn cn <<<"$(run)"
	else
		read qn cn <<<"$(run)"; flag; read qf cf <<<"$(run)"; detach
	fi
	echo "pair $i: flag $qf conn/s $cf us/conn; none $qn conn/s $cn us/conn (load $(cut -d' ' -f1 /proc/loadavg))"
	awk -v a="$cf" -v b="$cn" 'BEGIN { printf "%.2f %.4f\n", a - b, b / a }' >>"$TMP/d"
done
sort -g "$TMP/d" | awk '{ d[NR] = $1 } END { m = (NR % 2) ? d[(NR + 1) / 2] : (d[NR / 2] + d[NR / 2 + 1]) / 2
	printf "state callbacks alone: median %+.2f us of lab CPU per connection (min %+.2f, max %+.2f), %d pairs\n", m, d[1], d[NR], NR }'
sort -k2 -g "$TMP/d" | awk '{ r[NR] = $2 } END { printf "connections per lab CPU-second, flag / none: median %.3f (min %.3f, max %.3f)\n", (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2, r[1], r[NR] }'
