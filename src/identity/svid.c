/* svid.c — X.509-SVIDs for the pods of one node (identity.h I2-I4). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "id_int.h"

/* The active CA, loaded once per call. */
struct signer {
	char td[256];
	char ca_dir[4096];
	EVP_PKEY *key;
	X509 *crt;
	time_t settled;	/* I11: SVIDs of the previous CA are due from then */
};

static void signer_free(struct signer *s)
{
	EVP_PKEY_free(s->key);
	X509_free(s->crt);
}

static int signer_open(struct signer *s, const char *ca_dir, int settle_s, struct id_err *err)
{
	char path[4200];
	struct stat sb;
	int ret;

	memset(s, 0, sizeof(*s));
	snprintf(s->ca_dir, sizeof(s->ca_dir), "%s", ca_dir);
	ret = id_ca_trust_domain(ca_dir, s->td, sizeof(s->td), err);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/ca.key", ca_dir);
	s->key = idx_read_key(path);
	snprintf(path, sizeof(path), "%s/ca.crt", ca_dir);
	s->crt = idx_read_cert(path);
	if (!s->key || !s->crt) {
		signer_free(s);
		return idx_fail(err, -ENOENT, "cannot read the CA in %s", ca_dir);
	}
	s->settled = stat(path, &sb) ? 0 : sb.st_mtime + settle_s;	/* I11 */
	return 0;
}

/* I4: does the SVID at crt (with its key) need (re)issuing for uri? When
 * not, *when gets the time it falls due (half of its lifetime). */
static bool svid_due(const struct signer *s, const char *crt, const char *key, const char *uri,
		     time_t *when)
{
	char have[256], active[4200];
	X509 *x;
	time_t nb, na, now = time(NULL);
	struct tm tm;
	bool due = true;

	if (access(key, R_OK))
		return true;
	x = idx_read_cert(crt);
	if (!x)
		return true;
	idx_uri(x, have, sizeof(have));
	snprintf(active, sizeof(active), "%s/ca.crt", s->ca_dir);
	if (strcmp(have, uri))	/* other identity */
		goto out;
	if (idx_verify(x, active, NULL)) {	/* old CA */
		snprintf(active, sizeof(active), "%s/bundle.pem", s->ca_dir);
		if (now < s->settled && !idx_verify(x, active, NULL)) {
			*when = s->settled;	/* I11: still trusted everywhere */
			due = false;
		}
		goto out;
	}
	if (!ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm))
		goto out;
	nb = timegm(&tm);
	if (!ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm))
		goto out;
	na = timegm(&tm);
	*when = nb + (na - nb) / 2;
	due = now >= *when;	/* half of its lifetime has passed */
out:
	X509_free(x);
	return due;
}

