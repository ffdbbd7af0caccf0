#!/usr/bin/env python3
"""conformance.py — the Kubernetes upstream e2e NetworkPolicy cases.

Reproduces kubernetes/kubernetes test/e2e/network/netpol/network_policy.go
(its case list and truth tables) on the upstream model:
namespaces x, y, z (labels ns=NAME and kubernetes.io/metadata.name), pods a,
b, c in each (label pod=NAME) serving 80 and 81 over TCP and UDP with named
ports serve-80-tcp, serve-80-udp, serve-81-tcp, serve-81-udp, a Service
s-NS-POD per pod. Every case is named after its upstream name.

Each case is a list of steps (the policies in force, label changes) with
checks (port, protocol, expected truth table). The expected tables are
written here the way upstream writes them (all-true, then flipped cells); on
top of that every table is recomputed by the independent reference
evaluator (refeval.py) and the two must agree — so the oracle is checked
against upstream before anything is checked against the datapath.

    conformance.py list
    conformance.py emit --out DIR [--family 4,6]
                                         offline scenarios (fixed pod IPs) in the
                                         gen_property.py format, for the C tests;
                                         exit 1 if reference != upstream anywhere;
                                         with 6: every pod also has an IPv6
                                         (status.podIPs) and each case runs again
                                         over IPv6 addresses (CIDR cases with IPv6
                                         blocks), named "... [IPv6]"
    conformance.py lab --lab L --zh ZH --probe NETPOL_PROBE
                       [--cases I,J,..] [--via svc,ip] [--family 6]
                                         run on a lab that is up with `topology`
                                         (mesh on: the node agents enforce the
                                         policies `zerohop apply` writes);
                                         prints TAP; --family 6: a dual-stack lab
                                         (topology --family 6), probes over IPv6
    conformance.py topology              the lab manifests (namespaces, pods, services)
"""
import argparse
import ipaddress
import json
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import labsync  # noqa: E402
import refeval  # noqa: E402

NS = ["x", "y", "z"]
PODS = ["a", "b", "c"]
ALL = [f"{n}/{p}" for n in NS for p in PODS]
NODES = ["node-a", "node-b"]
FAM = 4  # the family probed (--family): addresses, ipBlocks, Services


def node_of(pod):  # spread over both nodes: same-node and cross-node pairs
    return NODES[ALL.index(pod) % 2]


# ---- manifests -------------------------------------------------------------

def ns_doc(ns, extra=None):
    labels = {"ns": ns}
    labels.update(extra or {})
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}


def pod_ports():
    return [{"name": f"serve-{p}-{pr.lower()}", "containerPort": p, "protocol": pr}
            for p in (80, 81) for pr in ("TCP", "UDP")]


def pod_doc(pod, extra=None, ip=None, echo_cmd=None, ip6=None):
    ns, name = pod.split("/")
    labels = {"pod": name}
    labels.update(extra or {})
    d = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": ns, "labels": labels},
         "spec": {"nodeName": node_of(pod),
                  "containers": [{"name": "server", "ports": pod_ports()}]}}
    if echo_cmd:
        d["spec"]["containers"][0]["command"] = echo_cmd
    if ip:
        d["status"] = {"phase": "Running", "podIP": ip}
    if ip and ip6:
        d["status"]["podIPs"] = [{"ip": ip}, {"ip": ip6}]
    return d


def cluster_doc():
    """The dual-stack Cluster of the IPv6 runs (docs/ipv6.md)."""
    return {"apiVersion": "zerohop.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "netpol"},
            "spec": {"nodes": NODES, "podCIDRs": ["10.244.0.0/16", "fd00:10:244::/56"],
                     "serviceCIDRs": ["10.96.0.0/12", "fd00:10:96::/112"]}}


def host(ip):  # the one-address ipBlock of ip, either family
    return ip + ("/128" if ":" in ip else "/32")


