/* test_tls.c — TLS contexts with SVIDs for the HBONE tunnel (identity.h I8,
 * I9): a mutual TLS 1.3 handshake with ALPN h2 between two workloads'
 * SVIDs over a socketpair, each side reading the other's SPIFFE ID; and
 * every refusal with its reason: the wrong server identity, no client
 * certificate, a certificate from an unknown CA, an expired certificate. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tap.h"
#include "id_fixture.h"
#include "zerohop/identity.h"
#include "zerohop/state.h"

static char root[] = "/tmp/zh-tls.XXXXXX";
static char ca[ID_FIXTURE_PATH], rogue[ID_FIXTURE_PATH], out[ID_FIXTURE_PATH],
	bad[ID_FIXTURE_PATH], sdir[ID_FIXTURE_PATH];

#define ID_A "spiffe://cluster.local/ns/shop/sa/web"
#define ID_C "spiffe://cluster.local/ns/default/sa/default"

static struct md_state *state(void)
{
	static const char yaml[] =
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: shop}\n"
		"spec: {nodeName: node-a, serviceAccountName: web, containers: [{name: c, command: [sleep]}]}\n"
		"---\napiVersion: v1\nkind: Pod\nmetadata: {name: c}\n"
		"spec: {nodeName: node-a, containers: [{name: c, command: [sleep]}]}\n";

	return id_fixture_state(root, sdir, yaml);
}

struct hs {
	int cli_ret, srv_ret;	/* 1: handshake done, else failed */
	char cli_peer[256], srv_peer[256];
	char cli_why[256], srv_why[256];
	char alpn[8];
	const char *version;
};

/* One handshake between cctx and sctx over a socketpair, pumped in turns
 * (non-blocking). The client also reads once: in TLS 1.3 the server's
 * verdict on the client certificate arrives after the client's Finished. */
