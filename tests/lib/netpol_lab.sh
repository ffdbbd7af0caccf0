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
#	np_v6_cluster NAME		a dual-stack Cluster NAME (node-a,
#					node-b; the IPv6 tests 29, 59)
#	np_v6_up			lab up (the file $TMP/lab.yaml), N pods
#					Running, both agents synced: two oks;
#					then np_ip4/np_ip6 POD read the
#					addresses
#	np_get FROM FAMILY ADDR		curl -4/-6 from FROM to ADDR:8080
#					/index.html: the page, "" on failure
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

np_v6_cluster() { m_cluster "$1" "node-a node-b" dual; }

np_v6_up() {
	"$ZH" lab up --lab "$LAB" -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
	ok $? "dual-stack lab up with the mesh: $(tail -1 "$TMP/up.out")"
	wait_until 30 lab_running "$1" && wait_until 30 lab_synced node-a &&
		wait_until 30 lab_synced node-b
	ok $? "$1 pods Running, both agents synced"
	"$ZH" lab status --lab "$LAB" -o json >"$TMP/st.json"
}
np_ip4() { jq -r ".pods[] | select(.name==\"$1\") | .ip" "$TMP/st.json"; }
np_ip6() { jq -r ".pods[] | select(.name==\"$1\") | .ip6" "$TMP/st.json"; }
np_get() {
	local u="http://$3:8080/index.html"
	[ "$2" = 6 ] && u="http://[$3]:8080/index.html"
	"$ZH" lab exec --lab "$LAB" "$1" -- curl -"$2" -s --max-time 2 "$u"
}
