#!/usr/bin/env bash
# 67-proxy-mesh.t — transparent capture into the node L7 proxy, end to end
# (lab t67, 2 nodes, mesh on): the lab starts `zerohop proxy` on every node;
# the agent's connect4 sends a pod's TCP connection to an L7 Service (an
# HTTPRoute with matches, or the zerohop.io/l7 annotation) to its node's
# proxy, which routes each request. Checked from a client pod on node-a by
# ClusterIP, backends web-v1 on node-a and web-v2 on node-b:
#   path and header matches pick the right backend; a weighted rule and a
#   TrafficSplit on an annotated Service split per request on ONE keep-alive
#   connection (binomial 99.999 % bounds); an annotated Service without a route
#   goes to its own endpoints; getpeername shows the ClusterIP; a plain L4
#   Service never touches the proxy (counters unchanged, the backend sees the
#   client pod's address); killing the proxy by PID: the lab restarts it,
#   connections meanwhile are refused (never bypassed), then work again;
#   `get routes` says enforced; after `agent --cleanup` and a new agent the
#   running proxy registers on the new capture maps; `lab down` leaves no
#   proxy, pin or cgroup.
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup "${ZH_T67_LAB:-t67}" curl
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)

deploy() {	# NAME NODE VERSION
	cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: 1
  selector: {matchLabels: {version: $3}}
  template:
    metadata: {labels: {app: web, version: $3}}
    spec:
      nodeName: $2
      containers: [{name: echo, image: mendhak/http-https-echo, ports: [{name: http, containerPort: 8080}]}]
---
YAML
}
svc() {	# NAME CLUSTERIP SELECTOR [ANNOTATIONS]
	m_svc "$1" "$3" "http=80:http" "$2" "$4"
}
{
	deploy web-v1 node-a v1
	deploy web-v2 node-b v2
	svc web 10.96.0.67 "app: web"
	svc web-v1 10.96.0.71 "version: v1"
	svc web-v2 10.96.0.72 "version: v2"
	svc plain 10.96.0.73 "version: v1"
	svc ann 10.96.0.74 "version: v2" 'zerohop.io/l7: "true"'
	svc ann-split 10.96.0.75 "app: web" 'zerohop.io/l7: "true"'
	m_route web web <<'YAML'
  - matches: [{path: {type: PathPrefix, value: /v2}}]
    backendRefs: [{name: web-v2, port: 80}]
  - matches: [{headers: [{name: x-version, value: canary}]}]
    backendRefs: [{name: web-v2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /split}}]
    backendRefs: [{name: web-v1, port: 80, weight: 1}, {name: web-v2, port: 80, weight: 3}]
  - backendRefs: [{name: web-v1, port: 80}]
YAML
	cat <<'YAML'
apiVersion: split.smi-spec.io/v1alpha2
kind: TrafficSplit
metadata: {name: ann-split}
spec:
  service: ann-split
  backends: [{service: web-v1, weight: 1}, {service: web-v2, weight: 1}]
---
YAML
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/m.yaml"

lab_up "with the mesh" -f "$TMP/m.yaml"

st() { "$ZH" lab status --lab $LAB -o json; }
NODE_A_IP=$(st | jq -r '.nodes[] | select(.name=="node-a") | .ip')
# the proxy's upstream source: node-a's proxy address, .1 of its pod range
# (docs/policy.md "L7 Services")
PXA=$(st | jq -r '.nodes[] | select(.name=="node-a") | .podCIDR' | awk -F'[./]' '{print $1"."$2"."$3"."$4+1}')
for n in node-a node-b; do
	P=$(lab_proxy_pid $n)
	ok $([ "$P" -gt 0 ] 2>/dev/null && [ -e /proc/$P ]; echo $?) "proxy of $n runs (pid $P)"
	is "$(grep '^0::' /proc/$P/cgroup)" "0::/zerohop-$LAB/system/proxy-$n" \
		"... in its own lab cgroup under system/, not under the node's"
	is "$(readlink /proc/$P/ns/net)" "$(ip netns exec $LAB-$n readlink /proc/self/ns/net)" \
		"... in $n's network namespace"
done
"$ZH" lab status --lab $LAB | grep -Eq "^NODE .* PROXY +PID$"
ok $? "lab status shows PROXY state and PID columns"
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
ok $([ -e $PIN/zh_l7cap_sock ] && [ -e $PIN/zh_l7cap_orig ] && [ -e $PIN/zh_l7cap_cfg ]; echo $?) \
	"capture maps pinned in $PIN"

