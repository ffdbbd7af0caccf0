/* hbone.c — the HBONE tunnel's server side: HTTP/2 CONNECT over mutual TLS
 * 1.3 (include/zerohop/hbone.h, states and invariants H1-H3 there;
 * identity.h I8-I9 for the TLS). Non-blocking OpenSSL and libnghttp2 on
 * the caller's event loop (docs/mtls.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/hbone.h"
#include "zerohop/identity.h"
#include "zerohop/log.h"
#include "zerohop/net.h"

struct hb_stream;

struct hb_conn {
	struct hb_server *srv;
	int fd, mask;
	SSL *ssl;
	bool h2;			/* handshake done, session made */
	uint64_t hs_timer;		/* H4: the handshake's deadline, 0 once done */
	uint64_t idle_timer;		/* H5: armed while no stream is open, else 0 */
	bool closing;			/* conn_close is freeing its streams */
	nghttp2_session *sess;
	struct buf out;			/* frames waiting for SSL_write */
	char peer[256];			/* verified SPIFFE ID */
	struct hb_stream *streams;
	struct hb_conn *next, *prev;
};

struct hb_stream {
	struct hb_conn *c;
	int32_t id;
	bool is_connect;
	char authority[64];
	uint32_t src_ip;		/* HB_HDR_SOURCE's address, 0 = none */
	int ufd, umask;			/* the destination, -1 before the connect */
	bool connected, client_eof, shut_wr, dst_eof;
	struct buf up, down;		/* to the destination, from it */
	struct hb_stream *next;
};

struct hb_server {
	struct hb_opts o;
	int lfd, lfd2, port, hs_ms, idle_ms, max_conns;	/* lfd2: listen2 or -1 */
	SSL_CTX *ctx;
	struct hb_stats st;
	struct hb_conn *conns;
};

static void conn_close(struct hb_conn *c);
static void conn_flush(struct hb_conn *c);
static void idle_arm(struct hb_conn *c);

/* ---- the destination side of a stream --------------------------------------- */

static void up_mask(struct hb_stream *s);
static ssize_t read_cb(nghttp2_session *sess, int32_t id, uint8_t *dst, size_t len,
		       uint32_t *flags, nghttp2_data_source *src, void *user);

static void stream_free(struct hb_stream *s)	/* H3 */
{
	struct hb_conn *c = s->c;
	struct hb_stream **pp;

	for (pp = &s->c->streams; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = s->next;
	if (s->ufd >= 0) {
		ev_del(s->c->srv->o.loop, s->ufd);
		close(s->ufd);
	}
	buf_free(&s->up);
	buf_free(&s->down);
	free(s);
	if (!c->streams && !c->closing)
		idle_arm(c);	/* H5: the last stream ended */
}

static void respond(struct hb_stream *s, const char *status, bool body)
{
	nghttp2_nv nv[] = { { (uint8_t *)":status", (uint8_t *)status, 7, 3,
			      NGHTTP2_NV_FLAG_NONE } };
	nghttp2_data_provider dp = { .source.ptr = s, .read_callback = read_cb };
	nghttp2_submit_response(s->c->sess, s->id, nv, 1, body ? &dp : NULL);
}

/* The bytes written to the destination give the window back (H2). */
static void up_write(struct hb_stream *s)
{
	ssize_t n;

	if (!s->connected)
		return;
	if (s->up.data) {
		n = buf_write_fd(&s->up, s->ufd);
		if (n > 0)
			nghttp2_session_consume(s->c->sess, s->id, (size_t)n);
		else if (n < 0 && n != -EAGAIN) {
			zh_info("hbone: %s -> %s: destination: %s", s->c->peer, s->authority,
				strerror((int)-n));
			nghttp2_submit_rst_stream(s->c->sess, NGHTTP2_FLAG_NONE, s->id,
						  NGHTTP2_CONNECT_ERROR);
			return;
		}
	}
	if (!s->up.data && s->client_eof && !s->shut_wr) {
		shutdown(s->ufd, SHUT_WR);
		s->shut_wr = true;
	}
}

static void up_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct hb_stream *s = arg;
	struct hb_conn *c = s->c;

	if (!s->connected) {
		int r = net_connect_result(fd);

		if (r) {
			zh_warn("hbone: %s -> %s: connect: %s", c->peer, s->authority, strerror(-r));
			c->srv->st.connect_failed++;
			ev_del(loop, fd);
			close(fd);
			s->ufd = -1;
			respond(s, "503", false);
			conn_flush(c);
			return;
		}
		s->connected = true;
		respond(s, "200", true);
	}
	if (events & EV_WRITE)
		up_write(s);
	if ((events & EV_READ) && !s->dst_eof && s->down.data < HB_HIGH) {
		ssize_t n = buf_read_fd(&s->down, fd, HB_HIGH - s->down.data);

		if (n == 0)
			s->dst_eof = true;
		if (n > 0)
			c->srv->st.bytes_down += (uint64_t)n;
		if (n < 0 && n != -EAGAIN) {
			zh_info("hbone: %s -> %s: destination: %s", c->peer, s->authority,
				strerror((int)-n));
			nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, s->id,
						  NGHTTP2_CONNECT_ERROR);
		} else
			nghttp2_session_resume_data(c->sess, s->id);
	}
	up_mask(s);
	conn_flush(c);	/* last: it may close and free s */
}

