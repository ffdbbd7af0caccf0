#!/usr/bin/env bash
# An agent upgraded in place over the pins of the previous layout (the load
# balancer's maps and links were zh_lb_*, now lb_*: docs/maps.md
# "Upgrading") adopts them: the pins are renamed, not recreated (same map
# id), no second set of hooks is attached, a Service keeps working across
# the upgrade and one added while the agent was down works after it, and no
# old-name pin remains; `agent --cleanup` also removes an old-name pin.
#
# The previous layout is made by the previous release's binary when
# ZH_OLD_ZEROHOP names one (e.g. `git archive` of a commit before the rename,
# built with make), else by this agent with its pins renamed to the old
# names afterwards (what such an agent leaves, bar the kernel's map names).
# No lab: a network namespace and cgroups this test makes, as test 18.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
T=t98${ZH_TEST_LAB_SUFFIX:+-$ZH_TEST_LAB_SUFFIX}
test_setup $T jq curl nsenter bpftool
OLD=${ZH_OLD_ZEROHOP:-}
[ -z "$OLD" ] || [ -x "$OLD" ] || skip_all "ZH_OLD_ZEROHOP=$OLD is not executable"
NS=zh-$T
CG2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
[ -n "$CG2" ] || skip_all "no cgroup2 mount"
BASE=$CG2/zh-$T
NODECG=$BASE/node
DMCG=$BASE/daemons	# the agent and the echo servers
PIN=/sys/fs/bpf/zh-$T
AGENT=
# Stop every process in the test's cgroups (ours alone: the test made
# them), then remove pins, cgroups and the namespace.
test_cleanup() {
	local cg p
	for cg in $DMCG $NODECG; do
		[ -f $cg/cgroup.procs ] || continue
		for p in $(cat $cg/cgroup.procs); do kill "$p" 2>/dev/null; done
	done
	for cg in $DMCG $NODECG; do
		wait_until 5 cg_empty $cg
		rmdir $cg 2>/dev/null
	done
	rmdir $BASE 2>/dev/null
	[ -d $PIN ] && "$ZH" agent --cleanup --node node-a --pin-dir $PIN >/dev/null 2>&1
	rm -rf $PIN
	ip netns del $NS 2>/dev/null
}
cg_empty() { [ ! -s "$1/cgroup.procs" ]; }
test_cleanup

ip netns add $NS
ip -n $NS link set lo up
for a in 10.244.0.2 10.244.0.3; do ip -n $NS addr add $a/32 dev lo; done
mkdir -p $NODECG $DMCG
# CMD in cgroup CG inside the node's netns (exec: $! is CMD's PID)
RUNIN() { nsenter --net=/run/netns/$NS sh -c 'echo $$ > "$0"/cgroup.procs && exec "$@"' "$@"; }
POD() { RUNIN $NODECG "$@"; }
svc() {
	printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: %s}\n' "$1"
	printf 'spec: {clusterIP: %s, selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n' "$2"
}
pod() {
	printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: %s, labels: {app: web}}\n' "$1"
	printf 'spec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {podIP: %s, phase: Running}\n' "$2"
}
# the names of the backends that answered N connections to http://VIP/
answers() { for _ in $(seq "$2"); do POD curl -s -m 3 "http://$1/" | jq -r .name; done | sort -u | tr '\n' ' '; }
ready_gen() { [ "$(awk '$1 == "generation" {print $2}' "$TMP/agent.health" 2>/dev/null)" = "$1" ] &&
	grep -q '^state ready' "$TMP/agent.health"; }
# start BIN as the node's agent, wait until it has synced generation GEN
start_agent() {
	rm -f "$TMP/agent.health"
	RUNIN $DMCG "$1" agent --node node-a --cgroup $NODECG --pin-dir $PIN --state "$TMP/state" \
		--health-file "$TMP/agent.health" >>"$TMP/agent.log" 2>&1 &
	AGENT=$!
	wait_until 15 ready_gen "$2"
}
stop_agent() { kill "$AGENT"; wait_pid_gone 10 "$AGENT"; }
pins() { (cd $PIN 2>/dev/null && ls -d $1 2>/dev/null | tr '\n' ' '); }
map_id() { bpftool map show pinned "$PIN/$1" -j 2>/dev/null | jq -r .id; }
n_connect4() { bpftool cgroup show $NODECG 2>/dev/null | grep -c 'cgroup_inet4_connect'; }

