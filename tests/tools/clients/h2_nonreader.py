#!/usr/bin/python3
"""h2_nonreader.py — HTTP/2 clients that never read what the proxy sends
(Debian's python3-h2 for the frames), for the proxy's limits on them.
Each mode prints one line of facts and exits 0; the test judges them.

  bodies PORT N SIZE SECS   opens the connection's and every stream's
                      flow-control window to the maximum, asks N streams
                      for SIZE-byte answers, then holds the connection
                      SECS seconds without reading: "asked=BYTES"
  ping-flood PORT N   asks one 50 MB answer and lets it fill both socket
                      buffers (2 s), then sends N PINGs without reading
                      their ACKs: "sent=S reset=R" (R 1: the proxy reset
                      the connection before all were sent)

The receive buffer is made small (4 KiB) so that the proxy's writes block
at once, as they would for a client stuck behind a slow network or a
stopped process.
"""
import socket
import struct
import sys
import time

import h2.config
import h2.connection
import h2.settings

MAXWIN = 2**31 - 1


def open_conn(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: MAXWIN})
    c.increment_flow_control_window(MAXWIN - 65535)
    return s, c


def ask(c, sid, size):
    c.send_headers(sid, [(":method", "GET"), (":path", "/?size=%d" % size),
                         (":scheme", "http"), (":authority", "web")], end_stream=True)


def bodies(port, n, size, secs):
    s, c = open_conn(int(port))
    for i in range(int(n)):
        ask(c, 1 + 2 * i, int(size))
    s.sendall(c.data_to_send())
    print("asked=%d" % (int(n) * int(size)), flush=True)
    time.sleep(float(secs))
    s.close()


def ping_flood(port, n):
    s, c = open_conn(int(port))
    ask(c, 1, 50_000_000)
    s.sendall(c.data_to_send())
    time.sleep(2)
    ping = struct.pack(">I", 8)[1:] + bytes([6, 0]) + struct.pack(">I", 0) + b"zerohop!"
    s.settimeout(5)
    sent, reset = 0, 0
    try:
        for _ in range(int(n)):
            s.sendall(ping)
            sent += 1
    except (ConnectionResetError, BrokenPipeError):
        reset = 1
    except socket.timeout:
        pass
    print("sent=%d reset=%d" % (sent, reset), flush=True)
    s.close()


def main(a):
    modes = {"bodies": bodies, "ping-flood": ping_flood}
    if not a or a[0] not in modes:
        sys.exit(__doc__)
    modes[a[0]](*a[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
