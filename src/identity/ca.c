/* ca.c — the cluster CA: init, rotation, trust bundle (identity.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "id_int.h"

#define P(buf, dir, file) snprintf(buf, sizeof(buf), "%s/%s", dir, file)

int id_spiffe(char *buf, size_t len, const char *td, const char *ns, const char *sa)
{
	const char *parts[] = { td, ns, sa };

	for (int i = 0; i < 3; i++)
		if (!parts[i] || !*parts[i] || strchr(parts[i], '/'))
			return -EINVAL;
	if ((size_t)snprintf(buf, len, "spiffe://%s/ns/%s/sa/%s", td, ns, sa) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int id_pod_spiffe(char *buf, size_t len, const char *td, const struct md_state *st,
		  const struct md_pod *p)
{
	return id_spiffe(buf, len, td, p->meta.ns, md_pod_service_account(st, p));
}

int id_ca_trust_domain(const char *ca_dir, char *buf, size_t len, struct id_err *err)
{
	char path[4096];
	FILE *f;

	P(path, ca_dir, "trust-domain");
	f = fopen(path, "re");
	if (!f)
		return idx_fail(err, -errno, "no CA in %s (zerohop ca init)", ca_dir);
	if (!fgets(buf, (int)len, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return buf[0] ? 0 : idx_fail(err, -EINVAL, "%s is empty", path);
}

/* bundle.pem: the active CA, then the previous one when still trusted (I5). */
static int write_bundle(const char *ca_dir, struct id_err *err)
{
	char path[4096];
	X509 *v[2];
	int n = 0, ret;

	P(path, ca_dir, "ca.crt");
	v[n] = idx_read_cert(path);
	if (!v[n])
		return idx_fail(err, -ENOENT, "cannot read %s", path);
	n++;
	P(path, ca_dir, "previous.crt");
	v[n] = idx_read_cert(path);
	if (v[n]) {
		if (X509_cmp_current_time(X509_get0_notAfter(v[n])) > 0)
			n++;
		else
			X509_free(v[n]);	/* expired: nothing it signed verifies anyway */
	}
	P(path, ca_dir, "bundle.pem");
	ret = idx_write_certs(path, v, n);
	for (int i = 0; i < n; i++)
		X509_free(v[i]);
	return ret ? idx_fail(err, ret, "cannot write %s: %s", path, strerror(-ret)) : 0;
}

/* A new CA key and self-signed certificate as ca.key / ca.crt. */
static int new_ca(const char *ca_dir, const char *td, long ttl_s, struct id_err *err)
{
	char path[4096], cn[300];
	EVP_PKEY *k = idx_keygen();
	X509 *x = NULL;
	int ret;

	snprintf(cn, sizeof(cn), "zerohop CA %s", td);
	if (k)
		x = idx_cert_new(k, NULL, k, cn, NULL, ttl_s, true);
	if (!x) {
		ret = idx_fail(err, -EINVAL, "cannot make a CA certificate");
		goto out;
	}
	P(path, ca_dir, "ca.key");
	ret = idx_write_key(path, k);	/* I1 */
	if (!ret) {
		P(path, ca_dir, "ca.crt");
		ret = idx_write_certs(path, &x, 1);
	}
	if (ret)
		idx_fail(err, ret, "cannot write %s: %s", path, strerror(-ret));
out:
	X509_free(x);
	EVP_PKEY_free(k);
	return ret;
}

int id_ca_init(const char *ca_dir, const char *trust_domain, long ttl_s, struct id_err *err)
{
	char path[4096], probe[300];
	FILE *f;
	int ret;

	if (!trust_domain || !*trust_domain)
		trust_domain = ID_DEFAULT_TRUST_DOMAIN;
	if (id_spiffe(probe, sizeof(probe), trust_domain, "ns", "sa"))
		return idx_fail(err, -EINVAL, "trust domain '%s': not a SPIFFE trust domain name",
				trust_domain);
	P(path, ca_dir, "ca.key");
	if (access(path, F_OK) == 0)
		return idx_fail(err, -EEXIST, "a CA already exists in %s (zerohop ca rotate)",
				ca_dir);
	ret = idx_private_dir(ca_dir);
	if (ret)
		return idx_fail(err, ret, "cannot make %s: %s", ca_dir, strerror(-ret));
	P(path, ca_dir, "trust-domain");
	f = fopen(path, "we");
	if (!f)
		return idx_fail(err, -errno, "cannot write %s: %s", path, strerror(errno));
	fprintf(f, "%s\n", trust_domain);
	if (fclose(f))
		return idx_fail(err, -EIO, "cannot write %s", path);
	ret = new_ca(ca_dir, trust_domain, ttl_s, err);
	return ret ? ret : write_bundle(ca_dir, err);
}

