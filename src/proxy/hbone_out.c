/* hbone_out.c — the HBONE tunnel's client side: a pool of HTTP/2 CONNECT
 * tunnels over mutual TLS 1.3 (include/zerohop/hbone_out.h: states and
 * invariants O1-O9 there; identity.h I8-I9 for the TLS). Non-blocking
 * OpenSSL and libnghttp2 on the caller's event loop, as hbone.c (the
 * server).
 *
 * Who calls what:
 *   hbo_connect ── tun_for (reuse, or ctx_get + tun_open) ── stream_attach
 *   tun_io      the tunnel's socket: connect, handshake (tun_h2_start
 *               submits the waiting streams), TLS records into nghttp2
 *   stream_io   the client's socket: read (O2, O3), write (down_write)
 *   tun_flush   frames out through TLS; every path that changed a session
 *               ends with it, or with tun_kick from inside nghttp2
 *   tun_close   the only place a tunnel ends: its streams are moved
 *               (stream_requeue, once, before any answer) or failed
 * Streams live in one list per client (a stream may outlive its tunnel
 * while it writes what it already received: t NULL); tunnels count theirs.
 * nghttp2 finds a stream by its user data, cleared whenever the stream is
 * freed first, so no callback ever sees a freed stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/hbone_out.h"
#include "zerohop/identity.h"
#include "zerohop/log.h"
#include "zerohop/net.h"

static const char *const fail_name[HBO_F__N] = {
	"no_state", "no_source_pod", "no_destination", "ipv6", "network_policy", "no_source_svid",
	"tunnel_cap",
	"connect_refused", "tls_refused", "denied", "unavailable", "bad_status", "reset",
};

const char *hbo_fail_name(enum hbo_fail f)
{
	return f < HBO_F__N ? fail_name[f] : "?";
}

struct hbo_key {		/* what a tunnel is for (hbone_out.h "tunnel") */
	char src_ns[128], src_pod[256];
	char dst_ns[128], dst_pod[256], dst_sa[256];
	uint32_t node_ip, bind_ip;
	uint16_t node_port;
};

struct hbo_ctx {		/* a source pod's TLS context, shared by its tunnels */
	char ns[128], pod[256];
	SSL_CTX *ctx;
	char td[256];		/* the trust domain of its SVID */
	struct stat crt_st, bundle_st;	/* the files it was made from (renewal) */
	int refs;		/* tunnels using it (O8) */
	uint64_t gen;		/* bumped at each reload (O10) */
	uint64_t checked_ns;	/* last look at the files (O10) */
	struct hbo_ctx *next;
};

enum { T_CONNECTING, T_HANDSHAKE, T_READY, T_GOAWAY };
enum { S_WAIT, S_ASKED, S_RELAY, S_DRAIN };

struct hbo_tun {
	struct hbo_client *cl;
	struct hbo_key k;
	struct hbo_ctx *cx;		/* a reference */
	char want[700];			/* the SPIFFE ID expected (O1) */
	char where[40];			/* node IP:PORT, for logs */
	int fd, mask, state;
	bool in_ng;			/* inside nghttp2 (callbacks): never evicted */
	bool heard;			/* a frame came from the peer after the handshake */
	SSL *ssl;
	nghttp2_session *sess;
	struct buf out;			/* frames waiting for SSL_write */
	uint64_t hs_timer, idle_timer;	/* O5; O6 (armed while no stream) */
	uint64_t idle_since;
	uint64_t gen;			/* cx->gen when it was opened (O10) */
	bool retired;			/* O10: no new stream; closed once empty */
	uint32_t n_attached;		/* streams whose t is this one */
	uint32_t n_busy;		/* ... that hold an HTTP/2 stream slot (O7) */
	struct hbo_tun *prev, *next;
};

struct hbo_stream {
	struct hbo_client *cl;
	struct hbo_tun *t;		/* NULL before attach, or orphaned in DRAIN */
	struct hbo_key k;
	int fd, mask, state;
	int32_t id;			/* HTTP/2 stream id, 0 before the request */
	bool h2_open;			/* the HTTP/2 stream is open (user data set) */
	int status;
	bool client_eof, peer_eof, shut_wr, retried;
	struct buf up, down;		/* client -> tunnel, tunnel -> client */
	char authority[24], client[24];
	char fwd[32];			/* HB_HDR_SOURCE: "for=CLIENT_IP" */
	struct hbo_stream *prev, *next;
};

struct hbo_client {
	struct hbo_opts o;
	char svid_dir[512];
	int hs_ms, idle_ms, max_tunnels;
	bool closing;			/* hbo_client_close: no stream is moved */
	struct hbo_stats st;
	struct hbo_ctx *ctxs;
	struct hbo_tun *tuns;
	struct hbo_stream *streams;
};

