/* proxy.c — the node L7 proxy's connection and stream layers (px_).
 *
 * Objects and lifetimes (memory by lifetime, DESIGN.md 7.8):
 *   px_conn     one per client connection; buffers allocated lazily and
 *               given back to a small buffer pool whenever the connection is
 *               idle, so an idle keep-alive client costs sizeof(px_conn).
 *   px_stream   one per request, created when a request head parses and
 *               freed when both its request and response are complete. It
 *               holds its own route-table reference (routes can change under
 *               it) and, while forwarding, exactly one px_up.
 *   px_up       one per upstream connection; attached to a stream while it
 *               carries one, else parked in the server's idle pool keyed by
 *               backend address (keep-alive reuse; part 2 adds limits).
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
 *                        └─ px_up_get → RS_CONNECT                     │
 *   RS_CONNECT ──connected── RS_HEAD ──head ok── RS_BODY ──end── RS_DONE
 *        │ fail: 503          │ bad/EOF: 502       │ bad/EOF: close    │
 *   RQ_BODY ──body complete── RQ_DONE                                  │
 *   rq == RQ_DONE && rs == RS_DONE  →  px_stream_end (stats, log, pool) ◄┘
 *
 * Transitions: px_stream_start (head → route), px_up_cb (connect result),
 * px_pump_req (RQ_*), px_pump_resp (RS_HEAD/RS_BODY), px_stream_end.
 * Part 2 edges (invariants 6-16): in RS_CONNECT or RS_HEAD, a connect
 * failure/timeout, a reset before any response byte, a retriable status or
 * a per-try timeout goes back to RS_CONNECT/RS_HEAD on a new upstream
 * (px_stream_retry) when the policy, the replay copy and the budget allow,
 * else to the failure answers above (503 / 502 / the status itself / 504).
 * A request timeout in RS_CONNECT/RS_HEAD answers 504; in RS_BODY it cuts.
 *
 * Timeouts (part 2):
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
 * Retries (part 2):
 * 9. A try may be retried only while nothing of its response reached the
 *    client (rs is RS_CONNECT or RS_HEAD) and every request byte sent so far
 *    is still in st->rb (the replay copy, at most PX_REPLAY_MAX bytes; a
 *    larger request turns replay off for the stream for good). Bytes of the
 *    body not yet read from the client simply follow on the new upstream.
 * 10. A retry closes the failed upstream (never pooled: it may still send
 *    bytes of the failed answer), re-picks an endpoint of the same backend,
 *    and replays st->rb. px_stream_retry is the only place that replaces
 *    st->up; callers holding the old px_up pointer must return at once
 *    (they get "restarted" and the connection loop re-reads st->up).
 * 11. Budget (Linkerd): over the last PX_BUDGET_SECS seconds, retries <=
 *    20 % of forwarded requests + 10 per second. A denied retry passes the
 *    failure through to the client and is counted.
 * 12. Accounting: every try is an "attempt" (actual success: an answer
 *    below 500), every request one result (effective success); both go to
 *    the metrics per route and backend.
 *
 * Passive outlier detection (part 2):
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
 * Load balancing (part 2):
 * 15. Among the in-service endpoints of the chosen backend (at most
 *    PX_PICK_MAX considered): p2c-ewma (default) takes two distinct random
 *    ones and the lower cost = peak-EWMA latency x (in-flight tries + 1);
 *    round-robin rotates a per-backend counter; ring-hash picks by
 *    rendezvous hashing of the key (source ip, a header or a cookie), so a
 *    key keeps its endpoint while that endpoint stays in the set.
 * 16. A try's endpoint is held in st->host (index into s->hosts, which only
 *    grows): in-flight is +1 from try start to try end, exactly once.
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
#include "zerohop/proxy.h"
#include "zerohop/state.h"
#include "px_int.h"


static void px_conn_update(struct px_conn *c);
static void px_up_update(struct px_up *u);
static void px_conn_progress(struct px_conn *c);

uint64_t px_rand(struct px_server *s)
{
	/* xorshift64*: fast, good enough for weighted choice */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545F4914F6CDD1DULL;
}

/* ---- buffers: lazily allocated, pooled --------------------------------- */

static void px_buf_get(struct px_server *s, struct buf *b)
{
	if (b->area)
		return;
	b->area = s->n_bufs ? s->bufs[--s->n_bufs] : zh_malloc(PX_BUFSZ);
	b->size = PX_BUFSZ;
	b->head = b->data = 0;
}

/* Give an empty buffer's storage back (idle connections hold none). */
static void px_buf_put(struct px_server *s, struct buf *b)
{
	if (!b->area || b->data)
		return;
	if (b->size == PX_BUFSZ && s->n_bufs < PX_POOL_BUFS)
		s->bufs[s->n_bufs++] = b->area;
	else
		free(b->area);
	b->area = NULL;
	b->size = b->head = b->data = 0;
}

static void px_buf_drop(struct px_server *s, struct buf *b)
{
	b->data = b->head = 0;
	px_buf_put(s, b);
}

/* ---- upstream connections ------------------------------------------------ */

static void px_up_close(struct px_up *u)
{
	struct px_server *s = u->srv;

	ev_del(s->loop, u->fd);
	close(u->fd);
	px_buf_drop(s, &u->in);
	px_buf_drop(s, &u->out);
	free(u);
}

static void px_up_cb(struct ev_loop *loop, int fd, int events, void *arg);

/* Idle upstream (in the pool) became readable: EOF or junk, drop it. */
static void px_pool_remove(struct px_server *s, struct px_up *u)
{
	struct px_up **pp;

	for (pp = &s->idle; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			s->n_idle--;
			return;
		}
}

