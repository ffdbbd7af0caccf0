#!/usr/bin/env bash
# 76-obs-dashboard.t — `zerohop dashboard` in headless Chromium (lab t76,
# 2 nodes, mesh on). Load: bench from a client Deployment to an L7 Service
# (web, echo on node-b answering status=503:20, retries off) and to an L4
# Service (db, echo on node-a); a NetworkPolicy-denied connect (to db: an L7
# Service's policy is judged per request by the proxy) and a connect
# to a Service without endpoints make two drops. The dashboard (loopback,
# ephemeral port) must serve a snapshot with the client -> web edge (live
# rps, success rate, p99), the client -> db edge (connections/s) and both
# drops; Chromium must load the page with no console error, and the page's
# DOM must show the workloads, the edges' live numbers and the drops. The
# screenshot is kept as build/test-artefacts/76-dashboard.png.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
source "$(dirname "$0")/../lib/obs_lab.sh"
lab_test_setup t76 curl chromium

{
	m_echo web node-b
	m_echo db node-a
	REPLICAS=1 m_deploy client node-a "app: client" "$(m_ctr shell "" sleep infinity)"
	m_pod blocked node-a "app: blocked" "$(m_ctr shell "" sleep infinity)"
	m_l7_svc web 10.96.0.77
	m_svc db "name: db" "http=80:http" 10.96.0.78
	m_svc empty "name: nothing" "http=80:8080" 10.96.0.79
	m_deny_egress blocked
} >"$TMP/m.yaml"
obs_lab_up
wait_until 10 lab_running 5

obs_load 60 'http://10.96.0.77/?status=503:20' 40 http://10.96.0.78/ 10
lab_exec blocked "$PY" "$ROOT/tests/tools/clients/connect_errno.py" 10.96.0.78
lab_exec deploy/client "$PY" "$ROOT/tests/tools/clients/connect_errno.py" 10.96.0.79

"$ZH" dashboard --lab $LAB --interval 1 >"$TMP/dash.out" 2>&1 &
DPID=$!
BG+=($DPID)
wait_until 5 grep -q '^dashboard: http://127.0.0.1:' "$TMP/dash.out"
URL=$(sed -n 's/^dashboard: \(http:[^ ]*\) .*/\1/p' "$TMP/dash.out")
ok $([ -n "$URL" ]; echo $?) "dashboard listens on loopback: $URL"
snap() { curl -s --max-time 3 "${URL}api/snapshot" >"$TMP/snap.json" && jq -e . "$TMP/snap.json" >/dev/null; }
edge() {	# DST FIELD
	jq -r ".edges.rows[] | select(.source == \"default/client\" and .destination == \"$1\") | .$2" "$TMP/snap.json"
}
live() { snap && awk -v v="$(edge default/web rps)" 'BEGIN { exit !(v > 20) }'; }
wait_until 8 live
ok $? "snapshot: client -> web at $(edge default/web rps) rps"
diag "web edge: success $(edge default/web success_rate), p99 $(edge default/web p99_ms) ms; db edge: $(edge default/db tcp_conns_per_second) conn/s"
# One window holds ~40 requests: 2 or fewer 503s out of 40 happens about once
# in 130 runs. The rate is therefore judged over six windows (~240 requests,
# the 0.95 bound is then 5 standard deviations away), weighted by their rps.
: >"$TMP/rates"
for i in 1 2 3 4 5 6; do
	snap && echo "$(edge default/web rps) $(edge default/web success_rate)" >>"$TMP/rates"
	sleep 1.1
done
RATE=$(awk 'NF == 2 && $2 != "null" { n += $1; ok += $1 * $2 } END { if (n) printf "%.4f", ok / n }' "$TMP/rates")
ok $(awk -v v="$RATE" 'BEGIN { exit !(v > 0.6 && v < 0.95) }'; echo $?) \
	"client -> web success rate $RATE over $(wc -l <"$TMP/rates") windows (503:20)"
ok $(awk -v v="$(edge default/db tcp_conns_per_second)" 'BEGIN { exit !(v > 3) }'; echo $?) \
	"client -> db: $(edge default/db tcp_conns_per_second) connections/s"
is "$(jq -r '[.drops[].reason] | sort | join(",")' "$TMP/snap.json")" "no_backend,policy" "snapshot: the two drops"

mkdir -p "$TMP/chrome"
chrome() {
	timeout 60 chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$TMP/chrome" --window-size=1300,1150 --virtual-time-budget=5000 \
		--enable-logging=stderr --v=0 "$@" "$URL" 2>>"$TMP/chrome.err"
}
chrome --dump-dom >"$TMP/dom.html"
ok $? "Chromium loaded the page"
grep -E 'CONSOLE|Uncaught' "$TMP/chrome.err" | sed 's/^/# /'
grep -qE 'CONSOLE.*(Uncaught|Error|error)|Uncaught' "$TMP/chrome.err"
ok $((! $?)) "no console error"
for n in default/client default/web default/db; do
	grep -q "class=\"node\"[^>]*>$n</text>" "$TMP/dom.html"
	ok $? "graph node $n"
done
grep -qE 'class="edge-label"[^>]*>[0-9.]+ rps [0-9.]+% p99 [0-9.]+ms</text>' "$TMP/dom.html"
ok $? "an L7 edge labelled with live rps, success rate and p99"
grep -qE 'class="edge-label"[^>]*>[0-9.]+ conn/s' "$TMP/dom.html"
ok $? "an L4 edge labelled with connections/s"
grep -qE 'class="edge drop"' "$TMP/dom.html"
ok $? "an edge with drops drawn as such"
grep -q '<td>policy</td>' "$TMP/dom.html" && grep -q '<td>no_backend</td>' "$TMP/dom.html"
ok $? "recent drops table: policy and no_backend"
grep -q '<td>web.default</td>' "$TMP/dom.html"
ok $? "services table lists web"

ART=$(dirname "$ZH")/test-artefacts
mkdir -p "$ART"
chrome --screenshot="$ART/76-dashboard.png" >/dev/null
ok $([ -s "$ART/76-dashboard.png" ]; echo $?) "screenshot kept: $ART/76-dashboard.png"
kill $DPID
wait_pid_gone 3 $DPID
ok $? "dashboard stops on SIGTERM"
done_testing
