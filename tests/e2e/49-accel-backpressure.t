#!/usr/bin/env bash
# 49-accel-backpressure.t — the short-circuit's backpressure (docs/accel.md
# "Backpressure", bpf/accel.bpf.c invariant 13): a pod writes as fast as it
# can to a pod of the same node that sleeps 3 s before it reads. Without
# backpressure every byte joins the reader's short-circuit queue (all
# 64 MiB here in under 2 s; 200 MB in 3 s measured before). With it the
# writer's sk_msg program looks at the reader's queue once per MiB it sends
# and, deeper than the reader's SO_RCVBUF + 4 MiB, takes TCP, whose window
# then blocks it, until the reader has read every byte (then it comes back
# to the short-circuit). Checked: (1) the bytes send() took
# while the reader slept stay under a bound (rcvbuf + 4 MiB + 1 MiB on the
# short-circuit, then TCP's send buffer and window: ~10 MiB at most);
# (2) the stream arrives whole and in order (sha256 sent == read); (3)
# `backpressure` counted it; (4) a reader that keeps up, same amount, stays
# short-circuited (most messages redirected, every backpressure episode
# but a last one resumed); (5) (1)-(3) over native IPv6; (6) the way back
# keeps the order: readers that start 0.1-0.4 s late, each stream whole
# and in order across its backpressure episodes and resumptions.
# Fails on the code before invariant 13: (1) took 64 MiB, (3) counted 0.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t49
lab_test_tools accel_ctl
SR=$ROOT/tests/tools/slowread.py
TOTAL=$((64 << 20))
BOUND=$((12 << 20))

