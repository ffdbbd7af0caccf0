/* test_identity.c — the cluster CA and X.509-SVIDs (identity.h): SPIFFE IDs,
 * file modes whatever the umask (I1), only a node's own pods (I2), the SVID
 * profile checked through OpenSSL (I3), renewal at half-life, on a changed
 * ServiceAccount and after a CA rotation (I4), the bundle during and after
 * a rotation (I5), expired certificates, pruning of pods that left. The
 * state is a real directory state source with manifests applied to it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "tap.h"
#include "id_fixture.h"
#include "zerohop/identity.h"
#include "zerohop/state.h"

static char root[] = "/tmp/zh-identity.XXXXXX";
static char ca[300], out[300], sdir[300];

static const char *pods_yaml(const char *sa_of_a, bool with_c)
{
	static char y[2048];

	snprintf(y, sizeof(y),
		 "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web, namespace: shop}\n"
		 "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: api, namespace: shop}\n"
		 "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: shop}\n"
		 "spec: {nodeName: node-a, serviceAccountName: %s, containers: [{name: c, command: [sleep]}]}\n"
		 "---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n"
		 "spec: {nodeName: node-b, containers: [{name: c, command: [sleep]}]}\n%s",
		 sa_of_a,
		 with_c ? "---\napiVersion: v1\nkind: Pod\nmetadata: {name: c}\n"
			  "spec: {nodeName: node-a, containers: [{name: c, command: [sleep]}]}\n" : "");
	return y;
}

/* Apply yaml to the state dir and load it. */
static struct md_state *state(const char *yaml)
{
	return id_fixture_state(root, sdir, yaml);
}

static mode_t mode_of(const char *dir, const char *file)
{
	char p[600];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return stat(p, &sb) ? (mode_t)-1 : sb.st_mode & 07777;
}

static int n_certs(const char *path)
{
	FILE *f = fopen(path, "r");
	X509 *x;
	int n = 0;

	if (!f)
		return -1;
	while ((x = PEM_read_X509(f, NULL, NULL, NULL))) {
		X509_free(x);
		n++;
	}
	fclose(f);
	return n;
}

static void spiffe_cases(void)
{
	char b[64];

	is_int(id_spiffe(b, sizeof(b), "cluster.local", "shop", "web"), 0, "id_spiffe");
	is_str(b, "spiffe://cluster.local/ns/shop/sa/web", "spiffe://TD/ns/NS/sa/SA");
	is_int(id_spiffe(b, sizeof(b), "cluster.local", "", "web"), -EINVAL, "empty part: -EINVAL");
	is_int(id_spiffe(b, sizeof(b), "a/b", "shop", "web"), -EINVAL, "'/' in a part: -EINVAL");
	is_int(id_spiffe(b, 16, "cluster.local", "shop", "web"), -ENAMETOOLONG, "too long");
}

