/* echo.c — `zerohop echo`: an HTTP/1.1 keep-alive echo server with fortio's
 * server parameters (echo.h), a TCP echo port and a UDP echo port. One ev
 * loop per thread, each with its own SO_REUSEPORT listening sockets.
 *
 * Design notes: the HTTP connection state machine.
 *
 *            head parsed, no body / body complete: respond()
 *   HEAD ---------------------------------------------> HEAD  (keep-alive)
 *    |  \--head parsed, body follows--> BODY --complete--^
 *    |                                    |
 *    |   respond() with a delay: DELAYED --timer: pending -> out--> HEAD
 *    |   respond() that closes, or a malformed request:
 *    +--------------------------------------------------> CLOSING
 *   CLOSING --out flushed: shutdown(SHUT_WR)--> LINGER --EOF or 2 s--> freed
 *
 * Invariants:
 *  1. Responses reach `out` in request order: in DELAYED nothing is parsed
 *     (the delayed response waits in `pending`), so pipelining stays ordered.
 *  2. While `out` holds more than OUT_HIGH bytes no request is parsed and
 *     read interest is off: a client that pipelines without reading cannot
 *     grow our memory without bound.
 *  3. Interest is EV_READ in HEAD/BODY/LINGER (unless invariant 2), and
 *     EV_WRITE exactly while `out` is not empty; set_interest() is the only
 *     place that calls ev_add for a connection, and only on change.
 *  4. In BODY the request head lives in `head` (a copy, re-parsed when the
 *     body is complete); in HEAD it lives in `in` and is consumed only after
 *     its response was written to `out`/`pending`.
 *  5. A malformed request is answered by h1_err_status() with
 *     Connection: close and nothing after it on that connection is parsed.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/buf.h"
#include "zerohop/cli.h"
#include "zerohop/echo.h"
#include "zerohop/ev.h"
#include "zerohop/h1.h"
#include "zerohop/json.h"
#include "zerohop/log.h"
#include "zerohop/net.h"

#define MAX_LISTEN 16
#define MAX_HDRS 100
#define OUT_HIGH (1u << 20)
#define LINGER_NS (2ull * 1000000000ull)
#define SCRATCH 16384

enum { L_HTTP, L_TCP, L_UDP };
enum { S_HEAD, S_BODY, S_DELAYED, S_CLOSING, S_LINGER };

struct echo_srv {
	struct net_addr addr[MAX_LISTEN];
	int kind[MAX_LISTEN];
	int nlisten;
	int threads;
	const char *name;
	char hostname[256];
	uint64_t max_size, max_delay_ns, max_body;
	char *payload;			/* max_size bytes served by size=N */
	uint64_t start_ns;
	atomic_ulong conns, reqs;
};

struct worker {
	int id;
	pthread_t th;
	struct echo_srv *srv;
	struct ev_loop *loop;
	int efd;			/* eventfd: stop request from main */
	int lfd[MAX_LISTEN];
	uint64_t rng;
	time_t date_t;
	char date[64];
	char scratch[SCRATCH];		/* echo_parse_params() output */
	char dec[SCRATCH];		/* JSON: one decoded query key or value */
	char udp_buf[65536];
};

/* Choices made when a request's head is parsed (so a body that arrives in
 * pieces does not change them). */
struct picks {
	int has_size;
	uint64_t size;
	int status;
	uint64_t delay_ns;
	int close;
};

struct hconn {
	struct worker *w;
	int fd;
	int state;
	int mask;			/* interest now set (invariant 3) */
	struct buf in, out, pending, head, body;
	size_t last_len;		/* h1 resume point */
	int framing;
	int keep_body;
	uint64_t body_left, body_len;
	struct h1_chunked ch;
	struct picks pk;
	uint64_t timer;
	int peer_eof;			/* client half-closed: answer what we have, then close */
	struct net_addr peer;
};

struct tconn {
	struct worker *w;
	int fd;
	struct buf b;
	int mask;
};

static const struct h1_limits *limits(void)
{
	static struct h1_limits l = { 8192, 65536, MAX_HDRS };

	return &l;
}

