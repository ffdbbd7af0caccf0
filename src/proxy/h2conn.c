/* h2conn.c — HTTP/2 client connections of the proxy (px_): cleartext
 * HTTP/2 with prior knowledge (RFC 9113 3.3), detected by the client
 * preface on the same port as HTTP/1.1. Debian's libnghttp2 does framing,
 * HPACK and flow control; the loop, buffers and routing stay ours.
 *
 * Design note. Each HTTP/2 stream gets a "view" (struct px_h2s.vc): a
 * px_conn without a socket whose c->in holds the stream's request as
 * HTTP/1.1 bytes (head synthesized from the pseudo-headers, body from DATA
 * frames) and which receives the response from the stream layer. h1req.c
 * runs the view exactly as a socket's bytes, so every HTTP/2 request goes
 * through the same strict head parser and limits, routing, splits,
 * balancing, timeouts, retries and metrics as an HTTP/1.1 one. A
 * forwarded answer comes back as fields (vc.rstatus, vc.rfields) and a
 * raw body in vc.out that the data provider reads in place (invariant
 * 7); a local answer (404, 503, a redirect, a gRPC trailers-only error)
 * is HTTP/1.1 text in vc.out, parsed back (h1_parse_response, chunked
 * decoding) into HEADERS and DATA. Trailers an HTTP/2 upstream received
 * are in vc.trailers. The request still costs one HTTP/1.1 serialization
 * and strict parse: that parse is the check every client head passes
 * (docs/proxy.md invariant 3).
 *
 *   socket --c->in--> nghttp2 (mem_recv) --headers/data--> vc.in (HTTP/1.1)
 *   forwarded: vc.rfields + vc.out (raw) ------data provider--> nghttp2
 *   local:     vc.out (HTTP/1.1) --parse--> body buf --provider--> nghttp2
 *   (mem_send) --c->out--> socket
 *
 * Invariants:
 *  1. Memory per stream is bounded: request bytes are acknowledged to the
 *     client (WINDOW_UPDATE, nghttp2_session_consume) only once vc.in holds
 *     less than PX_HIGH, so a stream's window (64 KiB) bounds vc.in; a
 *     local answer moves from vc.out to the body buffer only while that
 *     holds less than PX_HIGH (a forwarded one has no body buffer:
 *     invariant 8), and vc.out itself is bounded by the stream layer's
 *     backpressure (upstream read only while vc.out < PX_HIGH).
 *  2. A slow reader stalls only itself: frames go to c->out only while it
 *     holds less than PX_HIGH; the rest waits in nghttp2, each stream's
 *     data provider deferred, so one stream's unread response never blocks
 *     another's upstream.
 *  3. A view carries one request (one_req): bytes after it are never parsed
 *     as a second request.
 *  4. Views are freed only at the end of px_h2_run or px_h2_free, never
 *     inside a nghttp2 callback, and a stream whose view still has a
 *     px_stream (client reset, connection closed) frees it as a client
 *     that left.
 *  5. Every client event (bytes in, bytes sent) pumps every view that is
 *     due (px_h2s_due): one the client's frames changed (s2->moved, set by
 *     the receive callbacks) or one holding bytes that wait for room
 *     (answer bytes for the client, request bytes for the upstream, bytes
 *     to acknowledge); a view that only waits for its upstream is not
 *     pumped (at 64 streams in flight most are). A view's
 *     own progress (its upstream answered) pumps that view only and queues
 *     the connection (s->h2cq); px_h2_run_queued, from batch.c's
 *     px_wq_flush before each round of sends, runs each queued connection
 *     once with `one` set (no view pumped: frames out only). So one answer
 *     costs O(1) views, and the answers of a loop turn cost one
 *     nghttp2_session_mem_send pass and one walk of the streams per
 *     connection, not one per answer. A queued run never queues its own
 *     connection again (only the stream layer's reports, from outside the
 *     client's events, do), so the drain ends.
 *  6. An answer never waits for its request: once the frame that ends the
 *     response (END_STREAM) is sent while the request is still coming,
 *     the stream is reset with NO_ERROR (on_frame_send; RFC 9113 8.1, as
 *     nginx and gRPC servers do), so the client stops sending a body no
 *     one reads. Sent after that frame, never before: nghttp2 sends
 *     RST_STREAM ahead of queued DATA, which would lose the answer's end.
 *     The stream layer meanwhile drops what still arrives (docs/proxy.md
 *     invariant 23); DATA after the reset is counted by nghttp2 as
 *     consumed, and what the view held unacknowledged goes back at free.
 *  7. An idle stream holds no buffer: each pump hands the view's empty
 *     buffers back to the pool (vc.in, vc.out, the body buffer), h2up.c's
 *     feed its own (u->out, the upstream body), and the stream layer keeps
 *     a small replay copy in a buffer of its size (px_buf_fit). A stream
 *     whose request body or answer is not coming costs its objects only
 *     (docs/proxy.md "Idle streams").
 *  8. Frame to frame for forwarded answers: the stream layer (stream.c
 *     px_resp_head) writes a forwarded answer's head to a view as fields,
 *     vc.rstatus != 0 and vc.rfields ("name: value\r\n" lines after its
 *     own filtering and modifiers, never HTTP/1.1 framing), its body raw
 *     into vc.out (never chunked), and sets vc.out_end with the body's
 *     last byte (px_resp_finish). px_h2s_resp_fields submits the fields
 *     as they are (lower-cased, connection-specific ones dropped); the
 *     data provider then reads vc.out itself (s2->raw), so vc.out is
 *     bounded by the stream layer's backpressure (invariant 1) and the
 *     answer ends when vc.out_end is set and vc.out is empty. A view
 *     whose stream ends without vc.out_end was cut: reset, as before. More
 *     fields than px_h2s_resp_fields's array holds also reset the stream:
 *     a head is forwarded whole or not at all; so are an HTTP/2
 *     upstream's trailers (vc.trailers, px_h2s_trailers: the same
 *     PX_H2_RESP_FIELDS), both counted in s->n_h2_fields_reset. A
 *     local answer never sets vc.rstatus and takes the HTTP/1.1 path.
 *  9. A stream silent both ways ends, and no timer per stream does it
 *     (Envoy's stream_idle_timeout, --stream-idle-timeout, 300 s by
 *     default, 0 = off): each stream notes the time of its last frame
 *     (s2->last_frame: HEADERS or DATA received, response HEADERS
 *     submitted, DATA read by the data provider), and the server's one
 *     periodic idle sweep (px_h2_sweep_streams, at a quarter of the
 *     shortest idle timeout) ends those silent for the timeout, as
 *     Envoy: a stream without response headers yet is answered 408
 *     "stream timeout" by the stream layer (px_stream_fail: its try
 *     ends, its upstream stream is cancelled; a gRPC request gets the
 *     trailers-only grpc-status 2 UNKNOWN, Envoy's mapping of 408), one
 *     whose answer started is reset with NO_ERROR (Envoy's reset code
 *     for a local reset); a stream still open one more timeout later
 *     (its client reads nothing, so the 408 never left) is reset.
 *     Counted in s->n_stream_idle. The sweep never frees a view
 *     (invariant 4): it pumps the view and queues its connection
 *     (invariant 5).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/h1.h"
#include "zerohop/log.h"
#include "px_int.h"

#define PX_H2_MAX_STREAMS	100	/* SETTINGS_MAX_CONCURRENT_STREAMS (nginx: 128) */
#define PX_H2_MAX_HDR_LIST	65536	/* SETTINGS_MAX_HEADER_LIST_SIZE */
#define PX_H2_RESET_BURST	1000	/* rapid reset: resets allowed at once, */
#define PX_H2_RESET_RATE	33	/* then per second (nghttp2's, as Envoy's order) */
#define PX_H2_MAX_CONTINUATIONS	8	/* CONTINUATION frames per header block */
#define PX_H2_MAX_OUTBOUND_ACK	1000	/* SETTINGS/PING acks queued for a non-reader */
/* Fields of a forwarded answer's head (besides :status) and of its
 * trailers: an upstream's PX_MAX_HDRS and the route's added ones; more
 * reset the stream (invariant 8) */
