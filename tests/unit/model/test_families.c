/* test_families.c — dual-stack model (src/model/families.c): the Cluster's
 * pod and service CIDRs of each family, and Services' ipFamilyPolicy /
 * ipFamilies / clusterIPs defaulted, validated and allocated as
 * kube-apiserver does on single-stack, dual-stack and IPv6-only clusters. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/model.h"

#define CL "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nmetadata: {name: c}\nspec:\n"
#define DUAL CL "  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n" \
	"  serviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]\n"
#define DUAL6 CL "  podCIDRs: [\"fd00:10:244::/56\", 10.244.0.0/16]\n" \
	"  serviceCIDRs: [\"fd00:10:96::/112\", 10.96.0.0/12]\n"
#define V6ONLY CL "  podCIDRs: [\"fd00:10:244::/56\"]\n  serviceCIDRs: [\"fd00:10:96::/112\"]\n"
#define V4ONLY CL "  podCIDR: 10.244.0.0/16\n"

static char ebuf[512];
static struct md_err err;

/* cluster + services, finished; NULL on error (err set). */
static struct md_state *load2(const char *cluster, const char *svcs)
{
	struct md_state *st = md_state_new();

	memset(&err, 0, sizeof(err));
	if (md_state_add_buf(st, "c.yaml", cluster, strlen(cluster), &err) ||
	    md_state_add_buf(st, "s.yaml", svcs, strlen(svcs), &err) || md_state_finish(st, &err)) {
		md_state_free(st);
		return NULL;
	}
	return st;
}

static char *svc(const char *name, const char *extra)
{
	char *s;

	if (asprintf(&s, "apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec:\n"
		     "  selector: {app: %s}\n%s  ports: [{port: 80}]\n", name, name, extra) < 0)
		abort();
	return s;
}

static const char *ip6(const struct in6_addr *a)
{
	static char b[4][INET6_ADDRSTRLEN];
	static int i;

	i = (i + 1) % 4;
	inet_ntop(AF_INET6, a, b[i], sizeof(b[i]));
	return b[i];
}

static const char *ip4(uint32_t a)
{
	static char b[4][INET_ADDRSTRLEN];
	static int i;

	i = (i + 1) % 4;
	inet_ntop(AF_INET, &a, b[i], sizeof(b[i]));
	return b[i];
}

static bool zero6(const struct in6_addr *a)
{
	static const struct in6_addr z;

	return !memcmp(a, &z, sizeof(z));
}

static bool in6(const struct in6_addr *a, const char *prefix96)
{
	/* the allocated part of a /112 is the last 16 bits */
	struct in6_addr p;
	char buf[64];

	snprintf(buf, sizeof(buf), "%s", prefix96);
	inet_pton(AF_INET6, buf, &p);
	return !memcmp(a, &p, 14);
}

/* families as "IPv4,IPv6" */
static const char *fams(const struct md_service *s)
{
	static char b[32];

	b[0] = 0;
	for (int i = 0; i < s->n_families; i++)
		snprintf(b + strlen(b), sizeof(b) - strlen(b), "%s%s", i ? "," : "",
			 md_family_name(s->families[i]));
	return b;
}

struct fcase {
	const char *name;
	const char *cluster;
	const char *extra;	/* spec lines of the Service */
	const char *policy;	/* want: policy after defaulting */
	const char *families;	/* want: families after defaulting */
	const char *v4;		/* want: the IPv4 ClusterIP, "alloc" or "" (none) */
	const char *v6;		/* want: the IPv6 ClusterIP, "alloc" or "" (none) */
};

