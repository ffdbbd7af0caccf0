#!/usr/bin/env bash
# 69-proxy-rollout.t — a Deployment rolled under 500 requests/s of
# keep-alive traffic through the node proxy: zero failed requests.
# Lab Y6 (no mesh): the proxy runs in explicit mode in node-a's network
# namespace (`--listen FABRIC_IP:15001 --service default/web --lab Y6`),
# routes from the lab's state (endpoint updates as pods come and go); the
# load runs in a client pod (`zerohop bench -qps 500`, 8 keep-alive
# connections). A changed pod template makes the lab replace the 3 pods one
# by one (maxSurge 1, maxUnavailable 0); every request must succeed, and the
# traffic must end on the new pods only. The lab drains a removed pod (it is
# unpublished, then SIGTERMed only after the drain delay, 1 s by default), so
# the proxy has moved off it before it goes: no request needs a retry.
# Cleans up (proxy by PID, lab down).
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup Y6
PXPID=
BPID=
lab_test_more_cleanup() {
	[ -n "$BPID" ] && kill "$BPID" 2>/dev/null
	[ -n "$PXPID" ] && kill -INT "$PXPID" 2>/dev/null
}

manifest() { # VERSION
	REPLICAS=3 m_deploy web "" "app: web, version: \"$1\"" \
		"$(m_img echo mendhak/http-https-echo http:8080)"
	m_svc web "app: web" "http=80:http"
	m_idle client node-a
}
manifest v1 >"$TMP/v1.yaml"
manifest v2 >"$TMP/v2.yaml"
"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/v1.yaml" >"$TMP/up.out" 2>&1
rc=$?
ok $rc "lab $LAB up (no mesh)"
[ $rc -eq 0 ] || { sed 's/^/# /' "$TMP/up.out"; done_testing; }
running() { # PATTERN: Running pods whose line matches
	"$ZH" lab status --lab $LAB 2>/dev/null | grep ' Running ' | grep -c -- "$1"
}
all_running() { [ "$(running 'web-')" -ge 3 ] && [ "$(running client)" -ge 1 ]; }
wait_until 10 all_running
is "$(running 'web-')" 3 "3 web pods Running"
OLD=$("$ZH" lab status --lab $LAB 2>/dev/null | grep -o 'web-[0-9a-f]*-[a-z0-9]*' | sort -u)

NODEIP=$("$ZH" lab status --lab $LAB -o json 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
for n in d.get("nodes", []):
    if n.get("name") == "node-a":
        print(n.get("ip", ""))' 2>/dev/null)
[ -n "$NODEIP" ] || NODEIP=10.250.0.1
"$ZH" lab exec --lab $LAB --node node-a -- "$ZH" proxy --listen "$NODEIP:15001" \
	--service default/web --lab $LAB --stats-addr "$NODEIP:15090" \
	--access-log "$TMP/access.log" >"$TMP/proxy.out" 2>&1 &
wait_until 5 lab_listening $LAB-node-a 15001
PXPID=$(lab_listener_pid $LAB-node-a 15001)
ok $([ -n "$PXPID" ]; echo $?) "proxy (explicit mode) listens on node-a $NODEIP:15001 (pid ${PXPID:-none})"
[ -n "$PXPID" ] || { cat "$TMP/proxy.out"; done_testing; }

# 500 requests/s for 12 s from the client pod, through the proxy
"$ZH" lab exec --lab $LAB client -- "$ZH" bench -c 8 -qps 500 -t 12s --warmup 1s --quiet \
	--json "$TMP/load.json" "http://$NODEIP:15001/roll" >"$TMP/bench.out" 2>&1 &
BPID=$!
sleep 3
"$ZH" apply --lab $LAB -f "$TMP/v2.yaml" >"$TMP/apply.out" 2>&1
ok $? "changed pod template applied (version v2) under load"
t0=$(date +%s)
rolled() {	# no old pod left, 3 Running
	local names left
	names=$("$ZH" lab status --lab $LAB 2>/dev/null | grep -o 'web-[0-9a-f]*-[a-z0-9]*' | sort -u)
	left=$(comm -12 <(echo "$OLD") <(echo "$names") | grep -c .)
	[ "$left" -eq 0 ] && [ "$(running 'web-')" -eq 3 ]
}
WAIT_STEP=0.05 wait_until 30 rolled
done_roll=$?
ok $done_roll "rollout complete: 3 new pods Running, old pods gone ($(($(date +%s) - t0)) s)"
wait "$BPID"
brc=$?
BPID=
ok $brc "bench finished" || cat "$TMP/bench.out"
set -- $("$PY" - "$TMP/load.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rc = r["RetCodes"]
print(rc.get("200", 0), sum(rc.values()), sum(r["Errors"].values()))
PY
)
diag "bench: $1 x 200 of $2 requests, $3 errors"
ok $([ "${2:-0}" -ge 5000 ]; echo $?) "500 requests/s held (${2:-0} measured requests in 12 s)"
is "$1" "$2" "every request answered 200"
is "$3" 0 "zero failed requests"
# the last requests of the run reached new pods only
NEWIPS=$("$ZH" lab status --lab $LAB 2>/dev/null | grep ' Running ' | grep 'web-' |
	grep -o '10\.[0-9.]*' | sort -u)
tail -200 "$TMP/access.log" | awk '{print $(NF-2)}' | cut -d: -f1 | sort -u >"$TMP/last.ips"
ok $([ -s "$TMP/last.ips" ] && [ -z "$(comm -23 "$TMP/last.ips" <(echo "$NEWIPS"))" ]; echo $?) \
	"the last 200 requests went to new pods only ($(tr '\n' ' ' <"$TMP/last.ips"))"
"$ZH" lab exec --lab $LAB --node node-a -- curl -s "http://$NODEIP:15090/" >"$TMP/stats.txt" 2>/dev/null
for m in zerohop_proxy_route_reloads_total zerohop_proxy_retries_total zerohop_proxy_upstream_gone_total; do
	diag "$(grep "^$m " "$TMP/stats.txt")"
done
ok $([ "$(awk '$1 == "zerohop_proxy_route_reloads_total" {print $2}' "$TMP/stats.txt")" -ge 3 ]; echo $?) \
	"the proxy followed the endpoint updates (route reloads)"
is "$(awk '$1 == "zerohop_proxy_retries_total" {print $2}' "$TMP/stats.txt")" 0 \
	"no request needed a retry: removed pods drained before their SIGTERM"
kill -TERM "$PXPID"
WAIT_STEP=0.05 wait_pid_gone 5 "$PXPID"
ok $(kill -0 "$PXPID" 2>/dev/null; [ $? -ne 0 ]; echo $?) "proxy drained and exited on SIGTERM"
PXPID=
done_testing
