#!/usr/bin/env bash
# 36-client-matrix.t — real clients through Services, by name (the cluster
# DNS), in the lab (issue 14): every client makes requests to an L4 and an
# L7 Service whose backend is on the client's node (near) and on the other
# node (far); the answer must come from the right backend, and where the
# client shows the peer (getpeername), it must be the Service address —
# ClusterIP:80, or [::ffff:ClusterIP]:80 on a dual-stack (AF_INET6) socket.
# Clients: busybox nc (HTTP/1.0, shuts down writing before it reads),
# curl and wget (-4 by name; AF_INET6 through a [::ffff:VIP] URL:
# an IPv4 cluster has no AAAA record, so -6 by name cannot resolve, and
# wget -6 makes its socket IPV6_V6ONLY, which excludes v4-mapped), Python
# socket (AF_INET, AF_INET6 + AI_V4MAPPED) and urllib, the JVM
# (java.net.http.HttpClient, default settings: dual-stack sockets), Node.js
# http and fetch, Go net/http (when golang-go is installed), nginx and
# HAProxy as reverse proxies whose upstream is a Service name, gRPC
# (python3-grpcio, default channel settings: dual-stack sockets; separate
# channels spread over three backends, one backend per channel), and UDP
# through getaddrinfo + sendto/recvfrom on both socket families.
# docs/clients.md is the table this test proves.
# MATRIX_DUAL=1 (tests/e2e/89-client-matrix-dual.t): the same on a
# dual-stack lab (docs/ipv6.md) with dual-stack Services,
# plus each client over IPv6: by name through AAAA where the client can
# ask for IPv6 (curl -6, wget -6, Python AF_INET6), else by an [IPv6
# ClusterIP] URL; the peer shown must then be [IPv6 ClusterIP]:80.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
DUAL=${MATRIX_DUAL:-}
if [ -n "$DUAL" ]; then
	lab_test_setup t14m6 curl wget busybox
else
	lab_test_setup t14mx curl wget busybox
fi
CL=$(cd "$(dirname "$0")/../tools/clients" && pwd)
PY=/usr/bin/python3
HAVE_GRPC=$($PY -c 'import grpc' 2>/dev/null && echo 1)
HAVE_JAVA=$(command -v java)
HAVE_NODE=$(command -v node)
HAVE_NGINX=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null)
HAVE_HAPROXY=$(command -v haproxy || ls /usr/sbin/haproxy 2>/dev/null)
GOBIN=
if command -v go >/dev/null; then
	GOCACHE=$TMP/gocache GOPATH=$TMP/gopath go build -o "$TMP/httpget" "$CL/httpget.go" 2>"$TMP/go.log" &&
		GOBIN=$TMP/httpget
fi

srv_pod() {	# NAME NODE: the echo server, a UDP who, and a gRPC server when there is grpcio
	m_pod "$1" "$2" "app: $1, role: srv" \
		"$(m_ctr http "" "$ZH" echo --http "${DUAL:+[::]:}8080" --tcp 0 --udp 0)" \
		"$(m_ctr udp "" python3 "$PROBE" who-udp 5353 ${DUAL:+6})" \
		${HAVE_GRPC:+"$(m_ctr grpc "" "$PY" "$CL/pyclients.py" grpc-server 50051)"}
}

