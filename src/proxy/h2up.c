/* h2up.c — HTTP/2 upstreams of the proxy (px_): backends whose Service
 * port declares cleartext HTTP/2 (px_pool_policy.h2c) get one multiplexed
 * connection per endpoint (s->hosts[i].h2c), shared by all client
 * connections; libnghttp2 does framing, HPACK and flow control.
 *
 * Design note. Each try on such a backend is a px_up without a socket
 * (u->h2, struct px_h2us): the stream layer writes the request into u->out
 * as HTTP/1.1 bytes and reads the response through the same px_up, so
 * retries, timeouts, outlier detection and metrics apply unchanged. Here
 * the request head in u->out is split into HEADERS (pseudo-headers from
 * the request line and Host; invariant 8), its body decoded into DATA;
 * the response HEADERS stay fields (us->rh) that the stream layer takes
 * as its parsed head (px_h2up_resp_head, "content-length: 0" added for a
 * headers-only answer such as gRPC's trailers-only), DATA go raw to
 * u->in, END_STREAM sets u->in_end (invariant 7), and trailers go to the
 * client's HTTP/2 view (c->trailers, h2conn.c).
 *
 * Invariants:
 *  1. No nghttp2 call runs inside the stream layer: px_h2up_update and
 *     px_h2up_release only record and queue the connection (kick, s->h2q);
 *     the session runs from px_h2up_run_kicked, which batch.c's
 *     px_wq_flush calls before each round of sends (so before the loop
 *     waits, once per connection for every stream that moved in the
 *     turn), or from the socket's events (px_h2c_run), and reports to
 *     streams through s->up_ops afterwards, looking each one up again by
 *     id (a report may end other streams). (It was a zero-delay timer:
 *     two timerfd_settime calls and a read per loop turn, a fifth of the
 *     proxy's CPU on the HTTP/2 -> HTTP/2 path.)
 *  2. Memory per try is bounded as on the client side: response DATA is
 *     acknowledged (nghttp2_session_consume) only while u->in holds less
 *     than PX_HIGH; request body moves from u->out into the data provider's
 *     buffer only while that holds less than PX_HIGH. The stream windows
 *     bound each try, so the connection's receive window is opened wide
 *     (PX_H2C_CONN_WINDOW): a connection-level stall would only idle the
 *     backend.
 *  3. A released try whose stream is still open is reset (CANCEL); the
 *     connection lives on for the others. A connection that fails ends
 *     every try on it as a connect failure (not connected yet) or a reset.
 *  4. The socket is a px_up (h2c->sock) so batch.c reads and sends it like
 *     any upstream; it is never pooled, never attached to a stream, and
 *     counted in its endpoint's n_conns (px_hosts_prune keeps the record).
 *  5. An endpoint has a list of connections (hosts[i].h2c, oldest first).
 *     A try goes to the first one with fewer tries than the backend's
 *     SETTINGS_MAX_CONCURRENT_STREAMS (until its SETTINGS arrive: the
 *     value another connection to that endpoint got, else 100, RFC 9113's
 *     recommended minimum); when all are full a new
 *     connection is opened, up to the pool's max_connections, beyond which
 *     the try waits in the endpoint's pending FIFO (upstream.c,
 *     docs/proxy.md invariant 22: px_h2up_room says when, px_pool_wake
 *     when a stream, a connection or a SETTINGS may have freed a slot);
 *     px_h2up_get still puts a try on the least loaded one if called
 *     without room (a fallback: then it waits inside nghttp2). Extra
 *     connections close like any other once idle (px_h2up_close_idle).
 *  6. A run touches only the tries that moved: a try is on its
 *     connection's feed list (px_h2us_want_feed) when the stream layer
 *     changed its buffers (px_h2up_update), response DATA wait to be
 *     acknowledged, the data provider took request bytes, or the
 *     connection came up; on the dirty list (px_h2us_mark) when a frame
 *     or a close changed what the stream layer should see. px_h2c_run
 *     feeds the feed list, px_h2c_report pops the dirty list one try at a
 *     time (a report may release others: px_h2up_release takes a try off
 *     both lists). So a loop turn costs O(tries that moved), not
 *     O(tries on the connection) per run and O(n^2) per report; a
 *     release leaves h->streams in O(1) (doubly linked).
 *  7. Frame to frame for answers: a try's response never becomes HTTP/1.1
 *     text. Its head is the fields nghttp2 decoded and checked (RFC 9113
 *     8.2), kept in us->rh as "name: value\r\n" lines, at most
 *     lim.max_head bytes (else the try is reset: a 502) and PX_MAX_HDRS
 *     fields (else px_h2up_resp_head fails: a 502); u->in holds only body
 *     bytes, raw, delimited by the frames; a clean end is u->in_end, a
 *     reset is u->eof: a body without content-length is complete only
 *     with in_end (stream.c px_pump_resp). 1xx heads are dropped here.
 *  8. The request head in u->out is always the stream layer's own text
 *     (stream.c px_build_up_head, written from a head h1.c parsed
 *     strictly): it is split at its separators (px_h2us_split_head), not
 *     parsed a second time; what that writer never writes is refused
 *     (-EPROTO: the try fails as a reset).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nghttp2/nghttp2.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/h1.h"
#include "zerohop/log.h"
#include "zerohop/net.h"
#include "h2nv.h"
#include "px_int.h"

struct px_h2us {		/* one try on an HTTP/2 upstream */
	struct px_up u;		/* the view the stream layer uses */
	struct px_h2c *h2c;
	int32_t id;		/* nghttp2 stream id, 0 = not submitted */
	struct px_h2us *next, **pprev;	/* h2c->streams: unlinked in O(1) */
	/* request: u.out -> HEADERS + DATA */
	int framing;
	uint64_t left;
	struct h1_chunked ck;
	struct buf body;
	bool req_done, deferred;
	/* response: HEADERS -> rh (fields), DATA -> u.in (raw, invariant 7) */
	int status;
	struct buf hdrs;	/* fields of the HEADERS being received */
	struct buf rh;		/* the response head's fields, "name: value\r\n" */
	bool head_end;		/* that HEADERS ended the stream (no body) */
	bool resp_head, resp_done, closed;
	size_t unacked;
	/* invariant 6: on h2c's lists while it has something to do */
	bool dirty;		/* to report (h2c->dirty) */
	bool fq;		/* to feed (h2c->feed) */
	struct px_h2us *dnext, *fnext;
};

