#!/usr/bin/python3
"""h2_trailers.py — HTTP/2 answers with many trailer fields, through the
node proxy (issue 18; docs/proxy.md "HTTP/2 and gRPC", h2conn.c invariant
8), with Debian's python3-h2. Every mode is bounded in time.

  backend PORT SECS
        a cleartext HTTP/2 server (prior knowledge): a request for
        /trailers/N is answered 200 with the body "ok" and then N trailer
        fields, grpc-status: 0 first and x-t2: v2 .. x-tN: vN after it.
        Exits after SECS.
  get PORT PATH...
        one connection to 127.0.0.1:PORT, the PATHs one after the other
        (GET, a stream each); prints one line per PATH:
          "PATH status=S body=B trailers=T grpc=G end=E"
        S the :status (or -), B the body bytes, T the number of trailer
        fields, G their grpc-status (or -), E "end" (END_STREAM),
        "reset:CODE" or "open" (nothing within 5 s).
"""
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def backend(port, secs):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    ls.settimeout(0.5)
    end = time.monotonic() + secs
    cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")

    def serve(s):
        c = h2.connection.H2Connection(cfg)
        c.initiate_connection()
        s.settimeout(secs)
        try:
            s.sendall(c.data_to_send())
            while True:
                data = s.recv(65536)
                if not data:
                    return
                for ev in c.receive_data(data):
                    if not isinstance(ev, h2.events.RequestReceived):
                        continue
                    path = dict(ev.headers).get(":path", "/")
                    n = int(path.rsplit("/", 1)[1]) if path.startswith("/trailers/") else 0
                    c.send_headers(ev.stream_id, [(":status", "200"),
                                                  ("content-type", "text/plain")])
                    c.send_data(ev.stream_id, b"ok", end_stream=not n)
                    if n:
                        tr = [("grpc-status", "0")] + \
                             [("x-t%d" % i, "v%d" % i) for i in range(2, n + 1)]
                        c.send_headers(ev.stream_id, tr, end_stream=True)
                s.sendall(c.data_to_send())
        except (OSError, h2.exceptions.H2Error):
            pass
        finally:
            s.close()

    while time.monotonic() < end:
        try:
            s, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(s,), daemon=True).start()


def get(port, paths):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    s.sendall(c.data_to_send())
    s.settimeout(0.1)
    for path in paths:
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                             (":authority", "web")], end_stream=True)
        s.sendall(c.data_to_send())
        x = {"status": "-", "body": 0, "trailers": 0, "grpc": "-", "end": "open"}
        until = time.monotonic() + 5
        while x["end"] == "open" and time.monotonic() < until:
            try:
                data = s.recv(65536)
            except socket.timeout:
                continue
            if not data:
                break
            for ev in c.receive_data(data):
                if getattr(ev, "stream_id", None) != sid:
                    continue
                if isinstance(ev, h2.events.ResponseReceived):
                    x["status"] = dict(ev.headers).get(":status", "-")
                elif isinstance(ev, h2.events.DataReceived):
                    x["body"] += len(ev.data)
                    c.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.TrailersReceived):
                    x["trailers"] = len(ev.headers)
                    x["grpc"] = dict(ev.headers).get("grpc-status", "-")
                elif isinstance(ev, h2.events.StreamEnded):
                    x["end"] = "end"
                elif isinstance(ev, h2.events.StreamReset):
                    x["end"] = "reset:%d" % ev.error_code
            s.sendall(c.data_to_send())
        print("%s status=%s body=%d trailers=%d grpc=%s end=%s" %
              (path, x["status"], x["body"], x["trailers"], x["grpc"], x["end"]))
    s.close()


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "backend":
        backend(int(sys.argv[2]), float(sys.argv[3]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "get":
        get(int(sys.argv[2]), sys.argv[3:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
