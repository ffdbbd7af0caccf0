#!/usr/bin/env bash
# 56-netpol-restart.t — an agent restart costs no acceleration and no verdict
# (docs/policy.md "Restart"): with a policy in force and live connections, one
# same-node connection short-circuited by the accelerator and one cross-node,
# both nodes' agents are killed by PID and the lab restarts them. The
# restarted agents adopt the pinned policy tables and generation; their first
# sync of the unchanged state must not move the generation, so the same-node
# socket stays short-circuited (accel_msgs keeps growing) and both connections
# keep echoing. Then a real policy change still moves the generation and
# revokes both connections (the restarted agent's diff of the adopted slot).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
netpol_lab_setup t56 netpol_hold
np_pods_client_near_far >"$TMP/app.yaml"
stats() { "$ZH" get stats --lab $LAB -o json 2>/dev/null; }
now_ms() { date +%s%3N; }
# hold-output lines (T_MS STATUS) with T_MS in [FROM, TO) and STATUS
count() { awk -v a="$2" -v b="$3" -v s="$4" '$1 >= a && $1 < b && $2 == s' "$1" | wc -l; }

"$ZH" lab up --lab $LAB --accel on -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up with the same-node accelerator on"
np_servers_from_client 80 >"$TMP/np80.yaml"
np_apply_sync "$TMP/np80.yaml"
ok $? "policy admitting client -> servers:80 synced by both agents"
T0=$(now_ms)
np_hold_near_far 12
sleep 1.5
grep -q " ok" "$TMP/near.out" && grep -q " ok" "$TMP/far.out"
ok $? "both connections echo before the restart"
stats >"$TMP/s0.json"
PGA=$(jq -r '."node-a".policy_generation' "$TMP/s0.json")
PGB=$(jq -r '."node-b".policy_generation' "$TMP/s0.json")
M0=$(jq -r '."node-a".accel_msgs // 0' "$TMP/s0.json")
ok $([ "${M0:-0}" -gt 0 ]; echo $?) "the same-node connection is short-circuited (node-a accel_msgs $M0)"

# ---- restart both agents (SIGKILL by PID: no clean shutdown either) ----------
RESTARTED=0
for node in node-a node-b; do
	p=$(lab_agent_pid $node)
	s0=$(jq -r ".\"$node\".syncs" "$TMP/s0.json")
	[ -n "$p" ] && [ "$p" -gt 0 ] && kill -KILL "$p" || continue
	synced_since() { [ "$(stats | jq -r ".\"$node\".syncs")" -gt "${s0:-0}" ] 2>/dev/null; }
	restarted() { lab_agent_replaced $node "$p" && synced_since; }
	# new agent up and past its first sync
	WAIT_STEP=0.05 wait_until 10 restarted && RESTARTED=$((RESTARTED + 1))
done
is "$RESTARTED" 2 "both agents killed by PID, restarted by the lab and synced again"
T1=$(( $(now_ms) - T0 ))
stats >"$TMP/s1.json"
is "$(jq -r '."node-a".policy_generation' "$TMP/s1.json")" "$PGA" \
	"node-a's policy generation unchanged by the restart ($PGA)"
is "$(jq -r '."node-b".policy_generation' "$TMP/s1.json")" "$PGB" \
	"node-b's policy generation unchanged by the restart ($PGB)"
M1=$(jq -r '."node-a".accel_msgs // 0' "$TMP/s1.json")
sleep 2
M2=$(stats | jq -r '."node-a".accel_msgs // 0')
# 10 pings/s, each redirected twice (request, echo): 2 s give about 40
ok $([ $((M2 - M1)) -ge 20 ]; echo $?) \
	"the same-node socket is still short-circuited after the restart (accel_msgs +$((M2 - M1)) in 2 s)"
T2=$(( $(now_ms) - T0 ))
for c in near far; do
	n=$(count "$TMP/$c.out" "$T1" "$T2" ok)
	l=$(count "$TMP/$c.out" 0 "$T2" lost)
	# (a ping waits 100 ms for its echo: allow a few late ones on a busy machine)
	ok $([ "$n" -ge 10 ] && [ "$l" -le 5 ]; echo $?) \
		"$c connection keeps working across the restart ($n echoes after it, $l lost in all)"
done

# ---- a real change after the restart still moves the generation and revokes --
np_servers_from_client 81 >"$TMP/np81.yaml"
np_apply_sync "$TMP/np81.yaml"
ok $? "policy changed (port 80 no longer admitted), synced by the restarted agents"
T3=$(( $(now_ms) - T0 + 300 ))
stats >"$TMP/s3.json"
PGA3=$(jq -r '."node-a".policy_generation' "$TMP/s3.json")
ok $([ "${PGA3:-0}" -gt "${PGA:-0}" ]; echo $?) "node-a's policy generation moved ($PGA -> $PGA3)"
wait
BG=()
for c in near far; do
	is "$(count "$TMP/$c.out" "$T3" 999999 ok)" 0 "$c connection revoked after the change"
	ok $([ "$(count "$TMP/$c.out" "$T3" 999999 lost)" -gt 5 ]; echo $?) \
		"  ($(count "$TMP/$c.out" "$T3" 999999 lost) pings lost after it)"
done
grep -h "policy" /run/zerohop/$LAB/nodes/node-*/agent.log 2>/dev/null | tail -6 | sed 's/^/# /'
done_testing
