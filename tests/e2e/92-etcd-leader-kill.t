#!/usr/bin/env bash
# 92-etcd-leader-kill.t — kill the etcd leader during a weighted-split
# change under load (docs/state-etcd.md, "Failure behaviour"): a client
# opens a connection to the split's root Service every 10 ms while the
# leader member is SIGKILLed and the split is moved from v1 to v2 through
# the surviving members; no connection fails, the change converges once a
# new leader is elected, and the agent's watch fails over to a live member
# and resumes from its last revision.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/etcd_test.sh"
et_setup t92 3 1

split() {	# W1 W2
	cat <<YAML
apiVersion: split.smi-spec.io/v1alpha1
kind: TrafficSplit
metadata: {name: web}
spec:
  service: web
  backends:
    - {service: web-v1, weight: $1}
    - {service: web-v2, weight: $2}
---
YAML
}
{ et_svc "app: web"; et_svc 'ver: "1"' web-v1 10.96.90.11; et_svc 'ver: "2"' web-v2 10.96.90.12
  et_podm 1 2 1; et_podm 1 3 2; split 100 0; } >"$TMP/m.yaml"
ZHE apply -f "$TMP/m.yaml" >/dev/null
ok $? "a split web -> web-v1 100 / web-v2 0 applied through etcd"
et_echo 1 2
et_echo 1 3
# the agent watches the leader first (its first endpoint), so the kill
# takes its watch down too
leader_id=$(ETCDCTL endpoint status -w json | jq -r '.[0].Status.leader')
leader=$(ETCDCTL member list -w json | jq -r --arg id "$leader_id" \
	'.members[] | select((.ID | tostring) == $id) | .name')
li=${leader#m}
[ -n "$li" ]
ok $? "the leader is member $leader"
ETCD_SPEC=etcd://10.252.0.$((10 + li)):2379,$ET_SPEC_LIST
et_agent_start 1
in_sync() { [ "$(et_health "$1")" = ready ] && [ "$(et_gen "$1")" = "$(et_rev)" ]; }
wait_until 15 in_sync 1
ok $? "agent ready at revision $(et_rev)"
wait_until 5 who_is 1 web-1-2
is "$(et_who 1)" web-1-2 "the split sends web to v1"

# the load: one new connection every 10 ms, each answer or error logged
cat >"$TMP/load.py" <<'PY'
import http.client, json, os, sys, time
out, t0 = [], time.time()
while not os.path.exists(sys.argv[1]):
    t = time.time()
    try:
        c = http.client.HTTPConnection("10.96.90.10", 80, timeout=2)
        c.request("GET", "/")
        out.append([round(t - t0, 3), json.loads(c.getresponse().read())["name"]])
        c.close()
        if len(out) == 1:
            open(sys.argv[2], "w").close()
    except Exception as e:
        out.append([round(t - t0, 3), "ERR:" + type(e).__name__ + ":" + str(e)[:40]])
    d = 0.01 - (time.time() - t)
    if d > 0:
        time.sleep(d)
print(json.dumps({"start": t0, "conns": out}))
PY
et_run 1 python3 "$TMP/load.py" "$TMP/stop" "$TMP/started" >"$TMP/load.json" 2>"$TMP/load.err" &
load=$!
# the load's first answer before the kill (python starts in seconds on a
# loaded machine: a fixed sleep let the change win the race)
wait_until 20 test -e "$TMP/started"
sleep 0.5

for p in $(cat $ET_CG/etcd/$leader/cgroup.procs); do kill -9 "$p"; done
t_kill=$(date +%s%N)
split 0 100 >"$TMP/split2.yaml"
applied() { ZHE apply -f "$TMP/split2.yaml" >>"$TMP/apply2.out" 2>&1; }
wait_until 15 applied
ok $? "the split change is applied through the surviving members $(( ($(date +%s%N) - t_kill) / 1000000 )) ms after the kill"
t_apply=$(date +%s%N)
wait_until 10 in_sync 1
ok $? "the agent converged to revision $(et_gen 1) $(( ($(date +%s%N) - t_apply) / 1000000 )) ms after the apply"
wait_until 3 who_is 1 web-1-3
sleep 0.5
touch "$TMP/stop"
wait "$load"
n=$(jq '.conns | length' "$TMP/load.json")
fails=$(jq '[.conns[] | select(.[1] | startswith("ERR"))] | length' "$TMP/load.json")
is "$fails" 0 "no failed connection among $n made during the kill and the change"
[ "$fails" = 0 ] || jq -c '[.conns[] | select(.[1] | startswith("ERR"))][:5]' "$TMP/load.json" | sed 's/^/# /'
is "$(jq -r '.conns[-1][1]' "$TMP/load.json")" web-1-3 "the last connections go to v2"
is "$(jq -r '[.conns[] | .[1]] | unique | join(",")' "$TMP/load.json")" "web-1-2,web-1-3" \
	"only v1 then v2 answered"
grep -q "watching from revision" "$TMP/agent1.log"
ok $? "the agent's watch failed over: $(grep -o 'etcd: [0-9.:]*: watching from revision [0-9]*' "$TMP/agent1.log" | tail -1)"
done_testing
