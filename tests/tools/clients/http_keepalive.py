#!/usr/bin/env python3
"""http_keepalive.py HOST PORT — requests on ONE keep-alive connection
(Python's http.client), for the lab tests of the node proxy (67, 87).

Reads request lines "PATH [HEADER: VALUE]" on stdin. Prints the peer the
socket shows (getpeername: "peer ADDR:PORT", "peer [ADDR6]:PORT" on an
AF_INET6 socket), then per request "status hostname remote" from the echo
backend's JSON (remote without its port), or "status - -".
"""
import http.client
import json
import socket
import sys

host, port = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection(host, port, timeout=5)
c.connect()
p = c.sock.getpeername()
if c.sock.family == socket.AF_INET6:
    print("peer [%s]:%d" % p[:2])
else:
    print("peer %s:%d" % p[:2])
for line in sys.stdin:
    parts = line.split(None, 1)
    hdrs = {}
    if len(parts) > 1:
        k, v = parts[1].split(":", 1)
        hdrs[k.strip()] = v.strip()
    c.request("GET", parts[0], headers=hdrs)
    r = c.getresponse()
    body = r.read()
    try:
        j = json.loads(body)
        print(r.status, j.get("hostname", "-"), j.get("remote", "-").rsplit(":", 1)[0])
    except ValueError:
        print(r.status, "-", "-")