#define PX_H2_RESP_FIELDS	(PX_MAX_HDRS + 7)

static const char px_h2_preface_str[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PX_H2_PREFACE_LEN (sizeof(px_h2_preface_str) - 1)

struct px_h2s {
	struct px_conn vc;	/* the stream's HTTP/1.1 view (design note) */
	struct px_h2 *h2;
	int32_t id;
	struct px_h2s *next;
	/* request */
	struct buf head;	/* the synthesized head while headers arrive */
	struct buf host;	/* :authority */
	bool has_cl;		/* content-length given: the body as it is */
	bool chunked;		/* no length: the body re-framed as chunked */
	bool head_req;
	bool req_done;		/* END_STREAM seen */
	size_t unacked;		/* request DATA bytes not yet consumed (invariant 1) */
	/* response */
	size_t rlast;
	bool resp_head;		/* HEADERS submitted */
	bool resp_done;		/* the whole body is in body (raw: in vc.out) */
	bool raw;		/* a forwarded answer as fields: the data provider
				 * reads vc.out as it is (invariant 8) */
	bool deferred;		/* the data provider waits for bytes */
	int framing;
	uint64_t left;
	struct h1_chunked ck;
	struct buf body;	/* response body for the data provider */
	bool closed;		/* nghttp2 closed the stream: free it (invariant 4) */
	bool moved;		/* the client's frames changed it since its last
				 * pump (invariant 5) */
	bool idle_ended;	/* the stream idle timeout fired (invariant 9) */
	uint64_t last_frame;	/* ev_turn_ns of its last frame (invariant 9) */
};

struct px_h2 {
	struct px_conn *c;
	nghttp2_session *sess;
	struct px_h2s *streams;
	bool dead;		/* session error: close the connection */
	bool recv_err;		/* the input was refused: send what is queued
				 * (a GOAWAY), then close */
	bool one;		/* px_h2_run for views' progress (queued): those
				 * are pumped already, the others have not moved;
				 * px_h2_run clears it */
	int qslot;		/* index in s->h2cq while queued, -1 = not */
	struct px_h2_ctrl ctrl;	/* control-frame budgets (h2flood.c) */
	struct px_h2mem mem;	/* the session's memory (h2mem.c) */
	bool out_drained;	/* the last nghttp2_session_mem_send returned 0 */
	bool trimmed;		/* px_h2_idle trimmed since the last run */
	int flood;		/* 1 + the enum px_h2_flood exceeded, 0 = none */
	struct px_h2s *hs_last;	/* on_header's last stream (a header block's
				 * fields come in a row): no lookup per field;
				 * cleared when that stream is freed */
};

#define VC_H2S(c) ((struct px_h2s *)(void *)((char *)(c) - offsetof(struct px_h2s, vc)))

static void px_h2s_progress(struct px_conn *vc);

static const struct px_conn_ops px_h2s_ops = {
	.progress = px_h2s_progress,
};

int px_h2_preface(const struct buf *b)
{
	size_t n = b->data < PX_H2_PREFACE_LEN ? b->data : PX_H2_PREFACE_LEN;

	if (n && memcmp(buf_head((struct buf *)b), px_h2_preface_str, n))
		return -1;
	return n == PX_H2_PREFACE_LEN ? 1 : 0;
}

static struct px_h2s *px_h2s_get(struct px_h2 *h2, int32_t id)
{
	return nghttp2_session_get_stream_user_data(h2->sess, id);
}

/* ---- request: frames -> the view's HTTP/1.1 bytes ------------------------------ */

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
	struct px_h2 *h2 = ud;
	struct px_conn *c = h2->c;
	struct px_h2s *s2;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	px_h2_ctrl_credit(&h2->ctrl, PX_H2_CTRL_PER_STREAM);	/* h2flood.c invariant 2 */
	s2 = px_obj_get(&c->srv->free_h2s, &c->srv->n_free_h2s, sizeof(*s2));
	memset(s2, 0, sizeof(*s2));
	s2->h2 = h2;
	s2->id = f->hd.stream_id;
	s2->vc.srv = c->srv;
	s2->vc.ops = &px_h2s_ops;
	s2->vc.fd = -1;
	s2->vc.mask = -1;
	s2->vc.one_req = true;
	s2->vc.peer_ip = c->peer_ip;
	s2->vc.peer_port = c->peer_port;
	memcpy(s2->vc.peer_ip6, c->peer_ip6, 16);
	s2->vc.dst_ip = c->dst_ip;
	s2->vc.dst_v6low = c->dst_v6low;
	s2->vc.dst_port = c->dst_port;
	s2->vc.last_active = ev_turn_ns();
	s2->last_frame = s2->vc.last_active;
	px_wr_init(&s2->vc.wr, PX_WR_CONN, NULL);	/* never queued: no socket */
	s2->next = h2->streams;
	h2->streams = s2;
	c->n_sub++;
	s2->moved = true;
	nghttp2_session_set_stream_user_data(sess, s2->id, s2);
	return 0;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
		     size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct px_h2s *s2;

	(void)flags;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;	/* request trailers: dropped (HTTP/1.1 upstreams) */
	s2 = ((struct px_h2 *)ud)->hs_last;
	if (!s2 || s2->id != f->hd.stream_id || s2->closed) {
		s2 = px_h2s_get(ud, f->hd.stream_id);
		((struct px_h2 *)ud)->hs_last = s2;
	}
	if (!s2)
		return 0;
	if (s2->head.data + s2->host.data + nl + vl + 4 >
	    s2->vc.srv->lim.max_head + s2->vc.srv->lim.max_line) {
		/* a header list larger than an HTTP/1.1 head may be (an HPACK
		 * bomb decodes to this): reset the stream, never buffer it */
		s2->vc.srv->n_h2_hdr_big++;
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	/* nghttp2 checked names and values (RFC 9113 8.2: no CR/LF/NUL, lower
	 * case, no connection-specific fields, pseudo-headers first) */
	px_buf_get(s2->vc.srv, &s2->head);
	if (nl && name[0] == ':') {
		if (nl == 7 && !memcmp(name, ":method", 7)) {
			/* the request line starts the head: method first */
			char tmp[PX_BUFSZ];
			size_t have = s2->head.data < sizeof(tmp) ? s2->head.data : 0;

			memcpy(tmp, buf_head(&s2->head), have);
			s2->head.data = s2->head.head = 0;
			buf_append(&s2->head, value, vl);
			buf_append(&s2->head, " ", 1);
			buf_append(&s2->head, tmp, have);
			s2->head_req = vl == 4 && !memcmp(value, "HEAD", 4);
		} else if (nl == 5 && !memcmp(name, ":path", 5)) {
			buf_append(&s2->head, value, vl);
			buf_append(&s2->head, " HTTP/1.1\r\n", 11);
		} else if (nl == 10 && !memcmp(name, ":authority", 10)) {
			px_buf_get(s2->vc.srv, &s2->host);
			buf_append(&s2->host, value, vl);
		}
		return 0;	/* :scheme: cleartext only */
	}
	if (nl == 4 && !memcmp(name, "host", 4)) {
		if (!s2->host.data) {
			px_buf_get(s2->vc.srv, &s2->host);
			buf_append(&s2->host, value, vl);
		}
		return 0;
	}
	if (nl == 6 && !memcmp(name, "expect", 6))
		return 0;	/* no 100-continue through HTTP/2 */
	if (nl == 14 && !memcmp(name, "content-length", 14))
		s2->has_cl = true;
	buf_append(&s2->head, name, nl);
	buf_append(&s2->head, ": ", 2);
	buf_append(&s2->head, value, vl);
	buf_append(&s2->head, "\r\n", 2);
	return 0;
}

/* The request head is complete: into the view, framed for HTTP/1.1. */
static void px_h2s_head_done(struct px_h2s *s2, bool end_stream)
{
	struct px_conn *vc = &s2->vc;

	px_buf_get(vc->srv, &vc->in);
	buf_append(&vc->in, buf_head(&s2->head), s2->head.data);
	if (s2->host.data) {
		buf_append(&vc->in, "host: ", 6);
		buf_append(&vc->in, buf_head(&s2->host), s2->host.data);
		buf_append(&vc->in, "\r\n", 2);
	}
	if (!end_stream && !s2->has_cl) {
		s2->chunked = true;
		buf_append(&vc->in, "transfer-encoding: chunked\r\n", 28);
	}
	buf_append(&vc->in, "\r\n", 2);
	px_buf_drop(vc->srv, &s2->head);
	px_buf_drop(vc->srv, &s2->host);
}

static void px_h2s_req_end(struct px_h2s *s2)
{
	if (s2->req_done)
		return;
	s2->req_done = true;
	if (s2->chunked) {
		px_buf_get(s2->vc.srv, &s2->vc.in);
		buf_append(&s2->vc.in, "0\r\n\r\n", 5);
	}
	s2->vc.rd_eof = true;	/* a shorter body than its length: 400 */
}

static int on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
			 size_t len, void *ud)
{
	struct px_h2s *s2 = px_h2s_get(ud, id);
	struct px_conn *vc;

	(void)flags;
	if (!s2 || s2->req_done) {
		nghttp2_session_consume(sess, id, len);
		return 0;
	}
	vc = &s2->vc;
	px_buf_get(vc->srv, &vc->in);
	if (s2->chunked && len)
		buf_printf(&vc->in, "%zx\r\n", len);
	buf_append(&vc->in, data, len);
	if (s2->chunked && len)
		buf_append(&vc->in, "\r\n", 2);
	s2->unacked += len;
	s2->moved = true;
	s2->last_frame = ev_turn_ns();
	return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
	struct px_h2 *h2 = ud;
	struct px_h2s *s2;
	bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
	int k = px_h2_ctrl_take(&h2->ctrl, f->hd.type, f->hd.flags, ev_turn_ns());

	(void)sess;
	if (k >= 0) {	/* a control-frame flood: px_h2_run ends the connection */
		h2->flood = 1 + k;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	if (f->hd.type == NGHTTP2_RST_STREAM)
		((struct px_h2 *)ud)->c->srv->n_h2_resets_rx++;
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
		return 0;
	s2 = px_h2s_get(ud, f->hd.stream_id);
	if (!s2)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
		px_h2s_head_done(s2, end);
	if (end)
		px_h2s_req_end(s2);
	s2->moved = true;
	s2->last_frame = ev_turn_ns();
	return 0;
}

/* Count what the defences sent: a refused stream (over the concurrent
 * stream limit), a GOAWAY with an error (a flood or a protocol error).
 * The last frame of an answer whose request is still coming: reset the
 * stream with NO_ERROR (invariant 6). */
static int on_frame_send(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
	struct px_server *s = ((struct px_h2 *)ud)->c->srv;

	if (f->hd.type == NGHTTP2_DATA)	/* h2flood.c invariant 2 */
		px_h2_ctrl_credit(&((struct px_h2 *)ud)->ctrl, PX_H2_CTRL_PER_DATA);
	if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
		struct px_h2s *s2 = px_h2s_get(ud, f->hd.stream_id);

		if (s2 && !s2->req_done)
			nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, s2->id,
						  NGHTTP2_NO_ERROR);
	}
	if (f->hd.type == NGHTTP2_RST_STREAM && f->rst_stream.error_code == NGHTTP2_REFUSED_STREAM)
		s->n_h2_refused++;
	else if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR)
		s->n_h2_errors++;
	return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t err, void *ud)
{
	struct px_h2s *s2 = px_h2s_get(ud, id);

	(void)sess;
	(void)err;
	if (s2)
		s2->closed = true;	/* freed at the end of px_h2_run (invariant 4) */
	return 0;
}