def svc_doc(pod):
    ns, name = pod.split("/")
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"s-{ns}-{name}", "namespace": ns},
            "spec": {**({"ipFamilyPolicy": "PreferDualStack"} if FAM == 6 else {}),
                     "selector": {"pod": name},
                     "ports": [{"name": f"service-port-{p}-{pr.lower()}", "port": p,
                                "targetPort": p, "protocol": pr}
                               for p in (80, 81) for pr in ("TCP", "UDP")]}}


def np(name, ns, pod_sel, ingress=None, egress=None, types=None):
    spec = {"podSelector": pod_sel}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    if types is not None:
        spec["policyTypes"] = types
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def ml(**kw):
    return {"matchLabels": {k.replace("__", "."): v for k, v in kw.items()}}


def mx(key, op, values=None):
    e = {"key": key, "operator": op}
    if values is not None:
        e["values"] = values
    return {"matchExpressions": [e]}


def ports(*spec):  # ports((80,"TCP"), ("serve-81-tcp",), (None,"TCP"))
    out = []
    for s in spec:
        p = {}
        if s[0] is not None:
            p["port"] = s[0]
        if len(s) > 1:
            p["protocol"] = s[1]
        out.append(p)
    return out


# ---- the cases ---------------------------------------------------------------
# A check is (port, proto, f) with f(src, dst) -> expected bool, src/dst "ns/pod".

def S(pod):
    return pod.split("/")


def step(policies, checks, ns_labels=None, pod_labels=None):
    return {"policies": policies, "checks": checks, "ns_labels": ns_labels or {},
            "pod_labels": pod_labels or {}}


def deny_ingress_x():
    return np("deny-ingress", "x", {}, ingress=[])


