#!/usr/bin/env bash
# A node agent that cannot start is a failure, not "ready": `lab up` exits
# non-zero with the agent's own error line and the path of its log, and
# leaves nothing behind. With --keep-going the lab stays up, loudly
# degraded: `lab status` shows the agent in CrashLoopBackOff with its
# restarts and error (also in -o json), the pods of that node stay Pending
# (never published Running with no mesh under them), `get stats` says why
# there is nothing to show, and `lab down` cleans everything.
# The agent is broken the way a user would break it: a bad setting passed
# through (the lab hands its environment to the agents).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t17
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

left_behind() {
	local what=""
	[ -e "/run/zerohop/$LAB" ] && what="$what run-dir"
	ip netns list | grep -q "^$LAB-" && what="$what netns"
	[ -e "/sys/fs/bpf/zerohop/$LAB" ] && what="$what pins"
	find /sys/fs/cgroup /run/zerohop/cgroup2 -maxdepth 2 -name "zerohop-$LAB" 2>/dev/null | grep -q . &&
		what="$what cgroup"
	echo "${what:-nothing}"
}

LABF=(-f "$ROOT/examples/lab/cluster.yaml" -f "$ROOT/examples/lab/echo.yaml")
ZH_AGENT_DESTROY_STALE=bogus "$ZH" lab up --lab $LAB "${LABF[@]}" >"$TMP/up.out" 2>"$TMP/up.err"
rc=$?
[ "$rc" -ne 0 ]
ok $? "lab up fails when the agents cannot start (exit $rc)"
grep -q "node node-[ab]: agent cannot start: zerohop agent: ZH_AGENT_DESTROY_STALE: expected on or off, got 'bogus'" "$TMP/up.err"
ok $? "it names the node and prints the agent's own error line"
grep -Eq "\(log /run/zerohop/$LAB/nodes/node-[ab]/agent.log\)" "$TMP/up.err"
ok $? "and the path of the agent's log"
grep -q "up:" "$TMP/up.out"
is $? 1 "it does not say the lab is up"
is "$(left_behind)" nothing "a failed lab up leaves nothing behind"

ZH_AGENT_DESTROY_STALE=bogus "$ZH" lab up --lab $LAB --keep-going "${LABF[@]}" >"$TMP/up.out" 2>"$TMP/up.err"
is $? 0 "lab up --keep-going brings the lab up anyway"
grep -q "lab $LAB is DEGRADED: node node-[ab]: agent cannot start" "$TMP/up.err"
ok $? "and says loudly that it is degraded"
# Between two crashes the supervisor restarts the agent ("Starting", with
# a PID) for a few milliseconds: take the status while it is backing off.
backing_off() {
	"$ZH" lab status --lab $LAB >"$TMP/st" 2>&1
	"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
	grep -Eq '^node-a .* CrashLoopBackOff ' "$TMP/st" &&
		[ "$(jq -r '.nodes[0].agent.state' "$TMP/st.json")" = CrashLoopBackOff ]
}
wait_until 10 backing_off
grep -Eq '^node-a .* CrashLoopBackOff \([0-9]+\) +0 ' "$TMP/st"
ok $? "lab status: node-a's agent in CrashLoopBackOff with its restart count"
grep -q "node-a agent: CrashLoopBackOff: zerohop agent: ZH_AGENT_DESTROY_STALE: expected on or off, got 'bogus'; log /run/zerohop/$LAB/nodes/node-a/agent.log" "$TMP/st"
ok $? "lab status: the agent's last error line and log"
is "$(jq -r '.nodes[0].agent.state' "$TMP/st.json")" CrashLoopBackOff "-o json: nodes[].agent.state"
[ "$(jq -r '.nodes[0].agent.restarts' "$TMP/st.json")" -ge 1 ]
ok $? "-o json: nodes[].agent.restarts >= 1"
is "$(jq -r '.nodes[0].agent.pid' "$TMP/st.json")" 0 "-o json: nodes[].agent.pid 0 (not running)"
jq -r '.nodes[0].agent.last_error' "$TMP/st.json" | grep -q "ZH_AGENT_DESTROY_STALE"
ok $? "-o json: nodes[].agent.last_error"
is "$(jq -r '.nodes[0].proxy | has("state") and has("pid") and has("restarts") and has("last_error")' "$TMP/st.json")" true \
	"-o json: nodes[].proxy has state, pid, restarts, last_error"
running=$(jq '[.pods[] | select(.phase == "Running")] | length' "$TMP/st.json")
is "$running" 0 "no pod is published Running on a node whose agent does not serve it"
pending=$(jq '[.pods[] | select(.phase == "Pending")] | length' "$TMP/st.json")
is "$pending" 5 "all 5 pods stay Pending"
"$ZH" get pods --lab $LAB >"$TMP/pods" 2>&1
grep -q " Running" "$TMP/pods"
is $? 1 "the state source has no Running pod either"
"$ZH" get stats --lab $LAB >"$TMP/stats" 2>&1
grep -q "node node-a: agent CrashLoopBackOff: zerohop agent: ZH_AGENT_DESTROY_STALE" "$TMP/stats"
ok $? "get stats says the agent is down and why, instead of printing nothing"
"$ZH" lab down --lab $LAB >/dev/null 2>&1
is $? 0 "lab down"
is "$(left_behind)" nothing "lab down leaves nothing behind"
done_testing