/* ---- response: the view's HTTP/1.1 bytes -> frames ------------------------------ */

/* The upstream's trailers (vc.trailers: "name: value\r\n" lines that
 * h2up.c's nghttp2 decoded and checked) → a trailing HEADERS, every field
 * or none (invariant 8's rule for heads): 1 submitted, 0 none,
 * -E2BIG more than PX_H2_RESP_FIELDS, -EPROTO not submitted. */
static int px_h2s_trailers(nghttp2_session *sess, struct px_h2s *s2)
{
	struct buf *t = &s2->vc.trailers;
	nghttp2_nv nv[PX_H2_RESP_FIELDS];
	char *p = buf_head(t), *e = p + t->data;
	size_t k = 0;

	while (p < e) {
		char *eol = memchr(p, '\n', (size_t)(e - p)), *colon, *v, *ve;

		if (!eol)
			break;
		colon = memchr(p, ':', (size_t)(eol - p));
		if (colon) {
			if (k == PX_H2_RESP_FIELDS)
				return -E2BIG;
			for (v = colon + 1, ve = eol; v < ve && *v == ' '; v++)
				;
			if (ve > v && ve[-1] == '\r')
				ve--;
			nv[k++] = (nghttp2_nv){ (uint8_t *)p, (uint8_t *)v, (size_t)(colon - p),
						(size_t)(ve - v), NGHTTP2_NV_FLAG_NONE };
		}
		p = eol + 1;
	}
	if (!k)
		return 0;
	return nghttp2_submit_trailer(sess, s2->id, nv, k) ? -EPROTO : 1;	/* (copied) */
}