static void up_mask(struct hb_stream *s)
{
	int m = 0;

	if (s->ufd < 0)
		return;
	if (!s->connected || s->up.data)
		m |= EV_WRITE;
	if (s->connected && !s->dst_eof && s->down.data < HB_HIGH)	/* H2 */
		m |= EV_READ;
	if (m != s->umask) {
		if (m)
			ev_add(s->c->srv->o.loop, s->ufd, m, up_io, s);
		else
			ev_del(s->c->srv->o.loop, s->ufd);
		s->umask = m;
	}
}

/* nghttp2 asks for the stream's DATA: what the destination sent. */
static ssize_t read_cb(nghttp2_session *sess, int32_t id, uint8_t *dst, size_t len,
		       uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct hb_stream *s = src->ptr;
	size_t n = s->down.data < len ? s->down.data : len;

	if (n) {
		memcpy(dst, buf_head(&s->down), n);
		buf_consume(&s->down, n);
	}
	if (!s->down.data && s->dst_eof)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	else if (!n)
		return NGHTTP2_ERR_DEFERRED;
	up_mask(s);	/* room again: read the destination (H2) */
	return (ssize_t)n;
}

/* RFC 7239 "for=1.2.3.4" or "for=\"1.2.3.4:5\"" (the first element, IPv4):
 * the address, network order, or 0 when it is not one. */
uint32_t hb_forwarded_for(const char *v, size_t len)
{
	char b[64];
	size_t n;
	struct in_addr a;

	if (len < 4 || len >= sizeof(b) || strncasecmp(v, "for=", 4))
		return 0;
	v += 4;
	len -= 4;
	if (len && *v == '"')
		v++, len--;
	n = strcspn(v, "\":;,");
	if (n > len)
		n = len;
	snprintf(b, sizeof(b), "%.*s", (int)n, v);
	return inet_pton(AF_INET, b, &a) == 1 ? a.s_addr : 0;
}

