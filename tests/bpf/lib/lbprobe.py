#!/usr/bin/env python3
"""lbprobe.py — servers and clients for the agent's lab tests (tests/e2e/3*).

Servers (run as pod commands):
  who-tcp PORT            accept, send "HOSTNAME\\n", close
  stream-tcp PORT         send "HOSTNAME SEQ\\n" every 10 ms until the peer goes
  who-udp PORT [6]        answer every datagram with "HOSTNAME" (6: on a
                          dual-stack [::] socket)
Clients (run with `zerohop lab exec POD -- python3 lbprobe.py ...`), each
prints one JSON object:
  conns HOST PORT N                 N sequential connections: counts per hostname,
                                    failures, getpeername of the first
  loop HOST PORT INTERVAL_MS STOPFILE
                                    connect every INTERVAL_MS until STOPFILE exists:
                                    [t, hostname|error] per connection
  stream HOST PORT STOPFILE [6]     one long-lived connection: lines, max gap (ms);
                                    6: from an AF_INET6 socket (::ffff:ADDR)
  udp HOST PORT N connected|unconnected
                                    N datagrams: replies per hostname, reply sources
  refused HOST PORT                 connect once: errno name and time taken (ms)
"""
import errno, json, os, socket, sys, time


def hostname():
    return socket.gethostname().encode()


def who_tcp(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(1024)
    h = hostname() + b"\n"
    while True:
        c, _ = s.accept()
        try:
            c.sendall(h)
        except OSError:
            pass
        c.close()


def stream_tcp(port):
    import threading
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(64)

    def serve(c):
        seq = 0
        try:
            while True:
                c.sendall(hostname() + b" %d\n" % seq)
                seq += 1
                time.sleep(0.01)
        except OSError:
            c.close()

    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def who_udp(port, fam="4"):
    if fam == "6":  # dual-stack: [::], IPv4 clients as ::ffff:a.b.c.d
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", port))
    while True:
        d, a = s.recvfrom(2048)
        s.sendto(hostname(), a)


def one_conn(host, port, timeout=2.0):
    c = socket.create_connection((host, port), timeout=timeout)
    try:
        peer = c.getpeername()
        data = b""
        while not data.endswith(b"\n"):
            b = c.recv(256)
            if not b:
                break
            data += b
        return data.decode().strip(), peer
    finally:
        c.close()


def conns(host, port, n):
    addr = socket.gethostbyname(host)
    counts, fails, first_peer, errs = {}, 0, None, {}
    for _ in range(n):
        try:
            h, peer = one_conn(addr, port)
            if not h:
                raise OSError(errno.ECONNRESET, "empty reply")
            counts[h] = counts.get(h, 0) + 1
            first_peer = first_peer or "%s:%d" % peer
        except OSError as e:
            fails += 1
            k = errno.errorcode.get(e.errno, str(e))
            errs[k] = errs.get(k, 0) + 1
    print(json.dumps({"addr": addr, "counts": counts, "fails": fails, "errors": errs,
                      "peer": first_peer}))


def loop(host, port, interval_ms, stopfile):
    addr = socket.gethostbyname(host)
    out, t0 = [], time.time()
    while not os.path.exists(stopfile):
        t = time.time()
        try:
            h, _ = one_conn(addr, port)
            out.append([round(t - t0, 4), h or "EMPTY"])
        except OSError as e:
            out.append([round(t - t0, 4), "ERR:" + errno.errorcode.get(e.errno, str(e))])
        d = interval_ms / 1000.0 - (time.time() - t)
        if d > 0:
            time.sleep(d)
    print(json.dumps({"start": t0, "conns": out}))


def stream(host, port, stopfile, fam="4"):
    addr = socket.gethostbyname(host)
    if fam == "6":
        c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        c.settimeout(5)
        c.connect(("::ffff:" + addr, port))
    else:
        c = socket.create_connection((addr, port), timeout=5)
    last, gap, lines, buf, err = time.time(), 0.0, 0, b"", None
    c.settimeout(0.5)
    while not os.path.exists(stopfile):
        try:
            b = c.recv(4096)
        except socket.timeout:
            b = None
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e))
            break
        now = time.time()
        if b == b"":
            err = "EOF"
            break
        if b:
            gap = max(gap, now - last)
            last = now
            lines += b.count(b"\n")
    gap = max(gap, time.time() - last) if err is None else gap
    print(json.dumps({"lines": lines, "max_gap_ms": round(gap * 1000, 1), "error": err}))


def udp(host, port, n, mode):
    addr = socket.gethostbyname(host)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    if mode == "connected":
        s.connect((addr, port))
    counts, sources, lost = {}, {}, 0
    for i in range(n):
        try:
            if mode == "connected":
                s.send(b"q%d" % i)
            else:
                s.sendto(b"q%d" % i, (addr, port))
            d, src = s.recvfrom(2048)
            h = d.decode()
            counts[h] = counts.get(h, 0) + 1
            k = "%s:%d" % src
            sources[k] = sources.get(k, 0) + 1
        except socket.timeout:
            lost += 1
    peer = "%s:%d" % s.getpeername() if mode == "connected" else None
    print(json.dumps({"addr": addr, "counts": counts, "sources": sources, "lost": lost,
                      "peer": peer}))


def refused(host, port):
    addr = socket.gethostbyname(host)
    t = time.time()
    try:
        one_conn(addr, port, timeout=5)
        r = "OK"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e)) if e.errno else "TIMEOUT"
    print(json.dumps({"result": r, "ms": round((time.time() - t) * 1000, 1)}))


def main(a):
    cmd = a[0]
    if cmd == "who-tcp":
        who_tcp(int(a[1]))
    elif cmd == "stream-tcp":
        stream_tcp(int(a[1]))
    elif cmd == "who-udp":
        who_udp(int(a[1]), *a[2:3])
    elif cmd == "conns":
        conns(a[1], int(a[2]), int(a[3]))
    elif cmd == "loop":
        loop(a[1], int(a[2]), float(a[3]), a[4])
    elif cmd == "stream":
        stream(a[1], int(a[2]), a[3], *a[4:5])
    elif cmd == "udp":
        udp(a[1], int(a[2]), int(a[3]), a[4])
    elif cmd == "refused":
        refused(a[1], int(a[2]))
    else:
        sys.exit("lbprobe: unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
