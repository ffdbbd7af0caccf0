#!/usr/bin/env python3
"""connect_errno.py HOST [PORT=80] — one TCP connect (3 s timeout) for the
lab tests of connect-time refusals (72, 76, 83): prints "connected", or
the errno of the failure (111 ECONNREFUSED: a Service without endpoints;
1 EPERM: NetworkPolicy fail-fast)."""
import socket
import sys

try:
    socket.create_connection((sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 80),
                             timeout=3)
    print("connected")
except OSError as e:
    print(e.errno)
