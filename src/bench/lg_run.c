/* lg_run.c — the load generator engine: threads, connections, schedule
 * (contract in bench.h).
 *
 * Design notes.
 *
 * Connection states (one request in flight at most, no pipelining):
 *
 *            conn_begin() [DOWN, request due]
 *    DOWN ───────────────────────────────────► CONNECTING
 *     ▲  ▲                                         │ writable, SO_ERROR == 0
 *     │  │ error / timeout / close                 ▼
 *     │  └──────────────────────────────────── BUSY (writing, then reading)
 *     │                                            │ response complete
 *     │ server closed idle conn / not keep-alive   ▼
 *     └─────────────────────────────────────── IDLE ──conn_begin()──► BUSY
 *
 *  - conn_begin() starts request k: from IDLE it writes at once, from DOWN it
 *    connects first (the connect is part of the request: Romana's method).
 *  - conn_done() (response complete) and conn_fail() (any error) end request
 *    k, record it (if measured) and call conn_next(), which schedules request
 *    k+1: at once in closed loop, or at the connection's metronome tick in
 *    open loop (a timer to tick − spin_ns, then a busy-wait to the tick).
 *  - The thread's sweep timer (every 2 ms) ends requests older than the
 *    timeout (conn_fail with LG_ERR_TIMEOUT), publishes progress counters,
 *    and ends the thread (invariant 4).
 *  - Open-loop sends are armed on the timerfd at tick − spin window and
 *    busy-wait the rest; adapt_spin() widens the window to the observed
 *    wake-up lateness.
 *
 * Invariants:
 *  1. state == BUSY or (CONNECTING and inflight) ⇔ a request is in flight;
 *     inflight is set by conn_begin and cleared by conn_done/conn_fail only,
 *     and each clears it exactly once, so each request is counted once.
 *  2. intended <= actual for every request (we never send early), so every
 *     recorded latency and lag is >= 0.
 *  3. A request is measured iff its intended time is >= the measure start
 *     (after warm-up); only measured requests touch the result counters.
 *  4. A thread stops once no request is in flight and no more are due
 *     (next tick at or past the end, or the request budget spent), or at
 *     hard_stop (end + timeout), when what is still in flight is counted as
 *     timed out. A request whose tick is before the end is always sent,
 *     however late: dropping it would hide the latency of a stall.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/bench.h"
#include "zerohop/ev.h"
#include "zerohop/h1.h"
#include "zerohop/log.h"

const char *const lg_err_names[LG_ERR__COUNT] = {
	[LG_ERR_CONNECT] = "connect",
	[LG_ERR_TIMEOUT] = "timeout",
	[LG_ERR_STATUS] = "status",
	[LG_ERR_SHORT_READ] = "short_read",
	[LG_ERR_RESET] = "reset",
	[LG_ERR_OTHER] = "other",
};

#define LG_BUF_INIT	16384
#define LG_BUF_MAX	(256 * 1024)
#define LG_MAX_HEADERS	64

enum conn_state { C_DOWN, C_CONNECTING, C_IDLE, C_BUSY };

struct lg_thread;

struct lg_conn {
	struct lg_thread *t;
	int fd;
	enum conn_state state;
	int inflight;		/* invariant 1 */
	int measured;		/* invariant 3, of the request in flight */
	int backlog;		/* its tick passed while the connection was busy */
	uint64_t start_ns;	/* first tick (open loop) */
	uint64_t k;		/* request number on this connection */
	uint64_t intended;	/* of the request in flight / next one */
	uint64_t actual;	/* actual start of the request in flight */
	uint64_t timer;		/* pending send timer id, 0 = none */
	uint64_t armed_at;	/* its deadline (0: fire at once, no adaptation) */
	/* request progress */
	size_t wr_off;
	int head_done;		/* http: status line + headers parsed */
	int framing;		/* enum h1_framing */
	int status;
	int close_after;	/* server said Connection: close / HTTP/1.0 */
	uint64_t body_left;	/* H1_BODY_LENGTH / tcp: bytes still expected */
	uint64_t resp_bytes;
	struct h1_chunked chunk;
	/* read buffer (head only; body bytes are counted, then dropped) */
	char *buf;
	size_t len, cap;
};

