/* families.c — IPv4/IPv6 address families: the Cluster's pod and service
 * CIDRs of each family, and a Service's ipFamilyPolicy / ipFamilies /
 * clusterIPs, defaulted, validated and allocated as kube-apiserver does
 * (docs/ipv6.md).
 *
 * Invariants (cited as F1..F5):
 * F1. A Cluster configures a family for pods and Services together: the
 *     families of podCIDRs and serviceCIDRs are the same, in the same
 *     order; serviceCIDRs[0] names the primary family.
 * F2. Decoding checks only what needs no cluster (kube-apiserver's
 *     ValidateServiceClusterIPsRelatedFields): spellings, duplicates,
 *     clusterIP == clusterIPs[0], one address per family, an address's
 *     family matching ipFamilies[i]. Everything that depends on the
 *     cluster's families happens in md_finish_families, because the Cluster
 *     object may come from another file.
 * F3. md_finish_families follows kube-apiserver's initIPFamilyFields
 *     step by step (policy default, SingleStack with two values, families
 *     inferred from clusterIPs, the headless-selectorless special case,
 *     RequireDualStack on a single-stack cluster, unconfigured families,
 *     default family, the second family of a dual-stack policy), so a
 *     manifest gets the result and the error the API server gives it.
 * F4. Each family has its own allocator with the rules of the IPv4 one
 *     (docs/model.md "ClusterIPs"): a given address is inside the CIDR, not
 *     its network address (nor, for IPv4, its broadcast address), not used
 *     twice; allocated addresses come from a hash of namespace/name, never
 *     from the first 16 offsets, so they do not depend on input order.
 * F5. A Cluster without an IPv6 CIDR is single-stack IPv4, as a
 *     Kubernetes cluster configured so: no Service can get an IPv6
 *     ClusterIP there (F3 refuses it naming the field). The data plane
 *     serves every IPv6 part a Cluster can ask for (docs/ipv6.md); the lab
 *     refuses, naming the field, what it does not build.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "zerohop/log.h"
#include "md_int.h"

const char *md_family_name(enum md_family f)
{
	return f == MD_FAM_V4 ? "IPv4" : f == MD_FAM_V6 ? "IPv6" : "none";
}

const char *md_fam_policy_name(enum md_fam_policy p)
{
	switch (p) {
	case MD_FP_SINGLE: return "SingleStack";
	case MD_FP_PREFER_DUAL: return "PreferDualStack";
	case MD_FP_REQUIRE_DUAL: return "RequireDualStack";
	default: return "";
	}
}

static enum md_family other_family(enum md_family f)
{
	return f == MD_FAM_V4 ? MD_FAM_V6 : MD_FAM_V4;
}

/* ---- IPv6 values ------------------------------------------------------------- */

int md_parse_ipv6(const char *s, struct in6_addr *ip)
{
	/* only the textual forms inet_pton takes; a v4-mapped address is an
	 * IPv4 address in disguise (Go's net.ParseIP reads it as one) and
	 * would give a Service two IPv4 addresses */
	if (!s || !strchr(s, ':') || inet_pton(AF_INET6, s, ip) != 1 || IN6_IS_ADDR_V4MAPPED(ip))
		return -EINVAL;
	return 0;
}

bool md_in_cidr6(const struct in6_addr *ip, const struct in6_addr *net, int len)
{
	int full = len / 8, rest = len % 8;

	if (memcmp(ip->s6_addr, net->s6_addr, (size_t)full))
		return false;
	return !rest || !((ip->s6_addr[full] ^ net->s6_addr[full]) & (0xff00 >> rest));
}

/* "a::/len"; *canonical: no host bits set. */
static int parse_cidr6_loose(const char *s, struct in6_addr *net, int *len, bool *canonical)
{
	char buf[INET6_ADDRSTRLEN + 1];
	const char *slash = s ? strchr(s, '/') : NULL;
	struct in6_addr m;
	char *end;
	long l;

	if (!slash || (size_t)(slash - s) >= sizeof(buf) || !slash[1])
		return -EINVAL;
	memcpy(buf, s, (size_t)(slash - s));
	buf[slash - s] = 0;
	if (md_parse_ipv6(buf, net))
		return -EINVAL;
	l = strtol(slash + 1, &end, 10);
	if (*end || l < 0 || l > 128 || (slash[1] == '0' && slash[2]) || slash[1] == '+' ||
	    slash[1] == '-')
		return -EINVAL;
	*len = (int)l;
	m = *net;
	for (int i = 0; i < 16; i++) {
		int keep = *len - 8 * i;

		m.s6_addr[i] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff00 >> keep);
	}
	*canonical = !memcmp(&m, net, sizeof(m));
	return 0;
}

