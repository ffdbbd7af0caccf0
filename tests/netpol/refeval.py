#!/usr/bin/env python3
"""refeval.py — an independent reference evaluator for Kubernetes NetworkPolicy.

Written from the networking.k8s.io/v1 NetworkPolicy API reference
(kubernetes.io/docs/reference/kubernetes-api/policy-resources/), sharing no code with the C
compiler in src/policy/: it reads the same YAML manifests (Namespace, Pod,
Service, NetworkPolicy) and answers

    allowed(src_ip, dst_ip, port, proto) -> bool

for a new connection (or UDP flow) from src to dst:port after Service
translation (use resolve_service() first for a ClusterIP).

Semantics implemented (and nothing else):
  * policyTypes default: Ingress always, Egress iff spec.egress is a
    non-empty list; when policyTypes is given it is authoritative.
  * A pod is isolated for a direction iff some policy of its namespace selects
    it and lists that direction; then the union of the rules decides.
  * rule = ports AND peers; missing/empty ports = all ports of all protocols;
    missing/empty peers = everybody, including non-pods.
  * peer podSelector alone = pods of the policy's namespace; namespaceSelector
    alone = all pods of matching namespaces; both = AND; ipBlock = address in
    cidr and in no except (pod addresses included).
  * port: protocol defaults to TCP; number, number..endPort, or a name
    resolved against the destination pod's container ports (same protocol).
  * a pod may always reach itself; egress of the source AND ingress of the
    destination must both allow.
  * a pod has an address of each family it lists in status.podIPs and is
    the same peer by either; an ipBlock of one family contains no address
    of the other (IPv4 cidr never matches an IPv6 address).
Used as a library by gen_property.py and conformance.py, and as a CLI:
    refeval.py FILE... --probe SRC_IP DST_IP PORT PROTO
"""
import ipaddress
import sys

import yaml


def _labels(obj):
    return dict(((obj.get("metadata") or {}).get("labels") or {}))


def selector_matches(sel, labels):
    """LabelSelector semantics; sel is a dict (already known to be present)."""
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != str(v):
            return False
    for e in sel.get("matchExpressions") or []:
        key, op, vals = e["key"], e["operator"], [str(x) for x in e.get("values") or []]
        have = key in labels
        if op == "In" and not (have and labels[key] in vals):
            return False
        if op == "NotIn" and have and labels[key] in vals:
            return False
        if op == "Exists" and not have:
            return False
        if op == "DoesNotExist" and have:
            return False
    return True


class Pod:
    def __init__(self, doc):
        md = doc["metadata"]
        self.name = md["name"]
        self.ns = md.get("namespace", "default")
        self.labels = {k: str(v) for k, v in _labels(doc).items()}
        status = doc.get("status") or {}
        self.ip = status.get("podIP")
        # every address of the pod (status.podIPs: one per family, the
        # first is podIP); a pod is the same peer by either of them
        self.ips = [x["ip"] for x in status.get("podIPs") or [] if x.get("ip")] or \
            ([self.ip] if self.ip else [])
        self.ports = []  # (name, number, proto)
        for c in (doc.get("spec") or {}).get("containers") or []:
            for p in c.get("ports") or []:
                self.ports.append((p.get("name"), int(p["containerPort"]),
                                   p.get("protocol", "TCP")))

    def named_port(self, name, proto):
        for n, num, pr in self.ports:
            if n == name and pr == proto:
                return num
        return None


class Policy:
    def __init__(self, doc):
        md = doc["metadata"]
        self.name = md["name"]
        self.ns = md.get("namespace", "default")
        spec = doc.get("spec") or {}
        self.pod_selector = spec.get("podSelector") or {}
        self.ingress = spec.get("ingress") or []
        self.egress = spec.get("egress") or []
        types = spec.get("policyTypes")
        if types is None:
            types = ["Ingress"] + (["Egress"] if self.egress else [])
        self.types = set(types)


