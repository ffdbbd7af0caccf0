#!/usr/bin/env bash
# bench-obs-bpfcost.sh — where the L4 signals' new-connection cost goes, by
# the kernel's own accounting (docs/observability.md, "Cost"): with
# BPF_ENABLE_STATS held open, every BPF program's run count and run time
# (bpftool prog show) before and after a fixed-length new-connection bench
# (keep-alive off) from a client pod on node-a to an echo Service on
# node-b, divided by the connections made; and, from bpf/obs_opcount.bpf.c
# attached beside the agent's programs on both nodes' cgroups, how many
# sock_ops callbacks of each op and each state transition a connection
# causes (every sock_ops program on the cgroup runs once per callback).
# Also CPU per connection: the lab's own (its cgroup's usage: what a cost is
# a share of), the agents' (they drain the events), the machine's.
# One lab per mode, the agents' metrics on (ZH_AGENT_METRICS=on), then off.
#   usage: scripts/bench-obs-bpfcost.sh [SECONDS=8]
#   env: ZH (binary), MODES ("on off"), C (connections, 8),
#        ZH_TEST_LAB_SUFFIX (lab name suffix)
# bpf_stats adds two clock reads to every run it measures: the ns figures
# are the programs' time plus that; an empty program attached beside them
# (zh_obs_nop) measures it, and "net" takes it off.
# Not part of make check; docs/BENCHMARKS.md quotes it.

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
SECS=${1:-8}
C=${C:-8}
source "$ROOT/tests/lib/tap.sh"
source "$ROOT/tests/lib/lab_test.sh"
source "$ROOT/scripts/bench-obs-lib.sh"
OPC=$ROOT/build/bpf/obs_opcount.bpf.o
[ -f "$OPC" ] || { echo "no $OPC (make first)" >&2; exit 1; }
lab_test_setup tobscost bpftool
PIN=/sys/fs/bpf/zh-opcount-$LAB
lab_test_more_cleanup() {
	local cg
	for cg in ${CGS:-}; do
		bpftool cgroup detach "$cg" sock_ops pinned "$PIN/zh_obs_opcount" 2>/dev/null
		bpftool cgroup detach "$cg" sock_ops pinned "$PIN/zh_obs_nop" 2>/dev/null
	done
	rm -rf "$PIN"
}
obs_bench_app >"$TMP/app.yaml"

# CPU ticks: the agents' (utime + stime), the machine's busy time
agcpu() { local t=0 p n; for n in node-a node-b; do p=$(lab_agent_pid $n); t=$((t + $(awk '{print $14 + $15}' /proc/$p/stat))); done; echo $t; }
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# the lab's own CPU (pods, agents, proxies: cgroup v2 usage), microseconds
labcpu() { awk '$1 == "usage_usec" { print $2 }' "$(lab_cgroup_v2)/cpu.stat"; }
# only this lab's programs (attached to its cgroups): other labs on the
# machine run the same programs at the same time
labprogs() {
	bpftool cgroup tree -j | jq -r --arg l "$LAB" '.[] | select(.cgroup | test("/zerohop-" + $l + "/")) | .programs[].id' | sort -u
}
snap() {
	bpftool prog show -j | jq -r '.[] | "\(.id) \(.name) \(.run_cnt // 0) \(.run_time_ns // 0)"' | sort |
		join - <(labprogs | sort)
}
opsnap() { bpftool map dump pinned "$PIN/obs_opcount" -j | jq -r '.[] | "\(.formatted.key) \(.formatted.value)"' 2>/dev/null; }

# sock_ops op names (BPF_SOCK_OPS_* of <linux/bpf.h>) and TCP states (BPF_TCP_*)
OPS=(VOID TIMEOUT_INIT RWND_INIT TCP_CONNECT ACTIVE_EST PASSIVE_EST NEEDS_ECN BASE_RTT RTO RETRANS STATE TCP_LISTEN RTT PARSE_HDR HDR_OPT_LEN WRITE_HDR)
ST=(- ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING NEW_SYN_RECV)

