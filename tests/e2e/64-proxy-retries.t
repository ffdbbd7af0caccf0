#!/usr/bin/env bash
# 64-proxy-retries.t — retries: the Istio-like default (2 retries on
# connect failure, reset, 503) against an echo backend failing 10 % with 503
# (client success >= 99.5 %, retries inside the budget), the Linkerd-style
# budget capping retries against a 60 % failing backend (no amplification:
# upstream attempts <= requests + 20 % + 10/s), the per-route annotations,
# body replay only within the buffering limit, actual vs effective counters,
# and a bad annotation rejected with an error naming the route.
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px64 19000 1000
P2=$((B + 7))
S2=$((B + 8))

lb_echo v1 1

{
	lb_svc web web $((B + 1)); lb_svc v1 v1 $((B + 1)); lb_svc dead dead $((B + 5))
	lb_pod web-1 web; lb_pod v1-1 v1; lb_pod dead-1 dead
	m_route noretry web 'zerohop.io/retries: "0"' <<YAML
  - matches: [{path: {type: PathPrefix, value: /none}}]
    backendRefs: [{name: v1, port: 80}]
YAML
	m_route any5xx web 'zerohop.io/retries: "3", zerohop.io/retry-on: "5xx, reset"' <<YAML
  - matches: [{path: {type: PathPrefix, value: /any}}]
    backendRefs: [{name: v1, port: 80}]
YAML
	m_route main web <<YAML
  - backendRefs: [{name: v1, port: 80}]
YAML
	m_route dead web <<YAML
  - matches: [{path: {type: PathPrefix, value: /dead}}]
    backendRefs: [{name: dead, port: 80}]
YAML
} >"$TMP/m.yaml"
lb_apply

start_proxy() { # PORT STATS
	lb_proxy web "$1" "$2"
	wait_until 10 lb_http_up "$1" "$2"
}
start_proxy $P $S; ok $? "proxy up" || { cat "$TMP/proxy.err"; done_testing; }
curl -s -o /dev/null "http://127.0.0.1:$((B + 1))/" || sleep 0.5
U="http://127.0.0.1:$P"
# metric NAME [STATSPORT]: sum of the samples whose name{labels} starts with NAME
metric() {
	curl -s "http://127.0.0.1:${2:-$S}/" |
		awk -v k="$1" 'index($1, k) == 1 { s += $2 } END { printf "%d\n", s }'
}
# bench URL N → "ok total" from the fortio JSON RetCodes
bench() {
	"$ZH" bench -c 4 -t 0 -n "$2" --quiet --json "$TMP/b.json" "$1" >/dev/null 2>"$TMP/bench.err"
	"$PY" - "$TMP/b.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["RetCodes"]
print(r.get("200", 0), sum(r.values()))
PY
}

# ---- defaults against 10 % 503 ------------------------------------------------------
case_default_retries() {
	r0=$(metric zerohop_proxy_retries_total)
	set -- $(bench "$U/ten?status=503:10" 1000)
	good=$1; total=$2
	diag "10 % 503: $good/$total succeeded"
	ok $([ "$total" -ge 1000 ] && [ $((good * 1000)) -ge $((total * 995)) ]; echo $?) \
		"client success >= 99.5 % with the default retries ($good/$total)"
	r1=$(metric zerohop_proxy_retries_total)
	retries=$((r1 - r0))
	diag "retries: $retries"
	ok $([ $retries -ge 50 ] && [ $retries -le 250 ]; echo $?) \
		"retry rate near the failure rate (~11 %): $retries retries for $total requests"
	ok $([ $((retries * 100)) -le $((total * 20 + 10000)) ]; echo $?) "inside the budget (20 % + 10/s)"
	att=$(metric 'zerohop_proxy_upstream_attempts_total{route="default/main#0",backend="default/v1"')
	is "$att" $((total + 1 + retries)) "upstream attempts (actual) = requests (+ the start probe) + retries"
	fail=$(metric 'zerohop_proxy_upstream_attempts_total{route="default/main#0",backend="default/v1",result="failure"')
	ok $([ "$fail" -ge "$retries" ]; echo $?) "failed attempts counted ($fail)"
	eff=$(metric 'zerohop_proxy_requests_total{route="default/main#0",backend="default/v1",class="2xx"')
	ok $([ "$eff" -ge "$good" ]; echo $?) "effective successes in requests_total ($eff)"
}

# ---- annotations ----------------------------------------------------------------------
case_annotations() {
	set -- $(bench "$U/none?status=503:30" 300)
	ok $([ $1 -ge $(($2 * 50 / 100)) ] && [ $1 -lt $(($2 * 85 / 100)) ]; echo $?) "retries: \"0\" passes 503s through ($1/$2 ok)"
	set -- $(bench "$U/any?status=500:30" 300)
	# a request fails only if all 4 tries get 500: 0.3^4 = 0.81 %, 2.4 of 300
	# expected; >= 95 % ok (<= 15 failures) fails by chance once in 10^8 runs
	# (>= 97 % did once in 4,500); without retries 70 % pass
	ok $([ $1 -ge $(($2 * 95 / 100)) ]; echo $?) "retry-on 5xx with 3 retries hides 500s ($1/$2 ok)"
	set -- $(bench "$U/ten?status=500:30" 300)
	ok $([ $1 -ge $(($2 * 50 / 100)) ] && [ $1 -lt $(($2 * 85 / 100)) ]; echo $?) \
		"the default does not retry 500 ($1/$2 ok)"
}