static void tun_close(struct hbo_tun *t, enum hbo_fail f, const char *why);
static void tun_flush(struct hbo_tun *t);
static void stream_io(struct ev_loop *loop, int fd, int events, void *arg);
static void stream_requeue(struct hbo_stream *s);

static void rst_close(int fd)	/* the client sees a reset, as ztunnel's */
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static void ip_port(char *buf, size_t len, uint32_t ip, uint16_t port)
{
	char a[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &ip, a, sizeof(a));
	snprintf(buf, len, "%s:%u", a, port);
}

static void peak(struct hbo_client *cl, size_t n)
{
	if (n > cl->st.buf_peak)
		cl->st.buf_peak = n;
}

/* ---- TLS contexts per source pod (O8; renewal: the files changed) ---------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* A reference to ns/pod's context, made or re-made when its SVID or the
 * bundle changed on disk. NULL with the reason in why. */
static struct hbo_ctx *ctx_get(struct hbo_client *cl, const char *ns, const char *pod,
			       char *why, size_t wlen)
{
	char crt[900], bundle[600], id[512];
	struct stat a, b;
	struct hbo_ctx *e;
	struct id_err ie = {};
	SSL_CTX *ctx;
	const char *td, *end;

	for (e = cl->ctxs; e && (strcmp(e->ns, ns) || strcmp(e->pod, pod)); e = e->next)
		;
	snprintf(crt, sizeof(crt), "%s/%s_%s.crt", cl->svid_dir, ns, pod);
	snprintf(bundle, sizeof(bundle), "%s/bundle.pem", cl->svid_dir);
	if (stat(crt, &a) || stat(bundle, &b)) {
		snprintf(why, wlen, "no SVID for %s/%s on this node", ns, pod);
		return NULL;	/* the pod left, or no CA yet: not even an old one */
	}
	if (e && same_file(&a, &e->crt_st) && same_file(&b, &e->bundle_st)) {
		e->refs++;
		return e;
	}
	ctx = id_tls_ctx(cl->svid_dir, ns, pod, false, &ie);
	if (!ctx || id_tls_ctx_spiffe(ctx, id, sizeof(id)) || strncmp(id, "spiffe://", 9) ||
	    !(end = strchr(id + 9, '/'))) {
		SSL_CTX_free(ctx);
		if (e) {	/* mid-renewal (key and certificate apart): the old one */
			e->refs++;
			return e;
		}
		snprintf(why, wlen, "%s", ctx ? "the SVID has no SPIFFE ID" : ie.msg);
		return NULL;
	}
	cl->st.ctx_loads++;
	td = id + 9;
	if (e)
		e->gen++;	/* O10: its tunnels retire */
	if (!e) {
		e = zh_calloc(1, sizeof(*e));
		snprintf(e->ns, sizeof(e->ns), "%s", ns);
		snprintf(e->pod, sizeof(e->pod), "%s", pod);
		e->next = cl->ctxs;
		cl->ctxs = e;
	}
	SSL_CTX_free(e->ctx);	/* tunnels keep theirs: an SSL holds its context */
	e->ctx = ctx;
	snprintf(e->td, sizeof(e->td), "%.*s", (int)(end - td), td);
	e->crt_st = a;
	e->bundle_st = b;
	e->checked_ns = ev_now_ns();
	e->refs++;
	return e;
}

/* O10: at most once a second per source pod, when one of its connections
 * comes, look whether its SVID or the bundle changed on disk, and reload. */
static void ctx_recheck(struct hbo_client *cl, const char *ns, const char *pod)
{
	struct hbo_ctx *e;
	char why[200];

	for (e = cl->ctxs; e && (strcmp(e->ns, ns) || strcmp(e->pod, pod)); e = e->next)
		;
	if (!e || ev_now_ns() - e->checked_ns < 1000000000ULL)
		return;
	e->checked_ns = ev_now_ns();
	if (ctx_get(cl, ns, pod, why, sizeof(why)) == e)	/* (re)loaded or the same */
		e->refs--;	/* only looked: give the reference back */
}

static void ctx_put(struct hbo_client *cl, struct hbo_ctx *e)
{
	struct hbo_ctx **pp;

	if (--e->refs > 0)
		return;
	for (pp = &cl->ctxs; *pp != e; pp = &(*pp)->next)
		;
	*pp = e->next;
	SSL_CTX_free(e->ctx);
	free(e);
}

/* ---- streams: one client connection each ------------------------------------ */

static bool key_eq(const struct hbo_key *a, const struct hbo_key *b)
{
	return a->node_ip == b->node_ip && a->node_port == b->node_port &&
	       !strcmp(a->src_pod, b->src_pod) && !strcmp(a->src_ns, b->src_ns) &&
	       !strcmp(a->dst_pod, b->dst_pod) && !strcmp(a->dst_ns, b->dst_ns) &&
	       !strcmp(a->dst_sa, b->dst_sa);
}

