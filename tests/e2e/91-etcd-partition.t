#!/usr/bin/env bash
# 91-etcd-partition.t — the data plane outlives the store
# (docs/state-etcd.md, "Failure behaviour"): node 2's agent is cut off from
# every etcd member (blackhole routes inside its namespace); a Service
# change converges on node 1 while node 2 keeps serving its last state and
# reports itself degraded; etcd compacts past node 2's revision during the
# partition; after the heal node 2 relists and catches up within seconds.
# Then every etcd member is stopped and every agent restarted: traffic
# keeps flowing from the pinned maps, the agents wait, and sync (and follow
# new changes) when etcd returns.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/etcd_test.sh"
et_setup t91 3 2

{ et_svc "app: web, ver: a"; et_podm 1 2 a; et_podm 2 2 b; } >"$TMP/m.yaml"
ZHE apply -f "$TMP/m.yaml" >/dev/null
ok $? "apply through etcd"
et_echo 1 2
et_echo 2 2
# each agent's /metrics on its node namespace's loopback
ET_AGENT_ARGS="--metrics-addr 127.0.0.1:9464"
for n in 1 2; do et_agent_start $n; done
metric() { et_run "$1" curl -s -m 2 http://127.0.0.1:9464/metrics | awk -v m="$2" '$1 == m {print $2}'; }
metric_is() { [ "$(metric "$1" "$2")" = "$3" ]; }
in_sync() { [ "$(et_health "$1")" = ready ] && [ "$(et_gen "$1")" = "$(et_rev)" ]; }
wait_until 15 in_sync 1 && wait_until 5 in_sync 2
ok $? "both agents ready at revision $(et_rev)"
wait_until 5 who_is 2 web-1-2
is "$(et_who 2)" web-1-2 "node 2 reaches web-1-2 through the ClusterIP"
wait_until 3 metric_is 2 zerohop_state_degraded 0
ok $? "metrics: node 2 zerohop_state_degraded 0 while in sync"
ts_before=$(metric 2 zerohop_state_last_sync_timestamp_seconds)
[ "$(echo "${ts_before:-0} > 0" | bc)" = 1 ]
ok $? "metrics: node 2 zerohop_state_last_sync_timestamp_seconds $ts_before"

# ---- partition node 2 from etcd
et_cut 2
wait_until 6 health_is 2 degraded
is "$(et_health 2)" degraded "node 2 cut off from etcd reports degraded ($(awk '$1 == "error"' "$TMP/agent2.health" | cut -c1-90))"
gen_cut=$(et_gen 2)
wait_until 3 metric_is 2 zerohop_state_degraded 1
ok $? "metrics: node 2 zerohop_state_degraded 1 while cut off"
et_svc "app: web, ver: b" >"$TMP/svc-b.yaml"
ZHE apply -f "$TMP/svc-b.yaml" >/dev/null
wait_until 5 who_is 1 web-2-2
is "$(et_who 1)" web-2-2 "the change converged on node 1 (web-2-2)"
same=0
for _ in $(seq 10); do [ "$(et_who 2)" = web-1-2 ] && same=$((same + 1)); sleep 0.1; done
is "$same" 10 "node 2 keeps serving its last state (web-1-2, 10 of 10) during the partition"
is "$(et_gen 2)" "$gen_cut" "node 2's generation did not move"

# compaction during the partition: node 2's resume revision is gone
et_svc "app: web" web2 10.96.90.11 >"$TMP/web2.yaml"
ZHE apply -f "$TMP/web2.yaml" >/dev/null
rev=$(et_rev)
ETCDCTL compact "$rev" >/dev/null
ok $? "etcd compacted to revision $rev while node 2 is cut off (it saw $gen_cut)"

# ---- heal: node 2 relists and catches up
t0=$(date +%s%N)
et_heal 2
wait_until 10 in_sync 2
ok $? "after the heal node 2 is ready at revision $(et_gen 2) in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
wait_until 3 metric_is 2 zerohop_state_degraded 0
ok $? "metrics: node 2 zerohop_state_degraded 0 after the heal"
ts_after=$(metric 2 zerohop_state_last_sync_timestamp_seconds)
[ "$(echo "${ts_after:-0} > $ts_before" | bc)" = 1 ]
ok $? "metrics: its last sync timestamp moved on ($ts_before -> $ts_after)"
wait_until 3 who_is 2 web-2-2
is "$(et_who 2)" web-2-2 "node 2 serves the new state (web-2-2)"
grep -q "compacted.*relisting" "$TMP/agent2.log"
ok $? "node 2 relisted because its revision was compacted"
case "$(et_run 2 curl -s -m 2 http://10.96.90.11/ | jq -r .name)" in web-1-2|web-2-2) r=0 ;; *) r=1 ;; esac
ok $r "the Service created during the partition works on node 2 too"

# ---- every etcd member down, every agent restarted
for i in 1 2 3; do et_member_stop $i; done
for n in 1 2; do et_agent_stop $n; done
for n in 1 2; do rm -f "$TMP/agent$n.health"; et_agent_start $n; done
wait_until 10 health_is 1 degraded && wait_until 5 health_is 2 degraded
r=$?
ok $r "agents restarted with etcd down come up degraded ($(awk '$1 == "error"' "$TMP/agent1.health" | cut -c1-80))"
[ $r = 0 ] || { cat "$TMP"/agent*.health; tail -5 "$TMP/agent2.log"; } | sed 's/^/# /' 
flows=0
for _ in $(seq 10); do
	[ "$(et_who 1)" = web-2-2 ] && [ "$(et_who 2)" = web-2-2 ] && flows=$((flows + 1))
done
is "$flows" 10 "traffic keeps flowing on both nodes from the pinned maps (10 of 10)"
for i in 1 2 3; do et_member_start $i; done
wait_until 20 et_quorum
ok $? "etcd back (a quorum answers)"
wait_until 15 in_sync 1 && wait_until 5 in_sync 2
r=$?
ok $r "both agents synced when etcd returned (revision $(et_rev))"
[ $r = 0 ] || { cat "$TMP"/agent*.health; tail -8 "$TMP/agent1.log" "$TMP/agent2.log"; } | sed 's/^/# /' 
et_svc "app: web, ver: a" >"$TMP/svc-a.yaml"
ZHE apply -f "$TMP/svc-a.yaml" >/dev/null
wait_until 5 who_is 2 web-1-2
is "$(et_who 2)" web-1-2 "and follow the next change (watching again)"
done_testing