int md_parse_cidr6(const char *s, struct in6_addr *net, int *len)
{
	bool canon;

	return parse_cidr6_loose(s, net, len, &canon) || !canon ? -EINVAL : 0;
}

/* ---- Cluster: podCIDR(s), serviceCIDR(s) --------------------------------------- */

/* One parsed CIDR of either family. */
struct cidr {
	enum md_family fam;
	uint32_t v4;
	struct in6_addr v6;
	int len;
	const struct yn *at;
	char field[32];
};

/* Prefix limits: IPv4 as before (a node takes a /24 of the pod CIDR; a
 * /26 service CIDR still leaves 47 addresses). IPv6: the lab gives each
 * node a /64 of the pod CIDR (docs/ipv6.md), and kube-apiserver's bitmap
 * allocator needs a service range of at most 2^20 addresses (/108). */
static const int lim[2][2][2] = {
	/* pod: v4, v6 */ { { 8, 28 }, { 48, 112 } },
	/* svc: v4, v6 */ { { 8, 26 }, { 108, 120 } },
};

static int parse_one(struct dctx *c, const struct yn *v, const char *field, int kind,
		     struct cidr *out)
{
	bool canon;

	snprintf(out->field, sizeof(out->field), "%s", field);
	out->at = v;
	if (v->type != YN_SCALAR)
		return dc_fail(c, v, field, "must be a string");
	if (!md_parse_cidr_loose(v->s, &out->v4, &out->len, &canon)) {
		out->fam = MD_FAM_V4;
	} else if (!parse_cidr6_loose(v->s, &out->v6, &out->len, &canon)) {
		out->fam = MD_FAM_V6;
	} else {
		return dc_fail(c, v, field, "invalid CIDR \"%s\"", v->s);
	}
	if (!canon)
		return dc_fail(c, v, field, "\"%s\" has host bits set (not a network address)", v->s);
	{
		const int *l = lim[kind][out->fam == MD_FAM_V6];

		if (out->len < l[0] || out->len > l[1])
			return dc_fail(c, v, field, "%s prefix length must be between %d and %d",
				       md_family_name(out->fam), l[0], l[1]);
	}
	return 0;
}

/* spec.<one> (a single CIDR) and spec.<many> (a list of at most one per
 * family, the first equal to <one> when both are given, as Node's
 * podCIDR/podCIDRs). *n 0 when neither is given. */
static int parse_cidrs(struct dctx *c, const struct yn *spec, const char *one, const char *many,
		       int kind, struct cidr out[2], int *n)
{
	const struct yn *o = yn_get(spec, one), *m = yn_get(spec, many);
	char f[40];

	*n = 0;
	if (m) {
		if (dc_seq(c, m, many))
			return -EINVAL;
		if (m->n < 1 || m->n > 2)
			return dc_fail(c, m, many, "must hold one or two CIDRs (one per family)");
		for (int i = 0; i < m->n; i++) {
			snprintf(f, sizeof(f), "%s[%d]", many, i);
			if (parse_one(c, m->items[i], f, kind, &out[i]))
				return -EINVAL;
		}
		if (m->n == 2 && out[0].fam == out[1].fam)
			return dc_fail(c, m, many, "may specify no more than one CIDR for each IP family");
		*n = m->n;
	}
	if (o) {
		if (o->type != YN_SCALAR)
			return dc_fail(c, o, one, "must be a string");
		if (m && strcmp(o->s, m->items[0]->s))
			return dc_fail(c, m, many, "first value must match `%s` (\"%s\")", one, o->s);
		if (!m) {
			if (parse_one(c, o, one, kind, &out[0]))
				return -EINVAL;
			*n = 1;
		}
	}
	return 0;
}

static bool cidrs_overlap(const struct cidr *a, const struct cidr *b)
{
	int l = a->len < b->len ? a->len : b->len;

	if (a->fam == MD_FAM_V4)
		return ((ntohl(a->v4) ^ ntohl(b->v4)) & md_mask(l)) == 0;
	return md_in_cidr6(&a->v6, &b->v6, l);
}

