#!/usr/bin/env python3
# slowread.py — a fast writer and a (possibly sleeping) reader, for the
# short-circuit's backpressure (tests/e2e/49-accel-backpressure.t).
#
#   slowread.py read PORT SLEEP_S [HASH]
#       listen on PORT, accept one connection, sleep SLEEP_S seconds without
#       reading, then read until EOF; print "read BYTES SHA256" (SHA256 "-"
#       when HASH is 0: a reader that only counts, as fast as it can, and
#       sends one byte "g" when it starts reading).
#   slowread.py write IP PORT TOTAL WINDOW_S [go]
#       ("go": wait for the reader's "g" before sending, so that the writer
#       does not start before the reader is in its read loop)
#       connect, send TOTAL bytes of a random pattern as fast as the
#       socket takes them; print "accepted BYTES" = what send() had taken
#       WINDOW_S seconds after the connect (the reader still asleep), then,
#       once all is sent, "sent TOTAL SHA256 ERR" (ERR: "-" or the errno
#       name of a failed send, e.g. ENOMEM).
# IPv4 or IPv6 addresses. Bounded: every wait has a timeout.
import errno, hashlib, os, select, socket, sys, time

CHUNK = 1 << 16


def pattern():
    # random bytes, a length that is no multiple of CHUNK: the chunks of
    # the stream all differ, so a loss or a reordering changes the hash
    return os.urandom((1 << 20) + 7)


def reader(port, sleep_s, do_hash):
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    ls.bind(("::", port))
    ls.listen(1)
    ls.settimeout(60)
    c, _ = ls.accept()
    time.sleep(sleep_s)
    c.settimeout(60)
    h = hashlib.sha256() if do_hash else None
    n = 0
    buf = bytearray(1 << 18)
    mv = memoryview(buf)
    if not do_hash:
        c.sendall(b"g")
    while True:
        k = c.recv_into(buf)
        if not k:
            break
        n += k
        if h:
            h.update(mv[:k])
    print("read", n, h.hexdigest() if h else "-", flush=True)


def writer(ip, port, total, window_s, go):
    pat = pattern()
    s = socket.create_connection((ip, port), timeout=10)
    if go and s.recv(1) != b"g":
        sys.exit("slowread: no go from the reader")
    s.setblocking(False)
    t0 = time.monotonic()
    h = hashlib.sha256()
    sent, reported, err = 0, False, "-"
    deadline = t0 + 120
    while sent < total:
        now = time.monotonic()
        if not reported and now - t0 >= window_s:
            print("accepted", sent, flush=True)
            reported = True
        if now > deadline:
            err = "TIMEOUT"
            break
        off = sent % len(pat)
        n = min(CHUNK, total - sent, len(pat) - off)
        try:
            k = s.send(pat[off:off + n])
        except BlockingIOError:
            select.select([], [s], [], 0.05)
            continue
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
            break
        h.update(pat[off:off + k])
        sent += k
    if not reported:
        print("accepted", sent, flush=True)
    s.setblocking(True)
    s.settimeout(60)
    if err == "-":
        s.shutdown(socket.SHUT_WR)
        s.recv(1)   # the reader's close
    print("sent", sent, h.hexdigest(), err, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "read":
        reader(int(sys.argv[2]), float(sys.argv[3]),
               len(sys.argv) < 5 or sys.argv[4] != "0")
    else:
        writer(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
               len(sys.argv) > 6 and sys.argv[6] == "go")
