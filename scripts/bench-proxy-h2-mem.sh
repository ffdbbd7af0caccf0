#!/usr/bin/env bash
# bench-proxy-h2-mem.sh — RSS per idle client connection of the node L7
# proxy, HTTP/1.1 vs HTTP/2 (each connection made one request, then stays
# open): the proxy in explicit mode on loopback in front of `zerohop echo`,
# N connections from one python3-h2 / http.client process; prints the RSS
# growth per connection for each protocol, twice, interleaved, 3 s after
# the last connection (the proxy hands an idle HTTP/2 connection's spare
# pages back after one idle sweep period, 1 s: src/proxy/h2mem.c).
#
#   scripts/bench-proxy-h2-mem.sh [N=2000]
# Every process is ours and stopped by its PID.
set -euo pipefail
N=${1:-2000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/loopback.sh"
ZH=${ZH:-$ROOT/build/zerohop}
bench_setup px-h2-mem 26000
ulimit -n $((N * 2 + 100))
"$ZH" echo --threads 1 --http "127.0.0.1:$((B + 1))" --tcp 127.0.0.1:0 --udp 127.0.0.1:0 >/dev/null 2>&1 &
PIDS+=($!)
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80, targetPort: %s}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-1, labels: {app: web}}\nspec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {podIP: 127.0.0.1, phase: Running}\n' $((B + 1)) >"$TMP/m.yaml"
mkdir "$TMP/state"
"$ZH" apply --state "$TMP/state" -f "$TMP/m.yaml" >/dev/null
cat >"$TMP/mem.py" <<'PY'
import http.client, socket, sys, time
import h2.config, h2.connection, h2.events
port, n, mode, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def rss():
    return int([l for l in open("/proc/%d/status" % pid) if l.startswith("VmRSS")][0].split()[1])
keep, r0 = [], rss()
for i in range(n):
    if mode == "h2":
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        c.send_headers(1, [(":method", "GET"), (":path", "/"), (":scheme", "http"),
                           (":authority", "a")], end_stream=True)
        s.sendall(c.data_to_send())
        done = False
        while not done:
            for e in c.receive_data(s.recv(65536)):
                done = done or isinstance(e, h2.events.StreamEnded)
            s.sendall(c.data_to_send())
        keep.append(s)
    else:
        h = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        h.request("GET", "/")
        h.getresponse().read()
        keep.append(h)
time.sleep(3)  # (an idle HTTP/2 connection is trimmed after a sweep period idle: h2mem.c)
print("%s: %d idle connections: RSS %d -> %d KiB, %.0f bytes each" %
      (mode, n, r0, rss(), (rss() - r0) * 1024.0 / n))
PY
for mode in h1 h2 h1 h2; do
	"$ZH" proxy --listen "127.0.0.1:$B" --service default/web --state "$TMP/state" 2>/dev/null &
	P=$!
	sleep 0.5
	timeout 120 /usr/bin/python3 "$TMP/mem.py" "$B" "$N" $mode $P
	kill $P
	wait $P 2>/dev/null || true
done
