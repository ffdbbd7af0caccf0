#!/usr/bin/env bash
# 25-sidecar-accel.t — `lab up --mesh sidecar --accel on` (docs/sidecar-baseline.md,
# "the ASM/Merbridge short-circuit"): what zerohop's same-node short-circuit
# pairs under istio-init's nat capture. Client and server on one node, 50
# keep-alive requests through both sidecars: the inbound sidecar -> app
# loopback leg is short-circuited (two messages per request: request and
# response), the REDIRECTed legs are not (their sockets take the normal
# path: fallbacks), and every answer is still right.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t25 haproxy curl nft
lab_test_tools accel_ctl

{
	m_deploy web node-a "app: web" "$(m_ctr e http:8080 "$ZH" echo --http 8080 --tcp 127.0.0.1:0 --udp 127.0.0.1:0)"
	m_svc web "app: web" "80:8080"
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
"$ZH" lab up --lab $LAB --mesh sidecar --accel on -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up --mesh sidecar --accel on" || { cat "$TMP/up.log"; done_testing; }
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
stat() { "$TOOLS/accel_ctl" stats "$PIN" | awk -F= -v k="$1" '$1 == k {print $2}'; }
ok $([ -n "$(stat msgs)" ]; echo $?) "the short-circuit is loaded on node-a under the sidecars"
m0=$(stat msgs) f0=$(stat fallbacks)
lab_exec client curl -s "http://web/a[1-50]" >"$TMP/r50"
is "$(grep -o '"method":"GET"' "$TMP/r50" | wc -l)" 50 "50 requests answered through both sidecars"
is "$(grep -o '"remote":"127.0.0.6' "$TMP/r50" | wc -l)" 50 "every one via the inbound sidecar"
dm=$(( $(stat msgs) - m0 )) df=$(( $(stat fallbacks) - f0 ))
diag "short-circuited messages +$dm, normal-path messages of inserted sockets +$df"
ok $([ "$dm" -ge 100 ] && [ "$dm" -le 110 ]; echo $?) \
	"the inbound sidecar -> app leg is short-circuited: +$dm messages (100: request + response each)"
ok $([ "$df" -ge 100 ]; echo $?) \
	"the REDIRECTed legs are not paired: +$df messages on the normal path"
done_testing
