# haproxy.sh — the one HAProxy configuration every proxy benchmark compares
# against (scripts/bench-proxy.sh on loopback, scripts/bench-proxy-lab.sh in
# the lab), so the contender is set up identically wherever it appears:
# HAProxy 2.6, one thread, HTTP keep-alive both ways, idle upstream
# connections shared between clients (http-reuse always).
#	haproxy_cfg BIND SERVER...	config on stdout: listen on BIND
#					(ADDR:PORT), one backend server whose
#					words are SERVER... (e.g. "ADDR:PORT
#					source ADDR")
# HAPROXY_BUSY=1 adds `busy-polling` (HAProxy's own answer to a VM's
# halted-vCPU wake-up latency: never sleep in the poller), to compare with
# `zerohop proxy --busy-poll`.
haproxy_cfg() {
	local bind=$1
	shift
	cat <<CFG
global
	nbthread 1
	maxconn 9000${HAPROXY_BUSY:+
	busy-polling}
defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	http-reuse always
frontend fe
	bind $bind
	default_backend be
backend be
	server s1 $*
CFG
}
