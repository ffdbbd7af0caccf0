# netpol_lab.sh — shared pieces of the lab NetworkPolicy tests (52, 54–56), on
# top of lab_test.sh. Source after tap.sh:
#	netpol_lab_setup LAB TOOL...	lab_test_setup LAB, and skip unless
#					every TOOL exists under $TOOLS
#					(build/tests/tools); sets TOOLS
#	np_pods_client_near_far		the YAML of pods client (node-a, sleeps),
#					near (node-a) and far (node-b), both
#					app=server echoing TCP on port 80
#	np_servers_from_client PORT	NetworkPolicy servers-from-client: the
#					servers admit app=client on PORT only
#	np_wait_agents GEN		wait (5 s at most) until both nodes'
#					agents synced state generation GEN (their
#					policy included: it syncs first); 1 if not
#	np_apply_sync FILE		apply, then np_wait_agents
#	np_hold_near_far SECS		pod client holds one echo connection to
#					near and one to far for SECS s
#					(netpol_hold; $TMP/near.out, far.out;
#					PIDs in BG); sets NEAR and FAR
#	np_revoked_ok WHEN		after a change at 3 s that revokes both
#					holds: no echo from 3000 ms on, more
#					than 5 pings lost (WHEN: the test name's
#					"after the change" part)
source "$(dirname "${BASH_SOURCE[0]}")/lab_test.sh"

netpol_lab_setup() {
	local t
	lab_test_setup "$1"
	shift
	TOOLS=$(dirname "$ZH")/tests/tools
	for t in "$@"; do [ -x "$TOOLS/$t" ] || skip_all "no $TOOLS/$t (make first)"; done
}

np_pods_client_near_far() {
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {app: client}}
spec: {nodeName: node-a, containers: [{name: c, command: [sleep, "100000"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: near, labels: {app: server}}
spec: {nodeName: node-a, containers: [{name: echo, command: [$ZH, echo, --tcp, "80"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: far, labels: {app: server}}
spec: {nodeName: node-b, containers: [{name: echo, command: [$ZH, echo, --tcp, "80"]}]}
YAML
}

np_servers_from_client() {
	cat <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: servers-from-client}
spec:
  podSelector: {matchLabels: {app: server}}
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: $1}]}]
YAML
}

np_wait_agents() { WAIT_STEP=0.05 wait_until 5 np_agents_at "$1"; }
np_agents_at() {	# GEN: both agents synced generation GEN
	"$ZH" get stats --lab "$LAB" -o json 2>/dev/null |
		jq -e --argjson g "$1" '[.[] | .generation >= $g] | all and length == 2' >/dev/null
}

np_apply_sync() {
	local gen
	gen=$("$ZH" apply --lab "$LAB" -f "$1" | awk '/generation/ {g = $NF} END {print g}') && np_wait_agents "$gen"
}

np_hold_near_far() {
	NEAR=$(lab_pod_ip near) FAR=$(lab_pod_ip far)
	lab_exec client "$TOOLS/netpol_hold" "$NEAR" 80 "$1" >"$TMP/near.out" 2>&1 &
	BG+=($!)
	lab_exec client "$TOOLS/netpol_hold" "$FAR" 80 "$1" >"$TMP/far.out" 2>&1 &
	BG+=($!)
}

np_revoked_ok() {
	late() { awk '$1 >= 3000 && $2 == "ok"' "$1" | wc -l; }
	lost() { awk '$1 >= 3000 && $2 == "lost"' "$1" | wc -l; }
	is "$(late "$TMP/far.out")" 0 "cross-node connection revoked: no echo $1"
	ok $([ "$(lost "$TMP/far.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/far.out") pings lost)"
	is "$(late "$TMP/near.out")" 0 "same-node (short-circuited) connection revoked too"
	ok $([ "$(lost "$TMP/near.out")" -gt 5 ]; echo $?) "  ($(lost "$TMP/near.out") pings lost)"
}
