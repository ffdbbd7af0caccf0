#!/usr/bin/env python3
"""gen_property.py — random NetworkPolicy scenarios with expected verdicts.

    gen_property.py --seed S --scenarios N --probes M --out DIR [--family 6]

Writes, for each scenario k, DIR/sK.yaml (Namespaces, Pods with status.podIP,
NetworkPolicies) and DIR/sK.probes, one probe per line:
    SRC_IP DST_IP PORT PROTO allow|deny
where the verdict comes from refeval.py (the independent reference), never
from the C compiler. Deterministic for a given seed (random.Random(seed)).
The distributions are skewed towards the corners of the API: empty vs absent
lists, named ports that differ per pod, ranges, SCTP/UDP-only rules,
ipBlocks around pod addresses with excepts, AND peers, policyTypes defaults.
--family 6 (docs/ipv6.md "NetworkPolicy"): every pod is dual-stack
(status.podIPs), the probes use IPv6 addresses, most ipBlocks are IPv6
(prefixes /48../128 around pod IPv6 addresses or external ones, excepts
inside) and the rest IPv4, which must match no IPv6 probe. The default
family draws exactly the numbers it always drew (same scenarios per seed).
"""
import argparse
import ipaddress
import os
import random
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refeval  # noqa: E402

NAMESPACES = ["x", "y", "z"]
LABEL_KEYS = {"app": ["a", "b", "c"], "tier": ["web", "db"], "role": ["client", "server"]}
NS_LABEL_KEYS = {"team": ["red", "blue"], "env": ["prod", "dev"]}
PORT_NAMES = ["http", "metrics", "dns"]
PORTS = [53, 79, 80, 81, 82, 443, 8080, 9090]
PROTOS = ["TCP", "TCP", "TCP", "UDP", "UDP", "SCTP"]
EXTERNAL = ["192.0.2.10", "198.51.100.7", "10.245.0.9"]
EXTERNAL6 = ["2001:db8::10", "2001:db8:1::7", "fd00:10:245::9"]
FAM = 4  # --family


def pod_ip6(i):  # the lab's plan: the node's /64, the IPv4's host byte
    return f"fd00:10:244:{i // 200}::{10 + i % 200}"


def addr(pod):  # the address probed and blocks are built around
    st = pod["status"]
    return st["podIPs"][1]["ip"] if FAM == 6 else st["podIP"]


def rand_labels(r, keys, pmin=0):
    lab = {}
    for k, vals in keys.items():
        if r.random() < 0.6 or len(lab) < pmin:
            lab[k] = r.choice(vals)
    return lab


def rand_selector(r, keys, allow_absent=True):
    c = r.random()
    if allow_absent and c < 0.15:
        return None
    if c < 0.35:
        return {}
    sel = {}
    if r.random() < 0.6:
        k = r.choice(list(keys))
        sel["matchLabels"] = {k: r.choice(keys[k])}
    if r.random() < 0.5 or not sel:
        k = r.choice(list(keys))
        op = r.choice(["In", "NotIn", "Exists", "DoesNotExist"])
        e = {"key": k, "operator": op}
        if op in ("In", "NotIn"):
            e["values"] = r.sample(keys[k], r.randint(1, len(keys[k])))
        sel["matchExpressions"] = [e]
    return sel


def rand_ipblock(r, pods):
    v6 = FAM == 6 and r.random() < 0.8  # IPv6 runs keep some IPv4 blocks
    get = (lambda p: p["status"]["podIPs"][1]["ip"]) if v6 else (lambda p: p["status"]["podIP"])
    ip = ipaddress.ip_address(get(r.choice(pods))) if pods and r.random() < 0.8 \
        else ipaddress.ip_address(r.choice(EXTERNAL6 if v6 else EXTERNAL))
    full = 128 if v6 else 32
    plen = r.choice([128, 126, 120, 112, 64, 48] if v6 else [32, 30, 28, 24, 16, 8])
    net = ipaddress.ip_network(f"{ip}/{plen}", strict=False)
    b = {"cidr": str(net)}
    if plen < full and r.random() < 0.5:
        exc = []
        for _ in range(r.randint(1, 2)):
            target = ipaddress.ip_address(get(r.choice(pods))) if pods else ip
            if target not in net:
                target = ip
            elen = r.randint(plen + 1, full)
            exc.append(str(ipaddress.ip_network(f"{target}/{elen}", strict=False)))
        b["except"] = sorted(set(exc))
    return {"ipBlock": b}


def rand_peer(r, pods):
    c = r.random()
    if c < 0.2:
        return rand_ipblock(r, pods)
    peer = {}
    if c < 0.5:
        peer["podSelector"] = rand_selector(r, LABEL_KEYS, allow_absent=False)
    elif c < 0.75:
        peer["namespaceSelector"] = rand_selector(
            r, {**NS_LABEL_KEYS, "kubernetes.io/metadata.name": NAMESPACES}, allow_absent=False)
    else:
        peer["podSelector"] = rand_selector(r, LABEL_KEYS, allow_absent=False)
        peer["namespaceSelector"] = rand_selector(
            r, {**NS_LABEL_KEYS, "kubernetes.io/metadata.name": NAMESPACES}, allow_absent=False)
    return peer


