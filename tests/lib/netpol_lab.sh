# netpol_lab.sh — shared set-up of the lab NetworkPolicy tests (54–56):
# root, $ZH, jq and the named test tools; a temp dir; held-connection PIDs;
# a cleanup that stops them by PID and takes the lab down. Source after
# tap.sh with LAB set:
#	netpol_lab_setup TAG TOOL...	(TOOL: names under $TOOLS that must exist)
# sets TOOLS, TMP, HOLDS ("": append the PID of every held connection) and
# downs a leftover lab of the same name. Then:
#	np_pods_client_near_far		the YAML of pods client (node-a, sleeps),
#					near (node-a) and far (node-b), both
#					app=server echoing TCP on port 80
#	np_servers_from_client PORT	NetworkPolicy servers-from-client: the
#					servers admit app=client on PORT only
#	np_wait_agents GEN		wait (5 s at most) until both nodes'
#					agents synced state generation GEN (their
#					policy included: it syncs first); 1 if not
netpol_lab_setup() {
	local tag=$1 t
	shift
	TOOLS=$(dirname "$ZH")/tests/tools
	[ "$(id -u)" -eq 0 ] || skip_all "needs root"
	[ -x "$ZH" ] || skip_all "no $ZH (make first)"
	for t in "$@"; do [ -x "$TOOLS/$t" ] || skip_all "no $TOOLS/$t (make first)"; done
	command -v jq >/dev/null || skip_all "no jq"
	TMP=$(mktemp -d "/tmp/zh-$tag.XXXXXX")
	HOLDS=""
	trap netpol_lab_cleanup EXIT
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
}

netpol_lab_cleanup() {
	local p
	for p in $HOLDS; do kill "$p" 2>/dev/null; done
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
	rm -rf "$TMP"
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

# np_apply_sync FILE: apply, then np_wait_agents for the generation applied.
np_apply_sync() {
	local gen
	gen=$("$ZH" apply --lab "$LAB" -f "$1" | awk '{print $NF}') && np_wait_agents "$gen"
}
