#!/usr/bin/env bash
# IPv6 ClusterIPs through the socket load balancer (docs/ipv6.md): on a dual-stack lab, connect6 translates a Service's native
# IPv6 ClusterIP to the IPv6 address of a backend pod, with the same
# weighted choice as IPv4 (both backends are used), same node and across
# nodes; getpeername gives the ClusterIP back; clients reach it by name
# through the cluster DNS's AAAA (curl -6); an IPv6 single-stack Service
# works the same; a Service without endpoints refuses at once
# (ECONNREFUSED); `zerohop get backends` lists the IPv6 entries; the IPv4
# ClusterIP of the same Service is unchanged; an SMI TrafficSplit 1:3
# splits connections to its root's IPv6 ClusterIP as to its IPv4 one.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t28 curl
V6P=$ROOT/tests/bpf/lib/v6probe.py

cat >"$TMP/lab.yaml" <<EOF
$(m_cluster t28 "node-a node-b" dual)
$(m_pod client node-a "app: client" "$(m_ctr c "" sleep 100000)")
$(m_pod client-b node-b "app: client" "$(m_ctr c "" sleep 100000)")
$(m_pod srv-a node-a "app: srv, who: a" "$(m_http_dir a)")
$(m_pod srv-b node-b "app: srv, who: b" "$(m_http_dir b)")
$(m_svc web "app: srv" "80:8080")
$(m_svc six "app: srv" "80:8080")
$(m_svc empty "app: nothing" "80:8080")
$(m_svc to-a "who: a" "80:8080")
$(m_svc to-b "who: b" "80:8080")
$(m_svc split "app: srv" "80:8080")
apiVersion: split.smi-spec.io/v1alpha4
kind: TrafficSplit
metadata: {name: split}
spec: {service: split, backends: [{service: to-a, weight: 1}, {service: to-b, weight: 3}]}
EOF
# the dual-stack fields, on the generated flow mappings
"$PY" - "$TMP/lab.yaml" <<'EOF'
import sys
p = sys.argv[1]
docs = open(p).read().split("\n---\n")
out = []
for d in docs:
    if "kind: Service" in d:
        if "name: six" in d:
            d = d.replace("spec: {", "spec: {ipFamilies: [IPv6], ", 1)
        else:
            d = d.replace("spec: {", "spec: {ipFamilyPolicy: PreferDualStack, ", 1)
    out.append(d)
open(p, "w").write("\n---\n".join(out))
EOF

"$ZH" lab up --lab $LAB -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "dual-stack lab with the mesh: $(tail -1 "$TMP/up.out")"
wait_until 30 lab_running 5 && wait_until 30 lab_synced node-a && wait_until 30 lab_synced node-b
ok $? "pods run, both agents applied the state"

read -r V4 V6 <<<"$(lab_svc_ips web)"
SIX=$(lab_svc_ips six) E6=$(lab_svc_ips empty | cut -d' ' -f2)
case "$V6 $SIX $E6" in fd00:10:96::*\ fd00:10:96::*\ fd00:10:96::*) r=0 ;; *) r=1 ;; esac
ok $r "IPv6 ClusterIPs allocated (web $V6, six $SIX, empty $E6)"

X() { "$ZH" lab exec --lab $LAB "$@"; }
up6() { X client -- curl -6 -s -o /dev/null --max-time 2 "http://[$V6]/index.html"; }
wait_until 20 up6
ok $? "the IPv6 ClusterIP answers"
r=$(X client -- curl -6 -s --max-time 5 "http://[$V6]/index.html")
case "$r" in srv-a | srv-b) ok 0 "curl -6 to the IPv6 ClusterIP, from node-a ($r)" ;;
*) ok 1 "curl -6 to the IPv6 ClusterIP, from node-a (got '$r')" ;; esac
r=$(X client-b -- curl -6 -s --max-time 5 "http://[$V6]/index.html")
case "$r" in srv-a | srv-b) ok 0 "curl -6 to the IPv6 ClusterIP, from node-b ($r)" ;;
*) ok 1 "curl -6 to the IPv6 ClusterIP, from node-b (got '$r')" ;; esac
is "$(X client-b -- curl -6 -s --max-time 5 "http://web.default.svc.cluster.local/index.html" | grep -c '^srv-[ab]$')" 1 \
	"curl -6 by name: the cluster DNS's AAAA, then the IPv6 ClusterIP"
seen=$(for i in $(seq 1 16); do X client -- curl -6 -s --max-time 5 "http://[$V6]/index.html"; done | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
case "$seen" in *srv-a=*srv-b=*) r=0 ;; *) r=1 ;; esac
ok $r "16 connections use both backends ($seen)"

is "$(X client-b -- "$PY" "$V6P" http 6n "$V6" 80 /index.html | jq -r '.peer + " " + .body' | sed 's/srv-[ab]$/srv/')" \
	"[$V6]:80 srv" "Python AF_INET6: getpeername shows the IPv6 ClusterIP, the answer comes from a backend"
r=$(X client -- curl -6 -s --max-time 5 "http://[$SIX]/index.html")
case "$r" in srv-a | srv-b) ok 0 "an IPv6 single-stack Service works ($r)" ;;
*) ok 1 "an IPv6 single-stack Service works (got '$r')" ;; esac
is "$(X client -- "$PY" "$V6P" tcp 6n "$E6" 80 1 | jq -r '(.errors | keys | join(",")) + (if .fail_ms < 1000 then " fast" else " slow" end)')" \
	"ECONNREFUSED fast" "a Service without endpoints refuses its IPv6 ClusterIP at once"
is "$(X client-b -- curl -4 -s --max-time 5 "http://$V4/index.html" | grep -c '^srv-[ab]$')" 1 \
	"the IPv4 ClusterIP of the same Service still works"

# ---- an SMI TrafficSplit over IPv6 ---------------------------------------------
read -r SP4 SP6 <<<"$(lab_svc_ips split)"
share_b() { # FAMILY ADDR: how many of 40 connections srv-b answered
	for i in $(seq 1 40); do X client -- curl "-$1" -s --max-time 5 "http://$2/index.html"; done | grep -c '^srv-b$'
}
n6=$(share_b 6 "[$SP6]") n4=$(share_b 4 "$SP4")
# 40 draws at p = 3/4: mean 30, sd 2.7; 20..38 is beyond 3.5 sd either way
ok $([ "$n6" -ge 20 ] && [ "$n6" -le 38 ]; echo $?) \
	"TrafficSplit 1:3 over the root's IPv6 ClusterIP: srv-b answered $n6 of 40 (20..38)"
ok $([ "$n4" -ge 20 ] && [ "$n4" -le 38 ]; echo $?) \
	"... and over its IPv4 ClusterIP: $n4 of 40"

"$ZH" get backends --lab $LAB -o json >"$TMP/be.json" 2>&1
is "$(jq -r --arg v "[$V6]:80/TCP" '.services[] | select(.vip==$v) | [.backends[].addr] | sort | join(" ")' "$TMP/be.json")" \
	"$(jq -r '[.pods[] | select(.name|test("^srv-")) | "[" + .ip6 + "]:8080"] | sort | join(" ")' \
		<("$ZH" lab status --lab $LAB -o json))" \
	"get backends: the IPv6 entry's backends are the pods' IPv6 addresses"
done_testing
