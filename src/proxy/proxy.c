/* proxy.c — the node L7 proxy (px_): design note for all its layers, the
 * client connection events, route reloads, signals and graceful drain, and
 * px_serve.
 *
 * Files (layers):
 *   proxy.c     this note; client connection events (px_conn_cb,
 *               px_conn_progress), accept, route reloads, drain, px_serve
 *   stream.c    request head → stream (px_stream_start), header rewriting,
 *               local replies, body pumps both ways, px_stream_end
 *   upstream.c  upstream connections and the per-endpoint pools, tries,
 *               retries with budget and backoff, stream timers, idle sweep
 *   balance.c   per-endpoint state: outlier ejection, load balancing
 *   router.c    the route table (pure); stats.c metrics; cli.c options
 *   netpol.c    NetworkPolicy judged per request on the chosen endpoint,
 *               before any pooled upstream is taken (pools are per
 *               endpoint and shared: no request reaches one unchecked, so
 *               pooling stays safe); upstream source address
 *
 * Objects and lifetimes (memory by lifetime: a connection arena, pools):
 *   px_conn     one per client connection; buffers allocated lazily and
 *               given back to a small buffer pool whenever the connection is
 *               idle, so an idle keep-alive client costs sizeof(px_conn).
 *   px_stream   one per request, created when a request head parses and
 *               freed when both its request and response are complete. It
 *               holds its own route-table reference (routes can change under
 *               it) and, while forwarding, exactly one px_up.
 *   px_up       one per upstream connection; attached to a stream while it
 *               carries one, else parked in the server's idle pool keyed by
 *               backend address (keep-alive reuse), counted against its
 *               endpoint's connection limit (invariant 21).
 *
 * Invariants:
 * 1. A connection has at most one stream: pipelined requests wait in
 *    c->in until the current stream ends, so responses go out in order.
 * 2. Backpressure: a side is read only while the buffer it feeds holds less
 *    than PX_HIGH bytes (c->in feeds up->out, up->in feeds c->out); every
 *    buffer therefore stays under PX_HIGH + one read (or the head limits).
 * 3. Nothing unparsed is forwarded: every request head goes through h1 and
 *    h1_body_framing; bodies are re-framed (Content-Length copied, chunked
 *    decoded and re-encoded), so an ambiguous message can never reach a
 *    backend. Parse errors are answered with h1_err_status and a close.
 * 4. An upstream is reused only after a complete response with keep-alive
 *    framing, a completely sent request, and no extra bytes.
 * 5. The proxy's own upstream sockets are never captured again: the proxy
 *    runs in the node's network namespace and cgroup, outside every pod
 *    cgroup, and the agent's connect4 hook sits on pod cgroups only.
 *
 * Stream state machine (request side rq, response side rs):
 *
 *   head parsed ──route──┬─ local reply (redirect/404/503/4xx) ───────┐
 *                        └─ px_stream_try → RS_CONNECT                 │
 *   RS_CONNECT ──connected── RS_HEAD ──head ok── RS_BODY ──end── RS_DONE
 *        │ fail: 503          │ bad/EOF: 502       │ bad/EOF: close    │
 *   RQ_BODY ──body complete── RQ_DONE                                  │
 *   rq == RQ_DONE && rs == RS_DONE  →  px_stream_end (stats, log, pool) ◄┘
 *
 * Transitions: px_stream_start (head → route), px_up_cb (connect result),
 * px_pump_req (RQ_*), px_pump_resp (RS_HEAD/RS_BODY), px_stream_end.
 * Resilience edges (invariants 6-16): in RS_CONNECT or RS_HEAD, a connect
 * failure/timeout, a reset before any response byte, a retriable status or
 * a per-try timeout goes back to RS_CONNECT/RS_HEAD on a new upstream
 * (px_stream_retry) when the policy, the replay copy and the budget allow,
 * else to the failure answers above (503 / 502 / the status itself / 504).
 * A request timeout in RS_CONNECT/RS_HEAD answers 504; in RS_BODY it cuts.
 *
 * Timeouts:
 * 6. A forwarded stream holds at most one timer, armed for the earliest of
 *    its deadlines: request (t0 + timeouts.request), backend (start of the
 *    upstream try + timeouts.backendRequest) and, while RS_CONNECT, connect
 *    (start of the try + connect timeout). Streams of routes without
 *    timeouts that reuse a pooled upstream arm no timer at all, so the
 *    healthy fast path costs nothing. The timer dies with the stream.
 * 7. When it fires before RS_DONE: still RS_CONNECT and only the connect
 *    deadline passed → 503 (px_err_connect_timeout); otherwise → 504
 *    (px_err_timeout) if no response byte was sent, else the client
 *    connection is cut. Either way the upstream is closed, never pooled, so
 *    late upstream bytes can reach nobody.
 * 8. Idle timeouts are enforced by one periodic sweep (not a timer per
 *    connection): a client connection with no stream and nothing to write,
 *    silent for client_idle, is closed; a pooled upstream idle for
 *    upstream_idle is closed.
 *
 * Retries:
 * 9. A try may be retried only while nothing of its response reached the
 *    client (rs is RS_CONNECT or RS_HEAD) and every request byte sent so far
 *    is still in st->rb (the replay copy, at most PX_REPLAY_MAX bytes; a
 *    larger request turns replay off for the stream for good). Bytes of the
 *    body not yet read from the client simply follow on the new upstream.
 * 10. A retry closes the failed upstream (never pooled: it may still send
 *    bytes of the failed answer), re-picks an endpoint of the same backend,
 *    and, after its backoff (below), replays st->rb on a new try.
 *    px_stream_retry is the only place that drops st->up for a retry;
 *    callers holding the old px_up pointer must return at once (they get
 *    "restarted" and the connection loop re-reads st->up, NULL while the
 *    retry backs off).
 * 11. Budget (Linkerd): over the last PX_BUDGET_SECS seconds, retries <=
 *    20 % of forwarded requests + 10 per second. A denied retry passes the
 *    failure through to the client and is counted.
 * 12. Accounting: every try is an "attempt" (actual success: an answer
 *    below 500), every request one result (effective success); both go to
 *    the metrics per route and backend.
 *
 * Passive outlier detection:
 * 13. Every try's end is reported for its endpoint (ip:port, kept in
 *    s->hosts across route reloads): an answer below 500 resets the
 *    endpoint's consecutive failures; a 5xx, connect failure, reset or
 *    timeout adds one. At consec_max (5) the endpoint is ejected for
 *    base x (number of its ejections) unless that would put more than half
 *    of its backend's endpoints out at once.
 * 14. An ejected endpoint is never picked (first pick or retry) while a
 *    healthy one of the same backend exists. Ejections end lazily on the
 *    next look or in the sweep. With nothing ejected (s->n_ejected == 0)
 *    the pick costs nothing extra.
 *
 * Load balancing:
 * 15. Among the in-service endpoints of the chosen backend (at most
 *    PX_PICK_MAX considered): p2c-ewma (default) takes two distinct random
 *    ones and the lower cost = peak-EWMA latency x (in-flight tries + 1);
 *    round-robin rotates a per-backend counter; ring-hash picks by
 *    rendezvous hashing of the key (source ip, a header or a cookie), so a
 *    key keeps its endpoint while that endpoint stays in the set.
 * 16. A try's endpoint is held in st->host (index into s->hosts): in-flight
 *    is +1 from try start to try end, exactly once. Records never move:
 *    a pruned record (invariant 20) is zeroed (0.0.0.0:0) and reused by
 *    px_host_find, and only records with nothing in flight, no open
 *    connection and nothing pending are pruned.
 *
 * Graceful drain (SIGTERM):
 *
 *   SERVING ──SIGTERM── DRAINING ──no client connection left── exit 0
 *      │                    │ ──drain deadline (--drain-timeout)── exit 0
 *      └──SIGINT── exit     └──SIGINT or a second SIGTERM── exit
 *
 * 17. px_drain_start accepts what already completed the handshake, then
 *    closes the listener (new connections go to a replacement listening
 *    beside us with SO_REUSEPORT, or are refused).
 * 18. While draining, every response head (forwarded or local) says
 *    Connection: close and the connection closes after it, so a client
 *    that honours it reconnects elsewhere and never sees a reset.
 * 19. The drain tick (PX_DRAIN_TICK_NS) closes client connections with no
 *    stream and nothing to write that stayed silent for PX_DRAIN_IDLE_NS
 *    (1 s: an active client sends again sooner and gets its close on a
 *    response; one that does not is idle), and stops the loop when none is
 *    left or at the deadline (in-flight requests are then cut).
 *
 * Endpoint updates (pods going away in a rollout):
 * 20. A route reload swaps the table (new requests never pick an endpoint
 *    that left), closes the idle pooled upstreams of endpoints that are in
 *    no backend of the new table (px_pool_prune) and prunes their records
 *    (px_hosts_prune). A stream routed with an older table keeps its
 *    upstream to the end; px_stream_end then closes that upstream instead
 *    of pooling it when its endpoint is not in the current table.
 *
 * Connection pools (per endpoint, limits of the destination Service):
 * 21. hosts[i].n_conns counts the endpoint's open upstreams (connecting,
 *    busy or idle): +1 in px_up_connect, -1 in px_up_close, the only two
 *    places. A try takes an idle pooled upstream, else connects while
 *    n_conns < max_connections. An upstream that carried
 *    max_requests_per_conn requests is closed at release.
 * 22. Otherwise the stream waits in the endpoint's pending FIFO (st->pending,
 *    no upstream, rs RS_CONNECT) while it holds fewer than max_pending
 *    streams, else it is answered 503 at once (px_err_overflow, not
 *    retried). A freed slot (an upstream released to the pool or closed)
 *    arms a zero-delay timer (px_pool_kick_cb) that serves the FIFO in
 *    order; a stream waits at most the connect timeout, then 503. Memory
 *    is bounded: max_pending streams per endpoint, none without a client.
 *
 * Retry backoff (Envoy's): a retry is not started at once; the stream
 * waits (no upstream, rs RS_CONNECT, st->retry_at) a uniform random time
 * in [0, min(250 ms, 25 ms x 2^(n-1))] for its n-th retry, on its one
 * timer (invariant 6), then px_stream_try runs from the timer.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <bpf/bpf.h>

#include "zerohop/abi/l7cap.h"
#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/hist.h"
#include "zerohop/log.h"
#include "zerohop/net.h"
#include "zerohop/policy.h"
#include "zerohop/proxy.h"
#include "zerohop/state.h"
#include "px_int.h"

uint64_t px_rand(struct px_server *s)
{
	/* xorshift64*: fast, good enough for weighted choice */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545F4914F6CDD1DULL;
}