struct px_h2c {			/* one multiplexed connection to an endpoint */
	struct px_up sock;	/* invariant 4 */
	nghttp2_session *sess;
	struct px_h2mem mem;	/* the session's memory (h2mem.c: its small-block lists) */
	struct px_h2c *next;	/* the endpoint's list (invariant 5) */
	int n_tries;		/* tries attached (h->streams) */
	int host;
	bool connected, dead, running;
	bool settings_seen;	/* the backend's SETTINGS arrived */
	struct px_h2us *streams;
	struct px_h2us *dirty, *dirty_tail;	/* tries to report, in order (invariant 6) */
	struct px_h2us *feed;	/* tries to feed (invariant 6) */
	int qslot;		/* index in s->h2q while kicked, -1 = not */
	uint64_t kick_timer;	/* px_h2up_run_kicked's fallback (invariant 1) */
	uint64_t idle_since;	/* when its last try ended (or it opened) */
	struct px_h2us *hs_last;	/* on_header's last try (a block's fields
					 * come in a row): no lookup per field;
					 * cleared when that try is released */
};

#define PX_H2C_ASSUMED_STREAMS 100	/* until the backend's SETTINGS (invariant 5) */
#define PX_H2C_CONN_WINDOW (16 << 20)	/* the connection's receive window (px_h2c_open) */

#define SOCK_H2C(w) ((struct px_h2c *)(void *)((char *)(w) - offsetof(struct px_h2c, sock.wr)))

static void px_h2c_run(struct px_h2c *h);

static void px_h2c_kick_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_h2c *h = arg;

	(void)loop;
	(void)id;
	h->kick_timer = 0;
	px_h2c_run(h);
}

/* Queue h to run before the loop waits (invariant 1). A connection that
 * is running needs no kick: its run feeds every try after the reports. */
static void px_h2c_kick(struct px_h2c *h)
{
	struct px_server *s = h->sock.srv;

	if (h->qslot >= 0 || h->kick_timer || h->running)
		return;
	if (s->n_h2q == s->cap_h2q) {
		s->cap_h2q = s->cap_h2q ? 2 * s->cap_h2q : 16;
		s->h2q = zh_realloc(s->h2q, s->cap_h2q * sizeof(*s->h2q));
	}
	h->qslot = (int)s->n_h2q;
	s->h2q[s->n_h2q++] = h;
}

/* Runs per px_h2up_run_kicked call beyond which the rest go to a zero-delay
 * timer: a run only reports what its input changed, so kicks settle in a
 * few rounds; the bound keeps the before-poll hook finite regardless. */
#define PX_H2Q_MAX_RUNS 4096

void px_h2up_run_kicked(struct px_server *s)
{
	unsigned i, runs = 0;

	for (i = 0; i < s->n_h2q; i++) {	/* (kicks during a run append) */
		struct px_h2c *h = s->h2q[i];

		if (!h)
			continue;	/* freed meanwhile */
		s->h2q[i] = NULL;
		h->qslot = -1;
		if (++runs > PX_H2Q_MAX_RUNS) {
			h->kick_timer = ev_timer_add(s->loop, ev_now_ns(), px_h2c_kick_cb, h);
			continue;
		}
		px_h2c_run(h);
	}
	s->n_h2q = 0;
}

/* ---- nghttp2 callbacks (client session) --------------------------------------- */

static struct px_h2us *px_h2us_of(struct px_h2c *h, int32_t id)
{
	return nghttp2_session_get_stream_user_data(h->sess, id);
}