struct lg_thread {
	const struct lg_config *cfg;
	struct ev_loop *loop;
	pthread_t tid;
	int joined;
	struct lg_conn *conns;
	int nconns;
	int first_conn;		/* global index of conns[0] */
	uint64_t t0, measure_start, t_end;	/* t_end = 0: no time limit */
	uint64_t hard_stop;	/* give up on in-flight requests after this */
	uint64_t interval;	/* per connection, open loop */
	int limited;		/* -n given: budget applies */
	uint64_t budget;	/* measured requests this thread may start */
	uint64_t issued;	/* measured requests started */
	uint64_t sweep_timer;
	uint64_t spin_ns;	/* effective spin window, adapted to wake-up lateness */
	uint64_t late_max;	/* decaying maximum of timer wake-up lateness */
	const char *req;	/* request bytes (shared, read-only) */
	size_t req_len;
	struct lg_result res;	/* this thread's part, merged by lg_run */
	uint64_t last_done;	/* time of the last measured completion */
	/* progress, read by the main thread */
	uint64_t pub_done, pub_err;
};

static char mode_buf[160];

const char *lg_mode_str(const struct lg_config *cfg)
{
	if (cfg->qps > 0)
		snprintf(mode_buf, sizeof(mode_buf),
			 "open loop at %g req/s (latency corrected for coordinated omission)",
			 cfg->qps);
	else
		snprintf(mode_buf, sizeof(mode_buf), "closed loop, maximum rate");
	return mode_buf;
}

static void conn_next(struct lg_conn *c, int defer);
static void conn_fail(struct lg_conn *c, enum lg_err kind);
static void on_io(struct ev_loop *loop, int fd, int events, void *arg);

static void conn_close(struct lg_conn *c)
{
	if (c->fd >= 0) {
		ev_del(c->t->loop, c->fd);
		close(c->fd);
	}
	c->fd = -1;
	c->state = C_DOWN;
	c->len = 0;
}

static int conn_open(struct lg_conn *c)
{
	const struct lg_config *cfg = c->t->cfg;
	int one = 1, fd, err;

	fd = socket(cfg->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&cfg->addr, cfg->addrlen) < 0 &&
	    errno != EINPROGRESS) {
		err = -errno;
		close(fd);
		return err;
	}
	err = ev_add(c->t->loop, fd, EV_WRITE, on_io, c);
	if (err) {
		close(fd);
		return err;
	}
	c->fd = fd;
	c->state = C_CONNECTING;
	return 0;
}

static void req_reset(struct lg_conn *c)
{
	c->wr_off = 0;
	c->head_done = 0;
	c->status = 0;
	c->close_after = 0;
	c->resp_bytes = 0;
	c->len = 0;
	memset(&c->chunk, 0, sizeof(c->chunk));
	c->body_left = c->t->cfg->tcp ? c->t->req_len : 0;
}

/* Write what is left of the request; once all is written wait for the
 * response (EV_READ only). Errors end the request through conn_fail(). */
static void conn_write(struct lg_conn *c)
{
	struct lg_thread *t = c->t;
	ssize_t n;

	while (c->wr_off < t->req_len) {
		n = send(c->fd, t->req + c->wr_off, t->req_len - c->wr_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				ev_add(t->loop, c->fd, EV_READ | EV_WRITE, on_io, c);
				return;
			}
			conn_fail(c, errno == ECONNRESET || errno == EPIPE ? LG_ERR_RESET
									     : LG_ERR_OTHER);
			return;
		}
		c->wr_off += (size_t)n;
	}
	ev_add(t->loop, c->fd, EV_READ, on_io, c);
}

/* Start the request whose intended time is c->intended, now. */
static void conn_begin(struct lg_conn *c, uint64_t now)
{
	struct lg_thread *t = c->t;
	int err;

	c->inflight = 1;
	c->actual = now;
	c->measured = c->intended >= t->measure_start;
	if (c->measured) {
		t->issued++;
		t->res.sent++;
	}
	req_reset(c);
	if (c->state == C_DOWN) {
		err = conn_open(c);
		if (err) {
			conn_fail(c, LG_ERR_CONNECT);
			return;
		}
		return;		/* on_io writes once connected */
	}
	if (c->state == C_CONNECTING)
		return;		/* eager connect still running: write when done */
	c->state = C_BUSY;
	conn_write(c);
}

