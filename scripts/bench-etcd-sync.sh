#!/usr/bin/env bash
# bench-etcd-sync.sh [RUNS=5] [SERVICES=10000] [ENDPOINTS=10] — the agent's
# initial sync from etcd (docs/state-etcd.md, docs/BENCHMARKS.md), against
# the directory source with the same objects, interleaved:
#   python3 scripts/gen-big-state.py writes SERVICES Services x ENDPOINTS
#   pods; a 1-member etcd of this script (loopback, ephemeral ports, data in
#   a temp dir) gets them through `zerohop apply`; then RUNS times each:
#   `zerohop agent --once` from etcd:// and from the directory, timed from
#   the start of the process to its exit (maps programmed), with its peak
#   RSS. Prints every run, the medians and the median of the per-pair
#   ratios etcd/dir. A third contender, interleaved too: the etcd run with
#   glibc's huge-page heap (THP_TUNABLES below, an operator's knob: the
#   parse of 100,000s of small values is bound by malloc and first-touch
#   page faults, docs/state-etcd.md).
# Needs root (BPF maps, a cgroup of its own); cleans up everything it starts.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=$ROOT/build/zerohop
RUNS=${1:-5}
S=${2:-10000}
E=${3:-10}
TAG=zhbes$$
TMP=$(mktemp -d /tmp/zh-bench-etcd-sync.XXXXXX)
CG=/sys/fs/cgroup/unified/$TAG
PIN=/sys/fs/bpf/$TAG
ETCD_PID=
cleanup() {
	[ -n "$ETCD_PID" ] && kill "$ETCD_PID" 2>/dev/null && wait "$ETCD_PID" 2>/dev/null
	"$ZH" agent --cleanup --node node-a --pin-dir "$PIN" >/dev/null 2>&1
	rm -rf "$PIN"
	rmdir "$CG" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
[ "$(id -u)" = 0 ] || { echo "needs root"; exit 1; }
command -v etcd >/dev/null || { echo "no etcd (Debian etcd-server)"; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
CP=$(free_port)
PP=$(free_port)
python3 "$ROOT/scripts/gen-big-state.py" "$TMP/dir" "$S" "$E"
(cd "$TMP" && exec timeout 1800 etcd --name b --data-dir "$TMP/etcd" \
	--listen-client-urls "http://127.0.0.1:$CP" --advertise-client-urls "http://127.0.0.1:$CP" \
	--listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
	--initial-cluster "b=http://127.0.0.1:$PP" --max-txn-ops 200000 \
	--max-request-bytes 134217728 >"$TMP/etcd.log" 2>&1) &
ETCD_PID=$!
SPEC=etcd://127.0.0.1:$CP
for _ in $(seq 100); do
	etcdctl --endpoints "127.0.0.1:$CP" endpoint health >/dev/null 2>&1 && break
	sleep 0.1
done
t0=$(date +%s.%N)
"$ZH" apply --state "$SPEC" -f "$TMP/dir/manifests/cluster.yaml" >/dev/null &&
	"$ZH" apply --state "$SPEC" -f "$TMP/dir/manifests/services.yaml" >/dev/null &&
	"$ZH" apply --state "$SPEC" -f "$TMP/dir/pods/pods.yaml" >/dev/null ||
	{ echo "loading etcd failed"; tail -5 "$TMP/etcd.log"; exit 1; }
echo "loaded $(etcdctl --endpoints "127.0.0.1:$CP" get --prefix /zerohop/ --keys-only | grep -c '^/zerohop/') keys in $(echo "$(date +%s.%N) - $t0" | bc) s"
mkdir -p "$CG"
THP_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.top_pad=268435456
one() {	# SOURCE [GLIBC_TUNABLES]: prints "seconds rss_kb"
	local out
	/usr/bin/time -o "$TMP/time" -f "%e %M" env ${2:+GLIBC_TUNABLES=$2} "$ZH" agent --once --node node-a --state "$1" \
		--pin-dir "$PIN" --cgroup "$CG" --accel off --metrics off >"$TMP/agent.log" 2>&1
	out=$(cat "$TMP/time")
	grep -q "load" "$TMP/agent.log" || { echo "agent failed:" >&2; tail -3 "$TMP/agent.log" >&2; exit 1; }
	"$ZH" agent --cleanup --node node-a --pin-dir "$PIN" >/dev/null 2>&1
	echo "$out $(grep -o "load [0-9.]* ms" "$TMP/agent.log" | head -1)"
}
: >"$TMP/etcd.t"
: >"$TMP/dir.t"
: >"$TMP/thp.t"
for r in $(seq "$RUNS"); do
	e=$(one "$SPEC") || exit 1
	d=$(one "$TMP/dir") || exit 1
	h=$(one "$SPEC" "$THP_TUNABLES") || exit 1
	echo "run $r: etcd $e | dir $d | etcd+hugepage-heap $h"
	echo "$e" >>"$TMP/etcd.t"
	echo "$d" >>"$TMP/dir.t"
	echo "$h" >>"$TMP/thp.t"
done
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
me=$(cut -d' ' -f1 "$TMP/etcd.t" | med)
md=$(cut -d' ' -f1 "$TMP/dir.t" | med)
re=$(cut -d' ' -f2 "$TMP/etcd.t" | med)
rd=$(cut -d' ' -f2 "$TMP/dir.t" | med)
mh=$(cut -d' ' -f1 "$TMP/thp.t" | med)
ratio=$(paste -d' ' "$TMP/etcd.t" "$TMP/dir.t" | awk '{printf "%.4f\n", $1 / $6}' | med)
hratio=$(paste -d' ' "$TMP/thp.t" "$TMP/etcd.t" | awk '{printf "%.4f\n", $1 / $6}' | med)
echo "median of $RUNS: etcd $me s (RSS $((re / 1024)) MiB), directory $md s (RSS $((rd / 1024)) MiB); etcd/dir median of pairs ${ratio}x; etcd with the huge-page heap $mh s, /etcd median of pairs ${hratio}x; load $(cut -d' ' -f1 /proc/loadavg)"
