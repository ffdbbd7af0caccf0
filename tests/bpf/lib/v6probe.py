#!/usr/bin/python3
"""v6probe.py — clients of the AF_INET6 lab tests (tests/e2e/35-agent-v6mapped.t,
tests/e2e/36-client-matrix.t). Run inside a pod with Debian's /usr/bin/python3;
each command prints one JSON object. FAM is 4 (AF_INET, address a.b.c.d),
6 (AF_INET6, the same address v4-mapped: ::ffff:a.b.c.d) or 6n (AF_INET6,
a native IPv6 address as given).

  tcp FAM IP PORT N            N connections, each reads one line (lbprobe
                               who-tcp): counts per line, errors, the first
                               getpeername, ms of the slowest failure
  http FAM IP PORT PATH        one HTTP/1.0 GET: status line, getpeername,
                               the body (stripped)
  udp FAM IP PORT N connected|unconnected
                               N datagrams (lbprobe who-udp): replies per
                               host, reply sources, getpeername if connected
  dns FAM NAME                 an A query over UDP (sendto/recvfrom) to the
                               resolv.conf nameserver: answer, reply source
  native6                      a listener on [::1] and an AF_INET6 connect to
                               it: native IPv6 is left alone
  echo6 PORT                   (server) a dual-stack echo server: AF_INET6,
                               IPV6_V6ONLY off, bound to [::] (as Node.js and
                               Java servers listen by default)
  rtt FAM IP PORT N            one connection, N round trips of 1000 bytes
                               to an echo server: bytes echoed, error
(Bounded: tcp and udp stop at the third failure.)
"""
import errno, json, socket, struct, sys, time


def addr(fam, ip, port):
    if fam == "6n":
        return socket.AF_INET6, (ip, port)
    if fam == "6":
        return socket.AF_INET6, ("::ffff:" + ip, port)
    return socket.AF_INET, (ip, port)


def peer(s):
    p = s.getpeername()
    return "[%s]:%d" % p[:2] if s.family == socket.AF_INET6 else "%s:%d" % p


def ename(e):
    return errno.errorcode.get(e.errno, str(e)) if e.errno else "TIMEOUT"


def tcp(fam, ip, port, n):
    af, a = addr(fam, ip, int(port))
    counts, errs, first, slow = {}, {}, None, 0.0
    for _ in range(int(n)):
        s = socket.socket(af, socket.SOCK_STREAM)
        s.settimeout(3)
        t = time.time()
        try:
            s.connect(a)
            first = first or peer(s)
            data = b""
            while not data.endswith(b"\n"):
                b = s.recv(256)
                if not b:
                    break
                data += b
            h = data.decode().strip() or "EMPTY"
            counts[h] = counts.get(h, 0) + 1
        except OSError as e:
            k = ename(e)
            errs[k] = errs.get(k, 0) + 1
            slow = max(slow, (time.time() - t) * 1000)
            if sum(errs.values()) >= 3:
                break	# bounded: a broken path fails in seconds, not N timeouts
        finally:
            s.close()
    return {"counts": counts, "errors": errs, "peer": first, "fail_ms": round(slow, 1)}


def http(fam, ip, port, path):
    af, a = addr(fam, ip, int(port))
    s = socket.socket(af, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(a)
        p = peer(s)
        s.sendall(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path.encode())
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        return {"status": data.split(b"\r\n", 1)[0].decode(), "peer": p, "bytes": len(data),
                "body": data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip()}
    except OSError as e:
        return {"status": None, "error": ename(e)}
    finally:
        s.close()


def udp(fam, ip, port, n, mode):
    af, a = addr(fam, ip, int(port))
    s = socket.socket(af, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    counts, sources, lost, errs = {}, {}, 0, {}
    if mode == "connected":
        s.connect(a)
    for i in range(int(n)):
        try:
            if mode == "connected":
                s.send(b"q%d" % i)
            else:
                s.sendto(b"q%d" % i, a)
            d, src = s.recvfrom(2048)
            h = d.decode()
            counts[h] = counts.get(h, 0) + 1
            k = "[%s]:%d" % src[:2] if af == socket.AF_INET6 else "%s:%d" % src
            sources[k] = sources.get(k, 0) + 1
        except socket.timeout:
            lost += 1
        except OSError as e:
            k = ename(e)
            errs[k] = errs.get(k, 0) + 1
        if lost + sum(errs.values()) >= 3:
            break
    p = peer(s) if mode == "connected" else None
    return {"counts": counts, "sources": sources, "lost": lost, "errors": errs, "peer": p}


def dns(fam, name):
    with open("/etc/resolv.conf") as f:
        ns = [l.split()[1] for l in f if l.startswith("nameserver")][0]
    q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    q += struct.pack(">HH", 1, 1)
    af, a = addr(fam, ns, 53)
    s = socket.socket(af, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(q, a)
    try:
        r, src = s.recvfrom(4096)
    except socket.timeout:
        return {"answer": None, "source": None, "ns": ns}
    ans = socket.inet_ntoa(r[-4:]) if struct.unpack(">H", r[6:8])[0] >= 1 else None
    k = "[%s]:%d" % src[:2] if af == socket.AF_INET6 else "%s:%d" % src
    return {"answer": ans, "source": k, "ns": ns}


def native6():
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.bind(("::1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]
    c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    c.settimeout(2)
    try:
        c.connect(("::1", port))
        return {"result": "OK", "peer": peer(c), "port": port}
    except OSError as e:
        return {"result": ename(e), "port": port}


def echo6(port):
    import threading
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("::", int(port)))
    ls.listen(64)

    def serve(c):
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)
        except OSError:
            pass
        c.close()

    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def rtt(fam, ip, port, n):
    af, a = addr(fam, ip, int(port))
    s = socket.socket(af, socket.SOCK_STREAM)
    s.settimeout(2)
    total = 0
    try:
        s.connect(a)
        for _ in range(int(n)):
            s.sendall(b"x" * 1000)
            b = b""
            while len(b) < 1000:
                d = s.recv(1000 - len(b))
                if not d:
                    break
                b += d
            total += len(b)
    except OSError as e:
        return {"bytes": total, "error": ename(e)}
    finally:
        s.close()
    return {"bytes": total, "error": None}


def main(a):
    cmds = {"tcp": tcp, "http": http, "udp": udp, "dns": dns, "native6": native6,
            "echo6": echo6, "rtt": rtt}
    if not a or a[0] not in cmds:
        sys.exit("v6probe: unknown command")
    print(json.dumps(cmds[a[0]](*a[1:])))


if __name__ == "__main__":
    main(sys.argv[1:])