static void record(struct lg_conn *c, uint64_t now)
{
	struct lg_thread *t = c->t;

	if (!c->measured)
		return;
	hist_record(t->res.lat, now - c->intended);
	hist_record(t->res.ulat, now - c->actual);
	hist_record(t->res.lag, c->actual - c->intended);
	if (!c->backlog)
		hist_record(t->res.tlag, c->actual - c->intended);
	if (now > t->last_done)
		t->last_done = now;
}

static void conn_done(struct lg_conn *c)
{
	struct lg_thread *t = c->t;
	uint64_t now = ev_now_ns();

	c->inflight = 0;
	record(c, now);
	if (c->measured) {
		t->res.responses++;
		t->res.bytes_read += c->resp_bytes;
		hist_record(t->res.sizes, c->resp_bytes);
		if (!t->cfg->tcp) {
			t->res.status[c->status < LG_MAX_STATUS ? c->status : 0]++;
			if (c->status >= 400)
				t->res.errors[LG_ERR_STATUS]++;
		}
	}
	if (c->close_after || !t->cfg->keepalive || c->len)
		conn_close(c);	/* c->len: bytes beyond the response, no pipelining */
	else
		c->state = C_IDLE;
	conn_next(c, 0);
}

static void conn_fail(struct lg_conn *c, enum lg_err kind)
{
	struct lg_thread *t = c->t;

	conn_close(c);
	if (!c->inflight)
		return;		/* an idle connection broke: not a request error */
	c->inflight = 0;
	if (c->measured) {
		t->res.errors[kind]++;
		if (ev_now_ns() > t->last_done)
			t->last_done = ev_now_ns();
	}
	/* deferred: a failure may be synchronous (connect, write), and a
	 * request due at once must not recurse into the next failure */
	conn_next(c, 1);
}

static void spin_until(uint64_t deadline)
{
	while (ev_now_ns() < deadline) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ volatile("yield");
#endif
	}
}

/* A timer armed for deadline fired now: adapt the spin window so that it
 * covers the usual wake-up lateness (a VM's idle vCPU wakes in ~50-100 us).
 * late_max decays by 1/64 per wake-up, so it tracks a high percentile of
 * the lateness; the window stays within [--spin, LG_SPIN_MAX]. */
#define LG_SPIN_MAX 500000ULL
#define LG_SPIN_MARGIN 10000ULL

static void adapt_spin(struct lg_thread *t, uint64_t deadline, uint64_t now)
{
	uint64_t late = now > deadline ? now - deadline : 0, want;

	if (!t->cfg->spin_ns)
		return;		/* --spin 0: never spin */
	t->late_max -= t->late_max / 64;
	if (late > t->late_max)
		t->late_max = late;
	want = t->late_max + LG_SPIN_MARGIN;
	if (want < t->cfg->spin_ns)
		want = t->cfg->spin_ns;
	t->spin_ns = want > LG_SPIN_MAX ? LG_SPIN_MAX : want;
}

static void on_send_timer(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct lg_conn *c = arg;

	c->timer = 0;
	if (c->armed_at)
		adapt_spin(c->t, c->armed_at, ev_now_ns());
	spin_until(c->intended);
	conn_begin(c, ev_now_ns());
}

/* Is another request due at all (invariant 4)? */
static int more_due(struct lg_thread *t, uint64_t intended)
{
	if (t->t_end && intended >= t->t_end)
		return 0;
	if (t->limited && intended >= t->measure_start && t->issued >= t->budget)
		return 0;
	return 1;
}

static int thread_busy(struct lg_thread *t)
{
	for (int i = 0; i < t->nconns; i++)
		if (t->conns[i].inflight || t->conns[i].timer)
			return 1;
	return 0;
}

