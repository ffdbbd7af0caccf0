/* mirror_h2.c — the HTTP/2 side of a RequestMirror copy (mirror.c): a copy
 * for a mirror port that declares cleartext HTTP/2 (px_mirror_to.h2c, as
 * px_pool_policy.h2c reads it: gRPC servers speak nothing else) is sent as
 * one HTTP/2 request on a connection of its own, with its own client
 * session of libnghttp2.
 *
 * Design note. mirror.c owns the socket, the timer and the states; this
 * file only turns bytes into bytes:
 *   px_mirror_h2_new     parses the complete HTTP/1.1 copy (the request as
 *                        sent upstream: rebuilt head, body framed by length
 *                        or chunked) into HEADERS (pseudo-headers from the
 *                        request line and Host, as h2up.c's px_h2us_submit
 *                        does) and a body for DATA, and submits it;
 *   px_mirror_h2_output  what the session has to send (the preface,
 *                        SETTINGS, the request, later ACKs and DATA the
 *                        peer's window let through);
 *   px_mirror_h2_input   what the mirror backend sent; says when the copy
 *                        is answered.
 *
 * Invariants:
 *  M1. One stream per session, never reused (mirror.c invariant 2): the
 *      session lives as long as its mirror connection.
 *  M2. The copy is answered when the response HEADERS of its stream arrive
 *      (a gRPC trailers-only answer included): the status and the rest are
 *      not needed, so mirror.c closes there, as it closes an HTTP/1.1
 *      mirror at the first response bytes. A stream closed before (reset,
 *      refused by a GOAWAY) is a failed copy.
 *  M3. Memory is the copy's body (at most PX_REPLAY_MAX) and libnghttp2's
 *      session; both are freed with the connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "zerohop/buf.h"
#include "zerohop/h1.h"
#include "zerohop/log.h"
#include "h2nv.h"
#include "px_int.h"

struct px_mirror_h2 {
	nghttp2_session *sess;
	int32_t id;		/* the copy's stream */
	char *body;		/* decoded request body, owned */
	size_t body_len, body_off;
	int state;		/* 0 waiting, 1 answered, -1 failed (M2) */
};

static ssize_t mh2_read(nghttp2_session *sess, int32_t id, uint8_t *out, size_t len,
			uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct px_mirror_h2 *m = src->ptr;
	size_t n = m->body_len - m->body_off;

	(void)sess;
	(void)id;
	(void)ud;
	if (n > len)
		n = len;
	memcpy(out, m->body + m->body_off, n);
	m->body_off += n;
	if (m->body_off == m->body_len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int mh2_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
	struct px_mirror_h2 *m = ud;

	(void)sess;
	if (f->hd.type == NGHTTP2_HEADERS && f->hd.stream_id == m->id && !m->state)
		m->state = 1;	/* M2 */
	return 0;
}

static int mh2_stream_close(nghttp2_session *sess, int32_t id, uint32_t err, void *ud)
{
	struct px_mirror_h2 *m = ud;

	(void)sess;
	(void)err;
	if (id == m->id && !m->state)
		m->state = -1;
	return 0;
}


/* The body of the copy after its head (hl bytes) into m->body. 0 or -EPROTO. */
static int mh2_body(struct px_mirror_h2 *m, const char *p, size_t len, int framing, uint64_t cl)
{
	struct h1_chunked ck;
	size_t n = len;
	ssize_t left;

	if (framing == H1_BODY_NONE)
		return 0;
	if (framing == H1_BODY_LENGTH) {
		if (cl > len)
			return -EPROTO;	/* (mirror.c sends only complete copies) */
		m->body = zh_malloc(cl ? cl : 1);
		memcpy(m->body, p, cl);
		m->body_len = cl;
		return 0;
	}
	m->body = zh_malloc(len ? len : 1);
	memcpy(m->body, p, len);
	h1_chunked_init(&ck);
	left = h1_decode_chunked(&ck, m->body, &n);	/* in place */
	if (left < 0 || (!left && !h1_chunked_done(&ck)))
		return -EPROTO;
	m->body_len = n;
	return 0;
}

int px_mirror_h2_new(struct px_server *s, const char *data, size_t len, struct px_mirror_h2 **out)
{
	struct h1_header h[PX_MAX_HDRS];
	nghttp2_nv nv[PX_MAX_HDRS + 5];
	char names[PX_BUFSZ];
	nghttp2_session_callbacks *cb;
	nghttp2_data_provider prd;
	struct px_mirror_h2 *m;
	struct h1_request rq;
	size_t n = PX_MAX_HDRS, k;
	uint64_t cl = 0;
	int framing, hl, rc = -EPROTO;

	hl = h1_parse_request(data, len, 0, &s->lim, &rq, h, &n);
	if (hl < 0)
		return -EPROTO;
	framing = h1_body_framing(h, n, 1, 0, 0, &cl);
	if (framing < 0)
		return -EPROTO;
	m = zh_calloc(1, sizeof(*m));
	if (mh2_body(m, data + hl, len - (size_t)hl, framing, cl))
		goto err_body;
	k = px_h2_request_nv(&rq, h, n, true, nv, names);	/* the body is framed here */
	if (nghttp2_session_callbacks_new(&cb))
		goto err_body;
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, mh2_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, mh2_stream_close);
	rc = nghttp2_session_client_new(&m->sess, cb, m);
	nghttp2_session_callbacks_del(cb);
	if (rc) {
		rc = -ENOMEM;
		goto err_body;
	}
	nghttp2_submit_settings(m->sess, NGHTTP2_FLAG_NONE, NULL, 0);
	prd.source.ptr = m;
	prd.read_callback = mh2_read;
	m->id = nghttp2_submit_request(m->sess, NULL, nv, k, m->body_len ? &prd : NULL, m);
	if (m->id < 0) {
		rc = -EPROTO;
		goto err_sess;
	}
	*out = m;
	return 0;

err_sess:
	nghttp2_session_del(m->sess);
err_body:
	free(m->body);
	free(m);
	return rc;
}

int px_mirror_h2_output(struct px_mirror_h2 *m, char **data, size_t *len)
{
	struct buf b = { 0 };
	const uint8_t *p;
	ssize_t r;

	while ((r = nghttp2_session_mem_send(m->sess, &p)) > 0)
		buf_append(&b, p, (size_t)r);
	if (r < 0) {
		buf_free(&b);
		return -EPROTO;
	}
	*data = b.area;	/* (the buffer's area is ours now) */
	*len = b.data;
	return 0;
}

int px_mirror_h2_input(struct px_mirror_h2 *m, const void *p, size_t n)
{
	if (nghttp2_session_mem_recv(m->sess, p, n) < 0)
		return -EPROTO;
	return m->state > 0 ? 1 : m->state < 0 ? -EPROTO : 0;
}

void px_mirror_h2_free(struct px_mirror_h2 *m)
{
	if (!m)
		return;
	nghttp2_session_del(m->sess);
	free(m->body);
	free(m);
}