# The client: request lines "PATH [HEADER: VALUE]" on one keep-alive
# connection (tests/tools/clients/http_keepalive.py)
req() {	# VIP then request lines on stdin
	lab_exec client "$PY" "$ROOT/tests/tools/clients/http_keepalive.py" "$1" 80 2>>"$TMP/cl.err"
}
px_stat() {	# NODE METRIC: sum of the proxy's counter
	"$ZH" lab exec --lab $LAB --node $1 -- curl -s -m 3 \
		"http://$(st | jq -r ".nodes[] | select(.name==\"$1\") | .ip"):15090/" |
		awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'
}
agent_stat() { "$ZH" get --lab $LAB stats -o json | jq ".\"node-a\".$1"; }

# ---- routing by path and header ---------------------------------------------
out=$(printf '/\n/v2/x\n/ x-version: canary\n/other x-version: stable\n' | req 10.96.0.67)
is "$(echo "$out" | head -1)" "peer 10.96.0.67:80" "getpeername shows the ClusterIP, not the proxy"
is "$(echo "$out" | sed 1d | awk '{ sub(/-[^-]*-[^-]*$/, "", $2); print $1, $2 }' | tr '\n' ' ')" \
	"200 web-v1 200 web-v2 200 web-v2 200 web-v1 " \
	"/ → v1, /v2/x → v2, x-version: canary → v2, other header → v1 (one keep-alive connection)"
is "$(echo "$out" | sed 1d | awk '{ print $3 }' | sort -u | tr '\n' ' ')" "$PXA " \
	"every request reached the backends from node-a's proxy (its address $PXA)"

# ---- per-request weighted split (1 : 3) on one connection ---------------------
N=400
out=$(for i in $(seq $N); do echo /split/$i; done | req 10.96.0.67)
v2=$(echo "$out" | grep -c ' web-v2-')
v1=$(echo "$out" | grep -c ' web-v1-')
is "$((v1 + v2))" "$N" "split: $N requests answered on one connection"
# 99.999 % binomial interval around 3/4 of 400: 300 ± 4.417 * 8.66
ok $([ "$v2" -ge 262 ] && [ "$v2" -le 338 ]; echo $?) "split: web-v2 got $v2 of $N (want 262..338, weight 3 of 4)"

# ---- annotated Services: own endpoints, TrafficSplit per request --------------
out=$(for i in $(seq 20); do echo /a; done | req 10.96.0.74)
is "$(echo "$out" | sed 1d | awk '{ sub(/-[^-]*-[^-]*$/, "", $2); print $1, $2, $3 }' | sort -u)" \
	"200 web-v2 $PXA" "annotated Service, no route: every request to its own endpoint, via the proxy"
N=200
out=$(for i in $(seq $N); do echo /s; done | req 10.96.0.75)
v1=$(echo "$out" | grep -c ' web-v1-')
v2=$(echo "$out" | grep -c ' web-v2-')
is "$((v1 + v2))" "$N" "TrafficSplit on an annotated Service: $N requests on one connection"
# 99.999 %: 100 ± 4.417 * 7.07
ok $([ "$v1" -ge 69 ] && [ "$v1" -le 131 ]; echo $?) "TrafficSplit 1:1 per request: web-v1 got $v1 of $N (want 69..131)"

# ---- a plain L4 Service never touches the proxy --------------------------------
c0=$(px_stat node-a zerohop_proxy_connections_total)
r0=$(agent_stat connect_l7_redirect)
out=$(for i in $(seq 10); do echo /; done | req 10.96.0.73)
c1=$(px_stat node-a zerohop_proxy_connections_total)
r1=$(agent_stat connect_l7_redirect)
CLIENT_IP=$(st | jq -r '.pods[] | select(.name=="client") | .ip')
is "$(echo "$out" | sed 1d | awk '{ print $1, $3 }' | sort -u)" "200 $CLIENT_IP" \
	"plain Service: the backend sees the client pod ($CLIENT_IP), not the proxy"
ok $([ "$c0" -gt 0 ] && [ "$c0" = "$c1" ]; echo $?) "plain Service: proxy connection counter unchanged ($c0 → $c1)"
is "$r1" "$r0" "plain Service: connect_l7_redirect unchanged ($r0)"
out=$(echo / | req 10.96.0.67)
r2=$(agent_stat connect_l7_redirect)
ok $([ "$r2" -gt "$r1" ]; echo $?) "an L7 Service connection counts connect_l7_redirect ($r1 → $r2)"

# ---- get routes / services -------------------------------------------------------
"$ZH" get --lab $LAB routes | grep -E "^default +web " | grep -q "enforced by the node L7 proxy"
ok $? "get routes: the route is enforced by the node L7 proxy"
is "$("$ZH" get --lab $LAB services -o json | jq -c '[.[] | select(.name | test("^(web|plain|ann|ann-split)$")) | .name + "=" + (.l7Proxy | tostring)] | sort')" \
	'["ann-split=true","ann=true","plain=false","web=true"]' "get services: which Services go through the node proxy"