static const struct fcase cases[] = {
	/* dual-stack cluster, IPv4 primary */
	{ "default", DUAL, "", "SingleStack", "IPv4", "alloc", "" },
	{ "prefer", DUAL, "  ipFamilyPolicy: PreferDualStack\n", "PreferDualStack", "IPv4,IPv6",
	  "alloc", "alloc" },
	{ "require v6 first", DUAL, "  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [IPv6]\n",
	  "RequireDualStack", "IPv6,IPv4", "alloc", "alloc" },
	{ "single v6", DUAL, "  ipFamilies: [IPv6]\n", "SingleStack", "IPv6", "", "alloc" },
	{ "given v6 infers family", DUAL, "  clusterIP: \"fd00:10:96::99\"\n", "SingleStack", "IPv6",
	  "", "fd00:10:96::99" },
	{ "two given", DUAL, "  ipFamilyPolicy: PreferDualStack\n"
	  "  clusterIPs: [\"fd00:10:96::5\", 10.96.0.5]\n", "PreferDualStack", "IPv6,IPv4",
	  "10.96.0.5", "fd00:10:96::5" },
	{ "given v4 prefer", DUAL, "  clusterIP: 10.96.0.7\n  ipFamilyPolicy: PreferDualStack\n",
	  "PreferDualStack", "IPv4,IPv6", "10.96.0.7", "alloc" },
	{ "families both", DUAL, "  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [IPv4, IPv6]\n",
	  "RequireDualStack", "IPv4,IPv6", "alloc", "alloc" },
	{ "headless selector", DUAL, "  clusterIP: None\n", "SingleStack", "IPv4", "", "" },
	/* dual-stack cluster, IPv6 primary */
	{ "v6 primary default", DUAL6, "", "SingleStack", "IPv6", "", "alloc" },
	{ "v6 primary prefer", DUAL6, "  ipFamilyPolicy: PreferDualStack\n", "PreferDualStack",
	  "IPv6,IPv4", "alloc", "alloc" },
	/* IPv6-only cluster */
	{ "v6only default", V6ONLY, "", "SingleStack", "IPv6", "", "alloc" },
	{ "v6only prefer", V6ONLY, "  ipFamilyPolicy: PreferDualStack\n", "PreferDualStack", "IPv6",
	  "", "alloc" },
	/* IPv4-only cluster: PreferDualStack gets one family */
	{ "v4only prefer", V4ONLY, "  ipFamilyPolicy: PreferDualStack\n", "PreferDualStack", "IPv4",
	  "alloc", "" },
};

static void check(const struct fcase *c)
{
	char *s = svc("web", c->extra);
	struct md_state *st = load2(c->cluster, s);
	const struct md_service *sv;

	if (!ok(st != NULL, "%s: loads", c->name)) {
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
		free(s);
		return;
	}
	sv = md_find_service(st, NULL, "web");
	is_str(md_fam_policy_name(sv->fam_policy), c->policy, "%s: ipFamilyPolicy", c->name);
	is_str(fams(sv), c->families, "%s: ipFamilies", c->name);
	if (!strcmp(c->v4, "alloc"))
		ok(sv->cluster_ip && (ntohl(sv->cluster_ip) & 0xfff00000u) == 0x0a600000u &&
		   (ntohl(sv->cluster_ip) & 0xfffff) >= 16, "%s: IPv4 allocated in 10.96.0.0/12 (%s)",
		   c->name, ip4(sv->cluster_ip));
	else if (!*c->v4)
		ok(!sv->cluster_ip, "%s: no IPv4 ClusterIP (%s)", c->name, ip4(sv->cluster_ip));
	else
		is_str(ip4(sv->cluster_ip), c->v4, "%s: IPv4 ClusterIP", c->name);
	if (!strcmp(c->v6, "alloc"))
		ok(in6(&sv->cluster_ip6, "fd00:10:96::") && sv->cluster_ip6.s6_addr[15] + 256 *
		   sv->cluster_ip6.s6_addr[14] >= 16, "%s: IPv6 allocated in fd00:10:96::/112 (%s)",
		   c->name, ip6(&sv->cluster_ip6));
	else if (!*c->v6)
		ok(zero6(&sv->cluster_ip6), "%s: no IPv6 ClusterIP (%s)", c->name, ip6(&sv->cluster_ip6));
	else
		is_str(ip6(&sv->cluster_ip6), c->v6, "%s: IPv6 ClusterIP", c->name);
	md_state_free(st);
	free(s);
}

