#!/usr/bin/env bash
# 99-proxy-h2-nonreader.t — HTTP/2 clients that never read (issue 18's
# "a client that never reads"; docs/proxy.md "Defences"), crafted with
# Debian's python3-h2 (tests/tools/clients/h2_nonreader.py) against
# `zerohop proxy` on loopback with a `zerohop echo` backend:
#  - a client that opens every flow-control window to 2^31-1, asks 50
#    streams for 4 MB each (200 MB) and reads nothing for 5 s: the proxy
#    stays within 32 MB of its resident size before (it reads from the
#    backend only what it can pass on) while curl over HTTP/2 and HTTP/1.1
#    keeps getting answers within a second; once the client goes, its
#    connection is gone;
#  - a client whose socket is full and that keeps sending PINGs without
#    reading their ACKs: the proxy resets it (at most 1,000 queued ACKs,
#    then the flood limit) and counts it, and serves others throughout.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px99 33000 2000
GPY=/usr/bin/python3
"$GPY" -c 'import h2' 2>/dev/null || skip_all "python3-h2 missing (make deps)"
NR="$(dirname "$0")/../tools/clients/h2_nonreader.py"

lb_echo v1 1
{ lb_svc web web $((B + 1)); lb_pod web-1 web; } >"$TMP/m.yaml"
lb_apply
lb_proxy web $P $S
lb_up "proxy answers" $P $((B + 1))
U="http://127.0.0.1:$P"
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$PX/status"; }	# KiB
served() { # both protocols answer 200 within a second
	[ "$(curl -s --http2-prior-knowledge -m 1 -o /dev/null -w '%{http_code}' "$U/")" = 200 ] &&
		[ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$U/")" = 200 ]
}
metric() { curl -s "http://127.0.0.1:$S/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
conns() { ss -Htn state established "( sport = :$P )" | wc -l; }
no_conns() { [ "$(conns)" -eq 0 ]; }

case_bodies() {
	local base max=0 r n_ok=0 i nr
	for i in 1 2 3; do curl -s --http2-prior-knowledge -o /dev/null "$U/?size=1000000"; done
	base=$(rss)
	"$GPY" "$NR" bodies $P 50 4000000 5 >"$TMP/bodies.out" 2>&1 &
	nr=$!
	for i in $(seq 10); do
		sleep 0.5
		r=$(rss)
		[ "$r" -gt "$max" ] && max=$r
		served && n_ok=$((n_ok + 1))
	done
	is "$n_ok" 10 "while a client reads none of the 200 MB it asked for, others are served (HTTP/2 and HTTP/1.1, 10 of 10 within 1 s)"
	ok $([ $((max - base)) -lt 32768 ]; echo $?) \
		"... and the proxy's RSS grows by $(((max - base) / 1024)) MB at most (bound 32 MB; $(cat "$TMP/bodies.out"))"
	wait "$nr"
	wait_until 5 no_conns
	ok $? "once the client is gone, so is its connection"
	served
	ok $? "the proxy serves on"
}

case_ping_flood() {
	local before out
	before=$(metric 'zerohop_proxy_h2_defence_total{action="ping_flood"}')
	out=$("$GPY" "$NR" ping-flood $P 5000)
	is "$(echo "$out" | sed 's/sent=[0-9]* //')" "reset=1" \
		"a full socket and 5,000 PINGs whose ACKs are never read: the proxy resets the connection ($out)"
	is "$(metric 'zerohop_proxy_h2_defence_total{action="ping_flood"}')" $((${before:-0} + 1)) \
		"... counted once as ping_flood"
	served
	ok $? "others are served after it"
}

run_cases case_bodies case_ping_flood
kill -0 $PX 2>/dev/null
ok $? "the proxy is still running"
done_testing