static void stream_mask(struct hbo_stream *s)
{
	int m = 0;

	if (s->fd < 0)
		return;
	if (s->down.data)
		m |= EV_WRITE;
	if (s->state == S_RELAY && !s->client_eof && s->up.data < HB_HIGH)	/* O2, O3 */
		m |= EV_READ;
	if (m != s->mask) {
		if (m)
			ev_add(s->cl->o.loop, s->fd, m, stream_io, s);
		else
			ev_del(s->cl->o.loop, s->fd);
		s->mask = m;
	}
}

static void tun_kick(struct hbo_tun *t);
static void idle_arm(struct hbo_tun *t);

static void tun_detach(struct hbo_stream *s)
{
	struct hbo_tun *t = s->t;

	if (!t)
		return;
	t->n_attached--;
	if (s->state != S_DRAIN)
		t->n_busy--;
	s->t = NULL;
	if (!t->n_attached && t->state >= T_READY && t->fd >= 0)
		idle_arm(t);	/* O6: the last stream left */
}

/* The client connection ends: an RST (rst) or a normal close. Its HTTP/2
 * stream, still open, is reset (CANCEL). */
static void stream_free(struct hbo_stream *s, bool rst)
{
	struct hbo_client *cl = s->cl;
	struct hbo_tun *t = s->t;

	if (t && s->h2_open) {
		nghttp2_session_set_stream_user_data(t->sess, s->id, NULL);
		nghttp2_submit_rst_stream(t->sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
		s->h2_open = false;
		tun_kick(t);
	}
	tun_detach(s);
	if (s->mask > 0)
		ev_del(cl->o.loop, s->fd);
	if (rst)
		rst_close(s->fd);
	else
		close(s->fd);
	buf_free(&s->up);
	buf_free(&s->down);
	if (s->prev)
		s->prev->next = s->next;
	else
		cl->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

/* Refused or reset: counted, logged (why NULL: the tunnel's line said it,
 * O9), closed with an RST. */
static void stream_fail(struct hbo_stream *s, enum hbo_fail f, const char *fmt, ...)
{
	s->cl->st.failed[f]++;
	if (fmt) {
		char why[300];
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		zh_info("hbone-out: %s (%s/%s) -> %s (%s.%s): %s: %s", s->client, s->k.src_ns,
			s->k.src_pod, s->authority, s->k.dst_pod, s->k.dst_ns, fail_name[f], why);
	}
	stream_free(s, true);
}

/* Write what the tunnel sent to the client; the window is given back as it
 * is written (O3); the peer's END_STREAM shuts the client's write side
 * once all is written (O4). true when s was freed. */
static bool down_write(struct hbo_stream *s)
{
	if (s->down.data) {
		ssize_t n = buf_write_fd(&s->down, s->fd);

		if (n > 0 && s->t)
			nghttp2_session_consume(s->t->sess, s->id, (size_t)n);
		else if (n < 0 && n != -EAGAIN) {
			stream_free(s, true);	/* the client is gone: cancel */
			return true;
		}
	}
	if (!s->down.data && s->peer_eof && !s->shut_wr) {
		shutdown(s->fd, SHUT_WR);
		s->shut_wr = true;
	}
	if (s->state == S_DRAIN && !s->down.data) {
		stream_free(s, false);	/* both ways ended, all written */
		return true;
	}
	return false;
}

static void stream_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct hbo_stream *s = arg;
	struct hbo_tun *t = s->t;

	if ((events & EV_WRITE) && down_write(s))
		goto flush;
	if ((events & (EV_READ | EV_ERROR)) && s->state == S_RELAY && !s->client_eof &&
	    s->up.data < HB_HIGH) {
		ssize_t n = buf_read_fd(&s->up, fd, HB_HIGH - s->up.data);

		if (n == 0 || n > 0) {
			if (n == 0)
				s->client_eof = true;	/* O4: END_STREAM once up is sent */
			s->cl->st.bytes_out += (uint64_t)n;
			peak(s->cl, s->up.data);
			if (t)
				nghttp2_session_resume_data(t->sess, s->id);
		} else if (n != -EAGAIN) {
			stream_free(s, true);	/* the client reset: cancel */
			goto flush;
		}
	}
	stream_mask(s);
flush:
	if (t)
		tun_flush(t);	/* last: it may close t and free s */
}

/* nghttp2 asks for the request body: the client's bytes (O2: none before the 200). */
static ssize_t read_cb(nghttp2_session *sess, int32_t id, uint8_t *dst, size_t len,
		       uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct hbo_stream *s = nghttp2_session_get_stream_user_data(sess, id);
	size_t n;

	if (!s || s->state != S_RELAY)
		return NGHTTP2_ERR_DEFERRED;
	n = s->up.data < len ? s->up.data : len;
	if (n) {
		memcpy(dst, buf_head(&s->up), n);
		buf_consume(&s->up, n);
	}
	if (!s->up.data && s->client_eof)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	else if (!n)
		return NGHTTP2_ERR_DEFERRED;
	stream_mask(s);	/* room again: read the client (O3) */
	return (ssize_t)n;
}

/* Send s's CONNECT on its READY tunnel. */
static void stream_submit(struct hbo_stream *s)
{
	struct hbo_tun *t = s->t;
	nghttp2_nv nv[] = {
		{ (uint8_t *)":method", (uint8_t *)"CONNECT", 7, 7, NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)":authority", (uint8_t *)s->authority, 10, strlen(s->authority),
		  NGHTTP2_NV_FLAG_NONE },
		/* the client carried, for the server's NetworkPolicy (hbone_px.c) */
		{ (uint8_t *)HB_HDR_SOURCE, (uint8_t *)s->fwd, sizeof(HB_HDR_SOURCE) - 1,
		  strlen(s->fwd), NGHTTP2_NV_FLAG_NONE },
	};
	nghttp2_data_provider dp = { .source.ptr = s, .read_callback = read_cb };
	int32_t id = nghttp2_submit_request(t->sess, NULL, nv, s->fwd[0] ? 3 : 2, &dp, s);

	if (id < 0) {	/* stream ids used up: this tunnel takes no more (O7) */
		t->state = T_GOAWAY;
		stream_requeue(s);
		return;
	}
	s->id = id;
	s->h2_open = true;
	s->state = S_ASKED;
	s->cl->st.streams++;
}

