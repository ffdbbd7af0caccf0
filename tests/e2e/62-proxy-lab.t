#!/usr/bin/env bash
# 62-proxy-lab.t — capture mode in a lab (t62, no mesh): `zerohop proxy
# --node node-a` loads bpf/l7cap.bpf.c on the node's cgroup, pins the
# capture maps and listens on the node's fabric IP:15001. A client pod plays
# the agent's connect4 hook by hand (writes its socket cookie → ClusterIP:80
# into zh_l7cap_sock, then connects to the proxy); the proxy must recover
# the ClusterIP and route the request by the Service's HTTPRoute to an echo
# pod. Cleans up (proxy by PID, lab down) on every path.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t62 bpftool

{
	REPLICAS=2 m_deploy echo "" "app: echo" "$(m_img echo mendhak/http-https-echo http:8080)"
	m_svc echo "app: echo" "http=80:http" 10.96.0.62
	m_route echo echo <<'YAML'
  - filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-via, value: zerohop-proxy}]}}]
    backendRefs: [{name: echo, port: 80}]
YAML
	m_idle client node-a
} >"$TMP/m.yaml"
"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/m.yaml" >"$TMP/up.out" 2>&1
rc=$?
ok $rc "lab $LAB up (no mesh)"
[ $rc -eq 0 ] || { sed 's/^/# /' "$TMP/up.out"; done_testing; }
wait_until 10 lab_running 3

"$ZH" lab exec --lab $LAB --node node-a -- "$ZH" proxy --node node-a --lab $LAB \
	--access-log "$TMP/access.log" >"$TMP/proxy.out" 2>&1 &
wait_until 5 lab_listening $LAB-node-a 15001
PXPID=$(lab_listener_pid $LAB-node-a 15001)
[ -n "$PXPID" ] && BG+=($PXPID)
ok $([ -n "$PXPID" ]; echo $?) "proxy listens on node-a's fabric IP :15001 (pid ${PXPID:-none})"
[ -n "$PXPID" ] || { cat "$TMP/proxy.out"; done_testing; }
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
ok $([ -e $PIN/zh_l7cap_sock ] && [ -e $PIN/zh_l7cap_orig ]; echo $?) "capture maps pinned by name in $PIN"
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
bpftool cgroup show "$CG/zerohop-$LAB/node-a" 2>/dev/null | grep -q zh_l7cap_sockops
ok $? "sock_ops attached to the node cgroup"

# In the pod: open a socket, print its cookie, wait; the host (bpffs is not
# mounted in pods) records cookie → 10.96.0.62:80 as connect4 would; then
# the pod connects to the proxy and sends a request.
cat >"$TMP/client.py" <<'PY'
import socket, sys, re
s = socket.socket()
print(" ".join("%d" % b for b in s.getsockopt(socket.SOL_SOCKET, 57, 8)), flush=True)  # SO_COOKIE
sys.stdin.readline()
s.settimeout(5)
s.connect(("10.250.0.1", 15001))
s.sendall(b"GET /captured HTTP/1.1\r\nHost: echo\r\nConnection: close\r\n\r\n")
out = b""
while True:
    x = s.recv(65536)
    if not x: break
    out += x
via = re.search(rb'"x-via":"([^"]*)"', out)
print(out.split(b" ")[1].decode() if out else "none", via.group(1).decode() if via else "-")
PY
coproc CL { "$ZH" lab exec --lab $LAB client -- "$PY" "$TMP/client.py" 2>"$TMP/client.err"; }
exec {CL_R}<&"${CL[0]}" {CL_W}>&"${CL[1]}"	# (60-proxy-http.t: a coproc's fds go when it exits)
CL_P=$CL_PID
read -r -t 10 cookie <&$CL_R
bpftool map update pinned $PIN/zh_l7cap_sock key $cookie value 10 96 0 62 0 80 0 0
ok $? "cookie $cookie recorded as 10.96.0.62:80 (what connect4 will write)"
echo go >&$CL_W
read -r -t 10 out <&$CL_R
wait $CL_P 2>/dev/null
exec {CL_R}<&- {CL_W}>&-
is "$out" "200 zerohop-proxy" "redirected connection routed by its original ClusterIP through the HTTPRoute"
grep -q '"GET /captured HTTP/1.1" 200 .* default/echo#0 default/echo 10\.244\.' "$TMP/access.log"
ok $? "access log: route default/echo#0 → an echo pod endpoint"
cat >"$TMP/direct.py" <<'PY'
import socket
s = socket.create_connection(("10.250.0.1", 15001), timeout=3)
try:
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    print("closed" if s.recv(100) == b"" else "answered")
except (ConnectionResetError, BrokenPipeError):
    print("closed")  # the proxy may close before or while we send: a reset is a close too
PY
out=$("$ZH" lab exec --lab $LAB client -- "$PY" "$TMP/direct.py" 2>"$TMP/direct.err" </dev/null)
[ -s "$TMP/direct.err" ] && sed 's/^/# /' "$TMP/direct.err"
is "$out" "closed" "a connection without a recorded destination is closed"

kill "$PXPID"; sleep 0.3
bpftool cgroup show "$CG/zerohop-$LAB/node-a" 2>/dev/null | grep -q zh_l7cap_sockops
ok $((! $?)) "sock_ops detached when the proxy exits"
BG=()
"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $([ ! -e /sys/fs/bpf/zerohop/$LAB ]; echo $?) "lab down removes the pinned capture maps"
done_testing