def rand_port(r):
    p = {}
    if r.random() < 0.7:
        p["protocol"] = r.choice(PROTOS)
    c = r.random()
    if c < 0.15:
        return p
    if c < 0.45:
        p["port"] = r.choice(PORT_NAMES)
    elif c < 0.75:
        p["port"] = r.choice(PORTS)
    else:
        lo = r.choice(PORTS)
        p["port"] = lo
        p["endPort"] = lo + r.randint(0, 9000)
        if p["endPort"] > 65535:
            p["endPort"] = 65535
    return p


def rand_rule(r, pods, peers_key):
    rule = {}
    c = r.random()
    if c < 0.15:
        pass  # absent: everybody
    elif c < 0.25:
        rule[peers_key] = []
    else:
        rule[peers_key] = [rand_peer(r, pods) for _ in range(r.randint(1, 3))]
    c = r.random()
    if c < 0.3:
        pass
    elif c < 0.38:
        rule["ports"] = []
    else:
        rule["ports"] = [rand_port(r) for _ in range(r.randint(1, 3))]
    return rule


def rand_policy(r, i, pods):
    spec = {}
    sel = rand_selector(r, LABEL_KEYS)
    spec["podSelector"] = sel if sel is not None else {}
    for key, peers_key in (("ingress", "from"), ("egress", "to")):
        c = r.random()
        if c < 0.3:
            continue
        if c < 0.45:
            spec[key] = []
        else:
            spec[key] = [rand_rule(r, pods, peers_key) for _ in range(r.randint(1, 2))]
    c = r.random()
    if c < 0.4:
        pass
    elif c < 0.6:
        spec["policyTypes"] = ["Ingress"]
    elif c < 0.8:
        spec["policyTypes"] = ["Egress"]
    else:
        spec["policyTypes"] = ["Ingress", "Egress"]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"np{i}", "namespace": r.choice(NAMESPACES)}, "spec": spec}


def rand_pod(r, i, ns):
    ports = []
    used = set()
    for name in PORT_NAMES:
        if r.random() < 0.6:
            proto = r.choice(PROTOS)
            num = r.choice(PORTS)
            if (num, proto) in used:
                continue
            used.add((num, proto))
            ports.append({"name": name, "containerPort": num, "protocol": proto})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": ns,
                         "labels": rand_labels(r, LABEL_KEYS)},
            "spec": {"nodeName": "node-a",
                     "containers": [{"name": "c", "image": "agnhost", "ports": ports}]},
            "status": {"phase": "Running", "podIP": f"10.244.{i // 200}.{10 + i % 200}",
                       **({"podIPs": [{"ip": f"10.244.{i // 200}.{10 + i % 200}"},
                                      {"ip": pod_ip6(i)}]} if FAM == 6 else {})}}


def scenario(r, n_probes):
    docs = []
    for ns in NAMESPACES:
        docs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": ns, "labels": rand_labels(r, NS_LABEL_KEYS)}})
    pods = [rand_pod(r, i, r.choice(NAMESPACES)) for i in range(r.randint(3, 9))]
    docs.extend(pods)
    docs.extend(rand_policy(r, i, pods) for i in range(r.randint(1, 5)))
    cluster = refeval.Cluster(docs)
    ips = [addr(p) for p in pods]
    ext = EXTERNAL6 if FAM == 6 else EXTERNAL
    probes = []
    for _ in range(n_probes):
        src = r.choice(ips)
        dst = r.choice(ips + ext) if r.random() < 0.9 else r.choice(ext)
        if r.random() < 0.1:
            src, dst = r.choice(ext), r.choice(ips)
        port = r.choice(PORTS + [r.randint(1, 65535)])
        proto = r.choice(["TCP", "TCP", "UDP", "SCTP"])
        ok = cluster.allowed(src, dst, port, proto)
        probes.append(f"{src} {dst} {port} {proto} {'allow' if ok else 'deny'}")
    return docs, probes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenarios", type=int, default=200)
    ap.add_argument("--probes", type=int, default=50)
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", type=int, choices=[4, 6], default=4)
    a = ap.parse_args()
    global FAM
    FAM = a.family
    r = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for k in range(a.scenarios):
        docs, probes = scenario(r, a.probes)
        with open(os.path.join(a.out, f"s{k:04d}.yaml"), "w") as f:
            yaml.safe_dump_all(docs, f, sort_keys=False)
        with open(os.path.join(a.out, f"s{k:04d}.probes"), "w") as f:
            f.write("\n".join(probes) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