/* HEADERS complete: authorize (H1), then connect. */
static void stream_start(struct hb_stream *s)
{
	struct hb_server *srv = s->c->srv;
	struct net_addr a;
	struct sockaddr_in *sin = (struct sockaddr_in *)&a.ss;
	const char *why;

	if (!s->is_connect || net_parse_addr(s->authority, NULL, -1, &a) ||
	    a.ss.ss_family != AF_INET) {
		respond(s, "400", false);
		return;
	}
	why = srv->o.authorize ? srv->o.authorize(srv->o.arg, s->c->peer,
						  SSL_get_servername(s->c->ssl, TLSEXT_NAMETYPE_host_name),
						  sin->sin_addr.s_addr, ntohs(sin->sin_port),
						  s->src_ip) : NULL;
	if (why) {
		srv->st.denied++;
		zh_info("hbone: denied %s -> %s: %s", s->c->peer, s->authority, why);
		respond(s, "403", false);
		return;
	}
	s->ufd = net_connect(&a);
	if (s->ufd < 0) {
		srv->st.connect_failed++;
		respond(s, "503", false);
		return;
	}
	srv->st.streams++;
	up_mask(s);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------ */

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *user)
{
	struct hb_conn *c = user;
	struct hb_stream *s;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	s->c = c;
	s->id = f->hd.stream_id;
	s->ufd = -1;
	buf_init(&s->up, 0);
	buf_init(&s->down, 0);
	s->next = c->streams;
	c->streams = s;
	if (c->idle_timer) {	/* H5: busy again */
		ev_timer_del(c->srv->o.loop, c->idle_timer);
		c->idle_timer = 0;
	}
	nghttp2_session_set_stream_user_data(sess, s->id, s);
	return 0;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
		     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
	struct hb_stream *s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);

	if (!s)
		return 0;
	if (nlen == 7 && !memcmp(name, ":method", 7))
		s->is_connect = vlen == 7 && !memcmp(value, "CONNECT", 7);
	else if (nlen == 10 && !memcmp(name, ":authority", 10))
		snprintf(s->authority, sizeof(s->authority), "%.*s", (int)vlen, value);
	else if (nlen == sizeof(HB_HDR_SOURCE) - 1 && !memcmp(name, HB_HDR_SOURCE, nlen))
		s->src_ip = hb_forwarded_for((const char *)value, vlen);
	return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *user)
{
	struct hb_stream *s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);

	if (!s)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
		stream_start(s);
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
		s->client_eof = true;
		up_write(s);
	}
	return 0;
}

static int on_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
		   size_t len, void *user)
{
	struct hb_stream *s = nghttp2_session_get_stream_user_data(sess, id);

	if (!s || s->ufd < 0) {
		nghttp2_session_consume(sess, id, len);
		return 0;
	}
	buf_append(&s->up, data, len);	/* bounded by the window (H2) */
	s->c->srv->st.bytes_up += len;
	up_write(s);
	up_mask(s);
	return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t code, void *user)
{
	struct hb_stream *s = nghttp2_session_get_stream_user_data(sess, id);

	if (s && code)
		zh_info("hbone: %s -> %s: stream reset (%s)", s->c->peer, s->authority,
			nghttp2_http2_strerror(code));
	if (s)
		stream_free(s);
	return 0;
}

/* ---- the tunnel connection ----------------------------------------------------- */

static void conn_io(struct ev_loop *loop, int fd, int events, void *arg);

static void conn_set_mask(struct hb_conn *c, int m)
{
	if (m != c->mask) {
		ev_add(c->srv->o.loop, c->fd, m, conn_io, c);
		c->mask = m;
	}
}

/* Frames out through TLS; closes c when both sides are done. */
static void conn_flush(struct hb_conn *c)
{
	const uint8_t *p;
	ssize_t n;

	while (c->sess && (n = nghttp2_session_mem_send(c->sess, &p)) > 0)
		buf_append(&c->out, p, (size_t)n);
	while (c->out.data) {
		int w = SSL_write(c->ssl, buf_head(&c->out), (int)c->out.data);

		if (w <= 0) {
			int e = SSL_get_error(c->ssl, w);

			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
				break;
			zh_info("hbone: %s: TLS write failed (%d, %s)", c->peer, e,
				ERR_reason_error_string(ERR_peek_last_error()) ?: "-");
			ERR_clear_error();
			conn_close(c);
			return;
		}
		buf_consume(&c->out, (size_t)w);
	}
	if (!c->out.data && !nghttp2_session_want_read(c->sess) &&
	    !nghttp2_session_want_write(c->sess)) {
		conn_close(c);
		return;
	}
	conn_set_mask(c, EV_READ | (c->out.data ? EV_WRITE : 0));
}

static int conn_h2_start(struct hb_conn *c)
{
	static const nghttp2_settings_entry set[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, HB_HIGH },
	};
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	const unsigned char *alpn;
	unsigned int alen;
	int r;

	SSL_get0_alpn_selected(c->ssl, &alpn, &alen);
	if (alen != 2 || memcmp(alpn, "h2", 2) || id_tls_peer(c->ssl, c->peer, sizeof(c->peer)))
		return -EPROTO;
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_option_new(&opt);
	nghttp2_option_set_no_auto_window_update(opt, 1);	/* H2 */
	r = nghttp2_session_server_new2(&c->sess, cb, c, opt);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (r)
		return -ENOMEM;
	nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, set, 2);
	nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, HB_CONN_WINDOW);
	c->h2 = true;
	return 0;
}

