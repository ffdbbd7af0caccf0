#!/usr/bin/env bash
# bench-latency.sh — one change: apply returns -> the change is in the node's
# kernel maps (lb_meta GENERATION), at scale, with a standalone agent (no
# lab) on a state written by gen-big-state.py.
#   usage: scripts/bench-latency.sh [SERVICES=10000] [ENDPOINTS=10] [ROUNDS=21] [KIND=pod|svc]
#   KIND pod: a runtime pod of Service s0 flips Running <-> Pending (becomes
#             ready / not ready: the common endpoint change, written like the
#             lab's kubelet does, ss_put_pod)
#   KIND svc: a Service "lat" (selector app=s0) flips targetPort 8080 <-> 8081
# The first change creates the pod / Service (a full sync); the rest are the
# measured kind. Env: ZH (bench client, default build/zerohop), AGENT_ZH
# (agent binary, default ZH: to compare builds). Not part of make check.
# docs/benchmarks/log/agent.md quotes it.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
AGENT_ZH=${AGENT_ZH:-$ZH}
S=${1:-10000}
E=${2:-10}
N=${3:-21}
KIND=${4:-pod}
T=$(mktemp -d /tmp/zh-bench-lat.XXXXXX)
D=/dev/shm/zhC1-lat P=/sys/fs/bpf/zhC1-lat CG=/sys/fs/cgroup/unified/zhC1-lat
AP=
cleanup() {
	[ -n "$AP" ] && kill "$AP" 2>/dev/null && wait "$AP" 2>/dev/null
	"$ZH" agent --cleanup --node lat --pin-dir $P >/dev/null 2>&1
	rmdir $CG 2>/dev/null
	rm -rf $D "$T"
}
trap cleanup EXIT

for ph in Running Pending; do
	cat > "$T/pod-$ph.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: lat-0, labels: {app: s0}}
spec:
  nodeName: node-a
  containers: [{name: c, ports: [{containerPort: 8080}]}]
status: {podIP: 10.255.255.1, phase: $ph}
EOF
done
for tp in 8080 8081; do
	cat > "$T/lat-$tp.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: lat}
spec:
  selector: {app: s0}
  ports: [{port: 80, targetPort: $tp}]
EOF
done
if [ "$KIND" = pod ]; then
	FILES=(-f "$T/pod-Running.yaml" -f "$T/pod-Pending.yaml")
else
	FILES=(-f "$T/lat-8081.yaml" -f "$T/lat-8080.yaml")
fi

rm -rf $D
python3 "$ROOT/scripts/gen-big-state.py" $D "$S" "$E" || exit 1
mkdir -p $CG
"$AGENT_ZH" agent --node lat --state $D --pin-dir $P --cgroup $CG --accel off >"$T/agent.log" 2>&1 &
AP=$!
for _ in $(seq 600); do grep -q 'agent: generation' "$T/agent.log" && break; sleep 0.1; done
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); $S Services x $E endpoints, $N changes ($KIND), agent $AGENT_ZH"
"$ZH" agent --bench-latency "$N" --node lat --state $D --pin-dir $P "${FILES[@]}"
rc=$?
echo "# last sync: $(grep 'agent: generation' "$T/agent.log" | tail -n 1 | sed 's/.*alias/alias/')"
echo "# incremental syncs: $(grep -c 'incremental (' "$T/agent.log"), full: $(grep -c '; full;' "$T/agent.log")"
exit $rc
