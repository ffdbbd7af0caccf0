#!/usr/bin/env bash
# 45-accel-halfclose.t — clients that half-close under the short-circuit:
# write the request, shutdown(SHUT_WR), read the answer until EOF (nc -N,
# HTTP/1.0-era clients, some RPC framings), against `zerohop echo` on the
# same node, 100 new connections of 4 KiB.
# Known limit (docs/accel.md "Known limits", bpf/accel.bpf.c invariant 6):
# an answer redirected into the client's socket before the client shut down
# writing is lost when the server's FIN takes that socket to TCP_CLOSE before
# the client read it (kernel 6.18 purges the socket's short-circuit queue at
# TCP_CLOSE). Measured here: most such connections come back short. The
# documented workaround, the port opt-out (--accel-skip-ports), must make
# every answer whole; the count without it is printed, not asserted, until
# the datapath closes the window.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t45
lab_test_tools accel_ctl

{
	m_pod srv node-a "app: srv" "$(m_ctr e "tcp:9000 tcp2:9001" "$ZH" echo --tcp 9000 --tcp 9001 --http 0 --udp 0)"
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
"$ZH" lab up --lab $LAB --accel on --accel-skip-ports 9001 -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up --accel on --accel-skip-ports 9001" || { cat "$TMP/up.log"; done_testing; }
cat >"$TMP/hc.py" <<'PY'
import socket, sys
ip, port, size, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = bytes(range(256)) * (size // 256)
short = 0
for i in range(runs):
    s = socket.create_connection((ip, port), timeout=10)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    if got != data:
        short += 1
print(short)
PY
ip=$(lab_pod_ip srv)
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
stat() { "$TOOLS/accel_ctl" stats "$PIN" | awk -F= -v k="$1" '$1 == k {print $2}'; }
s0=$(stat sockets)
short=$(lab_exec cli "$PY" "$TMP/hc.py" "$ip" 9001 4096 100)
is "$short" 0 "port opted out: 100 half-closed connections, every answer whole"
is "$(( $(stat sockets) - s0 ))" 0 "  and none of them entered the short-circuit"
m0=$(stat msgs)
short=$(lab_exec cli "$PY" "$TMP/hc.py" "$ip" 9000 4096 100)
ok $([ -n "$short" ]; echo $?) "short-circuited port: 100 half-closed connections ran"
diag "KNOWN LIMIT: $short of 100 half-closed connections got a short answer with the short-circuit (+$(( $(stat msgs) - m0 )) messages)"
done_testing
