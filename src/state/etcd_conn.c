/* etcd_conn.c — connections to etcd, plain or TLS (etcd.h T1-T4): the one
 * place that reads and writes the socket of a request to etcd, and the
 * client's TLS context (OpenSSL). The HTTP layer above (etcd_gw.c) only
 * sees struct eg_conn. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "zerohop/etcd.h"
#include "zerohop/log.h"

struct eg_tls {
	SSL_CTX *ctx;
};

static __thread char last_err[256];	/* T3 */

const char *eg_last_error(void)
{
	return last_err;
}

long long eg_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- the TLS context ---------------------------------------------------- */

static const char *env_opt(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

void eg_tls_opts_env(struct eg_tls_opts *o)
{
	o->cacert = env_opt("ZEROHOP_ETCD_CACERT");
	o->cert = env_opt("ZEROHOP_ETCD_CERT");
	o->key = env_opt("ZEROHOP_ETCD_KEY");
}

void eg_tls_flag(int code, const char *val)
{
	static const char *const var[] = { "ZEROHOP_ETCD_CACERT", "ZEROHOP_ETCD_CERT",
					   "ZEROHOP_ETCD_KEY" };

	if (code >= EG_TLS_FLAG && code < EG_TLS_FLAG + 3)
		setenv(var[code - EG_TLS_FLAG], val, 1);
}

/* OpenSSL's reason for the last failure, or def. */
static const char *ssl_reason(const char *def)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	return r ? r : def;
}

/* The file is there and readable (OpenSSL's own errors do not say which). */
static bool readable(const char *what, const char *path, char *err, size_t el)
{
	FILE *f = fopen(path, "re");

	if (!f) {
		snprintf(err, el, "etcd %s %s: %s", what, path, strerror(errno));
		return false;
	}
	fclose(f);
	return true;
}

struct eg_tls *eg_tls_new(const struct eg_tls_opts *o, char *err, size_t el)
{
	struct eg_tls *t = zh_calloc(1, sizeof(*t));
	const char *key = o->key ? o->key : o->cert;

