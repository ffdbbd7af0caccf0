/* batch.c — the proxy's batched socket I/O: receives after the wait,
 * sends before the next one.
 *
 * Design note. Per request the proxy receives twice and sends twice (the
 * request from the client and to the upstream, the response back). On this
 * VM a system call's entry and exit cost about as much as a short-circuited
 * send or receive itself, so neither is made where it arises:
 *  - receives: after epoll returns, the loop's after-poll hook
 *    (px_rd_batch) sees every ready file; each client or upstream
 *    connection that wants to read gets one receive into its buffer, all in
 *    one io_uring_enter (ioq.h). Each is marked with the iteration
 *    (rd_iter), and its callback then only acts on the bytes;
 *  - sends: the socket is queued, and before the loop next waits
 *    (ev_set_before_poll, Redis's beforeSleep) every queued output buffer
 *    goes out in one batch (px_wq_flush).
 * HAProxy and h2o likewise send at the end of their loop turn, not per
 * event. A turn whose successor finds events already ready lets them join
 * before the flush (ev_set_gather, at most one turn in a row: server.c), so
 * one send per socket carries both turns' bytes. With io_uring unavailable, ioq falls back to one call each, in the
 * same places.
 *
 *   producer (px_conn_progress)                px_wq_flush (before poll)
 *   ------------------------------------      -------------------------------
 *   out gains bytes -> px_wq_add(w)     --->   swap wq <-> wq_run; one ioq
 *                                              batch of every run entry's out;
 *                                              then, per entry: consume what
 *                                              was sent; short or -EAGAIN ->
 *                                              blocked (EV_WRITE); error ->
 *                                              the connection's error path;
 *                                              progress the connection (may
 *                                              queue more: next round)
 *
 * States of one px_wr: idle (slot -1) -> queued (slot in wq) -> in the batch
 * (slot in wq_run, in_run) -> idle, or blocked (idle + blocked) until its
 * EV_WRITE clears blocked and the connection queues again.
 *
 * Invariants:
 *  1. A queued or in-batch socket is in exactly one slot; px_wq_del (called
 *     by every close) empties that slot, so a batch never touches a freed
 *     connection: results are only recorded during ioq_flush, and acted on
 *     after it, skipping slots emptied meanwhile.
 *  2. A socket is queued at most once, so one batch never holds two sends on
 *     one fd (ioq.h's rule) and bytes go out in buffer order.
 *  3. While queued, a socket does not ask for EV_WRITE (px_conn_update,
 *     px_up_update): no epoll_ctl churn on the fast path. A blocked socket
 *     does, and is not queued again until EV_WRITE fires.
 *  4. px_wq_flush returns with nothing queued: rounds repeat while acting on
 *     results queued more (a pipelined request, a close after the last
 *     byte). Each round first runs the HTTP/2 upstream sessions kicked
 *     (h2up.c invariant 1; bounded there) and the HTTP/2 client
 *     connections queued to send (h2conn.c invariant 5), then only sends
 *     bytes already buffered; no socket is read here, so the rounds end.
 *  5. px_rd_batch only fills buffers and sets the read flags (rd_eof, eof)
 *     the callbacks would have set; it runs no callback and frees nothing,
 *     so every connection it saw is alive when its results are applied.
 *     A connection it read but whose callback an earlier callback
 *     suppressed (closed: the loop skips stale files) just loses bytes it
 *     would have lost anyway.
 */
#include "px_int.h"

#include <errno.h>
#include <stddef.h>

#define WR_OF(w, type) ((type *)(void *)((char *)(w) - offsetof(type, wr)))

static struct buf *wr_out(struct px_wr *w)
{
	return w->kind == PX_WR_CONN ? &WR_OF(w, struct px_conn)->out
				     : &WR_OF(w, struct px_up)->out;
}

static int wr_fd(struct px_wr *w)
{
	return w->kind == PX_WR_CONN ? WR_OF(w, struct px_conn)->fd : WR_OF(w, struct px_up)->fd;
}

void px_wq_add(struct px_server *s, struct px_wr *w)
{
	if (w->slot >= 0 || w->blocked)
		return;		/* invariants 2 and 3 */
	if (s->n_wq == s->cap_wq) {
		s->cap_wq = s->cap_wq ? 2 * s->cap_wq : 64;
		s->wq = zh_realloc(s->wq, s->cap_wq * sizeof(*s->wq));
	}
	w->slot = (int)s->n_wq;
	w->in_run = false;
	s->wq[s->n_wq++] = w;
}

void px_wq_del(struct px_server *s, struct px_wr *w)
{
	if (w->slot < 0)
		return;
	(w->in_run ? s->wq_run : s->wq)[w->slot] = NULL;	/* invariant 1 */
	w->slot = -1;
	w->in_run = false;
}

static void record(void *tag, ssize_t res, void *arg)
{
	(void)arg;
	((struct px_wr *)tag)->res = res;
}

/* Every proxy socket's ev callback: the owning layer's handler. */
void px_io_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_wr *w = arg;

	(void)loop;
	(void)fd;
	w->io->event(w, events);
}