static int px_up_get(struct px_server *s, uint32_t ip, uint16_t port, struct px_up **out)
{
	struct px_up **pp, *u;
	struct sockaddr_in *sin;
	struct net_addr a;
	int fd;

	for (pp = &s->idle; *pp; pp = &(*pp)->next)
		if ((*pp)->ip == ip && (*pp)->port == port) {
			u = *pp;
			*pp = u->next;
			s->n_idle--;
			u->next = NULL;
			*out = u;
			return 0;
		}
	memset(&a, 0, sizeof(a));
	sin = (struct sockaddr_in *)&a.ss;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = ip;
	sin->sin_port = htons(port);
	a.len = sizeof(*sin);
	fd = net_connect(&a);
	if (fd < 0)
		return fd;
	net_set_nodelay(fd);
	u = zh_calloc(1, sizeof(*u));
	u->srv = s;
	u->fd = fd;
	u->ip = ip;
	u->port = port;
	u->connecting = true;
	u->mask = -1;
	*out = u;
	return 0;
}

static void px_up_release(struct px_up *u, bool reusable)
{
	struct px_server *s = u->srv;

	u->st = NULL;
	if (!reusable || u->in.data || u->out.data || u->eof || u->connecting) {
		px_up_close(u);
		return;
	}
	px_buf_put(s, &u->in);
	px_buf_put(s, &u->out);
	u->idle_since = ev_now_ns();
	u->next = s->idle;
	s->idle = u;
	s->n_idle++;
	px_up_update(u);
}

static void px_up_update(struct px_up *u)
{
	struct px_stream *st = u->st;
	int mask = 0;

	if (!st) {
		mask = EV_READ;	/* idle: notice the peer closing */
	} else if (u->connecting) {
		mask = EV_WRITE;
	} else {
		if (u->out.data)
			mask |= EV_WRITE;
		if (st->rs != RS_DONE && !u->eof && st->c->out.data < PX_HIGH)
			mask |= EV_READ;
	}
	if (mask == u->mask)
		return;
	if (!mask)
		ev_del(u->srv->loop, u->fd);
	else
		ev_add(u->srv->loop, u->fd, mask, px_up_cb, u);
	u->mask = mask;
}

/* ---- header helpers ------------------------------------------------------ */

bool px_name_is(const struct h1_header *h, const char *name)
{
	size_t n = strlen(name);

	return h->name_len == n && !strncasecmp(h->name, name, n);
}

/* Hop-by-hop (RFC 9110 7.6.1) plus the framing headers we regenerate. */
static bool px_hop_by_hop(const struct h1_header *h, const struct h1_header *hs, size_t n)
{
	static const char *const hop[] = { "connection", "keep-alive", "proxy-connection", "te",
					   "trailer", "upgrade", "transfer-encoding",
					   "content-length", NULL };
	size_t i;
	int k;

	for (k = 0; hop[k]; k++)
		if (px_name_is(h, hop[k]))
			return true;
	/* names listed in Connection */
	for (i = 0; i < n; i++) {
		const char *p, *e;

		if (!px_name_is(&hs[i], "connection"))
			continue;
		p = hs[i].value;
		e = p + hs[i].value_len;
		while (p < e) {
			const char *c = memchr(p, ',', e - p), *te = c ? c : e, *ts = p;

			while (ts < te && (*ts == ' ' || *ts == '\t'))
				ts++;
			while (te > ts && (te[-1] == ' ' || te[-1] == '\t'))
				te--;
			if ((size_t)(te - ts) == h->name_len && !strncasecmp(ts, h->name, h->name_len))
				return true;
			p = c ? c + 1 : e;
		}
	}
	return false;
}

/* True when a modifier list replaces or removes this header. */
static bool px_mods_drop(const struct md_header_mod *const *mods, int n, const struct h1_header *h)
{
	int i, k;

	for (i = 0; i < n; i++) {
		for (k = 0; k < mods[i]->set.n; k++)
			if (px_name_is(h, mods[i]->set.v[k].key))
				return true;
		for (k = 0; k < mods[i]->n_remove; k++)
			if (px_name_is(h, mods[i]->remove[k]))
				return true;
	}
	return false;
}

static void px_mods_emit(struct buf *b, const struct md_header_mod *const *mods, int n)
{
	int i, k;

	for (i = 0; i < n; i++) {
		for (k = 0; k < mods[i]->set.n; k++)
			buf_printf(b, "%s: %s\r\n", mods[i]->set.v[k].key, mods[i]->set.v[k].value);
		for (k = 0; k < mods[i]->add.n; k++)
			buf_printf(b, "%s: %s\r\n", mods[i]->add.v[k].key, mods[i]->add.v[k].value);
	}
}

/* ---- client side: replies, stream end ------------------------------------- */

static void px_log_access(struct px_server *s, struct px_stream *st)
{
	char ip[INET_ADDRSTRLEN], up[INET_ADDRSTRLEN] = "-";
	struct timespec ts;
	struct tm tm;
	char tbuf[40];

	if (!s->alog)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	inet_ntop(AF_INET, &st->c->peer_ip, ip, sizeof(ip));
	if (st->d.ip)
		inet_ntop(AF_INET, &st->d.ip, up, sizeof(up));
	fprintf(s->alog, "%s.%03ldZ %s:%u \"%s %s HTTP/1.%d\" %d %llu %llu %llu %s %s %s:%u %s \"%s\"\n",
		tbuf, ts.tv_nsec / 1000000, ip, st->c->peer_port, st->method, st->target,
		st->client_minor, st->status, (unsigned long long)st->bytes_in,
		(unsigned long long)st->bytes_out,
		(unsigned long long)((ev_now_ns() - st->t0) / 1000),
		st->d.route_name ? st->d.route_name : "-",
		st->d.backend_name ? st->d.backend_name : "-", up, st->d.port,
		st->reqid[0] ? st->reqid : "-", st->err ? st->err : "-");
}

