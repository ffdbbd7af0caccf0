#!/usr/bin/env bash
# bench-etcd-converge.sh NODES [ROUNDS] — convergence of one endpoint change
# through etcd to every node's kernel (docs/state-etcd.md, docs/BENCHMARKS.md):
# a 3-member etcd and NODES agents in namespaces of this script (the test
# harness tests/lib/etcd_test.sh), then ROUNDS times: flip the selector of
# one Service between two pods with `zerohop apply --state etcd://...` and
# time from the start of the apply until every agent's health file names the
# new revision (written after its maps: agent.md A9). Prints p50/p99/max.
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
for n in $(seq "$NODES"); do wait_until 20 in_sync "$n" || { echo "node $n not in sync"; exit 1; }; done
et_svc "app: web, ver: a" >"$TMP/a.yaml"
et_svc "app: web, ver: b" >"$TMP/b.yaml"
python3 - "$ROUNDS" "$NODES" "$TMP" "$ZH" "$ET_TAG-n1" "$ETCD_SPEC" <<'PY'
import subprocess, sys, time
rounds, nodes, tmp, zh, ns, spec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
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
for v in (dts, ap, pr):
    v.sort()
p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))]
print("nodes %d rounds %d: apply start -> every kernel p50 %.1f ms p99 %.1f ms max %.1f ms;"
      " of which the apply command p50 %.1f ms, apply return -> every kernel p50 %.1f ms p99 %.1f ms" %
      (nodes, rounds, p(dts, 0.5), p(dts, 0.99), dts[-1], p(ap, 0.5), p(pr, 0.5), p(pr, 0.99)))
PY
