#!/usr/bin/python3
"""grpc_peer.py — gRPC server and clients for the proxy's HTTP/2 tests, on
Debian's python3-grpcio (generic handlers on raw bytes: no protoc needed).

  serve NAME ADDR [FAIL_EVERY [SECONDS [MAX_STREAMS]]]
        service t.T on ADDR: Who (answers NAME:request), Flaky (UNAVAILABLE
        on every FAIL_EVERY-th call), SStream, CStream, Bidi, Trailers
        (NOT_FOUND with a trailer x-trailer: t1), Slow (sleeps the request's
        number of ms), Mirrored, Half, Lost (as Who), Count (how many calls of the
        method named in the request it served, "*" for all but Count);
        exits after SECONDS (default 300); MAX_STREAMS: its
        SETTINGS_MAX_CONCURRENT_STREAMS (grpc.max_concurrent_streams)
  spread TARGET CALLS CHANNELS
        CALLS unary calls round-robin over CHANNELS channels (one HTTP/2
        connection each); checks every answer; prints NAME=COUNT ...
  kinds TARGET      unary, the three streaming kinds, trailers, errors,
                    a deadline, a ping-pong bidi; one line "ok ..." per check
  flaky TARGET CALLS
        CALLS calls of Flaky; prints "ok=N failed=M"
  slow TARGET MS DEADLINE_S
        one Slow call (the server sleeps MS) with that deadline; prints
        "CODE details=DETAILS ms=ELAPSED"
  calls TARGET PATH CALLS CHANNELS [KEY=VALUE]
        CALLS unary calls of PATH (t.T/Who, t.T/Hello) with the metadata
        KEY=VALUE if given, round-robin over CHANNELS; prints NAME=COUNT ...
  meta TARGET KEY [KEY=VALUE]
        one Meta call: the server answers the value of its request metadata
        KEY; prints "NAME:VALUE" and then each response header "h NAME=VALUE"
  count TARGET METHOD
        one Count call: prints how many calls of METHOD the server served
  burst TARGET N MS
        N Slow(MS) calls at once on one channel (one HTTP/2 connection);
        prints "ok=K ms=ELAPSED"
"""
import collections
import queue
import sys
import threading
import time
from concurrent import futures

import grpc


def serve(name, addr, fail_every=0, seconds=300.0, max_streams=0):
    n = [0]
    nb = name.encode()
    served = collections.Counter()
    lock = threading.Lock()

    def counted(method, f):
        def g(req, ctx):
            with lock:
                served[method] += 1
                served["*"] += 1
            return f(req, ctx)
        return g

    def count(req, ctx):
        return b"%d" % served[req.decode()]

    def who(req, ctx):
        return nb + b":" + req

    def flaky(req, ctx):
        n[0] += 1
        if fail_every and n[0] % fail_every == 0:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "try again")
        return nb

    def sstream(req, ctx):
        for i in range(int(req or b"3")):
            yield b"%s-%d" % (nb, i)

    def cstream(it, ctx):
        return b"%s:%d" % (nb, sum(len(x) for x in it))

    def bidi(it, ctx):
        for x in it:
            yield nb + b">" + x

    def trailers(req, ctx):
        ctx.set_trailing_metadata((("x-trailer", "t1"),))
        ctx.set_code(grpc.StatusCode.NOT_FOUND)
        ctx.set_details("nothing here")
        return b""

    def slow(req, ctx):
        time.sleep(int(req) / 1000.0)
        return nb

    def meta(req, ctx):
        md = dict(ctx.invocation_metadata())
        return nb + b":" + md.get(req.decode(), "-").encode()

    h = grpc.method_handlers_generic_handler("t.T", {
        "Who": grpc.unary_unary_rpc_method_handler(counted("Who", who)),
        "Hello": grpc.unary_unary_rpc_method_handler(counted("Hello", who)),
        "Mirrored": grpc.unary_unary_rpc_method_handler(counted("Mirrored", who)),
        "Half": grpc.unary_unary_rpc_method_handler(counted("Half", who)),
        "Lost": grpc.unary_unary_rpc_method_handler(counted("Lost", who)),
        "Count": grpc.unary_unary_rpc_method_handler(count),
        "Meta": grpc.unary_unary_rpc_method_handler(meta),
        "Flaky": grpc.unary_unary_rpc_method_handler(counted("Flaky", flaky)),
        "SStream": grpc.unary_stream_rpc_method_handler(sstream),
        "CStream": grpc.stream_unary_rpc_method_handler(cstream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Trailers": grpc.unary_unary_rpc_method_handler(trailers),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
    })
    opts = [("grpc.max_concurrent_streams", max_streams)] if max_streams else None
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=32), handlers=(h,), options=opts)
    s.add_insecure_port(addr)
    s.start()
    s.wait_for_termination(timeout=seconds)


def channels(target, k):
    # a local subchannel pool: each channel its own connection
    return [grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1),
                                                   ("zh.channel", i)]) for i in range(k)]


def spread(target, n, k):
    calls(target, "t.T/Who", n, k)