/* Whether the client socket should be read now. The same test arms
 * EV_READ and gates the read, so a level-triggered event we would not serve
 * never stays armed (no spinning). Reading stays armed across requests (no
 * epoll_ctl per request); pipelined bytes simply wait in c->in. */
bool px_conn_want_read(const struct px_conn *c)
{
	const struct px_stream *st = c->st;
	size_t lim = c->srv->lim.max_head + c->srv->lim.max_line;

	if (c->rd_eof || c->closing || c->out.data >= PX_HIGH)
		return false;	/* (a client not reading our answers) */
	if (st && st->rq == RQ_BODY)	/* backpressure from the upstream */
		return st->up && st->up->out.data < PX_HIGH && c->in.data < PX_HIGH;
	return c->in.data < (lim > PX_HIGH ? lim : PX_HIGH);
}

void px_conn_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_conn *c = arg;
	ssize_t n;

	(void)fd;
	if (events & EV_WRITE)
		c->wr.blocked = false;	/* room again: queue the rest (batch.c) */
	if ((events & (EV_READ | EV_ERROR)) && c->rd_iter != ev_iteration(loop) &&
	    px_conn_want_read(c)) {	/* (px_rd_batch did not read it) */
		px_buf_get(c->srv, &c->in);
		n = buf_read_fd(&c->in, c->fd, 0);
		if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR))
			c->rd_eof = true;
		else if (n > 0)
			c->last_active = ev_now_ns();
	}
	px_conn_progress(c);
}