# nginx and HAProxy configurations: one frontend per Service name
reverse_proxy_configs() {
	mkdir -p "$TMP/ngx"
	cat >"$TMP/ngx/nginx.conf" <<NGX
user root;
worker_processes 1;
error_log stderr;
pid $TMP/ngx/nginx.pid;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $TMP/ngx/body;
	proxy_temp_path $TMP/ngx/proxy;
	server { listen 8181; location / { proxy_pass http://l4-near; } }
	server { listen 8182; location / { proxy_pass http://l4-far; } }
	server { listen 8183; location / { proxy_pass http://l7-near; } }
	server { listen 8184; location / { proxy_pass http://l7-far; } }
}
NGX
	{
		printf 'defaults\n\tmode http\n\ttimeout connect 5s\n\ttimeout client 10s\n\ttimeout server 10s\n'
		i=1
		for s in l4-near l4-far l7-near l7-far; do
			printf 'frontend f%d\n\tbind :828%d\n\tdefault_backend b%d\nbackend b%d\n\tserver s %s:80\n' $i $i $i $i $s
			i=$((i + 1))
		done
	} >"$TMP/haproxy.cfg"
}

# the backends, the clients and the Services
app_manifests() {
	[ -n "$DUAL" ] && m_cluster t14m6 "node-a node-b" dual
	srv_pod srv-a node-a
	srv_pod srv-a2 node-a
	srv_pod srv-b node-b
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
	[ -n "$HAVE_NGINX" ] && m_pod nginx node-a "" \
		"$(m_ctr n "" "$HAVE_NGINX" -p "$TMP/ngx" -c "$TMP/ngx/nginx.conf" -g "daemon off;")"
	[ -n "$HAVE_HAPROXY" ] && m_pod haproxy node-a "" "$(m_ctr h "" "$HAVE_HAPROXY" -db -f "$TMP/haproxy.cfg")"
	L7='zerohop.io/l7: "true"'
	local M_SPEC=${DUAL:+"ipFamilyPolicy: PreferDualStack"}
	m_svc l4-near "app: srv-a" 80:8080
	m_svc l4-far "app: srv-b" 80:8080
	m_svc l7-near "app: srv-a" 80:8080 "" "$L7"
	m_svc l7-far "app: srv-b" 80:8080 "" "$L7"
	m_svc grpc "role: srv" 50051:50051
	m_svc udp-near "app: srv-a" 53:5353/UDP
	m_svc udp-far "app: srv-b" 53:5353/UDP
}

reverse_proxy_configs
app_manifests >"$TMP/app.yaml"

"$ZH" lab up --lab $LAB -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up: backends srv-a, srv-a2 (node-a), srv-b (node-b); clients on node-a" ||
	{ sed 's/^/#   /' "$TMP/up.log"; done_testing; }

x() { timeout 60 "$ZH" lab exec --lab $LAB client -- "$@"; }
vip() { "$ZH" get --lab $LAB services -o json | jq -r ".[] | select(.name==\"$1\") | .clusterIPs[${2:-0}]"; }
podip() { "$ZH" get --lab $LAB pods -o json | jq -r ".[] | select(.name==\"$1\") | .ip"; }
declare -A V V6
for s in l4-near l4-far l7-near l7-far grpc udp-near udp-far; do
	V[$s]=$(vip $s)
	[ -n "$DUAL" ] && V6[$s]=$(vip $s 1)
done
NAMES=(l4-near l4-far l7-near l7-far)
WANT=(srv-a srv-b srv-a srv-b)
URLS=(); URLS6=(); URLSN=()
for s in "${NAMES[@]}"; do
	URLS+=("http://$s/"); URLS6+=("http://[::ffff:${V[$s]}]/")
	[ -n "$DUAL" ] && URLSN+=("http://[${V6[$s]}]/")
done
# the client resolves and reaches an L4 and an L7 Service (agents and proxy synced)
far_and_l7_up() { x curl -s -m 2 -o /dev/null "http://l4-far/" && x curl -s -m 2 -o /dev/null "http://l7-near/"; }
wait_until 20 far_and_l7_up

TABLE=$TMP/table.md
# a client that resolves by name and takes what getaddrinfo gives first:
# IPv4 on an IPv4 lab; either family on the dual-stack one (curl and urllib
# got the AAAA first there in our runs)
BYNAME=4
[ -n "$DUAL" ] && BYNAME=a
ROW=()
# check CLIENT PEERFMT: stdin = one line per NAMES entry, "<status> <host> [peer]";
# PEERFMT 4: peer must be VIP:80; 6: [::ffff:VIP]:80; a: either; n: the
# IPv6 ClusterIP [VIP6]:80; -: not shown. On the dual-stack lab an AF_INET6
# socket by name may get the AAAA: 6 and a also take [VIP6]:80 there.
check() {
	local client=$1 pf=$2 i=0 line st h p want cells=() good
	while read -r st h p; do
		[ $i -ge ${#NAMES[@]} ] && break
		good=0
		[ "$st" = 200 ] && [ "$h" = "${WANT[$i]}" ] && good=1
		case $pf in
		4) want="${V[${NAMES[$i]}]}:80" ;;
		6) want="[::ffff:${V[${NAMES[$i]}]}]:80" ;;
		a) want="${V[${NAMES[$i]}]}:80"	# either family
		   [ "$p" = "[::ffff:$want]" ] || [ "$p" = "[::ffff:${want%:80}]:80" ] && want=$p ;;
		n) want="[${V6[${NAMES[$i]}]}]:80" ;;
		*) want= ;;
		esac
		[ -n "$DUAL" ] && [ "$pf" != 4 ] && [ "$pf" != - ] && [ "$p" = "[${V6[${NAMES[$i]}]}]:80" ] && want=$p
		[ -n "$want" ] && [ "$p" != "$want" ] && good=0
		is "$good" 1 "$client -> ${NAMES[$i]}: 200 from ${WANT[$i]}${want:+, peer $want} (got '$st $h $p')"
		if [ $good = 1 ]; then cells+=("ok${want:+ (peer $want)}"); else cells+=("FAIL: $st $h $p"); fi
		i=$((i + 1))
	done
	while [ $i -lt ${#NAMES[@]} ]; do
		is missing 1 "$client -> ${NAMES[$i]}: no answer"
		cells+=("FAIL: no answer"); i=$((i + 1))
	done
	printf '| %s | %s | %s | %s | %s |\n' "$client" "${cells[@]}" >>"$TABLE"
}
# pass each URL through a curl/wget command line, one output line each
curl_each() {	# FLAGS... -- URL...
	local flags=() u
	while [ "$1" != -- ]; do flags+=("$1"); shift; done
	shift
	for u in "$@"; do
		x sh -c 'b=$(curl -s -m 5 "$@" -w "\n%{http_code} %{remote_ip} %{remote_port}"); set -- $(echo "$b" | tail -n 1)
			h=$(echo "$b" | sed -n "s/.*\"hostname\":\"\([^\"]*\)\".*/\1/p" | head -n 1)
			case $2 in *:*) echo "$1 $h [$2]:$3" ;; *) echo "$1 $h $2:$3" ;; esac' sh "${flags[@]}" "$u"
	done
}
wget_each() {	# FLAGS... -- URL...
	local flags=() u
	while [ "$1" != -- ]; do flags+=("$1"); shift; done
	shift
	for u in "$@"; do
		x sh -c 'b=$(wget -q -T 5 -t 1 -O - "$@") && echo "200 $(echo "$b" | sed -n "s/.*\"hostname\":\"\([^\"]*\)\".*/\1/p")" || echo "ERR $?"' sh "${flags[@]}" "$u"
	done
}
# busybox nc: an HTTP/1.0 request from stdin, then shutdown(SHUT_WR) at
# its EOF, then the answer (a client that shuts down before it reads)
nc_each() {	# URL...
	local u h
	for u in "$@"; do
		h=${u#http://}; h=${h%%/*}
		x sh -c 'b=$(printf "GET / HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" | busybox nc -w 5 "$0" 80)
			echo "$(echo "$b" | head -n 1 | cut -d " " -f 2) $(echo "$b" | sed -n "s/.*\"hostname\":\"\([^\"]*\)\".*/\1/p" | head -n 1)"' "$h"
	done
}

proxy_each() {	# POD BASEPORT
	local ip i
	ip=$(podip "$1")
	wait_until 20 x curl -s -m 1 -o /dev/null "http://$ip:${2}1/"
	for i in 1 2 3 4; do
		x sh -c 'b=$(curl -s -m 5 -w "\n%{http_code}" "$1"); echo "$(echo "$b" | tail -n 1) $(echo "$b" | sed -n "s/.*\"hostname\":\"\([^\"]*\)\".*/\1/p" | head -n 1)"' sh "http://$ip:$2$i/"
	done
}
v6n() { "$ZH" get --lab $LAB stats -o json | jq '."node-a".v6_socket_v4mapped_service // 0'; }

printf '| client | L4 same node | L4 other node | L7 same node | L7 other node |\n|---|---|---|---|---|\n' >"$TABLE"

# ---- curl by name and on an AF_INET6 socket
case_curl() {
	check "curl (by name)" $BYNAME < <(curl_each -- "${URLS[@]}")
	check "curl -4 (by name)" 4 < <(curl_each -4 -- "${URLS[@]}")
	check "curl -6 [::ffff:VIP] (AF_INET6)" 6 < <(curl_each -6 -g -- "${URLS6[@]}")
	[ -n "$DUAL" ] || return 0
	check "curl -6 (by name: AAAA, IPv6 ClusterIP)" n < <(curl_each -6 -- "${URLS[@]}")
	check "curl [IPv6 ClusterIP]" n < <(curl_each -g -- "${URLSN[@]}")
}

# ---- busybox nc (shuts down writing before it reads: the short-circuit's
# half-close case, bpf/accel.bpf.c invariant 11)
case_nc() {
	check "busybox nc (by name, HTTP/1.0)" - < <(nc_each "${URLS[@]}")
}

# ---- wget
case_wget() {
	check "wget -4 (by name)" - < <(wget_each -4 -- "${URLS[@]}")
	# (not -6: wget -6 sets IPV6_V6ONLY, and a v6-only socket cannot reach a
	# v4-mapped address at all: ENETUNREACH on any host, zerohop or not)
	check "wget [::ffff:VIP] (AF_INET6)" - < <(wget_each -- "${URLS6[@]}")
	[ -n "$DUAL" ] || return 0
	check "wget -6 (by name: AAAA; an IPV6_V6ONLY socket)" - < <(wget_each -6 -- "${URLS[@]}")
}

# ---- Python socket and urllib
case_python() {
	check "Python socket AF_INET (getaddrinfo)" 4 < <(x $PY "$CL/pyclients.py" sock 4 "${URLS[@]}")
	check "Python socket AF_INET6 (getaddrinfo AI_V4MAPPED)" 6 < <(x $PY "$CL/pyclients.py" sock 6 "${URLS[@]}")
	check "Python urllib (by name)" $BYNAME < <(x $PY "$CL/pyclients.py" urllib "${URLS[@]}")
	check "Python urllib [::ffff:VIP] (AF_INET6)" 6 < <(x $PY "$CL/pyclients.py" urllib "${URLS6[@]}")
	[ -n "$DUAL" ] || return 0
	check "Python socket AF_INET6 [IPv6 ClusterIP]" n < <(x $PY "$CL/pyclients.py" sock 6 "${URLSN[@]}")
	check "Python urllib [IPv6 ClusterIP]" n < <(x $PY "$CL/pyclients.py" urllib "${URLSN[@]}")
}

# ---- the JVM's HttpClient (when java is installed)
case_jvm() {
	[ -n "$HAVE_JAVA" ] || return
	c0=$(v6n)
	check "JVM java.net.http.HttpClient (default: dual-stack sockets)" - < <(x java -Xshare:auto -XX:TieredStopAtLevel=1 "$CL/HttpGet.java" "${URLS[@]}" 2>"$TMP/java.err")
	c1=$(v6n)
	ok "$([ $((c1 - c0)) -ge 4 ]; echo $?)" "  the JVM connected from AF_INET6 sockets (v6_socket_v4mapped_service +$((c1 - c0)))"
	[ -n "$DUAL" ] || return 0
	check "JVM HttpClient [IPv6 ClusterIP]" - < <(x java -Xshare:auto -XX:TieredStopAtLevel=1 "$CL/HttpGet.java" "${URLSN[@]}" 2>>"$TMP/java.err")
}

# ---- Node.js http and fetch (when node is installed)
case_node() {
	[ -n "$HAVE_NODE" ] || return
	check "Node.js http (socket.remoteAddress)" a < <(x node "$CL/http_get.js" http "${URLS[@]}")
	check "Node.js fetch" - < <(x node "$CL/http_get.js" fetch "${URLS[@]}")
	[ -n "$DUAL" ] || return 0
	check "Node.js http [IPv6 ClusterIP]" n < <(x node "$CL/http_get.js" http "${URLSN[@]}")
	check "Node.js fetch [IPv6 ClusterIP]" - < <(x node "$CL/http_get.js" fetch "${URLSN[@]}")
}

# ---- Go net/http (when go is installed)
case_go() {
	if [ -n "$GOBIN" ]; then
		check "Go net/http (RemoteAddr)" a < <(x "$GOBIN" "${URLS[@]}")
		[ -z "$DUAL" ] || check "Go net/http [IPv6 ClusterIP]" n < <(x "$GOBIN" "${URLSN[@]}")
	else
		diag "Go: not run (no go toolchain: apt-get install golang-go)"
	fi
}

# ---- nginx and HAProxy as reverse proxies to a Service name
case_reverse_proxies() {
	[ -n "$HAVE_NGINX" ] && check "nginx proxy_pass http://SERVICE (resolved at start)" - < <(proxy_each nginx 818)
	[ -n "$HAVE_HAPROXY" ] && check "HAProxy server SERVICE:80 (libc resolver)" - < <(proxy_each haproxy 828)
}

# ---- gRPC: default channel settings, by name; one backend per channel -----------
case_grpc() {
	[ -n "$HAVE_GRPC" ] || return
	c0=$(v6n)
	r=$(x $PY "$CL/pyclients.py" grpc-client grpc:50051 12 2>"$TMP/grpc.err")
	c1=$(v6n)
	diag "gRPC: $r"
	read -r nok per <<<"$r"
	is "$nok" 12 "gRPC (python3-grpcio, dual-stack sockets) -> grpc:50051 by name: 12 channels, every call answered"
	ok "$(echo "$per" | jq -e 'all(.[]; test("^srv-[ab]2?$"))' >/dev/null; echo $?)" \
		"  each channel stayed on one backend (L4: one backend per connection)"
	nb=$(echo "$per" | jq 'unique | length')
	ok "$([ "${nb:-0}" -ge 2 ]; echo $?)" "  channels spread over the backends ($nb of 3 seen over 12 channels)"
	ok "$([ $((c1 - c0)) -ge 12 ]; echo $?)" "  gRPC connected from AF_INET6 sockets (v6_socket_v4mapped_service +$((c1 - c0)))"
	printf '| gRPC python3-grpcio (default, dual-stack), L4 `grpc:50051` | %s | 12 channels: %s of 3 backends, one per channel | not in this matrix: per-call balancing through an L7 Service is tests/e2e/79-proxy-grpc-lab.t | |\n' \
		"$([ "$nok" = 12 ] && echo ok || echo FAIL)" "$nb" >>"$TABLE"
	[ -n "$DUAL" ] || return 0
	r=$(x $PY "$CL/pyclients.py" grpc-client "[${V6[grpc]}]:50051" 12 2>>"$TMP/grpc.err")
	read -r nok per <<<"$r"
	nb=$(echo "$per" | jq 'unique | length')
	is "$nok" 12 "gRPC -> [IPv6 ClusterIP]:50051: 12 channels, every call answered"
	ok "$([ "${nb:-0}" -ge 2 ] && echo "$per" | jq -e 'all(.[]; test("^srv-[ab]2?$"))' >/dev/null; echo $?)" \
		"  one backend per channel, spread over the backends ($nb of 3)"
	printf '| gRPC python3-grpcio, L4 `[IPv6 ClusterIP]:50051` | %s | 12 channels: %s of 3 backends, one per channel | | |\n' \
		"$([ "$nok" = 12 ] && echo ok || echo FAIL)" "$nb" >>"$TABLE"
}

# ---- UDP: getaddrinfo + sendto/recvfrom, both families ---------------------------
case_udp() {
	for fam in 4 6; do
		cells=()
		for s in udp-near udp-far; do
			r=$(x $PY "$CL/pyclients.py" udp $fam $s 53 5)
			want=srv-a; [ $s = udp-far ] && want=srv-b
			src="${V[$s]}:53"; [ $fam = 6 ] && src="[::ffff:${V[$s]}]:53"
			# dual-stack: getaddrinfo(AF_INET6) finds the AAAA first
			[ $fam = 6 ] && [ -n "$DUAL" ] && src="[${V6[$s]}]:53"
			is "$r" "5 $want $src" "UDP AF_INET$([ $fam = 6 ] && echo 6) -> $s:53: 5 answers from $want, reply source $src"
			[ "$r" = "5 $want $src" ] && cells+=("ok (source $src)") || cells+=("FAIL: $r")
		done
		printf '| UDP getaddrinfo + sendto/recvfrom AF_INET%s | %s | %s | (UDP: L4 only) | |\n' \
			"$([ $fam = 6 ] && { [ -n "$DUAL" ] && echo "6 (AAAA: IPv6 ClusterIP)" || echo "6 (AI_V4MAPPED)"; })" \
			"${cells[@]}" >>"$TABLE"
	done
}

run_cases case_curl case_nc case_wget case_python case_jvm case_node case_go \
	case_reverse_proxies case_grpc case_udp
sed 's/^/# /' "$TABLE"
[ -n "${MATRIX_OUT:-}" ] && cp "$TABLE" "$MATRIX_OUT"
done_testing
