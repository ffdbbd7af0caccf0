/* upstream.c — the proxy's upstream side (px_): the idle pool of upstream
 * connections, tries and retries with the budget, stream timers and the
 * idle sweep. Invariants 4 and 6-12 of the design note in proxy.c.
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

/* ---- upstream connections ------------------------------------------------ */

static void px_pool_kick(struct px_server *s, int host);

void px_up_close(struct px_up *u)
{
	struct px_server *s = u->srv;
	struct px_host *h = &s->hosts[u->host];

	h->n_conns--;
	if (h->pend_head)
		px_pool_kick(s, u->host);	/* a connection slot freed */
	px_wq_del(s, &u->wr);
	ev_del(s->loop, u->fd);
	close(u->fd);
	px_buf_drop(s, &u->in);
	px_buf_drop(s, &u->out);
	free(u);
}


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

/* An idle pooled upstream to ip:port, taken out of the pool, or NULL. */
static struct px_up *px_up_take_idle(struct px_server *s, uint32_t ip, uint16_t port)
{
	struct px_up **pp, *u;

	for (pp = &s->idle; *pp; pp = &(*pp)->next)
		if ((*pp)->ip == ip && (*pp)->port == port) {
			u = *pp;
			*pp = u->next;
			s->n_idle--;
			u->next = NULL;
			return u;
		}
	return NULL;
}

/* A new upstream connection (connecting) to hosts[host]. 0 or -errno. */
static int px_up_connect(struct px_server *s, int host, struct px_up **out)
{
	struct px_host *h = &s->hosts[host];
	struct sockaddr_in *sin;
	struct net_addr a;
	struct px_up *u;
	int fd;

	memset(&a, 0, sizeof(a));
	sin = (struct sockaddr_in *)&a.ss;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = h->ip;
	sin->sin_port = htons(h->port);
	a.len = sizeof(*sin);
	fd = px_netpol_connect(s, &a);	/* from the node proxy address (netpol.c) */
	if (fd < 0)
		return fd;
	net_set_nodelay(fd);
	u = zh_calloc(1, sizeof(*u));
	u->srv = s;
	u->fd = fd;
	u->ip = h->ip;
	u->port = h->port;
	u->host = host;
	u->connecting = true;
	u->mask = -1;
	px_wr_init(&u->wr, PX_WR_UP);
	h->n_conns++;
	*out = u;
	return 0;
}

void px_up_release(struct px_up *u, bool reusable)
{
	struct px_server *s = u->srv;

	u->st = NULL;
	if (reusable && u->max_reqs && u->n_reqs >= u->max_reqs) {
		reusable = false;	/* max requests per connection reached */
		s->n_max_reqs_closed++;
	}
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
	if (s->hosts[u->host].pend_head)
		px_pool_kick(s, u->host);	/* an idle connection for a waiting stream */
}