static void stream_attach(struct hbo_stream *s, struct hbo_tun *t)
{
	s->t = t;
	s->state = S_WAIT;
	t->n_attached++;
	t->n_busy++;
	if (t->idle_timer) {	/* busy again */
		ev_timer_del(t->cl->o.loop, t->idle_timer);
		t->idle_timer = 0;
	}
	if (t->state == T_READY)
		stream_submit(s);
}

static struct hbo_tun *tun_for(struct hbo_client *cl, const struct hbo_key *k,
			       enum hbo_fail *f, char *why, size_t wlen);

/* Before any answer, the tunnel went away or refused the stream: nothing
 * of the client was sent (O2), so it moves once to another tunnel. */
static void stream_requeue(struct hbo_stream *s)
{
	struct hbo_client *cl = s->cl;
	struct hbo_tun *t;
	enum hbo_fail f;
	char why[300];

	tun_detach(s);
	s->h2_open = false;
	s->id = 0;
	if (s->retried || cl->closing) {
		stream_fail(s, HBO_F_RESET, cl->closing ? NULL : "the tunnel refused the stream twice");
		return;
	}
	s->retried = true;
	cl->st.retried++;
	t = tun_for(cl, &s->k, &f, why, sizeof(why));
	if (!t) {
		stream_fail(s, f, "%s", why);
		return;
	}
	stream_attach(s, t);
	tun_kick(t);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------ */

static int on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
		     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
	struct hbo_stream *s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);

	if (s && f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_RESPONSE &&
	    nlen == 7 && !memcmp(name, ":status", 7) && vlen == 3)
		s->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
	return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *user)
{
	struct hbo_tun *t = user;
	struct hbo_stream *s;

	t->heard = true;
	if (f->hd.type == NGHTTP2_GOAWAY) {	/* O7: no new stream here */
		if (t->state == T_READY)
			t->state = T_GOAWAY;
		return 0;
	}
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (!s)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_RESPONSE &&
	    s->state == S_ASKED) {
		if (s->status != 200) {
			stream_fail(s, s->status == 403 ? HBO_F_DENIED :
				       s->status == 503 ? HBO_F_UNAVAILABLE : HBO_F_BAD_STATUS,
				    "the destination node answered %d", s->status);
			return 0;
		}
		s->state = S_RELAY;
		s->cl->st.established++;
		stream_mask(s);	/* O2: read the client from now on */
	}
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM) && s->state == S_RELAY) {
		s->peer_eof = true;	/* O4 */
		if (!down_write(s))
			stream_mask(s);
	}
	return 0;
}

static int on_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
		   size_t len, void *user)
{
	struct hbo_stream *s = nghttp2_session_get_stream_user_data(sess, id);

	if (!s || s->state != S_RELAY) {
		nghttp2_session_consume(sess, id, len);	/* the connection's window */
		return 0;
	}
	buf_append(&s->down, data, len);	/* bounded by the stream's window (O3) */
	s->cl->st.bytes_in += len;
	peak(s->cl, s->down.data);
	if (!down_write(s))
		stream_mask(s);
	return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t code, void *user)
{
	struct hbo_stream *s = nghttp2_session_get_stream_user_data(sess, id);
	struct hbo_tun *t = user;

	if (!s)
		return 0;
	s->h2_open = false;
	if (s->state == S_RELAY && !code) {	/* both END_STREAMs: write the rest */
		s->state = S_DRAIN;
		t->n_busy--;
		if (!down_write(s))
			stream_mask(s);
		return 0;
	}
	if (s->state == S_ASKED && code == NGHTTP2_REFUSED_STREAM) {	/* GOAWAY'd */
		stream_requeue(s);
		return 0;
	}
	stream_fail(s, s->state == S_RELAY ? HBO_F_RESET : HBO_F_BAD_STATUS,
		    "stream reset by the destination node (%s)", nghttp2_http2_strerror(code));
	return 0;
}

