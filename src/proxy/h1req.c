/* h1req.c — HTTP/1.1 requests over a client connection's buffers (px_):
 * parse each request head in c->in into a stream, pump it, end it, start
 * the next (pipelined) one. Invariants 1-3 and 23 of docs/proxy.md
 * ("Design note"). The connection is a socket's (conn.c) or one HTTP/2 stream's
 * view of its request and response as HTTP/1.1 bytes (h2conn.c); this
 * file touches no socket.
 */
#include <errno.h>

#include "px_int.h"

/* Parse the next request head in c->in into a new stream. 0 when a stream
 * was started (or answered), -EAGAIN when more bytes are needed. */
static int px_h1_request(struct px_conn *c)
{
	struct px_server *s = c->srv;
	struct h1_header h[PX_MAX_HDRS];
	size_t n = PX_MAX_HDRS;
	struct h1_request rq;
	struct px_stream *st;
	int rc;

	rc = h1_parse_request(buf_head(&c->in), c->in.data, c->last_len, &s->lim, &rq, h, &n);
	if (rc == -EAGAIN) {
		c->last_len = c->in.data;
		return -EAGAIN;
	}
	c->last_len = 0;
	c->h1_seen = true;
	st = px_stream_new(c);
	if (rc < 0) {
		c->in.data = c->in.head = 0;	/* never parse past a bad head */
		px_stream_bad_head(st, rc);
		return 0;
	}
	/* h[] points into c->in: consumed bytes stay in place until the
	 * next read, so the stream may use them until it returns */
	return px_stream_open(st, &rq, h, n, (size_t)rc);
}

void px_h1_run(struct px_conn *c)
{
	struct px_server *s = c->srv;

	for (;;) {
		struct px_stream *st = c->st;

		if (!st) {
			if (c->closing || (c->one_req && c->h1_seen))
				break;
			if (!c->in.data) {
				if (c->rd_eof)
					c->closing = true;
				break;
			}
			if (c->out.data >= PX_HIGH)
				break;	/* let the client read its answers first */
			if (px_h1_request(c) == -EAGAIN) {
				if (c->rd_eof)
					c->closing = true;
				break;
			}
			continue;
		}
		if (st->rq == RQ_BODY && c->rd_eof && !c->in.data) {
			if (!st->discard) {
				px_stream_fail(st, 400, "client closed during the request body");
				continue;
			}
			/* answered already (invariant 23): the client stopped
			 * sending, as it may; nothing after it to parse */
			st->rq = RQ_DONE;
			st->client_keep = false;
		}
		if (st->up && st->rs != RS_CONNECT) {
			if (px_pump_req(st) || px_pump_resp(st))
				continue;
			/* the answer is complete, the body is not: the
			 * upstream takes no more of it (invariant 23) */
			if (st->rs == RS_DONE && st->rq == RQ_BODY)
				px_stream_early_answer(st);
			/* sent before the loop waits; a reset takes the
			 * error path in upstream.c's px_up_sent */
			if (st->up && st->up->out.data)
				px_wq_add(s, &st->up->wr);
		}
		if (st->discard)
			px_pump_req(st);	/* the rest of the body, dropped */
		if (st->rq == RQ_DONE && st->rs == RS_DONE) {
			px_stream_end(st);
			continue;
		}
		break;
	}
	if (c->st && c->st->up)
		px_up_update(c->st->up);
}