static void conn_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct hb_conn *c = arg;
	uint8_t in[16384];
	char why[256];

	if (!c->h2) {
		int r = SSL_do_handshake(c->ssl);

		if (r != 1) {
			int e = SSL_get_error(c->ssl, r);

			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				conn_set_mask(c, e == SSL_ERROR_WANT_WRITE ? EV_READ | EV_WRITE : EV_READ);
				return;
			}
			c->srv->st.tls_refused++;
			zh_info("hbone: TLS refused: %s", id_tls_reason(c->ssl, why, sizeof(why)));	/* I9 */
			ERR_clear_error();
			conn_close(c);
			return;
		}
		if (conn_h2_start(c)) {
			c->srv->st.tls_refused++;
			zh_info("hbone: refused: no h2 or no SPIFFE ID");
			conn_close(c);
			return;
		}
		ev_timer_del(loop, c->hs_timer);	/* H4: done in time */
		c->hs_timer = 0;
		idle_arm(c);	/* H5: no stream yet */
	}
	for (;;) {
		int n = SSL_read(c->ssl, in, sizeof(in));

		if (n <= 0) {
			int e = SSL_get_error(c->ssl, n);

			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				break;
			if (e != SSL_ERROR_ZERO_RETURN)
				zh_info("hbone: %s: TLS read failed (%d, %s)", c->peer, e,
					ERR_reason_error_string(ERR_peek_last_error()) ?: "-");
			ERR_clear_error();
			conn_close(c);	/* peer closed or TLS error */
			return;
		}
		if (nghttp2_session_mem_recv(c->sess, in, (size_t)n) < 0) {
			zh_info("hbone: %s: HTTP/2 error", c->peer);
			conn_close(c);
			return;
		}
	}
	conn_flush(c);
}