static void px_stream_free(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	struct px_stat *ps;
	int cls = st->status / 100;

	ps = px_stat_get(s, st->d.route_name, st->d.backend_name);
	ps->by_class[cls >= 1 && cls <= 5 ? cls : 0]++;
	if (st->tries) {
		px_try_end(st);
		if (st->status)	/* 0: the client left; not the endpoint's fault */
			px_outlier_note(st, cls >= 5);
		ps->attempts += st->tries;
		ps->attempts_ok += st->tries - st->failed_tries - (cls < 1 || cls >= 5);
	}
	px_buf_drop(s, &st->rb);
	hist_record(ps->lat, ev_now_ns() - st->t0);
	px_log_access(s, st);
	if (st->timer)
		ev_timer_del(s->loop, st->timer);
	if (st->up)
		px_up_release(st->up, false);
	px_table_unref(st->tbl);
	st->c->last_active = ev_now_ns();
	st->c->st = NULL;
	free(st);
}

static void px_stream_end(struct px_stream *st)
{
	struct px_up *u = st->up;

	st->up = NULL;
	if (u)
		px_up_release(u, st->up_keep);
	if (!st->client_keep)
		st->c->closing = true;
	px_stream_free(st);
}

static void px_conn_close(struct px_conn *c)
{
	struct px_server *s = c->srv;

	if (c->st)
		px_stream_free(c->st);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	ev_del(s->loop, c->fd);
	close(c->fd);
	px_buf_drop(s, &c->in);
	px_buf_drop(s, &c->out);
	s->active--;
	free(c);
}

static void px_flush(struct px_conn *c)
{
	ssize_t n;

	while (c->out.data) {
		n = buf_write_fd(&c->out, c->fd);
		if (n <= 0)
			break;
	}
}

/* Answer locally; the stream (if any) is complete on the response side. A
 * reply to a request whose body was not read closes the connection. */
static void px_reply(struct px_conn *c, int status, const char *reason, const char *extra,
		     bool close_conn)
{
	struct px_stream *st = c->st;
	char body[128];
	int bl;

	bl = snprintf(body, sizeof(body), "%d %s\n", status, reason);
	px_buf_get(c->srv, &c->out);
	buf_printf(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
		   "%s%s\r\n%s", status, reason, bl, extra ? extra : "",
		   close_conn ? "Connection: close\r\n" : "", body);
	if (close_conn) {
		c->closing = true;
		if (st)
			st->client_keep = false;
	}
	if (st) {
		st->status = status;
		st->bytes_out += bl;
		st->rs = RS_DONE;
		if (st->rq != RQ_DONE) {
			/* body not read: we cannot find the next request */
			st->rq = RQ_DONE;
			st->client_keep = false;
			c->closing = true;
		}
	}
}

