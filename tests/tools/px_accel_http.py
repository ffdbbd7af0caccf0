#!/usr/bin/env python3
"""px_accel_http.py — byte-exact HTTP/1.1 backend and client for
tests/e2e/44-accel-proxy.t (the node proxy's legs with and without the
same-node short-circuit).

  px_accel_http.py server PORT
      GET  /big?size=N            N bytes, Content-Length
      GET  /chunked?n=N&sz=S      N chunks of S bytes, Transfer-Encoding: chunked
      GET  /close?size=N          N bytes, no length: close-delimited (the proxy
                                  re-chunks it for an HTTP/1.1 client)
      GET  /slow?ms=M&size=N      N bytes after M ms
      POST /echo                  the request body (Content-Length or chunked),
                                  answered with Content-Length
  px_accel_http.py client IP PORT [--hold FILE]
      One keep-alive connection runs every case (large body, chunked,
      close-delimited, request body, pipelining of 3 requests in one write)
      and prints one deterministic line per response: status, framing, body
      length, sha256 prefix, and OK/BAD against the expected bytes. With
      --hold FILE, after the first response it writes FILE and waits 2 s
      (the test reads the sockhash meanwhile).
  px_accel_http.py slow IP PORT MS SIZE
      One request to /slow; prints status, Connection header, length, OK/BAD.
  px_accel_http.py idle IP PORT SECS
      One request, then waits for the server to close (prints EOF after Ns
      or TIMEOUT).

Bodies are a deterministic pattern of the offset (pattern(n)), so every
byte is checked, not only the length.
"""
import hashlib
import socket
import sys
import threading
import time
from urllib.parse import urlsplit, parse_qs


def pattern(n, salt=0):
    base = bytes((i * 7 + salt) % 251 for i in range(251 * 4))
    out = bytearray()
    while len(out) < n:
        out += base
    return bytes(out[:n])


# ---------------------------------------------------------------- reading
class Reader:
    def __init__(self, sock):
        self.s = sock
        self.buf = b""

    def fill(self):
        d = self.s.recv(1 << 16)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def rest(self):
        try:
            while True:
                self.fill()
        except (EOFError, ConnectionResetError):
            pass
        d, self.buf = self.buf, b""
        return d

    def head(self):
        first = self.line()
        hdrs = {}
        while True:
            ln = self.line()
            if not ln:
                break
            k, _, v = ln.partition(b":")
            hdrs.setdefault(k.strip().lower().decode(), []).append(v.strip().decode())
        return first.decode(), hdrs

    def body(self, hdrs, allow_close):
        te = ",".join(hdrs.get("transfer-encoding", [])).lower()
        if te.endswith("chunked"):
            out = b""
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():
                        pass
                    return "chunked", out
                out += self.exact(size)
                self.line()
        if "content-length" in hdrs:
            return "length", self.exact(int(hdrs["content-length"][0]))
        if allow_close:
            return "close", self.rest()
        return "length", b""


# ---------------------------------------------------------------- server
def serve_conn(c):
    r = Reader(c)
    try:
        while True:
            first, hdrs = r.head()
            method, target, _ = first.split(" ", 2)
            u = urlsplit(target)
            q = {k: v[0] for k, v in parse_qs(u.query).items()}
            _, body = r.body(hdrs, False)
            if u.path == "/big":
                b = pattern(int(q.get("size", "0")))
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
            elif u.path == "/chunked":
                n, sz = int(q.get("n", "1")), int(q.get("sz", "1"))
                c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(n):
                    ch = pattern(sz, i)
                    c.sendall(b"%x\r\n" % len(ch) + ch + b"\r\n")
                c.sendall(b"0\r\n\r\n")
            elif u.path == "/close":
                b = pattern(int(q.get("size", "0")))
                c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b)
                c.shutdown(socket.SHUT_WR)
                return
            elif u.path == "/slow":
                time.sleep(int(q.get("ms", "0")) / 1000)
                b = pattern(int(q.get("size", "0")))
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
            elif u.path == "/echo":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            else:
                c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    except (EOFError, ConnectionResetError, BrokenPipeError, ValueError):
        pass
    finally:
        c.close()


def server(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(128)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve_conn, args=(c,), daemon=True).start()


