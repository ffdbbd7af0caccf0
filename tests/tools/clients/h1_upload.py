#!/usr/bin/env python3
"""h1_upload.py PORT PATH SIZE [chunked] — an HTTP/1.1 client that sends a
whole request body before it reads the answer, then a second request on
the same connection: what a client that uploads to a backend answering
before it read the body needs from the proxy (tests/e2e/86).

One connection to 127.0.0.1:PORT: POST PATH with SIZE bytes of body
(Content-Length, or chunked in 64 KiB chunks), every byte sent, then its
answer read; then GET /second. Prints "first=STATUS second=STATUS", or
"error=EXCEPTION" when a send or read failed or took over 5 s (a stall).
"""
import socket
import sys

port, path, size = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
chunked = len(sys.argv) > 4 and sys.argv[4] == "chunked"
s = socket.create_connection(("127.0.0.1", port), timeout=5)
rest = b""


def answer():
    """The next answer's status code (a Content-Length body skipped)."""
    global rest
    while b"\r\n\r\n" not in rest:
        x = s.recv(65536)
        if not x:
            raise EOFError("closed")
        rest += x
    head, _, rest = rest.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    n = 0
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        x = s.recv(65536)
        if not x:
            raise EOFError("closed in the body")
        rest += x
    rest = rest[n:]
    return lines[0].split()[1].decode()


try:
    frame = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % size
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n" % (path, frame))
    piece = b"y" * 65536
    left = size
    while left:
        n = min(left, len(piece))
        s.sendall(b"%x\r\n%s\r\n" % (n, piece[:n]) if chunked else piece[:n])
        left -= n
    if chunked:
        s.sendall(b"0\r\n\r\n")
    first = answer()
    s.sendall(b"GET /second HTTP/1.1\r\nHost: x\r\n\r\n")
    print("first=%s second=%s" % (first, answer()))
except Exception as e:  # noqa: BLE001 — the test judges the line
    print("error=%s" % type(e).__name__)