static void px_conn_update(struct px_conn *c)
{
	struct px_server *s = c->srv;
	int mask = 0;

	if (c->out.data && c->wr.slot < 0)	/* batch.c invariant 3 */
		mask |= EV_WRITE;
	if (px_conn_want_read(c))
		mask |= EV_READ;
	if (mask == c->mask)
		return;
	if (!mask)
		ev_del(s->loop, c->fd);
	else
		ev_add(s->loop, c->fd, mask, px_conn_cb, c);
	c->mask = mask;
}

/* Drive a connection as far as the buffered bytes allow: pump the current
 * stream, end it when complete, start the next (pipelined) one, flush. */
void px_conn_progress(struct px_conn *c)
{
	struct px_server *s = c->srv;

	for (;;) {
		struct px_stream *st = c->st;

		if (!st) {
			if (c->closing)
				break;
			if (!c->in.data) {
				if (c->rd_eof)
					c->closing = true;
				break;
			}
			if (c->out.data >= PX_HIGH)
				break;	/* let the client read its answers first */
			if (px_stream_start(c) == -EAGAIN) {
				if (c->rd_eof)
					c->closing = true;
				break;
			}
			continue;
		}
		if (st->rq == RQ_BODY && c->rd_eof && !c->in.data) {
			px_stream_fail(st, 400, "client closed during the request body");
			continue;
		}
		if (st->up && st->rs != RS_CONNECT) {
			if (px_pump_req(st) || px_pump_resp(st))
				continue;
			/* sent before the loop waits; a reset takes the
			 * error path in batch.c's up_sent */
			if (st->up && st->up->out.data)
				px_wq_add(s, &st->up->wr);
		}
		if (st->rq == RQ_DONE && st->rs == RS_DONE) {
			px_stream_end(st);
			continue;
		}
		break;
	}
	px_flush(c);
	if (c->st && c->st->up)
		px_up_update(c->st->up);
	if (c->closing && !c->out.data) {
		px_conn_close(c);
		return;
	}
	if (!c->st) {
		/* idle: hand the buffers back */
		px_buf_put(s, &c->in);
		px_buf_put(s, &c->out);
	}
	px_conn_update(c);
}