for mode in ${MODES:-on off}; do
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
	ZH_AGENT_METRICS=$mode "$ZH" lab up --lab "$LAB" -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; exit 1; }
	wait_until 30 lab_exec client python3 -c "import urllib.request as u; u.urlopen('http://10.96.0.90/', timeout=1)" 2>/dev/null ||
		{ echo "Service not answering" >&2; exit 1; }
	# the node cgroups: where the agents attached policy's sock_ops
	CGS=$(obs_node_cgroups)
	[ -n "$CGS" ] || { echo "no node cgroup with pol_sockops found" >&2; exit 1; }
	rm -rf "$PIN"
	bpftool prog loadall "$OPC" "$PIN" pinmaps "$PIN" || exit 1
	for cg in $CGS; do
		bpftool cgroup attach "$cg" sock_ops pinned "$PIN/zh_obs_opcount" multi || exit 1
		bpftool cgroup attach "$cg" sock_ops pinned "$PIN/zh_obs_nop" multi || exit 1
	done
	python3 -c '
import ctypes, time
attr = (ctypes.c_char * 128)()
fd = ctypes.CDLL(None, use_errno=True).syscall(321, 32, attr, 128)
if fd < 0: raise SystemExit("BPF_ENABLE_STATS failed")
time.sleep(3600)' &
	STATS=$!
	BG+=($STATS)
	sleep 1
	snap >"$TMP/s0"; opsnap >"$TMP/o0"; a0=$(agcpu); b0=$(busy); l0=$(labcpu)
	lab_exec client "$ZH" bench -c "$C" -t "${SECS}s" --keepalive=false --json "$TMP/r.json" http://10.96.0.90/ >/dev/null 2>&1
	a1=$(agcpu); b1=$(busy); l1=$(labcpu); snap >"$TMP/s1"; opsnap >"$TMP/o1"
	kill "$STATS"; wait "$STATS" 2>/dev/null
	n=$(jq '.DurationHistogram.Count // .Count // 0' "$TMP/r.json"); qps=$(jq .ActualQPS "$TMP/r.json")
	echo "== metrics $mode: $n connections, $qps conn/s (machine load $(cut -d' ' -f1-3 /proc/loadavg))"
	[ "$n" -gt 0 ] || exit 1
	hz=$(getconf CLK_TCK)
	awk -v a=$((a1 - a0)) -v b=$((b1 - b0)) -v l=$((l1 - l0)) -v n="$n" -v hz="$hz" 'BEGIN {
		printf "CPU per connection: the lab %.1f us (pods, agents, proxies), of it the agents %.1f us; the machine %.1f us (other helpers too)\n", l / n, a * 1e6 / hz / n, b * 1e6 / hz / n }'
	printf '%-22s %9s %8s %9s\n' program runs/conn ns/run ns/conn
	# per program (one line per loaded copy: a node's and the other's);
	# "net" takes the empty program's ns/run (the accounting's own cost)
	# off every run
	join <(awk '{print $1, $2, $3, $4}' "$TMP/s0") <(awk '{print $1, $3, $4}' "$TMP/s1") |
		awk -v n="$n" '{ c = $5 - $3; t = $6 - $4; if (c <= 0) next
			if ($2 == "zh_obs_nop") { nc += c; nt += t; next }
			if ($2 == "zh_obs_opcount") next
			P[++k] = $2; C[k] = c; T[k] = t; RC += c; RT += t }
			END { f = nc ? nt / nc : 0
			for (i = 1; i <= k; i++) printf "%-22s %9.2f %8.0f %9.0f\n", P[i], C[i]/n, T[i]/C[i], T[i]/n
			printf "%-22s %9.2f %8.0f %9.0f\n", "TOTAL", RC/n, RT/RC, RT/n
			printf "empty program: %.0f ns/run (the accounting); TOTAL net of it: %.0f ns/conn\n", f, (RT - f * RC) / n }'
	echo "sock_ops callbacks per connection (both ends, both nodes):"
	join <(sort "$TMP/o0") <(sort "$TMP/o1") | awk -v n="$n" -v ops="${OPS[*]}" -v st="${ST[*]}" '
		BEGIN { split(ops, O, " "); split(st, S, " ") }
		{ d = $3 - $2; if (d <= 0) next
		  if ($1 < 32) name = O[$1 + 1]; else { k = $1 - 32; name = "STATE " S[int(k / 16) + 1] "->" S[k % 16 + 1] }
		  printf "  %-28s %6.2f\n", name, d / n; T += d }
		END { printf "  %-28s %6.2f\n", "TOTAL", T / n }'
	lab_test_more_cleanup
	CGS=
done