/* ---- tunnels -------------------------------------------------------------------------- */

static void tun_io(struct ev_loop *loop, int fd, int events, void *arg);

static void tun_set_mask(struct hbo_tun *t, int m)
{
	if (m != t->mask) {
		ev_add(t->cl->o.loop, t->fd, m, tun_io, t);
		t->mask = m;
	}
}

/* Frames are waiting and no flush follows (inside nghttp2, or another
 * tunnel's work): let the loop call tun_io, which flushes. */
static void tun_kick(struct hbo_tun *t)
{
	if (t->state >= T_READY)
		tun_set_mask(t, EV_READ | EV_WRITE);
}

static void tun_flush(struct hbo_tun *t)
{
	const uint8_t *p;
	ssize_t n;

	if (t->state < T_READY)
		return;
	t->in_ng = true;
	while ((n = nghttp2_session_mem_send(t->sess, &p)) > 0)
		buf_append(&t->out, p, (size_t)n);
	t->in_ng = false;
	if (n < 0) {
		tun_close(t, HBO_F_RESET, nghttp2_strerror((int)n));
		return;
	}
	while (t->out.data) {
		int w = SSL_write(t->ssl, buf_head(&t->out), (int)t->out.data);

		if (w <= 0) {
			int e = SSL_get_error(t->ssl, w);
			char why[120];

			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
				break;
			snprintf(why, sizeof(why), "TLS write failed (%d, %s)", e,
				 ERR_reason_error_string(ERR_peek_last_error()) ?: "-");
			ERR_clear_error();
			tun_close(t, HBO_F_RESET, why);
			return;
		}
		buf_consume(&t->out, (size_t)w);
	}
	if (!t->out.data && !nghttp2_session_want_read(t->sess) &&
	    !nghttp2_session_want_write(t->sess)) {
		tun_close(t, HBO_F_RESET, t->n_attached ? "session ended" : NULL);	/* GOAWAY done */
		return;
	}
	tun_set_mask(t, EV_READ | (t->out.data ? EV_WRITE : 0));
}

/* O6: no stream for idle_ms (or evicted for a new tunnel): GOAWAY (best
 * effort, one write), then close. */
static void tun_idle_close(struct hbo_tun *t)
{
	const uint8_t *p;
	ssize_t n;

	t->cl->st.idle_closed++;
	nghttp2_session_terminate_session(t->sess, NGHTTP2_NO_ERROR);
	while ((n = nghttp2_session_mem_send(t->sess, &p)) > 0)
		buf_append(&t->out, p, (size_t)n);
	if (t->out.data)
		SSL_write(t->ssl, buf_head(&t->out), (int)t->out.data);
	SSL_shutdown(t->ssl);	/* close_notify: the server sees a clean end */
	ERR_clear_error();
	tun_close(t, HBO_F_RESET, NULL);
}

static void idle_timeout(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct hbo_tun *t = arg;

	t->idle_timer = 0;
	tun_idle_close(t);
}

static void idle_arm(struct hbo_tun *t)
{
	if (t->idle_timer)
		ev_timer_del(t->cl->o.loop, t->idle_timer);
	t->idle_since = ev_now_ns();
	/* O10: a retired tunnel goes as soon as it is empty (next loop turn) */
	t->idle_timer = ev_timer_add(t->cl->o.loop, t->idle_since +
				     (t->retired ? 0 : t->cl->idle_ms * 1000000ULL), idle_timeout, t);
}

static void hs_timeout(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct hbo_tun *t = arg;
	char why[80];

	t->hs_timer = 0;
	snprintf(why, sizeof(why), "no handshake within %d ms", t->cl->hs_ms);
	tun_close(t, t->state == T_CONNECTING ? HBO_F_CONNECT_REFUSED : HBO_F_TLS_REFUSED, why);
}

