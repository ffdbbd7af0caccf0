#!/usr/bin/env bash
# 42-accel-lab.t — the short-circuit as the node agent runs it in the lab
# (`zerohop lab up --accel on|off`): every accel_check case between two pods of
# one node gives the same client transcript with the agent's acceleration on
# as with it off; the counters (`zerohop get stats`, and the pinned map read by
# a fresh process) prove the bytes skipped the stack; cross-node traffic is
# never short-circuited; the sockhash drains after close.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup S42
lab_test_tools accel_check accel_ctl
PIN=/sys/fs/bpf/zerohop/$LAB/node-a

{
	m_pod srv-a node-a "" "$(m_ctr s "" "$TOOLS/accel_check" server 7001)"
	m_pod srv-b node-b "" "$(m_ctr s "" "$TOOLS/accel_check" server 7001)"
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
} > "$TMP/app.yaml"

# Everything but splice_recv (needs the port opt-out, docs/accel.md).
CASES=$("$TOOLS/accel_check" list | grep -vx splice_recv)

suite() {	# OUT SERVER_POD
	lab_exec cli timeout 150 "$TOOLS/accel_check" client \
		"$(lab_pod_ip "$2")" 7001 $CASES >"$TMP/$1" 2>&1
}
stat() { "$TOOLS/accel_ctl" stats "$PIN" | sed -n "s/^$1=//p"; }
stat_is() { [ "$(stat "$1")" = "$2" ]; }

for mode in off on; do
	"$ZH" lab up --lab $LAB --accel $mode -f "$TMP/app.yaml" >"$TMP/up-$mode.log" 2>&1
	ok $? "lab up --accel $mode" || { sed 's/^/#   /' "$TMP/up-$mode.log"; continue; }
	if [ $mode = on ]; then
		wait_until 5 test -e "$PIN/accel_sockops_link"
		ok "$([ -e "$PIN/accel_sockops_link" ]; echo $?)" "the node-a agent pinned the accel link"
		s0=$(stat sockets); b0=$(stat bytes)
	fi
	suite same-$mode srv-a
	ok $? "$mode: cli -> srv-a (same node): all cases complete"
	if [ $mode = on ]; then
		s1=$(stat sockets); b1=$(stat bytes)
		diag "same node: sockets $s0 -> $s1, bytes $b0 -> $b1"
		[ $((s1 - s0)) -ge 20 ]; ok $? "same node: connections short-circuited ($((s1 - s0)) sockets)"
		[ $((b1 - b0)) -ge $((16 << 20)) ]; ok $? "same node: bytes redirected ($((b1 - b0)))"
		st=$("$ZH" get --lab $LAB stats 2>&1)
		echo "$st" | grep -q accel_sockets; ok $? "zerohop get stats shows the accel counters"
	fi
	suite cross-$mode srv-b
	ok $? "$mode: cli -> srv-b (other node): all cases complete"
	if [ $mode = on ]; then
		is "$(stat sockets)" "$s1" "cross node: nothing short-circuited"
		wait_until 3 stat_is active 0
		is "$(stat active)" 0 "sockhash back to empty after the runs"
	fi
	"$ZH" lab down --lab $LAB >/dev/null 2>&1
done
if cmp -s "$TMP/same-on" "$TMP/same-off"; then ok 0 "same node: ON transcript == OFF"; else
	ok 1 "same node: ON transcript == OFF"; diff "$TMP/same-off" "$TMP/same-on" | sed 's/^/#   /'; fi
if cmp -s "$TMP/cross-on" "$TMP/cross-off"; then ok 0 "cross node: ON transcript == OFF"; else
	ok 1 "cross node: ON transcript == OFF"; diff "$TMP/cross-off" "$TMP/cross-on" | sed 's/^/#   /'; fi
is "$(grep -c 'HANG\|FAIL' "$TMP/same-on" "$TMP/cross-on" | awk -F: '{ s += $2 } END { print s }')" 0 "no hang, no failure"
is "$(ls /sys/fs/bpf/zerohop/$LAB 2>/dev/null | wc -l)" 0 "lab down removed the pins"
done_testing
