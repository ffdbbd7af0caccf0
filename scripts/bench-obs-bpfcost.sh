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
# One lab per mode, the agents' metrics on (ZH_AGENT_METRICS=on), then off.
#   usage: scripts/bench-obs-bpfcost.sh [SECONDS=8]
#   env: ZH (binary), MODES ("on off"), C (connections, 8),
#        ZH_TEST_LAB_SUFFIX (lab name suffix)
# bpf_stats adds two clock reads to every run it measures: the ns figures
# are the programs' time plus that, the same for every program and mode.
# Not part of make check; docs/BENCHMARKS.md quotes it.

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
SECS=${1:-8}
C=${C:-8}
source "$ROOT/tests/lib/tap.sh"
source "$ROOT/tests/lib/lab_test.sh"
OPC=$ROOT/build/bpf/obs_opcount.bpf.o
[ -f "$OPC" ] || { echo "no $OPC (make first)" >&2; exit 1; }
lab_test_setup tobscost bpftool
PIN=/sys/fs/bpf/zh-opcount-$LAB
lab_test_more_cleanup() {
	local cg
	for cg in ${CGS:-}; do bpftool cgroup detach "$cg" sock_ops pinned "$PIN/zh_obs_opcount" 2>/dev/null; done
	rm -rf "$PIN"
}
{
	m_deploy far node-b "app: far" "$(m_ctr echo "http:8080" "$ZH" echo --http 8080 --tcp 0 --udp 0)"
	m_svc far "app: far" "http=80:8080" 10.96.0.90
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"

snap() { bpftool prog show -j | jq -r '.[] | "\(.id) \(.name) \(.run_cnt // 0) \(.run_time_ns // 0)"' | sort; }
opsnap() { bpftool map dump pinned "$PIN/opcount" -j | jq -r '.[] | "\(.formatted.key) \(.formatted.value)"' 2>/dev/null; }

# sock_ops op names (include/uapi/linux/bpf.h) and TCP states (BPF_TCP_*)
OPS=(VOID TIMEOUT_INIT RWND_INIT TCP_CONNECT ACTIVE_EST PASSIVE_EST NEEDS_ECN BASE_RTT RTO RETRANS STATE TCP_LISTEN RTT PARSE_HDR HDR_OPT_LEN WRITE_HDR)
ST=(- ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING NEW_SYN_RECV)

for mode in ${MODES:-on off}; do
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
	ZH_AGENT_METRICS=$mode "$ZH" lab up --lab "$LAB" -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; exit 1; }
	wait_until 30 lab_exec client python3 -c "import urllib.request as u; u.urlopen('http://10.96.0.90/', timeout=1)" 2>/dev/null ||
		{ echo "Service not answering" >&2; exit 1; }
	# the node cgroups: where the agents attached policy's sock_ops
	CGS=$(bpftool cgroup tree -j | jq -r --arg l "$LAB" '.[] | select(.cgroup | test("/zerohop-" + $l + "/")) | select(any(.programs[]; .name == "pol_sockops")) | .cgroup' | sort -u)
	[ -n "$CGS" ] || { echo "no node cgroup with pol_sockops found" >&2; exit 1; }
	rm -rf "$PIN"
	bpftool prog loadall "$OPC" "$PIN" pinmaps "$PIN" || exit 1
	for cg in $CGS; do bpftool cgroup attach "$cg" sock_ops pinned "$PIN/zh_obs_opcount" multi || exit 1; done
	python3 -c '
import ctypes, time
attr = (ctypes.c_char * 128)()
fd = ctypes.CDLL(None, use_errno=True).syscall(321, 32, attr, 128)
if fd < 0: raise SystemExit("BPF_ENABLE_STATS failed")
time.sleep(3600)' &
	STATS=$!
	BG+=($STATS)
	sleep 1
	snap >"$TMP/s0"; opsnap >"$TMP/o0"
	lab_exec client "$ZH" bench -c "$C" -t "${SECS}s" --keepalive=false --json "$TMP/r.json" http://10.96.0.90/ >/dev/null 2>&1
	snap >"$TMP/s1"; opsnap >"$TMP/o1"
	kill "$STATS"; wait "$STATS" 2>/dev/null
	n=$(jq '.DurationHistogram.Count // .Count // 0' "$TMP/r.json"); qps=$(jq .ActualQPS "$TMP/r.json")
	echo "== metrics $mode: $n connections, $qps conn/s (machine load $(cut -d' ' -f1-3 /proc/loadavg))"
	[ "$n" -gt 0 ] || exit 1
	printf '%-22s %9s %8s %9s\n' program runs/conn ns/run ns/conn
	join <(awk '{print $1, $2, $3, $4}' "$TMP/s0") <(awk '{print $1, $3, $4}' "$TMP/s1") |
		awk -v n="$n" '$2 != "zh_obs_opcount" { c = $5 - $3; t = $6 - $4; if (c > 0) { printf "%-22s %9.2f %8.0f %9.0f\n", $2, c/n, t/c, t/n; T += t } }
			END { printf "%-22s %9s %8s %9.0f\n", "TOTAL", "", "", T/n }'
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