/* Report us to its stream after this run (invariant 6). */
static void px_h2us_mark(struct px_h2us *us)
{
	struct px_h2c *h = us->h2c;

	if (us->dirty || !h)
		return;
	us->dirty = true;
	us->dnext = NULL;
	if (h->dirty_tail)
		h->dirty_tail->dnext = us;
	else
		h->dirty = us;
	h->dirty_tail = us;
}

/* Feed us in its connection's next run (invariant 6). */
static void px_h2us_want_feed(struct px_h2us *us)
{
	struct px_h2c *h = us->h2c;

	if (us->fq || !h)
		return;
	us->fq = true;
	us->fnext = h->feed;
	h->feed = us;
}

/* h->streams, doubly linked: a release costs O(1), not a walk of the
 * connection's tries. */
static void px_h2us_link(struct px_h2c *h, struct px_h2us *us)
{
	us->next = h->streams;
	us->pprev = &h->streams;
	if (h->streams)
		h->streams->pprev = &us->next;
	h->streams = us;
}

static void px_h2us_unlink(struct px_h2us *us)
{
	*us->pprev = us->next;
	if (us->next)
		us->next->pprev = us->pprev;
	us->next = NULL;
	us->pprev = NULL;
}

/* Take us off both lists (released, invariant 6). */
static void px_h2us_unlist(struct px_h2c *h, struct px_h2us *us)
{
	struct px_h2us **pp, *prev = NULL;

	if (us->dirty) {
		for (pp = &h->dirty; *pp; prev = *pp, pp = &(*pp)->dnext)
			if (*pp == us) {
				*pp = us->dnext;
				if (h->dirty_tail == us)
					h->dirty_tail = prev;
				break;
			}
		us->dirty = false;
	}
	if (us->fq) {
		for (pp = &h->feed; *pp; pp = &(*pp)->fnext)
			if (*pp == us) {
				*pp = us->fnext;
				break;
			}
		us->fq = false;
	}
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
		     size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct px_h2c *h = ud;
	struct px_h2us *us = h->hs_last;

	if (!us || us->id != f->hd.stream_id)
		us = h->hs_last = px_h2us_of(h, f->hd.stream_id);

	(void)sess;
	(void)flags;
	if (!us || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	if (nl == 7 && !memcmp(name, ":status", 7)) {
		us->status = 0;
		for (size_t i = 0; i < vl && i < 3; i++)
			us->status = us->status * 10 + (value[i] - '0');
		return 0;
	}
	if (nl && name[0] == ':')
		return 0;
	if (us->hdrs.data + nl + vl + 4 > us->u.srv->lim.max_head)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;	/* reset: a 502 */
	px_buf_get(us->u.srv, &us->hdrs);
	buf_append(&us->hdrs, name, nl);
	buf_append(&us->hdrs, ": ", 2);
	buf_append(&us->hdrs, value, vl);
	buf_append(&us->hdrs, "\r\n", 2);
	return 0;
}

/* The body ended (END_STREAM): u.in holds the rest of it (invariant 7). */
static void px_h2us_resp_end(struct px_h2us *us)
{
	if (us->resp_done)
		return;
	us->resp_done = true;
	us->u.in_end = true;
}

/* The response head arrived: its fields stay in rh for the stream layer
 * (px_h2up_resp_head); the buffer is moved, not copied. */
static void px_h2us_head(struct px_h2us *us, bool end_stream)
{
	us->rh = us->hdrs;
	us->hdrs = (struct buf){ 0 };
	us->head_end = end_stream;
	us->resp_head = true;
}

int px_h2up_resp_head(struct px_up *u, struct h1_response *r, struct h1_header *h, size_t *n)
{
	struct px_h2us *us = u->h2;
	/* (no field but :status: rh has no area, and NULL + 0 is undefined) */
	const char *l = us->rh.data ? buf_head(&us->rh) : "", *e = l + us->rh.data;
	size_t k = 0;
	bool has_cl = false;

	if (!us->resp_head)
		return -EAGAIN;
	while (l < e) {	/* our own "name: value\r\n" lines (on_header) */
		const char *eol = memchr(l, '\n', (size_t)(e - l)), *colon;

		colon = memchr(l, ':', (size_t)(eol - l));
		if (k == *n)
			return -EPROTO;	/* more fields than an HTTP/1.1 head may have */
		h[k] = (struct h1_header){ .name = l, .name_len = (size_t)(colon - l),
					   .value = colon + 2,
					   .value_len = (size_t)(eol - 1 - (colon + 2)) };
		has_cl |= px_name_is(&h[k], "content-length");
		k++;
		l = eol + 1;
	}
	if (us->head_end && !has_cl) {	/* headers only (gRPC trailers-only): no body */
		if (k == *n)
			return -EPROTO;
		h[k++] = (struct h1_header){ .name = "content-length", .name_len = 14,
					     .value = "0", .value_len = 1 };
	}
	*n = k;
	r->minor_version = 1;
	r->status = us->status;
	r->reason = h1_reason(us->status, "Unknown");
	r->reason_len = strlen(r->reason);
	return 0;
}

/* Trailer fields: to the client's HTTP/2 view (h2conn.c sends them); an
 * HTTP/1.1 client gets none (the chunked end carries no trailers here). */
static void px_h2us_trailers(struct px_h2us *us)
{
	struct px_stream *st = us->u.st;
	const char *p = us->hdrs.data ? buf_head(&us->hdrs) : "", *e = p + us->hdrs.data;

	for (const char *l = p; st && l < e;) {	/* the stream's gRPC result */
		const char *eol = memchr(l, '\n', (size_t)(e - l));

		if (e - l > 13 && !strncasecmp(l, "grpc-status: ", 13))
			st->grpc_status = atoi(l + 13);
		l = eol ? eol + 1 : e;
	}
	if (st && st->c->one_req && us->hdrs.data) {
		px_buf_get(us->u.srv, &st->c->trailers);
		buf_append(&st->c->trailers, buf_head(&us->hdrs), us->hdrs.data);
	}
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
	struct px_h2c *h = ud;
	struct px_h2us *us = px_h2us_of(h, f->hd.stream_id);
	bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;

	if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK)) {
		/* remembered per endpoint: a new connection to it assumes the
		 * same limit before its own SETTINGS arrive (invariant 5) */
		h->settings_seen = true;
		h->sock.srv->hosts[h->host].h2_max_streams = nghttp2_session_get_remote_settings(
			sess, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
		px_pool_wake(h->sock.srv, h->host);	/* the limit may have grown */
	}
	if (!us)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS) {
		if (!us->resp_head && us->status >= 200)
			px_h2us_head(us, end);
		else if (us->resp_head)
			px_h2us_trailers(us);
		us->hdrs.data = us->hdrs.head = 0;	/* (a 1xx: dropped) */
		px_h2us_mark(us);
	}
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && end &&
	    us->resp_head) {
		px_h2us_resp_end(us);
		px_h2us_mark(us);
	}
	return 0;
}

