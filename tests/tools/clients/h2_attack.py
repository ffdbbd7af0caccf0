#!/usr/bin/python3
"""h2_attack.py — crafted HTTP/2 clients (Debian's python3-h2 plus raw
frames) for the proxy's HTTP/2 defences. Each mode prints one line of
facts about what the proxy did and exits 0; the test judges them.

  streams PORT N      N GET streams in one burst, before reading the
                      proxy's SETTINGS: "refused=R answered=A"
  rapid-reset PORT N  N HEADERS + RST_STREAM pairs in one burst:
                      "goaway=E closed=C"  (E = GOAWAY error code or -1)
  big-header PORT KB  one request with a KB KiB header, then a normal
                      one on the same connection: "reset=R then=STATUS"
  continuation PORT N HEADERS without END_HEADERS + N CONTINUATION
                      frames: "goaway=E closed=C"
  ping-flood PORT N, settings-flood PORT N, window-flood PORT N,
  priority-flood PORT N
                      N PING (empty SETTINGS, WINDOW_UPDATE +1, PRIORITY)
                      frames in one burst, then reads: "goaway=E closed=C"
  drain PORT MS       one GET /?delay=MSms, then reads to the end (the test
                      sends the proxy SIGTERM meanwhile):
                      "goaway=E last=L status=S closed=C"
  cancel-upload PORT KB
                      POST /hold with up to KB KiB of body, sent as the
                      windows allow until the proxy stops opening them (a
                      backend that never reads), then RST_STREAM(CANCEL):
                      "stalled=1 window=W", W the connection's send window
                      2 s later (65535 when the proxy gave back every byte
                      the stream took; 0 when they leaked)
  idle-again PORT MS  GET /, MS ms idle on the same connection (the proxy
                      may hand its idle pages back meanwhile), GET / again:
                      "first=STATUS second=STATUS"
"""
import socket
import struct
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def conn(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    return s, c


def req(sid, path="/"):
    return [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "t")]


def pump(s, c, until, limit=20000):
    """Read and feed events to until(ev) until it returns True, EOF or timeout.
    Returns (events, closed)."""
    evs = []
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return evs, True
            try:
                got = c.receive_data(d)
            except h2.exceptions.ProtocolError:
                return evs, True
            for e in got:
                evs.append(e)
                if isinstance(e, h2.events.DataReceived):
                    c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            out = c.data_to_send()
            if out:
                try:
                    s.sendall(out)
                except OSError:
                    return evs, True
            if until(evs) or len(evs) > limit:
                return evs, False
    except socket.timeout:
        return evs, False
    except OSError:
        return evs, True


def streams(port, n):
    s, c = conn(port)
    for i in range(n):
        c.send_headers(1 + 2 * i, req(1 + 2 * i), end_stream=True)
    s.sendall(c.data_to_send())
    done = set()

    def until(evs):
        for e in evs:
            if isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                done.add(e.stream_id)
        return len(done) >= n
    evs, _ = pump(s, c, until)
    refused = sum(1 for e in evs if isinstance(e, h2.events.StreamReset) and
                  e.error_code == h2.errors.ErrorCodes.REFUSED_STREAM)
    answered = sum(1 for e in evs if isinstance(e, h2.events.ResponseReceived))
    print("refused=%d answered=%d" % (refused, answered))


def frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def goaway_of(s, wait=5.0):
    """Read raw frames until EOF; return (last GOAWAY error code or -1, closed)."""
    buf, code, closed = b"", -1, False
    s.settimeout(wait)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            buf += d
    except socket.timeout:
        pass
    except OSError:
        closed = True
    i = 0
    while i + 9 <= len(buf):
        ln = struct.unpack(">I", b"\0" + buf[i:i + 3])[0]
        if buf[i + 3] == 7 and i + 17 <= len(buf):
            code = struct.unpack(">I", buf[i + 13:i + 17])[0]
        i += 9 + ln
    return code, closed


def rapid_reset(port, n):
    s, c = conn(port)
    raw = c.data_to_send()
    hdr = b"\x82\x84\x86\x41\x01t"  # :method GET, :path /, :scheme http, :authority t
    for i in range(n):
        sid = 1 + 2 * i
        raw += frame(1, 0x5, sid, hdr)                      # HEADERS END_STREAM|END_HEADERS
        raw += frame(3, 0, sid, struct.pack(">I", 8))        # RST_STREAM CANCEL
    try:
        s.sendall(raw)
    except OSError:
        pass
    code, closed = goaway_of(s, 5.0 if n > 1000 else 1.0)
    print("goaway=%d closed=%d" % (code, closed))


def continuation(port, n):
    s, c = conn(port)
    raw = c.data_to_send()
    raw += frame(1, 0x1, 1, b"\x82\x84\x86\x41\x01t")    # HEADERS END_STREAM, no END_HEADERS
    for i in range(n):
        raw += frame(9, 0, 1, b"\x00\x01x\x01y")         # CONTINUATION "x: y", no END_HEADERS
    try:
        s.sendall(raw)
    except OSError:
        pass
    code, closed = goaway_of(s)
    print("goaway=%d closed=%d" % (code, closed))


