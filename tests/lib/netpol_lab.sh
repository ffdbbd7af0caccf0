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

np_wait_agents() {
	local i
	for i in $(seq 100); do
		"$ZH" get stats --lab "$LAB" -o json 2>/dev/null |
			jq -e --argjson g "$1" '[.[] | .generation >= $g] | all and length == 2' \
			>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

np_apply_sync() {
	local gen
	gen=$("$ZH" apply --lab "$LAB" -f "$1" | awk '{print $NF}') && np_wait_agents "$gen"
}
