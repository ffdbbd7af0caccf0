# lab_test.sh — shared set-up of every test that runs a lab. Source after
# tap.sh:
#	lab_test_setup LAB [COMMAND...]
# is harness.sh's test_setup LAB python3 jq COMMAND... (root, $ZH, the
# commands; ROOT, PY, TOOLS, TMP, PIDS alias BG, the EXIT trap) plus
#	LAB	the lab's name: LAB, plus $ZH_TEST_LAB_SUFFIX when set (so two
#		trees can run the same test at once without clashing)
#	PROBE	tests/bpf/lib/lbprobe.py (the connection prober run in pods)
# It downs a leftover lab of that name first, and the EXIT trap takes the
# lab down after the test's own cleanup and the kill of its processes.
# Also brings the manifest generators (manifests.sh) and, through tap.sh,
# wait_until (wait.sh).
#
#	lab_test_tools TOOL...		skip unless each TOOL is built in $TOOLS
#	lab_up WHAT ARG...		lab up as one check; the test ends if it fails
#	lab_exec POD CMD...		CMD inside POD (zerohop lab exec)
#	lab_pod_ip POD			the pod's IP (lab status)
#	lab_svc_ips NAME		a Service's clusterIPs, space-separated, in
#					family order (get services)
#	lab_agent_pid NODE, lab_proxy_pid NODE	the node daemons' PIDs
#	lab_agent_replaced NODE OLD_PID	NODE runs a live agent other than
#					OLD_PID (after a kill: for wait_until)
#	lab_proxy_replaced NODE OLD_PID	the same for NODE's L7 proxy
#	lab_synced NODE			NODE's agent has applied the state's
#					current generation (zerohop get stats)
#	lab_listener_pid NETNS PORT	PID of the TCP listener on PORT in the
#					network namespace NETNS; empty if none
#	lab_listening NETNS PORT	something listens there (for wait_until)
#	lab_running N			at least N pods are Running (lab status)
#	lab_conns_ok FROM HOST PORT [N]	N (default 1) new TCP connections from
#					pod FROM to HOST:PORT all answered
#					(lbprobe.py conns)
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"
source "$(dirname "${BASH_SOURCE[0]}")/manifests.sh"

lab_test_setup() {
	LAB=$1${ZH_TEST_LAB_SUFFIX:-}
	shift
	test_setup "$LAB" python3 jq "$@"
	PROBE=$ROOT/tests/bpf/lib/lbprobe.py
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
}

test_cleanup_hook() { "$ZH" lab down --lab "$LAB" >/dev/null 2>&1; }

lab_test_tools() { test_tools "$@"; }

lab_exec() {
	local pod=$1
	shift
	"$ZH" lab exec --lab "$LAB" "$pod" -- "$@"
}

lab_svc_ips() {
	"$ZH" get services --lab "$LAB" -o json |
		jq -r ".[] | select(.name==\"$1\") | .clusterIPs | join(\" \")"
}

lab_pod_ip() {
	"$ZH" lab status --lab "$LAB" -o json | jq -r ".pods[] | select(.name==\"$1\") | .ip"
}

lab_agent_pid() {
	"$ZH" lab status --lab "$LAB" -o json | jq -r ".nodes[] | select(.name==\"$1\") | .agentPid"
}

lab_proxy_pid() {
	"$ZH" lab status --lab "$LAB" -o json | jq -r ".nodes[] | select(.name==\"$1\") | .proxyPid"
}

lab_agent_replaced() {
	local q
	q=$(lab_agent_pid "$1")
	[ -n "$q" ] && [ "$q" != null ] && [ "$q" -gt 0 ] && [ "$q" != "$2" ] && kill -0 "$q" 2>/dev/null
}

lab_proxy_replaced() {
	local q
	q=$(lab_proxy_pid "$1")
	[ -n "$q" ] && [ "$q" != null ] && [ "$q" -gt 0 ] && [ "$q" != "$2" ] && kill -0 "$q" 2>/dev/null
}

lab_synced() {
	local g
	g=$(cat "/run/zerohop/$LAB/state/generation") &&
		[ "$("$ZH" get --lab "$LAB" stats -o json | jq ".\"$1\".generation")" -ge "$g" ]
}

lab_listener_pid() {
	ip netns exec "$1" ss -Htlnp "sport = :$2" 2>/dev/null |
		sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1
}

lab_listening() { [ -n "$(lab_listener_pid "$1" "$2")" ]; }

lab_running() { [ "$("$ZH" lab status --lab "$LAB" -o json 2>/dev/null | jq '[.pods[] | select(.phase == "Running")] | length')" -ge "$1" ]; }

lab_conns_ok() {
	local r
	r=$(lab_exec "$1" python3 "$PROBE" conns "$2" "$3" "${4:-1}" 2>/dev/null) &&
		[ "$(echo "$r" | jq .fails)" = 0 ]
}

# lab_up WHAT ARG...: `zerohop lab up --lab $LAB ARG...` as one check named
# "lab up: WHAT (N s)" (VAR=value before the call reaches the lab's
# daemons); when it fails, its output and the end of the supervisor's log
# as diagnostics, and the test ends there. The output stays in $TMP/up.log.
lab_up() {
	local what=$1 t0=$SECONDS rc
	shift
	"$ZH" lab up --lab "$LAB" "$@" >"$TMP/up.log" 2>&1
	rc=$?
	ok $rc "lab up${what:+: $what} ($((SECONDS - t0)) s)"
	[ $rc -eq 0 ] && return 0
	sed 's/^/#   /' "$TMP/up.log"
	[ -f "/run/zerohop/$LAB/supervisor.log" ] &&
		tail -20 "/run/zerohop/$LAB/supervisor.log" | sed 's/^/#   supervisor: /'
	done_testing
}