/* xorshift64*: per-thread, no locking. r in [0, 100). */
static double rnd100(struct worker *w)
{
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return (double)((w->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 100.0;
}

static const char *http_date(struct worker *w)
{
	time_t now = time(NULL);
	struct tm tm;

	if (now != w->date_t) {
		gmtime_r(&now, &tm);
		strftime(w->date, sizeof(w->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		w->date_t = now;
	}
	return w->date;
}

/* ---- connection lifetime ---- */

static void hconn_io(struct ev_loop *loop, int fd, int events, void *arg);

static void hconn_free(struct hconn *c)
{
	if (c->timer)
		ev_timer_del(c->w->loop, c->timer);
	ev_del(c->w->loop, c->fd);
	close(c->fd);
	buf_free(&c->in);
	buf_free(&c->out);
	buf_free(&c->pending);
	buf_free(&c->head);
	buf_free(&c->body);
	free(c);
}

/* Invariant 3. */
static void set_interest(struct hconn *c)
{
	int m = 0;

	if ((c->state == S_HEAD || c->state == S_BODY) && c->out.data <= OUT_HIGH)
		m |= EV_READ;
	if (c->state == S_LINGER)
		m |= EV_READ;
	if (c->out.data)
		m |= EV_WRITE;
	if (m == c->mask)
		return;
	if (!m)
		ev_del(c->w->loop, c->fd);
	else if (ev_add(c->w->loop, c->fd, m, hconn_io, c))
		zh_warn("echo: ev_add fd %d failed", c->fd);
	c->mask = m;
}

static void linger_done(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct hconn *c = arg;

	c->timer = 0;
	hconn_free(c);
}

/* ---- response building ---- */

/* Decoded key or value into scratch as a JSON string (raw if undecodable). */
static void json_decoded(struct buf *b, struct worker *w, const char *s, size_t n)
{
	char *tmp = n <= SCRATCH ? w->dec : zh_malloc(n);
	int d = echo_url_decode(s, n, tmp, 1);

	if (d < 0)
		json_buf_str(b, s, n);
	else
		json_buf_str(b, tmp, (size_t)d);
	if (tmp != w->dec)
		free(tmp);
}

struct qpair {
	const char *k, *v;
	size_t kl, vl;
};

static void json_query(struct buf *b, struct worker *w, const char *q, size_t len)
{
	struct qpair qp[64];
	size_t n = 0, i = 0, a, z;
	int first = 1;

	while (i < len && n < 64) {
		size_t j = i, eq = (size_t)-1;

		while (j < len && q[j] != '&') {
			if (q[j] == '=' && eq == (size_t)-1)
				eq = j;
			j++;
		}
		if (j > i) {
			qp[n].k = q + i;
			qp[n].kl = (eq == (size_t)-1 ? j : eq) - i;
			qp[n].v = eq == (size_t)-1 ? q + j : q + eq + 1;
			qp[n].vl = eq == (size_t)-1 ? 0 : j - eq - 1;
			n++;
		}
		i = j + 1;
	}
	buf_append(b, "{", 1);
	for (a = 0; a < n; a++) {
		int seen = 0, count = 0;

		for (z = 0; z < a && !seen; z++)
			seen = qp[z].kl == qp[a].kl && !memcmp(qp[z].k, qp[a].k, qp[a].kl);
		if (seen)
			continue;
		for (z = a; z < n; z++)
			count += qp[z].kl == qp[a].kl && !memcmp(qp[z].k, qp[a].k, qp[a].kl);
		if (!first)
			buf_append(b, ",", 1);
		first = 0;
		json_decoded(b, w, qp[a].k, qp[a].kl);
		buf_append(b, ":", 1);
		if (count == 1) {
			json_decoded(b, w, qp[a].v, qp[a].vl);
			continue;
		}
		/* Repeated key: an array of its values, in order. */
		buf_append(b, "[", 1);
		for (z = a; z < n; z++) {
			if (qp[z].kl != qp[a].kl || memcmp(qp[z].k, qp[a].k, qp[a].kl))
				continue;
			if (z != a)
				buf_append(b, ",", 1);
			json_decoded(b, w, qp[z].v, qp[z].vl);
		}
		buf_append(b, "]", 1);
	}
	buf_append(b, "}", 1);
}

/* Header names lower-cased; repeated headers joined with ", " (as node's
 * http module does for mendhak/http-https-echo). */
static void json_headers(struct buf *b, const struct h1_header *h, size_t nh)
{
	size_t a, z;
	int first = 1;

	buf_append(b, "{", 1);
	for (a = 0; a < nh; a++) {
		char lname[256];
		size_t k, nl = h[a].name_len < sizeof(lname) ? h[a].name_len : sizeof(lname);
		int seen = 0, more = 0;

		for (z = 0; z < a && !seen; z++)
			seen = h[z].name_len == h[a].name_len &&
			       !strncasecmp(h[z].name, h[a].name, h[a].name_len);
		if (seen)
			continue;
		for (k = 0; k < nl; k++)
			lname[k] = (char)((h[a].name[k] >= 'A' && h[a].name[k] <= 'Z') ?
						  h[a].name[k] + 32 : h[a].name[k]);
		if (!first)
			buf_append(b, ",", 1);
		first = 0;
		json_buf_str(b, lname, nl);
		buf_append(b, ":", 1);
		for (z = a + 1; z < nh && !more; z++)
			more = h[z].name_len == h[a].name_len &&
			       !strncasecmp(h[z].name, h[a].name, h[a].name_len);
		if (!more) {
			json_buf_str(b, h[a].value, h[a].value_len);
			continue;
		}
		{
			struct buf joined;

			buf_init(&joined, 256);
			for (z = a; z < nh; z++) {
				if (h[z].name_len != h[a].name_len ||
				    strncasecmp(h[z].name, h[a].name, h[a].name_len))
					continue;
				if (joined.data)
					buf_append(&joined, ", ", 2);
				buf_append(&joined, h[z].value, h[z].value_len);
			}
			json_buf_str(b, buf_head(&joined), joined.data);
			buf_free(&joined);
		}
	}
	buf_append(b, "}", 1);
}

static void append_str(struct buf *o, const char *s)
{
	buf_append(o, s, strlen(s));
}

static void append_u64(struct buf *o, uint64_t v)
{
	char d[24];
	int i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	buf_append(o, d + i, sizeof(d) - (size_t)i);
}

/* Status line and the common headers; no printf on this path, it is the
 * hot one of every benchmark. */
static void status_and_common(struct buf *o, struct worker *w, int status, int close,
			      const char *ctype, uint64_t clen, int with_len)
{
	buf_reserve(o, 256);
	buf_append(o, "HTTP/1.1 ", 9);
	append_u64(o, (uint64_t)status);
	buf_append(o, " ", 1);
	append_str(o, h1_reason(status, "Status"));
	buf_append(o, "\r\nDate: ", 8);
	append_str(o, http_date(w));
	buf_append(o, "\r\nServer: zerohop-echo\r\n", 24);
	if (ctype) {
		buf_append(o, "Content-Type: ", 14);
		append_str(o, ctype);
		buf_append(o, "\r\n", 2);
	}
	if (with_len) {
		buf_append(o, "Content-Length: ", 16);
		append_u64(o, clen);
		buf_append(o, "\r\n", 2);
	}
	if (close)
		buf_append(o, "Connection: close\r\n", 19);
}

/* A malformed or refused request: status, Connection: close, a one-line
 * text body naming the problem; nothing after it is parsed (invariant 5). */
static void send_error(struct hconn *c, int status, const char *what)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "%d %s: %s\n", status, h1_reason(status, "Status"), what);

	if (n < 0 || (size_t)n >= sizeof(msg))
		n = (int)strlen(msg);
	status_and_common(&c->out, c->w, status, 1, "text/plain; charset=utf-8", (uint64_t)n, 1);
	buf_append(&c->out, "\r\n", 2);
	buf_append(&c->out, msg, (size_t)n);
	c->state = S_CLOSING;
}

static void split_target(const struct h1_request *req, const char **path, size_t *plen,
			 const char **q, size_t *qlen)
{
	const char *t = req->target, *qm = memchr(t, '?', req->target_len);

	*path = t;
	*plen = qm ? (size_t)(qm - t) : req->target_len;
	*q = qm ? qm + 1 : t + req->target_len;
	*qlen = qm ? req->target_len - *plen - 1 : 0;
}

/* Validates the parameters and makes the random choices. 0, or -1 after
 * answering 400. */
static int req_begin(struct hconn *c, const struct h1_request *req, const struct h1_header *h,
		     size_t nh)
{
	struct worker *w = c->w;
	struct echo_params p;
	const char *path, *q;
	size_t plen, qlen;
	char err[256];
	uint64_t v;

	split_target(req, &path, &plen, &q, &qlen);
	if (echo_parse_params(q, qlen, w->srv->max_size, w->srv->max_delay_ns, &p, w->scratch,
			      sizeof(w->scratch), err, sizeof(err))) {
		send_error(c, 400, err);
		return -1;
	}
	memset(&c->pk, 0, sizeof(c->pk));
	c->pk.has_size = echo_pick(&p.size, rnd100(w), &c->pk.size);
	c->pk.status = echo_pick(&p.status, rnd100(w), &v) ? (int)v : 200;
	if (echo_pick(&p.delay, rnd100(w), &v))
		c->pk.delay_ns = v;
	c->pk.close = p.close_pct > 0 && rnd100(w) < p.close_pct;
	if (req->minor_version == 1)
		c->pk.close |= h1_header_has_token(h, nh, "connection", "close");
	else
		c->pk.close |= !h1_header_has_token(h, nh, "connection", "keep-alive");
	return 0;
}

static void debug_body(struct buf *b, struct hconn *c, const struct h1_request *req,
		       const struct h1_header *h, size_t nh, const char *body, size_t blen,
		       uint64_t body_len)
{
	struct echo_srv *s = c->w->srv;
	char peer[80];
	size_t i;

	buf_printf(b, "zerohop echo debug server up for %.1f s on %s (name %s), thread %d\n",
		   (double)(ev_now_ns() - s->start_ns) / 1e9, s->hostname, s->name, c->w->id);
	buf_printf(b, "connections %lu, requests %lu (all threads)\n\n",
		   (unsigned long)atomic_load(&s->conns), (unsigned long)atomic_load(&s->reqs));
	buf_printf(b, "Request from %s\n\n", net_addr_str(&c->peer, peer, sizeof(peer)));
	buf_printf(b, "%.*s %.*s HTTP/1.%d\n\nheaders:\n\n", (int)req->method_len, req->method,
		   (int)req->target_len, req->target, req->minor_version);
	for (i = 0; i < nh; i++)
		buf_printf(b, "%.*s: %.*s\n", (int)h[i].name_len, h[i].name, (int)h[i].value_len,
			   h[i].value);
	buf_printf(b, "\nbody (%llu bytes):\n\n", (unsigned long long)body_len);
	buf_append(b, body, blen);
	buf_append(b, "\n", 1);
}

static void delay_done(struct ev_loop *loop, uint64_t id, void *arg);

/* Writes the response to one complete request (invariant 1: to `pending`
 * when delayed, else straight to `out`). */
static void respond(struct hconn *c, const struct h1_request *req, const struct h1_header *h,
		    size_t nh, const char *body, size_t blen, int had_body)
{
	struct worker *w = c->w;
	struct echo_params p;
	struct buf *o = c->pk.delay_ns ? &c->pending : &c->out;
	struct buf tmp = { 0 };
	const char *path, *q, *ctype = NULL;
	size_t plen, qlen;
	char err[256], peer[80];
	int status = c->pk.status, head = req->method_len == 4 && !memcmp(req->method, "HEAD", 4);
	int no_body = head || status == 204 || status == 304;
	const char *out_body = NULL;
	uint64_t out_len = 0;
	char ctbuf[256];
	int i;

	atomic_fetch_add_explicit(&w->srv->reqs, 1, memory_order_relaxed);
	split_target(req, &path, &plen, &q, &qlen);
	/* Parsed again for the header=K:V pointers (validated in req_begin). */
	if (echo_parse_params(q, qlen, w->srv->max_size, w->srv->max_delay_ns, &p, w->scratch,
			      sizeof(w->scratch), err, sizeof(err)))
		p.nheaders = 0;
	if (plen == 6 && !memcmp(path, "/debug", 6)) {
		buf_init(&tmp, 1024);
		debug_body(&tmp, c, req, h, nh, body, blen, c->body_len);
		ctype = "text/plain; charset=utf-8";
		out_body = buf_head(&tmp);
		out_len = tmp.data;
	} else if (c->pk.has_size) {
		ctype = "application/octet-stream";
		out_body = w->srv->payload;
		out_len = c->pk.size;
	} else if (had_body) {
		int ct = h1_find_header(h, nh, "content-type");

		if (ct >= 0 && h[ct].value_len < sizeof(ctbuf)) {
			memcpy(ctbuf, h[ct].value, h[ct].value_len);
			ctbuf[h[ct].value_len] = 0;
			ctype = ctbuf;
		} else {
			ctype = "application/octet-stream";
		}
		out_body = body;
		out_len = blen;
	} else {
		buf_init(&tmp, 1024);
		buf_append(&tmp, "{\"method\":", 10);
		json_buf_str(&tmp, req->method, req->method_len);
		buf_append(&tmp, ",\"path\":", 8);
		json_buf_str(&tmp, path, plen);
		buf_append(&tmp, ",\"query\":", 9);
		json_query(&tmp, w, q, qlen);
		buf_append(&tmp, ",\"headers\":", 11);
		json_headers(&tmp, h, nh);
		buf_printf(&tmp, ",\"body_length\":%llu,\"protocol\":\"HTTP/1.%d\",\"remote\":",
			   (unsigned long long)c->body_len, req->minor_version);
		net_addr_str(&c->peer, peer, sizeof(peer));
		json_buf_str(&tmp, peer, strlen(peer));
		buf_append(&tmp, ",\"hostname\":", 12);
		json_buf_str(&tmp, w->srv->hostname, strlen(w->srv->hostname));
		buf_append(&tmp, ",\"name\":", 8);
		json_buf_str(&tmp, w->srv->name, strlen(w->srv->name));
		buf_append(&tmp, "}\n", 2);
		ctype = "application/json";
		out_body = buf_head(&tmp);
		out_len = tmp.data;
	}
	if (status == 204 || status == 304)
		ctype = NULL;
	status_and_common(o, w, status, c->pk.close, ctype, out_len, status != 204 && status != 304);
	if (!c->pk.close && req->minor_version == 0)
		buf_append(o, "Connection: keep-alive\r\n", 24);
	for (i = 0; i < p.nheaders; i++) {
		append_str(o, p.hname[i]);
		buf_append(o, ": ", 2);
		append_str(o, p.hvalue[i]);
		buf_append(o, "\r\n", 2);
	}
	buf_append(o, "\r\n", 2);
	if (!no_body)
		buf_append(o, out_body, out_len);
	if (tmp.area)
		buf_free(&tmp);
	if (c->pk.delay_ns) {
		c->state = S_DELAYED;
		c->timer = ev_timer_add(w->loop, ev_now_ns() + c->pk.delay_ns, delay_done, c);
	} else if (c->pk.close) {
		c->state = S_CLOSING;
	}
}

/* ---- input processing ---- */

static int process(struct hconn *c);
static int flush_out(struct hconn *c);

static void delay_done(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct hconn *c = arg;

	c->timer = 0;
	buf_append(&c->out, buf_head(&c->pending), c->pending.data);
	buf_consume(&c->pending, c->pending.data);
	c->state = c->pk.close || c->peer_eof ? S_CLOSING : S_HEAD;
	process(c);	/* pipelined requests waiting behind the delayed one; may free c */
}

/* Head parsed in `in` (r bytes). Returns 1 to go on parsing, 0 to stop. */
static int on_head(struct hconn *c, int r, const struct h1_request *req, struct h1_header *h,
		   size_t nh)
{
	uint64_t cl = 0;
	int err, f;

	err = h1_check_host(req, h, nh);
	if (err) {
		send_error(c, 400, "missing or repeated Host header");
		return 0;
	}
	f = h1_body_framing(h, nh, 1, 0, 0, &cl);
	if (f < 0) {
		send_error(c, h1_err_status(f), h1_err_str(f));
		return 0;
	}
	if (req_begin(c, req, h, nh))
		return 0;
	c->framing = f;
	c->body_len = 0;
	if (f == H1_BODY_NONE || (f == H1_BODY_LENGTH && c->in.data - (size_t)r >= cl)) {
		/* Fast path: the whole request is in `in`. */
		if (f == H1_BODY_LENGTH)
			c->body_len = cl;
		respond(c, req, h, nh, buf_head(&c->in) + r, (size_t)cl, cl > 0);
		buf_consume(&c->in, (size_t)r + (size_t)cl);
		return c->state == S_HEAD;
	}
	/* Invariant 4: keep a copy of the head while the body streams in. */
	buf_consume(&c->head, c->head.data);
	buf_append(&c->head, buf_head(&c->in), (size_t)r);
	buf_consume(&c->in, (size_t)r);
	c->keep_body = !c->pk.has_size;
	c->body_left = cl;
	h1_chunked_init(&c->ch);
	if (f == H1_BODY_LENGTH && cl > c->w->srv->max_body && c->keep_body) {
		send_error(c, 413, "body over --max-body, not echoed");
		return 0;
	}
	if (req->minor_version == 1 && h1_header_has_token(h, nh, "expect", "100-continue"))
		buf_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	c->state = S_BODY;
	return 1;
}

static void body_complete(struct hconn *c)
{
	struct h1_header h[MAX_HDRS];
	struct h1_request req;
	size_t nh = MAX_HDRS;
	int r;

	r = h1_parse_request(buf_head(&c->head), c->head.data, 0, limits(), &req, h, &nh);
	c->state = S_HEAD;
	if (r <= 0) {	/* cannot happen: it parsed before */
		send_error(c, 500, "internal: head re-parse failed");
		return;
	}
	respond(c, &req, h, nh, buf_head(&c->body), c->body.data, c->body_len > 0);
	buf_consume(&c->body, c->body.data);
	buf_consume(&c->head, c->head.data);
	if (c->body.size > 65536)	/* do not keep a big body's storage around */
		buf_free(&c->body);
}

/* Takes body bytes from `in`. Returns 1 when the body is complete. */
static int on_body(struct hconn *c)
{
	size_t take, n;
	ssize_t r;

	if (c->framing == H1_BODY_LENGTH) {
		take = c->in.data < c->body_left ? c->in.data : (size_t)c->body_left;
		if (c->keep_body)
			buf_append(&c->body, buf_head(&c->in), take);
		buf_consume(&c->in, take);
		c->body_left -= take;
		c->body_len += take;
		return c->body_left == 0;
	}
	n = c->in.data;
	r = h1_decode_chunked(&c->ch, buf_head(&c->in), &n);
	if (r < 0) {
		send_error(c, 400, h1_err_str((int)r));
		return 0;
	}
	if (c->keep_body) {
		if (c->body.data + n > c->w->srv->max_body) {
			send_error(c, 413, "body over --max-body, not echoed");
			return 0;
		}
		buf_append(&c->body, buf_head(&c->in), n);
	}
	c->body_len += n;
	/* Payload at [0, n), leftover (next request) at [n, n + r). */
	c->in.data = n + (size_t)r;
	buf_consume(&c->in, n);
	return h1_chunked_done(&c->ch);
}

/* Parses and answers what `in` holds. Returns -1 when c was freed. */
static int process(struct hconn *c)
{
	while (c->out.data <= OUT_HIGH) {
		if (c->state == S_HEAD) {
			struct h1_header h[MAX_HDRS];
			struct h1_request req;
			size_t nh = MAX_HDRS;
			int r;

			if (!c->in.data)
				break;
			r = h1_parse_request(buf_head(&c->in), c->in.data, c->last_len, limits(), &req,
					     h, &nh);
			if (r == -EAGAIN) {
				c->last_len = c->in.data;
				break;
			}
			c->last_len = 0;
			if (r < 0) {
				send_error(c, h1_err_status(r), h1_err_str(r));
				break;
			}
			if (!on_head(c, r, &req, h, nh))
				break;
		} else if (c->state == S_BODY) {
			if (!c->in.data)
				break;
			if (on_body(c))
				body_complete(c);
		} else {
			break;
		}
	}
	return flush_out(c);
}

/* Writes what it can; then fixes interest, or moves CLOSING on. Returns -1
 * when c was freed (peer gone). */
static int flush_out(struct hconn *c)
{
	ssize_t n;

	while (c->out.data) {
		n = buf_write_fd(&c->out, c->fd);
		if (n == -EAGAIN)
			break;
		if (n < 0) {
			hconn_free(c);
			return -1;
		}
	}
	if (!c->out.data && c->out.size > 65536)
		buf_free(&c->out);
	if (c->state == S_CLOSING && !c->out.data) {
		shutdown(c->fd, SHUT_WR);
		c->state = S_LINGER;
		buf_consume(&c->in, c->in.data);
		c->timer = ev_timer_add(c->w->loop, ev_now_ns() + LINGER_NS, linger_done, c);
	}
	set_interest(c);
	return 0;
}

static void hconn_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct hconn *c = arg;
	ssize_t n;
	int eof = 0;

	if (events & EV_READ) {
		/* One read per wakeup keeps the loop fair between connections. */
		n = buf_read_fd(&c->in, fd, 0);
		if (n == 0)
			eof = 1;
		else if (n < 0 && n != -EAGAIN)
			eof = 1;
		if (c->state == S_LINGER) {
			buf_consume(&c->in, c->in.data);
			if (eof)
				hconn_free(c);
			return;
		}
		if (eof) {
			/* Client done sending (maybe `printf ... | nc -N`): answer
			 * what was already parsed, a delayed answer included, then
			 * close. An incomplete request is dropped. */
			c->peer_eof = 1;
			if (c->state == S_HEAD || c->state == S_BODY)
				c->state = S_CLOSING;
			flush_out(c);
			return;
		}
		process(c);
		return;
	}
	if (events & (EV_WRITE | EV_ERROR)) {
		if (events & EV_ERROR && !(events & EV_WRITE)) {
			hconn_free(c);
			return;
		}
		if (flush_out(c))
			return;
		/* Room again below OUT_HIGH: parse what waited (invariant 2). */
		if ((c->state == S_HEAD || c->state == S_BODY) && c->in.data &&
		    c->out.data <= OUT_HIGH)
			process(c);
	}
}

static void http_accept(struct ev_loop *loop, int lfd, int events, void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < 64; i++) {
		struct net_addr peer;
		struct hconn *c;
		int fd = net_accept(lfd, &peer);

		if (fd < 0) {
			if (fd != -EAGAIN && fd != -ECONNABORTED)
				zh_warn("echo: accept: %s", strerror(-fd));
			return;
		}
		net_set_nodelay(fd);
		c = zh_calloc(1, sizeof(*c));
		c->w = w;
		c->fd = fd;
		c->peer = peer;
		c->state = S_HEAD;
		atomic_fetch_add_explicit(&w->srv->conns, 1, memory_order_relaxed);
		set_interest(c);
		if (!c->mask)
			hconn_free(c);
	}
}