static void conn_next(struct lg_conn *c, int defer)
{
	struct lg_thread *t = c->t;
	const struct lg_config *cfg = t->cfg;
	uint64_t now = ev_now_ns();

	c->k++;
	if (cfg->qps > 0)
		c->intended = c->start_ns + c->k * t->interval;
	else
		c->intended = now;
	if (!more_due(t, c->intended)) {
		if (!thread_busy(t))
			ev_stop(t->loop);
		return;
	}
	c->backlog = cfg->qps > 0 && c->intended < now;
	if (c->backlog && c->intended >= t->measure_start)
		t->res.backlogged++;	/* the connection, not the clock, made it late */
	if (defer && c->intended <= now + t->spin_ns) {
		c->armed_at = 0;
		c->timer = ev_timer_add(t->loop, now, on_send_timer, c);
	} else if (c->intended <= now) {
		conn_begin(c, now);
	} else if (c->intended - now <= t->spin_ns) {
		spin_until(c->intended);
		conn_begin(c, ev_now_ns());
	} else {
		c->armed_at = c->intended - t->spin_ns;
		c->timer = ev_timer_add(t->loop, c->armed_at, on_send_timer, c);
	}
}

/* Parse what is in c->buf; returns 1 when the response is complete, 0 when
 * more is needed, or a negative lg_err kind (bitwise not) on error. */
static int http_consume(struct lg_conn *c)
{
	if (!c->head_done) {
		struct h1_header hdr[LG_MAX_HEADERS];
		size_t nh = LG_MAX_HEADERS;
		struct h1_response resp;
		uint64_t cl = 0;
		int n, fr;

		n = h1_parse_response(c->buf, c->len, 0, NULL, &resp, hdr, &nh);
		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return ~LG_ERR_OTHER;
		fr = h1_body_framing(hdr, nh, 0, resp.status,
				     !strcmp(c->t->cfg->method, "HEAD"), &cl);
		if (fr < 0)
			return ~LG_ERR_OTHER;
		c->status = resp.status;
		c->framing = fr;
		c->body_left = cl;
		/* HTTP/1.0 closes unless it says keep-alive; 1.1 only on close */
		if (resp.minor_version == 0)
			c->close_after = !h1_header_has_token(hdr, nh, "connection", "keep-alive");
		if (h1_header_has_token(hdr, nh, "connection", "close"))
			c->close_after = 1;
		c->head_done = 1;
		memmove(c->buf, c->buf + n, c->len - (size_t)n);
		c->len -= (size_t)n;
		if (c->framing == H1_BODY_NONE)
			return 1;
	}
	switch (c->framing) {
	case H1_BODY_LENGTH:
		if (c->len >= c->body_left) {
			c->len -= (size_t)c->body_left;	/* leftover: see conn_done */
			c->body_left = 0;
			return 1;
		}
		c->body_left -= c->len;
		c->len = 0;
		return 0;
	case H1_BODY_CHUNKED: {
		size_t plen = c->len;
		ssize_t r = h1_decode_chunked(&c->chunk, c->buf, &plen);

		if (r < 0)
			return ~LG_ERR_OTHER;
		if (r > 0 || h1_chunked_done(&c->chunk)) {
			c->len = (size_t)r;
			return 1;
		}
		c->len = 0;
		return 0;
	}
	case H1_BODY_EOF:
		c->len = 0;	/* complete at EOF, see on_readable */
		return 0;
	default:
		return 1;
	}
}

/* tcp echo: the response is complete when every payload byte came back. */
static int tcp_consume(struct lg_conn *c)
{
	size_t off = (size_t)(c->t->req_len - c->body_left);

	if (c->len > c->body_left)
		return ~LG_ERR_OTHER;	/* more than we sent */
	if (memcmp(c->buf, c->t->req + off, c->len))
		return ~LG_ERR_OTHER;	/* echo differs */
	c->body_left -= c->len;
	c->len = 0;
	return c->body_left == 0;
}