static const char *px_reason(int status)
{
	switch (status) {
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/* An error in the middle of a stream: answer if nothing was sent yet, else
 * cut the client connection (the only honest signal left). */
static void px_stream_fail(struct px_stream *st, int status, const char *err)
{
	struct px_conn *c = st->c;

	st->err = err;
	st->up_keep = false;
	if (st->up) {
		px_up_release(st->up, false);
		st->up = NULL;
	}
	if (st->rs == RS_CONNECT || st->rs == RS_HEAD) {
		px_reply(c, status, px_reason(status), NULL, true);
		st->rq = RQ_DONE;
		px_stream_end(st);
		return;
	}
	st->status = st->status ? st->status : status;
	st->rq = RQ_DONE;
	st->rs = RS_DONE;
	st->client_keep = false;
	c->closing = true;
	c->out.data = 0;	/* a half response must not look complete */
	c->out.head = 0;
	px_stream_end(st);
}

/* ---- timeouts (invariants 6-8) -------------------------------------------- */


static uint64_t px_min_dl(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

static uint64_t px_dl_request(const struct px_stream *st)
{
	return st->d.timeout_request_ms ? st->t0 + st->d.timeout_request_ms * PX_MS : 0;
}

/* Per try: timeouts.backendRequest and the per-try timeout, the shorter. */
static uint64_t px_dl_backend(const struct px_stream *st)
{
	uint64_t ms = px_min_dl(st->d.timeout_backend_ms, st->d.retry->per_try_ms);

	return ms ? st->try_t0 + ms * PX_MS : 0;
}

static void px_stream_arm(struct px_stream *st);

/* ---- retries (invariants 9-12) ----------------------------------------------- */

static int px_budget_slot(struct px_server *s, uint64_t sec)
{
	int i = sec % PX_BUDGET_SECS;

	if (s->bud_sec[i] != sec) {
		s->bud_sec[i] = sec;
		s->bud_req[i] = s->bud_retry[i] = 0;
	}
	return i;
}

static void px_budget_request(struct px_server *s)
{
	s->bud_req[px_budget_slot(s, ev_now_ns() / 1000000000ULL)]++;
}

/* Take one retry from the budget: retries <= PCT % of requests + MIN_RPS/s. */
static bool px_budget_take(struct px_server *s)
{
	uint64_t sec = ev_now_ns() / 1000000000ULL, req = 0, ret = 0;
	int i, cur = px_budget_slot(s, sec);

	for (i = 0; i < PX_BUDGET_SECS; i++)
		if (sec - s->bud_sec[i] < PX_BUDGET_SECS) {
			req += s->bud_req[i];
			ret += s->bud_retry[i];
		}
	if (100 * (ret + 1) > PX_BUDGET_PCT * req + 100ULL * PX_BUDGET_MIN_RPS * PX_BUDGET_SECS) {
		s->n_budget_denied++;
		return false;
	}
	s->bud_retry[cur]++;
	return true;
}

/* Keep request bytes for a replay; past PX_REPLAY_MAX replay is off. */
static void px_replay_add(struct px_stream *st, const void *p, size_t n)
{
	struct px_server *s = st->c->srv;

	if (st->rb_off)
		return;
	if (st->rb.data + n > PX_REPLAY_MAX) {
		st->rb_off = true;
		px_buf_drop(s, &st->rb);
		return;
	}
	px_buf_get(s, &st->rb);
	buf_append(&st->rb, p, n);
}

/* Start one try on st->d's endpoint: a pooled or new upstream carrying the
 * replay copy. 0, or -errno when the connect failed at once. */
static int px_stream_try(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	struct px_up *u;
	int rc;

	st->tries++;
	rc = px_up_get(s, st->d.ip, st->d.port, &u);
	if (rc)
		return rc;
	st->up = u;
	u->st = st;
	st->host = px_host_find(s, st->d.ip, st->d.port, true) - s->hosts;
	s->hosts[st->host].inflight++;
	st->rs = u->connecting ? RS_CONNECT : RS_HEAD;
	st->try_t0 = ev_now_ns();
	st->up_last_len = 0;
	px_buf_get(s, &u->out);
	buf_append(&u->out, buf_head(&st->rb), st->rb.data);
	px_stream_arm(st);
	return 0;
}

/* Retry the stream when eligible (the caller's retry-on test), within the
 * policy's count, replayable, and within the budget. True when a new try
 * is under way (st->up replaced or connecting: invariant 10); false leaves
 * the stream to the caller's failure path (st->up may be NULL). */
static bool px_stream_retry(struct px_stream *st, bool eligible)
{
	struct px_server *s = st->c->srv;

	while (eligible && !st->rb_off && st->tries <= st->d.retry->retries &&
	       (st->rs == RS_CONNECT || st->rs == RS_HEAD) && px_budget_take(s)) {
		s->n_retries++;
		st->failed_tries++;
		px_try_end(st);
		px_outlier_note(st, true);
		if (st->up) {
			px_up_release(st->up, false);
			st->up = NULL;
		}
		px_stream_pick(st, true);
		if (!px_stream_try(st))
			return true;
		eligible = st->d.retry->on & PX_RETRY_CONNECT;
	}
	return false;
}

static void px_stream_timeout_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_stream *st = arg;
	struct px_conn *c = st->c;
	struct px_server *s = c->srv;
	uint64_t now = ev_now_ns(), rq = px_dl_request(st), be = px_dl_backend(st);

	(void)loop;
	(void)id;
	st->timer = 0;
	st->deadline = 0;
	if (st->rs == RS_DONE)
		return;	/* response complete; only the request body is pending */
	if (rq && now >= rq) {
		/* the whole request's time is up: no retry */
	} else if (st->rs == RS_CONNECT && !(be && now >= be)) {
		s->n_connect_timeouts++;
		if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
			px_stream_fail(st, 503, px_err_connect_timeout);
		goto out;
	} else if (px_stream_retry(st, (st->d.retry->on & PX_RETRY_RESET) ||
				    px_retry_status(st->d.retry, 504))) {
		/* per-try timeout: retried as Envoy's "reset" (no response) */
		s->n_timeouts++;
		goto out;
	}
	if ((st->rs == RS_CONNECT || st->rs == RS_HEAD) && st->rq == RQ_DONE) {
		/* nothing sent to the client yet and its request is read: a
		 * 504 that keeps the client connection */
		s->n_timeouts++;
		st->err = px_err_timeout;
		st->up_keep = false;
		if (st->up) {
			px_up_release(st->up, false);
			st->up = NULL;
		}
		px_reply(c, 504, px_reason(504), NULL, false);
		px_stream_end(st);
	} else {
		s->n_timeouts++;
		px_stream_fail(st, 504, px_err_timeout);
	}
out:
	px_conn_progress(c);
}

/* (Re)arm the stream's single timer for its earliest deadline. */
static void px_stream_arm(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	uint64_t dl = px_min_dl(px_dl_request(st), px_dl_backend(st));

	if (st->rs == RS_CONNECT)
		dl = px_min_dl(dl, st->try_t0 + s->connect_ns);
	if (dl == st->deadline)
		return;
	if (st->timer)
		ev_timer_del(s->loop, st->timer);
	st->timer = dl ? ev_timer_add(s->loop, dl, px_stream_timeout_cb, st) : 0;
	st->deadline = dl;
}

/* Periodic idle sweep (invariant 8). */
static void px_sweep_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;
	uint64_t now = ev_now_ns();
	struct px_conn *c, *cn;
	struct px_up **pp, *u;

	(void)id;
	for (c = s->conns; c; c = cn) {
		cn = c->next;
		if (!c->st && !c->out.data && now - c->last_active >= s->client_idle_ns) {
			s->n_client_idle++;
			px_conn_close(c);
		}
	}
	for (pp = &s->idle; (u = *pp);) {
		if (now - u->idle_since >= s->up_idle_ns) {
			*pp = u->next;
			s->n_idle--;
			s->n_up_idle++;
			px_up_close(u);
		} else {
			pp = &u->next;
		}
	}
	for (int i = 0; s->n_ejected && i < s->n_hosts; i++)
		px_host_out(s, &s->hosts[i], now);
	s->sweep_timer = ev_timer_add(loop, now + s->sweep_ns, px_sweep_cb, s);
}

/* ---- request head → stream ---------------------------------------------- */

static const struct px_svc *px_dest_svc(struct px_server *s, struct px_conn *c)
{
	if (s->explicit_mode)
		return px_table_find_name(s->tbl, s->svc_ns, s->svc_name, s->svc_port);
	return px_table_find_ip(s->tbl, c->dst_ip, c->dst_port);
}

static void px_build_up_head(struct px_stream *st, const struct h1_request *rq,
			     const struct h1_header *h, size_t n, struct buf *b, bool gen_id)
{
	const struct px_decision *d = &st->d;
	int hi = h1_find_header(h, n, "host");
	size_t i;

	if (d->path_set)
		buf_printf(b, "%.*s %s HTTP/1.1\r\n", (int)rq->method_len, rq->method, d->path);
	else
		buf_printf(b, "%.*s %.*s HTTP/1.1\r\n", (int)rq->method_len, rq->method,
			   (int)rq->target_len, rq->target);
	if (d->host)
		buf_printf(b, "Host: %s\r\n", d->host);
	else if (hi >= 0)
		buf_printf(b, "Host: %.*s\r\n", (int)h[hi].value_len, h[hi].value);
	else {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &d->ip, ip, sizeof(ip));
		buf_printf(b, "Host: %s:%u\r\n", ip, d->port);
	}
	for (i = 0; i < n; i++) {
		if (px_name_is(&h[i], "host") || px_name_is(&h[i], "expect") ||
		    px_hop_by_hop(&h[i], h, n) ||
		    px_mods_drop(d->req_mods, d->n_req_mods, &h[i]))
			continue;
		buf_printf(b, "%.*s: %.*s\r\n", (int)h[i].name_len, h[i].name, (int)h[i].value_len,
			   h[i].value);
	}
	px_mods_emit(b, d->req_mods, d->n_req_mods);
	if (gen_id)
		buf_printf(b, "x-request-id: %s\r\n", st->reqid);
	if (st->req_framing == H1_BODY_LENGTH)
		buf_printf(b, "Content-Length: %llu\r\n", (unsigned long long)st->req_left);
	else if (st->req_framing == H1_BODY_CHUNKED)
		buf_printf(b, "Transfer-Encoding: chunked\r\n");
	buf_printf(b, "\r\n");
}