static ssize_t px_h2s_read(nghttp2_session *sess, int32_t id, uint8_t *out, size_t len,
			   uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct px_h2s *s2 = src->ptr;
	struct buf *b = s2->raw ? &s2->vc.out : &s2->body;	/* (invariant 8) */
	size_t n = b->data < len ? b->data : len;
	int rc;

	(void)ud;
	(void)id;
	if (n) {
		memcpy(out, buf_head(b), n);
		buf_consume(b, n);
	}
	if (!n && !s2->resp_done) {
		s2->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	s2->last_frame = ev_turn_ns();	/* a DATA frame goes (invariant 9) */
	if (s2->resp_done && !b->data) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		rc = s2->vc.trailers.data ? px_h2s_trailers(sess, s2) : 0;
		if (rc > 0) {
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;	/* they end it */
		} else if (rc < 0) {
			/* never an answer with trailers silently missing (a
			 * gRPC status among them): nghttp2 resets the stream
			 * (INTERNAL_ERROR), as for too many head fields */
			s2->vc.srv->n_h2_fields_reset[1]++;
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		}
	}
	return (ssize_t)n;
}

/* Hop-by-hop and HTTP/1.1 framing fields never go into HTTP/2 (RFC 9113
 * 8.2.2); the stream layer adds Connection and Transfer-Encoding. */
