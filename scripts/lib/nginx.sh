# nginx.sh — the one nginx configuration every proxy benchmark compares
# against (scripts/bench-proxy.sh on loopback, scripts/bench-proxy-lab.sh in
# the lab): nginx as a reverse proxy, one worker, no master, HTTP/1.1
# keep-alive both ways with a pool of idle upstream connections, no access
# log.
#	nginx_cfg DIR BIND SERVER [SOURCE]	config on stdout: pid and error
#						log under DIR, listen on BIND
#						(ADDR:PORT), one upstream
#						SERVER (ADDR:PORT), upstream
#						connections from SOURCE (an
#						address) when given
nginx_cfg() {
	local dir=$1 bind=$2 server=$3 src=${4:-}
	cat <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log;
events { worker_connections 20000; }
http {
	access_log off;
	keepalive_requests 1000000;
	upstream be { server $server; keepalive 128; keepalive_requests 1000000; }
	server {
		listen $bind;
		location / { proxy_pass http://be; proxy_http_version 1.1;
			     proxy_set_header Connection "";${src:+ proxy_bind $src;} }
	}
}
CONF
}

# An HTTP/2 origin (no proxy): nginx answering every request with 200 and
# 1 KiB over cleartext HTTP/2 with prior knowledge, one worker — the h2c
# backend of scripts/bench-proxy-h2.sh (BACKEND=h2) and of
# tests/e2e/86-proxy-h2-streams.t.
#	nginx_h2c_origin_cfg DIR BIND		config on stdout, logs under DIR
nginx_h2c_origin_cfg() {
	local dir=$1 bind=$2
	cat <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 20000; }
http {
	access_log off;
	keepalive_requests 1000000;
	http2_max_requests 1000000;
	http2_max_concurrent_streams 1000;
	server { listen $bind http2;
		 location / { return 200 "$(head -c 1024 /dev/zero | tr '\0' x)"; } }
}
CONF
}