/* ---- TCP echo ---- */

static void tconn_free(struct tconn *t)
{
	ev_del(t->w->loop, t->fd);
	close(t->fd);
	buf_free(&t->b);
	free(t);
}

static void tconn_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct tconn *t = arg;
	ssize_t n;
	int m;

	if (events & EV_READ && !t->b.data) {
		n = buf_read_fd(&t->b, fd, 0);
		if (n == 0 || (n < 0 && n != -EAGAIN)) {
			tconn_free(t);
			return;
		}
	}
	while (t->b.data) {
		n = buf_write_fd(&t->b, fd);
		if (n == -EAGAIN)
			break;
		if (n < 0) {
			tconn_free(t);
			return;
		}
	}
	/* Back-pressure: stop reading while our echo cannot be written. */
	m = t->b.data ? EV_WRITE : EV_READ;
	if (m != t->mask && !ev_add(loop, fd, m, tconn_io, t))
		t->mask = m;
}

static void tcp_accept(struct ev_loop *loop, int lfd, int events, void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < 64; i++) {
		struct tconn *t;
		int fd = net_accept(lfd, NULL);

		if (fd < 0)
			return;
		net_set_nodelay(fd);
		t = zh_calloc(1, sizeof(*t));
		t->w = w;
		t->fd = fd;
		t->mask = EV_READ;
		if (ev_add(loop, fd, EV_READ, tconn_io, t))
			tconn_free(t);
	}
}

