#!/usr/bin/env bash
# 25-sidecar-accel.t — `lab up --mesh sidecar --accel on` (docs/sidecar-baseline.md,
# "the ASM/Merbridge short-circuit"): the sidecar capture is done by BPF at
# connect() (bpf/sidecar.bpf.c) instead of istio-init's nat REDIRECT, so the
# two sockets of every leg see one 4-tuple and the same-node short-circuit
# pairs all three legs: app -> its sidecar, sidecar -> the peer's sidecar,
# sidecar -> app. Client and server on one node, 50 keep-alive requests:
# 300 messages short-circuited (3 legs x request and response), none on the
# normal path; the sidecars still route by the original destination
# (SO_ORIGINAL_DST, answered from the BPF map), the backend still sees the
# inbound sidecar (127.0.0.6), the app's getpeername() still shows the
# ClusterIP, and a client on the other node still gets through (that leg
# keeps the plain sidecar path, as in Merbridge).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t25 haproxy curl nft bpftool
lab_test_tools accel_ctl

{
	m_deploy web node-a "app: web" "$(m_ctr e http:8080 "$ZH" echo --http 8080 --tcp 127.0.0.1:0 --udp 127.0.0.1:0)"
	m_svc web "app: web" "80:8080"
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
	m_pod far node-b "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
lab_up "--mesh sidecar --accel on" --mesh sidecar --accel on -f "$TMP/app.yaml"
PIN=/sys/fs/bpf/zerohop/$LAB/node-a
stat() { "$TOOLS/accel_ctl" stats "$PIN" | awk -F= -v k="$1" '$1 == k {print $2}'; }
# sc_stats (per CPU): outbound, inbound, origdst, origdst_miss (abi/sidecar.h)
sc() {
	bpftool -j map dump pinned "/sys/fs/bpf/zerohop/$LAB/sidecar/sc_stats" |
		jq --argjson k "$1" '[.[] | .formatted | select(.key == $k) | .values[].value] | add'
}
ok $([ -n "$(stat msgs)" ]; echo $?) "the short-circuit is loaded on node-a under the sidecars"
ok $([ -n "$(sc 0)" ]; echo $?) "the sidecar capture is loaded (its counters are pinned)"
! grep -q "sidecar capture (BPF) not loaded" "/run/zerohop/$LAB/supervisor.log"
ok $? "no capture load error in the supervisor's log"

# The lab is up once pods run; each sidecar learns the endpoints after
# (a re-render and reload): wait until both clients' sidecars serve web.
answers() { lab_exec "$1" curl -s -m 2 http://web/ready | grep -q '"remote":"127.0.0.6'; }
o0=$(sc 0) i0=$(sc 1) d0=$(sc 2)	# (the waits' own connections count too)
wait_until 15 answers client
wait_until 15 answers far
m0=$(stat msgs) f0=$(stat fallbacks)
lab_exec client curl -s "http://web/a[1-50]" >"$TMP/r50"
is "$(grep -o '"method":"GET"' "$TMP/r50" | wc -l)" 50 "50 requests answered through both sidecars"
is "$(grep -o '"remote":"127.0.0.6' "$TMP/r50" | wc -l)" 50 "every one via the inbound sidecar"
dm=$(( $(stat msgs) - m0 )) df=$(( $(stat fallbacks) - f0 ))
diag "short-circuited messages +$dm, normal-path messages of inserted sockets +$df"
ok $([ "$dm" -ge 300 ] && [ "$dm" -le 320 ]; echo $?) \
	"all three legs short-circuited: +$dm messages (300: 3 legs x request + response)"
is "$df" 0 "no message of a short-circuited socket took the normal path"
ok $([ $(( $(sc 0) - o0 )) -ge 1 ]; echo $?) "curl's connection was sent to its own sidecar by connect4 (+$(( $(sc 0) - o0 )))"
ok $([ $(( $(sc 1) - i0 )) -ge 1 ]; echo $?) "the client sidecar's upstream was sent to the peer's inbound port (+$(( $(sc 1) - i0 )))"
ok $([ $(( $(sc 2) - d0 )) -ge 2 ]; echo $?) "both sidecars got the original destination from SO_ORIGINAL_DST (+$(( $(sc 2) - d0 )))"

# The app sees what it would see under NAT: the ClusterIP, not 127.0.0.1:15001
cip=$("$ZH" get services --lab $LAB | awk '$2 == "web" {print $3}')
peer=$(lab_exec client "$PY" -c '
import socket, sys
s = socket.create_connection((sys.argv[1], 80), timeout=5)
print("%s:%d" % s.getpeername())' "$cip")
is "$peer" "$cip:80" "the app's getpeername() shows the ClusterIP ($cip:80)"

# The other node: the leg between sidecars is not rewritten (the peer's node
# could not answer SO_ORIGINAL_DST in a real cluster); istio-init's path.
i1=$(sc 1)
lab_exec far curl -s "http://web/b[1-5]" >"$TMP/far"
is "$(grep -o '"remote":"127.0.0.6' "$TMP/far" | wc -l)" 5 "a client on node-b: 5 answers through both sidecars"
is "$(sc 1)" "$i1" "its sidecar's upstream to node-a was not rewritten"
"$ZH" lab down --lab $LAB >/dev/null 2>&1
is $? 0 "lab down"
ok $([ ! -e "/sys/fs/bpf/zerohop/$LAB" ]; echo $?) "no pin left"
done_testing
