#!/usr/bin/env python3
"""lab_sample.py — a real-traffic sample of the random property cases.

    lab_sample.py --lab L --zh ZH --probe NETPOL_PROBE
                  [--seed S] [--scenarios K]

Takes the first K scenarios of gen_property.py (same seed as the unit
property test), and for each: a lab with the scenario's namespaces and pods
(pods spread over both nodes, each serving every probe port over TCP and UDP
with `zerohop echo`), the scenario's policies applied with `zerohop apply`
and enforced by the lab's node agents (we wait until both have synced the
state), then the scenario's pod -> pod probes
sent for real (netpol_probe, concurrently per source pod). Expected verdicts
come from refeval.py on the state as the lab made it (the lab assigns its
own pod IPs; ipBlocks keep the generator's prefixes, and the reference
evaluates them against the real addresses). Probes to non-pod addresses and
SCTP probes are left out (nothing answers them in the lab). Prints TAP, one
line per scenario.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_property  # noqa: E402
import labsync  # noqa: E402
import refeval  # noqa: E402

PORTS = gen_property.PORTS


def sh(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.returncode}: {r.stderr.strip()}")
    return r


def main():
    import random
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--zh", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--scenarios", type=int, default=4)
    a = ap.parse_args()
    zh, lab = a.zh, a.lab
    echo = [zh, "echo"] + sum((["--tcp", str(p), "--udp", str(p)] for p in PORTS), [])
    r = random.Random(a.seed)
    failed = 0
    total = 0
    with tempfile.TemporaryDirectory(prefix="zhP-sample-") as tmp:
        for k in range(a.scenarios):
            docs, _ = gen_property.scenario(r, 50)	# same stream as gen_property
            pr = random.Random(a.seed * 1000 + k)
            nss = [d for d in docs if d["kind"] == "Namespace"]
            pods = [d for d in docs if d["kind"] == "Pod"]
            pols = [d for d in docs if d["kind"] == "NetworkPolicy"]
            for i, p in enumerate(pods):
                p.pop("status", None)
                p["spec"]["nodeName"] = "node-a" if i % 2 == 0 else "node-b"
                p["spec"]["containers"][0]["command"] = echo
            sh([zh, "lab", "down", "--lab", lab], check=False)
            with open(f"{tmp}/topo.yaml", "w") as f:
                yaml.safe_dump_all(nss + pods, f)
            with open(f"{tmp}/np.yaml", "w") as f:
                yaml.safe_dump_all(pols, f)
            sh([zh, "lab", "up", "--lab", lab, "-f", f"{tmp}/topo.yaml"])
            sh([zh, "apply", "--lab", lab, "-f", f"{tmp}/np.yaml"])
            labsync.wait_agents(zh, lab, 2)	# the node agents enforce it
            st = json.loads(sh([zh, "lab", "status", "--lab", lab, "-o", "json"]).stdout)
            ips = {f"{p['namespace']}/{p['name']}": p["ip"] for p in st["pods"]}
            for p in pods:
                p["status"] = {"phase": "Running",
                               "podIP": ips[f"{p['metadata']['namespace']}/{p['metadata']['name']}"]}
            cluster = refeval.Cluster(nss + pods + pols)
            names = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods]
            probes = {}
            for _ in range(50):
                s, d = pr.choice(names), pr.choice(names)
                if s == d:
                    continue
                port, proto = pr.choice(PORTS), pr.choice(["TCP", "UDP"])
                want = cluster.allowed(ips[s], ips[d], port, proto)
                probes.setdefault(s, []).append((f"{proto.lower()}:{ips[d]}:{port}:{d}", want))
            procs = {s: subprocess.Popen([zh, "lab", "exec", "--lab", lab, s, "--", a.probe,
                                          "--timeout-ms", "600"] + [t for t, _ in lst],
                                         stdout=subprocess.PIPE, text=True)
                     for s, lst in probes.items()}
            bad, n = [], 0
            n_deny = sum(1 for lst in probes.values() for _, w in lst if not w)
            for s, pcs in procs.items():
                out, _ = pcs.communicate(timeout=60)
                got = {line.split()[0]: line.split()[1] == "ok" for line in out.splitlines()}
                for t, want in probes[s]:
                    n += 1
                    if got.get(t) != want:
                        bad.append(f"{s} -> {t}: reference {'allow' if want else 'deny'}, "
                                   f"datapath {'allow' if got.get(t) else 'deny'}")
            total += n
            ok = not bad and n > 0
            failed += not ok
            print(f"{'ok' if ok else 'not ok'} {k + 1} - random scenario s{k:04d} (seed {a.seed}): "
                  f"{n} real probes ({n_deny} expected denied), {len(pols)} policies, {len(pods)} pods: "
                  "datapath = reference")
            for b in bad[:10]:
                print("# " + b)
            sys.stdout.flush()
        sh([zh, "lab", "down", "--lab", lab], check=False)
    print(f"# {total} real-traffic probes in {a.scenarios} scenarios")
    print(f"1..{a.scenarios}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
