#!/usr/bin/env bash
# 43-accel-skip.t — the accelerator's port opt-out as the lab runs it:
# `zerohop lab up --accel on --accel-skip-ports 7002` passes the list to every
# node agent, which applies it right after loading (or adopting) the
# short-circuit. Between two pods of one node, connections to port 7002 are
# never short-circuited (accel sockets counter unchanged) while connections
# to port 7001 are; an agent restart (adoption) keeps the opt-out. Bad lists
# are refused naming the bad item, by `lab up` and by `zerohop agent`.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup S43
lab_test_tools accel_ctl
PIN=/sys/fs/bpf/zerohop/$LAB/node-a

# ---- bad lists: nothing is built ----------------------------------------------
out=$("$ZH" lab up --lab $LAB --accel-skip-ports 80,x8 2>&1)
ok $([ $? -ne 0 ] && echo "$out" | grep -q "item 2 'x8'"; echo $?) \
	"lab up --accel-skip-ports 80,x8: error names item 2 'x8'"
out=$("$ZH" lab up --lab $LAB --accel-skip-ports 0 2>&1)
ok $([ $? -ne 0 ] && echo "$out" | grep -q "item 1 '0' is out of range"; echo $?) \
	"lab up --accel-skip-ports 0: out of range"
out=$("$ZH" lab up --lab $LAB --accel-skip-ports 80, 2>&1)
ok $([ $? -ne 0 ] && echo "$out" | grep -q "empty item"; echo $?) "trailing comma refused"
out=$("$ZH" agent --node n1 --lab $LAB --accel-skip-ports 7002,70000 2>&1)
ok $([ $? -eq 2 ] && echo "$out" | grep -q "item 2 '70000' is out of range"; echo $?) \
	"agent --accel-skip-ports 7002,70000: error names item 2"
ok $([ ! -e "/run/zerohop/$LAB" ] && [ ! -e "/sys/fs/bpf/zerohop/$LAB" ]; echo $?) \
	"nothing was built by the refused commands"

{
	m_pod plain node-a "" "$(m_ctr s 7001 python3 "$PROBE" who-tcp 7001)"
	m_pod skipped node-a "" "$(m_ctr s 7002 python3 "$PROBE" who-tcp 7002)"
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
} > "$TMP/app.yaml"

lab_up "--accel on --accel-skip-ports 7002" --accel on --accel-skip-ports 7002 -f "$TMP/app.yaml"
wait_until 5 test -e "$PIN/accel_sockops_link"
ok "$([ -e "$PIN/accel_sockops_link" ]; echo $?)" "the node-a agent pinned the accel link"

stat() { "$TOOLS/accel_ctl" stats "$PIN" | sed -n "s/^$1=//p"; }
conns() {	# POD PORT: 20 connections from cli; prints the number that got an answer
	lab_exec cli python3 "$PROBE" conns "$(lab_pod_ip "$1")" "$2" 20 |
		jq "[.counts[]] | add // 0"
}
check() {	# LABEL [unskipped]
	s0=$(stat sockets)
	n=$(conns skipped 7002)
	s1=$(stat sockets)
	m=$(conns plain 7001)
	s2=$(stat sockets)
	diag "$1: sockets $s0 -> $s1 (port 7002, $n answers) -> $s2 (port 7001, $m answers)"
	is "$n/$m" "20/20" "$1: every connection answered on both ports"
	if [ "$2" = unskipped ]; then
		ok $([ $((s1 - s0)) -ge 20 ]; echo $?) "$1: port 7002 short-circuited ($((s1 - s0)) sockets)"
	else
		is "$((s1 - s0))" 0 "$1: port 7002 (skipped) never short-circuited"
	fi
	ok $([ $((s2 - s1)) -ge 20 ]; echo $?) "$1: port 7001 short-circuited ($((s2 - s1)) sockets)"
}
check "fresh agent"

# The opt-out is what makes the difference: clear the skip map behind the
# agent's back (accel_ctl adopts the pins) and 7002 is short-circuited.
CGROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG=${CGROOT:-/run/zerohop/cgroup2}/zerohop-$LAB/node-a
"$TOOLS/accel_ctl" skip "$CG" "$PIN"
ok $? "accel_ctl skip (empty list) cleared the opt-out"
check "cleared map" unskipped

# Adoption: the supervisor restarts the agent, which adopts the pins and
# applies its flags again.
APID=$(lab_agent_pid node-a)
tr '\0' ' ' </proc/$APID/cmdline | grep -q -- "--accel-skip-ports 7002"
ok $? "the lab passed --accel-skip-ports 7002 to the agent"
kill -TERM "$APID"
WAIT_STEP=0.05 wait_until 10 lab_agent_replaced node-a "$APID"
q=$(lab_agent_pid node-a)
ok $([ "$q" != "$APID" ]; echo $?) "node-a's agent restarted (pid $APID -> $q)"
LOGA=/run/zerohop/$LAB/nodes/node-a/agent.log
reapplied() { [ "$(grep -c "accel skips 1 port" "$LOGA")" -ge 2 ]; }
WAIT_STEP=0.05 wait_until 5 reapplied
is "$(grep -c "accel skips 1 port" "$LOGA")" 2 "the restarted agent applied the opt-out again"
check "adopting agent"

"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
is "$(ls /sys/fs/bpf/zerohop/$LAB 2>/dev/null | wc -l)" 0 "lab down removed the pins"
done_testing