static int on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
			 size_t len, void *ud)
{
	struct px_h2us *us = px_h2us_of(ud, id);
	struct buf *in;

	(void)flags;
	if (!us || !us->resp_head) {
		nghttp2_session_consume(sess, id, len);
		return 0;
	}
	in = &us->u.in;
	px_buf_get(us->u.srv, in);
	buf_append(in, data, len);	/* raw: the frames delimit it (invariant 7) */
	us->unacked += len;
	px_h2us_mark(us);
	px_h2us_want_feed(us);	/* acknowledge it (invariant 2) */
	return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t err, void *ud)
{
	struct px_h2us *us = px_h2us_of(ud, id);

	(void)sess;
	(void)err;
	if (!us)
		return 0;
	us->closed = true;
	if (!us->resp_done)
		us->u.eof = true;	/* reset (REFUSED_STREAM...): as a closed upstream */
	px_h2us_mark(us);
	return 0;
}

/* ---- request: u.out (HTTP/1.1) -> frames --------------------------------------- */

static ssize_t px_h2us_read(nghttp2_session *sess, int32_t id, uint8_t *out, size_t len,
			    uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct px_h2us *us = src->ptr;
	size_t n = us->body.data < len ? us->body.data : len;

	(void)sess;
	(void)id;
	(void)ud;
	if (n) {
		memcpy(out, buf_head(&us->body), n);
		buf_consume(&us->body, n);
		if (us->u.out.data)
			px_h2us_want_feed(us);	/* room for more (invariant 6) */
	}
	if (!n && !us->req_done) {
		us->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (us->req_done && !us->body.data)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* Fields an HTTP/1.1 head carries that HTTP/2 must not (RFC 9113 §8.2.2;
 * host becomes :authority), and content-length when the caller frames
 * the body itself. */
static bool px_h2_drop_field(const struct h1_header *h, bool drop_length)
{
	return px_name_is(h, "host") || px_name_is(h, "connection") ||
	       px_name_is(h, "keep-alive") || px_name_is(h, "proxy-connection") ||
	       px_name_is(h, "transfer-encoding") || px_name_is(h, "te") ||
	       px_name_is(h, "upgrade") || (drop_length && px_name_is(h, "content-length"));
}

/* Split the request head at the start of u.out into *rq and h[0..*n): the
 * stream layer's own text (stream.c px_build_up_head, from a head h1.c
 * parsed or HTTP/2 fields nghttp2 checked: invariant 8), so it is cut at
 * its separators, not parsed again: "METHOD SP target SP HTTP/1.1", then
 * "Name: value" lines, CRLF each, a blank line. Its length, -EAGAIN
 * before the blank line, -EPROTO for what px_build_up_head never writes. */
static int px_h2us_split_head(const char *p, size_t len, struct h1_request *rq,
			      struct h1_header *h, size_t *n)
{
	const char *end = p, *l, *eol, *sp1, *sp2;
	size_t k = 0;

	/* the blank line: one memchr per line (memmem's setup cost more
	 * than the search, per request) */
	while ((end = memchr(end, '\r', len - (size_t)(end - p))) &&
	       !(p + len - end >= 4 && !memcmp(end, "\r\n\r\n", 4)))
		if (++end == p + len)
			return -EAGAIN;
	if (!end)
		return -EAGAIN;
	eol = memchr(p, '\r', (size_t)(end + 2 - p));
	sp1 = memchr(p, ' ', (size_t)(eol - p));
	sp2 = memrchr(p, ' ', (size_t)(eol - p));
	if (!sp1 || sp2 == sp1)
		return -EPROTO;
	*rq = (struct h1_request){ .method = p, .method_len = (size_t)(sp1 - p),
				   .target = sp1 + 1, .target_len = (size_t)(sp2 - sp1 - 1),
				   .minor_version = 1 };
	for (l = eol + 2; l < end + 2; l = eol + 2) {
		const char *colon;

		eol = memchr(l, '\r', (size_t)(end + 2 - l));
		colon = memchr(l, ':', (size_t)(eol - l));
		if (!colon || colon + 1 == eol || colon[1] != ' ' || k == *n)
			return -EPROTO;
		h[k++] = (struct h1_header){ .name = l, .name_len = (size_t)(colon - l),
					     .value = colon + 2,
					     .value_len = (size_t)(eol - colon - 2) };
	}
	*n = k;
	return (int)(end + 4 - p);
}

size_t px_h2_request_nv(const struct h1_request *rq, const struct h1_header *h, size_t n,
			bool drop_length, nghttp2_nv nv[PX_MAX_HDRS + 5], char names[PX_BUFSZ])
{
	size_t k = 0, used = 0;
	bool grpc = false;
	int hi = h1_find_header(h, n, "host");

#define NV(n_, nl_, v_, vl_) (nghttp2_nv){ (uint8_t *)(n_), (uint8_t *)(v_), (nl_), (vl_), \
					   NGHTTP2_NV_FLAG_NONE }
	nv[k++] = NV(":method", 7, rq->method, rq->method_len);
	nv[k++] = NV(":scheme", 7, "http", 4);
	nv[k++] = NV(":path", 5, rq->target, rq->target_len);
	if (hi >= 0)
		nv[k++] = NV(":authority", 10, h[hi].value, h[hi].value_len);
	for (size_t i = 0; i < n; i++) {
		if (px_h2_drop_field(&h[i], drop_length) || used + h[i].name_len > PX_BUFSZ)
			continue;
		if (px_name_is(&h[i], "content-type") && h[i].value_len >= 16 &&
		    !strncasecmp(h[i].value, "application/grpc", 16))
			grpc = true;
		for (size_t j = 0; j < h[i].name_len; j++)	/* lower case in HTTP/2 */
			names[used + j] = (char)(h[i].name[j] >= 'A' && h[i].name[j] <= 'Z' ?
						 h[i].name[j] + 32 : h[i].name[j]);
		nv[k++] = NV(names + used, h[i].name_len, h[i].value, h[i].value_len);
		/* a value new at every request (ours: x-request-id) would evict
		 * the backend's and our HPACK table at each one: never indexed */
		if (h[i].name_len == 12 && !memcmp(names + used, "x-request-id", 12))
			nv[k - 1].flags = NGHTTP2_NV_FLAG_NO_INDEX;
		used += h[i].name_len;
	}
	if (grpc)	/* gRPC servers want it (the hop-by-hop TE was dropped) */
		nv[k++] = NV("te", 2, "trailers", 8);
#undef NV
	return k;
}

/* Split the request head in u.out and submit it. 0 (submitted or more
 * bytes needed) or -EPROTO. */
static int px_h2us_submit(struct px_h2us *us)
{
	struct px_up *u = &us->u;
	struct h1_header h[PX_MAX_HDRS];
	nghttp2_nv nv[PX_MAX_HDRS + 5];
	char names[PX_BUFSZ];
	struct h1_request rq;
	size_t n = PX_MAX_HDRS, k;
	uint64_t cl = 0;
	int rc, hl;

	rc = px_h2us_split_head(buf_head(&u->out), u->out.data, &rq, h, &n);
	if (rc == -EAGAIN)
		return 0;
	if (rc < 0)
		return -EPROTO;
	hl = rc;
	us->framing = h1_body_framing(h, n, 1, 0, 0, &cl);
	if (us->framing < 0)
		return -EPROTO;
	us->left = cl;
	k = px_h2_request_nv(&rq, h, n, false, nv, names);
	if (us->framing == H1_BODY_NONE || (us->framing == H1_BODY_LENGTH && !cl)) {
		us->req_done = true;
		rc = nghttp2_submit_request(us->h2c->sess, NULL, nv, k, NULL, us);
	} else {
		nghttp2_data_provider prd = { .source.ptr = us, .read_callback = px_h2us_read };

		rc = nghttp2_submit_request(us->h2c->sess, NULL, nv, k, &prd, us);
	}
	buf_consume(&u->out, (size_t)hl);	/* (nghttp2 copied the fields) */
	if (rc < 0)
		return -EPROTO;
	us->id = rc;
	return 0;
}

/* Move the request into frames and acknowledge drained response bytes. */
static void px_h2us_feed(struct px_h2us *us)
{
	struct px_up *u = &us->u;
	struct px_server *s = u->srv;
	nghttp2_session *sess = us->h2c->sess;
	size_t before = us->body.data;

	if (us->closed || u->eof)
		return;
	if (!us->id && u->out.data && px_h2us_submit(us)) {
		u->eof = true;
		px_h2us_mark(us);
		return;
	}
	while (us->id && !us->req_done && u->out.data && us->body.data < PX_HIGH) {
		px_buf_get(s, &us->body);
		if (us->framing == H1_BODY_LENGTH) {
			size_t k = u->out.data < us->left ? u->out.data : us->left;

			buf_append(&us->body, buf_head(&u->out), k);
			buf_consume(&u->out, k);
			us->left -= k;
			if (!us->left)
				us->req_done = true;
		} else {
			size_t in = u->out.data, len = in;
			ssize_t left = h1_decode_chunked(&us->ck, buf_head(&u->out), &len);

			if (left < 0) {
				u->eof = true;
				px_h2us_mark(us);
				return;
			}
			buf_append(&us->body, buf_head(&u->out), len);
			buf_consume(&u->out, in);
			if (left > 0 || h1_chunked_done(&us->ck))
				us->req_done = true;
		}
	}
	if (us->deferred && (us->body.data > before || us->req_done)) {
		us->deferred = false;
		nghttp2_session_resume_data(sess, us->id);
	}
	if (us->unacked && u->in.data < PX_HIGH) {	/* invariant 2 */
		nghttp2_session_consume(sess, us->id, us->unacked);
		us->unacked = 0;
	}
	px_buf_put(s, &u->out);	/* an idle stream holds no buffer (h2conn.c inv. 7) */
	px_buf_put(s, &us->body);
}

/* ---- the connection ------------------------------------------------------------------ */

static void px_h2c_update(struct px_h2c *h)
{
	struct px_up *u = &h->sock;
	int mask = 0;

	if (u->connecting)
		mask = EV_WRITE;
	else {
		if (u->out.data && u->wr.slot < 0)	/* batch.c invariant 3 */
			mask |= EV_WRITE;
		if (!u->eof && u->in.data < PX_HIGH)
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

static void px_h2c_free(struct px_h2c *h)
{
	struct px_server *s = h->sock.srv;
	struct px_h2c **pp;

	for (pp = &s->hosts[h->host].h2c; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	s->hosts[h->host].n_conns--;
	px_pool_wake(s, h->host);	/* a connection slot freed */
	if (h->qslot >= 0)
		s->h2q[h->qslot] = NULL;	/* (px_h2up_run_kicked skips it) */
	if (h->kick_timer)
		ev_timer_del(s->loop, h->kick_timer);
	px_wq_del(s, &h->sock.wr);
	ev_del(s->loop, h->sock.fd);
	close(h->sock.fd);
	px_buf_drop(s, &h->sock.in);
	px_buf_drop(s, &h->sock.out);
	nghttp2_session_del(h->sess);
	free(h);
}

/* Report to the streams whose try moved, one popped at a time: a report
 * may release other tries, which leave the list (invariant 6). */
static void px_h2c_report(struct px_h2c *h)
{
	const struct px_up_ops *ops = h->sock.srv->up_ops;
	struct px_h2us *us;

	while ((us = h->dirty)) {
		h->dirty = us->dnext;
		if (!h->dirty)
			h->dirty_tail = NULL;
		us->dirty = false;
		if (us->u.st)
			ops->progress(us->u.st);
	}
}

/* The connection failed: every try on it ends (invariant 3). */
static void px_h2c_fail(struct px_h2c *h)
{
	const struct px_up_ops *ops = h->sock.srv->up_ops;
	struct px_h2us *us;

	h->dead = true;
	/* each report releases its try (px_h2up_release unlinks it) */
	while ((us = h->streams)) {
		struct px_stream *st = us->u.st;

		us->u.eof = true;
		if (!st) {
			px_h2us_unlink(us);	/* (not attached: cannot happen) */
			continue;
		}
		if (us->u.connecting)
			ops->connect_failed(st);
		else
			ops->reset(st);
		if (h->streams == us) {	/* the stream kept it: detach */
			px_h2us_unlink(us);
			us->h2c = NULL;
		}
	}
	px_h2c_free(h);
}

static void px_h2c_run(struct px_h2c *h)
{
	struct px_up *sk = &h->sock;
	struct px_server *s = sk->srv;
	struct px_h2us *us;

	if (h->running)
		return;
	h->running = true;
	if (h->connected && sk->in.data && !h->dead) {
		ssize_t n = nghttp2_session_mem_recv(h->sess, (const uint8_t *)buf_head(&sk->in),
						     sk->in.data);

		if (n < 0)
			h->dead = true;
		else
			buf_consume(&sk->in, (size_t)n);
	}
	if (sk->eof)
		h->dead = true;
	while ((us = h->feed) && !h->dead) {	/* invariant 6 */
		h->feed = us->fnext;
		us->fq = false;
		px_h2us_feed(us);
	}
	while (h->connected && !h->dead && sk->out.data < PX_HIGH) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(h->sess, &p);

		if (n <= 0) {
			h->dead = n < 0;
			break;
		}
		px_buf_get(s, &sk->out);
		buf_append(&sk->out, p, (size_t)n);
	}
	if (sk->out.data && !h->dead)
		px_wq_add(s, &sk->wr);
	h->running = false;
	if (h->dead) {
		px_h2c_fail(h);
		return;
	}
	if (!sk->in.data)
		px_buf_put(s, &sk->in);
	px_h2c_update(h);
	px_h2c_report(h);
}

static void px_h2c_event(struct px_wr *w, int events)
{
	struct px_h2c *h = SOCK_H2C(w);
	struct px_up *sk = &h->sock;
	const struct px_up_ops *ops = sk->srv->up_ops;

	if (sk->connecting) {
		struct px_h2us *us;

		if (!(events & (EV_WRITE | EV_ERROR)))
			return;
		if (net_connect_result(sk->fd)) {
			px_h2c_fail(h);
			return;
		}
		sk->connecting = false;
		h->connected = true;
		for (us = h->streams; us; us = us->next)
			if (us->u.connecting) {
				us->u.connecting = false;
				px_h2us_mark(us);
				px_h2us_want_feed(us);
				if (us->u.st)
					ops->connected(us->u.st);
			}
	}
	if (events & EV_WRITE)
		sk->wr.blocked = false;
	if ((events & (EV_READ | EV_ERROR)) && sk->rd_iter != ev_iteration(sk->srv->loop) &&
	    !sk->eof && sk->in.data < PX_HIGH) {
		ssize_t n;

		px_buf_get(sk->srv, &sk->in);
		n = buf_read_fd(&sk->in, sk->fd, 0);
		if (n == 0 || (n < 0 && n != -EAGAIN))
			sk->eof = true;
	}
	px_h2c_run(h);
}

static bool px_h2c_want_read(const struct px_wr *w)
{
	const struct px_h2c *h = SOCK_H2C(w);

	return h->connected && !h->sock.eof && h->sock.in.data < PX_HIGH;
}

static void px_h2c_sent(struct px_wr *w)
{
	struct px_h2c *h = SOCK_H2C(w);
	ssize_t res = w->res;

	if (res < 0 && res != -EAGAIN) {
		h->sock.eof = true;
	} else {
		if (res > 0)
			buf_consume(&h->sock.out, (size_t)res);
		if (h->sock.out.data)
			w->blocked = true;
	}
	px_h2c_run(h);
}

static const struct px_io_ops px_h2c_io = {
	.event = px_h2c_event,
	.want_read = px_h2c_want_read,
	.sent = px_h2c_sent,
};

static struct px_h2c *px_h2c_open(struct px_server *s, int host)
{
	struct px_host *hs = &s->hosts[host];
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_mem mem;
	struct px_h2c *h, **pp;
	int fd = px_netpol_connect(s, hs->ip, hs->port);
	/* no RFC 7540 priority tree to keep per stream (RFC 9218). Not on
	 * the client side (h2conn.c): nghttp2 would then skip PRIORITY
	 * frames unseen, and h2flood.c counts them (77's priority flood) */
	nghttp2_settings_entry no_tree = { NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 };

	if (fd < 0)
		return NULL;
	h = zh_calloc(1, sizeof(*h));
	h->host = host;
	h->sock.srv = s;
	h->sock.fd = fd;
	h->sock.ip = hs->ip;
	h->sock.port = hs->port;
	h->sock.host = host;
	h->sock.connecting = true;
	h->sock.mask = -1;
	h->qslot = -1;
	px_wr_init(&h->sock.wr, PX_WR_UP, &px_h2c_io);
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_option_new(&opt);
	nghttp2_option_set_no_auto_window_update(opt, 1);	/* invariant 2 */
	nghttp2_option_set_peer_max_concurrent_streams(opt, PX_H2C_ASSUMED_STREAMS);
	px_h2mem_init(&h->mem, &mem);	/* (nghttp2 copies mem; h->mem outlives sess) */
	nghttp2_session_client_new3(&h->sess, cb, h, opt, &mem);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	nghttp2_submit_settings(h->sess, NGHTTP2_FLAG_NONE, &no_tree, 1);
	/* the connection's receive window: invariant 2 bounds each stream
	 * (its 64 KiB window, acknowledged only below PX_HIGH), so the
	 * connection needs no bound of its own; at the default 64 KiB, 64
	 * answers of 1 KiB in flight fill it and the backend stalls on flow
	 * control until our WINDOW_UPDATE (Envoy: 256 MiB, Go: 1 GiB) */
	nghttp2_session_set_local_window_size(h->sess, NGHTTP2_FLAG_NONE, 0, PX_H2C_CONN_WINDOW);
	hs->n_conns++;
	for (pp = &hs->h2c; *pp; pp = &(*pp)->next)	/* oldest first */
		;
	*pp = h;
	h->idle_since = ev_now_ns();
	s->n_h2_up_conns++;
	px_h2c_update(h);
	return h;
}

/* ---- the stream layer's side (upstream.c dispatches here) ------------------------------ */

/* How many tries h takes before another connection is opened: the
 * backend's SETTINGS_MAX_CONCURRENT_STREAMS (invariant 5). */
static uint32_t px_h2c_cap(struct px_h2c *h)
{
	uint32_t known = h->sock.srv->hosts[h->host].h2_max_streams;

	if (!h->settings_seen && known)
		return known;
	return nghttp2_session_get_remote_settings(h->sess,
						   NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

bool px_h2up_room(struct px_server *s, int host, uint32_t max_conns)
{
	uint32_t n = 0;

	for (struct px_h2c *h = s->hosts[host].h2c; h; h = h->next) {	/* as px_h2up_get */
		if (h->dead)
			continue;
		if ((uint32_t)h->n_tries < px_h2c_cap(h))
			return true;
		n++;
	}
	return n < max_conns;
}

int px_h2up_get(struct px_server *s, int host, uint32_t max_conns, struct px_up **out)
{
	struct px_h2c *h, *least = NULL;
	struct px_h2us *us;
	uint32_t n = 0;

	for (h = s->hosts[host].h2c; h; h = h->next) {	/* invariant 5 */
		if (h->dead)
			continue;
		if ((uint32_t)h->n_tries < px_h2c_cap(h))
			break;
		n++;
		if (!least || h->n_tries < least->n_tries)
			least = h;
	}
	if (!h && least && n >= max_conns)
		h = least;	/* at the pool's limit: wait inside nghttp2 */
	if (!h)
		h = px_h2c_open(s, host);
	if (!h)
		return -ECONNREFUSED;
	h->n_tries++;
	us = px_obj_get(&s->free_h2us, &s->n_free_h2us, sizeof(*us));
	memset(us, 0, sizeof(*us));
	us->h2c = h;
	us->u.srv = s;
	us->u.fd = -1;
	us->u.ip = h->sock.ip;
	us->u.port = h->sock.port;
	us->u.host = host;
	us->u.connecting = !h->connected;
	us->u.mask = -1;
	us->u.h2 = us;
	px_wr_init(&us->u.wr, PX_WR_UP, NULL);
	us->u.wr.blocked = true;	/* never queued: no socket (batch.c) */
	px_h2us_link(h, us);
	px_h2us_want_feed(us);
	*out = &us->u;
	return 0;
}

void px_h2up_release(struct px_up *u)
{
	struct px_h2us *us = u->h2;
	struct px_h2c *h = us->h2c;
	struct px_server *s = u->srv;

	if (h) {
		px_h2us_unlink(us);
		px_h2us_unlist(h, us);
		if (h->hs_last == us)
			h->hs_last = NULL;
		h->n_tries--;
		px_pool_wake(s, u->host);	/* a stream slot freed (invariant 22) */
		if (us->id) {
			/* response bytes received but not yet acknowledged (the
			 * last DATA, END_STREAM, then released at once): give
			 * them back to the connection's window, or every such
			 * answer would shrink it until the connection stalls */
			if (us->unacked)
				nghttp2_session_consume_connection(h->sess, us->unacked);
			nghttp2_session_set_stream_user_data(h->sess, us->id, NULL);
			if (!us->closed)	/* invariant 3 */
				nghttp2_submit_rst_stream(h->sess, NGHTTP2_FLAG_NONE, us->id,
							  NGHTTP2_CANCEL);
		}
		if (!h->dead)
			px_h2c_kick(h);
		if (!h->streams)
			h->idle_since = ev_now_ns();
	}
	px_buf_drop(s, &u->in);
	px_buf_drop(s, &u->out);
	px_buf_drop(s, &us->body);
	px_buf_drop(s, &us->hdrs);
	px_buf_drop(s, &us->rh);
	px_obj_put(&s->free_h2us, &s->n_free_h2us, us);
}

void px_h2up_update(struct px_up *u)
{
	if (u->h2->h2c && !u->h2->h2c->dead) {
		px_h2us_want_feed(u->h2);
		px_h2c_kick(u->h2->h2c);
	}
}

void px_h2up_close_idle(struct px_server *s, uint64_t now, bool gone_only)
{
	for (int i = 0; i < s->n_hosts; i++) {
		struct px_h2c *h, *next;

		for (h = s->hosts[i].h2c; h; h = next) {
			next = h->next;
			if (h->streams || h->running)
				continue;
			if (!px_table_has_ep(s->tbl, h->sock.ip, h->sock.port))
				s->n_up_gone++;
			else if (gone_only || now - h->idle_since < s->up_idle_ns)
				continue;
			else
				s->n_up_idle++;
			px_h2c_free(h);
		}
	}
}

void px_h2up_close_all(struct px_server *s)
{
	for (int i = 0; i < s->n_hosts; i++)
		while (s->hosts[i].h2c) {
			struct px_h2c *h = s->hosts[i].h2c;

			while (h->streams) {	/* (their streams are gone by now) */
				struct px_h2us *us = h->streams;

				px_h2us_unlink(us);
				us->h2c = NULL;
			}
			px_h2c_free(h);
		}
}
