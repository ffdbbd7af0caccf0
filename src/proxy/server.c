/* server.c — the node L7 proxy's server (px_): px_serve (options,
 * listeners, the loop), route reloads, the capture re-registration check,
 * the idle sweep timer, signals and the graceful drain.
 *
 * Contract: include/zerohop/proxy.h. The design note for every layer
 * (objects and lifetimes, the stream state machine, numbered invariants
 * 1-22 that the code cites as "invariant N") is docs/proxy.md, section
 * "Design note". Layers, top to bottom, each calling only down:
 *   server.c    this file: the server
 *   conn.c      listener and client connections
 *   h2conn.c    HTTP/2 client connections (each stream an HTTP/1.1 view)
 *   h1req.c     HTTP/1.1 requests over a connection's buffers
 *   stream.c    one stream per request: route, forward, retries, timers
 *   upstream.c  upstream connections and per-endpoint pools; reports to
 *               the stream through struct px_up_ops (px_int.h)
 *   h2up.c      HTTP/2 upstreams (one multiplexed connection per endpoint)
 *   balance.c, netpol.c, mirror.c, stats.c, batch.c (socket I/O), router.c
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/hbone.h"
#include "zerohop/hbone_out.h"
#include "zerohop/hist.h"
#include "zerohop/log.h"
#include "zerohop/net.h"
#include "zerohop/policy.h"
#include "zerohop/proxy.h"
#include "zerohop/state.h"
#include "px_int.h"

/* ---- route updates ----------------------------------------------------------- */

static int px_load(struct px_server *s, const struct px_config *cfg, struct px_table **out,
		   struct pol_compiled **pol)
{
	struct md_state *st = NULL;
	struct md_err e;
	char eb[1024];
	int i, rc;

	if (s->ss) {
		rc = ss_load(s->ss, &st, &e);
	} else {
		st = md_state_new();
		rc = 0;
		for (i = 0; i < cfg->n_files && !rc; i++)
			rc = md_state_add_file(st, cfg->files[i], &e);
		if (!rc)
			rc = md_state_finish(st, &e);
	}
	if (rc) {
		zh_err("proxy: routes: %s", md_err_str(&e, eb, sizeof(eb)));
		if (st)
			md_state_free(st);
		return rc;
	}
	/* NetworkPolicy from the same state, all or nothing with the routes
	 * (netpol.c invariant 1); compiled first: the table takes st */
	rc = px_netpol_compile(st, pol);
	if (rc) {
		md_state_free(st);
		return rc;
	}
	rc = px_table_build(st, out, eb, sizeof(eb));
	if (rc) {
		zh_err("proxy: routes: %s", eb);
		md_state_free(st);
		pol_compiled_free(*pol);
		*pol = NULL;
	}
	return rc;
}

static void px_reload_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;
	struct pol_compiled *pol;
	struct px_table *t;

	(void)loop;
	(void)id;
	s->reload_timer = 0;
	if (px_load(s, s->cfg, &t, &pol)) {
		s->reload_errors++;
		return;	/* keep serving the last good table and policy */
	}
	px_table_unref(s->tbl);
	s->tbl = t;
	px_netpol_swap(s, pol);
	s->reloads++;
	/* invariant 20: endpoints that left get no new request (the new table
	 * has none of them), their idle upstreams close now, their state goes */
	px_pool_prune(s);
	px_hosts_prune(s);
	zh_info("proxy: routes reloaded (table %llu)", (unsigned long long)px_table_generation(t));
}

static void px_watch_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_server *s = arg;

	(void)fd;
	(void)events;
	ss_watch_drain(s->ss);
	/* debounce: an apply writes several files */
	if (!s->reload_timer)
		s->reload_timer = ev_timer_add(loop, ev_now_ns() + PX_RELOAD_DEBOUNCE_NS,
					       px_reload_cb, s);
}

/* Every second in capture mode: were the shared capture maps re-created
 * (`agent --cleanup` and a new agent)? Then register on the new ones, else
 * L7 connects would be refused until a restart. */
static void px_cap_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;

	(void)id;
	s->cap_fd = px_capture_refresh(s->cfg->capture);
	s->cap6_fd = s->cfg->capture->orig6_fd;
	s->cap_timer = ev_timer_add(loop, ev_now_ns() + PX_CAP_CHECK_NS, px_cap_cb, s);
}

/* Periodic idle sweep (invariant 8): idle client connections, idle pooled
 * upstreams, ejections that ended. */
