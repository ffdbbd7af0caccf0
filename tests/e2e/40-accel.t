#!/usr/bin/env bash
# 40-accel.t — same-node short-circuit (sock_ops + sk_msg): every behaviour of
# tests/tools/accel_check with acceleration ON gives the same transcript, byte
# for byte, as with it OFF; the counters prove the short-circuit carried the
# bytes; the sockhash returns to its starting size; off and cleanup work.
#
# Set-up: two pod namespaces on one node cgroup (40-accel-lib.sh) until the
# lab's agent calls ag_accel_open itself.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/40-accel-lib.sh"

accel_test_setup S40 accel_check accel_ctl
test_cleanup() { accel_teardown; }

# Everything but splice_recv, which needs the opt-out (docs/accel.md).
CASES=$("$TOOLS/accel_check" list | grep -vx splice_recv)

# run_suite NAME SERVER_POD CLIENT_POD ADDR PORT CASES...: transcript in $OUT/NAME
run_suite() {
	local name=$1 spod=$2 cpod=$3 addr=$4 port=$5 spid rc
	shift 5
	accel_in "$spod" "$TOOLS/accel_check" server "$port" >"$OUT/$name.s" 2>&1 &
	spid=$!
	accel_in "$cpod" timeout 150 "$TOOLS/accel_check" client "$addr" "$port" "$@" \
		>"$OUT/$name.c" 2>&1
	rc=$?
	# The client stops the server with "quit"; bounded wait, then by PID.
	wait_pid_gone 5 "$spid"
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	cat "$OUT/$name.c" "$OUT/$name.s" >"$OUT/$name"
	return $rc
}

# same NAME REF "what": compare two transcripts, show the diff on failure.
same() {
	if cmp -s "$OUT/$1" "$OUT/$2"; then ok 0 "$3"; else
		ok 1 "$3"; diff "$OUT/$2" "$OUT/$1" | sed 's/^/#   /'; fi
}

# wait_active N: the sockhash drains asynchronously after the last close.
active_is() { [ "$(accel_stat active)" = "$1" ]; }
wait_active() {
	wait_until 3 active_is "$1"
	accel_stat active
}

# nclosing: accel_nclosing[0], found through the pinned sk_msg program's maps.
nclosing() {
	local id
	for id in $(bpftool prog show pinned "$PIN/accel_msg" -j | jq '.map_ids[]'); do
		[ "$(bpftool map show id "$id" -j | jq -r .name)" = accel_nclosing ] || continue
		bpftool map lookup id "$id" key 0 0 0 0 -j | jq '.formatted.value // .value'
		return
	done
	echo "none"
}

accel_setup || { echo "Bail out! set-up failed"; exit 1; }

# 1. OFF: nothing loaded at all — the reference transcripts.
run_suite off b a $IP_B 7001 $CASES
ok $? "OFF: pod a -> pod b, all cases complete"
ok "$(grep -c 'HANG\|FAIL' "$OUT/off")" "OFF: no hang, no failure"
run_suite off_splice b a $IP_B 7002 splice_recv
ok $? "OFF: splice_recv completes"
run_suite off_lo a a 127.0.0.1 7003 $CASES
ok $? "OFF: loopback inside pod a completes"

# 2. ON.
accel_on
ok $? "accel_ctl on: load, pin, attach to the node cgroup"
is "$(bpftool cgroup show "$CG" | grep -c 'zh_accel')" 3 "sock_ops, setsockopt and the FIN hold (cgroup_skb ingress) attached to the node cgroup"
start=$(accel_stat active)
is "$start" 0 "sockhash starts empty"
run_suite on b a $IP_B 7001 $CASES
ok $? "ON: pod a -> pod b, all cases complete"
same on off "ON transcript == OFF transcript (pod -> pod, every case)"
msgs=$(accel_stat msgs); bytes=$(accel_stat bytes); socks=$(accel_stat sockets)
diag "after pod->pod: sockets=$socks msgs=$msgs bytes=$bytes fallbacks=$(accel_stat fallbacks) released=$(accel_stat released)"
[ "$socks" -ge 20 ]; ok $? "short-circuited sockets counted ($socks >= 20)"
# The suite moves about 25 MiB; most of it must have skipped the stack.
[ "$bytes" -ge $((16 << 20)) ]; ok $? "bytes redirected ($bytes >= 16 MiB)"
is "$(wait_active "$start")" "$start" "sockhash back to its starting size"
# The sk_msg fast path skips the closing-set lookup while accel_nclosing is 0
# (bpf/accel.bpf.c invariant 8): every socket the suite released (half-close)
# was counted in, and every close counted it out again.
[ "$(accel_stat released)" -gt 0 ]; ok $? "half-closed sockets were published as closing"
is "$(nclosing)" 0 "closing-set count back to 0 after close (fast path re-armed)"