static int svid_paths(char *crt, char *key, size_t len, const char *out_dir,
		      const struct md_pod *p)
{
	if ((size_t)snprintf(crt, len, "%s/%s_%s.crt", out_dir, p->meta.ns, p->meta.name) >= len ||
	    (size_t)snprintf(key, len, "%s/%s_%s.key", out_dir, p->meta.ns, p->meta.name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* 1: issued, 0: kept (not due and not forced), -errno. *due gets the time
 * the SVID on disk falls due next (I4). */
static int svid_issue(const struct signer *s, const struct md_state *st, const struct md_pod *p,
		      const char *out_dir, long ttl_s, bool force, time_t *due,
		      struct id_err *err)
{
	char uri[256], crt[4200], key[4200];
	time_t now = time(NULL);
	EVP_PKEY *k;
	X509 *x = NULL;
	int ret;

	ret = id_pod_spiffe(uri, sizeof(uri), s->td, st, p);
	if (!ret)
		ret = svid_paths(crt, key, sizeof(crt), out_dir, p);
	if (ret)
		return idx_fail(err, ret, "pod %s/%s: no SPIFFE ID", p->meta.ns, p->meta.name);
	if (!force && !svid_due(s, crt, key, uri, due))
		return 0;
	/* idx_cert_new: valid from now - 60 s to now + ttl_s */
	*due = now - 60 + (ttl_s + 60) / 2;
	k = idx_keygen();
	if (k)
		x = idx_cert_new(k, s->crt, s->key, NULL, uri, ttl_s, false);
	if (!x) {
		EVP_PKEY_free(k);
		return idx_fail(err, -EINVAL, "pod %s/%s: cannot make its SVID", p->meta.ns,
				p->meta.name);
	}
	ret = idx_write_pair(key, k, crt, x);	/* I1, I10 */
	X509_free(x);
	EVP_PKEY_free(k);
	if (ret)
		return idx_fail(err, ret, "pod %s/%s: cannot write its SVID in %s: %s",
				p->meta.ns, p->meta.name, out_dir, strerror(-ret));
	return 1;
}

static bool on_node(const struct md_pod *p, const char *node)
{
	return p->spec.node_name && !strcmp(p->spec.node_name, node);
}

/* The trust bundle's copy in out_dir (I5: verifiers on the node read it). */
static int copy_bundle(const char *ca_dir, const char *out_dir, struct id_err *err)
{
	char src[4200], dst[4200];
	X509 *v[2];
	FILE *f;
	int n = 0, ret;

	snprintf(src, sizeof(src), "%s/bundle.pem", ca_dir);
	f = fopen(src, "re");
	if (!f)
		return idx_fail(err, -errno, "cannot read %s", src);
	while (n < 2 && (v[n] = PEM_read_X509(f, NULL, NULL, NULL)))
		n++;
	fclose(f);
	snprintf(dst, sizeof(dst), "%s/bundle.pem", out_dir);
	ret = n ? idx_write_certs(dst, v, n) : -EINVAL;
	for (int i = 0; i < n; i++)
		X509_free(v[i]);
	return ret ? idx_fail(err, ret, "cannot write %s", dst) : 0;
}

/* Remove the SVID files of pods that are no longer on node (or gone). */
static int prune(const char *out_dir, const struct md_state *st, const char *node)
{
	DIR *d = opendir(out_dir);
	struct dirent *e;
	int removed = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char ns[256], name[256], path[4400];
		const char *dot = strrchr(e->d_name, '.'), *us = strchr(e->d_name, '_');
		const struct md_pod *p;

		if (!dot || !us || us > dot || (strcmp(dot, ".crt") && strcmp(dot, ".key")))
			continue;
		snprintf(ns, sizeof(ns), "%.*s", (int)(us - e->d_name), e->d_name);
		snprintf(name, sizeof(name), "%.*s", (int)(dot - us - 1), us + 1);
		p = md_find_pod(st, ns, name);
		if (p && on_node(p, node))
			continue;
		snprintf(path, sizeof(path), "%s/%s", out_dir, e->d_name);
		if (!unlink(path) && !strcmp(dot, ".crt"))
			removed++;
	}
	closedir(d);
	return removed;
}

/* I7: one writer at a time per SVID directory (the agent and `ca issue`
 * may run at once; a key and its certificate come from the same writer).
 * The fd to close, or -errno. */
static int dir_lock(const char *out_dir)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/.lock", out_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX)) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	return fd;
}

int id_issue_node(const char *ca_dir, const struct md_state *st, const char *node,
		  const char *out_dir, long ttl_s, struct id_issue_report *r, struct id_err *err)
{
	return id_issue_node_settle(ca_dir, st, node, out_dir, ttl_s, 0, r, err);
}

int id_issue_node_settle(const char *ca_dir, const struct md_state *st, const char *node,
			 const char *out_dir, long ttl_s, int settle_s,
			 struct id_issue_report *r, struct id_err *err)
{
	struct signer s;
	int ret, lk = -1;

	memset(r, 0, sizeof(*r));
	ret = signer_open(&s, ca_dir, settle_s, err);
	if (ret)
		return ret;
	ret = idx_private_dir(out_dir);
	if (!ret)
		ret = lk = dir_lock(out_dir);
	if (ret < 0) {
		signer_free(&s);
		return idx_fail(err, ret, "cannot make %s: %s", out_dir, strerror(-ret));
	}
	ret = copy_bundle(ca_dir, out_dir, err);	/* I11: trust before use */
	for (int i = 0; i < st->n_pods && ret >= 0; i++) {
		time_t due = 0;

		if (!on_node(&st->pods[i], node))	/* I2 */
			continue;
		ret = svid_issue(&s, st, &st->pods[i], out_dir, ttl_s, false, &due, err);
		if (ret >= 0 && due && (!r->next_due || due < r->next_due))
			r->next_due = due;
		if (ret > 0)
			r->issued++;
		else if (ret == 0)
			r->kept++;
	}
	signer_free(&s);
	if (ret >= 0)
		r->removed = prune(out_dir, st, node);
	close(lk);
	return ret < 0 ? ret : 0;
}

int id_issue_pod(const char *ca_dir, const struct md_state *st, const char *node,
		 const char *ns, const char *name, const char *out_dir, long ttl_s,
		 struct id_err *err)
{
	const struct md_pod *p = md_find_pod(st, ns, name);
	struct signer s;
	int ret, lk = -1;

	if (!p)
		return idx_fail(err, -ENOENT, "no pod %s/%s", ns, name);
	if (!on_node(p, node))	/* I2 */
		return idx_fail(err, -EPERM,
				"pod %s/%s is scheduled on %s, not %s: a node gets certificates "
				"only for its own pods", ns, name,
				p->spec.node_name ? p->spec.node_name : "no node", node);
	ret = signer_open(&s, ca_dir, 0, err);
	if (ret)
		return ret;
	ret = idx_private_dir(out_dir);
	if (!ret)
		ret = lk = dir_lock(out_dir);
	if (ret >= 0) {
		time_t due;

		ret = copy_bundle(ca_dir, out_dir, err);	/* I11 */
		if (!ret)
			ret = svid_issue(&s, st, p, out_dir, ttl_s, true, &due, err);
		close(lk);
	}
	signer_free(&s);
	return ret < 0 ? ret : 0;
}