int md_decode_cluster_cidrs(struct dctx *c, const struct yn *spec, struct md_cluster *cl)
{
	struct cidr pod[2], svc[2];
	int np, ns;

	if (parse_cidrs(c, spec, "podCIDR", "podCIDRs", 0, pod, &np) ||
	    parse_cidrs(c, spec, "serviceCIDR", "serviceCIDRs", 1, svc, &ns))
		return -EINVAL;
	/* a side not given keeps the IPv4 default */
	if (!np) {
		pod[0] = (struct cidr){ .fam = MD_FAM_V4, .v4 = cl->pod_cidr, .len = cl->pod_cidr_len,
					.at = spec, .field = "podCIDR" };
		np = 1;
	}
	if (!ns) {
		svc[0] = (struct cidr){ .fam = MD_FAM_V4, .v4 = cl->svc_cidr, .len = cl->svc_cidr_len,
					.at = spec, .field = "serviceCIDR" };
		ns = 1;
	}
	/* F1 */
	if (np != ns || pod[0].fam != svc[0].fam || (np == 2 && pod[1].fam != svc[1].fam)) {
		const struct yn *at = yn_get(spec, "serviceCIDRs") ?: yn_get(spec, "serviceCIDR") ?: spec;

		/* absent: name the list, which is what the user has to add */
		return dc_fail(c, at, yn_get(spec, "serviceCIDR") && !yn_get(spec, "serviceCIDRs") ?
			       "serviceCIDR" : "serviceCIDRs",
			       "service CIDRs (%s%s%s) must have the families of the pod CIDRs, in "
			       "the same order (%s%s%s)", md_family_name(svc[0].fam),
			       ns == 2 ? ", " : "", ns == 2 ? md_family_name(svc[1].fam) : "",
			       md_family_name(pod[0].fam), np == 2 ? ", " : "",
			       np == 2 ? md_family_name(pod[1].fam) : "");
	}
	cl->pod_cidr = cl->svc_cidr = 0;
	cl->pod_cidr_len = cl->svc_cidr_len = cl->pod_cidr6_len = cl->svc_cidr6_len = 0;
	for (int i = 0; i < np; i++) {
		if (cidrs_overlap(&pod[i], &svc[i]))
			return dc_fail(c, svc[i].at, svc[i].field, "overlaps %s", pod[i].field);
		if (pod[i].fam == MD_FAM_V4) {
			cl->pod_cidr = pod[i].v4;
			cl->pod_cidr_len = pod[i].len;
			cl->svc_cidr = svc[i].v4;
			cl->svc_cidr_len = svc[i].len;
		} else {
			cl->pod_cidr6 = pod[i].v6;
			cl->pod_cidr6_len = pod[i].len;
			cl->svc_cidr6 = svc[i].v6;
			cl->svc_cidr6_len = svc[i].len;
		}
	}
	cl->primary = svc[0].fam;
	return 0;
}

/* ---- Service: decoding (F2) ------------------------------------------------------ */

