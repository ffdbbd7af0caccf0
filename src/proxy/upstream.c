/* upstream.c — the proxy's upstream layer (px_): upstream connections and
 * the per-endpoint pools (idle reuse, connection limits, the pending FIFO)
 * and the pooled upstreams' idle sweep. Invariants 4, 8 and 20-22 of
 * docs/proxy.md ("Design note").
 *
 * It reports to the stream it carries only through s->up_ops (struct
 * px_up_ops: stream.c's px_stream_up_ops) and calls nothing above it.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/log.h"
#include "zerohop/net.h"
#include "zerohop/proxy.h"
#include "px_int.h"

#define UP_OF(w) ((struct px_up *)(void *)((char *)(w) - offsetof(struct px_up, wr)))

/* ---- upstream connections ------------------------------------------------ */

static void px_pool_kick(struct px_server *s, int host);
static const struct px_io_ops px_up_io;

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
static struct px_up *px_up_take_idle(struct px_server *s, struct px_ip ip, uint16_t port)
{
	struct px_up **pp, *u;

	for (pp = &s->idle; *pp; pp = &(*pp)->next)
		if (px_ip_eq((*pp)->ip, ip) && (*pp)->port == port) {
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
	struct px_up *u;
	int fd;

	fd = px_netpol_connect(s, h->ip, h->port);	/* IPv4: from the node proxy address */
	if (fd < 0)
		return fd;
	u = zh_calloc(1, sizeof(*u));
	u->srv = s;
	u->fd = fd;
	u->ip = h->ip;
	u->port = h->port;
	u->host = host;
	u->connecting = true;
	u->mask = -1;
	px_wr_init(&u->wr, PX_WR_UP, &px_up_io);
	h->n_conns++;
	*out = u;
	return 0;
}

void px_up_release(struct px_up *u, bool reusable)
{
	struct px_server *s = u->srv;

	u->st = NULL;
	if (u->h2) {		/* a try on an HTTP/2 upstream (h2up.c) */
		px_h2up_release(u);
		return;
	}
	if (reusable && u->max_reqs && u->n_reqs >= u->max_reqs) {
		reusable = false;	/* max requests per connection reached */
		s->n_max_reqs_closed++;
	}
	if (!reusable || u->in.data || u->out.data || u->eof || u->wr_dead || u->connecting) {
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

	if (u->h2) {
		px_h2up_update(u);
		return;
	}
	if (!st) {
		mask = EV_READ;	/* idle: notice the peer closing */
	} else if (u->connecting) {
		mask = EV_WRITE;
	} else {
		if (u->out.data && u->wr.slot < 0 && !u->wr_dead)	/* batch.c invariant 3 */
			mask |= EV_WRITE;
		if (st->rs != RS_DONE && !u->eof && st->c->out.data < PX_HIGH)
			mask |= EV_READ;
	}
	if (mask == u->mask)
		return;
	if (!mask)
		ev_del(u->srv->loop, u->fd);
	else
		ev_add(u->srv->loop, u->fd, mask, px_io_cb, &u->wr);
	u->mask = mask;
}

/* ---- pools (invariants 21-22) -------------------------------------------- */

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

/* No slot for st now: -EAGAIN when put on hosts[host]'s pending FIFO,
 * -EBUSY (counted) when that holds max_pending already (invariant 22). */
static int px_pend_or_overflow(struct px_server *s, int host, struct px_stream *st)
{
	if (s->hosts[host].n_pending >= st->d.pool->max_pending) {
		s->n_overflow++;
		return -EBUSY;
	}
	px_pend_add(st, host);
	return -EAGAIN;
}

/* px_int.h: an idle pooled upstream, else a new one while the endpoint has
 * fewer than max_connections, else st waits in its pending FIFO while it
 * holds fewer than max_pending (invariants 21-22). */
int px_pool_get(struct px_server *s, int host, struct px_stream *st, struct px_up **out)
{
	const struct px_pool_policy *pool = st->d.pool;
	struct px_up *u;
	int rc;

	if (pool->h2c) {	/* multiplexed connections per endpoint (h2up.c) */
		/* no stream free below max_connections: wait like an HTTP/1.1
		 * try, behind those already waiting (FIFO) */
		if (s->hosts[host].pend_head ||
		    !px_h2up_room(s, host, pool->max_connections))
			return px_pend_or_overflow(s, host, st);
		return px_h2up_get(s, host, pool->max_connections, out);
	}
	u = px_up_take_idle(s, st->d.ip, st->d.port);
	if (!u && s->hosts[host].n_conns >= pool->max_connections)
		return px_pend_or_overflow(s, host, st);
	if (!u && (rc = px_up_connect(s, host, &u)))
		return rc;
	*out = u;
	return 0;
}

/* u carries st's try from now on. */
void px_up_attach(struct px_up *u, struct px_stream *st)
{
	u->st = st;
	u->n_reqs++;
	u->max_reqs = st->d.pool->max_requests_per_conn;
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
			const struct px_pool_policy *pool = st->d.pool;
			struct px_up *u = NULL;
			int rc = 0;

			if (pool->h2c) {	/* a stream on an h2c connection */
				if (!px_h2up_room(s, i, pool->max_connections))
					break;
				px_pend_remove(st);
				rc = px_h2up_get(s, i, pool->max_connections, &u);
				s->up_ops->slot(st, rc ? NULL : u, i, rc);
				continue;
			}
			u = px_up_take_idle(s, s->hosts[i].ip, s->hosts[i].port);
			if (!u && s->hosts[i].n_conns >= pool->max_connections)
				break;
			px_pend_remove(st);
			if (!u)
				rc = px_up_connect(s, i, &u);
			s->up_ops->slot(st, rc ? NULL : u, i, rc);
		}
	}
}

