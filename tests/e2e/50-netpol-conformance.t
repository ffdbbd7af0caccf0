#!/usr/bin/env bash
# 50-netpol-conformance.t — Kubernetes upstream e2e NetworkPolicy cases 1-24
# (names as upstream) in the lab: namespaces x, y, z, pods a, b, c serving
# 80/81 over TCP and UDP, a Service each; every pod probes every pod by
# ClusterIP and by pod IP; expected tables from the independent reference
# evaluator, itself checked against the upstream tables. See docs/policy.md.
exec "$(dirname "$0")/../netpol/lab_conformance.sh" t50 1 24