{
	m_cluster t49 "node-a node-b" dual	# dual-stack: (5) runs over IPv6
	m_pod srv node-a "" "$(m_ctr s "" sleep 100000)"
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
lab_up "dual-stack, --accel on" --accel on -f "$TMP/app.yaml"
wait_until 30 lab_running 2 && wait_until 30 lab_synced node-a
ok $? "pods run, node-a's agent applied the state"
ip=$(lab_pod_ip srv)
ip6=$("$ZH" lab status --lab "$LAB" -o json | jq -r '.pods[] | select(.name=="srv") | .ip6')
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
stat() { "$TOOLS/accel_ctl" stats "$PIN" | awk -F= -v k="$1" '$1 == k {print $2}'; }

# run_pair PORT SLEEP HASH [IP]: reader in srv, writer in cli (to srv's
# IPv4, or IP); outputs in $TMP
run_pair() {
	lab_exec srv "$PY" "$SR" read "$1" "$2" "$3" >"$TMP/read-$1" 2>&1 &
	PIDS+=($!)
	local rpid=$!
	sleep 0.5	# the reader's listen (the writer retries nothing)
	lab_exec cli timeout 150 "$PY" "$SR" write "${4:-$ip}" "$1" $TOTAL 2 $([ "$3" = 0 ] && echo go) \
		>"$TMP/write-$1" 2>&1
	wait $rpid
}

# (1)-(3): the sleeping reader
b0=$(stat backpressure) m0=$(stat msgs) r0=$(stat bp_resumed)
run_pair 9000 3 1
acc=$(awk '$1 == "accepted" {print $2}' "$TMP/write-9000")
read -r _ sent shs err < <(grep '^sent' "$TMP/write-9000")
read -r _ got shr < <(grep '^read' "$TMP/read-9000")
diag "sleeping reader: accepted ${acc:-?} B in 2 s (bound $BOUND), sent ${sent:-?} ($err), read ${got:-?}"
ok $([ -n "$acc" ] && [ "$acc" -lt $BOUND ]; echo $?) "(1) send() took $((${acc:-0} >> 20)) MiB while the reader slept (< $((BOUND >> 20)) MiB)"
is "$err" "-" "  the writer never saw an error (no ENOMEM)"
is "$got" "$TOTAL" "(2) the reader got every byte"
ok $([ -n "$shs" ] && [ "$shs" = "$shr" ]; echo $?) "  in order: sha256 of what was read == of what was sent"
bp=$(( $(stat backpressure) - b0 ))
ok $([ "$bp" -ge 1 ]; echo $?) "(3) counted in backpressure ($bp)"
diag "  the writer back on the short-circuit after the reader caught up: $(( $(stat bp_resumed) - r0 )) time(s)"
msgs=$(( $(stat msgs) - m0 ))
ok $([ "$msgs" -ge 1 ]; echo $?) "  the first bytes did go through the short-circuit ($msgs messages)"
"$ZH" get --lab "$LAB" stats 2>&1 | grep -q accel_backpressure
ok $? "zerohop get stats shows accel_backpressure"

# (4): a reader that keeps up stays on the short-circuit. The writer
# waits for the reader's "g" (sent as it enters its read loop), so it does
# not start while the reader is still waking from accept(). On this loaded
# 2-vCPU VM a reader descheduled long enough for the writer to get 4 MiB
# ahead does go into backpressure (the bound is a queue depth, not a
# rate): the writer then takes TCP until the reader has read everything,
# and comes back. So: most messages short-circuited, every episode over.
b0=$(stat backpressure) r0=$(stat bp_resumed) m0=$(stat msgs) f0=$(stat fallbacks)
run_pair 9001 0 0
read -r _ got _ < <(grep '^read' "$TMP/read-9001")
msgs=$(( $(stat msgs) - m0 )) fb=$(( $(stat fallbacks) - f0 ))
bp=$(( $(stat backpressure) - b0 )) res=$(( $(stat bp_resumed) - r0 ))
diag "fast reader: $msgs messages redirected, $fb on TCP, $bp backpressure, $res resumed"
is "$got" "$TOTAL" "(4) fast reader: every byte read"
ok $([ "$msgs" -ge 100 ] && [ "$msgs" -ge $((9 * fb)) ]; echo $?) "  short-circuited: $msgs messages, $fb on TCP (<= 10 %)"
ok $([ "$res" -ge $((bp - 1)) ]; echo $?) "  every backpressure episode but the last ended ($bp, $res resumed)"

# (5): the same sleeping reader over native IPv6 (accel_sockhash6, accel_rxq6)
b0=$(stat backpressure) m0=$(stat msgs)
run_pair 9002 3 1 "$ip6"
acc=$(awk '$1 == "accepted" {print $2}' "$TMP/write-9002")
read -r _ sent shs err < <(grep '^sent' "$TMP/write-9002")
read -r _ got shr < <(grep '^read' "$TMP/read-9002")
diag "IPv6 [$ip6], sleeping reader: accepted ${acc:-?} B in 2 s, sent ${sent:-?} ($err), read ${got:-?}"
ok $([ -n "$acc" ] && [ "$acc" -lt $BOUND ]; echo $?) "(5) IPv6: send() took $((${acc:-0} >> 20)) MiB while the reader slept (< $((BOUND >> 20)) MiB)"
ok $([ "$got" = "$TOTAL" ] && [ -n "$shs" ] && [ "$shs" = "$shr" ]; echo $?) "  every byte, in order (sha256)"
msgs=$(( $(stat msgs) - m0 )) bp=$(( $(stat backpressure) - b0 ))
ok $([ "$msgs" -ge 1 ] && [ "$bp" -ge 1 ]; echo $?) "  short-circuited first ($msgs messages), then counted in backpressure ($bp)"

# (6): back and forth. Each reader starts late (0.1-0.4 s), so its writer
# goes into backpressure, comes back once the reader has caught up, and
# may go again; every stream must still arrive whole and in order.
b0=$(stat backpressure) r0=$(stat bp_resumed) bad=0
for i in 1 2 3 4; do
	run_pair $((9020 + i)) 0.$i 1
	read -r _ _ shs _ < <(grep '^sent' "$TMP/write-$((9020 + i))")
	read -r _ got shr < <(grep '^read' "$TMP/read-$((9020 + i))")
	[ "$got" = "$TOTAL" ] && [ -n "$shs" ] && [ "$shs" = "$shr" ] || bad=$((bad + 1))
done
bp=$(( $(stat backpressure) - b0 )) res=$(( $(stat bp_resumed) - r0 ))
diag "late readers: $bp backpressure episodes, $res resumed"
is "$bad" 0 "(6) 4 late readers: every stream whole and in order (sha256)"
ok $([ "$res" -ge 1 ]; echo $?) "  across backpressure ($bp) and back to the short-circuit ($res)"
done_testing