/* ---- UDP echo ---- */

static void udp_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < 64; i++) {
		struct net_addr from;
		ssize_t n;

		from.len = sizeof(from.ss);
		n = recvfrom(fd, w->udp_buf, sizeof(w->udp_buf), 0, (struct sockaddr *)&from.ss,
			     &from.len);
		if (n < 0)
			return;
		/* Best effort, as UDP is: a full socket buffer drops the echo. */
		if (sendto(fd, w->udp_buf, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&from.ss,
			   from.len) < 0)
			continue;
	}
}

/* ---- workers ---- */

static void stop_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	ev_stop(loop);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int err;

	err = ev_run(w->loop);
	if (err)
		zh_err("echo: thread %d: event loop: %s", w->id, strerror(-err));
	return NULL;
}

static int worker_setup(struct worker *w)
{
	struct echo_srv *s = w->srv;
	int i, err;

	w->loop = ev_loop_new(1024);
	if (!w->loop)
		return -errno;
	w->rng = ev_now_ns() ^ ((uint64_t)(w->id + 1) * 0x9e3779b97f4a7c15ull) ^ (uint64_t)getpid();
	if (!w->rng)
		w->rng = 1;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0)
		return -errno;
	err = ev_add(w->loop, w->efd, EV_READ, stop_cb, w);
	if (err)
		return err;
	for (i = 0; i < s->nlisten; i++) {
		ev_file_cb *cb = s->kind[i] == L_HTTP ? http_accept :
				 s->kind[i] == L_TCP ? tcp_accept : udp_io;

		/* SO_REUSEPORT only to share a port between our threads: with
		 * one thread a port already taken is a clear EADDRINUSE rather
		 * than a silent share with another root process. */
		w->lfd[i] = net_listen(&s->addr[i], s->kind[i] == L_UDP ? SOCK_DGRAM : SOCK_STREAM,
				       s->threads > 1 ? NET_REUSEPORT : 0, 4096);
		if (w->lfd[i] < 0) {
			char a[80];

			fprintf(stderr, "zerohop echo: cannot listen on %s %s: %s\n",
				s->kind[i] == L_HTTP ? "http" : s->kind[i] == L_TCP ? "tcp" : "udp",
				net_addr_str(&s->addr[i], a, sizeof(a)), strerror(-w->lfd[i]));
			return w->lfd[i];
		}
		/* Port 0: every thread binds the port the first one got. */
		if (net_addr_port(&s->addr[i]) == 0)
			net_local_addr(w->lfd[i], &s->addr[i]);
		err = ev_add(w->loop, w->lfd[i], EV_READ, cb, w);
		if (err)
			return err;
	}
	return 0;
}

