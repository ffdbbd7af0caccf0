# scripts/lib/loopback.sh — what every loopback benchmark sets up first:
# a temporary directory, ten free ports, and processes ended by their PID
# (never by name) when the script exits.
#
#   source "$ROOT/scripts/lib/loopback.sh"
#   bench_setup NAME BASE	# TMP=/tmp/zh-NAME.XXXXXX; B..B+9 free, from
#				# BASE..BASE+2000; PIDS=() killed and waited
#				# for on exit, then TMP removed
#   ... & PIDS+=($!)
#
# A range is free when no TCP socket of any state uses it (a range inside
# the ephemeral ports may hold another process's connections).

bench_setup() {
	local name=$1 base=$2 i
	TMP=$(mktemp -d "/tmp/zh-$name.XXXXXX")
	for i in $(seq 0 30); do
		B=$((base + ($$ + i * 37) % 2000 / 10 * 10))
		[ -z "$(ss -Htan "( sport >= :$B and sport <= :$((B + 9)) )" 2>/dev/null)" ] && break
	done
	PIDS=()
	trap bench_cleanup EXIT
}

bench_cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}

# bench_web_manifest PORTNAME PORT [DOC...]: prints the manifest the proxy
# benchmarks serve from a state dir or -f: Service web, port 80 (named
# PORTNAME, none when ""; the name tells the proxy the upstream's protocol,
# http2 for h2c, docs/proxy.md) to targetPort PORT, and its one Pod web-1
# at 127.0.0.1 on node-a. Each DOC (one YAML document, e.g. an HTTPRoute)
# follows after a "---". One definition, so the benchmarks compare
# contenders in front of the same Service.
bench_web_manifest() {
	local pname=$1 port=$2 doc
	shift 2
	cat <<YAML
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{${pname:+name: $pname, }port: 80, targetPort: $port}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec: {nodeName: node-a, containers: [{name: c}]}
status: {podIP: 127.0.0.1, phase: Running}
YAML
	for doc in "$@"; do
		printf -- '---\n%s\n' "$doc"
	done
}
