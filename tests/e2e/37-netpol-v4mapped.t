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
#    egress is open to all: revoked (passive side, node-b).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/netpol_lab.sh"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
netpol_lab_setup t14np netpol_hold
V6=$(cd "$(dirname "$0")/../bpf/lib" && pwd)/v6probe.py
{
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
srv6_answers() { "$ZH" lab exec --lab $LAB client4 -- /usr/bin/python3 "$V6" rtt 4 "$S6" 80 1 | grep -q '"error": null'; }
wait_until 5 srv6_answers
ok $([ ! -e /sys/fs/bpf/zerohop/$LAB/node-a/pol_link_egress ] &&
	[ ! -e /sys/fs/bpf/zerohop/$LAB/node-b/pol_link_ingress ]; echo $?) \
	"no per-packet policy program attached yet (nothing isolated)"
"$ZH" lab exec --lab $LAB client6 -- "$TOOLS/netpol_hold" "::ffff:$S4" 80 5 >"$TMP/h6.out" 2>&1 &
BG+=($!)
"$ZH" lab exec --lab $LAB client4 -- "$TOOLS/netpol_hold" "$S6" 80 5 >"$TMP/h4.out" 2>&1 &
BG+=($!)
sleep 1.5
grep -q " ok" "$TMP/h6.out" && grep -q " ok" "$TMP/h4.out"
ok $? "both connections echo before the change (AF_INET6 -> srv4, AF_INET -> dual-stack srv6)"
np_apply_sync "$TMP/np.yaml"
ok $? "policies applied and synced: client6 egress denied, srv6 ingress denied"
wait "${BG[@]}"
BG=()
late() { awk '$1 >= 3000 && $2 == "ok"' "$1" | wc -l; }
lost() { awk '$1 >= 3000 && $2 == "lost"' "$1" | wc -l; }
is "$(late "$TMP/h6.out")" 0 "AF_INET6 client's connection revoked by its egress policy (orientation from pol_sockops)"
ok $([ "$(lost "$TMP/h6.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/h6.out") pings lost)"
is "$(late "$TMP/h4.out")" 0 "connection to the dual-stack server revoked by its ingress policy"
ok $([ "$(lost "$TMP/h4.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/h4.out") pings lost)"
"$ZH" get policy-drops --lab $LAB 2>&1 | sed 's/^/# /'
done_testing
