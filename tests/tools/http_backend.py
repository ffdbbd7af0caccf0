#!/usr/bin/env python3
"""http_backend.py — a scriptable HTTP/1.1 backend for the node proxy's
loopback tests and benchmarks (tests 65, 66, 70; scripts/bench-proxy.sh).

zerohop's own `zerohop echo` is the usual backend; this one covers what it
does not: a fixed slow answer, a fixed failure, a log of what arrived, and a
backend that accepts and never answers. It is Python on purpose: a second,
independent HTTP implementation facing the proxy.

    http_backend.py [--host H] [--status N] [--body TEXT] [--delay SEC]
                    [--log FILE] [--log-what port|request] [--hold]
                    [--early] PORT...

Every PORT gets a listener; every connection is keep-alive and each request
(head plus a Content-Length body, if any) gets, after DELAY seconds,
`HTTP/1.1 STATUS` with BODY (default empty). --log appends one line per
request to FILE: the port it came to (`port`, the default) or its request
line and body (`request`). --hold accepts and never answers (a hung
backend: requests stay in flight until the client gives up). --early
answers each request as soon as its head arrived, with Connection: close,
and closes without reading its body (a body still coming makes the close
a reset): a backend that answers before the request is complete."""
import argparse
import socket
import sys
import threading
import time

REASON = {200: b"OK", 500: b"Internal Server Error", 503: b"Service Unavailable"}


def read_request(c, buf):
    """One request from c: (request line, body, rest of buf), or None at EOF."""
    while b"\r\n\r\n" not in buf:
        x = c.recv(65536)
        if not x:
            return None
        buf += x
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    n = 0
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(buf) < n:
        x = c.recv(65536)
        if not x:
            return None
        buf += x
    return lines[0], buf[:n], buf[n:]


def serve(c, port, a, log, lock):
    if a.hold:
        time.sleep(3600)
        return c.close()
    body = a.body.encode()
    if a.early:
        buf = b""
        while b"\r\n\r\n" not in buf:
            x = c.recv(65536)
            if not x:
                return c.close()
            buf += x
        c.sendall(b"HTTP/1.1 %d %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (
            a.status, REASON.get(a.status, b"Status"), len(body), body))
        return c.close()
    answer = b"HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n%s" % (
        a.status, REASON.get(a.status, b"Status"), len(body), body)
    buf = b""
    while True:
        r = read_request(c, buf)
        if r is None:
            return c.close()
        line, req_body, buf = r
        if log:
            with lock:
                log.write(b"%d\n" % port if a.log_what == "port"
                          else line + b" " + req_body + b"\n")
                log.flush()
        if a.delay:
            time.sleep(a.delay)
        c.sendall(answer)


def accept_loop(s, port, a, log, lock):
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c, port, a, log, lock), daemon=True).start()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--status", type=int, default=200)
    p.add_argument("--body", default="")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--log")
    p.add_argument("--log-what", choices=("port", "request"), default="port")
    p.add_argument("--hold", action="store_true")
    p.add_argument("--early", action="store_true")
    p.add_argument("ports", type=int, nargs="+")
    a = p.parse_args()
    log = open(a.log, "ab") if a.log else None
    lock = threading.Lock()
    socks = []
    for port in a.ports:  # bind all first: a port in use fails the start
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((a.host, port))
        s.listen(256)
        socks.append((s, port))
    for s, port in socks:
        threading.Thread(target=accept_loop, args=(s, port, a, log, lock), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