static bool px_h2_drop_field(const struct h1_header *h)
{
	return px_name_is(h, "connection") || px_name_is(h, "keep-alive") ||
	       px_name_is(h, "proxy-connection") || px_name_is(h, "transfer-encoding") ||
	       px_name_is(h, "upgrade") || px_name_is(h, "te");
}

/* A forwarded answer's head, fields from the stream layer (vc.rstatus,
 * vc.rfields: our own "name: value\r\n" lines, nothing to validate) →
 * HEADERS; its body is read raw from vc.out (invariant 8). 0 or -EPROTO. */
static int px_h2s_resp_fields(struct px_h2s *s2)
{
	struct px_conn *vc = &s2->vc;
	nghttp2_nv nv[1 + PX_H2_RESP_FIELDS];	/* :status and the fields */
	char names[PX_BUFSZ], status[8];
	const char *l = vc->rfields.data ? buf_head(&vc->rfields) : "", *e = l + vc->rfields.data;
	size_t k = 0, used = 0;
	bool nobody = vc->out_end && !vc->out.data;
	int rc;

	status[0] = (char)('0' + vc->rstatus / 100 % 10);	/* (no printf per answer) */
	status[1] = (char)('0' + vc->rstatus / 10 % 10);
	status[2] = (char)('0' + vc->rstatus % 10);
	nv[k++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7, 3,
				NGHTTP2_NV_FLAG_NONE };
	while (l < e) {
		const char *eol = memchr(l, '\n', (size_t)(e - l)), *colon;
		struct h1_header h;

		colon = memchr(l, ':', (size_t)(eol - l));
		h = (struct h1_header){ .name = l, .name_len = (size_t)(colon - l),
					.value = colon + 2,
					.value_len = (size_t)(eol - 1 - (colon + 2)) };
		l = eol + 1;
		if (px_h2_drop_field(&h))
			continue;
		/* more fields than fit (an upstream's 128 plus the route's
		 * added ones): reset the stream (the caller), never forward
		 * a head with fields silently missing */
		if (k == sizeof(nv) / sizeof(nv[0]) || used + h.name_len > sizeof(names)) {
			vc->srv->n_h2_fields_reset[0]++;
			return -EPROTO;
		}
		if (nobody && !s2->head_req && px_name_is(&h, "content-length"))
			continue;	/* ours: headers-only (gRPC trailers-only) */
		for (size_t j = 0; j < h.name_len; j++)	/* HTTP/2 names are lower case */
			names[used + j] = (char)(h.name[j] >= 'A' && h.name[j] <= 'Z' ?
						 h.name[j] + 32 : h.name[j]);
		nv[k++] = (nghttp2_nv){ (uint8_t *)names + used, (uint8_t *)h.value,
					h.name_len, h.value_len, NGHTTP2_NV_FLAG_NONE };
		used += h.name_len;
	}
	s2->resp_head = true;
	s2->last_frame = ev_turn_ns();
	s2->raw = true;
	s2->resp_done = vc->out_end;
	if (nobody) {
		rc = nghttp2_submit_response(s2->h2->sess, s2->id, nv, k, NULL);
	} else {
		nghttp2_data_provider prd = { .source.ptr = s2, .read_callback = px_h2s_read };

		rc = nghttp2_submit_response(s2->h2->sess, s2->id, nv, k, &prd);
	}
	px_buf_drop(vc->srv, &vc->rfields);	/* (nghttp2 copied the fields) */
	return rc ? -EPROTO : 0;
}

/* The response head in vc.out (a local answer, HTTP/1.1 text) → HEADERS.
 * 0 when submitted or more bytes are needed, -EPROTO when the stream must
 * be reset. */
