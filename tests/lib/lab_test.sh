# lab_test.sh — shared set-up of every test that runs a lab. Source after
# tap.sh:
#	lab_test_setup LAB [COMMAND...]
# skips the test unless run as root with $ZH built and python3, jq and each
# COMMAND on the PATH; sets
#	LAB	the lab's name: LAB, plus $ZH_TEST_LAB_SUFFIX when set (so two
#		trees can run the same test at once without clashing)
#	PROBE	tests/bpf/lib/lbprobe.py (the connection prober run in pods)
#	PY	python3 (Debian's /usr/bin/python3 when there is one)
#	TOOLS	build/tests/tools (the helper programs; lab_test_tools checks them)
#	ROOT	the source tree
#	TMP	a temp dir /tmp/zh-LAB.XXXXXX, mode 755 (pods read files from it)
#	BG	an array: append the PID of every background process started
# downs a leftover lab of that name, and traps EXIT (INT and TERM exit) to run lab_test_more_cleanup
# when the test defines it, kill BG by PID, take the lab down and remove TMP.
# Also brings the manifest generators (manifests.sh) and, through tap.sh,
# wait_until (wait.sh).
#
#	lab_test_tools TOOL...		skip unless each TOOL is built in $TOOLS
#	lab_exec POD CMD...		CMD inside POD (zerohop lab exec)
#	lab_pod_ip POD			the pod's IP (lab status)
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
source "$(dirname "${BASH_SOURCE[0]}")/manifests.sh"

lab_test_setup() {
	local c
	LAB=$1${ZH_TEST_LAB_SUFFIX:-}
	shift
	[ "$(id -u)" -eq 0 ] || skip_all "needs root"
	[ -x "$ZH" ] || skip_all "no $ZH (make first)"
	for c in python3 jq "$@"; do command -v "$c" >/dev/null || skip_all "no $c"; done
	ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	PROBE=$ROOT/tests/bpf/lib/lbprobe.py
	PY=$(command -v /usr/bin/python3 || command -v python3)
	TOOLS=$(dirname "$ZH")/tests/tools
	TMP=$(mktemp -d "/tmp/zh-$LAB.XXXXXX")
	chmod 755 "$TMP"
	BG=()
	trap lab_test_cleanup EXIT
	trap 'exit 130' INT TERM
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
}

lab_test_tools() {
	local t
	for t in "$@"; do [ -x "$TOOLS/$t" ] || skip_all "no $TOOLS/$t (make first)"; done
}

lab_test_cleanup() {
	local p
	declare -F lab_test_more_cleanup >/dev/null && lab_test_more_cleanup
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	"$ZH" lab down --lab "$LAB" >/dev/null 2>&1
	rm -rf "$TMP"
}

lab_exec() {
	local pod=$1
	shift
	"$ZH" lab exec --lab "$LAB" "$pod" -- "$@"
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