class Cluster:
    def __init__(self, docs):
        self.ns_labels = {}
        self.pods = []
        self.policies = []
        self.services = []
        for d in docs:
            if not d:
                continue
            kind = d.get("kind")
            if kind == "Namespace":
                name = d["metadata"]["name"]
                lab = {k: str(v) for k, v in _labels(d).items()}
                lab["kubernetes.io/metadata.name"] = name
                self.ns_labels[name] = lab
            elif kind == "Pod":
                self.pods.append(Pod(d))
            elif kind == "NetworkPolicy":
                self.policies.append(Policy(d))
            elif kind == "Service":
                self.services.append(d)
        for o in self.pods + self.policies:
            self.ns_labels.setdefault(o.ns, {"kubernetes.io/metadata.name": o.ns})
        self.by_ip = {ip: p for p in self.pods for ip in p.ips}

    @classmethod
    def from_files(cls, paths):
        docs = []
        for p in paths:
            with open(p) as f:
                docs.extend(yaml.safe_load_all(f))
        return cls(docs)

    # -- peers and ports ---------------------------------------------------
    def _peer_matches(self, pol, peer, peer_ip, peer_pod):
        if "ipBlock" in peer:
            b = peer["ipBlock"]
            ip = ipaddress.ip_address(peer_ip)
            if ip not in ipaddress.ip_network(b["cidr"], strict=False):
                return False
            return not any(ip in ipaddress.ip_network(e, strict=False)
                           for e in b.get("except") or [])
        if peer_pod is None:
            return False
        ps, nss = peer.get("podSelector"), peer.get("namespaceSelector")
        if nss is None:
            if peer_pod.ns != pol.ns:
                return False
        elif not selector_matches(nss, self.ns_labels.get(peer_pod.ns, {})):
            return False
        if ps is not None and not selector_matches(ps, peer_pod.labels):
            return False
        return True

    @staticmethod
    def _port_matches(pp, dst_pod, port, proto):
        if pp.get("protocol", "TCP") != proto:
            return False
        if "port" not in pp or pp["port"] is None:
            return True
        p = pp["port"]
        if isinstance(p, str) and not p.isdigit():
            return dst_pod is not None and dst_pod.named_port(p, proto) == port
        lo = int(p)
        hi = int(pp["endPort"]) if pp.get("endPort") is not None else lo
        return lo <= port <= hi

    def _dir_allowed(self, pod, direction, peer_ip, peer_pod, port, proto):
        pols = [p for p in self.policies
                if p.ns == pod.ns and direction in p.types
                and selector_matches(p.pod_selector, pod.labels)]
        if not pols:
            return True
        dst_pod = pod if direction == "Ingress" else peer_pod
        for pol in pols:
            for rule in (pol.ingress if direction == "Ingress" else pol.egress):
                rule = rule or {}
                ports = rule.get("ports") or []
                peers = rule.get("from" if direction == "Ingress" else "to") or []
                if ports and not any(self._port_matches(pp, dst_pod, port, proto)
                                     for pp in ports):
                    continue
                if peers and not any(self._peer_matches(pol, pe, peer_ip, peer_pod)
                                     for pe in peers):
                    continue
                return True
        return False

    def allowed(self, src_ip, dst_ip, port, proto):
        if src_ip == dst_ip:
            return True
        src, dst = self.by_ip.get(src_ip), self.by_ip.get(dst_ip)
        if src is not None and not self._dir_allowed(src, "Egress", dst_ip, dst, port, proto):
            return False
        if dst is not None and not self._dir_allowed(dst, "Ingress", src_ip, src, port, proto):
            return False
        return True

    def resolve_service(self, ns, name, port, proto):
        """(pod, targetPort) pairs behind Service ns/name port/proto."""
        out = []
        for s in self.services:
            md = s["metadata"]
            if md["name"] != name or md.get("namespace", "default") != ns:
                continue
            sel = (s.get("spec") or {}).get("selector") or {}
            for sp in s["spec"].get("ports") or []:
                if int(sp["port"]) != port or sp.get("protocol", "TCP") != proto:
                    continue
                tp = sp.get("targetPort", sp["port"])
                for p in self.pods:
                    if p.ns != ns or not p.ip or not all(p.labels.get(k) == str(v)
                                                         for k, v in sel.items()):
                        continue
                    num = p.named_port(tp, proto) if isinstance(tp, str) and not tp.isdigit() \
                        else int(tp)
                    if num:
                        out.append((p, num))
        return out


def main(argv):
    if "--probe" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    i = argv.index("--probe")
    files, (src, dst, port, proto) = argv[:i], argv[i + 1:i + 5]
    c = Cluster.from_files(files)
    ok = c.allowed(src, dst, int(port), proto)
    print("allow" if ok else "deny")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
