#!/usr/bin/env bash
# 54-netpol-revoke.t — revocation in the lab: an established TCP connection
# that a policy change denies stops passing traffic (docs/policy.md), both
# across nodes (cgroup_skb re-judges it on the next packet) and between two
# pods of one node whose sockets the accelerator short-circuits (sk_msg must
# fall back to the stack when the policy generation moves: the agent passes
# the generation to ag_accel_set_policy_gen).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
netpol_lab_setup t54 netpol_hold
np_pods_client_near_far >"$TMP/app.yaml"
"$ZH" lab up --lab $LAB --accel on -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up with the same-node accelerator on"
np_servers_from_client 80 >"$TMP/np80.yaml"
np_apply_sync "$TMP/np80.yaml"
ok $? "policy admitting client -> servers:80 synced by both agents"
np_hold_near_far 5
sleep 1.5
grep -q " ok" "$TMP/near.out" && grep -q " ok" "$TMP/far.out"
ok $? "both connections echo before the change"
"$ZH" get stats --lab $LAB -o json >"$TMP/stats.json" 2>/dev/null
MSGS=$(jq -r '."node-a".accel_msgs // 0' "$TMP/stats.json" 2>/dev/null)
ok $([ "${MSGS:-0}" -gt 0 ]; echo $?) "the same-node connection is short-circuited (node-a accel_msgs $MSGS)"
np_servers_from_client 81 >"$TMP/np81.yaml"
PG0=$(jq -r '."node-a".policy_generation' "$TMP/stats.json")
np_apply_sync "$TMP/np81.yaml"
ok $? "policy changed: port 80 no longer admitted"
PG1=$("$ZH" get stats --lab $LAB -o json | jq -r '."node-a".policy_generation')
ok $([ "${PG1:-0}" -gt "${PG0:-0}" ]; echo $?) "node-a's policy generation moved ($PG0 -> $PG1; the agent tells the accelerator)"
wait
BG=()
# after the change (last 2 s of 5): no echo may come back
np_revoked_ok "after the change"
"$ZH" get policy-drops --lab $LAB >"$TMP/drops-node-all.txt" 2>&1
grep -qh "default/servers-from-client *revoked" "$TMP"/drops-node-*.txt
ok $? "drops counted as revoked, charged to default/servers-from-client"
sed 's/^/# /' "$TMP"/drops-node-*.txt
done_testing