struct ecase {
	const char *name;
	const char *cluster;
	const char *svcs;	/* a full document, or NULL: svc("web", extra) */
	const char *extra;
	const char *file;	/* where the error is */
	int line;
	const char *field;
	const char *msg;
};

#define HL "apiVersion: v1\nkind: Service\nmetadata: {name: h}\nspec: {clusterIP: None}\n"

static const struct ecase errs[] = {
	{ "require on v4 cluster", V4ONLY, NULL, "  ipFamilyPolicy: RequireDualStack\n", "s.yaml", 1,
	  "spec.ipFamilyPolicy", "not configured for dual-stack services" },
	{ "require on v6 cluster", V6ONLY, NULL, "  ipFamilyPolicy: RequireDualStack\n", "s.yaml", 1,
	  "spec.ipFamilyPolicy", "not configured for dual-stack services" },
	{ "v4 on v6 cluster", V6ONLY, NULL, "  ipFamilies: [IPv4]\n", "s.yaml", 1,
	  "spec.ipFamilies[0]", "\"IPv4\": not configured on this cluster" },
	{ "given v4 on v6 cluster", V6ONLY, NULL, "  clusterIP: 10.96.0.9\n", "s.yaml", 1,
	  "spec.clusterIPs[0]", "IPv4 is not configured on this cluster" },
	{ "single with two families", DUAL, NULL, "  ipFamilyPolicy: SingleStack\n"
	  "  ipFamilies: [IPv4, IPv6]\n", "s.yaml", 1, "spec.ipFamilyPolicy",
	  "when multiple IP families are specified" },
	{ "v6 outside", DUAL, NULL, "  clusterIP: \"fd00:99::1\"\n", "s.yaml", 1, "spec.clusterIP",
	  "fd00:99::1 is outside the service CIDR fd00:10:96::/112" },
	{ "v6 network", DUAL, NULL, "  clusterIP: \"fd00:10:96::\"\n", "s.yaml", 1, "spec.clusterIP",
	  "is the network address" },
	{ "v6 secondary outside", DUAL, NULL, "  ipFamilyPolicy: PreferDualStack\n"
	  "  clusterIPs: [10.96.0.5, \"fd00:99::1\"]\n", "s.yaml", 1, "spec.clusterIPs[1]",
	  "outside the service CIDR" },
	{ "v6 twice", DUAL, "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n"
	  "  clusterIP: \"fd00:10:96::20\"\n  ports: [{port: 80}]\n---\n"
	  "apiVersion: v1\nkind: Service\nmetadata: {name: b}\nspec:\n"
	  "  clusterIP: \"fd00:10:96::20\"\n  ports: [{port: 80}]\n", NULL, "s.yaml", 8,
	  "spec.clusterIP", "already used by Service default/a" },
	/* the Cluster object */
	{ "families differ", CL "  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n", HL, NULL,
	  "c.yaml", 5, "spec.serviceCIDRs", "must have the families of the pod CIDRs" },
	{ "order differs", CL "  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n"
	  "  serviceCIDRs: [\"fd00:10:96::/112\", 10.96.0.0/12]\n", HL, NULL, "c.yaml", 6,
	  "spec.serviceCIDRs", "in the same order (IPv4, IPv6)" },
	{ "two v6 pod CIDRs", CL "  podCIDRs: [\"fd00:1::/56\", \"fd00:2::/56\"]\n", HL, NULL,
	  "c.yaml", 5, "spec.podCIDRs", "no more than one CIDR for each IP family" },
	{ "podCIDR vs podCIDRs", CL "  podCIDR: 10.1.0.0/16\n  podCIDRs: [10.2.0.0/16]\n", HL, NULL,
	  "c.yaml", 6, "spec.podCIDRs", "first value must match `podCIDR`" },
	{ "v6 service too large", CL "  podCIDRs: [\"fd00:10:244::/56\"]\n"
	  "  serviceCIDRs: [\"fd00:10:96::/96\"]\n", HL, NULL, "c.yaml", 6, "spec.serviceCIDRs[0]",
	  "IPv6 prefix length must be between 108 and 120" },
	{ "v6 host bits", CL "  podCIDRs: [\"fd00:10:244::1/56\"]\n", HL, NULL, "c.yaml", 5,
	  "spec.podCIDRs[0]", "host bits set" },
	{ "v6 overlap", CL "  podCIDRs: [\"fd00:10::/56\"]\n  serviceCIDRs: [\"fd00:10::/112\"]\n",
	  HL, NULL, "c.yaml", 6, "spec.serviceCIDRs[0]", "overlaps podCIDRs[0]" },
	{ "v6 bad", CL "  podCIDRs: [\"fd00:zz::/56\"]\n", HL, NULL, "c.yaml", 5,
	  "spec.podCIDRs[0]", "invalid CIDR" },
};