static int px_h2s_resp_head(struct px_h2s *s2)
{
	struct px_conn *vc = &s2->vc;
	struct h1_header h[PX_MAX_HDRS];
	nghttp2_nv nv[PX_MAX_HDRS + 1];
	char names[PX_BUFSZ], status[8];
	struct h1_response r;
	size_t n, i, k = 0, used = 0;
	uint64_t cl = 0;
	int rc, hl;

	if (vc->rstatus)
		return px_h2s_resp_fields(s2);
	if (!vc->out.data)
		return 0;	/* nothing answered yet (most pumps of a view) */
	for (;;) {
		n = PX_MAX_HDRS;
		rc = h1_parse_response(buf_head(&vc->out), vc->out.data, s2->rlast, &vc->srv->lim,
				       &r, h, &n);
		if (rc == -EAGAIN) {
			s2->rlast = vc->out.data;
			return 0;
		}
		s2->rlast = 0;
		if (rc < 0)
			return -EPROTO;
		if (r.status >= 200)
			break;
		buf_consume(&vc->out, (size_t)rc);	/* 1xx: not forwarded */
	}
	hl = rc;
	s2->framing = h1_body_framing(h, n, 0, r.status, s2->head_req, &cl);
	if (s2->framing < 0)
		return -EPROTO;
	s2->left = cl;
	snprintf(status, sizeof(status), "%03d", r.status % 1000);
	nv[k++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7, 3,
				NGHTTP2_NV_FLAG_NONE };
	for (i = 0; i < n; i++) {
		if (px_h2_drop_field(&h[i]) || used + h[i].name_len > sizeof(names))
			continue;
		if (s2->framing == H1_BODY_LENGTH && !cl && !s2->head_req &&
		    px_name_is(&h[i], "content-length"))
			continue;	/* ours: headers-only (gRPC trailers-only) */
		for (size_t j = 0; j < h[i].name_len; j++)	/* HTTP/2 names are lower case */
			names[used + j] = (char)(h[i].name[j] >= 'A' && h[i].name[j] <= 'Z' ?
						 h[i].name[j] + 32 : h[i].name[j]);
		nv[k++] = (nghttp2_nv){ (uint8_t *)names + used, (uint8_t *)h[i].value,
					h[i].name_len, h[i].value_len, NGHTTP2_NV_FLAG_NONE };
		used += h[i].name_len;
	}
	s2->resp_head = true;
	s2->last_frame = ev_turn_ns();
	if (s2->framing == H1_BODY_NONE || (s2->framing == H1_BODY_LENGTH && !cl)) {
		/* no body: HEADERS with END_STREAM (a gRPC trailers-only answer) */
		s2->resp_done = true;
		rc = nghttp2_submit_response(s2->h2->sess, s2->id, nv, k, NULL);
	} else {
		nghttp2_data_provider prd = { .source.ptr = s2, .read_callback = px_h2s_read };

		rc = nghttp2_submit_response(s2->h2->sess, s2->id, nv, k, &prd);
	}
	buf_consume(&vc->out, (size_t)hl);	/* (nghttp2 copied the fields) */
	return rc ? -EPROTO : 0;
}

/* Move the response body from vc.out into the data provider's buffer
 * (invariant 1), decoding the HTTP/1.1 framing. 0, or -EPROTO. */
static int px_h2s_resp_body(struct px_h2s *s2)
{
	struct px_conn *vc = &s2->vc;
	struct px_server *s = vc->srv;
	size_t before = s2->body.data;

	if (s2->raw) {	/* the provider reads vc.out itself (invariant 8) */
		s2->resp_done = vc->out_end;
		if (s2->deferred && (vc->out.data || s2->resp_done)) {
			s2->deferred = false;
			nghttp2_session_resume_data(s2->h2->sess, s2->id);
		}
		return 0;
	}
	while (!s2->resp_done && vc->out.data && s2->body.data < PX_HIGH) {
		px_buf_get(s, &s2->body);
		if (s2->framing == H1_BODY_LENGTH) {
			size_t k = vc->out.data < s2->left ? vc->out.data : s2->left;

			buf_append(&s2->body, buf_head(&vc->out), k);
			buf_consume(&vc->out, k);
			s2->left -= k;
			if (!s2->left)
				s2->resp_done = true;
		} else if (s2->framing == H1_BODY_CHUNKED) {
			size_t in = vc->out.data, len = in;
			ssize_t left = h1_decode_chunked(&s2->ck, buf_head(&vc->out), &len);

			if (left < 0)
				return -EPROTO;
			buf_append(&s2->body, buf_head(&vc->out), len);
			buf_consume(&vc->out, in);
			if (left > 0 || h1_chunked_done(&s2->ck))
				s2->resp_done = true;
		} else {	/* EOF-delimited: ends with the stream (below) */
			buf_append(&s2->body, buf_head(&vc->out), vc->out.data);
			buf_consume(&vc->out, vc->out.data);
		}
	}
	if (!s2->resp_done && s2->framing == H1_BODY_EOF && !vc->st && !vc->out.data)
		s2->resp_done = true;
	if (s2->deferred && (s2->body.data > before || s2->resp_done)) {
		s2->deferred = false;
		nghttp2_session_resume_data(s2->h2->sess, s2->id);
	}
	return 0;
}

/* Whether a client event must pump s2 (invariant 5): its frames changed
 * it, or it holds bytes that wait for room, the client's or the
 * upstream's (an answer in vc.out or the body buffer, a request in vc.in,
 * request bytes to acknowledge). A view that only waits for its upstream
 * is left alone: the upstream's report pumps it (px_h2s_progress). */
static bool px_h2s_due(const struct px_h2s *s2)
{
	const struct px_conn *vc = &s2->vc;

	return s2->moved || vc->out.data || s2->body.data || vc->in.data || s2->unacked;
}

/* Run one stream's view (h1req.c) and turn what it answered into frames. */
static void px_h2s_pump(struct px_h2s *s2)
{
	struct px_conn *vc = &s2->vc;
	nghttp2_session *sess = s2->h2->sess;

	if (s2->closed)
		return;
	if (!vc->h1_seen && !vc->in.data)
		return;	/* head not complete yet */
	px_h1_run(vc);
	if (s2->unacked && vc->in.data < PX_HIGH) {	/* invariant 1 */
		nghttp2_session_consume(sess, s2->id, s2->unacked);
		s2->unacked = 0;
	}
	px_buf_put(vc->srv, &vc->in);	/* invariant 7 */
	if ((!s2->resp_head && px_h2s_resp_head(s2)) ||
	    (s2->resp_head && px_h2s_resp_body(s2))) {
		nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, s2->id, NGHTTP2_INTERNAL_ERROR);
		return;
	}
	px_buf_put(vc->srv, &vc->out);
	px_buf_put(vc->srv, &s2->body);
	if (!vc->st && !s2->resp_done && !vc->out.data && (vc->closing || !s2->resp_head))
		/* the stream layer cut the response (its "close the
		 * connection"): the honest HTTP/2 signal is a reset */
		nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, s2->id, NGHTTP2_INTERNAL_ERROR);
}