int md_decode_svc_families(struct dctx *c, const struct yn *spec, struct md_service *s)
{
	const struct yn *fam = yn_get(spec, "ipFamilies"), *ips = yn_get(spec, "clusterIPs");
	const char *val[2];
	const struct yn *at[2];
	bool from_ip = false;
	char *ip, *policy, f[40];
	int n = 0;

	if (dc_str(c, spec, "clusterIP", false, &ip) ||
	    dc_str(c, spec, "ipFamilyPolicy", false, &policy))
		return -EINVAL;
	if (policy) {
		if (!strcmp(policy, "SingleStack"))
			s->fam_policy = MD_FP_SINGLE;
		else if (!strcmp(policy, "PreferDualStack"))
			s->fam_policy = MD_FP_PREFER_DUAL;
		else if (!strcmp(policy, "RequireDualStack"))
			s->fam_policy = MD_FP_REQUIRE_DUAL;
		else
			return dc_fail(c, yn_get(spec, "ipFamilyPolicy"), "ipFamilyPolicy",
				       "Unsupported value: \"%s\": supported values: \"PreferDualStack\", "
				       "\"RequireDualStack\", \"SingleStack\"", policy);
	}
	if (fam) {
		if (dc_seq(c, fam, "ipFamilies"))
			return -EINVAL;
		for (int i = 0; i < fam->n; i++) {
			const struct yn *v = fam->items[i];
			enum md_family fm;

			snprintf(f, sizeof(f), "ipFamilies[%d]", i);
			if (v->type != YN_SCALAR)
				return dc_fail(c, v, f, "must be a string");
			if (!strcmp(v->s, "IPv4"))
				fm = MD_FAM_V4;
			else if (!strcmp(v->s, "IPv6"))
				fm = MD_FAM_V6;
			else
				return dc_fail(c, v, f, "Unsupported value: \"%s\": supported values: "
					       "\"IPv4\", \"IPv6\"", v->s);
			/* with two spellings, a third item is always a duplicate */
			for (int j = 0; j < s->n_families; j++)
				if (s->families[j] == fm)
					return dc_fail(c, v, f, "Duplicate value: \"%s\"", v->s);
			s->families[s->n_families++] = fm;
		}
	}
	if (ips) {
		if (dc_seq(c, ips, "clusterIPs"))
			return -EINVAL;
		if (ips->n > 2)
			return dc_fail(c, ips, "clusterIPs", "may only hold up to 2 values");
		for (int i = 0; i < ips->n; i++) {
			snprintf(f, sizeof(f), "clusterIPs[%d]", i);
			if (ips->items[i]->type != YN_SCALAR)
				return dc_fail(c, ips->items[i], f, "must be a string");
			val[n] = ips->items[i]->s;
			at[n++] = ips->items[i];
		}
	}
	/* clusterIP and clusterIPs[0] are one field in two places: the v1 API
	 * fills the missing one from the other, and both given must agree */
	if (ip && *ip && n && strcmp(val[0], ip))
		return dc_fail(c, ips, "clusterIPs", "first value must match `clusterIP` (\"%s\")", ip);
	if (n && !*val[0])
		return dc_fail(c, ips, "clusterIPs", "must be empty when `clusterIP` is not specified");
	if (!n && ip && *ip) {
		val[0] = ip;
		at[0] = yn_get(spec, "clusterIP");
		n = 1;
		from_ip = true;
	}
	for (int i = 0; i < n; i++) {
		struct in6_addr a6;
		uint32_t a4;
		enum md_family fm;

		if (from_ip)
			snprintf(f, sizeof(f), "clusterIP");
		else
			snprintf(f, sizeof(f), "clusterIPs[%d]", i);
		if (!strcmp(val[i], "None")) {
			if (i || n > 1)
				return dc_fail(c, ips, "clusterIPs", "'None' must be the first and only value");
			s->headless = true;
			continue;
		}
		if (!md_parse_ipv4(val[i], &a4))
			fm = MD_FAM_V4;
		else if (!md_parse_ipv6(val[i], &a6))
			fm = MD_FAM_V6;
		else
			return dc_fail(c, at[i], f, "invalid address \"%s\": must be a valid IP address, "
				       "(e.g. 10.9.8.7 or 2001:db8::ffff), \"None\" or empty", val[i]);
		if (i && fm == s->given_ip_fams[0])
			return dc_fail(c, ips, "clusterIPs",
				       "may specify no more than one IP for each IP family");
		if (fm == MD_FAM_V4) {
			s->cluster_ip = a4;
			s->ip_given = true;
		} else {
			s->cluster_ip6 = a6;
			s->ip6_given = true;
		}
		s->given_ip_fams[s->n_given_ips++] = fm;
	}
	for (int i = 0; i < s->n_given_ips && i < s->n_families; i++) {
		if (s->given_ip_fams[i] == s->families[i])
			continue;
		snprintf(f, sizeof(f), from_ip ? "clusterIP" : "clusterIPs[%d]", i);
		return dc_fail(c, at[i], f, "expected an %s value as indicated by `ipFamilies[%d]`",
			       md_family_name(s->families[i]), i);
	}
	return 0;
}

/* ---- Pod: status.podIP(s) --------------------------------------------------------- */

/* As the kubelet reports them: podIP is the primary address, podIPs every
 * address ({ip: A}), at most one per family, the first equal to podIP. */