	ERR_clear_error();
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (!t->ctx) {
		snprintf(err, el, "etcd TLS: %s", ssl_reason("cannot create a context"));
		goto fail;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);	/* T2 */
	/* a peer closing without close_notify reads as EOF: the HTTP framing
	 * (Content-Length, chunks) still finds a cut-short answer */
	SSL_CTX_set_options(t->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
				 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (o->cacert) {
		if (!readable("CA file", o->cacert, err, el))
			goto fail;
		if (SSL_CTX_load_verify_locations(t->ctx, o->cacert, NULL) != 1) {
			snprintf(err, el, "etcd CA file %s: no PEM certificate in it (%s)", o->cacert,
				 ssl_reason("unreadable"));
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		snprintf(err, el, "etcd TLS: the system's CAs: %s", ssl_reason("cannot load"));
		goto fail;
	}
	if (o->key && !o->cert) {
		snprintf(err, el, "etcd client key %s given without its certificate "
			 "(ZEROHOP_ETCD_CERT / --etcd-cert)", o->key);
		goto fail;
	}
	if (o->cert) {
		if (!readable("client certificate", o->cert, err, el) ||
		    !readable("client key", key, err, el))
			goto fail;
		if (SSL_CTX_use_certificate_chain_file(t->ctx, o->cert) != 1) {
			snprintf(err, el, "etcd client certificate %s: no PEM certificate in it (%s)",
				 o->cert, ssl_reason("unreadable"));
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
			if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
				snprintf(err, el, "etcd client key %s does not match the certificate %s",
					 key, o->cert);
			else
				snprintf(err, el, "etcd client key %s: no PEM private key in it (%s)",
					 key, ssl_reason("unreadable"));
			goto fail;
		}
		if (SSL_CTX_check_private_key(t->ctx) != 1) {
			snprintf(err, el, "etcd client key %s does not match the certificate %s",
				 key, o->cert);
			goto fail;
		}
	}
	return t;
fail:
	eg_tls_free(t);
	return NULL;
}

void eg_tls_free(struct eg_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* ---- SIGPIPE ------------------------------------------------------------ */

/* OpenSSL writes the socket with write(), which raises SIGPIPE on a
 * connection the peer closed (the agent does not ignore SIGPIPE): block it
 * around a TLS call and drop one raised meanwhile, on this thread only. */
struct nopipe {
	sigset_t old;
	bool was_pending;
};

static void nopipe_on(struct nopipe *g)
{
	sigset_t s, p;

	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	sigpending(&p);
	g->was_pending = sigismember(&p, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &s, &g->old);
}

static void nopipe_off(struct nopipe *g)
{
	int saved = errno;	/* the TLS call's, for tls_fail */
	sigset_t s, p;

	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	sigpending(&p);
	if (!g->was_pending && sigismember(&p, SIGPIPE)) {
		struct timespec zero = { 0, 0 };

		while (sigtimedwait(&s, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	errno = saved;
}

/* ---- connections -------------------------------------------------------- */

int eg_wait(struct eg_conn *c, long long deadline)
{
	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = c->want ? c->want : POLLIN };
		long long left = deadline - eg_now_ms();
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		return 0;
	}
}

/* A failed TLS call r (SSL_get_error e): T3's reason, and -EPROTO (or the
 * socket's -errno). */
static int tls_fail(struct eg_conn *c, const char *during, int r, int e)
{
	SSL *ssl = c->ssl;
	long v = SSL_get_verify_result(ssl);

	if (v != X509_V_OK) {
		snprintf(last_err, sizeof(last_err), "certificate verify failed: %s",
			 X509_verify_cert_error_string(v));
	} else if (e == SSL_ERROR_SYSCALL && !ERR_peek_error()) {
		int en = errno;

		snprintf(last_err, sizeof(last_err), "%s: %s", during,
			 r == 0 || !en ? "connection closed by the server" : strerror(en));
		if (r < 0 && en)
			return -en;
	} else {
		int why = ERR_GET_REASON(ERR_peek_last_error());
		/* the server refused us for want of a client certificate (Go
		 * answers "bad certificate" to none at all) */
		bool no_cert = !SSL_get_certificate(ssl) &&
			       (why == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
				why == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED);

		snprintf(last_err, sizeof(last_err), "%s: %s%s", during,
			 ssl_reason("TLS error"),
			 no_cert ? " (no client certificate given: ZEROHOP_ETCD_CERT/KEY or"
				   " --etcd-cert/--etcd-key)" : "");
	}
	return -EPROTO;
}

static int tls_handshake(struct eg_conn *c, const struct eg_ep *ep, long long deadline)
{
	struct in6_addr a6;
	SSL *ssl;

	if (!ep->tlsc) {
		snprintf(last_err, sizeof(last_err), "no TLS context for this endpoint");
		return -EINVAL;
	}
	ERR_clear_error();
	ssl = SSL_new(ep->tlsc->ctx);
	if (!ssl || SSL_set_fd(ssl, c->fd) != 1) {
		SSL_free(ssl);
		snprintf(last_err, sizeof(last_err), "TLS: %s", ssl_reason("out of memory"));
		return -ENOMEM;
	}
	c->ssl = ssl;
	/* T2: the name the certificate must carry is the endpoint's own */
	if (inet_pton(AF_INET, ep->host, &a6) == 1 || inet_pton(AF_INET6, ep->host, &a6) == 1) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ep->host);
	} else {
		SSL_set_tlsext_host_name(ssl, ep->host);
		SSL_set1_host(ssl, ep->host);
	}
	for (;;) {
		struct nopipe g;
		int r, e, ret;

		ERR_clear_error();
		nopipe_on(&g);
		r = SSL_connect(ssl);
		e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, r);
		nopipe_off(&g);
		if (r == 1)
			return 0;
		if (e == SSL_ERROR_WANT_READ)
			c->want = POLLIN;
		else if (e == SSL_ERROR_WANT_WRITE)
			c->want = POLLOUT;
		else
			return tls_fail(c, "TLS handshake", r, e);
		ret = eg_wait(c, deadline);
		if (ret) {
			snprintf(last_err, sizeof(last_err), "TLS handshake: %s",
				 ret == -ETIMEDOUT ? "no answer in time" : strerror(-ret));
			return ret;
		}
	}
}

int eg_connect(const struct eg_ep *ep, int timeout_ms, struct eg_conn *c)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	long long deadline = eg_now_ms() + timeout_ms;
	char port[8];
	int ret, one = 1;
	socklen_t sl = sizeof(ret);

