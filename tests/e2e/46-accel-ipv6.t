#!/usr/bin/env bash
# 46-accel-ipv6.t — the same-node short-circuit for native IPv6 connections
# (bpf/accel.bpf.c invariant 10; docs/accel.md "IPv6"), in a dual-stack lab
# (2 nodes, mesh on, acceleration on): a server and a client pod on node-a,
# another server on node-b. Checked with Python sockets (AF_INET6) and curl:
# bytes arrive whole and in order over the pod's IPv6 address, over the
# Service's IPv6 ClusterIP and over ::1 inside a pod, and those connections
# are in accel_sockhash6 (redirected messages counted) while a connection to
# node-b is not; the half-close cases of 45 over IPv6 (a FIN held back until
# the reader has drained its queue, both orders); the sockhashes empty once
# every connection is closed; the L4 signals count the short-circuited
# bytes of an IPv6 connection (istio_tcp_*_bytes_total, as for IPv4); and
# an IPv6 client of an L7 Service has its leg to the node proxy's IPv6
# listener short-circuited (accel_proxy6).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t46 curl
lab_test_tools accel_ctl
HALFCLOSE=$ROOT/tests/tools/halfclose.py

dual() { M_SPEC="ipFamilyPolicy: PreferDualStack" m_svc "$@"; }
ECHO="$ZH echo --tcp [::]:9000 --http [::]:8080"
{
	m_cluster t46 "node-a node-b" dual
	m_pod srv node-a "app: srv" "$(m_ctr e "tcp:9000 http:8080" $ECHO)"
	m_pod far node-b "app: far" "$(m_ctr e "tcp:9000 http:8080" $ECHO)"
	m_pod cli node-a "app: cli" "$(m_ctr c "" sleep 100000)"
	m_pod meter node-a "app: meter" "$(m_ctr c "" sleep 100000)"	# signals6's only
	dual srv "app: srv" "tcp=9000:9000 http=80:8080"
	dual srv7 "app: srv" "http=80:8080" "" 'zerohop.io/l7: "true"'
} >"$TMP/app.yaml"
lab_up "dual-stack, --accel on" --accel on -f "$TMP/app.yaml"
wait_until 30 lab_running 4 && wait_until 30 lab_synced node-a
ok $? "pods run, node-a's agent applied the state"

pod_ip6() { "$ZH" lab status --lab "$LAB" -o json | jq -r ".pods[] | select(.name==\"$1\") | .ip6"; }
SRV6=$(pod_ip6 srv) FAR6=$(pod_ip6 far)
V6=$(lab_svc_ips srv | cut -d' ' -f2)
diag "srv $SRV6, far $FAR6, Service srv $V6"
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
stat() { "$TOOLS/accel_ctl" stats "$PIN" | awk -F= -v k="$1" '$1 == k {print $2}'; }
keys6() { "$TOOLS/accel_ctl" keys "$PIN" | grep -c '^\['; }

# echo.py IP PORT SIZE RUNS [HOLD_S]: RUNS connections, each writes SIZE
# patterned bytes in 4 KiB writes and reads the echo back; prints how many
# came back different. HOLD_S: keep the last connection open that long
# after its echo (so the sockhash can be looked at).
cat >"$TMP/echo.py" <<'PY'
import socket, sys, time
ip, port, size, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
hold = float(sys.argv[5]) if len(sys.argv) > 5 else 0
bad = 0
for i in range(runs):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect((ip, port))
    data = bytes((i + j) & 255 for j in range(size))
    got = b""
    for off in range(0, size, 4096):
        s.sendall(data[off:off + 4096])
        while len(got) < min(off + 4096, size):
            b = s.recv(65536)
            if not b:
                break
            got += b
    if got != data:
        bad += 1
    if hold and i == runs - 1:
        print(bad, flush=True)
        time.sleep(hold)
    s.close()
if not hold:
    print(bad)
PY

case_pod_ip6() {
	local m0 s0 bad
	m0=$(stat msgs) s0=$(stat sockets)
	bad=$(lab_exec cli "$PY" "$TMP/echo.py" "$SRV6" 9000 65536 50)
	is "$bad" 0 "pod IPv6, same node: 50 connections echo 64 KiB each, every byte in order"
	ok $([ $(( $(stat sockets) - s0 )) -ge 100 ]; echo $?) \
		"  both ends of each entered the short-circuit ($(( $(stat sockets) - s0 )) sockets)"
	ok $([ $(( $(stat msgs) - m0 )) -ge 1600 ]; echo $?) \
		"  the bytes went through it ($(( $(stat msgs) - m0 )) messages redirected)"
}

case_held_open() {	# a live connection is in accel_sockhash6, both ends
	local n
	lab_exec cli "$PY" "$TMP/echo.py" "$SRV6" 9000 4096 1 3 >"$TMP/held" &
	wait_for_file 5 "$TMP/held"
	n=$(keys6)
	is "$n" 2 "an open IPv6 connection: its two sockets are in accel_sockhash6"
	"$TOOLS/accel_ctl" keys "$PIN" | grep '^\[' | sed 's/^/# /'
	wait
}

case_service_ip6() {
	local s0 bad
	s0=$(stat sockets)
	bad=$(lab_exec cli "$PY" "$TMP/echo.py" "$V6" 9000 16384 20)
	is "$bad" 0 "Service IPv6 ClusterIP, backend on the same node: 20 connections, every byte in order"
	ok $([ $(( $(stat sockets) - s0 )) -ge 40 ]; echo $?) "  short-circuited ($(( $(stat sockets) - s0 )) sockets)"
	is "$(lab_exec cli curl -6 -s -m 3 "http://[$V6]/?size=100000" | wc -c)" 100000 \
		"curl -6 to the Service's IPv6 ClusterIP (HTTP): a 100,000-byte body, whole"
}

