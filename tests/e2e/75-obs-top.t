#!/usr/bin/env bash
# 75-obs-top.t — `zerohop top` (lab t75, 2 nodes, mesh on) while bench
# drives an L7 Service (web: echo on node-b answering status=503:20,
# retries off) at 50 req/s on keep-alive connections and an L4 Service (db:
# echo on node-a) at 20 new connections/s: under tmux the table shows both
# Services and redraws in place (its clock moves), q quits; piped it prints
# one table and exits; -o json is valid and its numbers match the load
# (rps, success rate near 80 %, p99, connections/s).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
source "$(dirname "$0")/../lib/obs_lab.sh"
lab_test_setup t75 tmux

{
	m_echo web node-b
	m_echo db node-a
	REPLICAS=1 m_deploy client node-a "app: client" "$(m_ctr shell "" sleep infinity)"
	m_l7_svc web 10.96.0.75
	m_svc db "name: db" "http=80:http" 10.96.0.76
} >"$TMP/m.yaml"
TMUX_S=zh-$LAB
lab_test_more_cleanup() { tmux kill-session -t "$TMUX_S" 2>/dev/null; }
obs_lab_up
wait_until 10 lab_running 4

obs_load 12 'http://10.96.0.75/?status=503:20' 50 http://10.96.0.76/ 20
sleep 1.5

"$ZH" top --lab $LAB --interval 2 -o json >"$TMP/top.json"
ok $? "top -o json (one 2 s window)"
jq -e . "$TMP/top.json" >/dev/null
ok $? "valid JSON"
web() { jq -r ".rows[] | select(.service == \"web.default.svc.cluster.local\") | .$1" "$TMP/top.json"; }
db() { jq -r ".rows[] | select(.service == \"db.default.svc.cluster.local\") | .$1" "$TMP/top.json"; }
diag "web: rps $(web rps) success $(web success_rate) p50 $(web p50_ms) p99 $(web p99_ms); db: conn/s $(db tcp_conns_per_second)"
is "$(web l7)" true "web is an L7 Service (requests seen by the proxy)"
ok $(awk -v v="$(web rps)" 'BEGIN { exit !(v >= 35 && v <= 65) }'; echo $?) "web rps $(web rps) ≈ 50"
ok $(awk -v v="$(web success_rate)" 'BEGIN { exit !(v >= 0.6 && v <= 0.95) }'; echo $?) \
	"web success rate $(web success_rate) ≈ 0.8 (status=503:20)"
ok $(awk -v a="$(web p50_ms)" -v b="$(web p99_ms)" 'BEGIN { exit !(a > 0 && b >= a && b < 10000) }'; echo $?) \
	"web p50 $(web p50_ms) ms <= p99 $(web p99_ms) ms"
is "$(db l7)" false "db is L4 only"
is "$(db success_rate)" null "db: no success rate (no L7)"
ok $(awk -v v="$(db tcp_conns_per_second)" 'BEGIN { exit !(v >= 12 && v <= 28) }'; echo $?) \
	"db new connections/s $(db tcp_conns_per_second) ≈ 20"

out=$("$ZH" top --lab $LAB --interval 1 | cat)
ok $? "top piped: exits after one table"
echo "$out" | grep -q $'\033'
ok $((! $?)) "piped: no terminal escapes"
echo "$out" | grep -q "^SERVICE .*RPS .*SUCCESS .*P99ms" && echo "$out" | grep -q "^web.default.svc.cluster.local "
ok $? "piped: header and the web row"

tmux new-session -d -s "$TMUX_S" -x 160 -y 30 "$ZH top --lab $LAB --interval 1"
ok $? "top under tmux"
pane() { tmux capture-pane -p -t "$TMUX_S"; }
has_rows() { pane | grep -q "^web.default.svc.cluster.local" && pane | grep -q "^db.default.svc.cluster.local"; }
wait_until 5 has_rows
ok $? "the screen shows web and db"
clock() { pane | sed -n 's/.* — \([0-9:]*\), every.*/\1/p'; }
c1=$(clock)
moved() { [ -n "$(clock)" ] && [ "$(clock)" != "$c1" ]; }
wait_until 4 moved
ok $? "redrawn in place (clock $c1 → $(clock))"
is "$(pane | grep -c '^SERVICE')" 1 "one header on the screen (in place, not scrolling)"
tmux send-keys -t "$TMUX_S" q
gone() { ! tmux has-session -t "$TMUX_S" 2>/dev/null; }
wait_until 4 gone
ok $? "q quits"
done_testing
