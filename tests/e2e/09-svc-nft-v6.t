#!/usr/bin/env bash
# The nftables baseline over IPv6 (docs/ipv6.md): on a
# dual-stack lab with `--service-proxy nft`, each node namespace gets a
# `table ip6 zerohop` beside `table ip zerohop`, with the Services' IPv6
# ClusterIPs; curl -6 and Python AF_INET6 reach a dual-stack Service through
# its IPv6 ClusterIP from both nodes, over both backends, by name through
# the cluster DNS's AAAA; a pod reaching itself through the IPv6 ClusterIP
# works (hairpin: masqueraded); an IPv6 single-stack Service works; a
# Service without endpoints refuses its IPv6 ClusterIP at once
# (ECONNREFUSED, the ip6 table's reject); the IPv4 side is unchanged; and
# no BPF service hook is involved.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t09 curl nft
V6P=$ROOT/tests/bpf/lib/v6probe.py

{
	m_cluster t09 "node-a node-b" dual
	m_idle client node-a
	m_idle client-b node-b
	m_pod srv-a node-a "app: srv" "$(m_http_dir a)"
	m_pod srv-b node-b "app: srv" "$(m_http_dir b)"
	M_SPEC="ipFamilyPolicy: PreferDualStack" m_svc web "app: srv" "80:8080"
	M_SPEC="ipFamilies: [IPv6]" m_svc six "app: srv" "80:8080"
	M_SPEC="ipFamilyPolicy: PreferDualStack" m_svc empty "app: nothing" "80:8080"
} >"$TMP/lab.yaml"

lab_up "dual-stack, --service-proxy nft" --service-proxy nft -f "$TMP/lab.yaml"
wait_until 30 lab_running 5
ok $? "pods run"

read -r V4 V6 <<<"$(lab_svc_ips web)"
SIX=$(lab_svc_ips six) E6=$(lab_svc_ips empty | cut -d' ' -f2)
case "$V6 $SIX $E6" in fd00:10:96::*\ fd00:10:96::*\ fd00:10:96::*) r=0 ;; *) r=1 ;; esac
ok $r "IPv6 ClusterIPs allocated (web $V6, six $SIX, empty $E6)"

# ---- the rules (nft mode has no sync generation in `get stats`: wait for them) --
rules6() { ip netns exec $LAB-node-a nft list table ip6 zerohop >"$TMP/rules6" 2>&1 &&
	grep -q "$V6 . 80 . tcp : goto svc_" "$TMP/rules6"; }
wait_until 20 rules6
grep -q "$V6 . 80 . tcp : goto svc_" "$TMP/rules6" && grep -q "$SIX . 80 . tcp : goto svc_" "$TMP/rules6"
ok $? "node-a: table ip6 zerohop maps the IPv6 ClusterIPs"
grep -q "$E6 . 80 . tcp" "$TMP/rules6" && ! grep -q "$E6 . 80 . tcp : goto" "$TMP/rules6"
ok $? "... and lists the Service without endpoints in its reject set"
ip netns exec $LAB-node-a nft list table ip zerohop >"$TMP/rules4" 2>&1
grep -q "$V4 . 80 . tcp : goto svc_" "$TMP/rules4" && ! grep -q 'fd00:' "$TMP/rules4"
ok $? "table ip zerohop keeps the IPv4 ClusterIPs only"
ok $([ -z "$(ls /sys/fs/bpf/zerohop/$LAB/node-a/ 2>/dev/null | grep -E '^(zh_)?lb_')" ]; echo $?) \
	"no BPF service hooks pinned in nft mode"

# ---- traffic ------------------------------------------------------------------
X() { "$ZH" lab exec --lab $LAB "$@"; }
get6() { X "$1" -- curl -6 -s --max-time 5 "http://[$2]/index.html"; }
up6() { [ -n "$(get6 client "$V6")" ]; }
wait_until 20 up6
ok $? "the IPv6 ClusterIP answers through nft DNAT"
r=$(get6 client-b "$V6")
case "$r" in srv-a | srv-b) ok 0 "curl -6 to the IPv6 ClusterIP from node-b ($r)" ;;
*) ok 1 "curl -6 to the IPv6 ClusterIP from node-b (got '$r')" ;; esac
is "$(X client-b -- curl -6 -s --max-time 5 "http://web.default.svc.cluster.local/index.html" | grep -c '^srv-[ab]$')" 1 \
	"curl -6 by name: the cluster DNS's AAAA, then nft's IPv6 DNAT"
seen=$(for i in $(seq 1 16); do get6 client "$V6"; done | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
case "$seen" in *srv-a=*srv-b=*) r=0 ;; *) r=1 ;; esac
ok $r "16 connections use both backends ($seen)"
hair=$(for i in $(seq 1 8); do get6 srv-a "$V6"; done | grep -c '^srv-[ab]$')
is "$hair" 8 "hairpin: a backend reaches the IPv6 ClusterIP 8 times (its own answers masqueraded)"
is "$(X client-b -- "$PY" "$V6P" http 6n "$V6" 80 /index.html | jq -r '.peer + " " + .body' | sed 's/srv-[ab]$/srv/')" \
	"[$V6]:80 srv" "Python AF_INET6: DNAT is invisible to the client (getpeername: the ClusterIP)"
r=$(get6 client "$SIX")
case "$r" in srv-a | srv-b) ok 0 "an IPv6 single-stack Service works ($r)" ;;
*) ok 1 "an IPv6 single-stack Service works (got '$r')" ;; esac
is "$(X client -- "$PY" "$V6P" tcp 6n "$E6" 80 1 | jq -r '(.errors | keys | join(",")) + (if .fail_ms < 1000 then " fast" else " slow" end)')" \
	"ECONNREFUSED fast" "a Service without endpoints refuses its IPv6 ClusterIP at once (nft reject)"
is "$(X client-b -- curl -4 -s --max-time 5 "http://$V4/index.html" | grep -c '^srv-[ab]$')" 1 \
	"the IPv4 ClusterIP of the same Service still works"

# ---- the tables go with the agent ------------------------------------------------
"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
done_testing
