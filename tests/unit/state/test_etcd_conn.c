/* test_etcd_conn.c — etcd.h's connections over TLS (etcd_conn.c, T1-T4)
 * against an OpenSSL server of the test's own on loopback (a thread, an
 * ephemeral port), certificates made here in memory: a call through TLS,
 * eg_read returning every decrypted byte (nothing left inside OpenSSL
 * where poll cannot see it: the watch loop's assumption), the server's
 * name and CA checked, a client certificate sent when the server asks, and
 * a write to a peer that closed not killing the process with SIGPIPE.
 * The real etcd over TLS is tests/e2e/95-etcd-tls.t. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tap.h"
#include "zerohop/etcd.h"

static char dir[] = "/tmp/zh-test-etcd-conn.XXXXXX";
static char ca_pem[300], other_pem[300], srv_crt[300], srv_key[300];

static void add_ext(X509 *x, X509 *issuer, int nid, const char *v)
{
	X509V3_CTX c;
	X509_EXTENSION *e;

	X509V3_set_ctx(&c, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &c, nid, v);
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
}

/* A certificate for key k: a CA when issuer is NULL (self-signed). */
static X509 *mkcert(EVP_PKEY *k, X509 *issuer, EVP_PKEY *ik, const char *cn, const char *san)
{
	X509 *x = X509_new();

	X509_set_version(x, X509_VERSION_3);
	ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(random() & 0xffffff) + 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(issuer ? issuer : x));
	add_ext(x, issuer ? issuer : x, NID_basic_constraints, issuer ? "CA:FALSE" : "critical,CA:TRUE");
	if (san)
		add_ext(x, issuer, NID_subject_alt_name, san);
	X509_sign(x, ik ? ik : k, EVP_sha256());
	return x;
}

static void write_pem(const char *path, X509 *x, EVP_PKEY *k)
{
	FILE *f = fopen(path, "w");

	if (x)
		PEM_write_X509(f, x);
	if (k)
		PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
	fclose(f);
}

/* ---- the server ---------------------------------------------------------- */

enum mode { M_ANSWER, M_RECORDS, M_CLOSE, M_KEEP };
struct srv {
	int lfd, port;
	SSL_CTX *ctx;
	enum mode mode;
	bool want_cert;		/* ask for (and require) a client certificate */
	bool got_cert;
	int accepts, requests;	/* M_KEEP */
	pthread_t th;
};

/* M_KEEP: answer 3 requests on the first connection (keep-alive), then
 * close it; 1 on a second one. */
static void *serve_keep(void *arg)
{
	static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";
	struct srv *s = arg;

	for (int conn = 0; conn < 2; conn++) {
		int fd = accept(s->lfd, NULL, NULL);
		SSL *ssl = SSL_new(s->ctx);

		s->accepts++;
		SSL_set_fd(ssl, fd);
		for (int q = 0; SSL_accept(ssl) == 1 && q < (conn ? 1 : 3); q++) {
			char req[4096];
			int n = 0, r;

			req[0] = 0;
			while (!strstr(req, "\r\n\r\n{}") &&
			       (r = SSL_read(ssl, req + n, sizeof(req) - 1 - n)) > 0) {
				n += r;
				req[n] = 0;
			}
			if (!strstr(req, "Connection: keep-alive"))
				break;
			s->requests++;
			SSL_write(ssl, a, sizeof(a) - 1);
		}
		SSL_shutdown(ssl);
		SSL_free(ssl);
		close(fd);
	}
	return NULL;
}

static void *serve(void *arg)
{
	struct srv *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	SSL *ssl = SSL_new(s->ctx);
	char req[4096];
	int n = 0, r;

	SSL_set_fd(ssl, fd);
	if (s->want_cert)
		SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	if (SSL_accept(ssl) != 1) {
		/* the alert is sent: close without a reset (unread data would
		 * make it one), as etcd does, so the client reads the alert */
		struct timeval tv = { .tv_sec = 1 };

		shutdown(fd, SHUT_WR);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		while (read(fd, req, sizeof(req)) > 0)
			;
		goto out;
	}
	s->got_cert = SSL_get0_peer_certificate(ssl) != NULL;
	if (s->mode == M_CLOSE) {	/* handshake, then gone without a word */
		shutdown(fd, SHUT_RDWR);
		goto out;
	}
	while (n < (int)sizeof(req) - 1 && (r = SSL_read(ssl, req + n, sizeof(req) - 1 - n)) > 0) {
		n += r;
		req[n] = 0;
		if (strstr(req, "\r\n\r\n{}"))
			break;
	}
	if (s->mode == M_ANSWER) {
		static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";

		SSL_write(ssl, a, sizeof(a) - 1);
	} else {	/* one 16 KiB record, a pause, then the rest */
		static char big[16384];
		static const char h[] = "HTTP/1.1 200 OK\r\nContent-Length: 32768\r\n\r\n";

		memset(big, 'x', sizeof(big));
		SSL_write(ssl, h, sizeof(h) - 1);
		usleep(100 * 1000);
		SSL_write(ssl, big, sizeof(big));
		usleep(300 * 1000);
		SSL_write(ssl, big, sizeof(big));
	}
	SSL_shutdown(ssl);
out:
	SSL_free(ssl);
	close(fd);
	return NULL;
}