def md_arg(a):
    return [tuple(a.split("=", 1))] if a else None


def calls(target, path, n, k, kv=None):
    cnt = collections.Counter()
    cs = channels(target, k)
    for i in range(n):
        r = cs[i % k].unary_unary("/" + path)(b"x%d" % i, timeout=10, metadata=md_arg(kv))
        if not r.endswith(b":x%d" % i):
            print("wrong answer", r)
            sys.exit(1)
        cnt[r.split(b":")[0].decode()] += 1
    print(" ".join("%s=%d" % p for p in sorted(cnt.items())))


def meta(target, key, kv=None):
    ch = grpc.insecure_channel(target)
    r, call = ch.unary_unary("/t.T/Meta").with_call(key.encode(), timeout=10,
                                                     metadata=md_arg(kv))
    print(r.decode())
    for k, v in call.initial_metadata():
        print("h %s=%s" % (k, v))


def count(target, method):
    ch = grpc.insecure_channel(target)
    print(ch.unary_unary("/t.T/Count")(method.encode(), timeout=5).decode())


def burst(target, n, ms):
    ch = grpc.insecure_channel(target)
    f = ch.unary_unary("/t.T/Slow")
    t0 = time.time()
    calls = [f.future(b"%d" % ms, timeout=30) for _ in range(n)]
    ok = 0
    for c in calls:
        try:
            c.result()
            ok += 1
        except grpc.RpcError as e:
            print("failed", e.code().name, e.details(), file=sys.stderr)
    print("ok=%d ms=%d" % (ok, (time.time() - t0) * 1000))


def kinds(target):
    ch = grpc.insecure_channel(target)
    r = ch.unary_unary("/t.T/Who")(b"hello", timeout=5)
    print("ok unary", r.split(b":")[1].decode())
    r = [x.split(b"-")[1] for x in ch.unary_stream("/t.T/SStream")(b"5", timeout=5)]
    print("ok server-stream", b",".join(r).decode())
    r = ch.stream_unary("/t.T/CStream")(iter([b"ab", b"cde", b"f" * 200000]), timeout=5)
    print("ok client-stream", r.split(b":")[1].decode())
    r = [x.split(b">")[1] for x in ch.stream_stream("/t.T/Bidi")(iter([b"1", b"2", b"3"]),
                                                               timeout=5)]
    print("ok bidi", b",".join(r).decode())
    try:
        ch.unary_unary("/t.T/Trailers")(b"", timeout=5)
    except grpc.RpcError as e:
        md = dict(e.trailing_metadata() or ())
        print("ok status", e.code().name, e.details(), "x-trailer=%s" % md.get("x-trailer"))
    try:
        ch.unary_unary("/t.T/Nope")(b"", timeout=5)
    except grpc.RpcError as e:
        print("ok unknown-method", e.code().name)
    try:
        ch.unary_unary("/t.T/Slow")(b"2000", timeout=0.3)
    except grpc.RpcError as e:
        print("ok deadline", e.code().name)
    q = queue.Queue()

    def gen():
        while True:
            x = q.get()
            if x is None:
                return
            yield x
    it = ch.stream_stream("/t.T/Bidi")(gen(), timeout=10)
    got = []
    for i in range(5):
        q.put(b"m%d" % i)
        got.append(next(it).split(b">")[1].decode())  # before m(i+1) is sent
    q.put(None)
    print("ok ping-pong", ",".join(got))


def flaky(target, calls):
    ch = grpc.insecure_channel(target)
    ok = failed = 0
    for i in range(calls):
        try:
            ch.unary_unary("/t.T/Flaky")(b"", timeout=5)
            ok += 1
        except grpc.RpcError:
            failed += 1
    print("ok=%d failed=%d" % (ok, failed))


def slow(target, ms, deadline):
    ch = grpc.insecure_channel(target)
    t0 = time.time()
    try:
        ch.unary_unary("/t.T/Slow")(b"%d" % ms, timeout=deadline)
        code, det = "OK", ""
    except grpc.RpcError as e:
        code, det = e.code().name, e.details()
    print("%s details=%s ms=%d" % (code, det, (time.time() - t0) * 1000))


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "serve":
        serve(a[0], a[1], int(a[2]) if len(a) > 2 else 0, float(a[3]) if len(a) > 3 else 300.0,
              int(a[4]) if len(a) > 4 else 0)
    elif cmd == "spread":
        spread(a[0], int(a[1]), int(a[2]))
    elif cmd == "kinds":
        kinds(a[0])
    elif cmd == "flaky":
        flaky(a[0], int(a[1]))
    elif cmd == "calls":
        calls(a[0], a[1], int(a[2]), int(a[3]), a[4] if len(a) > 4 else None)
    elif cmd == "burst":
        burst(a[0], int(a[1]), int(a[2]))
    elif cmd == "count":
        count(a[0], a[1])
    elif cmd == "meta":
        meta(a[0], a[1], a[2] if len(a) > 2 else None)
    elif cmd == "slow":
        slow(a[0], int(a[1]), float(a[2]))
    else:
        sys.exit(__doc__)
