#!/usr/bin/env python3
"""gen-big-state.py DIR [SERVICES=10000] [ENDPOINTS=10] — write a state-source
directory (state.h layout) with SERVICES Services of ENDPOINTS running pods
each, for measuring compile + load at scale (docs/benchmarks/log/agent.md):
  python3 scripts/gen-big-state.py /tmp/zh-big
  mkdir -p /sys/fs/cgroup/unified/zhA-bench
  build/zerohop agent --once --node bench --state /tmp/zh-big \\
      --pin-dir /sys/fs/bpf/zhA-bench --cgroup /sys/fs/cgroup/unified/zhA-bench --accel off
  build/zerohop agent --cleanup --node bench --pin-dir /sys/fs/bpf/zhA-bench
  rmdir /sys/fs/cgroup/unified/zhA-bench
The agent logs load (state source parse), compile and sync (maps) times."""
import os, sys

d = sys.argv[1]
S = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
E = int(sys.argv[3]) if len(sys.argv) > 3 else 10
os.makedirs(d + "/manifests", exist_ok=True)
os.makedirs(d + "/pods", exist_ok=True)
with open(d + "/generation", "w") as f:
    f.write("0\n")
with open(d + "/manifests/cluster.yaml", "w") as f:
    f.write("apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nmetadata: {name: big}\nspec:\n"
            "  nodes: [{name: node-a}, {name: node-b}]\n  podCIDR: 10.128.0.0/9\n"
            "  serviceCIDR: 10.96.0.0/12\n")
with open(d + "/manifests/services.yaml", "w") as f:
    for i in range(S):
        f.write("apiVersion: v1\nkind: Service\nmetadata: {name: s%d}\nspec:\n  selector: {app: s%d}\n"
                "  ports: [{port: 80, targetPort: 8080}]\n---\n" % (i, i))
with open(d + "/pods/pods.yaml", "w") as f:
    n = 0
    for i in range(S):
        for j in range(E):
            ip = "10.%d.%d.%d" % (128 + (n >> 16), (n >> 8) & 255, n & 255)
            f.write("apiVersion: v1\nkind: Pod\nmetadata: {name: s%d-%d, labels: {app: s%d}}\n"
                    "spec:\n  nodeName: node-a\n  containers: [{name: c, ports: [{containerPort: 8080}]}]\n"
                    "status: {podIP: %s, phase: Running}\n---\n" % (i, j, i, ip))
            n += 1
