#!/usr/bin/env bash
# 102-proxy-h2-trailers.t — an HTTP/2 backend's trailers reach HTTP/2
# clients whole or the stream is reset, never cut silently (issue 18;
# docs/proxy.md "HTTP/2 and gRPC"; h2conn.c invariant 8), with Debian's
# python3-h2 (tests/tools/clients/h2_trailers.py) as backend and client of
# `zerohop proxy` on loopback. On one client connection:
#  - 3, 33 (the old cut was 32) and 135 trailer fields (the most a
#    forwarded head carries too): all of them arrive, grpc-status first;
#  - 136 and 400: the stream is reset (INTERNAL_ERROR), no trailers and no
#    END_STREAM, counted in
#    zerohop_proxy_h2_too_many_fields_total{part="trailers"};
#  - the connection's next stream is served.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/wait.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup px102 17000 2000	# below the ephemeral ports (32768-)
GPY=/usr/bin/python3
"$GPY" -c 'import h2' 2>/dev/null || skip_all "python3-h2 missing (make deps)"
TR="$(dirname "$0")/../tools/clients/h2_trailers.py"

"$GPY" "$TR" backend $((B + 1)) 120 &	# (ended by the harness)
PIDS+=($!)
{
	cat <<YAML
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{name: http2, port: 80, targetPort: $((B + 1))}]}
YAML
	lb_pod web-1 web
} >"$TMP/m.yaml"
lb_apply
lb_proxy web $P $S
wait_until 10 eval '"$GPY" "$TR" get $P /trailers/0 | grep -q "status=200"'
ok $? "proxy answers over HTTP/2 from the HTTP/2 backend" || { cat "$TMP/proxy.err"; done_testing; }
metric() { curl -s "http://127.0.0.1:$S/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

"$GPY" "$TR" get $P /trailers/3 /trailers/33 /trailers/135 /trailers/136 /trailers/400 /trailers/2 \
	>"$TMP/get.out" 2>&1
diag "$(tr '\n' ';' <"$TMP/get.out")"
line() { awk -v p="$1" '$1 == p { $1 = ""; sub(/^ /, ""); print }' "$TMP/get.out"; }
is "$(line /trailers/3)" "status=200 body=2 trailers=3 grpc=0 end=end" "3 trailer fields forwarded"
is "$(line /trailers/33)" "status=200 body=2 trailers=33 grpc=0 end=end" \
	"33 trailer fields: all forwarded (32 were, the rest dropped silently before)"
is "$(line /trailers/135)" "status=200 body=2 trailers=135 grpc=0 end=end" \
	"135 trailer fields (a forwarded head's limit too): all forwarded"
is "$(line /trailers/136 | sed 's/body=[0-9]* //')" "status=200 trailers=0 grpc=- end=reset:2" \
	"136 trailer fields: the stream is reset (INTERNAL_ERROR), none forwarded"
is "$(line /trailers/400 | sed 's/body=[0-9]* //')" "status=200 trailers=0 grpc=- end=reset:2" \
	"400 trailer fields: reset too"
is "$(metric 'zerohop_proxy_h2_too_many_fields_total{part="trailers"}')" 2 \
	"... both counted as too_many_fields{part=trailers}"
is "$(line /trailers/2)" "status=200 body=2 trailers=2 grpc=0 end=end" \
	"the connection's next stream is served"
kill -0 $PX 2>/dev/null
ok $? "the proxy is still running"
done_testing