static void check_err(const struct ecase *c)
{
	char *s = c->svcs ? NULL : svc("web", c->extra);
	struct md_state *st = load2(c->cluster, c->svcs ? c->svcs : s);

	if (!ok(st == NULL, "%s: refused", c->name))
		md_state_free(st);
	is_str(err.file, c->file, "%s: file", c->name);
	is_int(err.line, c->line, "%s: line", c->name);
	is_str(err.field, c->field, "%s: field", c->name);
	if (!ok(strstr(err.msg, c->msg) != NULL, "%s: message", c->name))
		diag("got \"%s\", want \"%s\"", err.msg, c->msg);
	free(s);
}

/* headless without selector: RequireDualStack and both families by
 * default, even on a single-stack cluster (kube-apiserver's special case:
 * no address is allocated) */
static void test_headless(void)
{
	const char *cl[] = { DUAL, V4ONLY };

	for (int i = 0; i < 2; i++) {
		struct md_state *st = load2(cl[i], HL);
		const struct md_service *h;

		if (!ok(st != NULL, "headless selectorless loads (%s)", i ? "IPv4" : "dual")) {
			diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
			continue;
		}
		h = md_find_service(st, NULL, "h");
		is_str(md_fam_policy_name(h->fam_policy), "RequireDualStack", "headless: policy");
		is_str(fams(h), "IPv4,IPv6", "headless: both families");
		ok(!h->cluster_ip && zero6(&h->cluster_ip6), "headless: no address");
		md_state_free(st);
	}
}

/* Allocation: deterministic, order-independent, distinct, and exhaustion
 * of a /120 (256 addresses, 16 reserved: 240 fit). */
static void test_alloc(void)
{
	const char *cl = CL "  podCIDRs: [\"fd00:10:244::/56\"]\n  serviceCIDRs: [\"fd00:10:96::/120\"]\n";
	size_t cap = 241 * 128;
	char *fwd = malloc(cap), *rev = malloc(cap), *one;
	struct md_state *a, *b;
	size_t lf = 0, lr = 0;
	bool same = true, dup = false, low = false;

	fwd[0] = rev[0] = 0;
	for (int i = 0; i < 240; i++) {
		char d[128];

		snprintf(d, sizeof(d), "apiVersion: v1\nkind: Service\nmetadata: {name: s%d}\n"
			 "spec: {ports: [{port: 80}]}\n---\n", i);
		lf += (size_t)snprintf(fwd + lf, cap - lf, "%s", d);
		snprintf(d, sizeof(d), "apiVersion: v1\nkind: Service\nmetadata: {name: s%d}\n"
			 "spec: {ports: [{port: 80}]}\n---\n", 239 - i);
		lr += (size_t)snprintf(rev + lr, cap - lr, "%s", d);
	}
	a = load2(cl, fwd);
	b = load2(cl, rev);
	if (!ok(a && b, "240 Services fit a /120")) {
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
		goto out;
	}
	for (int i = 0; i < a->n_services; i++) {
		const struct md_service *x = &a->services[i];
		const struct md_service *y = md_find_service(b, NULL, x->meta.name);

		same &= !memcmp(&x->cluster_ip6, &y->cluster_ip6, sizeof(x->cluster_ip6));
		low |= x->cluster_ip6.s6_addr[15] < 16;
		for (int j = 0; j < i; j++)
			dup |= !memcmp(&a->services[j].cluster_ip6, &x->cluster_ip6,
				       sizeof(x->cluster_ip6));
	}
	ok(same, "allocation does not depend on input order");
	ok(!low, "no allocated address in the first 16");
	ok(!dup, "all distinct");
	if (asprintf(&one, "%sapiVersion: v1\nkind: Service\nmetadata: {name: last}\n"
		     "spec: {ports: [{port: 80}]}\n", fwd) < 0)
		abort();
	md_state_free(b);
	b = load2(cl, one);
	ok(b == NULL && strstr(err.msg, "no free address left in the service CIDR fd00:10:96::/120"),
	   "the 241st does not fit");
	free(one);
out:
	md_state_free(a);
	md_state_free(b);
	free(fwd);
	free(rev);
}