static void on_readable(struct lg_conn *c)
{
	ssize_t n;
	int r;

	for (;;) {
		if (c->len == c->cap) {
			if (c->cap >= LG_BUF_MAX) {
				conn_fail(c, LG_ERR_OTHER);	/* head too large */
				return;
			}
			c->cap *= 2;
			c->buf = zh_realloc(c->buf, c->cap);
		}
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			conn_fail(c, errno == ECONNRESET || errno == EPIPE ? LG_ERR_RESET
									     : LG_ERR_OTHER);
			return;
		}
		if (n == 0) {
			if (c->inflight && c->head_done && c->framing == H1_BODY_EOF) {
				conn_close(c);
				conn_done(c);
				return;
			}
			conn_fail(c, LG_ERR_SHORT_READ);	/* no-op when idle */
			return;
		}
		if (!c->inflight || c->state != C_BUSY) {
			conn_fail(c, LG_ERR_OTHER);	/* bytes nobody asked for */
			return;
		}
		c->len += (size_t)n;
		c->resp_bytes += (uint64_t)n;
		r = c->t->cfg->tcp ? tcp_consume(c) : http_consume(c);
		if (r < 0) {
			conn_fail(c, (enum lg_err)~r);
			return;
		}
		if (r == 1) {
			conn_done(c);
			return;
		}
	}
}

static void on_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct lg_conn *c = arg;
	int err = 0;
	socklen_t el = sizeof(err);

	if (c->state == C_CONNECTING) {
		if (!(events & (EV_WRITE | EV_ERROR)))
			return;
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			if (c->inflight)
				conn_fail(c, err == ECONNRESET ? LG_ERR_RESET : LG_ERR_CONNECT);
			else
				conn_close(c);
			return;
		}
		c->t->res.connects++;
		if (!c->inflight) {
			c->state = C_IDLE;
			ev_add(loop, fd, EV_READ, on_io, c);
			return;
		}
		c->state = C_BUSY;
		conn_write(c);
		return;
	}
	if (c->state == C_BUSY && (events & EV_WRITE) && c->wr_off < c->t->req_len) {
		conn_write(c);
		if (c->fd != fd)
			return;
	}
	if (events & (EV_READ | EV_ERROR))
		on_readable(c);
}

static void on_sweep(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct lg_thread *t = arg;
	uint64_t now = ev_now_ns(), err = 0;

	for (int i = 0; i < t->nconns; i++) {
		struct lg_conn *c = &t->conns[i];

		if (c->inflight && now - c->actual >= t->cfg->timeout_ns)
			conn_fail(c, LG_ERR_TIMEOUT);
	}
	for (int i = 0; i < LG_ERR__COUNT; i++)
		err += t->res.errors[i];
	__atomic_store_n(&t->pub_done, t->res.responses, __ATOMIC_RELAXED);
	__atomic_store_n(&t->pub_err, err, __ATOMIC_RELAXED);
	if (t->hard_stop && now >= t->hard_stop) {
		for (int i = 0; i < t->nconns; i++)
			if (t->conns[i].inflight)
				conn_fail(&t->conns[i], LG_ERR_TIMEOUT);
		ev_stop(loop);
		return;
	}
	/* Past the end, requests intended before it are still sent, however
	 * late (dropping them would hide exactly the latency a stall causes);
	 * the thread ends when none is left or at hard_stop. */
	if (t->t_end && now >= t->t_end && !thread_busy(t)) {
		ev_stop(loop);
		return;
	}
	t->sweep_timer = ev_timer_add(loop, now + 2000000, on_sweep, t);
}

static void on_first(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct lg_conn *c = arg;

	c->timer = 0;
	c->intended = c->start_ns;
	if (!more_due(c->t, c->intended)) {
		if (!thread_busy(c->t))
			ev_stop(loop);
		return;
	}
	adapt_spin(c->t, c->armed_at, ev_now_ns());
	spin_until(c->intended);
	conn_begin(c, ev_now_ns());
}