int main(void)
{
	struct id_issue_report r;
	struct id_cert_info ci;
	struct id_err err = {};
	struct md_state *st;
	char crt[600], old[600], td[64];

	if (geteuid()) {	/* the state source locks and chmods like a node */
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	spiffe_cases();
	if (!mkdtemp(root))
		return 1;
	snprintf(ca, sizeof(ca), "%s/ca", root);
	snprintf(out, sizeof(out), "%s/node-a-svid", root);
	snprintf(sdir, sizeof(sdir), "%s/state", root);

	/* ---- CA init: I1 whatever the umask ---- */
	umask(0);
	is_int(id_ca_init(ca, "bad/domain", 3600, &err), -EINVAL, "a trust domain with '/': -EINVAL");
	is_int(id_ca_init(ca, NULL, ID_DEFAULT_CA_TTL, &err), 0, "ca init (%s)", err.msg);
	is_int(mode_of(ca, "."), 0700, "CA dir 0700 (umask 0)");
	is_int(mode_of(ca, "ca.key"), 0600, "ca.key 0600 (umask 0)");
	is_int(mode_of(ca, "ca.crt"), 0644, "ca.crt 0644");
	is_int(id_ca_trust_domain(ca, td, sizeof(td), &err), 0, "trust domain readable");
	is_str(td, "cluster.local", "default trust domain");
	is_int(id_ca_init(ca, NULL, 3600, &err), -EEXIST, "init twice: -EEXIST");
	ok(strstr(err.msg, "ca rotate") != NULL, "  and says to rotate instead: %s", err.msg);
	umask(022);

	/* ---- issue for node-a (I2, I3) ---- */
	st = state(pods_yaml("web", true));
	ok(st != NULL, "state with pods shop/a, c on node-a and b on node-b");
	is_int(id_issue_node(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, &r, &err), 0,
	       "issue node-a (%s)", err.msg);
	ok(r.issued == 2 && r.kept == 0, "2 issued (a, c), none kept: %d %d", r.issued, r.kept);
	ok(access(strcat(strcpy(crt, out), "/default_b.crt"), F_OK) != 0,
	   "no SVID for b (on node-b): I2");
	is_int(mode_of(out, "."), 0700, "SVID dir 0700");
	is_int(mode_of(out, "shop_a.key"), 0600, "SVID key 0600");
	snprintf(crt, sizeof(crt), "%s/shop_a.crt", out);
	is_int(id_cert_info(ca, crt, &ci, &err), 0, "read the SVID back");
	is_str(ci.uri, "spiffe://cluster.local/ns/shop/sa/web", "URI SAN: the pod's SPIFFE ID");
	ok(ci.verified && !ci.is_ca, "verifies against the bundle, not a CA");
	ok(ci.not_after - ci.not_before == ID_DEFAULT_SVID_TTL + 60, "24 h (+ 60 s back-dating)");
	{
		X509 *x;
		FILE *f = fopen(crt, "r");
		GENERAL_NAMES *sans;
		uint32_t ku;

		x = PEM_read_X509(f, NULL, NULL, NULL);
		fclose(f);
		sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
		is_int(sans ? sk_GENERAL_NAME_num(sans) : 0, 1, "exactly one SAN");
		GENERAL_NAMES_free(sans);
		ku = X509_get_key_usage(x);
		ok((ku & KU_DIGITAL_SIGNATURE) && !(ku & KU_KEY_CERT_SIGN),
		   "digitalSignature, never keyCertSign (SPIFFE X.509-SVID)");
		ok(X509_get_extended_key_usage(x) & XKU_SSL_CLIENT && X509_get_extended_key_usage(x) & XKU_SSL_SERVER,
		   "client and server auth");
		X509_free(x);
	}
	is_int(id_issue_pod(ca, st, "node-a", "default", "b", out, 3600, &err), -EPERM,
	       "node-a asking for b (on node-b): -EPERM");
	ok(strstr(err.msg, "node-b") != NULL, "  the error names where b is: %s", err.msg);
	is_int(id_issue_pod(ca, st, "node-a", "default", "nope", out, 3600, &err), -ENOENT,
	       "an unknown pod: -ENOENT");

	/* ---- I4: idempotent, renewal at half-life, on a changed identity ---- */
	is_int(id_issue_node(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, &r, &err), 0, "again");
	ok(r.issued == 0 && r.kept == 2, "nothing due: 2 kept (%d issued)", r.issued);
	{	/* I6: the agent sleeps until then (valid from now - 60 s, I3) */
		long half = (ID_DEFAULT_SVID_TTL + 60) / 2 - 60;
		long left = (long)(r.next_due - time(NULL));

		ok(left > half - 30 && left <= half, "next_due: half-life, in %ld s (~%ld)", left, half);
	}
	md_state_free(st);
	st = state(pods_yaml("api", true));
	is_int(id_issue_node(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, &r, &err), 0,
	       "a's ServiceAccount changed to api");
	ok(r.issued == 1 && r.kept == 1, "a renewed, c kept");
	id_cert_info(ca, crt, &ci, &err);
	is_str(ci.uri, "spiffe://cluster.local/ns/shop/sa/api", "a's new SPIFFE ID");
	is_int(id_issue_pod(ca, st, "node-a", "default", "c", out, 2, &err), 0,
	       "c with a 2 s lifetime (back-dated 60 s: past half-life at once)");
	is_int(id_issue_node(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, &r, &err), 0, "again");
	ok(r.issued == 1, "c renewed: past half of its lifetime");

	/* an expired certificate does not verify */
	is_int(id_issue_pod(ca, st, "node-a", "default", "c", out, -30, &err), 0,
	       "c with a lifetime that ended 30 s ago");
	snprintf(old, sizeof(old), "%s/default_c.crt", out);
	id_cert_info(ca, old, &ci, &err);
	ok(!ci.verified, "an expired SVID is not trusted");

	/* ---- I5: rotation ---- */
	snprintf(old, sizeof(old), "%s/old-a.crt", root);
	{
		char cmd[1400];

		snprintf(cmd, sizeof(cmd), "cp %s %s", crt, old);
		ok(system(cmd) == 0, "keep a copy of a's SVID from the first CA");
	}
	is_int(id_ca_rotate(ca, ID_DEFAULT_CA_TTL, false, &err), 0, "rotate (%s)", err.msg);
	snprintf(td, sizeof(td), "%s", "bundle.pem");
	{
		char b[400];

		snprintf(b, sizeof(b), "%s/bundle.pem", ca);
		is_int(n_certs(b), 2, "the bundle holds both CAs");
	}
	is_int(mode_of(ca, "ca.key"), 0600, "new ca.key 0600");
	id_cert_info(ca, old, &ci, &err);
	ok(ci.verified, "an SVID of the old CA still verifies during the rotation");
	is_int(id_ca_rotate(ca, ID_DEFAULT_CA_TTL, false, &err), -EBUSY,
	       "a second rotation before --finish: -EBUSY");
	/* I11: the agent's issue trusts the new CA at once, uses it later */
	{
		char b[400], cmd[1400];
		time_t t0 = time(NULL);

		snprintf(cmd, sizeof(cmd), "cp %s/shop_a.crt %s/settle.crt", out, root);
		system(cmd);
		is_int(id_issue_node_settle(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, 60, &r,
					    &err), 0, "the agent's issue right after the rotation");
		ok(r.issued == 1 && r.kept == 1, "  a's SVID of the previous CA kept for the settle "
		   "time, c's expired one renewed at once (issued %d, kept %d)", r.issued, r.kept);
		ok(r.next_due >= t0 + 59 && r.next_due <= time(NULL) + 61,
		   "  and due when the new CA is 60 s old (in %ld s)", (long)(r.next_due - t0));
		snprintf(b, sizeof(b), "%s/bundle.pem", out);
		is_int(n_certs(b), 2, "  the node's bundle copy already holds the new CA");
		snprintf(cmd, sizeof(cmd), "cmp -s %s/shop_a.crt %s/settle.crt", out, root);
		is_int(system(cmd), 0, "  a's SVID file untouched");
	}
	is_int(id_ca_finish_ready(ca, NULL, 0, &err), -EBUSY,
	       "--finish right after the rotation: refused (%s)", err.msg);
	ok(strstr(err.msg, "try again in") != NULL, "  saying when to try again");
	is_int(id_issue_node(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, &r, &err), 0,
	       "issue after the rotation");
	is_int(r.issued, 1, "a's SVID renewed by the new CA (`ca issue` does not wait)");
	{
		/* I11: age the CA past the settle time, the SVIDs not */
		char path[400];
		const char *dirs[1] = { out };
		struct timespec t[2] = { { time(NULL) - 60, 0 }, { time(NULL) - 60, 0 } };

		snprintf(path, sizeof(path), "%s/ca.crt", ca);
		utimensat(AT_FDCWD, path, t, 0);
		is_int(id_ca_finish_ready(ca, dirs, 1, &err), -EBUSY,
		       "--finish with SVIDs renewed just now: refused (%s)", err.msg);
		snprintf(path, sizeof(path), "%s/shop_a.crt", out);
		utimensat(AT_FDCWD, path, t, 0);
		snprintf(path, sizeof(path), "%s/default_c.crt", out);
		utimensat(AT_FDCWD, path, t, 0);
		is_int(id_ca_finish_ready(ca, dirs, 1, &err), 0,
		       "--finish once every SVID is of the new CA and settled (%s)", err.msg);
		char from[400];

		snprintf(from, sizeof(from), "%s/settle.crt", root);
		snprintf(path, sizeof(path), "%s/default_old.crt", out);
		rename(from, path);
		is_int(id_ca_finish_ready(ca, dirs, 1, &err), -EBUSY,
		       "--finish with an SVID of the previous CA left: refused (%s)", err.msg);
		unlink(path);
	}
	is_int(id_ca_rotate(ca, 0, true, &err), 0, "rotate --finish");
	is_int(id_ca_finish_ready(ca, NULL, 0, &err), 0, "--finish again: nothing to wait for");
	{
		char b[400];

		snprintf(b, sizeof(b), "%s/bundle.pem", ca);
		is_int(n_certs(b), 1, "the bundle holds the new CA only");
		snprintf(b, sizeof(b), "%s/bundle.pem", out);
		is_int(n_certs(b), 2, "the node's copy is refreshed at its next issue, not before");
	}
	id_cert_info(ca, old, &ci, &err);
	ok(!ci.verified, "an SVID of the old CA no longer verifies");
	id_cert_info(ca, crt, &ci, &err);
	ok(ci.verified, "the renewed one does");

	/* ---- pruning: c left node-a ---- */
	md_state_free(st);
	{
		char path[400], *paths[1] = { path };
		struct md_err merr = {};
		struct ss *s;

		snprintf(path, sizeof(path), "%s/c.yaml", root);
		FILE *f = fopen(path, "w");
		fputs("apiVersion: v1\nkind: Pod\nmetadata: {name: c}\n"
		      "spec: {nodeName: node-a, containers: [{name: c, command: [sleep]}]}\n", f);
		fclose(f);
		ss_open(sdir, &s);
		is_int(ss_delete(s, paths, 1, &merr), 0, "delete pod c");
		ss_load(s, &st, &merr);
		ss_close(s);
	}
	is_int(id_issue_node(ca, st, "node-a", out, ID_DEFAULT_SVID_TTL, &r, &err), 0, "issue");
	ok(r.removed == 1 && access(strcat(strcpy(crt, out), "/default_c.key"), F_OK) != 0,
	   "c's certificate and key removed");
	md_state_free(st);
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
		if (system(cmd))
			diag("could not remove %s", root);
	}
	return done_testing();
}