static void worker_teardown(struct worker *w)
{
	int i;

	for (i = 0; i < w->srv->nlisten; i++)
		if (w->lfd[i] >= 0)
			close(w->lfd[i]);
	if (w->efd >= 0)
		close(w->efd);
	/* Connections still open are reclaimed by the process exit. */
	ev_loop_free(w->loop);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zerohop echo [--http [ADDR:]PORT]... [--tcp [ADDR:]PORT]... [--udp [ADDR:]PORT]...\n"
		"                    [--threads N] [--name NAME] [--max-size BYTES]\n"
		"                    [--max-delay DURATION] [--max-body BYTES]\n"
		"  defaults: --http 8080 --tcp 8078 --udp 8078 on 0.0.0.0, 1 thread, name = host name,\n"
		"  --max-size 262144 (size=N is clamped to it), --max-delay 1.5s, --max-body 67108864\n"
		"  HTTP query parameters: size=N[:PCT,...] status=CODE[:PCT,...] delay=DUR[:PCT,...]\n"
		"  close=true|PCT header=NAME:VALUE; GET /debug dumps the request as text.\n");
}

static int parse_u64_arg(const char *opt, const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end || !*s || *s == '-') {
		fprintf(stderr, "zerohop echo: %s: '%s' is not a byte count\n", opt, s);
		return -1;
	}
	*v = x;
	return 0;
}

