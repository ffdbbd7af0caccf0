/* tls.c — TLS 1.3 contexts that present a workload's SVID and verify the
 * peer's against the trust bundle, for the HBONE tunnel (identity.h I8,
 * I9). OpenSSL 3. The tunnel's I/O (blocking or not) is the caller's. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "id_int.h"

static int ex_expect = -1;	/* SSL ex_data: the expected peer identity */
static int ex_reason = -1;	/* SSL ex_data: a reason set by verify_cb */

static void free_str(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
		     void *argp)
{
	free(ptr);
}

static int ex_init(void)
{
	if (ex_expect < 0)
		ex_expect = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_str);
	if (ex_reason < 0)
		ex_reason = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_str);
	return ex_expect < 0 || ex_reason < 0 ? -ENOMEM : 0;
}

/* I8: chain verified by OpenSSL; then, on the leaf, the identity. */
static int verify_cb(int ok, X509_STORE_CTX *x)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	const char *want = ssl ? SSL_get_ex_data(ssl, ex_expect) : NULL;
	char have[256], *why;

	if (!ok || X509_STORE_CTX_get_error_depth(x) != 0)
		return ok;
	idx_uri(X509_STORE_CTX_get_current_cert(x), have, sizeof(have));
	if (!have[0] && asprintf(&why, "peer certificate has no SPIFFE ID") >= 0)
		goto refuse;
	if (want && strcmp(want, have) &&
	    asprintf(&why, "peer is %s, not the expected %s", have, want) >= 0)
		goto refuse;
	return 1;
refuse:
	SSL_set_ex_data(ssl, ex_reason, why);
	X509_STORE_CTX_set_error(x, X509_V_ERR_APPLICATION_VERIFICATION);
	return 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h2[] = { 2, 'h', '2' };

	(void)ssl;
	(void)arg;
	return SSL_select_next_proto((unsigned char **)out, outlen, h2, sizeof(h2), in, inlen) ==
	       OPENSSL_NPN_NEGOTIATED ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* crt and its key into ctx. I10: a renewal renames the key, then the
 * certificate; a reader between the two renames sees a new key with the
 * old certificate, so a pair that does not match is read again (the
 * window is two rename(2)s, so a few tries; no sleep: the proxy calls
 * this from its event loop). Missing files fail at once. */
static bool load_svid(SSL_CTX *ctx, const char *crt, const char *key)
{
	for (int i = 0; i < ID_SVID_READ_TRIES; i++) {
		if (SSL_CTX_use_certificate_file(ctx, crt, SSL_FILETYPE_PEM) == 1 &&
		    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 &&
		    SSL_CTX_check_private_key(ctx) == 1)
			return true;
		if (access(crt, R_OK) || access(key, R_OK))
			return false;
		ERR_clear_error();
		sched_yield();	/* let a writer between its two renames finish */
	}
	return false;
}

SSL_CTX *id_tls_ctx(const char *svid_dir, const char *ns, const char *name, bool server,
		    struct id_err *err)
{
	static const unsigned char h2[] = { 2, 'h', '2' };
	char crt[600], key[600], bundle[600];
	SSL_CTX *ctx;

	if (ex_init())
		return NULL;
	snprintf(crt, sizeof(crt), "%s/%s_%s.crt", svid_dir, ns, name);
	snprintf(key, sizeof(key), "%s/%s_%s.key", svid_dir, ns, name);
	snprintf(bundle, sizeof(bundle), "%s/bundle.pem", svid_dir);
	ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!ctx) {
		idx_fail(err, -ENOMEM, "TLS context");
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION)) {
		idx_fail(err, -EINVAL, "TLS 1.3 unavailable");
		goto fail;
	}
	if (!load_svid(ctx, crt, key)) {
		/* I9: the path, never the key */
		idx_fail(err, -ENOENT, "no usable SVID for %s/%s in %s", ns, name, svid_dir);
		goto fail;
	}
	if (SSL_CTX_load_verify_locations(ctx, bundle, NULL) != 1) {
		idx_fail(err, -ENOENT, "cannot read the trust bundle %s", bundle);
		goto fail;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_cb);
	SSL_CTX_set_verify_depth(ctx, 2);	/* leaf + CA: SVIDs have no intermediates */
	if (server)
		SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	else if (SSL_CTX_set_alpn_protos(ctx, h2, sizeof(h2))) {
		idx_fail(err, -EINVAL, "ALPN");
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/* SNI "POD.NS" -> that pod's SVID (namespaces have no dot, pod names may). */
static int sni_cb(SSL *ssl, int *alert, void *arg)
{
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	const char *dot = name ? strrchr(name, '.') : NULL;
	char pod[256];
	SSL_CTX *pctx;

	*alert = SSL_AD_UNRECOGNIZED_NAME;
	if (!dot || dot == name || !dot[1] || (size_t)(dot - name) >= sizeof(pod))
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	snprintf(pod, sizeof(pod), "%.*s", (int)(dot - name), name);
	pctx = id_tls_ctx(arg, dot + 1, pod, true, NULL);
	if (!pctx)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	SSL_set_SSL_CTX(ssl, pctx);	/* the SSL takes its own reference */
	SSL_CTX_free(pctx);
	return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *id_tls_ctx_sni(const char *svid_dir, struct id_err *err)
{
	static char dir[512];	/* one node per process */
	SSL_CTX *ctx;

	if (ex_init())
		return NULL;
	snprintf(dir, sizeof(dir), "%s", svid_dir);
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION)) {
		SSL_CTX_free(ctx);
		idx_fail(err, -ENOMEM, "TLS context");
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_cb);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	SSL_CTX_set_tlsext_servername_callback(ctx, sni_cb);
	SSL_CTX_set_tlsext_servername_arg(ctx, dir);
	return ctx;
}

int id_tls_expect(SSL *ssl, const char *spiffe)
{
	char *dup = strdup(spiffe);

	if (!dup || !SSL_set_ex_data(ssl, ex_expect, dup)) {
		free(dup);
		return -ENOMEM;
	}
	return 0;
}

int id_tls_ctx_spiffe(SSL_CTX *ctx, char *buf, size_t len)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);

	buf[0] = 0;
	if (x)
		idx_uri(x, buf, len);
	return buf[0] ? 0 : -ENOKEY;
}

int id_tls_peer(SSL *ssl, char *buf, size_t len)
{
	X509 *x = SSL_get1_peer_certificate(ssl);

	buf[0] = 0;
	if (!x)
		return -ENOKEY;
	idx_uri(x, buf, len);
	X509_free(x);
	return buf[0] ? 0 : -ENOKEY;
}

const char *id_tls_reason(SSL *ssl, char *buf, size_t len)
{
	const char *mine = ex_reason >= 0 ? SSL_get_ex_data(ssl, ex_reason) : NULL;
	long v = SSL_get_verify_result(ssl);
	unsigned long e = ERR_peek_last_error();

	if (mine)
		snprintf(buf, len, "%s", mine);
	else if (v != X509_V_OK)
		snprintf(buf, len, "%s", X509_verify_cert_error_string(v));
	else if (e)
		snprintf(buf, len, "%s", ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "TLS error");
	else
		snprintf(buf, len, "TLS handshake failed");
	return buf;
}