int md_decode_pod_ips(struct dctx *c, const struct yn *status, struct md_pod *p)
{
	const struct yn *ips = yn_get(status, "podIPs");
	const char *val[2];
	const struct yn *at[2];
	enum md_family seen = MD_FAM_NONE;
	char *ip, f[40];
	int n = 0;

	if (dc_str(c, status, "podIP", false, &ip))
		return -EINVAL;
	if (ips) {
		if (dc_seq(c, ips, "podIPs"))
			return -EINVAL;
		if (ips->n > 2)
			return dc_fail(c, ips, "podIPs", "may only hold up to 2 values");
		for (int i = 0; i < ips->n; i++) {
			size_t old = dc_push(c, "podIPs");
			char *v;

			dc_push_idx(c, i);
			if (dc_map(c, ips->items[i], NULL) || dc_str(c, ips->items[i], "ip", true, &v))
				return -EINVAL;
			dc_pop(c, old);
			val[n] = v;
			at[n++] = yn_get(ips->items[i], "ip");
		}
		if (n && ip && strcmp(ip, val[0]))
			return dc_fail(c, ips, "podIPs", "first value must match `podIP` (\"%s\")", ip);
	}
	if (!n && ip) {
		val[0] = ip;
		at[0] = yn_get(status, "podIP");
		n = 1;
	}
	for (int i = 0; i < n; i++) {
		enum md_family fm;

		if (ips)
			snprintf(f, sizeof(f), "podIPs[%d].ip", i);
		else
			snprintf(f, sizeof(f), "podIP");
		if (!md_parse_ipv4(val[i], &p->ip))
			fm = MD_FAM_V4;
		else if (!md_parse_ipv6(val[i], &p->ip6))
			fm = MD_FAM_V6;
		else
			return dc_fail(c, at[i], f, "invalid IP address \"%s\"", val[i]);
		if (fm == seen)
			return dc_fail(c, ips, "podIPs",
				       "may specify no more than one IP for each IP family");
		seen = fm;
	}
	return 0;
}

/* ---- Service: defaulting against the cluster (F3) ------------------------------- */

static bool cluster_has(const struct md_cluster *cl, enum md_family f)
{
	return f == MD_FAM_V4 ? cl->svc_cidr_len > 0 : f == MD_FAM_V6 && cl->svc_cidr6_len > 0;
}

