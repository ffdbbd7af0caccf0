#!/usr/bin/env bash
# 37-netpol-v4mapped.t — NetworkPolicy treats a v4-mapped AF_INET6 socket as
# the IPv4 connection it is (issue 14, bpf/policy.bpf.c invariant 9), on the
# path that needs pol_sockops: connections established while no pod is
# isolated (the per-packet programs are detached then, pol_load.c invariant
# 6), revoked by a policy that isolates them afterwards. The programs then
# judge by the orientation pol_sockops recorded; without it they would fall
# back to "either opener", which these policies are built to let through:
#  - an AF_INET6 client (::ffff:server) whose own egress is then denied
#    while its ingress is open to all: revoked (active side, node-a);
#  - an AF_INET client of a dual-stack server (AF_INET6 listener on [::],
#    accepted socket v4-mapped) whose ingress is then closed while its
#    egress is open to all: revoked (passive side, node-b);
#  - and over native IPv6 (the lab is dual-stack; invariant 10, pol_sk6):
#    the same AF_INET6 client to the server's IPv6 address (active side)
#    and a second client to it (passive side), both revoked.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
netpol_lab_setup t14np netpol_hold
V6=$(cd "$(dirname "$0")/../bpf/lib" && pwd)/v6probe.py
{
	m_cluster t14np "node-a node-b" dual
	m_idle client6 node-a
	m_idle client4 node-a
	m_pod srv4 node-b "app: srv4" "$(m_ctr echo "" "$ZH" echo --tcp 80)"
	m_pod srv6 node-b "app: srv6" "$(m_ctr echo "" /usr/bin/python3 "$V6" echo6 80)"
} >"$TMP/app.yaml"
cat >"$TMP/np.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client6-no-egress}
spec:
  podSelector: {matchLabels: {app: client6}}
  policyTypes: [Ingress, Egress]
  ingress: [{}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: srv6-no-ingress}
spec:
  podSelector: {matchLabels: {app: srv6}}
  policyTypes: [Ingress, Egress]
  egress: [{}]
YAML
lab_up "without policies (per-packet programs detached)" -f "$TMP/app.yaml"
ip_of() { "$ZH" lab status --lab $LAB -o json | jq -r ".pods[] | select(.name==\"$1\") | .ip"; }
S4=$(ip_of srv4) S6=$(ip_of srv6)
S6N=$("$ZH" lab status --lab $LAB -o json | jq -r '.pods[] | select(.name=="srv6") | .ip6')
srv6_answers() { "$ZH" lab exec --lab $LAB client4 -- /usr/bin/python3 "$V6" rtt 4 "$S6" 80 1 | grep -q '"error": null' &&
	"$ZH" lab exec --lab $LAB client6 -- /usr/bin/python3 "$V6" rtt 6 "$S6N" 80 1 | grep -q '"error": null'; }
wait_until 15 srv6_answers	# by IPv4 and by its IPv6 (a fresh address may still be settling)
ok $([ ! -e /sys/fs/bpf/zerohop/$LAB/node-a/pol_link_egress ] &&
	[ ! -e /sys/fs/bpf/zerohop/$LAB/node-b/pol_link_ingress ]; echo $?) \
	"no per-packet policy program attached yet (nothing isolated)"
T_START=$(date +%s%3N)
"$ZH" lab exec --lab $LAB client6 -- "$TOOLS/netpol_hold" "::ffff:$S4" 80 8 >"$TMP/h6.out" 2>&1 &
BG+=($!)
"$ZH" lab exec --lab $LAB client4 -- "$TOOLS/netpol_hold" "$S6" 80 8 >"$TMP/h4.out" 2>&1 &
BG+=($!)
"$ZH" lab exec --lab $LAB client6 -- "$TOOLS/netpol_hold" "$S6N" 80 8 >"$TMP/n6.out" 2>&1 &
BG+=($!)
"$ZH" lab exec --lab $LAB client4 -- "$TOOLS/netpol_hold" "$S6N" 80 8 >"$TMP/n4.out" 2>&1 &
BG+=($!)
echoing() { local f; for f in "$@"; do grep -q " ok" "$TMP/$f.out" || return 1; done; }
sleep 1.5
wait_until 2 echoing h6 h4	# a loaded machine may start `lab exec` late
ok $? "both connections echo before the change (AF_INET6 -> srv4, AF_INET -> dual-stack srv6)"
wait_until 2 echoing n6 n4
ok $? "two native IPv6 connections to srv6 ($S6N) echo before the change"
np_apply_sync "$TMP/np.yaml"
ok $? "policies applied and synced: client6 egress denied, srv6 ingress denied"
# the holds' clocks start at T_START (or a little later): from 500 ms after
# the sync on, no echo may come back
CUT=$(($(date +%s%3N) - T_START + 500))
diag "synced $((CUT - 500)) ms after the holds started (they last 8 s)"
wait "${BG[@]}"
BG=()
late() { awk -v c=$CUT '$1 >= c && $2 == "ok"' "$1" | wc -l; }
lost() { awk -v c=$CUT '$1 >= c && $2 == "lost"' "$1" | wc -l; }
is "$(late "$TMP/h6.out")" 0 "AF_INET6 client's connection revoked by its egress policy (orientation from pol_sockops)"
ok $([ "$(lost "$TMP/h6.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/h6.out") pings lost)"
is "$(late "$TMP/h4.out")" 0 "connection to the dual-stack server revoked by its ingress policy"
ok $([ "$(lost "$TMP/h4.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/h4.out") pings lost)"
is "$(late "$TMP/n6.out")" 0 "native IPv6: client6's connection revoked by its egress policy (orientation from pol_sk6)"
ok $([ "$(lost "$TMP/n6.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/n6.out") pings lost)"
is "$(late "$TMP/n4.out")" 0 "native IPv6: client4's connection to srv6 revoked by srv6's ingress policy"
ok $([ "$(lost "$TMP/n4.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/n4.out") pings lost)"
"$ZH" get policy-drops --lab $LAB 2>&1 | sed 's/^/# /'
done_testing