/* Free a closed stream's view. True when it gave request bytes back to
 * the connection's window (a WINDOW_UPDATE may now be queued). */
static bool px_h2s_free(struct px_h2s *s2)
{
	struct px_conn *vc = &s2->vc;
	struct px_server *s = vc->srv;
	bool gave = false;

	if (vc->st)
		px_stream_free(vc->st);	/* the client left (invariant 4) */
	/* request DATA received but never acknowledged (the answer ended
	 * the stream first, or the client reset it while the upstream held
	 * back): give it back to the connection's window, or every such
	 * stream shrinks it until the client stalls (as h2up.c's
	 * px_h2up_release does for response bytes) */
	if (s2->unacked && !s2->h2->dead) {
		nghttp2_session_consume_connection(s2->h2->sess, s2->unacked);
		gave = true;
	}
	px_buf_drop(s, &vc->in);
	px_buf_drop(s, &vc->out);
	px_buf_drop(s, &vc->trailers);
	px_buf_drop(s, &vc->rfields);
	px_buf_drop(s, &s2->head);
	px_buf_drop(s, &s2->host);
	px_buf_drop(s, &s2->body);
	s2->h2->c->n_sub--;
	if (s2->h2->hs_last == s2)
		s2->h2->hs_last = NULL;
	px_obj_put(&s->free_h2s, &s->n_free_h2s, s2);
	return gave;
}

/* Frames out while the client reads (invariant 2); closed streams go. A
 * stream freed with request bytes to give back queues a WINDOW_UPDATE:
 * sent in the same pass, or a client waiting for window (it sends
 * nothing that would run us again) would wait for good. */
static void px_h2_output(struct px_h2 *h2)
{
	struct px_conn *c = h2->c;
	struct px_h2s **pp, *s2;
	bool again = true;

	while (again) {
		again = false;
		while (!h2->dead && c->out.data < PX_HIGH) {
			const uint8_t *p;
			ssize_t n = nghttp2_session_mem_send(h2->sess, &p);

			if (n < 0) {
				h2->dead = true;
				break;
			}
			h2->out_drained = !n;	/* (h2mem.c K2 b) */
			if (!n)
				break;
			px_buf_get(c->srv, &c->out);
			buf_append(&c->out, p, (size_t)n);
		}
		for (pp = &h2->streams; (s2 = *pp);) {
			if (s2->closed) {
				*pp = s2->next;
				again |= px_h2s_free(s2);
			} else {
				pp = &s2->next;
			}
		}
		again = again && !h2->dead && c->out.data < PX_HIGH;
	}
	if (h2->dead || (!nghttp2_session_want_read(h2->sess) &&
			 !nghttp2_session_want_write(h2->sess)))
		c->closing = true;
}

/* Queue h2's connection to send before the loop waits (invariant 5). */
static void px_h2_queue(struct px_h2 *h2)
{
	struct px_server *s = h2->c->srv;

	if (h2->qslot >= 0)
		return;
	if (s->n_h2cq == s->cap_h2cq) {
		s->cap_h2cq = s->cap_h2cq ? 2 * s->cap_h2cq : 16;
		s->h2cq = zh_realloc(s->h2cq, s->cap_h2cq * sizeof(*s->h2cq));
	}
	h2->qslot = (int)s->n_h2cq;
	s->h2cq[s->n_h2cq++] = h2->c;
}

/* A view's progress (its stream's upstream or timer moved): run it, then
 * queue the connection itself to send (invariant 5). */
static void px_h2s_progress(struct px_conn *vc)
{
	struct px_h2s *s2 = VC_H2S(vc);

	px_h2s_pump(s2);
	px_h2_queue(s2->h2);
}

/* End a stream silent for the stream idle timeout (invariant 9). */
static void px_h2s_idle_end(struct px_h2s *s2, uint64_t now)
{
	struct px_conn *vc = &s2->vc;
	struct px_stream *st = vc->st;

	s2->last_frame = now;	/* one more timeout for the answer to leave */
	if (s2->idle_ended) {	/* it did not: the client reads nothing */
		nghttp2_submit_rst_stream(s2->h2->sess, NGHTTP2_FLAG_NONE, s2->id,
					  NGHTTP2_NO_ERROR);
		px_h2_queue(s2->h2);
		return;
	}
	s2->idle_ended = true;
	vc->srv->n_stream_idle++;
	if (st && !s2->resp_head && (st->rs == RS_CONNECT || st->rs == RS_HEAD)) {
		/* nothing answered: 408, as Envoy (ends st, cancels its try) */
		px_stream_fail(st, 408, px_err_stream_idle);
		px_h2s_progress(vc);
		return;
	}
	if (st)
		st->err = px_err_stream_idle;	/* (access log) */
	nghttp2_submit_rst_stream(s2->h2->sess, NGHTTP2_FLAG_NONE, s2->id, NGHTTP2_NO_ERROR);
	px_h2_queue(s2->h2);
}

void px_h2_sweep_streams(struct px_server *s, uint64_t now)
{
	struct px_conn *c;
	struct px_h2s *s2;

	if (!s->stream_idle_ns)
		return;
	for (c = s->conns; c; c = c->next) {
		if (!c->h2 || !c->n_sub || c->h2->dead)
			continue;
		for (s2 = c->h2->streams; s2; s2 = s2->next)
			if (!s2->closed && now > s2->last_frame &&
			    now - s2->last_frame >= s->stream_idle_ns)
				px_h2s_idle_end(s2, now);
	}
}

