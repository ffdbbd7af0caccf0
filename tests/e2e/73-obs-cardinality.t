#!/usr/bin/env bash
# 73-obs-cardinality.t — the agent's label sets are capped (lab t73, 1 node
# in use): with ZH_AGENT_METRICS_MAX_SERIES=1000 (the lab passes its
# environment to the agents), a pod makes 10,000 connections to 10,000
# distinct peers (127.0.x.y: refused at once, so each is a failed
# connection with its own destination label). The agent must hold exactly
# 1000 label sets, count the rest in the "overflow" set and in
# zerohop_obs_series_overflow_total (no event unaccounted for), and its
# memory must not grow past the documented bound (docs/observability.md:
# the tables are allocated once, at start).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t73 curl

m_pod client node-a "app: client" "$(m_ctr shell "" sleep infinity)" >"$TMP/m.yaml"
ZH_AGENT_METRICS_MAX_SERIES=1000 "$ZH" lab up --lab $LAB -f "$TMP/m.yaml" >"$TMP/up.out" 2>&1
rc=$?
ok $rc "lab $LAB up, agents capped at 1000 label sets"
[ $rc -eq 0 ] || { sed 's/^/# /' "$TMP/up.out"; done_testing; }
wait_until 10 lab_running 2
SOCK=/run/zerohop/$LAB/nodes/node-a/agent.sock
metric() { curl -s --unix-socket "$SOCK" http://agent/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
APID=$(lab_agent_pid node-a)
rss() { awk '/^VmRSS/ { print $2 }' /proc/$APID/status; }
rss0=$(rss)
is "$(metric zerohop_obs_series_limit)" 1000 "zerohop_obs_series_limit = 1000"

cat >"$TMP/many.py" <<'PY'
import socket
refused = 0
for i in range(10000):
    s = socket.socket()
    try:
        s.connect(("127.1.%d.%d" % (i // 250, 1 + i % 250), 9))
    except ConnectionRefusedError:
        refused += 1
    s.close()
print(refused)
PY
t0=$(date +%s.%N)
is "$(lab_exec client "$PY" "$TMP/many.py")" 10000 "10,000 connections to distinct loopback peers, all refused"
diag "took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
failed_sum() {
	curl -s --unix-socket "$SOCK" http://agent/metrics |
		awk '/^zerohop_tcp_connections_failed_total/ { s += $2 } END { print s + 0 }'
}
lost() { metric zerohop_obs_events_lost_total; }
settled() { [ $(( $(failed_sum) + $(lost) )) -ge 10000 ]; }
wait_until 10 settled
is "$(( $(failed_sum) + $(lost) ))" 10000 "every connection counted: failed ($(failed_sum)) + events lost ($(lost))"
is "$(metric 'zerohop_obs_series{table="tcp"}')" 1000 "exactly 1000 label sets held"
ov=$(metric zerohop_obs_series_overflow_total)
ok $([ "$ov" -ge $((10000 - 1000 - $(lost))) ]; echo $?) "the rest went to the overflow set: overflow_total = $ov"
curl -s --unix-socket "$SOCK" http://agent/metrics | grep -q '^zerohop_tcp_connections_failed_total{reporter="source",source_workload="overflow"'
ok $? "the overflow set is exported (its counts keep totals right)"
rss1=$(rss)
# docs/observability.md: ~5 KB per label set of the cap (tables: 2 slots
# of 832 + 528 bytes; one /metrics rendering ~2.3 KB) plus 1 MB of flow
# ring: 6 MB for 1000 sets
grow=$((rss1 - rss0)); diag "rss0 $rss0 rss1 $rss1"
ok $([ "$grow" -lt 6144 ]; echo $?) "agent RSS grew by $grow KiB (< 6144 KiB bound for 1000 sets)"
done_testing
