#!/usr/bin/env bash
# 31-agent-split.t — weighted splits per connection, in the lab:
#  - the SMI experiment: flaskapp -> flaskapp-v1 weight 1, flaskapp-v2 weight
#    500m; 3000 new connections; the v1 share inside the 99.999 % binomial
#    interval around 2/3;
#  - a three-way HTTPRoute backendRefs split (1:2:3) passes a chi-square test
#    at 99.999 %;
#  - the namerd experiment: weights changed live 80/20 -> 20/80 while a client
#    connects every 5 ms: new connections follow within 1 s of apply
#    returning, no connection fails.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t31

split() {	# NAME ROOT B1 W1 B2 W2
	cat <<YAML
apiVersion: split.smi-spec.io/v1alpha1
kind: TrafficSplit
metadata: {name: $1}
spec:
  service: $2
  backends:
    - {service: $3, weight: $4}
    - {service: $5, weight: $6}
---
YAML
}
{
	m_who flaskapp-v1 node-a "app: flaskapp, version: v1"
	m_who flaskapp-v2 node-b "app: flaskapp, version: v2"
	m_svc flaskapp "app: flaskapp" "http=80:http"
	m_svc flaskapp-v1 "app: flaskapp, version: v1" "http=80:http"
	m_svc flaskapp-v2 "app: flaskapp, version: v2" "http=80:http"
	split flaskapp-split flaskapp flaskapp-v1 1 flaskapp-v2 500m
	m_who web-a node-a "app: web"
	m_who web-b node-b "app: web"
	m_who web-c node-b "app: web"
	m_svc web "app: web" "http=80:http"
	m_svc web-a "name: web-a" "http=80:http"
	m_svc web-b "name: web-b" "http=80:http"
	m_svc web-c "name: web-c" "http=80:http"
	m_route web-split web <<YAML
    - backendRefs:
        - {name: web-a, port: 80, weight: 1}
        - {name: web-b, port: 80, weight: 2}
        - {name: web-c, port: 80, weight: 3}
YAML
	m_who blue node-a "app: bg, color: blue"
	m_who green node-b "app: bg, color: green"
	m_svc bg "app: bg" "http=80:http"
	m_svc blue "color: blue" "http=80:http"
	m_svc green "color: green" "http=80:http"
	split bg-split bg blue 800m green 200m
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} > "$TMP/app.yaml"

lab_up "flaskapp v1/v2, web a/b/c, blue/green, a client" -f "$TMP/app.yaml"
all_up() {	# every backend up and reachable
	lab_conns_ok client web-c 80 && lab_conns_ok client flaskapp-v2 80 &&
		lab_conns_ok client green 80
}
wait_until 30 all_up

# ---- SMI: 1 : 500m over 3000 connections ------------------------------------
r=$(lab_exec client python3 "$PROBE" conns flaskapp 80 3000)
diag "$r"
is "$(echo "$r" | jq .fails)" 0 "SMI: 3000 connections, none failed"
v1=$(echo "$r" | jq '[.counts | to_entries[] | select(.key | startswith("flaskapp-v1")) | .value] | add // 0')
v2=$(echo "$r" | jq '[.counts | to_entries[] | select(.key | startswith("flaskapp-v2")) | .value] | add // 0')
is $((v1 + v2)) 3000 "SMI: every connection reached v1 or v2"
# 99.999 % two-sided (a 99.9 % bound fails one CI run in 1,000 by chance):
# 2000 +- 4.4172 * sqrt(3000 * 2/3 * 1/3) = 2000 +- 114.05
ok $([ "$v1" -ge 1886 ] && [ "$v1" -le 2114 ]; echo $?) "SMI: v1 got $v1 of 3000 (binomial 99.999 %: 1886..2114, expected 2000)"

# ---- three-way HTTPRoute: chi-square, 2 degrees of freedom ----------------------
r=$(lab_exec client python3 "$PROBE" conns web 80 3000)
diag "$r"
is "$(echo "$r" | jq .fails)" 0 "HTTPRoute: 3000 connections, none failed"
chi=$(echo "$r" | python3 -c '
import json, sys
c = json.load(sys.stdin)["counts"]
got = [sum(v for k, v in c.items() if k.startswith(p)) for p in ("web-a", "web-b", "web-c")]
exp = [500, 1000, 1500]
print("%.3f %s" % (sum((g - e) ** 2 / e for g, e in zip(got, exp)), got))')
diag "chi-square (counts a,b,c): $chi"
ok $(python3 -c "import sys; sys.exit(0 if float('${chi%% *}') < 23.026 else 1)"; echo $?) "HTTPRoute 1:2:3: chi-square ${chi%% *} < 23.026 (99.999 %, 2 dof)"

# ---- live 80/20 -> 20/80 while connecting every 5 ms -------------------------------
rm -f "$TMP/stop"
lab_exec client python3 "$PROBE" loop bg 80 5 "$TMP/stop" > "$TMP/loop.json" &
BG+=($!)
sleep 3
split bg-split bg blue 200m green 800m > "$TMP/flip.yaml"
"$ZH" apply --lab $LAB -f "$TMP/flip.yaml" >/dev/null
ok $? "apply 20/80"
T_APPLY=$(date +%s.%N)
sleep 3
touch "$TMP/stop"
wait "${BG[@]}"
BG=()
res=$(python3 - "$TMP/loop.json" "$T_APPLY" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t_apply = float(sys.argv[2]) - d["start"]
conns = d["conns"]
fails = sum(1 for t, h in conns if h.startswith("ERR") or h == "EMPTY")
before = [h for t, h in conns if t < t_apply - 0.05]
after = [h for t, h in conns if t >= t_apply + 1.0]
g = lambda l: sum(1 for h in l if h.startswith("green"))
print(len(conns), fails, len(before), g(before), len(after), g(after))
PY
)
read n fails nb gb na ga <<< "$res"
diag "loop: $n connections, $fails failed; before apply $gb/$nb green; from apply+1s $ga/$na green"
is "$fails" 0 "no connection failed during the live weight change"
# 99.999 % binomial bounds for p=0.2 before and p=0.8 after.
ok $(python3 -c "
import math, sys
ok = lambda k, n, p: n >= 50 and abs(k - n * p) <= 4.4172 * math.sqrt(n * p * (1 - p)) + 1
sys.exit(0 if ok($gb, $nb, 0.2) else 1)"; echo $?) "before the change: green share $gb/$nb ~ 20 %"
ok $(python3 -c "
import math, sys
ok = lambda k, n, p: n >= 50 and abs(k - n * p) <= 4.4172 * math.sqrt(n * p * (1 - p)) + 1
sys.exit(0 if ok($ga, $na, 0.8) else 1)"; echo $?) "from 1 s after apply returned: green share $ga/$na ~ 80 %"

done_testing
