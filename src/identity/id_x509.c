/* id_x509.c — keys, certificates and their files on OpenSSL 3 (id_int.h).
 * The certificate profile follows the SPIFFE X.509-SVID standard
 * (identity.h invariant I3); files follow invariant I1. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "zerohop/fileio.h"
#include "zerohop/paths.h"
#include "id_int.h"

int idx_fail(struct id_err *err, int ret, const char *fmt, ...)
{
	unsigned long e = ERR_get_error();
	va_list ap;
	int n;

	ERR_clear_error();
	if (!err)
		return ret;
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (e && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, " (%s)",
			 ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "openssl");
	return ret;
}

EVP_PKEY *idx_keygen(void)
{
	return EVP_EC_gen("P-256");
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return -EINVAL;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -EINVAL;
}

/* A random positive 127-bit serial (RFC 5280: at most 20 octets). */
static int set_serial(X509 *x)
{
	BIGNUM *bn = BN_new();
	int ok = bn && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
		 BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));

	BN_free(bn);
	return ok ? 0 : -EINVAL;
}

X509 *idx_cert_new(EVP_PKEY *pub, X509 *issuer, EVP_PKEY *signer, const char *cn,
		   const char *uri, long ttl_s, bool ca)
{
	X509 *x = X509_new();
	X509_NAME *name;
	char san[300];
	int bad = 0;

	if (!x)
		return NULL;
	bad |= !X509_set_version(x, X509_VERSION_3);
	bad |= set_serial(x);
	bad |= !X509_gmtime_adj(X509_getm_notBefore(x), -60);	/* I3: clock skew */
	bad |= !X509_gmtime_adj(X509_getm_notAfter(x), ttl_s);
	bad |= !X509_set_pubkey(x, pub);
	name = X509_get_subject_name(x);
	bad |= !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
					   (const unsigned char *)"zerohop", -1, -1, 0);
	if (cn)
		bad |= !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
						   (const unsigned char *)cn, -1, -1, 0);
	bad |= !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
	if (ca) {
		bad |= add_ext(x, issuer, NID_basic_constraints, "critical,CA:TRUE");
		bad |= add_ext(x, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		bad |= add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE");
		bad |= add_ext(x, issuer, NID_key_usage,
			       "critical,digitalSignature,keyEncipherment");
		bad |= add_ext(x, issuer, NID_ext_key_usage, "serverAuth,clientAuth");
	}
	bad |= add_ext(x, issuer, NID_subject_key_identifier, "hash");
	if (issuer)
		bad |= add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
	if (uri) {
		snprintf(san, sizeof(san), "URI:%s", uri);	/* I3: the only SAN (not critical: the subject is not empty, RFC 5280 4.2.1.6) */
		bad |= add_ext(x, issuer, NID_subject_alt_name, san);
	}
	if (bad || !X509_sign(x, signer, EVP_sha256())) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* I1: the PEM text is built in memory, then written to PATH's temporary
 * (fileio.h W5: exactly `mode` whatever the umask, a temporary per process
 * since the agent and `ca issue` may write the same file, fsync'd); COMMIT
 * renames it into place, else the caller commits it (a key/certificate
 * pair). The buffer may hold a private key: it is wiped before it is
 * freed. */
static int write_file(const char *path, mode_t mode, int (*write_fn)(BIO *, const void *),
		      const void *arg, bool commit)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long len;
	int ret;

	if (!b)
		return -ENOMEM;
	if (!write_fn(b, arg)) {
		ret = -EIO;
	} else {
		len = BIO_get_mem_data(b, &data);
		ret = len < 0 ? -EIO : zh_write_tmp_mode(path, data, (size_t)len, mode, true);
		OPENSSL_cleanse(data, (size_t)(len < 0 ? 0 : len));
	}
	BIO_free(b);
	return ret || !commit ? ret : zh_commit_tmp(path);
}

static int put_key(BIO *b, const void *k)
{
	return PEM_write_bio_PrivateKey(b, (EVP_PKEY *)k, NULL, NULL, 0, NULL, NULL);
}

struct certs {
	X509 *const *v;
	int n;
};

static int put_certs(BIO *b, const void *arg)
{
	const struct certs *c = arg;

	for (int i = 0; i < c->n; i++)
		if (!PEM_write_bio_X509(b, c->v[i]))
			return 0;
	return 1;
}

int idx_write_key(const char *path, EVP_PKEY *k)
{
	return write_file(path, 0600, put_key, k, true);
}

int idx_write_certs(const char *path, X509 *const *certs, int n)
{
	struct certs c = { certs, n };

	return write_file(path, 0644, put_certs, &c, true);
}

int idx_write_pair(const char *key_path, EVP_PKEY *k, const char *crt_path, X509 *x)
{
	struct certs c = { &x, 1 };
	int ret = write_file(key_path, 0600, put_key, k, false);

	if (ret)
		return ret;
	ret = write_file(crt_path, 0644, put_certs, &c, false);
	if (ret) {
		zh_discard_tmp(key_path);
		return ret;
	}
	/* I10: both are on disk; the two renames follow each other, the key
	 * first (a reader that sees the new key with the old certificate
	 * retries, tls.c) */
	ret = zh_commit_tmp(key_path);
	if (ret) {
		zh_discard_tmp(crt_path);
		return ret;
	}
	return zh_commit_tmp(crt_path);
}

X509 *idx_read_cert(const char *path)
{
	FILE *f = fopen(path, "re");
	X509 *x;

	if (!f)
		return NULL;
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	return x;
}

EVP_PKEY *idx_read_key(const char *path)
{
	FILE *f = fopen(path, "re");
	EVP_PKEY *k;

	if (!f)
		return NULL;
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	return k;
}

int idx_verify(X509 *leaf, const char *bundle, struct id_err *err)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	int ret = -EKEYREJECTED;

	if (!store || !ctx || X509_STORE_load_file(store, bundle) != 1) {
		idx_fail(err, -ENOENT, "cannot read the trust bundle %s", bundle);
		ret = -ENOENT;
		goto out;
	}
	if (X509_STORE_CTX_init(ctx, store, leaf, NULL) == 1 && X509_verify_cert(ctx) == 1)
		ret = 0;
	else
		idx_fail(err, ret, "does not verify against %s: %s", bundle,
			 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
out:
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	ERR_clear_error();
	return ret;
}

void idx_uri(X509 *x, char *buf, size_t len)
{
	GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);

	buf[0] = 0;
	for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);

		if (g->type == GEN_URI) {
			snprintf(buf, len, "%.*s", ASN1_STRING_length(g->d.uniformResourceIdentifier),
				 (const char *)ASN1_STRING_get0_data(g->d.uniformResourceIdentifier));
			break;
		}
	}
	GENERAL_NAMES_free(sans);
}

int idx_private_dir(const char *dir)
{
	int ret = zh_mkdir_p(dir, 0700);

	if (ret)
		return ret;
	return chmod(dir, 0700) ? -errno : 0;
}
