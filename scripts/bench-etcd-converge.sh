#!/usr/bin/env bash
# bench-etcd-converge.sh NODES [ROUNDS] — convergence of one endpoint change
# through etcd to every node's kernel (docs/state-etcd.md, docs/BENCHMARKS.md):
# a 3-member etcd and NODES agents in namespaces of this script (the test
# harness tests/lib/etcd_test.sh), then ROUNDS times: flip the selector of
# one Service between two pods with `zerohop apply --state etcd://...` and
# time from the start of the apply until every agent's health file names the
# new revision (written after its maps: agent.md A9). Prints p50/p99/max,
# and the store's cost over the run from the members' own /metrics: gRPC
# requests by method and bytes sent to clients, per change and per node
# (the agents' 1/s liveness probes included; an idle window is measured
# too so the probes can be told apart).
# Needs root; cleans up everything it starts.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/tests/lib/tap.sh"
source "$ROOT/tests/lib/etcd_test.sh"
NODES=${1:-2}
ROUNDS=${2:-100}
et_setup bench-conv 3 "$NODES"
{ et_svc "app: web, ver: a"; et_podm 1 2 a; et_podm 1 3 b; } >"$TMP/m.yaml"
ZHE apply -f "$TMP/m.yaml" >/dev/null || { echo "apply failed"; exit 1; }
for n in $(seq "$NODES"); do et_agent_start "$n"; done
in_sync() { [ "$(et_health "$1")" = ready ] && [ "$(et_gen "$1")" = "$(et_rev)" ]; }
for n in $(seq "$NODES"); do wait_until 30 in_sync "$n" || { echo "node $n not in sync"; cat "$TMP/agent$n.health"; tail -5 "$TMP/agent$n.log"; exit 1; }; done
et_svc "app: web, ver: a" >"$TMP/a.yaml"
et_svc "app: web, ver: b" >"$TMP/b.yaml"
python3 - "$ROUNDS" "$NODES" "$TMP" "$ZH" "$ET_TAG-n1" "$ETCD_SPEC" "$ET_SPEC_LIST" <<'PY'
import re, subprocess, sys, time
rounds, nodes, tmp, zh, ns, spec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
members = sys.argv[7].split(",")
def metrics():
    m = {}
    for ep in members:
        out = subprocess.run(["nsenter", "--net=/run/netns/" + ns, "curl", "-s", "http://%s/metrics" % ep],
                             capture_output=True, text=True).stdout
        for l in out.splitlines():
            g = re.match(r'grpc_server_started_total\{grpc_method="(\w+)".*\} (\S+)', l)
            if g:
                m[g.group(1)] = m.get(g.group(1), 0) + float(g.group(2))
            elif l.startswith("etcd_network_client_grpc_sent_bytes_total "):
                m["bytes"] = m.get("bytes", 0) + float(l.split()[1])
    return m
def diff(a, b):
    return {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b) if b.get(k, 0) - a.get(k, 0)}
m0 = metrics(); t_idle = time.time(); time.sleep(5); m1 = metrics(); idle_s = time.time() - t_idle
t_run = time.time()
def gen(n):
    try:
        for l in open("%s/agent%d.health" % (tmp, n)):
            if l.startswith("generation "):
                return int(l.split()[1])
    except OSError:
        pass
    return 0
dts, ap, pr = [], [], []
for r in range(rounds):
    f = "%s/%s.yaml" % (tmp, "b" if r % 2 == 0 else "a")
    t0 = time.perf_counter()
    out = subprocess.run(["nsenter", "--net=/run/netns/" + ns, zh, "apply", "-f", f, "--state", spec],
                         capture_output=True, text=True)
    rev = int(out.stdout.strip().split()[-1])
    t1 = time.perf_counter()
    while any(gen(n) < rev for n in range(1, nodes + 1)):
        if time.perf_counter() - t0 > 10:
            sys.exit("round %d: not converged in 10 s" % r)
        time.sleep(0.0005)
    dts.append((time.perf_counter() - t0) * 1000)
    ap.append((t1 - t0) * 1000)
    pr.append((time.perf_counter() - t1) * 1000)
m2 = metrics(); run_s = time.time() - t_run
for v in (dts, ap, pr):
    v.sort()
idle, run = diff(m0, m1), diff(m1, m2)
print("store, idle %.1f s: %s" % (idle_s, ", ".join("%s %.0f" % kv for kv in sorted(idle.items()))))
print("store, %d changes in %.1f s: %s" % (rounds, run_s, ", ".join("%s %.0f" % kv for kv in sorted(run.items()))))
per = lambda k: (run.get(k, 0) - idle.get(k, 0) * run_s / idle_s) / rounds / nodes
print("per change per node, idle rate subtracted: %.2f Range, %.2f Watch streams, %.0f bytes sent"
      " (the apply's own Range+Txn are counted once per change, not per node)" % (per("Range"), per("Watch"), per("bytes")))
p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))]
print("nodes %d rounds %d: apply start -> every kernel p50 %.1f ms p99 %.1f ms max %.1f ms;"
      " of which the apply command p50 %.1f ms, apply return -> every kernel p50 %.1f ms p99 %.1f ms" %
      (nodes, rounds, p(dts, 0.5), p(dts, 0.99), dts[-1], p(ap, 0.5), p(pr, 0.5), p(pr, 0.99)))
PY
