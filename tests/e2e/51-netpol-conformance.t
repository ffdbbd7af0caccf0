#!/usr/bin/env bash
# 51-netpol-conformance.t — Kubernetes upstream e2e NetworkPolicy cases 25-48
# (egress, CIDR, protocols, the UDP context; the SCTP context is skipped in
# the lab and runs on the kernel programs in tests/unit/policy/test_conformance).
exec "$(dirname "$0")/../netpol/lab_conformance.sh" t51 25 48