static void *thread_main(void *arg)
{
	struct lg_thread *t = arg;
	const struct lg_config *cfg = t->cfg;

	/* timerfd wake-ups are late by the thread's timer slack (50 us by
	 * default): ask for 1 ns so the spin window covers the wake-up */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	/* --nice: a lower nice value lets CFS run this thread sooner when its
	 * timer fires on a busy machine (Linux nice is per thread) */
	if (cfg->nice && setpriority(PRIO_PROCESS, (id_t)gettid(), cfg->nice))
		zh_warn("bench: --nice %d: %s (continuing)", cfg->nice, strerror(errno));
	for (int i = 0; i < t->nconns; i++) {
		struct lg_conn *c = &t->conns[i];
		int g = t->first_conn + i;

		c->t = t;
		c->fd = -1;
		c->cap = LG_BUF_INIT;
		c->buf = zh_malloc(c->cap);
		/* stagger the metronomes over one interval */
		c->start_ns = t->t0 + (cfg->qps > 0 ? (uint64_t)g * t->interval / cfg->conns : 0);
		/* eager connect, not part of any request; a failure here is
		 * retried (and counted) by the first request */
		if (cfg->keepalive)
			conn_open(c);
		c->armed_at = c->start_ns - t->spin_ns;
		c->timer = ev_timer_add(t->loop, c->armed_at, on_first, c);
	}
	t->sweep_timer = ev_timer_add(t->loop, ev_now_ns() + 2000000, on_sweep, t);
	ev_run(t->loop);
	for (int i = 0; i < t->nconns; i++) {
		conn_close(&t->conns[i]);
		free(t->conns[i].buf);
	}
	return NULL;
}

static void result_init(struct lg_result *r)
{
	memset(r, 0, sizeof(*r));
	r->lat = hist_new();
	r->ulat = hist_new();
	r->lag = hist_new();
	r->tlag = hist_new();
	r->sizes = hist_new();
}

void lg_result_free(struct lg_result *r)
{
	hist_free(r->lat);
	hist_free(r->ulat);
	hist_free(r->lag);
	hist_free(r->tlag);
	hist_free(r->sizes);
	r->lat = r->ulat = r->lag = r->tlag = r->sizes = NULL;
}

static void result_merge(struct lg_result *d, const struct lg_result *s)
{
	hist_merge(d->lat, s->lat);
	hist_merge(d->ulat, s->ulat);
	hist_merge(d->lag, s->lag);
	hist_merge(d->tlag, s->tlag);
	hist_merge(d->sizes, s->sizes);
	d->responses += s->responses;
	d->sent += s->sent;
	d->bytes_read += s->bytes_read;
	d->connects += s->connects;
	d->backlogged += s->backlogged;
	for (int i = 0; i < LG_ERR__COUNT; i++)
		d->errors[i] += s->errors[i];
	for (int i = 0; i < LG_MAX_STATUS; i++)
		d->status[i] += s->status[i];
}

/* The request bytes, built once and shared read-only by every thread. */
static char *build_request(const struct lg_config *cfg, size_t *len)
{
	size_t cap = 512 + cfg->body_len + strlen(cfg->target) + strlen(cfg->host), off = 0;
	char *b;
	int has_host = 0;

	if (cfg->tcp) {
		b = zh_malloc(cfg->payload_size ? cfg->payload_size : 1);
		for (size_t i = 0; i < cfg->payload_size; i++)
			b[i] = (char)('a' + i % 26);
		*len = cfg->payload_size;
		return b;
	}
	for (int i = 0; i < cfg->nheaders; i++) {
		cap += strlen(cfg->headers[i]) + 2;
		if (!strncasecmp(cfg->headers[i], "host:", 5))
			has_host = 1;
	}
	b = zh_malloc(cap);
	off += (size_t)snprintf(b + off, cap - off, "%s %s HTTP/1.1\r\n", cfg->method, cfg->target);
	if (!has_host)
		off += (size_t)snprintf(b + off, cap - off, "Host: %s\r\n", cfg->host);
	for (int i = 0; i < cfg->nheaders; i++)
		off += (size_t)snprintf(b + off, cap - off, "%s\r\n", cfg->headers[i]);
	if (cfg->body_len || !strcmp(cfg->method, "POST") || !strcmp(cfg->method, "PUT"))
		off += (size_t)snprintf(b + off, cap - off, "Content-Length: %zu\r\n", cfg->body_len);
	if (!cfg->keepalive)
		off += (size_t)snprintf(b + off, cap - off, "Connection: close\r\n");
	off += (size_t)snprintf(b + off, cap - off, "\r\n");
	if (cfg->body_len)
		memcpy(b + off, cfg->body, cfg->body_len);
	*len = off + cfg->body_len;
	return b;
}