static int px_capture_lookup(struct px_server *s, struct px_conn *c)
{
	struct zh_l7cap_client k = { .ip = c->peer_ip, .port = htons(c->peer_port) };
	struct zh_l7cap_dst v;

	if (s->cap_fd < 0)
		return -ENOENT;
	if (bpf_map_lookup_elem(s->cap_fd, &k, &v))
		return -errno;
	bpf_map_delete_elem(s->cap_fd, &k);
	c->dst_ip = v.ip;
	c->dst_port = ntohs(v.port);
	return 0;
}

static void px_accept_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_server *s = arg;
	struct net_addr peer;
	int cfd, i;

	(void)loop;
	(void)events;
	for (i = 0; i < 64; i++) {
		struct px_conn *c;

		cfd = net_accept(fd, &peer);
		if (cfd < 0)
			break;
		net_set_nodelay(cfd);
		c = zh_calloc(1, sizeof(*c));
		c->srv = s;
		c->fd = cfd;
		c->mask = -1;
		px_wr_init(&c->wr, PX_WR_CONN);
		if (peer.ss.ss_family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&peer.ss;

			c->peer_ip = sin->sin_addr.s_addr;
			c->peer_port = ntohs(sin->sin_port);
		}
		if (!s->explicit_mode && px_capture_lookup(s, c)) {
			zh_warn("proxy: no original destination for a client connection; closed");
			close(cfd);
			free(c);
			continue;
		}
		s->active++;
		s->accepted++;
		c->last_active = ev_now_ns();
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		px_conn_update(c);
	}
}

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

static const struct px_config *px_cfg;

static void px_reload_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;
	struct pol_compiled *pol;
	struct px_table *t;

	(void)loop;
	(void)id;
	s->reload_timer = 0;
	if (px_load(s, px_cfg, &t, &pol)) {
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
		s->reload_timer = ev_timer_add(loop, ev_now_ns() + 20000000ULL, px_reload_cb, s);
}

/* Every second in capture mode: were the shared capture maps re-created
 * (`agent --cleanup` and a new agent)? Then register on the new ones, else
 * L7 connects would be refused until a restart. */
static void px_cap_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;

	(void)id;
	s->cap_fd = px_capture_refresh(px_cfg->capture);
	s->cap_timer = ev_timer_add(loop, ev_now_ns() + 1000 * PX_MS, px_cap_cb, s);
}

/* ---- graceful drain (invariants 17-19) ---------------------------------------- */

/* Close idle client connections (no stream, nothing to write) silent for
 * at least min_idle; with the drain over (no client left, or the
 * deadline), stop the loop. */