static void srv_start(struct srv *s, enum mode m, bool want_cert)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	s->mode = m;
	s->want_cert = want_cert;
	s->got_cert = false;
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bind(s->lfd, (struct sockaddr *)&a, sizeof(a));
	listen(s->lfd, 4);
	getsockname(s->lfd, (struct sockaddr *)&a, &al);
	s->port = ntohs(a.sin_port);
	s->accepts = s->requests = 0;
	pthread_create(&s->th, NULL, m == M_KEEP ? serve_keep : serve, s);
}

static void srv_stop(struct srv *s)
{
	pthread_join(s->th, NULL);
	close(s->lfd);
}

static void ep_set(struct eg_ep *e, const char *host, int port, const struct eg_tls *t)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->host, sizeof(e->host), "%s", host);
	e->port = port;
	e->tls = true;
	e->tlsc = t;
}

int main(void)
{
	EVP_PKEY *cak = EVP_EC_gen("P-256"), *ok_ = EVP_EC_gen("P-256"), *sk = EVP_EC_gen("P-256");
	X509 *ca, *other, *sc;
	struct eg_tls_opts o = { 0 };
	struct eg_tls *t, *t_other, *t_cert;
	struct srv s = { 0 };
	struct eg_ep ep;
	struct eg_conn c;
	struct buf b;
	char err[300];
	int status = 0, ret;

	if (!mkdtemp(dir))
		return 1;
	ca = mkcert(cak, NULL, NULL, "test CA", NULL);
	other = mkcert(ok_, NULL, NULL, "other CA", NULL);
	sc = mkcert(sk, ca, cak, "etcd", "IP:127.0.0.1");
	snprintf(ca_pem, sizeof(ca_pem), "%s/ca.pem", dir);
	snprintf(other_pem, sizeof(other_pem), "%s/other.pem", dir);
	snprintf(srv_crt, sizeof(srv_crt), "%s/srv.crt", dir);
	snprintf(srv_key, sizeof(srv_key), "%s/srv.key", dir);
	write_pem(ca_pem, ca, NULL);
	write_pem(other_pem, other, NULL);
	write_pem(srv_crt, sc, NULL);
	write_pem(srv_key, NULL, sk);

	s.ctx = SSL_CTX_new(TLS_server_method());
	SSL_CTX_use_certificate(s.ctx, sc);
	SSL_CTX_use_PrivateKey(s.ctx, sk);
	SSL_CTX_load_verify_locations(s.ctx, ca_pem, NULL);	/* client certificates */

	o.cacert = ca_pem;
	t = eg_tls_new(&o, err, sizeof(err));
	ok(t != NULL, "a context with the CA");
	o.cacert = other_pem;
	t_other = eg_tls_new(&o, err, sizeof(err));
	o = (struct eg_tls_opts){ .cacert = ca_pem, .cert = srv_crt, .key = srv_key };
	t_cert = eg_tls_new(&o, err, sizeof(err));
	ok(t_other && t_cert, "a context with another CA, one with a client certificate");
	o = (struct eg_tls_opts){ .cacert = ca_pem, .cert = srv_crt, .key = ca_pem };
	ok(!eg_tls_new(&o, err, sizeof(err)) && strstr(err, "client key") &&
	   strstr(err, "no PEM private key"),
	   "a key file without a key is refused naming it: %s", err);

	/* a call over TLS */
	srv_start(&s, M_ANSWER, false);
	ep_set(&ep, "127.0.0.1", s.port, t);
	buf_init(&b, 0);
	ret = eg_call(&ep, "/v3/maintenance/status", "{}", 3000, &status, &b);
	ok(!ret && status == 200 && b.data == 11 && !memcmp(buf_head(&b), "{\"ok\":true}", 11),
	   "eg_call over TLS: %d, HTTP %d, %zu bytes", ret, status, b.data);
	buf_free(&b);
	srv_stop(&s);

	/* eg_read leaves nothing inside OpenSSL: after a read, a record not
	 * yet sent is the only thing to wait for, and poll sees it */
	srv_start(&s, M_RECORDS, false);
	ep_set(&ep, "127.0.0.1", s.port, t);
	buf_init(&b, 0);
	ret = eg_call_send(&ep, "/x", "{}", 3000, &c);
	ok(!ret, "connected and sent");
	{
		struct pollfd p = { .fd = c.fd, .events = POLLIN };
		long long end = eg_now_ms() + 3000;
		size_t got = 0;
		int reads = 0;
		bool drained = true;

		while (got < 32768 + 40 && eg_now_ms() < end) {
			ssize_t n = eg_read(&c, &b);

			if (n > 0) {
				got += (size_t)n;
				reads++;
				/* what OpenSSL holds would not wake poll */
				drained &= !SSL_has_pending(c.ssl);
			} else if (n == -EAGAIN) {
				poll(&p, 1, 500);
			} else {
				break;
			}
		}
		ok(got >= 32768 && drained,
		   "a 16 KiB record read whole by eg_read, nothing left pending (%zu bytes in %d reads)",
		   got, reads);
	}
	eg_close(&c);
	buf_free(&b);
	srv_stop(&s);

	/* the server's name and CA */
	srv_start(&s, M_ANSWER, false);
	ep_set(&ep, "localhost", s.port, t);
	buf_init(&b, 0);
	ret = eg_call(&ep, "/x", "{}", 3000, &status, &b);
	ok(ret == -EPROTO && strstr(eg_last_error(), "certificate verify failed") &&
	   strstr(eg_last_error(), "mismatch"),
	   "localhost against a certificate for IP 127.0.0.1: %s", eg_last_error());
	buf_free(&b);
	srv_stop(&s);
	srv_start(&s, M_ANSWER, false);
	ep_set(&ep, "127.0.0.1", s.port, t_other);
	buf_init(&b, 0);
	ret = eg_call(&ep, "/x", "{}", 3000, &status, &b);
	/* (OpenSSL's server sends its CA along: "self-signed certificate in
	 * certificate chain"; etcd sends the leaf: "unable to get local
	 * issuer certificate", tests/e2e/95) */
	ok(ret == -EPROTO && strstr(eg_last_error(), "certificate verify failed: "),
	   "another CA: %s", eg_last_error());
	buf_free(&b);
	srv_stop(&s);

	/* client certificates */
	srv_start(&s, M_ANSWER, true);
	ep_set(&ep, "127.0.0.1", s.port, t);
	buf_init(&b, 0);
	ret = eg_call(&ep, "/x", "{}", 3000, &status, &b);
	ok(ret < 0 && strstr(eg_last_error(), "no client certificate given"),
	   "a server that wants a client certificate, none given: %d %s", ret, eg_last_error());
	buf_free(&b);
	srv_stop(&s);
	srv_start(&s, M_ANSWER, true);
	ep_set(&ep, "127.0.0.1", s.port, t_cert);
	buf_init(&b, 0);
	ret = eg_call(&ep, "/x", "{}", 3000, &status, &b);
	srv_stop(&s);
	ok(!ret && status == 200 && s.got_cert, "with the client certificate: %d, server saw it %d",
	   ret, s.got_cert);
	buf_free(&b);

	/* a kept connection: 4 probes, 2 connections (the server closed the
	 * first after 3: replaced, not an error) */
	srv_start(&s, M_KEEP, false);
	ep_set(&ep, "127.0.0.1", s.port, t);
	c = (struct eg_conn){ .fd = -1 };
	{
		int good = 0;

		for (int i = 0; i < 4; i++) {
			buf_init(&b, 0);
			ret = eg_call_keep(&c, &ep, "/v3/maintenance/status", "{}", 3000, &status, &b);
			good += !ret && status == 200 && b.data == 11;
			buf_free(&b);
			if (i == 2)
				usleep(100 * 1000);	/* the server closes meanwhile */
		}
		eg_close(&c);
		srv_stop(&s);
		ok(good == 4 && s.requests == 4 && s.accepts == 2,
		   "eg_call_keep: %d of 4 answered, %d requests on %d connections (want 4 on 2)",
		   good, s.requests, s.accepts);
	}

	/* a peer gone after the handshake: errors, not SIGPIPE (not ignored here) */
	signal(SIGPIPE, SIG_DFL);
	srv_start(&s, M_CLOSE, false);
	ep_set(&ep, "127.0.0.1", s.port, t);
	ret = eg_connect(&ep, 3000, &c);
	srv_stop(&s);
	usleep(50 * 1000);
	{
		static char big[65536];
		ssize_t w = 0;

		for (int i = 0; i < 50 && (w >= 0 || w == -EAGAIN); i++) {
			w = eg_write(&c, big, sizeof(big));
			if (w == -EAGAIN)
				usleep(10 * 1000);
		}
		ok(!ret && w < 0 && w != -EAGAIN, "writing to a closed peer fails (%zd), the process lives", w);
	}
	eg_close(&c);

	eg_tls_free(t);
	eg_tls_free(t_other);
	eg_tls_free(t_cert);
	SSL_CTX_free(s.ctx);
	X509_free(ca);
	X509_free(other);
	X509_free(sc);
	EVP_PKEY_free(cak);
	EVP_PKEY_free(ok_);
	EVP_PKEY_free(sk);
	unlink(ca_pem);
	unlink(other_pem);
	unlink(srv_crt);
	unlink(srv_key);
	rmdir(dir);
	return done_testing();
}
