#!/usr/bin/env bash
# 58-netpol-v6-conformance.t — Kubernetes upstream e2e NetworkPolicy cases
# over IPv6 on a dual-stack lab (docs/ipv6.md "NetworkPolicy"): every pod
# probes every pod by its IPv6 address and by its Service's IPv6 ClusterIP;
# the CIDR cases with IPv6 ipBlocks. Expected tables from the reference
# evaluator (tests/netpol/refeval.py, which knows a pod by both addresses),
# itself checked against the upstream tables; zero disagreements. A
# selection, to keep the lab time short (ingress, egress, ports, named
# ports, a relabelled pod, both sides, protocols, the three CIDR cases,
# UDP): every case runs over IPv6 on the kernel programs in
# tests/unit/policy/test_conformance.c.
exec "$(dirname "$0")/../netpol/lab_conformance.sh" t58 1,2,14,19,24,27,28,30,34,35,36,43,44 - 6