	last_err[0] = 0;
	*c = (struct eg_conn){ .fd = -1, .want = POLLIN };
	if (ep->unix_sock) {
		struct sockaddr_un su = { .sun_family = AF_UNIX };

		if (strlen(ep->host) >= sizeof(su.sun_path))
			return -ENAMETOOLONG;
		memcpy(su.sun_path, ep->host, strlen(ep->host));
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0)
			return -errno;
		if (connect(c->fd, (struct sockaddr *)&su, sizeof(su))) {
			ret = -errno;
			eg_close(c);
			return ret;
		}
		fcntl(c->fd, F_SETFL, O_NONBLOCK);
		return 0;
	}
	snprintf(port, sizeof(port), "%d", ep->port);
	if (getaddrinfo(ep->host, port, &hints, &ai))
		return -EHOSTUNREACH;
	c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		ret = -errno;
		freeaddrinfo(ai);
		return ret;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ret = connect(c->fd, ai->ai_addr, ai->ai_addrlen) ? -errno : 0;
	freeaddrinfo(ai);
	if (ret == -EINPROGRESS) {
		c->want = POLLOUT;
		ret = eg_wait(c, deadline);
		c->want = POLLIN;
		if (!ret && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &ret, &sl) == 0)
			ret = -ret;
	}
	if (!ret && ep->tls)
		ret = tls_handshake(c, ep, deadline);
	if (ret)
		eg_close(c);
	return ret;
}

void eg_close(struct eg_conn *c)
{
	/* no close_notify: every request is Connection: close and framed */
	SSL_free(c->ssl);
	c->ssl = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

ssize_t eg_read(struct eg_conn *c, struct buf *b)
{
	ssize_t total = 0;

	if (!c->ssl) {
		ssize_t n = buf_read_fd(b, c->fd, 0);

		if (n == -EAGAIN)
			c->want = POLLIN;
		return n;
	}
	for (;;) {
		size_t room = buf_read_room(b);
		struct nopipe g;
		int r, e;

		ERR_clear_error();
		nopipe_on(&g);
		r = SSL_read(c->ssl, buf_tail(b), room > INT_MAX ? INT_MAX : (int)room);
		e = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
		nopipe_off(&g);
		if (r > 0) {
			b->data += (size_t)r;
			total += r;
			/* drain what OpenSSL holds: poll on fd does not see it */
			if (SSL_has_pending(c->ssl))
				continue;
			return total;
		}
		if (total)
			return total;	/* the error again on the next call */
		if (e == SSL_ERROR_ZERO_RETURN)
			return 0;
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			c->want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
			return -EAGAIN;
		}
		if (e == SSL_ERROR_SYSCALL && !ERR_peek_error() && r == 0)
			return 0;
		return tls_fail(c, "TLS", r, e);
	}
}

ssize_t eg_write(struct eg_conn *c, const void *p, size_t n)
{
	struct nopipe g;
	ssize_t w;
	int e;

	if (!c->ssl) {
		w = send(c->fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->want = POLLOUT;
			return -EAGAIN;
		}
		return w < 0 ? -errno : w;
	}
	ERR_clear_error();
	nopipe_on(&g);
	w = SSL_write(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
	e = w > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, (int)w);
	nopipe_off(&g);
	if (w > 0)
		return w;
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		c->want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return -EAGAIN;
	}
	return tls_fail(c, "TLS", (int)w, e);
}
