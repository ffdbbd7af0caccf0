# loopback.sh — shared set-up of the loopback tests (the node proxy's own
# tests: 60, 63–66): the tools they need, a free block of 10 ports, a temp
# dir, and a cleanup that stops every process the test started, by PID.
# Source after tap.sh:
#	loopback_setup TAG [BASE SPAN]
# is harness.sh's test_setup TAG --user curl python3 (no root needed;
# ROOT, PY, TOOLS, TMP, PIDS, the EXIT trap, processes reaped) plus
#	B	first port of a block B..B+9 with nothing listening, picked in
#		BASE..BASE+SPAN (spread by pid and tag, so parallel runs differ);
#		without BASE no block is picked (B, P, S unset)
#	P, S	B and B+9 (the proxy's listen and stats ports by convention)
#	HTTP_BACKEND	tests/tools/http_backend.py (slow, failing, logging or
#		hung HTTP/1.1 backends; run with $PY)
# The kill at exit sends $LOOPBACK_SIG (default TERM).
#
# manifests.sh is sourced too (m_route for HTTPRoutes).
#
# Manifests for a proxy whose backends are processes on loopback (runtime
# Pods with status podIP 127.0.0.1, Running, on node-a), each printed after
# a `---` line:
#	loopback_tools TOOL...		skip unless each TOOL is built in $TOOLS
#	lb_pod NAME APP [PORT [NS [IP]]]	Pod labelled app=APP; PORT ("" for
#					none): a container port named http; NS
#					(default "default"), IP (default
#					127.0.0.1): its namespace and podIP
#	lb_svc NAME APP TARGETPORT	Service app=APP, port 80 -> TARGETPORT
# backends and a readiness check for wait_until:
#	lb_echo NAME K			`zerohop echo` named NAME on 127.0.0.1:B+K
#					(stderr in $TMP/echoK.err; PID in PIDS)
#	lb_http_up PORT...		every http://127.0.0.1:PORT/ answers
# the proxy under test, on a state directory:
#	lb_apply [WHAT]			apply $TMP/m.yaml to $TMP/state as one
#					check ("manifests applied", or WHAT)
#	lb_proxy SVC PORT STATS [ARG...]	`zerohop proxy --service default/SVC`
#					on 127.0.0.1:PORT, stats on STATS, stderr in
#					$TMP/proxy.err (PORT $P) or $TMP/proxy-SVC.err;
#					PID in PX and PIDS
#	lb_up WHAT PORT...		wait (10 s) until lb_http_up PORT... as one
#					check; the test ends if not (proxy.err shown)
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"
source "$(dirname "${BASH_SOURCE[0]}")/manifests.sh"

loopback_setup() {
	local tag=$1 base=$2 span=$3 i mul
	TEST_REAP=1
	TEST_KILL_SIG=${LOOPBACK_SIG:-TERM}
	test_setup "$tag" --user curl python3
	if [ -n "$base" ]; then
		mul=$((7 + $(printf '%s' "$tag" | cksum | cut -d' ' -f1) % 13))
		for i in $(seq 0 40); do
			B=$((base + ($$ * mul + i * 53) % span / 10 * 10))
			# any socket, not only listeners: a range inside the
			# ephemeral ports may hold another process's connections
			[ -z "$(ss -Htan "( sport >= :$B and sport <= :$((B + 9)) )" 2>/dev/null)" ] && break
		done
		P=$B
		S=$((B + 9))
	fi
	HTTP_BACKEND=$ROOT/tests/tools/http_backend.py
}

loopback_tools() { test_tools "$@"; }

lb_pod() {
	printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s, labels: {app: %s}}\n' \
		"$1" "${4:-default}" "$2"
	if [ -n "$3" ]; then
		printf 'spec: {nodeName: node-a, containers: [{name: c, ports: [{name: http, containerPort: %s}]}]}\n' "$3"
	else
		printf 'spec: {nodeName: node-a, containers: [{name: c}]}\n'
	fi
	printf 'status: {podIP: %s, phase: Running}\n' "${5:-127.0.0.1}"
}

lb_svc() {
	printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: %s}\n' "$1"
	printf 'spec: {selector: {app: %s}, ports: [{port: 80, targetPort: %s}]}\n' "$2" "$3"
}

lb_http_up() {
	local p
	for p in "$@"; do curl -s -o /dev/null "http://127.0.0.1:$p/" || return 1; done
}

lb_echo() {
	"$ZH" echo --http "127.0.0.1:$((B + $2))" --name "$1" >/dev/null 2>"$TMP/echo$2.err" &
	PIDS+=($!)
}


lb_apply() {
	mkdir -p "$TMP/state"
	"$ZH" apply --state "$TMP/state" -f "$TMP/m.yaml" >"$TMP/apply.out" 2>&1
	ok $? "${1:-manifests applied}" || cat "$TMP/apply.out"
}

lb_proxy() {
	local svc=$1 port=$2 stats=$3 err
	shift 3
	err=$TMP/proxy-$svc.err
	[ "$port" = "$P" ] && err=$TMP/proxy.err
	"$ZH" proxy --listen "127.0.0.1:$port" --service "default/$svc" --state "$TMP/state" \
		--stats-addr "127.0.0.1:$stats" "$@" 2>>"$err" &
	PX=$!
	PIDS+=($PX)
}

lb_up() {
	local what=$1 up
	shift
	wait_until 10 lb_http_up "$@"
	up=$?
	ok $up "$what"
	[ $up -eq 0 ] || { cat "$TMP/proxy.err"; done_testing; }
}