/* Parse and route the next request in c->in. Returns 0 when a stream was
 * started (or answered), -EAGAIN when more bytes are needed, -EPIPE when
 * the connection must close. */
static int px_stream_start(struct px_conn *c)
{
	struct px_server *s = c->srv;
	struct h1_header h[PX_MAX_HDRS];
	size_t n = PX_MAX_HDRS;
	struct h1_request rq;
	struct px_stream *st;
	struct px_req_view v;
	uint64_t cl = 0;
	int rc, fr, hi;

	rc = h1_parse_request(buf_head(&c->in), c->in.data, c->last_len, &s->lim, &rq, h, &n);
	if (rc == -EAGAIN) {
		c->last_len = c->in.data;
		return -EAGAIN;
	}
	c->last_len = 0;
	st = zh_calloc(1, sizeof(*st));
	st->c = c;
	c->st = st;
	st->host = -1;
	st->t0 = ev_now_ns();
	st->tbl = px_table_ref(s->tbl);
	st->rq = RQ_DONE;
	st->rs = RS_CONNECT;
	if (rc < 0) {
		snprintf(st->method, sizeof(st->method), "-");
		snprintf(st->target, sizeof(st->target), "-");
		st->err = h1_err_str(rc);
		c->in.data = c->in.head = 0;	/* never parse past a bad head */
		px_reply(c, h1_err_status(rc), px_reason(h1_err_status(rc)), NULL, true);
		px_stream_end(st);
		return 0;
	}
	snprintf(st->method, sizeof(st->method), "%.*s", (int)rq.method_len, rq.method);
	snprintf(st->target, sizeof(st->target), "%.*s", (int)rq.target_len, rq.target);
	st->client_minor = rq.minor_version;
	st->bytes_in = rc;
	st->head_req = rq.method_len == 4 && !memcmp(rq.method, "HEAD", 4);
	st->client_keep = rq.minor_version == 1 ? !h1_header_has_token(h, n, "connection", "close")
			  : h1_header_has_token(h, n, "connection", "keep-alive");
	fr = h1_body_framing(h, n, 1, 0, 0, &cl);
	if (fr < 0 || (fr = 0, (rc = h1_check_host(&rq, h, n)) < 0) ||
	    (rq.target[0] != '/' && (rc = H1_E_BAD_TARGET))) {
		int e = fr < 0 ? fr : rc;

		st->err = h1_err_str(e);
		c->in.data = c->in.head = 0;
		px_reply(c, h1_err_status(e), px_reason(h1_err_status(e)), NULL, true);
		px_stream_end(st);
		return 0;
	}
	fr = h1_body_framing(h, n, 1, 0, 0, &cl);
	st->req_framing = fr;
	st->req_left = cl;
	if (fr == H1_BODY_CHUNKED || (fr == H1_BODY_LENGTH && cl > 0))
		st->rq = RQ_BODY;
	hi = h1_find_header(h, n, "x-request-id");
	if (hi >= 0)
		snprintf(st->reqid, sizeof(st->reqid), "%.*s", (int)h[hi].value_len, h[hi].value);

	/* route */
	{
		const struct px_svc *svc = px_dest_svc(s, c);
		int hh = h1_find_header(h, n, "host");

		if (!svc) {
			st->err = px_err_no_service;
			buf_consume(&c->in, st->bytes_in);
			px_reply(c, 502, px_reason(502), NULL, false);
			px_stream_end(st);
			return 0;
		}
		v.method = rq.method;
		v.method_len = rq.method_len;
		v.headers = h;
		v.n_headers = n;
		px_req_view_target(&v, rq.target, rq.target_len);
		rc = px_route(st->tbl, svc, &v, hh >= 0 ? h[hh].value : NULL,
			      hh >= 0 ? h[hh].value_len : 0, px_rand(s), &st->d);
	}
	if (st->d.action != PX_FORWARD || rc)
		buf_consume(&c->in, st->bytes_in);
	if (rc) {
		st->err = "rewritten path too long";
		px_reply(c, 500, px_reason(500), NULL, false);
		px_stream_end(st);
		return 0;
	}
	switch (st->d.action) {
	case PX_REDIRECT: {
		char loc[2400];

		snprintf(loc, sizeof(loc), "Location: %s\r\n", st->d.location);
		px_reply(c, st->d.status, px_reason(st->d.status), loc, false);
		px_stream_end(st);
		return 0;
	}
	case PX_NOT_FOUND:
		st->err = px_err_no_route;
		px_reply(c, 404, px_reason(404), NULL, false);
		px_stream_end(st);
		return 0;
	case PX_NO_BACKEND:
		st->err = px_err_no_backend;
		px_reply(c, st->d.status, px_reason(st->d.status), NULL, false);
		px_stream_end(st);
		return 0;
	case PX_FORWARD:
		break;
	}
	buf_consume(&c->in, st->bytes_in);
	{
		bool gen_id = !st->reqid[0];

		if (gen_id) {
			uint64_t a = px_rand(s), b = px_rand(s);

			snprintf(st->reqid, sizeof(st->reqid), "%016llx%016llx",
				 (unsigned long long)a, (unsigned long long)b);
		}
		/* the head goes to the replay copy first, then to the upstream
		 * (px_stream_try); h[] still points into c->in: consumed bytes
		 * stay in place until the next read */
		if (st->d.lb->kind == PX_LB_RING_HASH)
			st->hash_key = px_hash_key(st, h, n);
		px_stream_pick(st, false);
		px_buf_get(s, &st->rb);
		px_build_up_head(st, &rq, h, n, &st->rb, gen_id);
		px_budget_request(s);
		rc = px_stream_try(st);
		if (!st->d.retry->retries || st->rb.data > PX_REPLAY_MAX) {
			st->rb_off = true;
			px_buf_drop(s, &st->rb);
		}
		if (rc && !px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT)) {
			px_stream_fail(st, 503, px_err_connect);
			return 0;
		}
	}
	if (st->rq == RQ_BODY && h1_header_has_token(h, n, "expect", "100-continue") &&
	    st->client_minor == 1) {
		/* we answer the expectation ourselves (Expect is not forwarded) */
		px_buf_get(s, &c->out);
		buf_printf(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	/* px_conn_progress writes the head and then sets the upstream's
	 * events once: no epoll_ctl churn per request */
	return 0;
}

/* ---- body pumps -------------------------------------------------------------- */

/* Move request body bytes c->in → up->out (RQ_BODY). 0, or -EPROTO on a bad
 * chunk (the stream was failed). */
static int px_pump_req(struct px_stream *st)
{
	struct px_conn *c = st->c;
	struct px_up *u = st->up;
	size_t before = u ? u->out.data : 0;

	while (st->rq == RQ_BODY && c->in.data && u && u->out.data < PX_HIGH) {
		if (st->req_framing == H1_BODY_LENGTH) {
			size_t k = c->in.data;

			if (k > st->req_left)
				k = st->req_left;
			if (k > PX_HIGH - u->out.data)
				k = PX_HIGH - u->out.data;
			buf_append(&u->out, buf_head(&c->in), k);
			buf_consume(&c->in, k);
			st->req_left -= k;
			st->bytes_in += k;
			if (!st->req_left)
				st->rq = RQ_DONE;
		} else {
			size_t in = c->in.data, len = in;
			ssize_t left = h1_decode_chunked(&st->req_ck, buf_head(&c->in), &len);

			if (left < 0) {
				st->err = h1_err_str((int)left);
				px_stream_fail(st, 400, st->err);
				return -EPROTO;
			}
			if (len)
				buf_printf(&u->out, "%zx\r\n", len);
			buf_append(&u->out, buf_head(&c->in), len);
			if (len)
				buf_append(&u->out, "\r\n", 2);
			st->bytes_in += in - left;
			if (left > 0 || h1_chunked_done(&st->req_ck)) {
				/* leftover (pipelined) bytes sit at len..len+left */
				memmove(buf_head(&c->in) + in - left, buf_head(&c->in) + len, left);
				buf_append(&u->out, "0\r\n\r\n", 5);
				st->rq = RQ_DONE;
			}
			buf_consume(&c->in, in - left);
		}
	}
	/* mirror what was appended (only appends happened above) */
	if (u && !st->rb_off && u->out.data > before)
		px_replay_add(st, buf_head(&u->out) + before, u->out.data - before);
	return 0;
}

static void px_resp_emit_body(struct px_stream *st, const char *p, size_t len)
{
	struct buf *o = &st->c->out;

	if (!len)
		return;
	st->bytes_out += len;	/* payload bytes, as the access log documents */
	if (st->out_chunked)
		buf_printf(o, "%zx\r\n", len);
	buf_append(o, p, len);
	if (st->out_chunked)
		buf_append(o, "\r\n", 2);
}

static void px_resp_finish(struct px_stream *st)
{
	if (st->out_chunked)
		buf_append(&st->c->out, "0\r\n\r\n", 5);
	st->rs = RS_DONE;
}

/* Parse the response head in up->in and write the client's head. 0 when
 * parsed (or more bytes needed), -EPROTO when the stream was failed. */
static int px_resp_head(struct px_stream *st)
{
	struct px_conn *c = st->c;
	struct px_up *u = st->up;
	struct h1_header h[PX_MAX_HDRS];
	size_t n = PX_MAX_HDRS, i;
	struct h1_response r;
	uint64_t cl = 0;
	int rc, fr;
	bool close_client;

	for (;;) {
		n = PX_MAX_HDRS;
		rc = h1_parse_response(buf_head(&u->in), u->in.data, st->up_last_len,
				       &c->srv->lim, &r, h, &n);
		if (rc == -EAGAIN) {
			st->up_last_len = u->in.data;
			if (u->eof) {
				if (!u->in.data &&
				    px_stream_retry(st, st->d.retry->on & PX_RETRY_RESET))
					return 1;	/* restarted */
				px_stream_fail(st, 502, u->in.data ? px_err_bad_upstream :
					       px_err_upstream_closed);
				return -EPROTO;
			}
			return 0;
		}
		st->up_last_len = 0;
		if (rc < 0) {
			px_stream_fail(st, 502, px_err_bad_upstream);
			return -EPROTO;
		}
		if (r.status >= 200)
			break;
		if (r.status == 101) {	/* we never forward Upgrade: a 101 is a protocol error */
			px_stream_fail(st, 502, px_err_bad_upstream);
			return -EPROTO;
		}
		buf_consume(&u->in, rc);	/* other 1xx: ours to drop (Expect is not forwarded) */
	}
	if (px_retry_status(st->d.retry, r.status) && px_stream_retry(st, true))
		return 1;	/* restarted; nothing reached the client */
	fr = h1_body_framing(h, n, 0, r.status, st->head_req, &cl);
	if (fr < 0) {
		px_stream_fail(st, 502, px_err_bad_upstream);
		return -EPROTO;
	}
	st->status = r.status;
	st->resp_framing = fr;
	st->resp_left = cl;
	st->up_keep = r.minor_version == 1 && fr != H1_BODY_EOF &&
		      !h1_header_has_token(h, n, "connection", "close");
	/* a 1.0 client cannot read chunked; EOF-delimited bodies need a close
	 * unless we can re-chunk them */
	st->out_chunked = st->client_minor == 1 && (fr == H1_BODY_CHUNKED || fr == H1_BODY_EOF);
	if ((fr == H1_BODY_CHUNKED || fr == H1_BODY_EOF) && st->client_minor == 0)
		st->client_keep = false;
	close_client = !st->client_keep || c->rd_eof;
	px_buf_get(c->srv, &c->out);
	buf_printf(&c->out, "HTTP/1.1 %d %.*s\r\n", r.status, (int)r.reason_len, r.reason);
	for (i = 0; i < n; i++) {
		if (st->head_req && px_name_is(&h[i], "content-length"))
			goto keep;	/* HEAD: the length of the body not sent */
		if (px_hop_by_hop(&h[i], h, n) ||
		    px_mods_drop(st->d.resp_mods, st->d.n_resp_mods, &h[i]))
			continue;
keep:
		buf_printf(&c->out, "%.*s: %.*s\r\n", (int)h[i].name_len, h[i].name,
			   (int)h[i].value_len, h[i].value);
	}
	px_mods_emit(&c->out, st->d.resp_mods, st->d.n_resp_mods);
	if (fr == H1_BODY_LENGTH)
		buf_printf(&c->out, "Content-Length: %llu\r\n", (unsigned long long)cl);
	else if (st->out_chunked)
		buf_printf(&c->out, "Transfer-Encoding: chunked\r\n");
	if (close_client)
		buf_printf(&c->out, "Connection: close\r\n");
	else if (st->client_minor == 0)
		buf_printf(&c->out, "Connection: keep-alive\r\n");
	buf_printf(&c->out, "\r\n");
	buf_consume(&u->in, rc);
	st->rs = RS_BODY;
	if (fr == H1_BODY_NONE || (fr == H1_BODY_LENGTH && !cl))
		px_resp_finish(st);
	return 0;
}

/* Move response bytes up->in → c->out. */
static int px_pump_resp(struct px_stream *st)
{
	struct px_conn *c = st->c;
	struct px_up *u = st->up;

	if (st->rs == RS_HEAD && (u->in.data || u->eof))
		if (px_resp_head(st))
			return -EPROTO;
	while (st->rs == RS_BODY && u->in.data && c->out.data < PX_HIGH) {
		if (st->resp_framing == H1_BODY_LENGTH) {
			size_t k = u->in.data < st->resp_left ? u->in.data : st->resp_left;

			px_resp_emit_body(st, buf_head(&u->in), k);
			buf_consume(&u->in, k);
			st->resp_left -= k;
			if (!st->resp_left)
				px_resp_finish(st);
		} else if (st->resp_framing == H1_BODY_CHUNKED) {
			size_t in = u->in.data, len = in;
			ssize_t left = h1_decode_chunked(&st->resp_ck, buf_head(&u->in), &len);

			if (left < 0) {
				px_stream_fail(st, 502, px_err_bad_upstream);
				return -EPROTO;
			}
			px_resp_emit_body(st, buf_head(&u->in), len);
			buf_consume(&u->in, in);
			if (left > 0 || h1_chunked_done(&st->resp_ck)) {
				if (left > 0)
					st->up_keep = false;	/* junk after the body */
				px_resp_finish(st);
			}
		} else {
			px_resp_emit_body(st, buf_head(&u->in), u->in.data);
			buf_consume(&u->in, u->in.data);
		}
	}
	if (st->rs == RS_BODY && u->eof && !u->in.data) {
		if (st->resp_framing != H1_BODY_EOF) {
			px_stream_fail(st, 502, px_err_upstream_closed);
			return -EPROTO;
		}
		px_resp_finish(st);
	}
	return 0;
}

/* ---- event handlers ------------------------------------------------------------ */

static void px_up_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_up *u = arg;
	struct px_stream *st = u->st;
	struct px_conn *c;
	ssize_t n;

	(void)loop;
	(void)fd;
	if (!st) {		/* idle in the pool: the peer closed or sent junk */
		if (!(events & (EV_READ | EV_ERROR)))
			return;
		px_pool_remove(u->srv, u);
		px_up_close(u);
		return;
	}
	c = st->c;
	if (u->connecting) {
		if (!(events & (EV_WRITE | EV_ERROR)))
			return;
		if (net_connect_result(u->fd)) {
			if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
				px_stream_fail(st, 503, px_err_connect);
			goto progress;
		}
		u->connecting = false;
		st->rs = RS_HEAD;
		px_stream_arm(st);	/* the connect deadline no longer applies */
	}
	if (u->out.data) {
		n = buf_write_fd(&u->out, u->fd);
		if (n < 0 && n != -EAGAIN) {
			u->eof = true;
			if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_RESET))
				px_stream_fail(st, 502, px_err_upstream_closed);
			goto progress;
		}
	}
	if ((events & (EV_READ | EV_ERROR)) && !u->eof && c->out.data < PX_HIGH) {
		px_buf_get(u->srv, &u->in);
		n = buf_read_fd(&u->in, u->fd, 0);
		if (n == 0 || (n < 0 && n != -EAGAIN))
			u->eof = true;
	}
