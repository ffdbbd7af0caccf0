#!/usr/bin/env bash
# 65-proxy-outlier.t — passive outlier detection: one of three backends of a
# Service always answers 500; after 5 consecutive failures it is ejected
# (base time 2 s here, --outlier-base-ejection), no request reaches it until
# the ejection ends, it then returns, and a second ejection lasts 2 x base.
# A backend set of two failing endpoints never has more than one ejected.
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px65 19000 1000

for k in 1 2; do lb_echo "ok$k" $k; done
# Always 500, keep-alive; one log line per request (the port it came to).
"$PY" "$HTTP_BACKEND" --status 500 --log "$TMP/bad.log" $((B + 3)) $((B + 4)) $((B + 5)) 2>"$TMP/bad.err" &
PIDS+=($!)
touch "$TMP/bad.log"

{
	lb_svc web web http; lb_svc pair pair http
	lb_pod web-1 web $((B + 1)); lb_pod web-2 web $((B + 2)); lb_pod web-3 web $((B + 3))
	lb_pod pair-1 pair $((B + 4)); lb_pod pair-2 pair $((B + 5))
	# round robin: the failing endpoint (slower python) would otherwise get
	# few requests under the default p2c-ewma and ejection would take long
	m_route web web 'zerohop.io/lb-policy: round-robin' <<YAML
  - matches: [{path: {type: PathPrefix, value: /pair}}]
    backendRefs: [{name: pair, port: 80}]
  - backendRefs: [{name: web, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply

lb_proxy web $P $S --outlier-base-ejection 2s
lb_up "proxy and backends up" $S $((B + 1)) $((B + 2))
U="http://127.0.0.1:$P"
metric() { curl -s "http://127.0.0.1:$S/" | awk -v k="$1" '$1 == k { print $2 }'; }
hits() { grep -c "^$1\$" "$TMP/bad.log"; }
bench() { # URL N → number of 200s
	"$ZH" bench -c 1 -t 0 -n "$2" --quiet --json "$TMP/b.json" "$1" >/dev/null 2>"$TMP/bench.err"
	"$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["RetCodes"].get("200", 0))' "$TMP/b.json"
}
BAD=$((B + 3))

# ---- ejection --------------------------------------------------------------------
for i in $(seq 200); do
	curl -s -o /dev/null "$U/x"
	[ "$(metric zerohop_proxy_outlier_ejections_total)" = 1 ] && break
done
is "$(metric zerohop_proxy_outlier_ejections_total)" 1 "the always-500 backend is ejected"
t_ej=$(date +%s.%N)
is "$(hits $BAD)" 5 "… after exactly 5 consecutive failures"
is "$(metric zerohop_proxy_outlier_ejected)" 1 "ejected gauge 1"
n=$(bench "$U/x" 300)
is "$n" 300 "while ejected: 300/300 requests succeed"
is "$(hits $BAD)" 5 "… and none reached the ejected backend"

# ---- return --------------------------------------------------------------------------
sleep "$(awk -v t="$t_ej" -v n="$(date +%s.%N)" 'BEGIN { d = t + 2.2 - n; print (d > 0 ? d : 0) }')"
for i in $(seq 100); do
	curl -s -o /dev/null "$U/x"
	[ "$(hits $BAD)" -gt 5 ] && break
done
ok $([ "$(hits $BAD)" -gt 5 ]; echo $?) "after its 2 s ejection the backend gets requests again"
for i in $(seq 200); do
	curl -s -o /dev/null "$U/x"
	[ "$(metric zerohop_proxy_outlier_ejections_total)" = 2 ] && break
done
t_ej=$(date +%s.%N)
is "$(metric zerohop_proxy_outlier_ejections_total)" 2 "still failing: ejected a second time"
h=$(hits $BAD)
sleep 2.5
n=$(bench "$U/x" 100)
is "$(hits $BAD)" "$h" "2.5 s later still out (the second ejection is 2 x 2 s)"
sleep "$(awk -v t="$t_ej" -v n="$(date +%s.%N)" 'BEGIN { d = t + 4.2 - n; print (d > 0 ? d : 0) }')"
n=$(bench "$U/x" 100)
ok $([ "$(hits $BAD)" -gt "$h" ]; echo $?) "after 4 s it is back" ||
	{ diag "hits $(hits $BAD) h $h n $n"; cat "$TMP/proxy.err" >&2; date >&2; }

# ---- never more than half of a backend set --------------------------------------
e0=$(metric zerohop_proxy_outlier_ejections_total)
n=$(bench "$U/pair" 100)
is "$n" 0 "both endpoints of pair fail"
is $(($(metric zerohop_proxy_outlier_ejections_total) - e0)) 1 "only one of the two is ejected"
h4=$(hits $((B + 4))); h5=$(hits $((B + 5)))
ok $([ $((h4 + h5)) -eq 100 ] && { [ $h4 -eq 5 ] || [ $h5 -eq 5 ]; }; echo $?) \
	"the other keeps serving (50 % cap): $h4 + $h5 requests"
grep -q "ejected for 2000 ms" "$TMP/proxy.err"; ok $? "ejections logged"

done_testing
