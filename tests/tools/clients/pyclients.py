#!/usr/bin/python3
"""pyclients.py — the Python clients of tests/e2e/36-client-matrix.t (run with
Debian's /usr/bin/python3: grpcio comes from python3-grpcio). One line of
output per request: "<status> <hostname> <peer>" or "ERR <why>".

  sock 4|6 URL...        a plain socket: getaddrinfo(host, AF_INET, or AF_INET6
                         with AI_V4MAPPED: ::ffff:a.b.c.d), HTTP/1.0 GET,
                         getpeername
  urllib URL...          urllib.request.urlopen (create_connection: AF_INET
                         for an IPv4 name, AF_INET6 for a [::ffff:...] URL)
  udp 4|6 NAME PORT N    getaddrinfo + sendto/recvfrom, N datagrams (lbprobe
                         who-udp): "<answers> <hostnames> <reply sources>"
  grpc-server PORT       a gRPC server (no protobuf: raw bytes) answering
                         /who.Who/Get with the pod's hostname
  grpc-client TARGET N   N separate channels, 3 calls each (default channel
                         settings): "<channels ok> <per-channel backends>"
"""
import json, re, socket, sys, urllib.parse, urllib.request

HOST = re.compile(rb'"hostname":"([^"]*)"')


def hostname_of(body):
    m = HOST.search(body)
    return m.group(1).decode() if m else "?"


def fmt_peer(p):
    return "[%s]:%d" % p[:2] if ":" in p[0] else "%s:%d" % p[:2]


def sock(fam, urls):
    for u in urls:
        p = urllib.parse.urlsplit(u)
        af = socket.AF_INET if fam == "4" else socket.AF_INET6
        flags = 0 if fam == "4" else socket.AI_V4MAPPED
        try:
            ai = socket.getaddrinfo(p.hostname, p.port or 80, af, socket.SOCK_STREAM, 0, flags)[0]
            s = socket.socket(ai[0], socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(ai[4])
            peer = fmt_peer(s.getpeername())
            s.sendall(b"GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % ((p.path or "/").encode(), p.hostname.encode()))
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            s.close()
            print(data.split(b" ", 2)[1].decode(), hostname_of(data), peer)
        except OSError as e:
            print("ERR", e)


def urllib_get(urls):
    for u in urls:
        try:
            with urllib.request.urlopen(u, timeout=5) as r:
                peer = fmt_peer(r.fp.raw._sock.getpeername())
                print(r.status, hostname_of(r.read()), peer)
        except Exception as e:
            print("ERR", e)


def udp(fam, name, port, n):
    af = socket.AF_INET if fam == "4" else socket.AF_INET6
    flags = 0 if fam == "4" else socket.AI_V4MAPPED
    ai = socket.getaddrinfo(name, int(port), af, socket.SOCK_DGRAM, 0, flags)[0]
    s = socket.socket(ai[0], socket.SOCK_DGRAM)
    s.settimeout(1)
    got, hosts, srcs = 0, set(), set()
    for i in range(int(n)):
        s.sendto(b"q%d" % i, ai[4])
        try:
            d, src = s.recvfrom(2048)
        except socket.timeout:
            break
        got += 1
        hosts.add(d.decode())
        srcs.add(fmt_peer(src))
    print(got, ",".join(sorted(hosts)), ",".join(sorted(srcs)))


def grpc_server(port):
    from concurrent import futures
    import grpc
    me = socket.gethostname().encode()
    h = grpc.method_handlers_generic_handler("who.Who", {
        "Get": grpc.unary_unary_rpc_method_handler(lambda req, ctx: me)})
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    srv.add_generic_rpc_handlers((h,))
    srv.add_insecure_port("[::]:%d" % int(port))
    srv.start()
    srv.wait_for_termination()


def grpc_client(target, n):
    import grpc
    per, ok = [], 0
    for _ in range(int(n)):
        ch = grpc.insecure_channel(target)
        try:
            call = ch.unary_unary("/who.Who/Get")
            got = sorted(set(call(b"", timeout=5).decode() for _ in range(3)))
            per.append("+".join(got))
            ok += 1
        except grpc.RpcError as e:
            per.append("ERR:" + e.code().name)
        finally:
            ch.close()
    print(ok, json.dumps(per, separators=(",", ":")))


def main(a):
    if a[0] == "sock":
        sock(a[1], a[2:])
    elif a[0] == "urllib":
        urllib_get(a[1:])
    elif a[0] == "udp":
        udp(*a[1:5])
    elif a[0] == "grpc-server":
        grpc_server(a[1])
    elif a[0] == "grpc-client":
        grpc_client(a[1], a[2])
    else:
        sys.exit("pyclients: unknown command")


if __name__ == "__main__":
    main(sys.argv[1:])