void px_h2_run_queued(struct px_server *s)
{
	for (unsigned i = 0; i < s->n_h2cq; i++) {
		struct px_conn *c = s->h2cq[i];

		if (!c)
			continue;	/* closed meanwhile (px_h2_free) */
		s->h2cq[i] = NULL;
		c->h2->qslot = -1;
		c->h2->one = true;	/* (invariant 5; px_h2_run clears it) */
		c->ops->progress(c);	/* (may close c) */
	}
	s->n_h2cq = 0;
}

/* ---- the connection -------------------------------------------------------------- */

void px_h2_start(struct px_conn *c)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_mem mem;
	struct px_h2 *h2 = zh_calloc(1, sizeof(*h2));
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, PX_H2_MAX_STREAMS },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, PX_H2_MAX_HDR_LIST },
	};

	h2->c = c;
	c->h2 = h2;
	h2->qslot = -1;
	px_h2_ctrl_init(&h2->ctrl, ev_now_ns());
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	nghttp2_option_new(&opt);
	nghttp2_option_set_no_auto_window_update(opt, 1);	/* invariant 1 */
	/* defences (docs/proxy.md "HTTP/2 and gRPC"): SETTINGS entries per
	 * frame, rapid reset (CVE-2023-44487: a burst of 1000 resets, then 33
	 * a second, else GOAWAY), CONTINUATION frames per header block,
	 * queued SETTINGS/PING acks of a client that does not read; the
	 * control-frame floods of a client that reads: h2flood.c */
	nghttp2_option_set_max_settings(opt, 32);
	nghttp2_option_set_stream_reset_rate_limit(opt, PX_H2_RESET_BURST, PX_H2_RESET_RATE);
	nghttp2_option_set_max_continuations(opt, PX_H2_MAX_CONTINUATIONS);
	nghttp2_option_set_max_outbound_ack(opt, PX_H2_MAX_OUTBOUND_ACK);
	/* a closed stream is freed at once, not kept for RFC 7540's priority
	 * tree (deprecated by RFC 9113; we ignore priorities): an idle
	 * connection keeps no stream and its stream map's table is all
	 * zeros, a page h2mem.c can give back (K2 a) */
	nghttp2_option_set_no_closed_streams(opt, 1);
	px_h2mem_init(&h2->mem, &mem);	/* (nghttp2 copies mem; h2->mem outlives sess) */
	if (nghttp2_session_server_new3(&h2->sess, cb, h2, opt, &mem))
		h2->dead = true;
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (!h2->dead)
		nghttp2_submit_settings(h2->sess, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
	c->srv->n_h2_conns++;
}

void px_h2_run(struct px_conn *c)
{
	struct px_h2 *h2 = c->h2;
	struct px_h2s *s2;
	bool one = h2->one;	/* (invariant 5) */

	h2->one = false;
	h2->trimmed = false;	/* active again: the next idle sweep may trim */
	if (c->in.data && !h2->dead) {
		ssize_t n = nghttp2_session_mem_recv(h2->sess, (const uint8_t *)buf_head(&c->in),
						     c->in.data);

		if (n < 0) {
			zh_dbg("proxy: h2: %s", nghttp2_strerror((int)n));
			/* a flood or a broken frame: say why before closing
			 * (on_frame_send counts it) */
			if (h2->flood) {	/* counted by kind (h2flood.c invariant 3) */
				c->srv->n_h2_flood[h2->flood - 1]++;
				zh_dbg("proxy: h2: %s", px_h2_flood_name(h2->flood - 1));
			}
			nghttp2_session_terminate_session(h2->sess,
				h2->flood || n == NGHTTP2_ERR_FLOODED ||
				n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS ?
				NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
			h2->recv_err = true;
		} else {
			buf_consume(&c->in, (size_t)n);
		}
	}
	for (s2 = h2->streams; s2 && !h2->dead && !h2->recv_err && !one; s2 = s2->next)
		if (px_h2s_due(s2)) {	/* (invariant 5) */
			s2->moved = false;
			px_h2s_pump(s2);
		}
	if (c->rd_eof && !c->in.data)
		h2->dead = true;	/* the client is gone: so are its streams */
	px_h2_output(h2);
	if (h2->dead || h2->recv_err)
		c->closing = true;	/* (after what was queued is sent) */
}

void px_h2_idle(struct px_conn *c)
{
	struct px_h2 *h2 = c->h2;
	bool out_idle;

	if (h2->trimmed || h2->dead || h2->streams)
		return;
	h2->trimmed = true;
	out_idle = h2->out_drained && !nghttp2_session_want_write(h2->sess) &&
		   !nghttp2_session_get_outbound_queue_size(h2->sess);
	c->srv->n_h2_trimmed += px_h2mem_trim(&h2->mem, out_idle);
}

void px_h2_goaway(struct px_conn *c)
{
	struct px_h2 *h2 = c->h2;

	/* the last stream it took: the client retries later ones elsewhere
	 * (RFC 9113 6.8); streams up to it finish, then the session closes */
	if (!h2->dead)
		nghttp2_submit_goaway(h2->sess, NGHTTP2_FLAG_NONE,
				      nghttp2_session_get_last_proc_stream_id(h2->sess),
				      NGHTTP2_NO_ERROR, NULL, 0);
}

void px_h2_free(struct px_conn *c)
{
	struct px_h2 *h2 = c->h2;

	while (h2->streams) {
		struct px_h2s *s2 = h2->streams;

		h2->streams = s2->next;
		px_h2s_free(s2);
	}
	if (h2->qslot >= 0)
		c->srv->h2cq[h2->qslot] = NULL;	/* (px_h2_run_queued skips it) */
	nghttp2_session_del(h2->sess);
	free(h2);
	c->h2 = NULL;
}
