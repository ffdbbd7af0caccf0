/* fuzz_h2_client.c — libFuzzer target: the HTTP/2 input path of the node
 * proxy (src/proxy/h2conn.c with libnghttp2): whatever a client sends after
 * the connection preface, fed in two pieces (the first input byte says
 * where to cut). The stream layer below is a
 * stand-in that answers every request view it is given (a length body, a
 * chunked body with trailers, or headers only, by the request; as HTTP/1.1
 * text or as fields with a raw body, h2conn.c invariant 7), so our
 * callbacks — request head synthesis and limits, body re-framing,
 * response conversion, trailers, flow control, stream lifecycle — all run.
 * Besides no crash and no sanitizer report, LeakSanitizer checks that
 * closing the connection frees every stream.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude \
 *     tests/fuzz/fuzz_h2_client.c src/proxy/h2conn.c src/proxy/h2flood.c src/proxy/h2mem.c \
 *     src/lib/buf.c \
 *     src/lib/h1.c \
 *     src/lib/log.c -lnghttp2 -o fuzz_h2_client
 *   ./fuzz_h2_client -max_total_time=20 tests/fuzz/corpus/h2_client
 * (`make fuzz` adds what this line names:)
 * fuzz-link: src/proxy/h2conn.c src/proxy/h2flood.c src/proxy/h2mem.c src/lib/buf.c -lnghttp2
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/proxy/px_int.h"

/* ---- stand-ins for what h2conn.c uses of the rest of the proxy ---------- */

uint64_t ev_now_ns(void)
{
	return 1;
}

uint64_t ev_turn_ns(void)
{
	return ev_now_ns();
}

void px_stream_free(struct px_stream *st)
{
	st->c->st = NULL;
	free(st);
}

/* The stream idle sweep's (px_h2_sweep_streams) local answer; the target
 * runs no sweep, so it is linked, not reached. */
const char px_err_stream_idle[] = "stream timeout";

void px_stream_fail(struct px_stream *st, int status, const char *err)
{
	(void)status;
	(void)err;
	px_stream_free(st);
}

/* The stream layer: one answer per view, chosen by the request's path. */
void px_h1_run(struct px_conn *c)
{
	struct h1_header h[PX_MAX_HDRS];
	size_t n = PX_MAX_HDRS;
	struct h1_request rq;
	int rc;

	if (c->h1_seen) {	/* the body: read and dropped */
		c->in.data = c->in.head = 0;
		return;
	}
	rc = h1_parse_request(buf_head(&c->in), c->in.data, 0, &c->srv->lim, &rq, h, &n);
	if (rc == -EAGAIN)
		return;
	c->h1_seen = true;
	px_buf_get(c->srv, &c->out);
	if (rc < 0) {
		buf_printf(&c->out, "HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\n\r\nbad\n");
		c->closing = true;
		c->in.data = c->in.head = 0;
		return;
	}
	switch (rq.target_len % 6) {
	case 4:	/* a forwarded answer: fields and a raw body (h2conn.c 7) */
		px_buf_get(c->srv, &c->rfields);
		buf_printf(&c->rfields, "x-a: b\r\nContent-Length: 5\r\nconnection: close\r\n");
		c->rstatus = 200;
		buf_printf(&c->out, "hello");
		c->out_end = rq.method_len % 2;	/* else: the body never ends */
		px_buf_get(c->srv, &c->trailers);
		buf_printf(&c->trailers, "grpc-status: 0\r\n");
		break;
	case 5:	/* fields, no body (a gRPC trailers-only answer) */
		px_buf_get(c->srv, &c->rfields);
		buf_printf(&c->rfields, "grpc-status: 14\r\ncontent-length: 0\r\n");
		c->rstatus = 200;
		c->out_end = true;
		break;
	case 0:
		buf_printf(&c->out, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello");
		break;
	case 1:
		buf_printf(&c->out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			   "3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n");
		px_buf_get(c->srv, &c->trailers);
		buf_printf(&c->trailers, "grpc-status: 0\r\ngrpc-message: ok\r\n");
		break;
	case 2:
		buf_printf(&c->out, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
		break;
	default:	/* a stream the layer cut (its "close the connection") */
		buf_printf(&c->out, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
		c->closing = true;
		break;
	}
	buf_consume(&c->in, (size_t)rc);
}

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static void run(struct px_conn *c, const uint8_t *p, size_t n, bool drain)
{
	if (n) {
		px_buf_get(c->srv, &c->in);
		buf_append(&c->in, p, n);
	}
	px_h2_run(c);
	if (drain)	/* the client reads what we sent */
		c->out.data = c->out.head = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct px_server s;
	struct px_conn c;
	size_t cut;

	if (!s.lim.max_head) {
		h1_limits_default(&s.lim);
		zh_log_init("fuzz_h2_client", ZH_ERR);
	}
	memset(&c, 0, sizeof(c));
	c.srv = &s;
	c.fd = -1;
	px_wr_init(&c.wr, PX_WR_CONN, NULL);
	px_buf_get(&s, &c.in);
	buf_append(&c.in, preface, sizeof(preface) - 1);
	px_h2_start(&c);
	if (size) {	/* data[0]: where to cut the frames, and whether the
			 * client reads between the two pieces */
		cut = data[0] % size;
		run(&c, data + 1, cut, data[0] & 1);
		run(&c, data + 1 + cut, size - 1 - cut, true);
	}
	run(&c, NULL, 0, true);	/* what the stand-in answered, out */
	px_h2_free(&c);
	px_buf_drop(&s, &c.in);
	px_buf_drop(&s, &c.out);
	while (s.n_bufs)
		free(s.bufs[--s.n_bufs]);
	px_obj_pools_free(&s);
	return 0;
}