def cases(ips):
    """ips: pod -> IP (needed by the CIDR cases)."""
    c = []

    def add(name, *steps):
        c.append((name, list(steps)))

    add("should support a 'default-deny-ingress' policy",
        step([deny_ingress_x()], [(80, "TCP", lambda s, d: S(d)[0] != "x")]))
    add("should support a 'default-deny-all' policy",
        step([np("deny-all", "x", {}, ingress=[], egress=[], types=["Ingress", "Egress"])],
             [(80, "TCP", lambda s, d: S(s)[0] != "x" and S(d)[0] != "x")]))
    add("should enforce policy to allow traffic from pods within server namespace based on PodSelector",
        step([np("x-a-allows-x-b", "x", ml(pod="a"), ingress=[{"from": [{"podSelector": ml(pod="b")}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or s == "x/b")]))
    add("should enforce policy to allow ingress traffic for a target",
        step([deny_ingress_x(),
              np("allow-all-to-a", "x", ml(pod="a"),
                 ingress=[{"from": [{"podSelector": {}, "namespaceSelector": {}}]}])],
             [(80, "TCP", lambda s, d: S(d)[0] != "x" or d == "x/a")]))
    add("should enforce policy to allow ingress traffic from pods in all namespaces",
        step([np("allow-from-all-ns", "x", ml(pod="a"), ingress=[{"from": [{"namespaceSelector": {}}]}])],
             [(80, "TCP", lambda s, d: True)]))
    add("should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
        step([np("allow-ns-y", "x", ml(pod="a"), ingress=[{"from": [{"namespaceSelector": ml(ns="y")}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y")]))
    add("should enforce policy based on PodSelector with MatchExpressions",
        step([np("allow-pod-in-b", "x", ml(pod="a"), ingress=[{"from": [{"podSelector": mx("pod", "In", ["b"])}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or s == "x/b")]))
    add("should enforce policy based on NamespaceSelector with MatchExpressions",
        step([np("allow-ns-in-y", "x", ml(pod="a"), ingress=[{"from": [{"namespaceSelector": mx("ns", "In", ["y"])}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y")]))
    add("should enforce policy based on PodSelector or NamespaceSelector",
        step([np("pod-or-ns", "x", ml(pod="a"), ingress=[{"from": [
            {"namespaceSelector": mx("ns", "NotIn", ["x"])}, {"podSelector": ml(pod="b")}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or S(s)[0] != "x" or s == "x/b")]))
    add("should enforce policy based on PodSelector and NamespaceSelector",
        step([np("pod-and-ns", "x", ml(pod="a"), ingress=[{"from": [
            {"namespaceSelector": mx("ns", "NotIn", ["x"]), "podSelector": ml(pod="b")}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or (S(s)[0] != "x" and S(s)[1] == "b"))]))
    add("should enforce policy based on Multiple PodSelectors and NamespaceSelectors",
        step([np("multi", "x", ml(pod="a"), ingress=[{"from": [
            {"namespaceSelector": mx("ns", "NotIn", ["x"]), "podSelector": mx("pod", "In", ["b", "c"])}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or (S(s)[0] != "x" and S(s)[1] in ("b", "c")))]))
    add("should enforce policy based on any PodSelectors",
        step([np("any-pod", "x", ml(pod="a"), ingress=[{"from": [
            {"podSelector": ml(pod="b")}, {"podSelector": ml(pod="c")}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or s in ("x/b", "x/c"))]))
    add("should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector",
        step([np("y-a-only", "x", ml(pod="a"), ingress=[{"from": [
            {"namespaceSelector": ml(ns="y"), "podSelector": ml(pod="a")}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or s == "y/a")]))
    ports81 = np("allow-ns-y-81", "x", ml(pod="a"),
                 ingress=[{"from": [{"namespaceSelector": ml(ns="y")}], "ports": ports((81, "TCP"))}])
    add("should enforce policy based on Ports",
        step([ports81], [(81, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y"),
                         (80, "TCP", lambda s, d: d != "x/a")]))
    add("should enforce multiple, stacked policies with overlapping podSelectors",
        step([ports81], [(80, "TCP", lambda s, d: d != "x/a")]),
        step([ports81, np("allow-ns-y-80", "x", ml(pod="a"),
                          ingress=[{"from": [{"namespaceSelector": ml(ns="y")}], "ports": ports((80, "TCP"))}])],
             [(80, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y"),
              (81, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y")]))
    add("should support allow-all policy",
        step([np("allow-all", "x", {}, ingress=[{}])],
             [(80, "TCP", lambda s, d: True), (81, "TCP", lambda s, d: True)]))
    add("should allow ingress access on one named port",
        step([np("allow-81-named", "x", {}, ingress=[{"ports": ports(("serve-81-tcp",))}])],
             [(81, "TCP", lambda s, d: True), (80, "TCP", lambda s, d: S(d)[0] != "x")]))
    add("should allow ingress access from namespace on one named port",
        step([np("ns-y-named-80", "x", ml(pod="a"), ingress=[{
            "from": [{"namespaceSelector": ml(ns="y")}], "ports": ports(("serve-80-tcp",))}])],
             [(80, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y"),
              (81, "TCP", lambda s, d: d != "x/a")]))
    add("should allow egress access on one named port",
        step([np("egress-named-80", "x", {}, egress=[{"ports": ports(("serve-80-tcp",))}],
                 types=["Egress"])],
             [(80, "TCP", lambda s, d: True), (81, "TCP", lambda s, d: S(s)[0] != "x")]))
    add("should enforce updated policy",
        step([np("mutate", "x", {}, ingress=[{}])], [(81, "TCP", lambda s, d: True)]),
        step([np("mutate", "x", {}, ingress=[])], [(81, "TCP", lambda s, d: S(d)[0] != "x")]))
    upd_ns = np("from-updated-ns", "x", ml(pod="a"), ingress=[{"from": [{"namespaceSelector": ml(ns2="updated")}]}])
    add("should allow ingress access from updated namespace",
        step([upd_ns], [(80, "TCP", lambda s, d: d != "x/a")]),
        step([upd_ns], [(80, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y")],
             ns_labels={"y": {"ns2": "updated"}}))
    upd_pod = np("from-updated-pod", "x", ml(pod="a"),
                 ingress=[{"from": [{"podSelector": {"matchLabels": {"pod": "b", "pod2": "updated"}}}]}])
    add("should allow ingress access from updated pod",
        step([upd_pod], [(80, "TCP", lambda s, d: d != "x/a")]),
        step([upd_pod], [(80, "TCP", lambda s, d: d != "x/a" or s == "x/b")],
             pod_labels={"x/b": {"pod2": "updated"}}))
    add("should deny ingress from pods on other namespaces",
        step([np("same-ns", "x", {}, ingress=[{"from": [{"podSelector": {}}]}])],
             [(80, "TCP", lambda s, d: S(d)[0] != "x" or S(s)[0] == "x")]))
    iso = np("deny-isolated", "x", ml(target="isolated"), ingress=[])
    add("should deny ingress access to updated pod",
        step([iso], [(80, "TCP", lambda s, d: True)]),
        step([iso], [(80, "TCP", lambda s, d: d != "x/a")], pod_labels={"x/a": {"target": "isolated"}}))
    add("should deny egress from pods based on PodSelector",
        step([np("deny-egress-a", "x", ml(pod="a"), egress=[], types=["Egress"])],
             [(80, "TCP", lambda s, d: s != "x/a")]))
    add("should deny egress from all pods in a namespace",
        step([np("deny-egress-x", "x", {}, egress=[], types=["Egress"])],
             [(80, "TCP", lambda s, d: S(s)[0] != "x")]))
    both = np("in-and-out", "x", ml(pod="a"), ingress=[{"from": [{"podSelector": ml(pod="b")}]}],
              egress=[{"ports": ports((80, "TCP"))}], types=["Ingress", "Egress"])
    add("should work with Ingress, Egress specified together",
        step([both], [(80, "TCP", lambda s, d: d != "x/a" or s == "x/b"),
                      (81, "TCP", lambda s, d: s != "x/a" and (d != "x/a" or s == "x/b"))]))
    add("should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)",
        step([np("x-a-to-y-a", "x", ml(pod="a"), egress=[{"to": [
            {"namespaceSelector": ml(ns="y"), "podSelector": ml(pod="a")}]}], types=["Egress"]),
              np("y-a-from-x-a", "y", ml(pod="a"), ingress=[{"from": [
                  {"namespaceSelector": ml(ns="x"), "podSelector": ml(pod="a")}]}], types=["Ingress"]),
              np("y-b-from-x-a", "y", ml(pod="b"), ingress=[{"from": [
                  {"namespaceSelector": ml(ns="x"), "podSelector": ml(pod="a")}]}], types=["Ingress"])],
             [(80, "TCP", lambda s, d: (s != "x/a" or d == "y/a") and
               (d not in ("y/a", "y/b") or s == "x/a"))]))
    add("should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector",
        step([np("egress-y-a", "x", ml(pod="a"), egress=[{"to": [
            {"namespaceSelector": ml(ns="y"), "podSelector": ml(pod="a")}]}], types=["Egress"])],
             [(80, "TCP", lambda s, d: s != "x/a" or d == "y/a")]))
    add("should enforce ingress policy allowing any port traffic to a server on a specific protocol",
        step([np("tcp-any-port", "x", ml(pod="a"), ingress=[{"ports": ports((None, "TCP"))}])],
             [(80, "TCP", lambda s, d: True), (80, "UDP", lambda s, d: d != "x/a")]))
    in80 = np("ingress-80", "x", ml(pod="a"), ingress=[{"ports": ports((80, "TCP"))}])
    add("should enforce multiple ingress policies with ingress allow-all policy taking precedence",
        step([in80], [(81, "TCP", lambda s, d: d != "x/a")]),
        step([in80, np("ingress-all", "x", ml(pod="a"), ingress=[{}])], [(81, "TCP", lambda s, d: True)]))
    eg80 = np("egress-80", "x", ml(pod="a"), egress=[{"ports": ports((80, "TCP"))}], types=["Egress"])
    add("should enforce multiple egress policies with egress allow-all policy taking precedence",
        step([eg80], [(81, "TCP", lambda s, d: s != "x/a")]),
        step([eg80, np("egress-all", "x", ml(pod="a"), egress=[{}], types=["Egress"])],
             [(81, "TCP", lambda s, d: True)]))
    add("should stop enforcing policies after they are deleted",
        step([np("deny-all", "x", {}, ingress=[], egress=[], types=["Ingress", "Egress"])],
             [(80, "TCP", lambda s, d: S(s)[0] != "x" and S(d)[0] != "x")]),
        step([], [(80, "TCP", lambda s, d: True)]))
    add("should allow egress access to server in CIDR block",
        step([np("cidr-y-b", "x", ml(pod="a"), egress=[{"to": [{"ipBlock": {"cidr": host(ips["y/b"])}}]}],
                 types=["Egress"])],
             [(80, "TCP", lambda s, d: s != "x/a" or d == "y/b")]))
    wide = str(ipaddress.ip_network(ips["x/b"] + "/4", strict=False))
    exc = np("cidr-except", "x", ml(pod="a"), egress=[{"to": [
        {"ipBlock": {"cidr": wide, "except": [host(ips["x/b"])]}}]}], types=["Egress"])
    add("should enforce except clause while egress access to server in CIDR block",
        step([exc], [(80, "TCP", lambda s, d: s != "x/a" or d != "x/b")]))
    add("should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed",
        step([exc], [(80, "TCP", lambda s, d: s != "x/a" or d != "x/b")]),
        step([np("cidr-except", "x", ml(pod="a"), egress=[{"to": [{"ipBlock": {"cidr": host(ips["x/b"])}}]}],
                 types=["Egress"])],
             [(80, "TCP", lambda s, d: s != "x/a" or d == "x/b")]))
    eg_all = np("egress-all-a", "x", ml(pod="a"), egress=[{}], types=["Egress"])
    add("should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector",
        step([eg_all], [(80, "TCP", lambda s, d: True)]),
        step([eg_all, np("deny-in-a", "x", ml(pod="a"), ingress=[], types=["Ingress"])],
             [(80, "TCP", lambda s, d: d != "x/a")]))
    add("should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP",
        step([deny_ingress_x(), np("allow-sctp-81", "x", {}, ingress=[{"ports": ports((81, "SCTP"))}])],
             [(81, "TCP", lambda s, d: S(d)[0] != "x")]))
    add("should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP",
        step([np("only-sctp-80", "x", ml(pod="a"), ingress=[{"ports": ports((80, "SCTP"))}])],
             [(81, "TCP", lambda s, d: d != "x/a")]))
    add("should not allow access by TCP when a policy specifies only UDP",
        step([np("only-udp-81", "x", ml(pod="a"), ingress=[{"ports": ports((81, "UDP"))}])],
             [(81, "TCP", lambda s, d: d != "x/a")]))
    add("should enforce policy to allow traffic based on NamespaceSelector with MatchLabels using default ns label",
        step([np("default-ns-label", "x", ml(pod="a"), ingress=[{"from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "y"}}}]}])],
             [(80, "TCP", lambda s, d: d != "x/a" or S(s)[0] == "y")]))
    add("should enforce policy based on NamespaceSelector with MatchExpressions using default ns label",
        step([np("default-ns-expr", "x", ml(pod="a"), egress=[{"to": [
            {"namespaceSelector": mx("kubernetes.io/metadata.name", "NotIn", ["y"])}]}], types=["Egress"])],
             [(80, "TCP", lambda s, d: s != "x/a" or S(d)[0] != "y")]))
    # UDP context ("Netpol [LinuxOnly]") and SCTP context ([Feature:SCTPConnectivity])
    for proto in ("UDP", "SCTP"):
        tag = f"[{proto}] "
        add(tag + "should support a 'default-deny-ingress' policy",
            step([deny_ingress_x()], [(80, proto, lambda s, d: S(d)[0] != "x")]))
        add(tag + "should enforce policy based on Ports",
            step([np("allow-ns-y-81", "x", ml(pod="a"), ingress=[{
                "from": [{"namespaceSelector": ml(ns="y")}], "ports": ports((81, proto))}])],
                 [(81, proto, lambda s, d: d != "x/a" or S(s)[0] == "y"),
                  (80, proto, lambda s, d: d != "x/a")]))
        add(tag + "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector",
            step([np("y-a-only", "x", ml(pod="a"), ingress=[{"from": [
                {"namespaceSelector": ml(ns="y"), "podSelector": ml(pod="a")}]}])],
                 [(80, proto, lambda s, d: d != "x/a" or s == "y/a")]))
    return c


def offline_ips(fam=4):
    if fam == 6:  # the lab's plan: the node's /64, the IPv4's host byte
        return {p: f"fd00:10:244:{i % 2}::{10 + i}" for i, p in enumerate(ALL)}
    return {p: f"10.244.{i % 2}.{10 + i}" for i, p in enumerate(ALL)}


def step_docs(st, ips=None, echo_cmd=None, ips6=None):
    docs = [ns_doc(n, st["ns_labels"].get(n)) for n in NS]
    docs += [pod_doc(p, st["pod_labels"].get(p), ips and ips[p], echo_cmd, ips6 and ips6[p])
             for p in ALL]
    docs += [svc_doc(p) for p in ALL]
    return docs + st["policies"]


def truth(cluster, ips, port, proto):
    return {(s, d): cluster.allowed(ips[s], ips[d], port, proto)
            for s in ALL for d in ALL if s != d}


def table_str(t, expect=None):
    lines = ["      " + " ".join(f"{d:>4}" for d in ALL)]
    for s in ALL:
        row = []
        for d in ALL:
            if s == d:
                row.append("   .")
            else:
                v = "   X" if t[(s, d)] else "   -"
                if expect is not None and expect[(s, d)] != t[(s, d)]:
                    v = "  *" + v.strip()
                row.append(v)
        lines.append(f"{s:>5} " + " ".join(row))
    return "\n".join(lines)


def emit(out, fams=(4,)):
    ips4, ips6 = offline_ips(4), offline_ips(6)
    os.makedirs(out, exist_ok=True)
    bad = 0
    k = 0
    index = []
    for fam in fams:
        ips = ips6 if fam == 6 else ips4
        tag = " [IPv6]" if fam == 6 else ""
        for name, steps in cases(ips):
            for si, st in enumerate(steps):
                # both families on every pod when IPv6 is asked for: the
                # compiler gives a pod's IPv6 its IPv4's identity
                docs = step_docs(st, ips4, None, ips6 if 6 in fams else None)
                cluster = refeval.Cluster(docs)
                probes = []
                for port, proto, f in st["checks"]:
                    t = truth(cluster, ips, port, proto)
                    up = {(s, d): bool(f(s, d)) for s in ALL for d in ALL if s != d}
                    if t != up:
                        bad += 1
                        print(f"reference disagrees with upstream: {name}{tag} step {si + 1} "
                              f"{port}/{proto}\n" + table_str(t, up), file=sys.stderr)
                    for (s, d), v in sorted(t.items()):
                        probes.append(f"{ips[s]} {ips[d]} {port} {proto} {'allow' if v else 'deny'}")
                with open(os.path.join(out, f"s{k:04d}.yaml"), "w") as fh:
                    yaml.safe_dump_all(docs, fh, sort_keys=False)
                with open(os.path.join(out, f"s{k:04d}.probes"), "w") as fh:
                    fh.write("\n".join(probes) + "\n")
                index.append(f"s{k:04d} {name}{tag} (step {si + 1})")
                k += 1
    with open(os.path.join(out, "index"), "w") as fh:
        fh.write("\n".join(index) + "\n")
    print(k)
    return 1 if bad else 0


# ---- the lab run ---------------------------------------------------------------

def sh(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.returncode}: {r.stderr.strip()}")
    return r


def lab_run(a):
    zh, lab = a.zh, a.lab
    ips = lab_ips(zh, lab)
    missing = [p for p in ALL if not ips.get(p)]
    if missing:
        print(f"Bail out! pods without IP: {missing}")
        return 1
    svc_ips = {}
    relabelled = set()
    with tempfile.TemporaryDirectory(prefix="zhP-conf-") as tmp:
        all_cases = cases(ips)
        sel = range(len(all_cases)) if not a.cases else [int(i) - 1 for i in a.cases.split(",")]
        applied = []
        n = 0
        failed = 0
        for ci in sel:
            ips = lab_ips(zh, lab)	# pods replaced by earlier cases have new IPs
            name, steps = cases(ips)[ci]
            if all(proto == "SCTP" for st_ in steps for _, proto, _ in st_["checks"]):
                n += 1
                print(f"ok {n} - {name} # SKIP the lab's pods serve no SCTP; the SCTP "
                      "context runs on the kernel programs in test_conformance")
                continue
            case_ok = True
            diags = []
            for si, stp in enumerate(steps):
                # replace the policy set and labels
                docs = [ns_doc(nn, stp["ns_labels"].get(nn)) for nn in NS] + stp["policies"]
                changed = set(stp["pod_labels"]) | relabelled
                pod_updates = [pod_doc(p, stp["pod_labels"].get(p), None, ECHO) for p in changed]
                relabelled = set(stp["pod_labels"])
                before = lab_pods(zh, lab)
                names = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
                         for d in stp["policies"]}
                stale = [d for d in applied if (d["kind"], d["metadata"].get("namespace"),
                                                d["metadata"]["name"]) not in names]
                if stale:
                    f = os.path.join(tmp, "del.yaml")
                    with open(f, "w") as fh:
                        yaml.safe_dump_all(stale, fh)
                    sh([zh, "delete", "--lab", lab, "-f", f])
                f = os.path.join(tmp, "apply.yaml")
                with open(f, "w") as fh:
                    yaml.safe_dump_all(docs + pod_updates, fh)
                sh([zh, "apply", "--lab", lab, "-f", f])
                applied = list(stp["policies"])
                if pod_updates:
                    wait_pods(zh, lab, before, changed)
                ips = lab_ips(zh, lab)
                # the node agents load the policy themselves: wait until both
                # have synced the state written last (policy, pods, endpoints)
                labsync.wait_agents(zh, lab, len(NODES))
                if not svc_ips:
                    svc_ips = service_ips(zh, lab, tmp, a)
                cluster = refeval.Cluster(step_docs(stp, ips))
                for port, proto, f_up in stp["checks"]:
                    if proto == "SCTP":
                        continue  # the lab's pods serve no SCTP; covered offline
                    t = truth(cluster, ips, port, proto)
                    up = {(s, d): bool(f_up(s, d)) for s in ALL for d in ALL if s != d}
                    if t != up:
                        case_ok = False
                        diags.append(f"reference disagrees with upstream ({port}/{proto})\n"
                                     + table_str(t, up))
                    for via in a.via.split(","):
                        got = probe_all(zh, lab, a.probe, ips, svc_ips, port, proto, via)
                        if got != t:
                            case_ok = False
                            diags.append(f"step {si + 1} {port}/{proto} via {via}: datapath "
                                         f"(X allowed, - denied, * = differs from reference)\n"
                                         + table_str(got, t))
            if relabelled:
                # give the relabelled pods their labels back before the next
                # case reads the addresses (the lab replaces them: new IPs)
                before = lab_pods(zh, lab)
                f = os.path.join(tmp, "pods.yaml")
                with open(f, "w") as fh:
                    yaml.safe_dump_all([pod_doc(p, None, None, ECHO) for p in relabelled], fh)
                sh([zh, "apply", "--lab", lab, "-f", f])
                wait_pods(zh, lab, before, relabelled)
                labsync.wait_agents(zh, lab, len(NODES))
                relabelled = set()
            n += 1
            print(f"{'ok' if case_ok else 'not ok'} {n} - {name}")
            for dg in diags:
                for line in dg.splitlines():
                    print("# " + line)
            failed += not case_ok
            sys.stdout.flush()
        # leave no policy behind
        if applied:
            f = os.path.join(tmp, "del.yaml")
            with open(f, "w") as fh:
                yaml.safe_dump_all(applied, fh)
            sh([zh, "delete", "--lab", lab, "-f", f], check=False)
        print(f"1..{n}")
    return 1 if failed else 0


ECHO = None  # set by lab mode: the server command of the pods


def lab_pods(zh, lab):
    st = json.loads(sh([zh, "lab", "status", "--lab", lab, "-o", "json"]).stdout)
    return {f"{p.get('namespace', 'default')}/{p['name']}": p
            for p in st.get("pods", []) if p.get("phase") == "Running" and p.get("ip")}


def lab_ips(zh, lab):
    key = "ip6" if FAM == 6 else "ip"
    return {k: v.get(key) for k, v in lab_pods(zh, lab).items()}


def wait_pods(zh, lab, before, changed):
    """After pods were re-applied with new labels the lab replaces them: wait
    until each changed pod runs as a new process (new pid) with an IP."""
    import time
    for _ in range(150):
        now = lab_pods(zh, lab)
        if all(p in now for p in ALL) and all(
                now[p].get("pid") != before.get(p, {}).get("pid") for p in changed):
            time.sleep(0.3)	# the server inside binds its ports
            return
        time.sleep(0.1)


def service_ips(zh, lab, tmp, a):
    out = sh([zh, "get", "services", "--lab", lab, "-o", "json"], check=False)
    ips = {}
    try:
        for s in json.loads(out.stdout):
            ip = s.get("clusterIP")
            if FAM == 6:  # the IPv6 one of a dual-stack Service
                ip = next((x for x in s.get("clusterIPs") or [] if ":" in x), None)
            ips[f"{s['namespace']}/{s['name']}"] = ip
    except (ValueError, KeyError, TypeError):
        pass
    return ips


def probe_all(zh, lab, probe, ips, svc_ips, port, proto, via):
    """Probe every pod -> every other pod concurrently; {(s,d): bool}."""
    procs = {}
    for s in ALL:
        targets = []
        for d in ALL:
            if s == d:
                continue
            ns, name = d.split("/")
            ip = ips[d] if via == "ip" else svc_ips.get(f"{ns}/s-{ns}-{name}")
            if ip and ":" in ip:
                ip = f"[{ip}]"  # netpol_probe: an IPv6 address in brackets
            targets.append(f"{proto.lower()}:{ip}:{port}:{d}")
        procs[s] = subprocess.Popen([zh, "lab", "exec", "--lab", lab, s, "--", probe,
                                     "--timeout-ms", "600"] + targets,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = {}
    for s, pr in procs.items():
        out, _ = pr.communicate(timeout=30)
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                got[(s, parts[0].rsplit(":", 1)[1])] = parts[1] == "ok"
    for s in ALL:
        for d in ALL:
            if s != d:
                got.setdefault((s, d), False)
    return got


def main():
    global ECHO, FAM
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["list", "emit", "lab", "topology"])
    ap.add_argument("--out")
    ap.add_argument("--lab")
    ap.add_argument("--zh")
    ap.add_argument("--probe")
    ap.add_argument("--cases")
    ap.add_argument("--via", default="svc,ip")
    ap.add_argument("--echo", help="server command line for the pods (topology/lab)")
    ap.add_argument("--family", default="4",
                    help="emit: 4 or 4,6; lab/topology: 4 or 6 (the family probed)")
    a = ap.parse_args()
    ECHO = a.echo.split() if a.echo else None
    fams = tuple(int(f) for f in a.family.split(","))
    FAM = 6 if fams == (6,) else 4
    if a.mode == "list":
        for i, (name, _) in enumerate(cases(offline_ips())):
            print(f"{i + 1} {name}")
        return 0
    if a.mode == "emit":
        return emit(a.out, fams)
    if a.mode == "topology":
        docs = ([cluster_doc()] if FAM == 6 else []) \
            + [ns_doc(n) for n in NS] + [pod_doc(p, None, None, ECHO) for p in ALL] \
            + [svc_doc(p) for p in ALL]
        yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
        return 0
    return lab_run(a)


if __name__ == "__main__":
    sys.exit(main())