case_loopback6() {
	local s0 bad
	s0=$(stat sockets)
	bad=$(lab_exec srv "$PY" "$TMP/echo.py" ::1 9000 16384 10)
	is "$bad" 0 "::1 inside a pod: 10 connections, every byte in order"
	ok $([ $(( $(stat sockets) - s0 )) -ge 20 ]; echo $?) "  short-circuited ($(( $(stat sockets) - s0 )) sockets)"
}

case_cross_node6() {
	local s0 bad
	s0=$(stat sockets)
	bad=$(lab_exec cli "$PY" "$TMP/echo.py" "$FAR6" 9000 16384 10)
	is "$bad" 0 "pod IPv6 on the other node: 10 connections, every byte in order"
	is "$(( $(stat sockets) - s0 ))" 0 "  none of them entered the short-circuit (one end elsewhere)"
}

case_halfclose6() {	# 45's client over IPv6: both orders of closing
	local m0 h0 short
	m0=$(stat msgs) h0=$(stat fin_held)
	short=$(lab_exec cli "$PY" "$HALFCLOSE" "$SRV6" 9000 4096 20 30)
	is "$short" 0 "IPv6, client half-closes, slow reader (the FIN comes first): 20 answers, every one whole"
	short=$(lab_exec cli "$PY" "$HALFCLOSE" "$SRV6" 8080 0 20 30 http)
	is "$short" 0 "IPv6, server closes first, client shuts down before reading: 20 answers, every one whole"
	ok $([ $(( $(stat fin_held) - h0 )) -ge 40 ]; echo $?) \
		"  the closing segments were held back until the queues were drained ($(( $(stat fin_held) - h0 )))"
	ok $([ $(( $(stat msgs) - m0 )) -ge 80 ]; echo $?) "  through the short-circuit ($(( $(stat msgs) - m0 )) messages)"
}

# metric NAME LABEL...: the sum of NAME's series on node-a's agent whose
# labels include every LABEL
metric() {
	local name=$1
	shift
	curl -s -m 3 --unix-socket "/run/zerohop/$LAB/nodes/node-a/agent.sock" http://x/metrics |
		awk -v n="$name" -v want="$*" '
			index($0, n "{") != 1 { next }
			{ k = split(want, w, " "); for (i = 1; i <= k; i++) if (index($0, w[i]) == 0) next; s += $NF }
			END { printf "%d\n", s }'
}

case_signals6() {	# short-circuited bytes are counted, as for IPv4
	local SRC='reporter="source" source_workload="meter"' b0 r0 want=$((20 * 65536))
	SRC="$SRC destination_service=\"srv.default.svc.cluster.local\""
	b0=$(metric istio_tcp_sent_bytes_total $SRC) r0=$(metric istio_tcp_received_bytes_total $SRC)
	lab_exec meter "$PY" "$TMP/echo.py" "$V6" 9000 65536 20 >/dev/null
	sent() { [ $(( $(metric istio_tcp_sent_bytes_total $SRC) - b0 )) -ge "$want" ]; }
	wait_until 10 sent
	ok $? "L4 signals: a client's sent bytes over the IPv6 ClusterIP count the short-circuited ones"
	is "$(( $(metric istio_tcp_sent_bytes_total $SRC) - b0 ))" "$want" "  exactly the bytes it wrote"
	is "$(( $(metric istio_tcp_received_bytes_total $SRC) - r0 ))" "$want" \
		"  and its received bytes exactly the echoed ones"
}

case_proxy_leg6() {	# an IPv6 client of an L7 Service: its leg to the proxy's IPv6 listener
	local p0 V7 body n
	V7=$(lab_svc_ips srv7 | cut -d' ' -f2)
	p0=$(stat proxy)
	lab_exec cli "$PY" -c "
import socket, time
s = socket.create_connection(('$V7', 80), timeout=5)
s.sendall(b'GET /?size=20000 HTTP/1.1\r\nHost: srv7\r\n\r\n')
got = b''
while b'\r\n\r\n' not in got or len(got.split(b'\r\n\r\n', 1)[1]) < 20000:
    b = s.recv(65536)
    if not b:
        break
    got += b
print(len(got.split(b'\r\n\r\n', 1)[1]), flush=True)
time.sleep(2)" >"$TMP/l7" &
	wait_for_file 5 "$TMP/l7"
	is "$(cat "$TMP/l7")" 20000 "L7 Service by its IPv6 ClusterIP from a pod: a 20,000-byte body through the node proxy"
	n=$("$TOOLS/accel_ctl" keys "$PIN" | grep -c ':15001\]*:*[0-9]*$\|\]:15001')
	ok $([ "$n" -ge 2 ]; echo $?) "  the client leg to the proxy's IPv6 listener is in accel_sockhash6, both ends ($n)"
	"$TOOLS/accel_ctl" keys "$PIN" | grep '15001' | sed 's/^/# /'
	ok $([ $(( $(stat proxy) - p0 )) -ge 2 ]; echo $?) "  counted as proxy legs ($(( $(stat proxy) - p0 )))"
	wait
}

case_drained() {
	drained() { [ "$(stat active)" = 0 ]; }
	wait_until 10 drained
	ok $? "every connection closed: both sockhashes are empty (active $(stat active))"
}

run_cases case_pod_ip6 case_held_open case_service_ip6 case_loopback6 case_cross_node6 case_halfclose6 \
	case_signals6 case_drained case_proxy_leg6
done_testing