# ---- connect failure: 1 + 2 tries ------------------------------------------------------
case_connect_failure() {
	r0=$(metric zerohop_proxy_retries_total)
	is "$(curl -s -o /dev/null -w '%{http_code}' "$U/dead")" 503 "refused upstream: 503"
	is $(($(metric zerohop_proxy_retries_total) - r0)) 2 "… after 2 retries"
	# backoff (Envoy): retry n waits uniform [0, 25 ms x 2^(n-1)]: two retries
	# add 37.5 ms on average (0 without backoff), at most 75 ms
	# Judged by the median and the 8th of 10 (sorted): a loaded machine
	# delays a curl or two by 100 ms and more, which says nothing of the
	# backoff (a max once failed at 164 ms, load 13).
	for i in $(seq 10); do curl -s -o /dev/null -w '%{time_total}\n' "$U/dead"; done >"$TMP/backoff"
	set -- $(sort -n "$TMP/backoff" | awk '{t[NR] = $1 * 1000} END {printf "%.1f %.1f %.1f\n", (t[5] + t[6]) / 2, t[8], t[10]}')
	diag "refused upstream, 2 retries: median $1 ms, 8th of 10 $2 ms, max $3 ms"
	ok $(awk -v a="$1" -v m="$2" 'BEGIN {exit !(a >= 10 && a <= 75 && m <= 120)}'; echo $?) \
		"retries back off with jitter (median $1 ms of 37.5 expected, 8th of 10 $2 ms <= 75 + slack)"
}

# ---- bodies: replayed within 64 KiB, never beyond ------------------------------------
case_bodies() {
	head -c 1000 /dev/urandom | base64 -w0 >"$TMP/small"
	head -c 100000 /dev/urandom | base64 -w0 >"$TMP/big"
	r0=$(metric zerohop_proxy_retries_total)
	okn=0
	for i in $(seq 40); do
		out=$(curl -s -w '\n%{http_code}' --data-binary @"$TMP/small" "$U/ten?status=503:30")
		[ "$(echo "$out" | tail -1)" = 200 ] && [ "$(echo "$out" | head -1)" = "$(cat "$TMP/small")" ] &&
			okn=$((okn + 1))
	done
	# 3 tries at 30 % each: 2.7 % of requests fail, ~1 of 40 expected
	ok $([ $okn -ge 36 ]; echo $?) "small bodies replayed on 503: $okn/40 ok with the whole body"
	ok $([ $(($(metric zerohop_proxy_retries_total) - r0)) -ge 5 ]; echo $?) "… with retries"
	r0=$(metric zerohop_proxy_retries_total)
	bad=0
	for i in $(seq 20); do
		c=$(curl -s -o /dev/null -w '%{http_code}' --data-binary @"$TMP/big" "$U/ten?status=503:50")
		[ "$c" = 503 ] && bad=$((bad + 1))
	done
	is $(($(metric zerohop_proxy_retries_total) - r0)) 0 "a 133 KB body is never retried ($bad/20 503s passed through)"
}

# ---- 60 %: the budget caps retries (a fresh proxy: a fresh budget window) --------------
case_budget_caps_retries() {
	start_proxy $P2 $S2; ok $? "second proxy up"
	N=3000
	set -- $(bench "http://127.0.0.1:$P2/sixty?status=503:60" $N)
	good=$1; total=$2
	retries=$(metric zerohop_proxy_retries_total $S2)
	denied=$(metric zerohop_proxy_retries_budget_exhausted_total $S2)
	att=$(metric zerohop_proxy_upstream_attempts_total $S2)
	diag "60 % 503: $good/$total ok, $retries retries, $denied denied, $att upstream attempts"
	# the proxy's own probe at startup is one more request
	ok $([ $((retries * 100)) -le $(((total + 1) * 20 + 10000)) ]; echo $?) \
		"retries capped by the budget: $retries <= 20 % of $total + 100"
	ok $([ "$denied" -gt 0 ]; echo $?) "budget denials counted ($denied)"
	is "$att" $((total + 1 + retries)) "upstream attempts = requests + retries"
	ok $([ "$att" -gt "$total" ] && [ "$att" -le $(((total + 1) * 120 / 100 + 100)) ]; echo $?) \
		"no amplification: $att attempts for $total requests (unbudgeted ~$((total * 196 / 100)))"
	ok $([ $((good * 100)) -ge $((total * 30)) ] && [ $((good * 100)) -le $((total * 60)) ]; echo $?) "failures pass through ($good/$total ok)"
}

# ---- a bad annotation names the route ---------------------------------------------------
case_bad_annotation() {
	sed 's/zerohop.io\/retries: "0"/zerohop.io\/retries: "lots"/' "$TMP/m.yaml" >"$TMP/bad.yaml"
	"$ZH" proxy --listen 127.0.0.1:1 --service default/web -f "$TMP/bad.yaml" >/dev/null 2>"$TMP/bad.err"
	ok $([ $? -ne 0 ]; echo $?) "a bad retries annotation fails to load"
	grep -q 'default/noretry: annotation zerohop.io/retries "lots"' "$TMP/bad.err"
	ok $? "… naming the route and annotation" || cat "$TMP/bad.err"
	sed 's/"5xx, reset"/"5xx, sometimes"/' "$TMP/m.yaml" >"$TMP/bad.yaml"
	"$ZH" proxy --listen 127.0.0.1:1 --service default/web -f "$TMP/bad.yaml" >/dev/null 2>"$TMP/bad.err"
	grep -q 'default/any5xx: annotation zerohop.io/retry-on .*"sometimes"' "$TMP/bad.err"
	ok $? "an unknown retry-on condition is named" || cat "$TMP/bad.err"
}

run_cases case_default_retries case_annotations case_connect_failure \
	case_bodies case_budget_caps_retries case_bad_annotation
done_testing