progress:
	px_conn_progress(c);
}

/* Whether the client socket should be read now. The same test arms
 * EV_READ and gates the read, so a level-triggered event we would not serve
 * never stays armed (no spinning). Reading stays armed across requests (no
 * epoll_ctl per request); pipelined bytes simply wait in c->in. */
static bool px_conn_want_read(const struct px_conn *c)
{
	const struct px_stream *st = c->st;
	size_t lim = c->srv->lim.max_head + c->srv->lim.max_line;

	if (c->rd_eof || c->closing || c->out.data >= PX_HIGH)
		return false;	/* (a client not reading our answers) */
	if (st && st->rq == RQ_BODY)	/* backpressure from the upstream */
		return st->up && st->up->out.data < PX_HIGH && c->in.data < PX_HIGH;
	return c->in.data < (lim > PX_HIGH ? lim : PX_HIGH);
}

static void px_conn_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_conn *c = arg;
	ssize_t n;

	(void)loop;
	(void)fd;
	if ((events & (EV_READ | EV_ERROR)) && px_conn_want_read(c)) {
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

	if (c->out.data)
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
static void px_conn_progress(struct px_conn *c)
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
			if (st->up && st->up->out.data) {
				ssize_t n = buf_write_fd(&st->up->out, st->up->fd);

				if (n < 0 && n != -EAGAIN) {
					st->up->eof = true;
					if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_RESET))
						px_stream_fail(st, 502, px_err_upstream_closed);
					continue;
				}
			}
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