# ---- the proxy killed by PID: refused meanwhile, restarted, works again -------
cat >"$TMP/loop.py" <<'PY'
import socket, sys, time, errno
end = time.time() + float(sys.argv[1])
seen = {}
while time.time() < end:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("10.96.0.67", 80))
        s.sendall(b"GET /v2 HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
        d = b""
        while True:
            x = s.recv(65536)
            if not x: break
            d += x
        if not d:
            k = "closed"	# in flight when the proxy died
        elif b'"hostname":"web-v2-' in d and ('"remote":"%s:' % sys.argv[2]).encode() in d:
            k = "ok-v2"		# routed by the proxy (/v2 -> web-v2, from the node's IP)
        else:
            k = "other"		# anything else, e.g. an L4 bypass (remote = the pod)
    except OSError as e:
        k = errno.errorcode.get(e.errno, str(e))
    s.close()
    seen[k] = seen.get(k, 0) + 1
    time.sleep(0.01)
print(" ".join("%s=%d" % kv for kv in sorted(seen.items())))
PY
P0=$(lab_proxy_pid node-a)
lab_exec client "$PY" "$TMP/loop.py" 3 "$PXA" >"$TMP/loop.out" 2>&1 &
LOOP=$!
sleep 1
kill "$P0"
wait $LOOP
diag "connections while node-a's proxy was killed and restarted: $(cat "$TMP/loop.out")"
# Allowed: refused (proxy down), reset/closed (in flight when it died),
# routed by the proxy. Never an answer that did not come through it.
ok $(grep -qE '^(ECONNREFUSED=[0-9]+ )(ECONNRESET=[0-9]+ )?(closed=[0-9]+ )?ok-v2=[0-9]+$' "$TMP/loop.out"; echo $?) \
	"proxy down: connections refused, never bypassed; every other one routed by the proxy"
proxy_back() { lab_proxy_replaced node-a "$P0" && lab_listening $LAB-node-a 15001; }
wait_until 10 proxy_back
P1=$(lab_proxy_pid node-a)
ok $([ "$P1" -gt 0 ] 2>/dev/null && [ "$P1" != "$P0" ]; echo $?) "the lab restarted the proxy ($P0 → $P1)"
out=$(printf '/v2\n/\n' | req 10.96.0.67)
is "$(echo "$out" | sed 1d | awk '{ sub(/-[^-]*-[^-]*$/, "", $2); print $1, $2 }' | tr '\n' ' ')" \
	"200 web-v2 200 web-v1 " "after the restart requests are routed again"

# ---- agent --cleanup under a live proxy: the proxy registers on the new maps ----------
# (the agent killed by PID, its pins removed; the lab restarts it and the new
# agent creates fresh capture maps; the proxy notices within a second)
A0=$(lab_agent_pid node-a)
kill "$A0"
# (not under `ip netns exec`: it mounts a fresh /sys, which hides /sys/fs/bpf)
"$ZH" agent --cleanup --node node-a --lab $LAB >"$TMP/cleanup.out" 2>&1
ok $? "agent --cleanup on node-a with its proxy still running"
agent_back() { lab_agent_replaced node-a "$A0" && [ -e /sys/fs/bpf/zerohop/$LAB/node-a/zh_l7cap_cfg ]; }
wait_until 10 agent_back
A1=$(lab_agent_pid node-a)
ok $([ "$A1" -gt 0 ] 2>/dev/null && [ "$A1" != "$A0" ]; echo $?) "the lab restarted the agent ($A0 → $A1)"
got=""
for i in $(seq 30); do
	out=$(printf '/v2\n/\n' | req 10.96.0.67)
	got=$(echo "$out" | sed 1d | awk '{ sub(/-[^-]*-[^-]*$/, "", $2); print $1, $2 }' | tr '\n' ' ')
	[ "$got" = "200 web-v2 200 web-v1 " ] && break
	sleep 0.2
done
is "$got" "200 web-v2 200 web-v1 " "L7 requests routed again without a proxy restart (after $i tries)"
is "$(lab_proxy_pid node-a)" "$P1" "  the same proxy process ($P1)"
grep -q "registered again" "/run/zerohop/$LAB/nodes/node-a/proxy.log" 2>/dev/null
ok $? "  the proxy logged that it registered on the new maps"

# ---- lab down leaves nothing --------------------------------------------------------
PX_PIDS="$P1 $(lab_proxy_pid node-b)"
"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
alive=
for p in $PX_PIDS; do
	s=$(awk '{print $3}' /proc/$p/stat 2>/dev/null)
	[ -n "$s" ] && [ "$s" != Z ] && alive="$alive $p"
done
is "$alive" "" "no proxy process left"
ok $([ ! -e /sys/fs/bpf/zerohop/$LAB ]; echo $?) "no pins left"
ok $([ ! -e "$CG/zerohop-$LAB" ]; echo $?) "no cgroups left"
done_testing