static int svc_fail(struct md_err *err, const struct md_service *s, const char *field,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int svc_fail(struct md_err *err, const struct md_service *s, const char *field,
		    const char *fmt, ...)
{
	va_list ap;

	snprintf(err->file, sizeof(err->file), "%s", s->meta.file ? s->meta.file : "<state>");
	err->line = s->meta.line;
	snprintf(err->field, sizeof(err->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

#define NOT_CONFIGURED "not configured on this cluster (Cluster spec.serviceCIDRs)"

static int svc_default(const struct md_cluster *cl, struct md_service *s, struct md_err *err)
{
	bool dual = cluster_has(cl, MD_FAM_V4) && cluster_has(cl, MD_FAM_V6);
	bool selectorless_headless = s->headless && !s->selector.present;
	char f[40];

	if (s->fam_policy == MD_FP_UNSET)
		s->fam_policy = selectorless_headless ? MD_FP_REQUIRE_DUAL : MD_FP_SINGLE;
	if (s->fam_policy == MD_FP_SINGLE && s->n_given_ips == 2)
		return svc_fail(err, s, "spec.ipFamilyPolicy", "Invalid value: \"SingleStack\": must be "
				"'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are "
				"specified");
	if (s->fam_policy == MD_FP_SINGLE && s->n_families == 2)
		return svc_fail(err, s, "spec.ipFamilyPolicy", "Invalid value: \"SingleStack\": must be "
				"'RequireDualStack' or 'PreferDualStack' when multiple IP families are "
				"specified");
	/* families inferred from the given addresses */
	for (int i = s->n_families; i < s->n_given_ips; i++) {
		if (!cluster_has(cl, s->given_ip_fams[i])) {
			snprintf(f, sizeof(f), "spec.clusterIPs[%d]", i);
			return svc_fail(err, s, f, "%s is " NOT_CONFIGURED,
					md_family_name(s->given_ip_fams[i]));
		}
		s->families[s->n_families++] = s->given_ip_fams[i];
	}
	if (selectorless_headless) {
		/* no address to allocate: any family, even one the cluster lacks */
		if (!s->n_families)
			s->families[s->n_families++] = cl->primary;
		if (s->n_families < 2 && s->fam_policy != MD_FP_SINGLE)
			s->families[s->n_families++] = other_family(s->families[0]);
		return 0;
	}
	if (s->fam_policy == MD_FP_REQUIRE_DUAL && !dual)
		return svc_fail(err, s, "spec.ipFamilyPolicy", "Invalid value: \"RequireDualStack\": "
				"this cluster is not configured for dual-stack services (Cluster "
				"spec.serviceCIDRs)");
	for (int i = 0; i < s->n_families; i++)
		if (!cluster_has(cl, s->families[i])) {
			snprintf(f, sizeof(f), "spec.ipFamilies[%d]", i);
			return svc_fail(err, s, f, "Invalid value: \"%s\": " NOT_CONFIGURED,
					md_family_name(s->families[i]));
		}
	if (!s->n_families)
		s->families[s->n_families++] = cl->primary;
	if (s->fam_policy != MD_FP_SINGLE && s->n_families == 1 && dual)
		s->families[s->n_families++] = other_family(s->families[0]);
	return 0;
}

/* ---- allocation (F4) --------------------------------------------------------- */

/* One family's service range, seen through the low 32 bits of its
 * addresses: an IPv6 service CIDR is at least a /108 (lim above), so its
 * host part lies in the last word. */
struct range {
	enum md_family fam;
	const struct md_cluster *cl;
	uint32_t base;		/* host order, low word of the network address */
	uint32_t size;
	char cidr[INET6_ADDRSTRLEN + 4];
};

struct given {
	uint32_t off;
	int svc;
};

static int cmp_given(const void *a, const void *b)
{
	const struct given *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->svc - y->svc;
}

static const struct md_state *sort_st;	/* qsort has no context argument */

static int cmp_svc_name(const void *a, const void *b)
{
	const struct md_service *x = &sort_st->services[*(const int *)a];
	const struct md_service *y = &sort_st->services[*(const int *)b];
	int r = strcmp(x->meta.ns, y->meta.ns);

	return r ? r : strcmp(x->meta.name, y->meta.name);
}

static bool svc_wants(const struct md_service *s, enum md_family f)
{
	if (s->headless)
		return false;
	for (int i = 0; i < s->n_families; i++)
		if (s->families[i] == f)
			return true;
	return false;
}

/* The error field of s's address of family f: clusterIP for the first. */
static const char *ip_field(const struct md_service *s, enum md_family f, char *buf, size_t len)
{
	if (s->families[0] == f)
		return "spec.clusterIP";
	snprintf(buf, len, "spec.clusterIPs[1]");
	return buf;
}

static const char *ip_text(const struct md_service *s, enum md_family f, char *buf, size_t len)
{
	if (f == MD_FAM_V4)
		return inet_ntop(AF_INET, &s->cluster_ip, buf, (socklen_t)len);
	return inet_ntop(AF_INET6, &s->cluster_ip6, buf, (socklen_t)len);
}

static int alloc_family(struct md_state *st, const struct range *r, struct md_err *err)
{
	uint8_t *used = zh_calloc(r->size / 8 + 1, 1);
	struct given *g = zh_calloc((size_t)st->n_services + 1, sizeof(*g));
	int *alloc = zh_calloc((size_t)st->n_services + 1, sizeof(*alloc));
	int n_g = 0, n_a = 0, ret = 0;
	char key[320], fb[40];
	bool v6 = r->fam == MD_FAM_V6;

	for (int i = 0; i < st->n_services; i++) {
		const struct md_service *s = &st->services[i];
		bool given = v6 ? s->ip6_given : s->ip_given;
		bool inside;
		uint32_t ip;

		if (!svc_wants(s, r->fam))
			continue;
		if (!given) {
			alloc[n_a++] = i;
			continue;
		}
		if (v6) {
			inside = md_in_cidr6(&s->cluster_ip6, &r->cl->svc_cidr6, r->cl->svc_cidr6_len);
			ip = ntohl(s->cluster_ip6.s6_addr32[3]);
		} else {
			ip = ntohl(s->cluster_ip);
			inside = (ip & md_mask(r->cl->svc_cidr_len)) == r->base;
		}
		if (!inside) {
			ret = svc_fail(err, s, ip_field(s, r->fam, fb, sizeof(fb)),
				       "%s is outside the service CIDR %s",
				       ip_text(s, r->fam, key, sizeof(key)), r->cidr);
			goto out;
		}
		if (ip == r->base || (!v6 && ip == r->base + r->size - 1)) {
			ret = svc_fail(err, s, ip_field(s, r->fam, fb, sizeof(fb)),
				       "%s is the %s address of the service CIDR",
				       ip_text(s, r->fam, key, sizeof(key)),
				       ip == r->base ? "network" : "broadcast");
			goto out;
		}
		g[n_g].off = ip - r->base;
		g[n_g++].svc = i;
	}
	qsort(g, (size_t)n_g, sizeof(*g), cmp_given);
	for (int i = 0; i < n_g; i++) {
		const struct md_service *s = &st->services[g[i].svc], *q;

		if (i && g[i].off == g[i - 1].off) {
			q = &st->services[g[i - 1].svc];
			ret = svc_fail(err, s, ip_field(s, r->fam, fb, sizeof(fb)),
				       "%s is already used by Service %s/%s (%s:%d)",
				       ip_text(s, r->fam, key, sizeof(key)), q->meta.ns, q->meta.name,
				       q->meta.file, q->meta.line);
			goto out;
		}
		used[g[i].off / 8] |= (uint8_t)(1u << (g[i].off % 8));
	}
	sort_st = st;
	qsort(alloc, (size_t)n_a, sizeof(*alloc), cmp_svc_name);
	sort_st = NULL;
	for (int i = 0; i < n_a; i++) {
		struct md_service *s = &st->services[alloc[i]];
		/* IPv4 keeps its broadcast address out; IPv6 has none */
		uint32_t last = v6 ? r->size - 1 : r->size - 2;
		uint32_t range = last - 15, off, tries = 0;
		int kl = snprintf(key, sizeof(key), "%s/%s", s->meta.ns, s->meta.name);

		off = 16 + (uint32_t)(md_hash(key, (size_t)kl) % range);
		while (used[off / 8] & (1u << (off % 8))) {
			if (++tries == range) {
				ret = svc_fail(err, s, ip_field(s, r->fam, fb, sizeof(fb)),
					       "no free address left in the service CIDR %s", r->cidr);
				goto out;
			}
			off = off + 1 > last ? 16 : off + 1;
		}
		used[off / 8] |= (uint8_t)(1u << (off % 8));
		if (v6) {
			s->cluster_ip6 = r->cl->svc_cidr6;
			s->cluster_ip6.s6_addr32[3] = htonl(r->base + off);
		} else {
			s->cluster_ip = htonl(r->base + off);
		}
	}
out:
	free(alloc);
	free(g);
	free(used);
	return ret;
}

int md_finish_families(struct md_state *st, struct md_err *err)
{
	const struct md_cluster *cl = &st->cluster;
	int ret;

	for (int i = 0; i < st->n_services; i++)
		if ((ret = svc_default(cl, &st->services[i], err)))
			return ret;
	for (int i = 0; i < st->n_services; i++) {
		struct md_service *s = &st->services[i];

		/* an address of a family the Service does not have is not kept
		 * (a headless Service has none) */
		if (!svc_wants(s, MD_FAM_V4))
			s->cluster_ip = 0;
		if (!svc_wants(s, MD_FAM_V6))
			memset(&s->cluster_ip6, 0, sizeof(s->cluster_ip6));
	}
	if (cl->svc_cidr_len) {
		struct range r = { .fam = MD_FAM_V4, .cl = cl, .base = ntohl(cl->svc_cidr),
				   .size = 1u << (32 - cl->svc_cidr_len) };
		char a[INET_ADDRSTRLEN];

		snprintf(r.cidr, sizeof(r.cidr), "%s/%d", inet_ntop(AF_INET, &cl->svc_cidr, a, sizeof(a)),
			 cl->svc_cidr_len);
		if ((ret = alloc_family(st, &r, err)))
			return ret;
	}
	if (cl->svc_cidr6_len) {
		struct range r = { .fam = MD_FAM_V6, .cl = cl,
				   .base = ntohl(cl->svc_cidr6.s6_addr32[3]),
				   .size = 1u << (128 - cl->svc_cidr6_len) };
		char a[INET6_ADDRSTRLEN];

		snprintf(r.cidr, sizeof(r.cidr), "%s/%d",
			 inet_ntop(AF_INET6, &cl->svc_cidr6, a, sizeof(a)), cl->svc_cidr6_len);
		if ((ret = alloc_family(st, &r, err)))
			return ret;
	}
	return 0;
}