static void handshake(SSL_CTX *cctx, SSL_CTX *sctx, const char *expect, struct hs *h)
{
	int sv[2], cr = 0, sr = 0;
	SSL *c, *s;

	memset(h, 0, sizeof(*h));
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	c = SSL_new(cctx);
	s = SSL_new(sctx);
	SSL_set_fd(c, sv[0]);
	SSL_set_fd(s, sv[1]);
	if (expect)
		id_tls_expect(c, expect);
	for (int i = 0; i < 50 && (cr <= 0 || sr <= 0); i++) {
		if (cr <= 0) {
			cr = SSL_connect(c);
			if (cr <= 0 && SSL_get_error(c, cr) != SSL_ERROR_WANT_READ &&
			    SSL_get_error(c, cr) != SSL_ERROR_WANT_WRITE) {
				id_tls_reason(c, h->cli_why, sizeof(h->cli_why));
				ERR_clear_error();
				break;
			}
		}
		if (sr <= 0) {
			sr = SSL_accept(s);
			if (sr <= 0 && SSL_get_error(s, sr) != SSL_ERROR_WANT_READ &&
			    SSL_get_error(s, sr) != SSL_ERROR_WANT_WRITE) {
				id_tls_reason(s, h->srv_why, sizeof(h->srv_why));
				ERR_clear_error();
				break;
			}
		}
	}
	h->cli_ret = cr;
	h->srv_ret = sr;
	if (cr == 1 && sr == 1) {
		const unsigned char *p;
		unsigned int n;

		id_tls_peer(c, h->cli_peer, sizeof(h->cli_peer));
		id_tls_peer(s, h->srv_peer, sizeof(h->srv_peer));
		SSL_get0_alpn_selected(c, &p, &n);
		snprintf(h->alpn, sizeof(h->alpn), "%.*s", (int)n, p);
		h->version = SSL_get_version(c);
	}
	SSL_free(c);
	SSL_free(s);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	struct id_issue_report r;
	struct id_err err = {};
	struct md_state *st;
	SSL_CTX *sc, *cc, *bare, *rc, *ec;
	struct hs h;

	if (id_fixture_dirs(root, ca, rogue, out, bad, sdir))
		return 1;
	st = state();
	if (!st || id_ca_init(ca, NULL, ID_DEFAULT_CA_TTL, &err) ||
	    id_ca_init(rogue, NULL, ID_DEFAULT_CA_TTL, &err) ||
	    id_issue_node(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, &r, &err)) {
		diag("set-up: %s", err.msg);
		return 1;
	}

	sc = id_tls_ctx(out, "default", "c", true, &err);
	ok(sc != NULL, "server context with c's SVID (%s)", err.msg);
	cc = id_tls_ctx(out, "shop", "a", false, &err);
	ok(cc != NULL, "client context with a's SVID (%s)", err.msg);
	ok(id_tls_ctx(out, "shop", "nope", false, &err) == NULL && strstr(err.msg, "no usable SVID"),
	   "no SVID: refused (%s)", err.msg);
	if (!sc || !cc)
		return done_testing();

	handshake(cc, sc, ID_C, &h);
	ok(h.cli_ret == 1 && h.srv_ret == 1, "a -> c: mutual handshake (%s%s)", h.cli_why, h.srv_why);
	is_str(h.version, "TLSv1.3", "TLS 1.3");
	is_str(h.alpn, "h2", "ALPN h2");
	is_str(h.srv_peer, ID_A, "the server sees a's SPIFFE ID");
	is_str(h.cli_peer, ID_C, "the client sees c's");

	handshake(cc, sc, ID_A, &h);
	ok(h.cli_ret != 1, "a expecting " ID_A " from c: refused by the client");
	is_str(h.cli_why, "peer is " ID_C ", not the expected " ID_A, "... with the reason");

	bare = SSL_CTX_new(TLS_client_method());	/* trusts the bundle, no certificate */
	SSL_CTX_load_verify_locations(bare, "/dev/null", NULL);
	{
		char b[400];

		snprintf(b, sizeof(b), "%s/bundle.pem", out);
		SSL_CTX_load_verify_locations(bare, b, NULL);
	}
	handshake(bare, sc, NULL, &h);
	ok(h.srv_ret != 1, "a client without a certificate: refused by the server");
	ok(strstr(h.srv_why, "did not return a certificate") != NULL, "... reason: %s", h.srv_why);

	id_issue_node(rogue, st, "node-a", bad, ID_DEFAULT_SVID_TTL, &r, &err);
	{	/* a rogue SVID, but trusting the real bundle: the server must refuse */
		char cmd[700];

		snprintf(cmd, sizeof(cmd), "cp %s/bundle.pem %s/bundle.pem", out, bad);
		if (system(cmd))
			diag("cp failed");
	}
	rc = id_tls_ctx(bad, "shop", "a", false, &err);
	handshake(rc, sc, ID_C, &h);
	ok(h.srv_ret != 1, "an SVID of an unknown CA (same CA name, other key): refused by the server");
	ok(strstr(h.srv_why, "certificate signature failure") ||
	   strstr(h.srv_why, "unable to get local issuer certificate"), "... reason: %s", h.srv_why);
	SSL_CTX_free(rc);

	memset(&err, 0, sizeof(err));
	id_issue_pod(ca, st, "node-a", "shop", "a", bad, -30, &err);	/* ended 30 s ago */
	ec = id_tls_ctx(bad, "shop", "a", false, &err);
	ok(ec != NULL, "a context with an expired SVID (%s)", err.msg);
	if (ec) {
		handshake(ec, sc, ID_C, &h);
		ok(h.srv_ret != 1, "an expired client certificate: refused by the server");
		ok(strstr(h.srv_why, "certificate has expired") != NULL, "... reason: %s", h.srv_why);
		SSL_CTX_free(ec);
	}

	SSL_CTX_free(bare);
	SSL_CTX_free(cc);
	SSL_CTX_free(sc);
	md_state_free(st);
	id_fixture_rm(root);
	return done_testing();
}