mkdir -p "$TMP/state"
{ svc web 10.96.98.10; pod web-1 10.244.0.2; pod web-2 10.244.0.3; } >"$TMP/m1.yaml"
"$ZH" apply --state "$TMP/state" -f "$TMP/m1.yaml" >/dev/null 2>&1
gen1=$(cat "$TMP/state/generation" 2>/dev/null || echo 1)
for i in 1 2; do
	RUNIN $DMCG "$ZH" echo --http 10.244.0.$((i + 1)):8080 --name web-$i >"$TMP/echo$i.log" 2>&1 &
done

# 1. The previous layout.
if [ -n "$OLD" ]; then
	diag "previous layout made by $OLD"
	start_agent "$OLD" "$gen1"
	ok $? "the previous release's agent synced generation $gen1"
	stop_agent
else
	diag "previous layout made by renaming this agent's pins (set ZH_OLD_ZEROHOP for a real old binary)"
	start_agent "$ZH" "$gen1"
	ok $? "an agent synced generation $gen1"
	stop_agent
	# lb_mtls came after the rename: an agent of that layout had none
	for p in $(pins 'lb_*'); do [ "$p" = lb_mtls ] && rm "$PIN/$p" || mv "$PIN/$p" "$PIN/zh_$p"; done
fi
old=$(pins 'zh_lb_*')
n_old=$(echo $old | wc -w)
[ "$n_old" -ge 14 ] && [ -z "$(pins 'lb_*')" ]
ok $? "the pin dir has the previous layout: $n_old zh_lb_* pins, no lb_*"
id_svc=$(map_id zh_lb_svc)
id_meta=$(map_id zh_lb_meta)
hooks=$(n_connect4)
is "$(answers 10.96.98.10 12)" "web-1 web-2 " "agent down: the Service still answers from the old pins"

# 2. A change while the agent is down, then the upgraded agent.
{ svc web 10.96.98.10; svc web2 10.96.98.11; pod web-1 10.244.0.2; pod web-2 10.244.0.3; } >"$TMP/m2.yaml"
"$ZH" apply --state "$TMP/state" -f "$TMP/m2.yaml" >/dev/null 2>&1
gen2=$(cat "$TMP/state/generation" 2>/dev/null)
[ -n "$gen2" ] && [ "$gen2" != "$gen1" ]
ok $? "the state moved on while the agent was down ($gen1 -> $gen2)"
start_agent "$ZH" "$gen2"
ok $? "the upgraded agent started over the old pins and synced generation $gen2"
grep -q "pin upgrade: $n_old pins of an older layout" "$TMP/agent.log"
ok $? "it moved all $n_old pins ($(grep -o 'pin upgrade: [0-9]* pins' "$TMP/agent.log" | tail -1))"
is "$(pins 'zh_lb_*')" "" "no old-name pin remains"
is "$(map_id lb_svc) $(map_id lb_meta)" "$id_svc $id_meta" "lb_svc and lb_meta are the very maps the old agent pinned (ids $id_svc $id_meta)"
is "$(n_connect4)" "$hooks" "no second set of hooks: $hooks connect4 programs on the node cgroup, as before"
is "$(answers 10.96.98.10 12)" "web-1 web-2 " "the Service keeps working after the upgrade"
is "$(answers 10.96.98.11 12)" "web-1 web-2 " "the Service added while the agent was down works"
stop_agent

# 3. --cleanup on a pin dir holding both names of one map (P2) and nothing else.
bpftool map pin id "$id_meta" "$PIN/zh_lb_meta"
[ -e "$PIN/zh_lb_meta" ] && [ -e "$PIN/lb_meta" ]
ok $? "a stale old-name pin beside the new one"
"$ZH" agent --cleanup --node node-a --pin-dir $PIN >"$TMP/cleanup.out" 2>&1
ok $? "agent --cleanup"
is "$(pins 'zh_lb_*')$(pins 'lb_*')" "" "--cleanup left no lb_ pin under either name"

test_cleanup
ok $([ ! -e $BASE ] && [ ! -e $PIN ] && ! ip netns list | grep -q "^$NS "; echo $?) "teardown: no cgroup, pin or namespace left"
done_testing
