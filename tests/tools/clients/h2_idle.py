#!/usr/bin/python3
"""h2_idle.py — idle HTTP/2 streams held through a proxy (issue 18's
"10,000 idle streams bounded"; docs/proxy.md "Flow control and memory"),
with Debian's python3-h2. Every mode is bounded in time.

  backend PORT MAXSTREAMS SECS [COUNTFILE]
        a cleartext HTTP/2 server (prior knowledge) that advertises
        SETTINGS_MAX_CONCURRENT_STREAMS MAXSTREAMS, takes every request
        stream and never answers it; every 100 ms it writes the number of
        streams it holds open to COUNTFILE (when given). Exits after SECS.
  hold PORT N SECS PID [COUNTFILE] [MODE]
        reads the proxy's SETTINGS_MAX_CONCURRENT_STREAMS L on a first
        connection, opens ceil(N/L) connections, measures the resident
        size of process PID (VmRSS, KiB) once they are up, then opens N
        idle request streams, at most L per connection: MODE "open" (the
        default) a POST whose HEADERS have no END_STREAM and no DATA
        follows (a request body that never comes), MODE "get" a GET with
        END_STREAM (a request whose backend never answers). Waits until
        COUNTFILE shows N streams at the backend (at most 20 s), measures
        again, holds them until SECS after the start, closes every
        connection, waits 2 s and measures a third time. Prints one line:
        "conns=C L=L open=O refused=R answered=A reset=X backend=K
         rss0=KiB rss1=KiB rss2=KiB per_stream=BYTES"
        open: streams with no answer nor reset when measured; per_stream:
        (rss1 - rss0) * 1024 / open.
  over PORT N
        one connection sending N idle POST streams at once, before the
        proxy's SETTINGS are read (so the client does not hold back at the
        limit itself); after 3 s prints "refused=R answered=A open=O".
"""
import math
import os
import select
import selectors
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def backend(port, maxs, secs, countfile):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1024)
    ls.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    conns = {}  # socket -> [H2Connection, set of open stream ids]
    end = time.monotonic() + secs
    next_count = 0.0
    cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    while time.monotonic() < end:
        for key, _ in sel.select(0.1):
            if key.data is None:
                try:
                    s, _ = ls.accept()
                except OSError:
                    continue
                s.setblocking(True)
                s.settimeout(5)
                c = h2.connection.H2Connection(cfg)
                c.local_settings = h2.settings.Settings(
                    client=False,
                    initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: maxs})
                c.initiate_connection()
                s.sendall(c.data_to_send())
                conns[s] = [c, set()]
                sel.register(s, selectors.EVENT_READ, 1)
                continue
            s = key.fileobj
            c, open_ids = conns[s]
            try:
                d = s.recv(65536)
            except OSError:
                d = b""
            evs = []
            if d:
                try:
                    evs = c.receive_data(d)
                except h2.exceptions.ProtocolError:
                    d = b""
            if not d:
                sel.unregister(s)
                s.close()
                del conns[s]
                continue
            for e in evs:
                if isinstance(e, h2.events.RequestReceived):
                    open_ids.add(e.stream_id)
                elif isinstance(e, (h2.events.StreamReset, h2.events.StreamEnded)):
                    if isinstance(e, h2.events.StreamReset):
                        open_ids.discard(e.stream_id)
                elif isinstance(e, h2.events.DataReceived):
                    c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            out = c.data_to_send()
            if out:
                try:
                    s.sendall(out)
                except OSError:
                    pass
        now = time.monotonic()
        if countfile and now >= next_count:
            next_count = now + 0.1
            with open(countfile + ".tmp", "w") as f:
                f.write("%d\n" % sum(len(v[1]) for v in conns.values()))
            os.replace(countfile + ".tmp", countfile)


