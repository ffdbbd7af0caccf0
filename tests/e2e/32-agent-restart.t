#!/usr/bin/env bash
# 32-agent-restart.t — the datapath outlives its agent, and endpoint changes
# are make-before-break, in the lab:
#  - a Deployment scaled 2 -> 4 -> 1 -> 3 while a client opens a connection
#    every 5 ms: zero failed connects, and no connection reaches a removed pod
#    once the node's maps carry the state generation that removed it (zero
#    failed connects relies on the lab's pod termination: a removed pod is
#    unpublished but keeps running until every agent applied that and the
#    drain delay passed, so a connection chosen just before the update
#    still finds its server — docs/lab.md "Pod termination");
#  - the client node's agent restarted 10 times (SIGTERM to its PID; the lab
#    supervisor restarts it) while the client connects every 5 ms and a
#    long-lived connection streams: success rate 1.0, the stream never stalls
#    (no gap of 1 s or more; the server writes every 10 ms);
#  - agent --cleanup detaches everything and removes the pins.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t32

who() {	# REPLICAS
	REPLICAS=$1 m_who who "" "app: who"
}
{
	who 2
	m_deploy streamer node-b "app: streamer" "$(m_ctr s s:9000 python3 "$PROBE" stream-tcp 9000)"
	m_svc who "app: who" "80:http"
	m_svc streamer "app: streamer" "9000:s"
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} > "$TMP/app.yaml"

lab_up "" -f "$TMP/app.yaml"
wait_until 30 lab_conns_ok client who 80 4

# ---- scale up and down under a connecting client ----------------------------
# Poll: when does node-a's map generation reach the state generation, and
# which pods are endpoints then. Written as "EPOCH GEN pod,pod,..." lines.
watch_endpoints() {
	while [ ! -e "$TMP/stop1" ]; do
		g=$(cat /run/zerohop/$LAB/state/generation)
		eps=$("$ZH" get --lab $LAB endpoints -o json | jq -r '[.[] | select(.name=="who") | .endpoints[].pod] | join(",")')
		mg=$("$ZH" get --lab $LAB stats -o json | jq '."node-a".generation')
		[ "$mg" -ge "$g" ] && echo "$(date +%s.%N) $g $eps"
		sleep 0.02
	done
}
who_endpoints() {	# N: who has N endpoints
	[ "$("$ZH" get --lab $LAB endpoints -o json | jq '[.[] | select(.name=="who") | .endpoints[]] | length')" = "$1" ]
}
rm -f "$TMP/stop1"
lab_exec client python3 "$PROBE" loop who 80 5 "$TMP/stop1" > "$TMP/loop1.json" &
BG+=($!)
watch_endpoints > "$TMP/eps.log" &
BG+=($!)
sleep 1.5
for n in 4 1 3; do
	who $n > "$TMP/who.yaml"
	"$ZH" apply --lab $LAB -f "$TMP/who.yaml" >/dev/null
	ok $? "scale who to $n"
	wait_until 15 who_endpoints $n	# until the lab has converged on n running pods
	sleep 1.5
done
touch "$TMP/stop1"
wait "${BG[@]}" 2>/dev/null
BG=()
res=$(python3 - "$TMP/loop1.json" "$TMP/eps.log" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
# first moment each pod was observed gone from the endpoints, with the maps
# of node-a already at that generation
seen, gone = set(), {}
for line in open(sys.argv[2]):
    t, g, eps = (line.split() + [""])[:3]
    cur = set(p for p in eps.split(",") if p)
    for p in seen - cur:
        gone.setdefault(p, float(t))
    seen |= cur
    for p in cur:
        gone.pop(p, None)
conns = d["conns"]
fails = [h for t, h in conns if h.startswith("ERR") or h == "EMPTY"]
late = [(t, h) for t, h in conns if h in gone and d["start"] + t > gone[h]]
print(len(conns), len(fails), len(gone), len(late), ";".join(sorted(set(fails)))[:200])
PY
)
read n nfail ngone nlate why <<< "$res"
diag "scaling: $n connections, $nfail failed ($why), $ngone pods removed, $nlate reached a removed pod after its update"
ok $([ "$n" -gt 300 ]; echo $?) "the client kept connecting during scaling ($n connections)"
is "$nfail" 0 "scaling: zero failed connects"
ok $([ "$ngone" -ge 3 ]; echo $?) "scaling removed pods ($ngone)"
is "$nlate" 0 "scaling: no connection reached a removed pod after its update was applied"

# ---- agent restarted 10 times under load --------------------------------------
rm -f "$TMP/stop2"
lab_exec client python3 "$PROBE" loop who 80 5 "$TMP/stop2" > "$TMP/loop2.json" &
BG+=($!)
lab_exec client python3 "$PROBE" stream streamer 9000 "$TMP/stop2" > "$TMP/stream.json" &
BG+=($!)
sleep 1
restarts=0
for i in $(seq 10); do
	p=$(lab_agent_pid node-a)
	[ -n "$p" ] && [ "$p" -gt 0 ] || break
	kill -TERM "$p" || break
	WAIT_STEP=0.05 wait_until 10 lab_agent_replaced node-a "$p"	# the supervisor restarts it (with backoff)
	q=$(lab_agent_pid node-a)
	[ "$q" != "$p" ] && restarts=$((restarts + 1))
	sleep 0.3
done
sleep 1
touch "$TMP/stop2"
wait "${BG[@]}" 2>/dev/null
BG=()
is "$restarts" 10 "node-a's agent restarted 10 times"
res=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
c = d["conns"]
f = [h for t, h in c if h.startswith("ERR") or h == "EMPTY"]
print(len(c), len(f))' "$TMP/loop2.json")
read n nfail <<< "$res"
diag "restarts: $n connections, $nfail failed; stream $(cat "$TMP/stream.json")"
ok $([ "$n" -gt 300 ]; echo $?) "the client kept connecting during restarts ($n connections)"
is "$nfail" 0 "restarts: success rate 1.0"
is "$(jq -r .error "$TMP/stream.json")" null "restarts: the long-lived connection survived"
ok $(jq -e '.max_gap_ms < 1000 and .lines > 100' "$TMP/stream.json" >/dev/null; echo $?) "restarts: the stream never stalled (max gap $(jq .max_gap_ms "$TMP/stream.json") ms)"
"$ZH" get --lab $LAB stats -o json | jq -e '."node-a".alias_miss == 0' >/dev/null
ok $? "never a missing alias entry"

# ---- agent --cleanup ------------------------------------------------------------------
PIN=/sys/fs/bpf/zerohop/$LAB/node-b
CGROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG=${CGROOT:-/run/zerohop/cgroup2}/zerohop-$LAB/node-b
ls "$PIN"/lb_link_connect4 >/dev/null 2>&1
ok $? "node-b has its links pinned"
bpftool cgroup show "$CG" 2>/dev/null | grep -q connect4
ok $? "node-b's cgroup carries connect4"
"$ZH" agent --cleanup --node node-b --lab $LAB
ok $? "agent --cleanup --node node-b"
ok $(ls "$PIN"/lb_* >/dev/null 2>&1; [ $? -ne 0 ]; echo $?) "cleanup removed node-b's lb_ pins"
bpftool cgroup show "$CG" 2>/dev/null | grep -Eq "connect[46]|sendmsg[46]|recvmsg[46]|getpeername[46]"
ok $((! $?)) "cleanup detached the hooks from node-b's cgroup"
done_testing
