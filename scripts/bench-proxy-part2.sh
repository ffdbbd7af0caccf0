#!/usr/bin/env bash
# proxy-part2.sh — the two part-2 proxy benchmarks of docs/benchmarks/log/proxy.md
# (loopback ports 19500-19503 and 19600-19609 must be free).
#   proxy-part2.sh idle OLD_ZEROHOP NEW_ZEROHOP [PAIRS] [DUR]
#   proxy-part2.sh p2c ZEROHOP [PAIRS]
set -eu
bench_idle() (
OLD=$1 NEW=$2 PAIRS=${3:-5} DUR=${4:-3s}
T=$(mktemp -d); B=19500; EP=$((B+1))
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf $T' EXIT
"$NEW" echo --threads 1 --http 127.0.0.1:$EP --tcp 127.0.0.1:0 --udp 127.0.0.1:0 >/dev/null 2>&1 & PIDS+=($!)
cat >$T/m.yaml <<Y
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: $EP}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec: {nodeName: node-a, containers: [{name: c}]}
status: {podIP: 127.0.0.1, phase: Running}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{group: "", kind: Service, name: web}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: web, port: 80}]
Y
"$OLD" proxy --listen 127.0.0.1:$B --service default/web -f $T/m.yaml 2>/dev/null & PIDS+=($!)
"$NEW" proxy --listen 127.0.0.1:$((B+2)) --service default/web -f $T/m.yaml 2>/dev/null & PIDS+=($!)
sleep 0.5
rate() { wrk -t1 -c64 -d$DUR "http://127.0.0.1:$1/?size=1024" | awk '/Requests\/sec/ { print $2 }'; }
for i in $(seq $PAIRS); do
	o=$(rate $B); n=$(rate $((B+2)))
	echo "$o $n $(awk -v o=$o -v n=$n 'BEGIN { printf "%.3f", n / o }')"
done
)
bench_p2c() (
ZH=$1 PAIRS=${2:-5}
T=$(mktemp -d); B=19600; PY=$(command -v python3)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf $T' EXIT
for k in 1 2; do "$ZH" echo --http 127.0.0.1:$((B+k)) --name f$k >/dev/null 2>&1 & PIDS+=($!); done
cat >$T/slow.py <<'PY'
import socket, sys, threading, time
def serve(c):
    d = b""
    while True:
        while b"\r\n\r\n" not in d:
            x = c.recv(65536)
            if not x: return c.close()
            d += x
        d = d.split(b"\r\n\r\n", 1)[1]
        time.sleep(0.010)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nslow\n")
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(256)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
$PY $T/slow.py $((B+3)) & PIDS+=($!)
{
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80, targetPort: http}]}\n'
for k in 1 2 3; do printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: w%s, labels: {app: web}}\nspec: {nodeName: n, containers: [{name: c, ports: [{name: http, containerPort: %s}]}]}\nstatus: {podIP: 127.0.0.1, phase: Running}\n' $k $((B+k)); done
for r in "p2c /p2c {}" "rr /rr {zerohop.io/lb-policy: round-robin}"; do set -- $r
printf -- '---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s, annotations: %s %s}\nspec:\n  parentRefs: [{group: "", kind: Service, name: web, port: 80}]\n  rules:\n  - matches: [{path: {type: PathPrefix, value: %s}}]\n    backendRefs: [{name: web, port: 80}]\n' $1 $3 "${4:-}" $2; done
} >$T/m.yaml
"$ZH" proxy --listen 127.0.0.1:$B --stats-addr 127.0.0.1:$((B+9)) --service default/web -f $T/m.yaml 2>$T/px.err & PIDS+=($!)
sleep 0.7
p99() { "$ZH" bench -c 8 -qps 150 -t 3s --quiet --json $T/p.json "http://127.0.0.1:$B$1" >/dev/null
	$PY -c 'import json,sys; print([x["Value"] for x in json.load(open(sys.argv[1]))["DurationHistogram"]["Percentiles"] if x["Percentile"]==99][0])' $T/p.json; }
for i in $(seq $PAIRS); do
	r=$(p99 "/rr/x?delay=1ms"); p=$(p99 "/p2c/x?delay=1ms")
	echo "$r $p $(awk -v r=$r -v p=$p 'BEGIN { printf "%.2f", r / p }')"
done
)
mode=$1; shift
case $mode in
idle) bench_idle "$@" ;;
p2c) bench_p2c "$@" ;;
*) echo "usage: $0 idle OLD NEW [PAIRS] [DUR] | p2c ZEROHOP [PAIRS]" >&2; exit 2 ;;
esac
