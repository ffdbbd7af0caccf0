#!/usr/bin/env bash
# 44-accel-proxy.t — the same-node short-circuit on both legs of an L7
# request through the node proxy (docs/accel.md "Node proxy legs"), in the
# lab (2 nodes, mesh on), with `--accel off` and `--accel on`:
#  - the lab gives the agent the proxy's cgroup (--proxy-cgroup); with accel
#    on the agent pins the proxy links and lists the proxy's endpoints;
#  - one keep-alive connection from a client pod to an L7 Service (backend
#    on the same node, tests/tools/px_accel_http.py): a 4 MiB body, a chunked
#    response, a close-delimited one (re-chunked by the proxy), request
#    bodies with Content-Length and chunked, three pipelined requests;
#    every body checked byte for byte, and the transcript with accel on is
#    the one with accel off;
#  - with accel on, while that connection is open, the sockhash holds both
#    legs (client pod <-> NODE_IP:15001 and proxy address .1 <-> backend
#    pod, each from both ends), `accel_proxy_sockets` and the redirected
#    bytes move (`zerohop get stats`, accel_ctl stats);
#  - a backend on the other node: only the client leg is short-circuited;
#  - a policy change (NetworkPolicy applied) while a connection is held:
#    its short-circuited legs are demoted to the normal path (invariant 5
#    of bpf/accel.bpf.c) and the rest of its responses stay byte-exact;
#  - the proxy's SIGTERM drain with accel on: an in-flight slow request gets
#    its full answer with Connection: close, an idle keep-alive client is
#    closed, the proxy exits and the lab restarts it; after that restart,
#    and after a SIGKILL restart, requests are short-circuited and exact;
#  - `lab down` removes every pin (proxy links included) and the cgroups.
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup "${ZH_T44_LAB:-t44}"
lab_test_tools accel_ctl
HTTP=$ROOT/tests/tools/px_accel_http.py
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
VIP=10.96.0.44
FAR=10.96.0.45

