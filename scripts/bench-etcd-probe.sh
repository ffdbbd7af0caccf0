#!/usr/bin/env bash
# bench-etcd-probe.sh [RUNS=3] [N=300] — etcd's CPU per liveness probe over
# TLS (docs/state-etcd.md "TLS and client certificates", docs/BENCHMARKS.md):
# the watcher sends POST /v3/maintenance/status once a second; this sends N
# of them to a 1-member etcd of its own (loopback, ephemeral ports, https://
# only, --client-cert-auth, certificates from scripts/etcd-certs.sh), first
# each on a fresh connection (one curl per probe: a full handshake with the
# client certificate), then all on one kept connection (curl --next, what
# eg_call_keep does), interleaved RUNS times, and prints etcd's
# utime+stime per probe for both (/proc/PID/stat) and its idle CPU.
# Cleans up what it starts.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-3}
N=${2:-300}
TMP=$(mktemp -d /tmp/zh-bench-etcd-probe.XXXXXX)
ETCD_PID=
trap '[ -n "$ETCD_PID" ] && kill "$ETCD_PID" 2>/dev/null && wait "$ETCD_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
for c in etcd curl bc openssl; do command -v $c >/dev/null || { echo "no $c"; exit 1; }; done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
TP=$(free_port)
PP=$(free_port)
"$ROOT/scripts/etcd-certs.sh" "$TMP/pki" IP:127.0.0.1 >/dev/null 2>&1 || { echo "certificates failed"; exit 1; }
cd "$TMP" || exit 1
timeout 1800 etcd --name p --data-dir "$TMP/etcd" \
	--listen-client-urls "https://127.0.0.1:$TP" --advertise-client-urls "https://127.0.0.1:$TP" \
	--listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
	--initial-cluster "p=http://127.0.0.1:$PP" --cert-file pki/server.crt --key-file pki/server.key \
	--trusted-ca-file pki/ca.crt --client-cert-auth >etcd.log 2>&1 &
ETCD_PID=$!
U=https://127.0.0.1:$TP/v3/maintenance/status
C=(--cacert pki/ca.crt --cert pki/client.crt --key pki/client.key -s -o /dev/null -X POST -d '{}')
for _ in $(seq 100); do curl "${C[@]}" "$U" && break; sleep 0.1; done
EP=$(pgrep -P "$ETCD_PID" -x etcd || echo "$ETCD_PID")	# timeout's child
cpu() { awk '{print $14 + $15}' "/proc/$EP/stat"; }	# clock ticks (10 ms)
kept=()
for i in $(seq $((N - 1))); do kept+=("${C[@]}" "$U" --next); done
for r in $(seq "$RUNS"); do
	c0=$(cpu)
	for i in $(seq "$N"); do curl "${C[@]}" "$U"; done
	c1=$(cpu)
	curl "${kept[@]}" "${C[@]}" "$U"
	c2=$(cpu)
	sleep 2
	c3=$(cpu)
	echo "run $r: fresh TLS connection per probe $(echo "scale=2; ($c1 - $c0) * 10 / $N" | bc) ms etcd CPU | one kept connection $(echo "scale=2; ($c2 - $c1) * 10 / $N" | bc) ms | etcd idle $(( (c3 - c2) * 5 )) ms/s | load $(cut -d' ' -f1 /proc/loadavg)"
done