void px_up_update(struct px_up *u)
{
	struct px_stream *st = u->st;
	int mask = 0;

	if (!st) {
		mask = EV_READ;	/* idle: notice the peer closing */
	} else if (u->connecting) {
		mask = EV_WRITE;
	} else {
		if (u->out.data && u->wr.slot < 0)	/* batch.c invariant 3 */
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

/* ---- timeouts (invariants 6-8) -------------------------------------------- */


uint64_t px_min_dl(uint64_t a, uint64_t b)
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

void px_budget_request(struct px_server *s)
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
void px_replay_add(struct px_stream *st, const void *p, size_t n)
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

/* Put st on hosts[host]'s pending FIFO (invariant 22). */
static void px_pend_add(struct px_stream *st, int host)
{
	struct px_server *s = st->c->srv;
	struct px_host *h = &s->hosts[host];

	st->pending = true;
	st->pend_host = host;
	st->pend_next = NULL;
	if (h->pend_tail)
		h->pend_tail->pend_next = st;
	else
		h->pend_head = st;
	h->pend_tail = st;
	h->n_pending++;
	s->n_pending++;
	s->n_pending_total++;
}

void px_pend_remove(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	struct px_host *h;
	struct px_stream **pp, *prev = NULL;

	if (!st->pending)
		return;
	h = &s->hosts[st->pend_host];
	for (pp = &h->pend_head; *pp; prev = *pp, pp = &(*pp)->pend_next)
		if (*pp == st) {
			*pp = st->pend_next;
			if (h->pend_tail == st)
				h->pend_tail = prev;
			break;
		}
	st->pending = false;
	st->pend_next = NULL;
	h->n_pending--;
	s->n_pending--;
}

/* Attach upstream u to st and start sending the replay copy. */
static void px_stream_attach(struct px_stream *st, struct px_up *u, int host)
{
	struct px_server *s = st->c->srv;

	st->up = u;
	u->st = st;
	u->n_reqs++;
	u->max_reqs = st->d.pool->max_requests_per_conn;
	st->host = host;
	s->hosts[host].inflight++;
	st->rs = u->connecting ? RS_CONNECT : RS_HEAD;
	st->try_t0 = ev_now_ns();
	st->up_last_len = 0;
	px_buf_get(s, &u->out);
	buf_append(&u->out, buf_head(&st->rb), st->rb.data);
	if (!st->d.retry->retries || st->rb.data > PX_REPLAY_MAX) {
		st->rb_off = true;	/* no retry possible: keep no copy */
		px_buf_drop(s, &st->rb);
	}
	px_stream_arm(st);
}

/* Start one try on st->d's endpoint: a pooled idle upstream, else a new
 * one while the endpoint has fewer than max_connections, else wait in its
 * pending FIFO while it holds fewer than max_pending (invariants 21-22).
 * 0 (under way or pending), -EBUSY when the pool overflows (answer 503,
 * never retried: that would only add load), or -errno when the connect
 * failed at once. */
int px_stream_try(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	const struct px_pool_policy *pool = st->d.pool;
	struct px_up *u;
	int host, rc;

	st->tries++;
	host = px_host_find(s, st->d.ip, st->d.port, true) - s->hosts;
	u = px_up_take_idle(s, st->d.ip, st->d.port);
	if (!u && s->hosts[host].n_conns >= pool->max_connections) {
		if (s->hosts[host].n_pending >= pool->max_pending) {
			s->n_overflow++;
			return -EBUSY;
		}
		px_pend_add(st, host);
		st->rs = RS_CONNECT;
		st->try_t0 = ev_now_ns();	/* the wait is bounded by the connect timeout */
		px_stream_arm(st);
		return 0;
	}
	if (!u && (rc = px_up_connect(s, host, &u)))
		return rc;
	px_stream_attach(st, u, host);
	return 0;
}

/* Serve the streams waiting on hosts' pending FIFOs as slots free: a
 * zero-delay timer, so a slot freed deep inside one connection's progress
 * never runs another connection's progress re-entrantly. */
static void px_pool_kick_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_server *s = arg;
	int i;

	(void)loop;
	(void)id;
	s->kick_timer = 0;
	for (i = 0; s->n_pending && i < s->n_hosts; i++) {
		struct px_stream *st;

		/* re-read s->hosts every round: progress may grow the array */
		while ((st = s->hosts[i].pend_head)) {
			struct px_conn *c = st->c;
			struct px_up *u = px_up_take_idle(s, s->hosts[i].ip, s->hosts[i].port);
			int rc = 0;

			if (!u && s->hosts[i].n_conns >= st->d.pool->max_connections)
				break;
			px_pend_remove(st);
			if (!u)
				rc = px_up_connect(s, i, &u);
			if (!rc)
				px_stream_attach(st, u, i);
			else if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
				px_stream_fail(st, 503, px_err_connect);
			px_conn_progress(c);
		}
	}
}

static void px_pool_kick(struct px_server *s, int host)
{
	(void)host;
	if (!s->kick_timer)
		s->kick_timer = ev_timer_add(s->loop, ev_now_ns(), px_pool_kick_cb, s);
}

/* Retry the stream when eligible (the caller's retry-on test), within the
 * policy's count, replayable, and within the budget. True when a new try
 * is under way (st->up replaced or connecting: invariant 10); false leaves
 * the stream to the caller's failure path (st->up may be NULL). */
bool px_stream_retry(struct px_stream *st, bool eligible)
{
	struct px_server *s = st->c->srv;
	uint64_t cap;

	if (!eligible || st->rb_off || st->tries > st->d.retry->retries ||
	    !(st->rs == RS_CONNECT || st->rs == RS_HEAD) || !px_budget_take(s))
		return false;
	s->n_retries++;
	st->failed_tries++;
	px_try_end(st);
	px_outlier_note(st, true);
	if (st->up) {
		px_up_release(st->up, false);
		st->up = NULL;
	}
	px_stream_pick(st, true);
	/* backoff (Envoy): uniform in [0, min(250 ms, 25 ms x 2^(retry-1))]
	 * ("full jitter"); the try starts from the stream timer (invariant 10) */
	cap = PX_BACKOFF_BASE_NS << (st->failed_tries - 1 < 4 ? st->failed_tries - 1 : 4);
	cap = cap < PX_BACKOFF_MAX_NS ? cap : PX_BACKOFF_MAX_NS;
	st->rs = RS_CONNECT;
	if (st->d.retry->backoff_ms) {
		/* HTTPRoute retry.backoff: at least that long, up to 1.25x */
		uint64_t b = st->d.retry->backoff_ms * 1000000ULL;

		st->retry_at = ev_now_ns() + b + px_rand(s) % (b / 4 + 1);
	} else {
		st->retry_at = ev_now_ns() + px_rand(s) % (cap + 1);
	}
	px_stream_arm(st);
	return true;
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
	if (st->pending) {
		/* waited the connect timeout for a pool slot (invariant 22) */
		px_pend_remove(st);
		if (!(rq && now >= rq)) {
			s->n_pending_timeouts++;
			px_stream_fail(st, 503, px_err_overflow);
			goto out;
		}
	}
	if (st->retry_at && !(rq && now >= rq)) {
		/* the backoff is over: the retry's try starts now */
		int rc;

		if (now < st->retry_at) {
			px_stream_arm(st);
			return;
		}
		st->retry_at = 0;
		/* the retry's endpoint was re-picked: judge it (netpol.c 2) */
		if (!px_netpol_check(st))
			goto out;
		rc = px_stream_try(st);
		if (rc == -EBUSY)
			px_stream_fail(st, 503, px_err_overflow);
		else if (rc && !px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
			px_stream_fail(st, 503, px_err_connect);
		goto out;
	}
	st->retry_at = 0;
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
	uint64_t dl;

	if (st->retry_at) {	/* backing off: no try in flight */
		dl = px_min_dl(px_dl_request(st), st->retry_at);
	} else {
		dl = px_min_dl(px_dl_request(st), px_dl_backend(st));
		if (st->rs == RS_CONNECT)
			dl = px_min_dl(dl, st->try_t0 + s->connect_ns);
	}
	if (dl == st->deadline)
		return;
	if (st->timer)
		ev_timer_del(s->loop, st->timer);
	st->timer = dl ? ev_timer_add(s->loop, dl, px_stream_timeout_cb, st) : 0;
	st->deadline = dl;
}

/* Route reload (invariant 20): pooled upstreams to endpoints that are in no
 * backend of the new table are closed now, not at their idle timeout. */
void px_pool_prune(struct px_server *s)
{
	struct px_up **pp, *u;

	for (pp = &s->idle; (u = *pp);) {
		if (!px_table_has_ep(s->tbl, u->ip, u->port)) {
			*pp = u->next;
			s->n_idle--;
			s->n_up_gone++;
			px_up_close(u);
		} else {
			pp = &u->next;
		}
	}
}

/* Periodic idle sweep (invariant 8). */
void px_sweep_cb(struct ev_loop *loop, uint64_t id, void *arg)
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

/* ---- event handlers ------------------------------------------------------------ */

/* A stream's connected upstream with room on the client side for more. */
bool px_up_want_read(const struct px_up *u)
{
	return u->st && !u->connecting && !u->eof && u->st->c->out.data < PX_HIGH;
}

void px_up_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_up *u = arg;
	struct px_stream *st = u->st;
	struct px_conn *c;
	ssize_t n;

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
	if (events & EV_WRITE)
		u->wr.blocked = false;	/* room again: progress queues the rest (batch.c) */
	if ((events & (EV_READ | EV_ERROR)) && u->rd_iter != ev_iteration(loop) &&
	    px_up_want_read(u)) {	/* (px_rd_batch did not read it) */
		px_buf_get(u->srv, &u->in);
		n = buf_read_fd(&u->in, u->fd, 0);
		if (n == 0 || (n < 0 && n != -EAGAIN))
			u->eof = true;
	}
progress:
	px_conn_progress(c);
}