static void px_sweep_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;
	uint64_t now = ev_now_ns();

	(void)id;
	s->n_client_idle += px_conn_close_idle(s, s->client_idle_ns);
	px_h2_sweep_streams(s, now);
	px_pool_close_idle(s, now);
	for (int i = 0; s->n_ejected && i < s->n_hosts; i++)
		px_host_out(s, &s->hosts[i], now);
	s->sweep_timer = ev_timer_add(loop, now + s->sweep_ns, px_sweep_cb, s);
}

/* ---- graceful drain (invariants 17-19) ---------------------------------------- */

/* Close idle client connections (no stream, nothing to write) silent for
 * at least min_idle; with the drain over (no client left, or the
 * deadline), stop the loop. */
static bool px_drain_check(struct px_server *s, uint64_t min_idle)
{
	uint64_t now = ev_now_ns();

	s->n_drain_closed += px_conn_close_idle(s, min_idle);
	if (!s->active || now >= s->drain_deadline) {
		if (s->active)
			zh_warn("proxy: drain deadline reached with %llu client connection(s) open",
				(unsigned long long)s->active);
		else
			zh_info("proxy: drained");
		ev_stop(s->loop);
		return true;
	}
	return false;
}

static void px_drain_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;

	(void)id;
	s->drain_timer = 0;
	if (!px_drain_check(s, PX_DRAIN_IDLE_NS < s->client_idle_ns ? PX_DRAIN_IDLE_NS :
			       s->client_idle_ns))
		s->drain_timer = ev_timer_add(loop, ev_now_ns() + PX_DRAIN_TICK_NS, px_drain_cb, s);
}

/* Stop accepting on *lfd. Take what already completed the handshake first:
 * closing a listener resets the connections still in its accept queue. */
static void px_listener_close(struct px_server *s, int *lfd)
{
	if (*lfd < 0)
		return;
	for (int k = 0; k < 64; k++) {
		uint64_t before = s->accepted;

		px_accept_cb(s->loop, *lfd, EV_READ, s);
		if (s->accepted - before < PX_ACCEPT_BATCH)
			break;
	}
	ev_del(s->loop, *lfd);
	close(*lfd);
	*lfd = -1;
}

/* SIGTERM: stop accepting, let in-flight requests finish (their responses
 * say Connection: close), close idle client connections as they go quiet,
 * exit when none is left or at the deadline. */
static void px_drain_start(struct px_server *s)
{
	s->draining = true;
	s->drain_deadline = ev_now_ns() + s->drain_ns;
	px_listener_close(s, &s->lfd);
	px_listener_close(s, &s->lfd6);
	zh_info("proxy: draining: %llu client connection(s), deadline %llu ms",
		(unsigned long long)s->active, (unsigned long long)(s->drain_ns / PX_MS));
	px_conn_drain(s);	/* HTTP/2 clients: GOAWAY */
	px_drain_cb(s->loop, 0, s);
}

static void px_signal_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_server *s = arg;
	struct signalfd_siginfo si;

	(void)events;
	if (read(fd, &si, sizeof(si)) <= 0)
		return;
	if (si.ssi_signo == SIGTERM && !s->draining)
		px_drain_start(s);
	else
		ev_stop(loop);	/* SIGINT, or a second SIGTERM: now */
}

static int px_parse_service(struct px_server *s, const char *spec)
{
	const char *slash = strchr(spec, '/'), *name = slash ? slash + 1 : spec;
	const char *colon = strchr(name, ':');

	if (slash)
		snprintf(s->svc_ns, sizeof(s->svc_ns), "%.*s", (int)(slash - spec), spec);
	else
		snprintf(s->svc_ns, sizeof(s->svc_ns), "%s", MD_DEFAULT_NS);
	snprintf(s->svc_name, sizeof(s->svc_name), "%.*s",
		 (int)(colon ? (size_t)(colon - name) : strlen(name)), name);
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);

		if (*end || p <= 0 || p > 65535)
			return -EINVAL;
		s->svc_port = p;
	}
	return s->svc_name[0] ? 0 : -EINVAL;
}