static void px_pool_kick(struct px_server *s, int host)
{
	(void)host;
	if (!s->kick_timer)
		s->kick_timer = ev_timer_add(s->loop, ev_now_ns(), px_pool_kick_cb, s);
}

void px_pool_wake(struct px_server *s, int host)
{
	if (host >= 0 && host < s->n_hosts && s->hosts[host].pend_head)
		px_pool_kick(s, host);
}

/* Route reload (invariant 20): pooled upstreams to endpoints that are in no
 * backend of the new table are closed now, not at their idle timeout. */
void px_pool_prune(struct px_server *s)
{
	struct px_up **pp, *u;

	px_h2up_close_idle(s, ev_now_ns(), true);
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

/* Idle sweep (invariant 8): pooled upstreams idle for upstream_idle. */
void px_pool_close_idle(struct px_server *s, uint64_t now)
{
	struct px_up **pp, *u;

	px_h2up_close_idle(s, now, false);
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
}

void px_pool_close_all(struct px_server *s)
{
	while (s->idle) {
		struct px_up *u = s->idle;

		s->idle = u->next;
		s->n_idle--;
		px_up_close(u);
	}
}

/* ---- events (batch.c's px_io_ops) ------------------------------------------------ */

/* A stream's connected upstream with room on the client side for more. */
static bool px_up_want_read(const struct px_wr *w)
{
	const struct px_up *u = UP_OF(w);

	return u->st && !u->connecting && !u->eof && u->st->c->out.data < PX_HIGH;
}

static void px_up_event(struct px_wr *w, int events)
{
	struct px_up *u = UP_OF(w);
	struct px_server *s = u->srv;
	struct px_stream *st = u->st;
	ssize_t n;

	if (!st) {		/* idle in the pool: the peer closed or sent junk */
		if (!(events & (EV_READ | EV_ERROR)))
			return;
		px_pool_remove(s, u);
		px_up_close(u);
		return;
	}
	if (u->connecting) {
		if (!(events & (EV_WRITE | EV_ERROR)))
			return;
		if (net_connect_result(u->fd)) {
			s->up_ops->connect_failed(st);
			return;
		}
		u->connecting = false;
		s->up_ops->connected(st);
	}
	if (events & EV_WRITE)
		u->wr.blocked = false;	/* room again: progress queues the rest (batch.c) */
	if ((events & (EV_READ | EV_ERROR)) && u->rd_iter != ev_iteration(s->loop) &&
	    px_up_want_read(w)) {	/* (px_rd_batch did not read it) */
		px_buf_get(s, &u->in);
		n = buf_read_fd(&u->in, u->fd, 0);
		if (n == 0 || (n < 0 && n != -EAGAIN))
			u->eof = true;
	}
	s->up_ops->progress(st);
}

/* The batch's send result (batch.c). A failed send: the upstream is gone.
 * What it answered before it closed (an answer before the whole request,
 * then a close that resets) may still wait in the socket: while connected,
 * nothing more is sent and the answer is read to the end, so the stream
 * sees it, or an end without one, which it takes as a reset (px_resp_head)
 * as nginx and HAProxy read a response after a failed send. Otherwise
 * (connecting, or nothing to read it for) the stream takes it as a reset
 * at once. */
static void px_up_sent(struct px_wr *w)
{
	struct px_up *u = UP_OF(w);
	struct px_stream *st = u->st;
	ssize_t res = u->wr.res;

	if (res < 0 && res != -EAGAIN && st && !u->connecting && !u->eof &&
	    (st->rs == RS_HEAD || st->rs == RS_BODY)) {
		u->wr_dead = true;
		u->out.data = u->out.head = 0;
		u->srv->up_ops->progress(st);
		return;
	}
	if (res < 0 && res != -EAGAIN) {
		u->eof = true;
		if (st)
			u->srv->up_ops->reset(st);
		else
			px_up_update(u);
		return;
	}
	if (res > 0)
		buf_consume(&u->out, (size_t)res);
	if (u->out.data)
		u->wr.blocked = true;
	if (st)
		u->srv->up_ops->progress(st);
	else
		px_up_update(u);
}

static const struct px_io_ops px_up_io = {
	.event = px_up_event,
	.want_read = px_up_want_read,
	.sent = px_up_sent,
};
