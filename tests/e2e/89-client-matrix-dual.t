#!/usr/bin/env bash
# 89-client-matrix-dual.t — the client matrix (36-client-matrix.t) on a
# dual-stack lab: every client through L4 and L7 Services, same node and
# across nodes, over IPv4 and over IPv6 (issue 14; docs/clients.md).
MATRIX_DUAL=1 exec bash "$(dirname "$0")/36-client-matrix.t"