void px_wq_flush(struct ev_loop *loop, void *arg)
{
	struct px_server *s = arg;

	(void)loop;
	for (;;) {	/* invariant 4 */
		struct px_wr **t = s->wq;
		unsigned i, cap = s->cap_wq;

		/* HTTP/2 upstream sessions kicked this turn run first: what
		 * they frame joins this round (h2up.c invariant 1); */
		if (s->n_h2q)
			px_h2up_run_kicked(s);
		/* then HTTP/2 clients whose streams were answered send
		 * (h2conn.c invariant 5) */
		if (s->n_h2cq)
			px_h2_run_queued(s);
		if (!s->n_wq)
			break;
		t = s->wq;
		cap = s->cap_wq;

		/* this round's batch becomes wq_run; new queueing goes to wq */
		s->wq = s->wq_run;
		s->cap_wq = s->cap_run;
		s->wq_run = t;
		s->cap_run = cap;
		s->n_run = s->n_wq;
		s->n_wq = 0;
		for (i = 0; i < s->n_run; i++) {
			struct px_wr *w = s->wq_run[i];
			struct buf *b;

			if (!w)
				continue;
			w->in_run = true;
			b = wr_out(w);
			w->res = 0;
			if (!b->data)
				continue;
			if (!ioq_send(&s->sq, wr_fd(w), buf_head(b), b->data, w)) {
				ioq_flush(&s->sq, record, NULL);
				ioq_send(&s->sq, wr_fd(w), buf_head(b), b->data, w);
			}
			s->n_wq_sends++;
		}
		ioq_flush(&s->sq, record, NULL);
		s->n_wq_flushes++;
		for (i = 0; i < s->n_run; i++) {
			struct px_wr *w = s->wq_run[i];

			if (!w)
				continue;	/* closed by an earlier entry's progress */
			s->wq_run[i] = NULL;
			w->slot = -1;
			w->in_run = false;
			w->io->sent(w);	/* the owning layer acts on w->res */
		}
		s->n_run = 0;
	}
}

/* ---- receives (px_rd_batch) ---------------------------------------------- */

/* Receives per batch. Each holds a 16 KiB buffer until its callback runs,
 * so this bounds what a batch takes from the buffer pool (1 MiB); beyond
 * 64 the system call is amortised anyway. The rest read in their callbacks. */
#define PX_RD_BATCH 64

struct rd_ent {
	void *obj;		/* px_conn or px_up */
	bool conn;
	ssize_t res;
};

static void rd_record(void *tag, ssize_t res, void *arg)
{
	(void)arg;
	((struct rd_ent *)tag)->res = res;
}

void px_rd_batch(struct ev_loop *loop, const struct ev_ready *r, int n, void *arg)
{
	struct px_server *s = arg;
	struct rd_ent e[PX_RD_BATCH];
	uint64_t it = ev_iteration(loop), now = 0;
	int i, k = 0;

	for (i = 0; i < n && k < (int)(sizeof(e) / sizeof(e[0])); i++) {
		struct buf *b;
		size_t room;
		int fd;

		if (!(r[i].events & (EV_READ | EV_ERROR)))
			continue;
		if (r[i].cb != px_io_cb || !((struct px_wr *)r[i].arg)->io->want_read(r[i].arg))
			continue;
		if (((struct px_wr *)r[i].arg)->kind == PX_WR_CONN) {
			struct px_conn *c = WR_OF(r[i].arg, struct px_conn);

			b = &c->in;
			fd = c->fd;
			e[k] = (struct rd_ent){ .obj = c, .conn = true };
		} else {
			struct px_up *u = WR_OF(r[i].arg, struct px_up);

			b = &u->in;
			fd = u->fd;
			e[k] = (struct rd_ent){ .obj = u, .conn = false };
		}
		px_buf_get(s, b);
		room = buf_read_room(b);	/* may move the data: before buf_tail */
		if (!ioq_recv(&s->sq, fd, buf_tail(b), room, &e[k]))
			break;	/* (a full batch: the rest read in their callbacks) */
		k++;
	}
	if (k < 2) {	/* nothing to batch: the callback's own recv is as cheap */
		s->sq.n = 0;
		return;
	}
	ioq_flush(&s->sq, rd_record, NULL);
	s->n_rd_batches++;
	s->n_rd_recvs += (uint64_t)k;
	for (i = 0; i < k; i++) {
		ssize_t res = e[i].res;
		bool end = res == 0 || (res < 0 && res != -EAGAIN && res != -EINTR);

		if (e[i].conn) {
			struct px_conn *c = e[i].obj;

			c->rd_iter = it;
			if (res > 0) {
				buf_produce(&c->in, (size_t)res);
				c->last_active = now ? now : (now = ev_turn_ns());
			}
			if (end)
				c->rd_eof = true;
			if (!c->in.data)
				px_buf_put(s, &c->in);	/* nothing came: as an idle conn */
		} else {
			struct px_up *u = e[i].obj;

			u->rd_iter = it;
			if (res > 0)
				buf_produce(&u->in, (size_t)res);
			if (end)
				u->eof = true;
			if (!u->in.data)
				px_buf_put(s, &u->in);
		}
	}
}