static int tun_h2_start(struct hbo_tun *t)
{
	static const nghttp2_settings_entry set[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, HB_HIGH },	/* O3 */
	};
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	const unsigned char *alpn;
	unsigned int alen;
	char peer[600];
	struct hbo_stream *s, *sn;
	int r;

	SSL_get0_alpn_selected(t->ssl, &alpn, &alen);
	if (alen != 2 || memcmp(alpn, "h2", 2) || id_tls_peer(t->ssl, peer, sizeof(peer)) ||
	    strcmp(peer, t->want))	/* (verify_cb checked it already: O1) */
		return -EPROTO;
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_option_new(&opt);
	nghttp2_option_set_no_auto_window_update(opt, 1);	/* O3 */
	r = nghttp2_session_client_new2(&t->sess, cb, t, opt);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (r)
		return -ENOMEM;
	nghttp2_submit_settings(t->sess, NGHTTP2_FLAG_NONE, set, 2);
	nghttp2_session_set_local_window_size(t->sess, NGHTTP2_FLAG_NONE, 0, HB_CONN_WINDOW);
	t->state = T_READY;
	ev_timer_del(t->cl->o.loop, t->hs_timer);	/* O5: in time */
	t->hs_timer = 0;
	for (s = t->cl->streams; s; s = sn) {
		sn = s->next;
		if (s->t == t && s->state == S_WAIT)
			stream_submit(s);
	}
	if (!t->n_attached)
		idle_arm(t);
	return 0;
}

static void tun_io(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct hbo_tun *t = arg;
	uint8_t in[16384];
	char why[300];

	if (t->state == T_CONNECTING) {
		int r = net_connect_result(fd);

		if (r) {
			tun_close(t, HBO_F_CONNECT_REFUSED, strerror(-r));
			return;
		}
		t->state = T_HANDSHAKE;
	}
	if (t->state == T_HANDSHAKE) {
		int r = SSL_do_handshake(t->ssl);

		if (r != 1) {
			int e = SSL_get_error(t->ssl, r);

			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				tun_set_mask(t, e == SSL_ERROR_WANT_WRITE ? EV_READ | EV_WRITE : EV_READ);
				return;
			}
			id_tls_reason(t->ssl, why, sizeof(why));	/* I9 */
			ERR_clear_error();
			tun_close(t, HBO_F_TLS_REFUSED, why);
			return;
		}
		t->in_ng = true;
		r = tun_h2_start(t);
		t->in_ng = false;
		if (r) {
			tun_close(t, HBO_F_TLS_REFUSED, "no h2 or not the expected identity");
			return;
		}
	}
	for (;;) {
		int n = SSL_read(t->ssl, in, sizeof(in));
		ssize_t used;

		if (n <= 0) {
			int e = SSL_get_error(t->ssl, n);

			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				break;
			if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !ERR_peek_error()))
				snprintf(why, sizeof(why), "closed by the destination node");
			else
				snprintf(why, sizeof(why), "TLS read failed (%d, %s)", e,
					 ERR_reason_error_string(ERR_peek_last_error()) ?: "-");
			ERR_clear_error();
			tun_close(t, HBO_F_RESET, t->n_attached ? why : NULL);
			return;
		}
		t->in_ng = true;
		used = nghttp2_session_mem_recv(t->sess, in, (size_t)n);
		t->in_ng = false;
		if (used < 0) {
			tun_close(t, HBO_F_RESET, nghttp2_strerror((int)used));
			return;
		}
	}
	tun_flush(t);
}

/* The only end of a tunnel: streams before any answer move once to another
 * tunnel (if it had become READY: a refusal is the key's, not the
 * tunnel's), others fail with f; streams in DRAIN stay to write the rest
 * (orphans). why: the one log line (O9), NULL for none. */
static void tun_close(struct hbo_tun *t, enum hbo_fail f, const char *why)
{
	struct hbo_client *cl = t->cl;
	bool was_ready = t->state >= T_READY;
	struct hbo_stream *s, *sn;
	uint32_t n = t->n_attached;

	if (was_ready && !t->heard && f == HBO_F_RESET && why) {
		/* TLS 1.3: the client finishes first; the server's refusal of our
		 * certificate (an alert) comes after, before its SETTINGS */
		f = HBO_F_TLS_REFUSED;
		was_ready = false;
	}

	if (t->prev)
		t->prev->next = t->next;
	else
		cl->tuns = t->next;
	if (t->next)
		t->next->prev = t->prev;
	if (t->hs_timer)
		ev_timer_del(cl->o.loop, t->hs_timer);
	if (t->idle_timer)
		ev_timer_del(cl->o.loop, t->idle_timer);
	t->hs_timer = t->idle_timer = 0;
	if (why)
		zh_info("hbone-out: tunnel %s/%s -> %s.%s at %s: %s: %s (%u client connection(s))",
			t->k.src_ns, t->k.src_pod, t->k.dst_pod, t->k.dst_ns, t->where,
			fail_name[f], why, n);
	ev_del(cl->o.loop, t->fd);
	close(t->fd);
	t->fd = -1;	/* tun_detach arms no idle timer now */
	for (s = cl->streams; s; s = sn) {
		sn = s->next;
		if (s->t != t)
			continue;
		s->h2_open = false;	/* the session goes: no RST to send */
		if (s->state == S_DRAIN) {
			tun_detach(s);	/* orphan: writes the rest, no window to give */
			continue;
		}
		if (was_ready && s->state != S_RELAY && !s->retried && !cl->closing) {
			stream_requeue(s);	/* (frees no other stream) */
			continue;
		}
		stream_fail(s, s->state == S_RELAY ? HBO_F_RESET : f, NULL);
	}
	nghttp2_session_del(t->sess);	/* calls no callback */
	SSL_free(t->ssl);
	buf_free(&t->out);
	ctx_put(cl, t->cx);
	cl->st.tunnels_open--;
	free(t);
}