static int add_listen(struct echo_srv *s, int kind, const char *arg, const char *opt)
{
	if (s->nlisten == MAX_LISTEN) {
		fprintf(stderr, "zerohop echo: at most %d listening ports\n", MAX_LISTEN);
		return -1;
	}
	if (net_parse_addr(arg, "0.0.0.0", -1, &s->addr[s->nlisten])) {
		fprintf(stderr, "zerohop echo: %s: '%s' is not PORT, ADDR:PORT or [V6]:PORT\n", opt,
			arg);
		return -1;
	}
	s->kind[s->nlisten++] = kind;
	return 0;
}

int cli_echo(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "http", required_argument, NULL, 'H' },
		{ "tcp", required_argument, NULL, 'T' },
		{ "udp", required_argument, NULL, 'U' },
		{ "threads", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "max-delay", required_argument, NULL, 'D' },
		{ "max-body", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct echo_srv *s = zh_calloc(1, sizeof(*s));
	struct worker *w = NULL;
	sigset_t set;
	int opt, i, sig, rc = 1, started = 0;
	uint64_t v;
	char a[80];

	s->threads = 1;
	s->max_size = 262144;
	s->max_delay_ns = 1500000000ull;
	s->max_body = 64ull << 20;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'H':
		case 'T':
		case 'U':
			if (add_listen(s, opt == 'H' ? L_HTTP : opt == 'T' ? L_TCP : L_UDP, optarg,
				       opt == 'H' ? "--http" : opt == 'T' ? "--tcp" : "--udp"))
				goto out;
			break;
		case 't':
			if (parse_u64_arg("--threads", optarg, &v) || v < 1 || v > 256) {
				fprintf(stderr, "zerohop echo: --threads: want 1..256, got '%s'\n", optarg);
				goto out;
			}
			s->threads = (int)v;
			break;
		case 'n':
			s->name = optarg;
			break;
		case 'S':
			if (parse_u64_arg("--max-size", optarg, &s->max_size))
				goto out;
			break;
		case 'B':
			if (parse_u64_arg("--max-body", optarg, &s->max_body))
				goto out;
			break;
		case 'D':
			if (echo_parse_duration(optarg, strlen(optarg), &s->max_delay_ns)) {
				fprintf(stderr, "zerohop echo: --max-delay: '%s' is not a duration (e.g. 1.5s, 200ms)\n",
					optarg);
				goto out;
			}
			break;
		case 'h':
			usage(stdout);
			rc = 0;
			goto out;
		default:
			usage(stderr);
			rc = 2;
			goto out;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zerohop echo: unexpected argument '%s'\n", argv[optind]);
		rc = 2;
		goto out;
	}
	if (!s->nlisten) {
		add_listen(s, L_HTTP, "8080", "--http");
		add_listen(s, L_TCP, "8078", "--tcp");
		add_listen(s, L_UDP, "8078", "--udp");
	}
	if (gethostname(s->hostname, sizeof(s->hostname) - 1))
		snprintf(s->hostname, sizeof(s->hostname), "unknown");
	if (!s->name)
		s->name = s->hostname;
	s->payload = zh_malloc(s->max_size ? s->max_size : 1);
	for (v = 0; v < s->max_size; v++)	/* printable, like fortio's payload */
		s->payload[v] = (char)('a' + v % 26);
	s->start_ns = ev_now_ns();

	/* Signals are taken by sigwait() here; workers inherit the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	w = zh_calloc((size_t)s->threads, sizeof(*w));
	for (i = 0; i < s->threads; i++) {
		int err, k;

		w[i].id = i;
		w[i].srv = s;
		w[i].efd = -1;
		for (k = 0; k < MAX_LISTEN; k++)
			w[i].lfd[k] = -1;
		err = worker_setup(&w[i]);
		if (err) {
			fprintf(stderr, "zerohop echo: thread %d: set-up failed: %s\n", i, strerror(-err));
			for (k = 0; k <= i; k++)
				worker_teardown(&w[k]);
			goto out;
		}
	}
	for (i = 0; i < s->nlisten; i++)
		printf("zerohop echo: %s %s\n",
		       s->kind[i] == L_HTTP ? "http" : s->kind[i] == L_TCP ? "tcp" : "udp",
		       net_addr_str(&s->addr[i], a, sizeof(a)));
	printf("zerohop echo: %d thread(s), name %s, pid %d\n", s->threads, s->name, (int)getpid());
	fflush(stdout);
	for (i = 0; i < s->threads; i++) {
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i])) {
			fprintf(stderr, "zerohop echo: cannot start thread %d\n", i);
			break;
		}
		started++;
	}
	if (started == s->threads) {
		sigwait(&set, &sig);
		rc = 0;
	}
	for (i = 0; i < started; i++) {
		uint64_t one = 1;

		if (write(w[i].efd, &one, sizeof(one)) < 0)
			zh_warn("echo: cannot wake thread %d", i);
		pthread_join(w[i].th, NULL);
	}
	for (i = 0; i < s->threads; i++)
		worker_teardown(&w[i]);
out:
	free(w);
	free(s->payload);
	free(s);
	return rc;
}
