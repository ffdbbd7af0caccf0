#!/usr/bin/env bash
# 34-agent-destroy.t — --destroy-stale=on (here through the environment the
# lab passes to its agents): when a backend leaves every Service, the
# established TCP connections of this node's pods to it are destroyed (the
# client sees ECONNABORTED) while other connections live on; new connections
# go to the remaining backends. A dual-stack client (AF_INET6 socket to the
# v4-mapped ClusterIP) is destroyed the same way. Default (off) is covered by 32: connections
# survive.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t34

st() {	# NAME VERSION NODE
	m_deploy "$1" "$3" "app: st, ver: \"$2\"" "$(m_ctr s s:9000 python3 "$PROBE" stream-tcp 9000)"
}
svc() {	# NAME SELECTOR
	m_svc "$1" "$2" "9000:s"
}
{
	st s1 1 node-b
	st s2 2 node-b
	st s3 3 node-a
	svc st 'app: st, ver: "1"'
	svc other 'app: st, ver: "3"'
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} > "$TMP/app.yaml"

ZH_AGENT_DESTROY_STALE=on lab_up "agents with destroy-stale on" -f "$TMP/app.yaml"
grep -q "destroy-stale on" /run/zerohop/$LAB/nodes/node-a/agent.log
ok $? "node-a's agent runs with destroy-stale on"
both_up() {
	lab_exec client python3 -c "import socket; socket.create_connection(('st', 9000), 1).recv(10); socket.create_connection(('other', 9000), 1).recv(10)" 2>/dev/null
}
wait_until 30 both_up

rm -f "$TMP/stop"
lab_exec client python3 "$PROBE" stream st 9000 "$TMP/stop" > "$TMP/s1.json" &
BG+=($!)
lab_exec client python3 "$PROBE" stream other 9000 "$TMP/stop" > "$TMP/s3.json" &
BG+=($!)
lab_exec client python3 "$PROBE" stream st 9000 "$TMP/stop" 6 > "$TMP/s1v6.json" &
BG+=($!)
streams_up() { [ "$(ip netns exec $LAB-p-default-client ss -Htn state established | wc -l)" -ge 3 ]; }
wait_until 15 streams_up	# all streams established (python starts slowly here)
sleep 0.3
svc st 'app: st, ver: "2"' > "$TMP/flip.yaml"
"$ZH" apply --lab $LAB -f "$TMP/flip.yaml" >/dev/null
ok $? "apply: Service st now selects s2 only (s1 leaves every Service)"
wait_for_file 4 "$TMP/s1.json"
is "$(jq -r .error "$TMP/s1.json" 2>/dev/null)" ECONNABORTED "the client's connection to s1 was destroyed: ECONNABORTED"
wait_for_file 4 "$TMP/s1v6.json"
is "$(jq -r .error "$TMP/s1v6.json" 2>/dev/null)" ECONNABORTED "the AF_INET6 (v4-mapped) connection to s1 too"
r=$(lab_exec client python3 -c "import socket; print(socket.create_connection(('st', 9000), 2).recv(100).decode().split()[0])")
case "$r" in s2-*) ok 0 "new connections to st reach s2 ($r)";; *) ok 1 "new connections to st reach s2 (got '$r')";; esac
sleep 0.5
touch "$TMP/stop"
wait "${BG[@]}" 2>/dev/null
BG=()
is "$(jq -r .error "$TMP/s3.json")" null "an unrelated connection (Service other) lives on"
ok $(jq -e '.lines > 100' "$TMP/s3.json" >/dev/null; echo $?) "and kept streaming ($(jq .lines "$TMP/s3.json") lines)"
grep -q "destroy-stale: 1 backends removed, [1-9]" /run/zerohop/$LAB/nodes/node-a/agent.log
ok $? "node-a's agent logged the destroyed sockets"
done_testing