/* O6: the longest-idle READY tunnel without a stream goes; false if none. */
static bool tun_evict(struct hbo_client *cl)
{
	struct hbo_tun *t, *old = NULL;

	for (t = cl->tuns; t; t = t->next)
		if (t->state >= T_READY && !t->n_attached && !t->in_ng &&
		    (!old || t->idle_since < old->idle_since))
			old = t;
	if (old)
		tun_idle_close(old);
	return old != NULL;
}

/* A new non-blocking TCP connect from k->bind_ip (0: any). fd or -errno. */
static int tun_connect(const struct hbo_key *k)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = k->bind_ip };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr.s_addr = k->node_ip,
				   .sin_port = htons(k->node_port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1, r;

	if (fd < 0)
		return -errno;
	if (k->bind_ip) {
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&src, sizeof(src)))
			goto fail;
	}
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) && errno != EINPROGRESS)
		goto fail;
	net_set_nodelay(fd);
	return fd;
fail:
	r = -errno;
	close(fd);
	return r;
}

static struct hbo_tun *tun_open(struct hbo_client *cl, const struct hbo_key *k,
				struct hbo_ctx *cx, enum hbo_fail *f, char *why, size_t wlen)
{
	char sni[400];
	struct hbo_tun *t;
	int fd = tun_connect(k);

	if (fd < 0) {
		*f = HBO_F_CONNECT_REFUSED;
		snprintf(why, wlen, "connect: %s", strerror(-fd));
		return NULL;
	}
	t = zh_calloc(1, sizeof(*t));
	t->cl = cl;
	t->k = *k;
	t->cx = cx;
	t->gen = cx->gen;
	t->fd = fd;
	ip_port(t->where, sizeof(t->where), k->node_ip, k->node_port);
	snprintf(t->want, sizeof(t->want), "spiffe://%s/ns/%s/sa/%s", cx->td, k->dst_ns, k->dst_sa);
	snprintf(sni, sizeof(sni), "%s.%s", k->dst_pod, k->dst_ns);
	buf_init(&t->out, 0);
	t->ssl = SSL_new(cx->ctx);
	if (!t->ssl || !SSL_set_fd(t->ssl, fd) || !SSL_set_tlsext_host_name(t->ssl, sni) ||
	    id_tls_expect(t->ssl, t->want)) {	/* O1 */
		SSL_free(t->ssl);
		close(fd);
		free(t);
		*f = HBO_F_NO_SOURCE_SVID;
		snprintf(why, wlen, "TLS set-up failed");
		return NULL;
	}
	SSL_set_connect_state(t->ssl);
	SSL_set_mode(t->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	t->state = T_CONNECTING;
	t->mask = -1;
	t->next = cl->tuns;
	if (cl->tuns)
		cl->tuns->prev = t;
	cl->tuns = t;
	cl->st.tunnels++;
	cl->st.tunnels_open++;
	t->hs_timer = ev_timer_add(cl->o.loop, ev_now_ns() + cl->hs_ms * 1000000ULL, hs_timeout, t);
	tun_set_mask(t, EV_WRITE);
	return t;
}

static uint32_t tun_limit(const struct hbo_tun *t)	/* O7 */
{
	uint32_t peer = t->sess ? nghttp2_session_get_remote_settings(
					  t->sess, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS) : HBO_MAX_STREAMS;

	return peer < HBO_MAX_STREAMS ? peer : HBO_MAX_STREAMS;
}

/* A tunnel for k with room for one more stream: reused, else opened. */
static struct hbo_tun *tun_for(struct hbo_client *cl, const struct hbo_key *k,
			       enum hbo_fail *f, char *why, size_t wlen)
{
	struct hbo_ctx *cx;
	struct hbo_tun *t;