backend() {	# NAME NODE APP
	m_pod "$1" "$2" "app: $3" "$(m_ctr s http:8080 "$PY" "$HTTP" server 8080)"
}
svc() {	# NAME CLUSTERIP APP
	m_svc "$1" "app: $3" "http=80:http" "$2" 'zerohop.io/l7: "true"'
}
{
	backend web node-a web
	backend far node-b far
	svc web $VIP web
	svc far $FAR far
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"

stat() { "$TOOLS/accel_ctl" stats "$PIN" 2>/dev/null | sed -n "s/^$1=//p"; }
inpod() { lab_exec cli timeout 60 "$PY" "$HTTP" "$@"; }
# run the client until the proxy answers (it may be restarting): OUT VIP
client_once() { inpod client "$2" 80 >"$1" 2>>"$TMP/client.err" && [ "$(grep -c ' OK$' "$1")" = 8 ]; }
client_ok() { wait_until 20 client_once "$@"; }

for mode in off on; do
	"$ZH" lab up --lab $LAB --accel $mode -f "$TMP/app.yaml" >"$TMP/up-$mode.log" 2>&1
	ok $? "lab up --accel $mode" || { sed 's/^/#   /' "$TMP/up-$mode.log"; continue; }
	PCG=$CG/zerohop-$LAB/system/proxy-node-a
	ok "$([ -d "$PCG" ]; echo $?)" "$mode: the lab made the proxy cgroup"
	grep -q -- "--proxy-cgroup $PCG" /run/zerohop/$LAB/nodes/node-a/agent.log
	ok $? "$mode: the agent was given --proxy-cgroup $PCG"
	CLI=$(lab_pod_ip cli); WEB=$(lab_pod_ip web); PXA=${WEB%.*}.1
	if [ $mode = on ]; then
		wait_until 5 test -e "$PIN/accel_sockops_proxy_link"
		ok "$([ -e "$PIN/accel_sockops_proxy_link" ] && [ -e "$PIN/accel_setsockopt_proxy_link" ]; echo $?)" \
			"on: the agent pinned the proxy cgroup links"
		wait_until 5 grep -q "accel proxy endpoint .*:15001" /run/zerohop/$LAB/nodes/node-a/agent.log
		grep -q "accel proxy endpoint .*:15001" /run/zerohop/$LAB/nodes/node-a/agent.log &&
			grep -q "accel proxy endpoint $PXA (any port)" /run/zerohop/$LAB/nodes/node-a/agent.log
		ok $? "on: the agent listed the capture address and the proxy address $PXA"
		s0=$(stat sockets); p0=$(stat proxy); b0=$(stat bytes)
	else
		ok "$([ ! -e "$PIN/accel_sockops_proxy_link" ]; echo $?)" "off: no proxy link pinned"
	fi

	# ---- same node: both legs ----
	rm -f "$TMP/held"
	inpod client $VIP 80 --hold "$TMP/held" >"$TMP/same-$mode" 2>"$TMP/same-$mode.err" &
	CP=$!
	WAIT_STEP=0.05 wait_until 5 test -e "$TMP/held"
	"$TOOLS/accel_ctl" keys "$PIN" >"$TMP/keys-$mode" 2>/dev/null
	wait $CP
	ok $? "$mode: keep-alive client through the proxy completed" || sed 's/^/#   /' "$TMP/same-$mode.err"
	is "$(grep -c ' OK$' "$TMP/same-$mode")" 8 "$mode: all 8 responses byte-exact"
	if [ $mode = on ]; then
		n1=$(grep -Ec "^$CLI:[0-9]+ [0-9.]+:15001\$" "$TMP/keys-on")
		n2=$(grep -Ec "^[0-9.]+:15001 $CLI:[0-9]+\$" "$TMP/keys-on")
		n3=$(grep -Ec "^$PXA:[0-9]+ $WEB:8080\$" "$TMP/keys-on")
		n4=$(grep -Ec "^$WEB:8080 $PXA:[0-9]+\$" "$TMP/keys-on")
		diag "sockhash during the request: client leg $n1/$n2, backend leg $n3/$n4"
		ok "$([ "$n1" -ge 1 ] && [ "$n2" -ge 1 ]; echo $?)" "on: client leg (pod <-> NODE_IP:15001) in the sockhash, both ends"
		ok "$([ "$n3" -ge 1 ] && [ "$n4" -ge 1 ]; echo $?)" "on: backend leg ($PXA <-> backend pod) in the sockhash, both ends"
		s1=$(stat sockets); p1=$(stat proxy); b1=$(stat bytes)
		diag "sockets $s0 -> $s1, proxy legs $p0 -> $p1, bytes $b0 -> $b1"
		ok "$([ $((p1 - p0)) -ge 4 ]; echo $?)" "on: accel_proxy_sockets moved by >= 4 ($((p1 - p0)))"
		# the 4 MiB body crosses both legs
		ok "$([ $((b1 - b0)) -ge $((8 << 20)) ]; echo $?)" "on: >= 8 MiB redirected ($((b1 - b0)))"
		"$ZH" get --lab $LAB stats -o json | jq -e '."node-a".accel_proxy_sockets >= 4' >/dev/null
		ok $? "on: zerohop get stats shows accel_proxy_sockets"
	fi

	# ---- backend on the other node: only the client leg ----
	p2=$(stat proxy)
	inpod client $FAR 80 >"$TMP/far-$mode" 2>"$TMP/far-$mode.err"
	ok $? "$mode: client to the far backend completed" || sed 's/^/#   /' "$TMP/far-$mode.err"
	is "$(grep -c ' OK$' "$TMP/far-$mode")" 8 "$mode: far backend: all 8 responses byte-exact"
	if [ $mode = on ]; then
		p3=$(stat proxy)
		is "$((p3 - p2))" 2 "on: far backend: only the client leg short-circuited (2 sockets)"
	fi

	if [ $mode = on ]; then
		# ---- a policy change demotes the held legs, bytes stay exact ----
		cat >"$TMP/np.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-open}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress: [{}]
YAML
		d0=$(stat demoted); m0=$(stat msgs)
		rm -f "$TMP/held"
		inpod client $VIP 80 --hold "$TMP/held" >"$TMP/gen-on" 2>"$TMP/gen-on.err" &
		CP=$!
		WAIT_STEP=0.05 wait_until 5 test -e "$TMP/held"
		"$ZH" apply --lab $LAB -f "$TMP/np.yaml" >/dev/null 2>&1
		WAIT_STEP=0.02 wait_until 4 lab_synced node-a
		wait $CP
		ok $? "policy change mid-connection: client completed" || sed 's/^/#   /' "$TMP/gen-on.err"
		cmp -s "$TMP/gen-on" "$TMP/same-on"
		ok $? "policy change mid-connection: same byte-exact transcript"
		d1=$(stat demoted); m1=$(stat msgs)
		diag "demoted $d0 -> $d1, msgs $m0 -> $m1"
		ok "$([ $((d1 - d0)) -ge 2 ]; echo $?)" \
			"policy change: the held proxy legs were demoted to the normal path ($((d1 - d0)) sockets)"

		# ---- SIGTERM drain with accel on ----
		P0=$(lab_proxy_pid node-a)
		inpod slow $VIP 80 1500 100000 >"$TMP/slow.out" 2>&1 &
		SP=$!
		inpod idle $VIP 80 20 >"$TMP/idle.out" 2>"$TMP/idle.err" &
		IP=$!
		sleep 0.7
		kill -TERM "$P0"
		wait $SP; wait $IP
		is "$(cat "$TMP/slow.out")" "slow 200 connection=close 100000 OK" \
			"drain: the in-flight request finished, byte-exact, with Connection: close"
		is "$(tail -1 "$TMP/idle.out")" "idle EOF" "drain: the idle keep-alive client was closed"
		diag "$(cat "$TMP/idle.err")"
		WAIT_STEP=0.05 wait_pid_gone 5 "$P0"
		ok "$(kill -0 "$P0" 2>/dev/null; [ $? -ne 0 ]; echo $?)" "drain: the proxy exited"
		wait_until 15 lab_proxy_replaced node-a "$P0"
		P1=$(lab_proxy_pid node-a)
		ok "$([ "$P1" != "$P0" ] && [ "$P1" != 0 ]; echo $?)" "drain: the lab restarted the proxy ($P0 -> $P1)"
		p4=$(stat proxy)
		client_ok "$TMP/after-drain" $VIP
		ok $? "after the drain restart: all responses byte-exact"
		cmp -s "$TMP/after-drain" "$TMP/same-on"; ok $? "after the drain restart: same transcript"
		p5=$(stat proxy)
		ok "$([ $((p5 - p4)) -ge 4 ]; echo $?)" "after the drain restart: both legs short-circuited again ($((p5 - p4)))"

		# ---- SIGKILL restart ----
		kill -KILL "$P1"
		wait_until 15 lab_proxy_replaced node-a "$P1"
		P2=$(lab_proxy_pid node-a)
		ok "$([ "$P2" != "$P1" ] && [ "$P2" != 0 ]; echo $?)" "kill: the lab restarted the proxy ($P1 -> $P2)"
		client_ok "$TMP/after-kill" $VIP
		ok $? "after the kill restart: all responses byte-exact"
		p6=$(stat proxy)
		ok "$([ $((p6 - p5)) -ge 4 ]; echo $?)" "after the kill restart: both legs short-circuited again ($((p6 - p5)))"
	fi
	"$ZH" lab down --lab $LAB >/dev/null 2>&1
	ok $? "$mode: lab down"
done

if cmp -s "$TMP/same-on" "$TMP/same-off"; then ok 0 "same node: ON transcript == OFF"; else
	ok 1 "same node: ON transcript == OFF"; diff "$TMP/same-off" "$TMP/same-on" | sed 's/^/#   /'; fi
if cmp -s "$TMP/far-on" "$TMP/far-off"; then ok 0 "far backend: ON transcript == OFF"; else
	ok 1 "far backend: ON transcript == OFF"; diff "$TMP/far-off" "$TMP/far-on" | sed 's/^/#   /'; fi
is "$(ls /sys/fs/bpf/zerohop/$LAB 2>/dev/null | wc -l)" 0 "lab down removed the pins (proxy links included)"
ok "$([ ! -d "$CG/zerohop-$LAB" ]; echo $?)" "lab down removed the lab's cgroups"
done_testing
