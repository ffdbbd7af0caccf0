#!/usr/bin/env python3
"""h1_endless.py HOST PORT PATH SECONDS — an HTTP/1.1 client whose upload
never ends: POST PATH with Content-Length 1 GiB, then 64 KiB every 10 ms
(about 6 MB/s) while reading whatever comes back, for at most SECONDS.
What the proxy's bound on a dropped request body (docs/proxy.md invariant
24, tests/e2e/86) must stop once the backend answered early.

Prints "status=CODE closed=SECONDS sent=BYTES" when the connection was
closed (EOF, reset or broken pipe) SECONDS after the answer arrived, or
"status=CODE open=SECONDS sent=BYTES" when it was still open at the end;
CODE is the answer's status, "-" when none came.
"""
import select
import socket
import sys
import time

host, port, path, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), float(sys.argv[4])
s = socket.create_connection((host, port), timeout=5)
s.setblocking(False)
head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (path, 1 << 30)
out = bytearray(head)
piece = b"y" * 65536
got = b""
status = "-"
t_answer = None
sent = 0
t0 = time.time()
next_piece = t0
closed = False
while time.time() - t0 < limit:
    now = time.time()
    if not out and now >= next_piece and sent < (1 << 30):
        out += piece
        next_piece = now + 0.01
    r, w, _ = select.select([s], [s] if out else [], [], 0.01)
    try:
        if r:
            x = s.recv(65536)
            if not x:
                closed = True
                break
            got += x
            if status == "-" and b"\r\n" in got:
                status = got.split(b"\r\n", 1)[0].split()[1].decode()
                t_answer = time.time()
        if w and out:
            n = s.send(out)
            sent += n
            del out[:n]
    except (ConnectionResetError, BrokenPipeError):
        closed = True
        break
    except BlockingIOError:
        pass
t_end = time.time() - (t_answer or t0)
print("status=%s %s=%.2f sent=%d" % (status, "closed" if closed else "open", t_end, sent))
