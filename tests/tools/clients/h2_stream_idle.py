#!/usr/bin/python3
"""h2_stream_idle.py — HTTP/2 streams that go silent, for the node proxy's
stream idle timeout (issue 18; docs/proxy.md "Timeouts", h2conn.c
invariant 9), with Debian's python3-h2. Every mode is bounded in time.

  stall-backend PORT SECS
        an HTTP/1.1 server that answers every request head with
        "200, Content-Length: 100" and 5 bytes of its body, then sends
        nothing more (an answer that started and stalled). Exits after SECS.
  run PORT IDLE BUSY
        one connection to the proxy at 127.0.0.1:PORT with five streams at
        once, then reads for BUSY + 3 seconds:
          idle   POST /idle, HEADERS without END_STREAM, nothing after
          grpc   POST /pkg.Svc/Method, content-type application/grpc,
                 HEADERS without END_STREAM, nothing after
          slow   GET /?delay=Ds (D = 3 x IDLE): a backend slower than IDLE
          busy   POST / with content-length, 4 bytes of DATA every IDLE/4
                 seconds for BUSY seconds, then END_STREAM
          stall  GET /stall (the stall-backend above, by route)
        Prints one line per stream:
          "NAME status=S grpc=G body=B end=E t=T"
        S the :status (or -), G grpc-status (or -), B body bytes received,
        E "end" (END_STREAM), "reset:CODE" (RST_STREAM with CODE) or "open",
        T seconds from the start to that end (or -).
"""
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events


def stall_backend(port, secs):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    ls.settimeout(0.5)
    end = time.monotonic() + secs
    held = []

    def serve(c):
        buf = b""
        c.settimeout(secs)
        try:
            while b"\r\n\r\n" not in buf:
                x = c.recv(65536)
                if not x:
                    return
                buf += x
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello")
            while c.recv(65536):
                pass
        except OSError:
            pass

    while time.monotonic() < end:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        held.append(c)
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    for c in held:
        c.close()


def run(port, idle, busy):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    c = h2.connection.H2Connection(cfg)
    c.initiate_connection()
    t0 = time.monotonic()
    base = [(":scheme", "http"), (":authority", "web")]
    st = {}

    def open_stream(name, method, path, extra=(), end=False):
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", method), (":path", path)] + base + list(extra),
                       end_stream=end)
        st[sid] = {"name": name, "status": "-", "grpc": "-", "body": 0, "end": "open",
                   "t": "-"}
        return sid

    open_stream("idle", "POST", "/idle")
    open_stream("grpc", "POST", "/pkg.Svc/Method", [("content-type", "application/grpc"),
                                                     ("te", "trailers")])
    open_stream("slow", "GET", "/?delay=%gs" % (3 * idle), end=True)
    nbusy = int(busy / (idle / 4)) + 1
    busy_id = open_stream("busy", "POST", "/", [("content-length", str(4 * nbusy))])
    open_stream("stall", "GET", "/stall", end=True)
    s.sendall(c.data_to_send())
    sent = 0
    next_send = t0
    s.settimeout(0.05)
    while time.monotonic() < t0 + busy + 3:
        now = time.monotonic()
        if sent < nbusy and now >= next_send and st[busy_id]["end"] == "open":
            sent += 1
            c.send_data(busy_id, b"ping", end_stream=sent == nbusy)
            next_send = now + idle / 4
            s.sendall(c.data_to_send())
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        for ev in c.receive_data(data):
            x = st.get(getattr(ev, "stream_id", None))
            if x is None:
                continue
            if isinstance(ev, h2.events.ResponseReceived):
                for k, v in ev.headers:
                    if k == ":status":
                        x["status"] = v
                    elif k == "grpc-status":
                        x["grpc"] = v
            elif isinstance(ev, h2.events.TrailersReceived):
                for k, v in ev.headers:
                    if k == "grpc-status":
                        x["grpc"] = v
            elif isinstance(ev, h2.events.DataReceived):
                x["body"] += len(ev.data)
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                if x["end"] == "open":
                    x["end"], x["t"] = "end", "%.2f" % (time.monotonic() - t0)
            elif isinstance(ev, h2.events.StreamReset):
                if x["end"] == "open":
                    x["end"] = "reset:%d" % ev.error_code
                    x["t"] = "%.2f" % (time.monotonic() - t0)
        s.sendall(c.data_to_send())
    for sid in sorted(st):
        x = st[sid]
        print("%s status=%s grpc=%s body=%d end=%s t=%s" %
              (x["name"], x["status"], x["grpc"], x["body"], x["end"], x["t"]))
    s.close()


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "stall-backend":
        stall_backend(int(sys.argv[2]), float(sys.argv[3]))
    elif len(sys.argv) >= 5 and sys.argv[1] == "run":
        run(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
