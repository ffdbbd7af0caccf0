/* mirror.c — Gateway API RequestMirror: a fire-and-forget copy of a request
 * to another backend; the client's request never waits for it, and what the
 * mirror answers (or whether it answers) never reaches the client.
 *
 * Stream side (stream.c calls these):
 *   px_mirror_begin   after the request head was rebuilt for the upstream
 *                     (st->rb holds it) and px_route chose mirrors: copy the
 *                     head into st->mb;
 *   px_mirror_add     every request body byte appended upstream, framed as
 *                     sent (Content-Length or re-chunked);
 *   px_mirror_done    the request is complete: one mirror connection per
 *                     chosen target gets its own copy; st->mb is freed.
 *
 * A mirror connection:
 *
 *   CONNECTING ──connected──▶ SENDING ──all sent──▶ READING ──first bytes,
 *       │                        │                     │      EOF, error or
 *       └────────── error or PX_MIRROR_TIMEOUT_NS ─────┴────▶ closed (freed)
 *
 * Invariants:
 *  1. Bounded: at most PX_MIRROR_MAX mirror connections in flight per proxy;
 *     a mirror beyond that is dropped (counted, reason "limit"). A request
 *     larger than PX_REPLAY_MAX is not mirrored (reason "too_large"); a
 *     mirror NetworkPolicy would deny (client → mirror endpoint) is not
 *     sent (reason "policy").
 *  2. A mirror is never pooled or reused: a new connection (from the proxy's
 *     upstream source address, netpol.c) carries one request; it closes when
 *     the first response bytes arrive (the status is not needed), on EOF or
 *     error, or at its deadline. So it holds at most one buffer and one fd,
 *     and lives at most PX_MIRROR_TIMEOUT_NS.
 *  3. Mirror traffic is invisible to the stream: no retries, no outlier
 *     accounting, no effect on the client's status or timing beyond the
 *     copy kept while the request is read (bounded by PX_REPLAY_MAX).
 *  4. Counted in /metrics: zerohop_proxy_mirrors_total{result="sent"|"failed"}
 *     (failed: connect, send or timeout before any answer) and
 *     zerohop_proxy_mirror_dropped_total{reason}.
 *  5. A mirror port that declares HTTP/2 (px_mirror_to.h2c) gets the copy
 *     as an HTTP/2 request on a connection of its own (mirror_h2.c, one
 *     stream, m->h2): SENDING sends what the session has to send, READING
 *     feeds what arrives into it and goes back to SENDING when that made
 *     more to send (SETTINGS ACK, DATA a WINDOW_UPDATE let through); the
 *     copy is answered at its response HEADERS (mirror_h2.c M2), not at
 *     the first bytes (the backend's SETTINGS come first). The same
 *     bounds, deadline and counters apply.
 */
#include "px_int.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "zerohop/net.h"
#include "zerohop/policy.h"

enum px_mirror_state { MS_CONNECTING, MS_SENDING, MS_READING };

struct px_mirror_conn {
	struct px_server *srv;
	int fd;
	enum px_mirror_state state;
	char *data;		/* the request copy (h2: the session's output), owned */
	size_t len, off;	/* bytes, bytes sent */
	struct px_mirror_h2 *h2;	/* HTTP/2 copy (invariant 5), NULL = HTTP/1.1 */
	uint64_t timer;
	struct px_mirror_conn *prev, *next;
};

static void px_mirror_cb(struct ev_loop *loop, int fd, int events, void *arg);

static void px_mirror_close(struct px_mirror_conn *m, bool answered)
{
	struct px_server *s = m->srv;

	if (answered)
		s->n_mirror_sent++;
	else
		s->n_mirror_failed++;
	if (m->timer)
		ev_timer_del(s->loop, m->timer);
	ev_del(s->loop, m->fd);
	close(m->fd);
	if (m->prev)
		m->prev->next = m->next;
	else
		s->mirrors = m->next;
	if (m->next)
		m->next->prev = m->prev;
	s->n_mirrors_inflight--;
	px_mirror_h2_free(m->h2);
	free(m->data);
	free(m);
}

static void px_mirror_timeout(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_mirror_conn *m = arg;

	(void)loop;
	(void)id;
	m->timer = 0;
	px_mirror_close(m, false);
}