int px_serve(const struct px_config *cfg)
{
	struct px_server s;
	struct net_addr a;
	sigset_t mask;
	int rc;

	memset(&s, 0, sizeof(s));
	s.lfd = s.sfd = s.stats_fd = s.watch_fd = s.cap_fd = s.lfd6 = s.cap6_fd = -1;
	s.cfg = cfg;
	s.up_ops = &px_stream_up_ops;
	h1_limits_default(&s.lim);
	if (cfg->max_line)
		s.lim.max_line = cfg->max_line;
	if (cfg->max_head)
		s.lim.max_head = cfg->max_head;
	if (cfg->max_headers)
		s.lim.max_headers = cfg->max_headers < PX_MAX_HDRS ? cfg->max_headers : PX_MAX_HDRS;
#define PX_OR(v, def) ((v) ? (v) : (def))
	s.eject_base_ns = PX_OR(cfg->outlier_base_ms, PX_DEF_OUTLIER_BASE_MS) * PX_MS;
	s.consec_max = PX_OR(cfg->outlier_consecutive, PX_DEF_OUTLIER_CONSEC);
	s.connect_ns = PX_OR(cfg->connect_timeout_ms, PX_DEF_CONNECT_MS) * PX_MS;
	s.client_idle_ns = PX_OR(cfg->client_idle_ms, PX_DEF_CLIENT_IDLE_MS) * PX_MS;
	s.up_idle_ns = PX_OR(cfg->upstream_idle_ms, PX_DEF_UPSTREAM_IDLE_MS) * PX_MS;
	s.stream_idle_ns = cfg->stream_idle_ms == PX_STREAM_IDLE_OFF ? 0 :
			   PX_OR(cfg->stream_idle_ms, PX_DEF_STREAM_IDLE_MS) * PX_MS;
	s.drain_ns = PX_OR(cfg->drain_timeout_ms, PX_DEF_DRAIN_MS) * PX_MS;
	s.discard_ns = PX_OR(cfg->discard_ms, PX_DEF_DISCARD_MS) * PX_MS;
#undef PX_OR
	/* sweep at a quarter of the shorter idle timeout, within bounds */
	s.sweep_ns = px_min_dl(px_min_dl(s.client_idle_ns, s.up_idle_ns), s.stream_idle_ns) / 4;
	s.sweep_ns = s.sweep_ns < PX_SWEEP_MIN_NS ? PX_SWEEP_MIN_NS :
		     s.sweep_ns > PX_SWEEP_MAX_NS ? PX_SWEEP_MAX_NS : s.sweep_ns;
	s.sq.ring_fd = -1;	/* ioq_free on every path (set up below) */
	if (getrandom(&s.rng, sizeof(s.rng), 0) != sizeof(s.rng) || !s.rng)
		s.rng = ev_now_ns() | 1;
	if (cfg->service) {
		s.explicit_mode = true;
		if (px_parse_service(&s, cfg->service)) {
			zh_err("proxy: --service %s: want NAMESPACE/NAME[:PORT]", cfg->service);
			return -EINVAL;
		}
	}
	if (cfg->state_dir) {
		rc = ss_open(cfg->state_dir, &s.ss);
		if (rc) {
			zh_err("proxy: --state %s: %s", cfg->state_dir, strerror(-rc));
			return rc;
		}
	}
	{
		struct pol_compiled *pol = NULL;

		rc = px_load(&s, cfg, &s.tbl, &pol);
		if (rc)
			goto out;
		px_netpol_swap(&s, pol);
	}
	if (s.explicit_mode && !px_table_find_name(s.tbl, s.svc_ns, s.svc_name, s.svc_port))
		zh_warn("proxy: --service %s is not in the state (yet); answering 502",
			cfg->service);
	s.cap_fd = s.explicit_mode ? -1 : cfg->capture_fd;
	if (!s.explicit_mode && s.cap_fd < 0) {
		zh_err("proxy: neither --service nor a capture map: nothing to route by");
		rc = -EINVAL;
		goto out;
	}
	if (cfg->access_log) {
		s.alog = fopen(cfg->access_log, "a");
		if (!s.alog) {
			rc = -errno;
			zh_err("proxy: --access-log %s: %s", cfg->access_log, strerror(errno));
			goto out;
		}
		setvbuf(s.alog, NULL, _IOLBF, 0);
	}
	s.loop = ev_loop_new(1024);
	if (!s.loop) {
		rc = -errno;
		goto out;
	}
	rc = net_parse_addr(cfg->listen, "0.0.0.0", PX_OUTBOUND_PORT, &a);
	if (rc) {
		zh_err("proxy: --listen %s: not ADDR:PORT", cfg->listen);
		goto out;
	}
	/* SO_REUSEPORT: a replacement proxy can listen beside a draining one
	 * (restart without refusing connections, invariant 17) */
	s.lfd = net_listen(&a, SOCK_STREAM, NET_REUSEPORT, 4096);
	if (s.lfd < 0) {
		rc = s.lfd;
		zh_err("proxy: listen on %s: %s", cfg->listen, strerror(-rc));
		goto out;
	}
	ev_add(s.loop, s.lfd, EV_READ, px_accept_cb, &s);
	if (cfg->listen6 && !s.explicit_mode) {
		/* native IPv6 clients of L7 Services (docs/ipv6.md "L7 over IPv6") */
		rc = net_parse_addr(cfg->listen6, "::", PX_OUTBOUND_PORT, &a);
		if (!rc)
			rc = s.lfd6 = net_listen(&a, SOCK_STREAM, NET_REUSEPORT, 4096);
		if (rc < 0) {
			zh_err("proxy: listen on %s: %s", cfg->listen6, strerror(-rc));
			goto out;
		}
		ev_add(s.loop, s.lfd6, EV_READ, px_accept_cb, &s);
		s.cap6_fd = cfg->capture ? cfg->capture->orig6_fd : -1;
	}
	s.sweep_timer = ev_timer_add(s.loop, ev_now_ns() + s.sweep_ns, px_sweep_cb, &s);
	if (!s.explicit_mode && cfg->capture)
		s.cap_timer = ev_timer_add(s.loop, ev_now_ns() + PX_CAP_CHECK_NS, px_cap_cb, &s);
	if (cfg->stats_addr) {
		rc = net_parse_addr(cfg->stats_addr, "127.0.0.1", -1, &a);
		if (rc || (s.stats_fd = net_listen(&a, SOCK_STREAM, 0, 64)) < 0) {
			rc = rc ? rc : s.stats_fd;
			zh_err("proxy: --stats-addr %s: %s", cfg->stats_addr, strerror(-rc));
			goto out;
		}
		ev_add(s.loop, s.stats_fd, EV_READ, px_stats_accept_cb, &s);
	}
	if (cfg->hbone_listen && (rc = px_hbone_open(&s)))	/* opt-in: docs/mtls.md */
		goto out;
	if (s.ss) {
		s.watch_fd = ss_watch_fd(s.ss);
		if (s.watch_fd >= 0)
			ev_add(s.loop, s.watch_fd, EV_READ, px_watch_cb, &s);
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s.sfd >= 0)
		ev_add(s.loop, s.sfd, EV_READ, px_signal_cb, &s);
	zh_info("proxy: listening on %s%s%s (%s)", cfg->listen, s.lfd6 >= 0 ? " and " : "",
		s.lfd6 >= 0 ? cfg->listen6 : "", s.explicit_mode ? cfg->service : "capture");
	/* deferred sends (batch.c): one io_uring batch per loop turn, or send(2)
	 * per socket where io_uring is unavailable */
	if (getenv("ZEROHOP_NO_URING"))
		s.sq.ring_fd = -1;
	else if ((rc = ioq_init(&s.sq)))
		zh_info("proxy: io_uring unavailable (%s): sends one by one", strerror(-rc));
	ev_set_before_poll(s.loop, px_wq_flush, &s);
	ev_set_after_poll(s.loop, px_rd_batch, &s);
	s.busy_poll_us = cfg->busy_poll_us;
	ev_set_busy_poll(s.loop, 1000ULL * cfg->busy_poll_us);
	/* a turn's sends wait for one more turn when its events are already
	 * there (ev.h ev_set_gather; batch.c): fewer, larger sends and fewer
	 * sleeps per request; ZEROHOP_PROXY_NO_GATHER turns it off (A/B) */
	ev_set_gather(s.loop, getenv("ZEROHOP_PROXY_NO_GATHER") ? 0 : 1);
	rc = ev_run(s.loop);
	px_wq_flush(s.loop, &s);	/* what the last turn queued */
out:
	/* close what is still open (a drain deadline or SIGINT): each client
	 * connection's stream is logged and counted, its upstream closed */
	while (s.conns)
		px_conn_close(s.conns);
	hbo_client_close(s.hbo);	/* tunneled connections: reset */
	hb_server_close(s.hbone);
	px_pool_close_all(&s);
	px_h2up_close_all(&s);
	if (s.loop)
		px_mirror_close_all(&s);
	if (s.sfd >= 0)
		close(s.sfd);
	if (s.stats_fd >= 0)
		close(s.stats_fd);
	if (s.lfd >= 0)
		close(s.lfd);
	if (s.lfd6 >= 0)
		close(s.lfd6);
	if (s.loop)
		ev_loop_free(s.loop);
	ioq_free(&s.sq);
	free(s.wq);
	free(s.wq_run);
	free(s.h2q);
	free(s.h2cq);
	if (s.alog)
		fclose(s.alog);
	px_table_unref(s.tbl);
	px_netpol_swap(&s, NULL);
	if (s.ss)
		ss_close(s.ss);
	while (s.n_bufs)
		free(s.bufs[--s.n_bufs]);
	px_obj_pools_free(&s);
	for (int i = 0; i < s.n_stats; i++) {
		free(s.stats[i].route);
		free(s.stats[i].backend);
		hist_free(s.stats[i].lat);
	}
	free(s.stats);
	free(s.hosts);
	return rc;
}