static void test_cluster(void)
{
	struct md_state *st = load2(DUAL6, HL);
	char b[INET6_ADDRSTRLEN];

	if (!ok(st != NULL, "dual-stack Cluster, IPv6 first, loads"))
		return;
	is_str(md_family_name(st->cluster.primary), "IPv6", "primary family from serviceCIDRs[0]");
	is_str(inet_ntop(AF_INET6, &st->cluster.pod_cidr6, b, sizeof(b)), "fd00:10:244::", "pod CIDR v6");
	is_int(st->cluster.pod_cidr6_len, 56, "pod CIDR v6 length");
	is_str(ip6(&st->cluster.svc_cidr6), "fd00:10:96::", "service CIDR v6");
	is_int(st->cluster.svc_cidr6_len, 112, "service CIDR v6 length");
	is_str(ip4(st->cluster.pod_cidr), "10.244.0.0", "pod CIDR v4 kept");
	is_int(st->cluster.svc_cidr_len, 12, "service CIDR v4 length");
	md_state_free(st);
	st = load2(V6ONLY, HL);
	if (ok(st != NULL, "IPv6-only Cluster loads")) {
		ok(!st->cluster.pod_cidr && !st->cluster.pod_cidr_len && !st->cluster.svc_cidr_len,
		   "no IPv4 CIDRs");
		md_state_free(st);
	}
	st = load2(V4ONLY, HL);
	if (ok(st != NULL, "IPv4 Cluster loads")) {
		ok(!st->cluster.pod_cidr6_len && !st->cluster.svc_cidr6_len &&
		   st->cluster.primary == MD_FAM_V4, "no IPv6 CIDRs, IPv4 primary");
		md_state_free(st);
	}
}

/* A Service file changing only its ipFamilyPolicy is not patchable in
 * place: the families and addresses would change. */
static void test_patchable(void)
{
	const char *v1 = "apiVersion: v1\nkind: Service\nmetadata: {name: w}\n"
			 "spec: {selector: {app: w}, ports: [{port: 80}]}\n";
	const char *v2 = "apiVersion: v1\nkind: Service\nmetadata: {name: w}\n"
			 "spec: {selector: {app: x}, ports: [{port: 80}]}\n";
	const char *v3 = "apiVersion: v1\nkind: Service\nmetadata: {name: w}\nspec: {selector: "
			 "{app: w}, ipFamilyPolicy: PreferDualStack, ports: [{port: 80}]}\n";
	struct md_file *f1, *f2, *f3;
	struct md_state *st = md_state_new();

	if (md_file_parse("w.yaml", v1, strlen(v1), &f1, &err) ||
	    md_file_parse("w.yaml", v2, strlen(v2), &f2, &err) ||
	    md_file_parse("w.yaml", v3, strlen(v3), &f3, &err)) {
		ok(0, "parse: %s", md_err_str(&err, ebuf, sizeof(ebuf)));
		md_state_free(st);
		return;
	}
	md_state_add_parsed(st, f1, &err);
	is_int(md_state_finish(st, &err), 0, "state of one Service");
	is_int(md_svc_patchable(st, f1, f2), 0, "a selector change is patchable");
	is_int(md_svc_patchable(st, f1, f3), -1, "an ipFamilyPolicy change is not");
	md_state_free(st);
	md_file_put(f1);
	md_file_put(f2);
	md_file_put(f3);
}