static int px_load(struct px_server *s, const struct px_config *cfg, struct px_table **out)
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
	rc = px_table_build(st, out, eb, sizeof(eb));
	if (rc) {
		zh_err("proxy: routes: %s", eb);
		md_state_free(st);
	}
	return rc;
}

static const struct px_config *px_cfg;

static void px_reload_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;
	struct px_table *t;

	(void)loop;
	(void)id;
	s->reload_timer = 0;
	if (px_load(s, px_cfg, &t)) {
		s->reload_errors++;
		return;	/* keep serving the last good table */
	}
	px_table_unref(s->tbl);
	s->tbl = t;
	s->reloads++;
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

static void px_signal_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	if (read(fd, &si, sizeof(si)) > 0)
		ev_stop(loop);
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
	/* sweep at a quarter of the shorter idle timeout, between 10 ms and 1 s */
	s.sweep_ns = px_min_dl(s.client_idle_ns, s.up_idle_ns) / 4;
	s.sweep_ns = s.sweep_ns < 10 * PX_MS ? 10 * PX_MS : s.sweep_ns > 1000 * PX_MS ?
		     1000 * PX_MS : s.sweep_ns;
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
	rc = px_load(&s, cfg, &s.tbl);
	if (rc)
		goto out;
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
	s.lfd = net_listen(&a, SOCK_STREAM, 0, 4096);
	if (s.lfd < 0) {
		rc = s.lfd;
		zh_err("proxy: listen on %s: %s", cfg->listen, strerror(-rc));
		goto out;
	}
	ev_add(s.loop, s.lfd, EV_READ, px_accept_cb, &s);
	s.sweep_timer = ev_timer_add(s.loop, ev_now_ns() + s.sweep_ns, px_sweep_cb, &s);
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
	rc = ev_run(s.loop);
out:
	/* connections still open are released with the process */
	while (s.idle) {
		struct px_up *u = s.idle;

		s.idle = u->next;
		px_up_close(u);
	}
	if (s.sfd >= 0)
		close(s.sfd);
	if (s.stats_fd >= 0)
		close(s.stats_fd);
	if (s.lfd >= 0)
		close(s.lfd);
	if (s.loop)
		ev_loop_free(s.loop);
	if (s.alog)
		fclose(s.alog);
	px_table_unref(s.tbl);
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