def big_header(port, kb):
    s, c = conn(port)
    c.update_settings({h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 1 << 24})
    s.sendall(c.data_to_send())
    c.local_settings.max_header_list_size = 1 << 24
    h = req(1) + [("x-big", "a" * (kb * 1024))]
    c.send_headers(1, h, end_stream=True)
    s.sendall(c.data_to_send())
    evs, closed = pump(s, c, lambda evs: any(
        isinstance(e, (h2.events.StreamReset, h2.events.StreamEnded)) for e in evs))
    reset = any(isinstance(e, h2.events.StreamReset) for e in evs)
    c.send_headers(3, req(3), end_stream=True)
    s.sendall(c.data_to_send())
    evs, _ = pump(s, c, lambda evs: any(isinstance(e, h2.events.StreamEnded) for e in evs))
    st = [dict(e.headers).get(":status") for e in evs if isinstance(e, h2.events.ResponseReceived)]
    print("reset=%d then=%s" % (reset, st[0] if st else "none"))


def flood(ftype, payload, sid=0):
    def run(port, n):
        s, c = conn(port)
        raw = c.data_to_send()
        for i in range(n):
            raw += frame(ftype, 0, sid, payload(i))
        try:
            s.sendall(raw)
        except OSError:
            pass
        code, closed = goaway_of(s, 1.5)
        print("goaway=%d closed=%d" % (code, closed))
    return run


def drain(port, ms):
    # raw frames: python3-h2 drops the frames that follow a GOAWAY
    import hpack
    s, c = conn(port)
    c.send_headers(1, req(1, "/?delay=%dms" % ms), end_stream=True)
    s.sendall(c.data_to_send())
    s.settimeout(10)
    buf, closed = b"", False
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            buf += d
    except OSError:
        pass
    code, last, status, i, dec = -1, "-", "none", 0, hpack.Decoder()
    while i + 9 <= len(buf):
        ln = struct.unpack(">I", b"\0" + buf[i:i + 3])[0]
        ft, fl, sid = buf[i + 3], buf[i + 4], struct.unpack(">I", buf[i + 5:i + 9])[0]
        pl = buf[i + 9:i + 9 + ln]
        if ft == 7:
            last, code = struct.unpack(">II", pl[:8])
        elif ft == 1:
            if fl & 0x8:    # PADDED
                pl = pl[1:len(pl) - pl[0]]
            if fl & 0x20:   # PRIORITY
                pl = pl[5:]
            h = dict(dec.decode(pl))
            if sid == 1 and code >= 0:   # answered after the GOAWAY
                status = h.get(":status", "none")
        i += 9 + ln
    print("goaway=%d last=%s status=%s closed=%d" % (code, last, status, closed))


def cancel_upload(port, kb):
    s, c = conn(port)
    c.send_headers(1, [(":method", "POST"), (":path", "/hold"), (":scheme", "http"),
                       (":authority", "t")])
    s.sendall(c.data_to_send())
    left, stalled = kb * 1024, 0
    s.settimeout(1.0)
    while left:
        n = min(left, c.local_flow_control_window(1), c.max_outbound_frame_size)
        if n > 0:
            c.send_data(1, b"u" * n)
            s.sendall(c.data_to_send())
            left -= n
            continue
        evs, closed = pump(s, c, lambda evs: any(
            isinstance(e, h2.events.WindowUpdated) for e in evs))
        if closed:
            break
        if not any(isinstance(e, h2.events.WindowUpdated) for e in evs):
            stalled = 1     # no window for a second: the proxy holds the rest
            break
    c.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
    s.sendall(c.data_to_send())
    s.settimeout(2.0)
    pump(s, c, lambda evs: c.outbound_flow_control_window >= 65535)
    print("stalled=%d window=%d" % (stalled, c.outbound_flow_control_window))


def idle_again(port, ms):
    import time
    s, c = conn(port)
    got = []
    for sid in (1, 3):
        if sid == 3:
            time.sleep(ms / 1000.0)
        c.send_headers(sid, req(sid), end_stream=True)
        s.sendall(c.data_to_send())
        evs, _ = pump(s, c, lambda evs: any(isinstance(e, h2.events.StreamEnded) and
                                            e.stream_id == sid for e in evs))
        st = [dict(e.headers).get(":status", "-") for e in evs
              if isinstance(e, h2.events.ResponseReceived)]
        got.append(st[0] if st else "-")
    print("first=%s second=%s" % tuple(got))


if __name__ == "__main__":
    mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    {"streams": streams, "rapid-reset": rapid_reset, "big-header": big_header,
     "continuation": continuation, "drain": drain, "cancel-upload": cancel_upload,
     "idle-again": idle_again,
     "ping-flood": flood(6, lambda i: struct.pack(">Q", i)),
     "settings-flood": flood(4, lambda i: b""),
     "window-flood": flood(8, lambda i: struct.pack(">I", 1)),
     "priority-flood": flood(2, lambda i: struct.pack(">IB", 0, 15), 1)}[mode](port, n)
