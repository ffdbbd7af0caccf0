#!/usr/bin/env bash
# bench-accel-fin.sh — what the half-close FIN hold (zh_accel_fin, a
# cgroup_skb ingress program on the node cgroup: bpf/accel.bpf.c invariant
# 11) costs every ingress packet of the node's pods. The kernel's own
# per-program counters (BPF_ENABLE_STATS, run_cnt/run_time_ns) time it next
# to an empty cgroup_skb program ("return 1") attached to the same cgroup,
# over the same packets: cross-node HTTP keep-alive load (every packet takes
# the TCP path, so both programs run on each), then same-node (short-
# circuited: only handshakes and FINs reach them). The difference of the
# means is the program's own cost; both include the counters' overhead.
# Usage: scripts/bench-accel-fin.sh [SECS=8]
# Lab: 2 nodes (ZH_TEST_LAB_SUFFIX picks the name), removed at exit.
set -u
SECS=${1:-8}
cd "$(dirname "$0")/.."
source tests/lib/tap.sh
source tests/lib/lab_test.sh
lab_test_setup tfin
{
	m_pod srv node-b "app: srv" "$(m_ctr e "http:8080" "$ZH" echo --tcp 0 --http 8080 --udp 0)"
	m_pod srv2 node-a "app: srv2" "$(m_ctr e "http:8080" "$ZH" echo --tcp 0 --http 8080 --udp 0)"
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
"$ZH" lab up --lab $LAB --accel on -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; exit 1; }
far=$(lab_pod_ip srv) near=$(lab_pod_ip srv2)

# The empty program, built and attached (multi) to node-a's cgroup next to ours.
cat >"$TMP/nop.bpf.c" <<'C'
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
char LICENSE[] SEC("license") = "GPL";
SEC("cgroup_skb/ingress")
int zh_nop_ingress(struct __sk_buff *skb) { return 1; }
C
clang -O2 -g -target bpf -I/usr/include/"$(gcc -dumpmachine)" -c "$TMP/nop.bpf.c" -o "$TMP/nop.o" || exit 1
PIN=/sys/fs/bpf/zerohop/$LAB/nop_ingress
LINKPIN=/sys/fs/bpf/zerohop/$LAB/node-a/accel_fin_link	# the agent pins its links there
FINID=$(bpftool link show pinned "$LINKPIN" -j | jq -r .prog_id)
CG=$(bpftool cgroup tree | awk -v id="$FINID" '/^\// { cg = $1 } ($1 == id || $2 == id) && cg ~ /\/node-a$/ { print cg; exit }')
[ -d "$CG" ] || { echo "node-a cgroup not found (accel_fin_link prog $FINID)" >&2; exit 1; }
bpftool prog load "$TMP/nop.o" "$PIN" type cgroup/skb || exit 1
bpftool cgroup attach "$CG" ingress pinned "$PIN" multi || exit 1
lab_test_more_cleanup() { bpftool cgroup detach "$CG" ingress pinned "$PIN" 2>/dev/null; rm -f "$PIN"; }

# Kernel program statistics on while this process holds the fd.
python3 -c '
import ctypes, sys, time
attr = (ctypes.c_char * 128)()	# BPF_ENABLE_STATS (32), type BPF_STATS_RUN_TIME (0)
fd = ctypes.CDLL(None, use_errno=True).syscall(321, 32, attr, 128)
sys.exit(1) if fd < 0 else time.sleep(int(sys.argv[1]))' $((2 * SECS + 20)) &
BG+=($!)
sleep 1
# run_cnt and run_time_ns of the program(s) of that name attached to node-a's cgroup
pst() {
	local id
	id=$(bpftool cgroup show "$CG" -j | jq -r --arg n "$1" '.[] | select(.name == $n) | .id' | head -1)
	bpftool prog show id "$id" -j | jq -r '"\(.run_cnt // 0) \(.run_time_ns // 0)"'
}
printf '%-11s %12s %10s %12s %10s %10s\n' load rps fin_runs fin_ns nop_ns diff_ns
for w in "cross-node $far" "same-node $near"; do
	set -- $w
	read c0 t0 <<<"$(pst zh_accel_fin)"; read n0 u0 <<<"$(pst zh_nop_ingress)"
	rps=$(lab_exec cli "$ZH" bench -c 4 -t "${SECS}s" "http://$2:8080/" 2>&1 | awk '/Requests\/sec/ { print $2 }')
	read c1 t1 <<<"$(pst zh_accel_fin)"; read n1 u1 <<<"$(pst zh_nop_ingress)"
	fc=$((c1 - c0)) nc=$((n1 - n0))
	fm=$(( fc ? (t1 - t0) / fc : 0 )) nm=$(( nc ? (u1 - u0) / nc : 0 ))
	printf '%-11s %12s %10s %12s %10s %10s\n' "$1" "$rps" "$fc" "$fm" "$nm" "$((fm - nm))"
done