/* Send what is left; 0 all sent, -EAGAIN wait for EV_WRITE, -errno. */
static int px_mirror_send(struct px_mirror_conn *m)
{
	while (m->off < m->len) {
		ssize_t r = send(m->fd, m->data + m->off, m->len - m->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN ? -EAGAIN : -errno;
		m->off += (size_t)r;
	}
	return 0;
}

/* READING an HTTP/2 copy (invariant 5): feed the session until the socket
 * is drained; answered, EOF or error close; anything the session now has
 * to send goes out through SENDING. */
static void px_mirror_h2_read(struct px_mirror_conn *m)
{
	char in[4096];
	ssize_t r;
	int rc;

	for (;;) {
		r = recv(m->fd, in, sizeof(in), MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0) {
			px_mirror_close(m, false);
			return;
		}
		rc = px_mirror_h2_input(m->h2, in, (size_t)r);
		if (rc) {
			px_mirror_close(m, rc > 0);
			return;
		}
	}
	free(m->data);
	m->data = NULL;
	m->off = 0;
	if (px_mirror_h2_output(m->h2, &m->data, &m->len)) {
		px_mirror_close(m, false);
		return;
	}
	if (m->len) {
		m->state = MS_SENDING;
		px_mirror_cb(m->srv->loop, m->fd, EV_WRITE, m);
	}
}

static void px_mirror_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_mirror_conn *m = arg;
	char junk[512];
	int rc;

	(void)fd;
	if (m->state == MS_CONNECTING) {
		if (events & EV_ERROR || net_connect_result(m->fd)) {
			px_mirror_close(m, false);
			return;
		}
		m->state = MS_SENDING;
	}
	if (m->state == MS_SENDING) {
		rc = px_mirror_send(m);
		if (rc == -EAGAIN) {
			ev_add(loop, m->fd, EV_WRITE, px_mirror_cb, m);
			return;
		}
		if (rc) {
			px_mirror_close(m, false);
			return;
		}
		m->state = MS_READING;
		free(m->data);	/* sent: only the answer is awaited */
		m->data = NULL;
		ev_add(loop, m->fd, EV_READ, px_mirror_cb, m);
		return;
	}
	if (m->h2) {
		px_mirror_h2_read(m);
		return;
	}
	/* READING: the first bytes of the answer (or EOF) end the mirror */
	if (events & (EV_READ | EV_ERROR)) {
		ssize_t r = recv(m->fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		px_mirror_close(m, r > 0);
	}
}

/* One mirror connection to t carrying a copy of data (HTTP/1.1 bytes). */
static void px_mirror_launch(struct px_server *s, const struct px_mirror_to *t, const char *data,
			     size_t len)
{
	struct px_mirror_conn *m;
	struct px_mirror_h2 *h2 = NULL;
	int fd;

	if (s->n_mirrors_inflight >= PX_MIRROR_MAX) {
		s->n_mirror_dropped[PX_MIRROR_LIMIT]++;
		return;
	}
	if (t->h2c && px_mirror_h2_new(s, data, len, &h2)) {
		s->n_mirror_failed++;	/* (the copy did not parse: never expected) */
		return;
	}
	fd = px_netpol_connect(s, t->ip, t->port);
	if (fd < 0) {
		px_mirror_h2_free(h2);
		s->n_mirror_failed++;
		return;
	}
	m = zh_calloc(1, sizeof(*m));
	m->srv = s;
	m->fd = fd;
	m->state = MS_CONNECTING;
	m->h2 = h2;
	if (h2) {
		if (px_mirror_h2_output(h2, &m->data, &m->len))
			m->len = 0;	/* (fails at the first read) */
	} else {
		m->data = zh_malloc(len ? len : 1);
		memcpy(m->data, data, len);
		m->len = len;
	}
	if (ev_add(s->loop, fd, EV_WRITE, px_mirror_cb, m)) {
		close(fd);
		px_mirror_h2_free(m->h2);
		free(m->data);
		free(m);
		s->n_mirror_failed++;
		return;
	}
	m->timer = ev_timer_add(s->loop, ev_now_ns() + PX_MIRROR_TIMEOUT_NS, px_mirror_timeout, m);
	m->next = s->mirrors;
	if (s->mirrors)
		s->mirrors->prev = m;
	s->mirrors = m;
	s->n_mirrors_inflight++;
}

void px_mirror_begin(struct px_stream *st)
{
	struct px_server *s = st->c->srv;

	st->mb_off = !st->d.n_mirrors;
	if (st->mb_off)
		return;
	px_buf_get(s, &st->mb);
	buf_append(&st->mb, buf_head(&st->rb), st->rb.data);
}

void px_mirror_add(struct px_stream *st, const void *p, size_t n)
{
	struct px_server *s = st->c->srv;

	if (st->mb_off || !n)
		return;
	if (st->mb.data + n > PX_REPLAY_MAX) {
		st->mb_off = true;
		s->n_mirror_dropped[PX_MIRROR_TOO_LARGE] += (uint64_t)st->d.n_mirrors;
		px_buf_drop(s, &st->mb);
		return;
	}
	buf_append(&st->mb, p, n);
}

void px_mirror_done(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	uint32_t reason, pol_id;

	if (st->mb_off)
		return;
	for (int i = 0; i < st->d.n_mirrors; i++) {
		const struct px_mirror_to *t = &st->d.mirrors[i];

		/* the mirror is traffic from the client to the mirror backend:
		 * NetworkPolicy judges it as it would the request itself */
		if (!px_netpol_allows(s, st->c, t->ip, t->port, &reason, &pol_id)) {
			s->n_mirror_dropped[PX_MIRROR_POLICY]++;
			continue;
		}
		px_mirror_launch(s, t, buf_head(&st->mb), st->mb.data);
	}
	st->mb_off = true;
	px_buf_drop(s, &st->mb);
}

void px_mirror_drop_stream(struct px_stream *st)
{
	st->mb_off = true;
	px_buf_drop(st->c->srv, &st->mb);
}

void px_mirror_close_all(struct px_server *s)
{
	while (s->mirrors)
		px_mirror_close(s->mirrors, false);
}