static void progress(struct lg_thread *th, int n, uint64_t t0, uint64_t total_ns)
{
	uint64_t done = 0, err = 0, now = ev_now_ns();
	double el = now > t0 ? (double)(now - t0) / 1e9 : 0;

	if (total_ns && el > (double)total_ns / 1e9)
		el = (double)total_ns / 1e9;	/* draining in-flight requests */

	for (int i = 0; i < n; i++) {
		done += __atomic_load_n(&th[i].pub_done, __ATOMIC_RELAXED);
		err += __atomic_load_n(&th[i].pub_err, __ATOMIC_RELAXED);
	}
	fprintf(stderr, "\r  %6.1fs", el);
	if (total_ns)
		fprintf(stderr, "/%.0fs", (double)total_ns / 1e9);
	fprintf(stderr, "  %llu responses  %.0f req/s  %llu errors   ",
		(unsigned long long)done, el > 0 ? (double)done / el : 0.0,
		(unsigned long long)err);
}

int lg_run(const struct lg_config *cfg, struct lg_result *res)
{
	struct lg_thread *th;
	struct timespec rt;
	char *req;
	size_t req_len;
	uint64_t t0, last = 0;
	int nth = cfg->threads, started = 0, err = 0, all_done;

	if (nth < 1 || cfg->conns < nth)
		return -EINVAL;
	req = build_request(cfg, &req_len);
	th = zh_calloc((size_t)nth, sizeof(*th));
	/* time for the threads to start and connect before the first tick */
	t0 = ev_now_ns() + 20000000ULL + (uint64_t)cfg->conns * 20000ULL;
	for (int i = 0, g = 0; i < nth; i++) {
		struct lg_thread *t = &th[i];

		t->cfg = cfg;
		t->req = req;
		t->req_len = req_len;
		t->nconns = cfg->conns / nth + (i < cfg->conns % nth);
		t->first_conn = g;
		g += t->nconns;
		t->conns = zh_calloc((size_t)t->nconns, sizeof(*t->conns));
		t->t0 = t0;
		t->measure_start = t0 + cfg->warmup_ns;
		t->t_end = cfg->duration_ns ? t->measure_start + cfg->duration_ns : 0;
		t->hard_stop = t->t_end ? t->t_end + cfg->timeout_ns + 100000000ULL : 0;
		t->interval = cfg->qps > 0 ? (uint64_t)(1e9 * cfg->conns / cfg->qps) : 0;
		t->limited = cfg->requests > 0;
		if (cfg->requests)
			t->budget = cfg->requests / nth + (i < (int)(cfg->requests % nth));
		t->loop = ev_loop_new(t->nconns + 64);
		t->spin_ns = cfg->spin_ns;
		result_init(&t->res);
	}
	for (int i = 0; i < nth; i++) {
		err = -pthread_create(&th[i].tid, NULL, thread_main, &th[i]);
		if (err)
			break;
		started++;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	res->start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ULL + (uint64_t)rt.tv_nsec +
				 (t0 + cfg->warmup_ns - ev_now_ns());
	if (cfg->progress) {
		do {
			struct timespec ts = { 0, 250000000 };

			nanosleep(&ts, NULL);
			all_done = 1;
			for (int i = 0; i < started; i++) {
				if (th[i].joined)
					continue;
				if (pthread_tryjoin_np(th[i].tid, NULL) == EBUSY)
					all_done = 0;
				else
					th[i].joined = 1;
			}
			progress(th, started, t0 + cfg->warmup_ns,
				 cfg->duration_ns);
		} while (!all_done);
		fprintf(stderr, "\n");
	}
	for (int i = 0; i < started; i++)
		if (!th[i].joined)
			pthread_join(th[i].tid, NULL);
	{
		uint64_t start_rt = res->start_realtime_ns;

		result_init(res);
		res->start_realtime_ns = start_rt;
	}
	for (int i = 0; i < nth; i++) {
		result_merge(res, &th[i].res);
		if (th[i].last_done > last)
			last = th[i].last_done;
		if (th[i].t_end && th[i].t_end > last)
			last = th[i].t_end;
		lg_result_free(&th[i].res);
		ev_loop_free(th[i].loop);
		free(th[i].conns);
	}
	res->duration_ns = last > t0 + cfg->warmup_ns ? last - (t0 + cfg->warmup_ns) : 0;
	free(th);
	free(req);
	return err;
}