# 3. Loopback inside one pod: keys carry the netns cookie.
b0=$(accel_stat bytes)
run_suite on_lo a a 127.0.0.1 7003 $CASES
ok $? "ON: loopback inside pod a completes"
same on_lo off_lo "ON loopback transcript == OFF"
[ "$(accel_stat bytes)" -gt $((b0 + (8 << 20))) ]; ok $? "loopback bytes redirected"
is "$(wait_active "$start")" "$start" "sockhash back to its starting size (loopback)"

# 4. splice(2) on the receive side: the kernel reads only the TCP receive
# queue there, so such ports are opted out; the opt-out must be clean.
"$TOOLS/accel_ctl" skip "$CG" "$PIN" 7002
ok $? "accel_ctl skip 7002"
s0=$(accel_stat sockets)
run_suite on_splice b a $IP_B 7002 splice_recv
ok $? "ON with opt-out: splice_recv completes"
same on_splice off_splice "ON splice_recv transcript == OFF"
is "$(accel_stat sockets)" "$s0" "opted-out port never enters the sockhash"

# 5. Adoption: a second "on" (agent restart) keeps the same link.
l1=$(bpftool cgroup show "$CG" | awk '/zh_accel_sockops/ { print $1 }')
accel_on
l2=$(bpftool cgroup show "$CG" | awk '/zh_accel_sockops/ { print $1 }')
is "$l2" "$l1" "re-open adopts the pinned link (no second attach)"

# 6. OFF at run time: links removed, no new redirects, same transcript.
accel_off
ok $? "accel_ctl off"
is "$(bpftool cgroup show "$CG" | grep -c 'zh_accel')" 0 "no program left on the node cgroup"
m0=$(accel_stat msgs)
run_suite off2 b a $IP_B 7001 $CASES
ok $? "after off: all cases complete"
same off2 off "after off: transcript == OFF"
is "$(accel_stat msgs)" "$m0" "after off: nothing redirected"

# 7. The benchmark's reference redirect (tests/tools/accel_bare, the
# textbook sock_ops + sk_msg) must really short-circuit, or
# scripts/bench-accel.sh would compare ours with the plain stack: "large"
# (a 4 MiB write each way) leaves pod a's eth0 almost silent with it, and puts
# the 4 MiB on the wire without it (the control that lets this check fail).
tx_a() { ip -n "$NS_A" -j -s link show eth0 | jq '.[0].stats64.tx.bytes'; }
if [ -x "$TOOLS/accel_bare" ]; then
	t0=$(tx_a)
	run_suite plain_large b a $IP_B 7001 large
	ok $? "no short-circuit: large completes"
	t1=$(tx_a)
	[ $((t1 - t0)) -ge $((4 << 20)) ]; ok $? "no short-circuit: 4 MiB on the wire ($((t1 - t0)) bytes)"
	"$TOOLS/accel_bare" on "$CG" "$PIN"
	ok $? "accel_bare on: the reference attached to the node cgroup"
	run_suite ref_large b a $IP_B 7001 large
	ok $? "reference: large completes"
	t2=$(tx_a)
	[ $((t2 - t1)) -lt $((1 << 20)) ]; ok $? "reference: under 1 MiB on the wire ($((t2 - t1)) bytes)"
	same ref_large plain_large "reference transcript == plain transcript (large)"
	"$TOOLS/accel_bare" off "$PIN"
	is "$(bpftool cgroup show "$CG" | grep -c bare_sockops)" 0 "accel_bare off: detached"
	is "$(ls "$PIN" | grep -c '^bare_')" 0 "accel_bare off: no pin left"
else
	diag "no $TOOLS/accel_bare: reference checks skipped"
fi

# 8. Cleanup removes every pin.
"$TOOLS/accel_ctl" cleanup "$PIN"
ok $? "accel_ctl cleanup"
is "$(ls "$PIN" 2>/dev/null | wc -l)" 0 "no pin left"
"$TOOLS/accel_ctl" stats "$PIN" >/dev/null 2>&1
is $? 1 "stats on a cleaned pin dir fails (ENOENT)"

done_testing
