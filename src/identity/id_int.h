/* id_int.h — what the identity module's files share (not a public API):
 * key generation, certificate building and the file rules of invariant I1
 * (identity.h), on OpenSSL 3. */
#ifndef ZH_ID_INT_H
#define ZH_ID_INT_H

#include <stdbool.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "zerohop/identity.h"

/* printf into err->msg, followed by OpenSSL's first queued error if any. */
int idx_fail(struct id_err *err, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

EVP_PKEY *idx_keygen(void);	/* EC P-256 */

/* A certificate for pub: self-signed when issuer is NULL (then signer is
 * pub's own key), else signed by signer under issuer's name. cn goes into
 * the subject (may be NULL for an SVID), uri into the URI SAN (NULL for a
 * CA). Validity: now - 60 s to now + ttl_s. */
X509 *idx_cert_new(EVP_PKEY *pub, X509 *issuer, EVP_PKEY *signer, const char *cn,
		   const char *uri, long ttl_s, bool ca);

/* I1: path written through zh_write_atomic_mode (fileio.h W5), mode 0600
 * (key) or 0644 exactly. */
int idx_write_key(const char *path, EVP_PKEY *k);
int idx_write_certs(const char *path, X509 *const *certs, int n);
/* I10: an SVID's key and certificate as a pair: both temporaries written
 * and synced first, then renamed back to back (key, then certificate), so
 * the window in which a reader can see a new key with the old certificate
 * is two rename(2)s long, not a disk flush. On failure neither changed. */
int idx_write_pair(const char *key_path, EVP_PKEY *k, const char *crt_path, X509 *x);

X509 *idx_read_cert(const char *path);
EVP_PKEY *idx_read_key(const char *path);

/* leaf against every certificate of the PEM file bundle, at the current
 * time: 0, or -EKEYREJECTED with the reason in err. */
int idx_verify(X509 *leaf, const char *bundle, struct id_err *err);

/* The URI SAN of a certificate into buf ("" when none). */
void idx_uri(X509 *x, char *buf, size_t len);

/* mkdir of a directory with mode 0700 (chmod'ed when it exists). */
int idx_private_dir(const char *dir);

#endif