# ---------------------------------------------------------------- client
def req(method, target, host, body=None, chunked_body=None):
    h = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, target, host)
    if chunked_body is not None:
        h += "Transfer-Encoding: chunked\r\n\r\n"
        out = h.encode()
        for ch in chunked_body:
            out += b"%x\r\n" % len(ch) + ch + b"\r\n"
        return out + b"0\r\n\r\n"
    if body is not None:
        h += "Content-Length: %d\r\n" % len(body)
    return (h + "\r\n").encode() + (body or b"")


def report(name, first, hdrs, framing, body, want):
    st = first.split(" ")[1]
    ok = "OK" if body == want else "BAD"
    print("%s %s %s %d %s %s" % (name, st, framing, len(body),
                                 hashlib.sha256(body).hexdigest()[:16], ok), flush=True)


def client(ip, port, hold):
    host = "web"
    s = socket.create_connection((ip, port), timeout=20)
    r = Reader(s)
    big = 4 << 20
    chunks = [pattern(700, 1), pattern(70000, 2), pattern(1, 3)]
    cases = [
        ("big", req("GET", "/big?size=%d" % big, host), pattern(big)),
        ("chunked", req("GET", "/chunked?n=50&sz=1000", host),
         b"".join(pattern(1000, i) for i in range(50))),
        ("close", req("GET", "/close?size=300000", host), pattern(300000)),
        ("echo-len", req("POST", "/echo", host, body=pattern(200000, 5)), pattern(200000, 5)),
        ("echo-chunked", req("POST", "/echo", host, chunked_body=chunks), b"".join(chunks)),
    ]
    for i, (name, raw, want) in enumerate(cases):
        s.sendall(raw)
        first, hdrs = r.head()
        framing, body = r.body(hdrs, True)
        report(name, first, hdrs, framing, body, want)
        if framing == "close" or "close" in ",".join(hdrs.get("connection", [])).lower():
            s.close()   # direct to the backend (no proxy): a new connection
            s = socket.create_connection((ip, port), timeout=20)
            r = Reader(s)
        if i == 0 and hold:
            open(hold, "w").write("held\n")
            time.sleep(2)
    # pipelining: three requests in one write, answers in order
    pipe = [("pipe-1", req("GET", "/big?size=1000", host), pattern(1000)),
            ("pipe-2", req("POST", "/echo", host, chunked_body=[b"abc", pattern(5000)]),
             b"abc" + pattern(5000)),
            ("pipe-3", req("GET", "/chunked?n=3&sz=10", host),
             b"".join(pattern(10, i) for i in range(3)))]
    s.sendall(b"".join(p[1] for p in pipe))
    for name, _, want in pipe:
        first, hdrs = r.head()
        framing, body = r.body(hdrs, True)
        report(name, first, hdrs, framing, body, want)
    s.close()


def slow(ip, port, ms, size):
    s = socket.create_connection((ip, port), timeout=20)
    r = Reader(s)
    s.sendall(req("GET", "/slow?ms=%d&size=%d" % (ms, size), "web"))
    first, hdrs = r.head()
    framing, body = r.body(hdrs, True)
    conn = ",".join(hdrs.get("connection", ["-"])).lower()
    print("slow %s connection=%s %d %s" % (first.split(" ")[1], conn, len(body),
                                            "OK" if body == pattern(size) else "BAD"), flush=True)


def idle(ip, port, secs):
    s = socket.create_connection((ip, port), timeout=secs)
    r = Reader(s)
    s.sendall(req("GET", "/big?size=10", "web"))
    first, hdrs = r.head()
    r.body(hdrs, False)
    print("idle first %s" % first.split(" ")[1], flush=True)
    t0 = time.time()
    try:
        d = s.recv(1)
        print("idle EOF" if not d else "idle DATA", flush=True)
    except socket.timeout:
        print("idle TIMEOUT", flush=True)
    except ConnectionResetError:
        print("idle RESET", flush=True)
    sys.stderr.write("idle: closed after %.2fs\n" % (time.time() - t0))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "server":
        server(int(a[1]))
    elif a[0] == "client":
        client(a[1], int(a[2]), a[4] if len(a) > 4 and a[3] == "--hold" else None)
    elif a[0] == "slow":
        slow(a[1], int(a[2]), int(a[3]), int(a[4]))
    elif a[0] == "idle":
        idle(a[1], int(a[2]), float(a[3]))
    else:
        sys.exit(__doc__)