def client(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c


def request(mode):
    return [(":method", "POST" if mode == "open" else "GET"), (":path", "/idle"),
            (":scheme", "http"), (":authority", "t")]


class Tally:
    def __init__(self):
        self.sent = set()
        self.refused = 0
        self.answered = 0
        self.reset = 0
        self.gone = set()

    def feed(self, s, c):
        """Read what is there (non-blocking) and count; False on EOF."""
        try:
            if not select.select([s], [], [], 0)[0]:
                return True
            d = s.recv(1 << 20)
        except OSError:
            return False
        if not d:
            return False
        try:
            evs = c.receive_data(d)
        except h2.exceptions.ProtocolError:
            return False
        for e in evs:
            if isinstance(e, h2.events.StreamReset):
                if e.error_code == h2.errors.ErrorCodes.REFUSED_STREAM:
                    self.refused += 1
                else:
                    self.reset += 1
                self.gone.add((id(c), e.stream_id))
            elif isinstance(e, h2.events.ResponseReceived):
                self.answered += 1
                self.gone.add((id(c), e.stream_id))
        out = c.data_to_send()
        if out:
            try:
                s.sendall(out)
            except OSError:
                return False
        return True


def wait_settings(s, c):
    """Read until the peer's SETTINGS arrived; its max concurrent streams."""
    t_end = time.monotonic() + 5
    while time.monotonic() < t_end:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        got = c.receive_data(d)
        out = c.data_to_send()
        if out:
            s.sendall(out)
        if any(isinstance(e, h2.events.RemoteSettingsChanged) for e in got):
            return c.remote_settings.max_concurrent_streams
    return None


def count_at(countfile):
    try:
        with open(countfile) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return -1


def hold(port, n, secs, pid, countfile, mode):
    t0 = time.monotonic()
    first = client(port)
    lim = wait_settings(*first)
    if not lim or lim > 1 << 20:
        lim = 100
    conns = [first] + [client(port) for _ in range(math.ceil(n / lim) - 1)]
    for s, c in conns[1:]:
        wait_settings(s, c)
    time.sleep(0.5)
    tally = Tally()
    for s, c in conns:
        tally.feed(s, c)
    r0 = rss(pid)
    left = n
    for s, c in conns:
        k = min(lim, left)
        left -= k
        for _ in range(k):
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, request(mode), end_stream=(mode != "open"))
            tally.sent.add((id(c), sid))
        s.sendall(c.data_to_send())
        tally.feed(s, c)
    t_end = time.monotonic() + 20
    backend_n = -1
    while time.monotonic() < t_end:
        for s, c in conns:
            tally.feed(s, c)
        backend_n = count_at(countfile) if countfile else -1
        if not countfile or backend_n >= n - tally.refused - tally.answered - tally.reset:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # (the proxy's idle sweep: h2mem.c trims only idle connections)
    for s, c in conns:
        tally.feed(s, c)
    r1 = rss(pid)
    still = len(tally.sent - tally.gone)
    while time.monotonic() < t0 + secs:
        for s, c in conns:
            if not tally.feed(s, c):
                break
        time.sleep(0.2)
    for s, _ in conns:
        s.close()
    time.sleep(2)
    r2 = rss(pid)
    print("conns=%d L=%d open=%d refused=%d answered=%d reset=%d backend=%d "
          "rss0=%d rss1=%d rss2=%d per_stream=%.0f" %
          (len(conns), lim, still, tally.refused, tally.answered, tally.reset, backend_n,
           r0, r1, r2, (r1 - r0) * 1024.0 / still if still else -1))


def over(port, n):
    s, c = client(port)
    # the proxy's SETTINGS are not read yet: h2 lets us send past its limit
    for i in range(n):
        c.send_headers(1 + 2 * i, request("open"), end_stream=False)
    s.sendall(c.data_to_send())
    tally = Tally()
    for i in range(n):
        tally.sent.add((id(c), 1 + 2 * i))
    t_end = time.monotonic() + 3
    while time.monotonic() < t_end:
        if not tally.feed(s, c):
            break
        time.sleep(0.05)
    print("refused=%d answered=%d open=%d" % (tally.refused, tally.answered,
                                               len(tally.sent - tally.gone)))
    s.close()


def main(a):
    if a[0] == "backend":
        backend(int(a[1]), int(a[2]), float(a[3]), a[4] if len(a) > 4 else None)
    elif a[0] == "hold":
        hold(int(a[1]), int(a[2]), float(a[3]), int(a[4]),
             a[5] if len(a) > 5 and a[5] != "-" else None, a[6] if len(a) > 6 else "open")
    elif a[0] == "over":
        over(int(a[1]), int(a[2]))
    else:
        sys.exit("usage: see the docstring")


if __name__ == "__main__":
    main(sys.argv[1:])
