#!/usr/bin/env bash
# 61-proxy-capture.t — bpf/l7cap.bpf.c on the real kernel: the sock_ops
# hand-over from the connect4 cookie map to the proxy's client-address map
# (px_capcheck attaches to a cgroup of its own, zhX-l7cap-PID, and removes
# it). The agent's connect4 side is wired later (docs/proxy.md "Capture").
source "$(dirname "$0")/../lib/tap.sh"

TOOL=$(dirname "$ZH")/tests/tools/px_capcheck
[ -x "$TOOL" ] || skip_all "$TOOL missing (make tools)"
[ "$(id -u)" -eq 0 ] || skip_all "needs root (BPF)"
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$CG" ] || skip_all "no cgroup2 mount"

out=$("$TOOL" "$CG" 2>&1); rc=$?
echo "$out" | sed 's/^\(1\.\.[0-9]*\)$/# sub-plan \1/; s/^\(not \)\{0,1\}ok [0-9]* - /  &/' | sed 's/^  /# /'
is "$rc" 0 "px_capcheck: every check passed"
n=$(echo "$out" | grep -c '^ok ')
is "$n" 11 "all 11 capture checks ran"
left=$(ls "$CG" | grep -c "^zhX-l7cap-" || true)
is "$left" 0 "test cgroup removed"
stray=$(ls /sys/fs/bpf 2>/dev/null | grep -c "^zh_" || true)
is "$stray" 0 "nothing pinned at the bpffs root"
done_testing
