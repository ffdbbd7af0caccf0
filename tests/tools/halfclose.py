#!/usr/bin/env python3
# halfclose.py IP PORT SIZE RUNS [PAUSE_MS [http]] — RUNS connections that
# half-close (tests/e2e/45-accel-halfclose.t, 46-accel-ipv6.t): each writes
# SIZE patterned bytes, shuts down writing, reads until EOF; prints how many
# answers came back short. PAUSE_MS: a pause before and after the shutdown
# (the echo lands in the queue first, then the server's FIN comes before the
# read). "http": an HTTP/1.0 request to a server that answers and closes
# first (the client shuts down before it reads). IPv4 or IPv6 addresses.
import socket, sys, time
ip, port, size, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
pause = float(sys.argv[5]) / 1000 if len(sys.argv) > 5 else 0
# "http": an HTTP/1.0 request to a server that answers and closes first
http = len(sys.argv) > 6 and sys.argv[6] == "http"
data = b"GET / HTTP/1.0\r\nHost: srv\r\n\r\n" if http else bytes(range(256)) * (size // 256)
short, worst = 0, 0.0
for i in range(runs):
    t0 = time.monotonic()
    s = socket.create_connection((ip, port), timeout=10)
    s.sendall(data)
    if pause:   # the echo lands in our queue before we shut down ...
        time.sleep(pause)
    s.shutdown(socket.SHUT_WR)
    if pause:   # ... and the server's FIN comes before we read it
        time.sleep(pause)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    worst = max(worst, time.monotonic() - t0 - 2 * pause)
    if (not (got.startswith(b"HTTP/1.1 200") and got.rstrip().endswith(b"}"))) if http else got != data:
        short += 1
print(short)
if pause and not http:
    print("%.0f ms" % (worst * 1000), file=sys.stderr)