/* A dual-stack runtime pod: both addresses read; IPv4 stays the endpoint
 * address. */
static void test_pod_ips(void)
{
	const char *pods = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: web}}\n"
			   "spec: {nodeName: node-a, containers: [{name: c}]}\nstatus:\n"
			   "  phase: Running\n  podIP: 10.244.0.5\n"
			   "  podIPs: [{ip: 10.244.0.5}, {ip: \"fd00:10:244::5\"}]\n---\n"
			   "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\n"
			   "spec: {nodeName: node-a, containers: [{name: c}]}\nstatus:\n"
			   "  podIPs: [{ip: \"fd00:10:244::6\"}, {ip: 10.244.0.6}]\n---\n";
	char *all, *s = svc("web", "");
	struct md_state *st;

	if (asprintf(&all, "%s%s", pods, s) < 0)
		abort();
	st = load2(DUAL, all);
	if (ok(st != NULL, "dual-stack pods load")) {
		const struct md_pod *p = md_find_pod(st, NULL, "p"), *q = md_find_pod(st, NULL, "q");
		const struct md_service *w = md_find_service(st, NULL, "web");

		is_str(ip4(p->ip), "10.244.0.5", "pod IPv4");
		is_str(ip6(&p->ip6), "fd00:10:244::5", "pod IPv6");
		is_str(ip4(q->ip), "10.244.0.6", "IPv6-first podIPs: IPv4 found");
		is_str(ip6(&q->ip6), "fd00:10:244::6", "IPv6-first podIPs: IPv6 found");
		ok(w->endpoints[0].n == 1 && w->endpoints[0].v[0].ip == p->ip,
		   "endpoint address is the pod's IPv4");
		md_state_free(st);
	} else {
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
	}
	free(all);
	free(s);
}

/* An IPv6-only cluster's pod (podIP an IPv6, no IPv4) is an endpoint:
 * readiness asks for an address of either family. */
static void test_pod_ip6_only(void)
{
	const char *pods = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: web}}\n"
			   "spec: {nodeName: node-a, containers: [{name: c}]}\nstatus:\n"
			   "  phase: Running\n  podIP: \"fd00:10:244::5\"\n"
			   "  podIPs: [{ip: \"fd00:10:244::5\"}]\n---\n"
			   "apiVersion: v1\nkind: Pod\nmetadata: {name: q, labels: {app: web}}\n"
			   "spec: {nodeName: node-a, containers: [{name: c}]}\nstatus:\n"
			   "  phase: Pending\n  podIP: \"fd00:10:244::6\"\n---\n";
	char *all, *s = svc("web", "");
	struct md_state *st;

	if (asprintf(&all, "%s%s", pods, s) < 0)
		abort();
	st = load2(V6ONLY, all);
	if (ok(st != NULL, "IPv6-only pods load")) {
		const struct md_pod *p = md_find_pod(st, NULL, "p");
		const struct md_service *w = md_find_service(st, NULL, "web");

		ok(p->ip == 0, "an IPv6-only pod has no IPv4");
		ok(w->endpoints[0].n == 1 && w->endpoints[0].v[0].pod == p && w->endpoints[0].v[0].ip == 0,
		   "the Running IPv6-only pod is the Service's one endpoint (ip 0, its address in pod->ip6)");
		md_state_free(st);
	} else {
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
	}
	free(all);
	free(s);
}

int main(void)
{
	test_pod_ips();
	test_pod_ip6_only();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check(&cases[i]);
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		check_err(&errs[i]);
	test_headless();
	test_alloc();
	test_cluster();
	test_patchable();
	return done_testing();
}