	ctx_recheck(cl, k->src_ns, k->src_pod);
	for (t = cl->tuns; t; t = t->next) {
		if (t->state == T_GOAWAY || !key_eq(&t->k, k))
			continue;
		if (t->gen != t->cx->gen) {	/* O10: its SVID was renewed */
			t->retired = true;
			if (t->state == T_READY)
				t->state = T_GOAWAY;
			if (!t->n_attached && t->state >= T_READY && t->fd >= 0)
				idle_arm(t);
			continue;
		}
		if (t->n_busy < tun_limit(t))
			return t;
	}
	if (cl->st.tunnels_open >= (uint64_t)cl->max_tunnels && !tun_evict(cl)) {
		*f = HBO_F_TUNNEL_CAP;
		snprintf(why, wlen, "%d tunnels open (the cap), none idle", cl->max_tunnels);
		return NULL;
	}
	cx = ctx_get(cl, k->src_ns, k->src_pod, why, wlen);
	if (!cx) {
		*f = HBO_F_NO_SOURCE_SVID;
		return NULL;
	}
	t = tun_open(cl, k, cx, f, why, wlen);
	if (!t)
		ctx_put(cl, cx);
	return t;
}

/* ---- the API ---------------------------------------------------------------------------- */

int hbo_client_new(const struct hbo_opts *o, struct hbo_client **out)
{
	struct hbo_client *cl = zh_calloc(1, sizeof(*cl));

	cl->o = *o;
	snprintf(cl->svid_dir, sizeof(cl->svid_dir), "%s", o->svid_dir);
	cl->o.svid_dir = cl->svid_dir;
	cl->hs_ms = o->handshake_ms > 0 ? o->handshake_ms : HB_HANDSHAKE_MS;
	cl->idle_ms = o->idle_ms > 0 ? o->idle_ms : HBO_IDLE_MS;
	cl->max_tunnels = o->max_tunnels > 0 ? o->max_tunnels : HBO_MAX_TUNNELS;
	*out = cl;
	return 0;
}

static int copy(char *dst, size_t len, const char *src)
{
	return src && *src && (size_t)snprintf(dst, len, "%s", src) < len ? 0 : -ENAMETOOLONG;
}

void hbo_refuse(struct hbo_client *cl, int fd, enum hbo_fail f, const char *client,
		const char *dst, const char *why)
{
	cl->st.failed[f]++;
	zh_info("hbone-out: %s -> %s: %s: %s", client, dst, hbo_fail_name(f), why);
	rst_close(fd);
}

int hbo_connect(struct hbo_client *cl, int fd, const struct hbo_target *tg)
{
	struct hbo_stream *s = zh_calloc(1, sizeof(*s));
	struct hbo_key *k = &s->k;
	struct hbo_tun *t;
	enum hbo_fail f;
	char why[300];
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0 && !(fl & O_NONBLOCK))
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	net_set_nodelay(fd);
	s->cl = cl;
	s->fd = fd;
	s->mask = 0;
	buf_init(&s->up, 0);
	buf_init(&s->down, 0);
	ip_port(s->authority, sizeof(s->authority), tg->dst_ip, tg->dst_port);
	ip_port(s->client, sizeof(s->client), tg->client_ip, tg->client_port);
	if (tg->client_ip) {
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &tg->client_ip, a, sizeof(a));
		snprintf(s->fwd, sizeof(s->fwd), "for=%s", a);
	}
	s->next = cl->streams;
	if (cl->streams)
		cl->streams->prev = s;
	cl->streams = s;
	if (copy(k->src_ns, sizeof(k->src_ns), tg->src_ns) ||
	    copy(k->src_pod, sizeof(k->src_pod), tg->src_pod) ||
	    copy(k->dst_ns, sizeof(k->dst_ns), tg->dst_ns) ||
	    copy(k->dst_pod, sizeof(k->dst_pod), tg->dst_pod) ||
	    copy(k->dst_sa, sizeof(k->dst_sa), tg->dst_sa) || !tg->node_ip) {
		stream_fail(s, HBO_F_NO_DESTINATION, "a name is empty or too long, or no node address");
		return -EINVAL;
	}
	k->node_ip = tg->node_ip;
	k->node_port = tg->node_port ? tg->node_port : HB_PORT;
	k->bind_ip = tg->bind_ip;
	t = tun_for(cl, k, &f, why, sizeof(why));
	if (!t) {
		stream_fail(s, f, "%s", why);
		return -ECONNREFUSED;
	}
	stream_attach(s, t);
	tun_flush(t);	/* a READY tunnel: the CONNECT goes now */
	return 0;
}

const struct hbo_stats *hbo_client_stats(const struct hbo_client *cl)
{
	return &cl->st;
}

void hbo_client_close(struct hbo_client *cl)
{
	if (!cl)
		return;
	cl->closing = true;
	while (cl->tuns)
		tun_close(cl->tuns, HBO_F_RESET, NULL);
	while (cl->streams)	/* orphans still writing */
		stream_free(cl->streams, true);
	while (cl->ctxs) {	/* (none: each tunnel put its own) */
		struct hbo_ctx *e = cl->ctxs;

		cl->ctxs = e->next;
		SSL_CTX_free(e->ctx);
		free(e);
	}
	free(cl);
}