int id_ca_rotate(const char *ca_dir, long ttl_s, bool finish, struct id_err *err)
{
	char td[256], from[4096], to[4096];
	int ret = id_ca_trust_domain(ca_dir, td, sizeof(td), err);

	if (ret)
		return ret;
	if (finish) {
		P(from, ca_dir, "previous.crt");
		if (unlink(from) && errno != ENOENT)
			return idx_fail(err, -errno, "cannot remove %s", from);
		return write_bundle(ca_dir, err);
	}
	P(from, ca_dir, "ca.crt");
	P(to, ca_dir, "previous.crt");
	if (access(to, F_OK) == 0)	/* I5: two CAs at most in the bundle */
		return idx_fail(err, -EBUSY, "a rotation is in progress: once every node has "
				"renewed its SVIDs, end it with zerohop ca rotate --finish");
	if (rename(from, to))
		return idx_fail(err, -errno, "cannot move %s: %s", from, strerror(errno));
	/* I5: the old key goes now: nothing is signed by it again */
	P(from, ca_dir, "ca.key");
	unlink(from);
	ret = new_ca(ca_dir, td, ttl_s, err);
	return ret ? ret : write_bundle(ca_dir, err);
}

static long long age_ms(const struct stat *sb)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (now.tv_sec - sb->st_mtim.tv_sec) * 1000LL +
	       (now.tv_nsec - sb->st_mtim.tv_nsec) / 1000000;
}

/* I11: every SVID in dir is of the active CA (ca, a PEM path) and old
 * enough for the proxies to have re-read it. */
static int svids_settled(const char *dir, const char *ca, struct id_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int ret = 0;

	if (!d)
		return 0;	/* a node without pods (yet) */
	while (!ret && (e = readdir(d))) {
		char path[4400];
		const char *dot = strrchr(e->d_name, '.');
		struct stat sb;
		bool active;
		X509 *x;

		if (!dot || strcmp(dot, ".crt") || strstr(e->d_name, ".tmp"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		x = idx_read_cert(path);
		active = x && !idx_verify(x, ca, NULL);
		ERR_clear_error();	/* our reasons, not the parser's leftovers */
		if (!x || stat(path, &sb))
			ret = idx_fail(err, -EBUSY, "%s: unreadable", path);
		else if (!active)
			ret = idx_fail(err, -EBUSY, "%s is still of the previous CA: its node "
				       "renews it %d s after the rotation", path, ID_CA_SETTLE_S);
		else if (age_ms(&sb) < ID_SVID_SETTLE_MS)
			ret = idx_fail(err, -EBUSY, "%s was renewed %lld ms ago: proxies re-read "
				       "it within %d ms", path, age_ms(&sb), ID_SVID_SETTLE_MS);
		X509_free(x);
	}
	closedir(d);
	return ret;
}

int id_ca_finish_ready(const char *ca_dir, const char *const *svid_dirs, int n_dirs,
		       struct id_err *err)
{
	char path[4096];
	struct stat sb;
	long long min_ms = ID_CA_SETTLE_S * 1000LL + ID_SVID_SETTLE_MS;
	int ret = 0;

	ERR_clear_error();
	P(path, ca_dir, "previous.crt");
	if (access(path, F_OK))
		return 0;	/* no rotation in progress: --finish is a no-op */
	P(path, ca_dir, "ca.crt");
	if (stat(path, &sb))
		return idx_fail(err, -ENOENT, "no CA in %s", ca_dir);
	if (age_ms(&sb) < min_ms)
		return idx_fail(err, -EBUSY, "the new CA is %lld ms old: nodes renew their SVIDs "
				"from it %d s after the rotation, proxies re-read them within "
				"%d ms; try again in %lld ms", age_ms(&sb), ID_CA_SETTLE_S,
				ID_SVID_SETTLE_MS, min_ms - age_ms(&sb));
	for (int i = 0; i < n_dirs && !ret; i++)
		ret = svids_settled(svid_dirs[i], path, err);
	return ret;
}

int id_cert_info(const char *ca_dir, const char *crt_path, struct id_cert_info *ci,
		 struct id_err *err)
{
	char bundle[4096];
	X509 *x = idx_read_cert(crt_path);
	const ASN1_INTEGER *sn;
	BIGNUM *bn;
	char *hex;
	struct tm tm;

	memset(ci, 0, sizeof(*ci));
	if (!x)
		return idx_fail(err, -ENOENT, "cannot read a certificate from %s", crt_path);
	idx_uri(x, ci->uri, sizeof(ci->uri));
	X509_NAME_oneline(X509_get_subject_name(x), ci->subject, sizeof(ci->subject));
	sn = X509_get0_serialNumber(x);
	bn = ASN1_INTEGER_to_BN(sn, NULL);
	hex = bn ? BN_bn2hex(bn) : NULL;
	snprintf(ci->serial, sizeof(ci->serial), "%s", hex ? hex : "?");
	OPENSSL_free(hex);
	BN_free(bn);
	if (ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm))
		ci->not_before = timegm(&tm);
	if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm))
		ci->not_after = timegm(&tm);
	ci->is_ca = X509_check_ca(x) > 0;
	P(bundle, ca_dir, "bundle.pem");
	ci->verified = idx_verify(x, bundle, NULL) == 0;
	X509_free(x);
	return 0;
}