static void conn_close(struct hb_conn *c)
{
	struct hb_server *srv = c->srv;

	c->closing = true;
	while (c->streams)	/* H3: nghttp2_session_del calls no callback */
		stream_free(c->streams);
	if (c->hs_timer)
		ev_timer_del(srv->o.loop, c->hs_timer);
	if (c->idle_timer)
		ev_timer_del(srv->o.loop, c->idle_timer);
	srv->st.open--;
	ev_del(srv->o.loop, c->fd);
	close(c->fd);
	nghttp2_session_del(c->sess);
	SSL_free(c->ssl);
	buf_free(&c->out);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

/* H4: a connection still in its handshake at the deadline is closed. */
static void hs_timeout(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct hb_conn *c = arg;

	c->hs_timer = 0;
	c->srv->st.tls_refused++;
	zh_info("hbone: TLS refused: no handshake within %d ms", c->srv->hs_ms);
	conn_close(c);
}

/* H5: no stream for idle_ms: GOAWAY (best effort), then close. */
static void idle_timeout(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct hb_conn *c = arg;

	const uint8_t *p;
	ssize_t n;

	c->idle_timer = 0;
	c->srv->st.idle_closed++;
	zh_info("hbone: %s: idle for %d ms, closed", c->peer, c->srv->idle_ms);
	/* GOAWAY, one best-effort write (not conn_flush: it may close c) */
	nghttp2_session_terminate_session(c->sess, NGHTTP2_NO_ERROR);
	while ((n = nghttp2_session_mem_send(c->sess, &p)) > 0)
		buf_append(&c->out, p, (size_t)n);
	if (c->out.data)
		SSL_write(c->ssl, buf_head(&c->out), (int)c->out.data);
	ERR_clear_error();
	conn_close(c);
}

static void idle_arm(struct hb_conn *c)
{
	if (c->idle_timer)
		ev_timer_del(c->srv->o.loop, c->idle_timer);
	c->idle_timer = ev_timer_add(c->srv->o.loop, ev_now_ns() + c->srv->idle_ms * 1000000ULL,
				     idle_timeout, c);
}

static void accept_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct hb_server *srv = arg;

	for (int i = 0; i < 64; i++) {
		int cfd = net_accept(fd, NULL);
		struct hb_conn *c;

		if (cfd < 0)
			return;
		if (srv->st.open >= (uint64_t)srv->max_conns) {	/* H6 */
			srv->st.cap_refused++;
			zh_info("hbone: %llu connections open (the cap): one more refused",
				(unsigned long long)srv->st.open);
			close(cfd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c || !(c->ssl = SSL_new(srv->ctx))) {
			free(c);
			close(cfd);
			continue;
		}
		srv->st.conns++;
		srv->st.open++;
		net_set_nodelay(cfd);
		c->srv = srv;
		c->fd = cfd;
		buf_init(&c->out, 0);
		SSL_set_fd(c->ssl, cfd);
		SSL_set_accept_state(c->ssl);
		SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
			     SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		c->next = srv->conns;
		if (srv->conns)
			srv->conns->prev = c;
		srv->conns = c;
		c->hs_timer = ev_timer_add(loop, ev_now_ns() + srv->hs_ms * 1000000ULL, hs_timeout, c);
		conn_set_mask(c, EV_READ);
	}
}

int hb_server_open(const struct hb_opts *o, struct hb_server **out, char *err, size_t errlen)
{
	struct hb_server *srv = calloc(1, sizeof(*srv));
	struct id_err ie = {};
	struct net_addr a;
	int r;

	if (!srv)
		return -ENOMEM;
	srv->o = *o;
	srv->lfd = srv->lfd2 = -1;
	srv->hs_ms = o->handshake_ms > 0 ? o->handshake_ms : HB_HANDSHAKE_MS;
	srv->idle_ms = o->idle_ms > 0 ? o->idle_ms : HB_IDLE_MS;
	srv->max_conns = o->max_conns > 0 ? o->max_conns : HB_MAX_CONNS;
	srv->ctx = o->pod ? id_tls_ctx(o->svid_dir, o->ns, o->pod, true, &ie) :
			    id_tls_ctx_sni(o->svid_dir, &ie);
	if (!srv->ctx) {
		snprintf(err, errlen, "hbone: %s", ie.msg);
		r = -ENOENT;
		goto fail;
	}
	r = net_parse_addr(o->listen, NULL, HB_PORT, &a);
	if (!r)
		r = srv->lfd = net_listen(&a, SOCK_STREAM, 0, 128);
	if (r < 0) {
		snprintf(err, errlen, "hbone: listen %s: %s", o->listen, strerror(-r));
		goto fail;
	}
	net_local_addr(srv->lfd, &a);
	srv->port = net_addr_port(&a);
	r = ev_add(o->loop, srv->lfd, EV_READ, accept_io, srv);
	if (!r && o->listen2) {
		r = net_parse_addr(o->listen2, NULL, HB_PORT, &a);
		if (!r)
			r = srv->lfd2 = net_listen(&a, SOCK_STREAM, 0, 128);
		if (r < 0) {
			snprintf(err, errlen, "hbone: listen %s: %s", o->listen2, strerror(-r));
			goto fail;
		}
		r = ev_add(o->loop, srv->lfd2, EV_READ, accept_io, srv);
	}
	if (r) {
		snprintf(err, errlen, "hbone: %s", strerror(-r));
		goto fail;
	}
	*out = srv;
	return 0;
fail:
	if (srv->lfd >= 0) {
		ev_del(o->loop, srv->lfd);
		close(srv->lfd);
	}
	if (srv->lfd2 >= 0) {
		ev_del(o->loop, srv->lfd2);
		close(srv->lfd2);
	}
	SSL_CTX_free(srv->ctx);
	free(srv);
	return r;
}

int hb_server_port(const struct hb_server *s)
{
	return s->port;
}

const struct hb_stats *hb_server_stats(const struct hb_server *s)
{
	return &s->st;
}

void hb_server_close(struct hb_server *s)
{
	if (!s)
		return;
	while (s->conns)
		conn_close(s->conns);
	ev_del(s->o.loop, s->lfd);
	close(s->lfd);
	if (s->lfd2 >= 0) {
		ev_del(s->o.loop, s->lfd2);
		close(s->lfd2);
	}
	SSL_CTX_free(s->ctx);
	free(s);
}