static bool px_drain_check(struct px_server *s, uint64_t min_idle)
{
	uint64_t now = ev_now_ns();
	struct px_conn *c, *cn;

	for (c = s->conns; c; c = cn) {
		cn = c->next;
		if (!c->st && !c->out.data && now - c->last_active >= min_idle) {
			s->n_drain_closed++;
			px_conn_close(c);
		}
	}
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

/* SIGTERM: stop accepting, let in-flight requests finish (their responses
 * say Connection: close), close idle client connections as they go quiet,
 * exit when none is left or at the deadline. */
static void px_drain_start(struct px_server *s)
{
	s->draining = true;
	s->drain_deadline = ev_now_ns() + s->drain_ns;
	if (s->lfd >= 0) {
		/* take what already completed the handshake: closing a listener
		 * resets the connections still in its accept queue */
		for (int k = 0; k < 64; k++) {
			uint64_t before = s->accepted;

			px_accept_cb(s->loop, s->lfd, EV_READ, s);
			if (s->accepted - before < 64)
				break;
		}
		ev_del(s->loop, s->lfd);
		close(s->lfd);
		s->lfd = -1;
	}
	zh_info("proxy: draining: %llu client connection(s), deadline %llu ms",
		(unsigned long long)s->active, (unsigned long long)(s->drain_ns / PX_MS));
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
	s.lfd = s.sfd = s.stats_fd = s.watch_fd = s.cap_fd = -1;
	px_cfg = cfg;
	h1_limits_default(&s.lim);
	if (cfg->max_line)
		s.lim.max_line = cfg->max_line;
	if (cfg->max_head)
		s.lim.max_head = cfg->max_head;
	if (cfg->max_headers)
		s.lim.max_headers = cfg->max_headers < PX_MAX_HDRS ? cfg->max_headers : PX_MAX_HDRS;
	s.eject_base_ns = (cfg->outlier_base_ms ? cfg->outlier_base_ms : 30000) * PX_MS;
	s.consec_max = cfg->outlier_consecutive ? cfg->outlier_consecutive : 5;
	s.connect_ns = (cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 1000) * PX_MS;
	s.client_idle_ns = (cfg->client_idle_ms ? cfg->client_idle_ms : 300000) * PX_MS;
	s.up_idle_ns = (cfg->upstream_idle_ms ? cfg->upstream_idle_ms : 60000) * PX_MS;
	s.drain_ns = (cfg->drain_timeout_ms ? cfg->drain_timeout_ms : 15000) * PX_MS;
	/* sweep at a quarter of the shorter idle timeout, between 10 ms and 1 s */
	s.sweep_ns = px_min_dl(s.client_idle_ns, s.up_idle_ns) / 4;
	s.sweep_ns = s.sweep_ns < 10 * PX_MS ? 10 * PX_MS : s.sweep_ns > 1000 * PX_MS ?
		     1000 * PX_MS : s.sweep_ns;
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
	s.sweep_timer = ev_timer_add(s.loop, ev_now_ns() + s.sweep_ns, px_sweep_cb, &s);
	if (!s.explicit_mode && cfg->capture)
		s.cap_timer = ev_timer_add(s.loop, ev_now_ns() + 1000 * PX_MS, px_cap_cb, &s);
	if (cfg->stats_addr) {
		rc = net_parse_addr(cfg->stats_addr, "127.0.0.1", -1, &a);
		if (rc || (s.stats_fd = net_listen(&a, SOCK_STREAM, 0, 64)) < 0) {
			rc = rc ? rc : s.stats_fd;
			zh_err("proxy: --stats-addr %s: %s", cfg->stats_addr, strerror(-rc));
			goto out;
		}
		ev_add(s.loop, s.stats_fd, EV_READ, px_stats_accept_cb, &s);
	}
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
	zh_info("proxy: listening on %s (%s)", cfg->listen,
		s.explicit_mode ? cfg->service : "capture");
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
	rc = ev_run(s.loop);
	px_wq_flush(s.loop, &s);	/* what the last turn queued */
out:
	/* close what is still open (a drain deadline or SIGINT): each client
	 * connection's stream is logged and counted, its upstream closed */
	while (s.conns)
		px_conn_close(s.conns);
	while (s.idle) {
		struct px_up *u = s.idle;

		s.idle = u->next;
		px_up_close(u);
	}
	if (s.loop)
		px_mirror_close_all(&s);
	if (s.sfd >= 0)
		close(s.sfd);
	if (s.stats_fd >= 0)
		close(s.stats_fd);
	if (s.lfd >= 0)
		close(s.lfd);
	if (s.loop)
		ev_loop_free(s.loop);
	ioq_free(&s.sq);
	free(s.wq);
	free(s.wq_run);
	if (s.alog)
		fclose(s.alog);
	px_table_unref(s.tbl);
	px_netpol_swap(&s, NULL);
	if (s.ss)
		ss_close(s.ss);
	while (s.n_bufs)
		free(s.bufs[--s.n_bufs]);
	for (int i = 0; i < s.n_stats; i++) {
		free(s.stats[i].route);
		free(s.stats[i].backend);
		hist_free(s.stats[i].lat);
	}
	free(s.stats);
	free(s.hosts);
	return rc;
}
