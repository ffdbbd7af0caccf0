#!/usr/bin/env bash
# 45-accel-halfclose.t — clients that half-close under the short-circuit:
# write the request, shutdown(SHUT_WR), read the answer until EOF (nc -N,
# HTTP/1.0-era clients, some RPC framings), against `zerohop echo` on the
# same node, new connection each.
# The answer is redirected into the client's short-circuit queue before the
# client shuts down; the server then reads EOF and closes, and its FIN would
# take the client's socket FIN_WAIT2 -> TIME_WAIT -> TCP_CLOSE, where kernel
# 6.18 purges that queue unread. bpf/accel.bpf.c invariant 11 holds such a
# FIN back until the queue is drained. Checked: fast readers (the natural
# race, 4 KiB and 64 KiB) and a slow reader that pauses between shutdown and
# recv so the FIN always comes first (20 of 20 came back short without the
# hold), and that the hold did happen; plus the port opt-out
# (--accel-skip-ports) keeping such connections off the short-circuit.
# The other order too: an HTTP/1.0 server answers and closes first, and the
# client shuts down writing before it reads (busybox nc: the answer and the
# server's FIN arrive before it reads its stdin's EOF); the ACK of the
# client's FIN would end its socket, and is held the same way.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t45
lab_test_tools accel_ctl
HALFCLOSE=$ROOT/tests/tools/halfclose.py

{
	m_pod srv node-a "app: srv" "$(m_ctr e "tcp:9000 tcp2:9001 http:8080" "$ZH" echo --tcp 9000 --tcp 9001 --http 8080 --udp 0)"
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
lab_up "--accel on --accel-skip-ports 9001" --accel on --accel-skip-ports 9001 -f "$TMP/app.yaml"
ip=$(lab_pod_ip srv)
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
stat() { "$TOOLS/accel_ctl" stats "$PIN" | awk -F= -v k="$1" '$1 == k {print $2}'; }
s0=$(stat sockets)
short=$(lab_exec cli "$PY" "$HALFCLOSE" "$ip" 9001 4096 100)
is "$short" 0 "port opted out: 100 half-closed connections, every answer whole"
is "$(( $(stat sockets) - s0 ))" 0 "  and none of them entered the short-circuit"
m0=$(stat msgs) h0=$(stat fin_held)
short=$(lab_exec cli "$PY" "$HALFCLOSE" "$ip" 9000 4096 100)
is "$short" 0 "short-circuited port: 100 half-closed connections of 4 KiB, every answer whole"
short=$(lab_exec cli "$PY" "$HALFCLOSE" "$ip" 9000 65536 20)
is "$short" 0 "short-circuited port: 20 half-closed connections of 64 KiB, every answer whole"
short=$(lab_exec cli "$PY" "$HALFCLOSE" "$ip" 9000 4096 20 30 2>"$TMP/worst")
is "$short" 0 "slow reader (the FIN comes before it reads): 20 connections, every answer whole"
diag "  slowest of them, its own pauses subtracted: $(cat "$TMP/worst") (the FIN's retransmission)"
msgs=$(( $(stat msgs) - m0 )) held=$(( $(stat fin_held) - h0 ))
ok $([ "$msgs" -ge 120 ]; echo $?) "  through the short-circuit ($msgs messages redirected)"
ok $([ "$held" -ge 20 ]; echo $?) "  the server's FIN was held back until the reader had drained its queue ($held)"

# server closes first: request, pause (answer + FIN arrive: CLOSE_WAIT),
# shutdown (LAST_ACK), pause (the server's ACK arrives), then read
m0=$(stat msgs) h0=$(stat fin_held)
short=$(lab_exec cli "$PY" "$HALFCLOSE" "$ip" 8080 0 20 30 http)
is "$short" 0 "server closes first, client shuts down before reading: 20 HTTP/1.0 answers, every one whole"
msgs=$(( $(stat msgs) - m0 )) held=$(( $(stat fin_held) - h0 ))
ok $([ "$msgs" -ge 40 ]; echo $?) "  through the short-circuit ($msgs messages redirected)"
ok $([ "$held" -ge 20 ]; echo $?) "  the ACK of the client's FIN was held back until it had drained its queue ($held)"
short=$(lab_exec cli busybox sh -c 'for i in $(seq 20); do printf "GET / HTTP/1.0\r\n\r\n" | nc -w 3 "$0" 8080 | tail -1 | grep -q "}$" || echo x; done' "$ip" | grep -c x)
is "$short" 0 "busybox nc (shuts down on its stdin's EOF): 20 HTTP/1.0 answers, every one whole"
done_testing
