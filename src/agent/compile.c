/* compile.c — cluster state -> service load-balancing map contents.
 *
 * A pure function: reads a finished struct md_state, returns a struct
 * ag_compiled; no I/O, no BPF. The agent diffs the result against the maps.
 *
 * What becomes a service entry (one per ClusterIP:port/proto):
 *  1. Every Service with a ClusterIP (not headless), per port: its endpoints,
 *     weight 1 each.
 *  2. A TrafficSplit on a root Service replaces the root's backends, per root
 *     port: the endpoints of each backend Service (same port number, else
 *     same port name, else its only port of that protocol), the backend
 *     Service's weight_milli shared evenly among its endpoints. A backend
 *     Service without endpoints gets no share (the others keep their ratio);
 *     all empty -> no backend -> ECONNREFUSED.
 *  3. An HTTPRoute whose parent is a Service and that needs no L7 (no
 *     matches, no filters: md_route_needs_l7() false) does the same with its
 *     backendRefs weights, for the parent's port (parentRef port, else every
 *     port). It takes precedence over a TrafficSplit on the same Service
 *     (a note says so). A route that needs L7 leaves the backends as they
 *     are and sets ZH_LB_F_L7 on the parent's TCP ports: connect4 sends
 *     those connections to the node L7 proxy, which applies the route.
 *  4. A Service annotated zerohop.io/l7: "true" (ZH_LB_ANN_L7) gets
 *     ZH_LB_F_L7 on its TCP ports too (the proxy routes it to its own
 *     endpoints, or per request by its TrafficSplit). UDP stays at L4.
 *  5. A Service with an IPv6 ClusterIP (docs/ipv6.md) gets a second entry
 *     per port keyed by it, whose backends are the IPv6 addresses of the
 *     same endpoints' pods (a pod without one is left out). Rules 2 and 3
 *     apply to it as to the IPv4 entry, with the backends' IPv6 addresses
 *     (each backend Service's share split evenly over those of its pods
 *     that have one). What needs the L7 proxy (rule 3's L7 routes, SMI
 *     matches, rule 4) gets ZH_LB_F_L7 on its IPv6 entry too, with one
 *     backend: the name the node proxy routes it by (connect6 sends the
 *     socket to the proxy and records that name, bpf/lb.bpf.c invariant
 *     9): the Service's IPv4 ClusterIP:port, or, for an IPv6 single-stack
 *     Service (no IPv4 ClusterIP), its IPv6 ClusterIP:port itself, which
 *     the proxy looks up and routes to the pods' IPv6 addresses.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "zerohop/agent.h"
#include "zerohop/log.h"

void ag_v4_mapped(uint8_t addr[16], uint32_t ip4_net)
{
	memset(addr, 0, 10);
	addr[10] = 0xff;
	addr[11] = 0xff;
	memcpy(&addr[12], &ip4_net, 4);
}

uint32_t ag_v4_of(const uint8_t addr[16])
{
	uint32_t ip;

	memcpy(&ip, &addr[12], 4);
	return ip;
}

/* ---- Walker / Vose alias tables ---------------------------------------- */

int ag_alias_build(const double *w, int n, uint32_t *thr, uint32_t *alias)
{
	double *p = NULL, sum = 0;
	int *small = NULL, *large = NULL, ns = 0, nl = 0, i, ret = 0;

	if (n <= 0 || n > ZH_LB_MAX_BACKENDS)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!(w[i] > 0) || !isfinite(w[i]))
			return -EINVAL;
		sum += w[i];
	}
	p = zh_calloc(n, sizeof(*p));
	small = zh_calloc(n, sizeof(*small));
	large = zh_calloc(n, sizeof(*large));
	for (i = 0; i < n; i++) {
		p[i] = w[i] * n / sum;
		alias[i] = i;
		if (p[i] < 1.0)
			small[ns++] = i;
		else
			large[nl++] = i;
	}
	while (ns && nl) {
		int s = small[--ns], l = large[nl - 1];
		double t = p[s] * 4294967296.0;

		thr[s] = t >= 4294967295.0 ? 0xffffffffu : (uint32_t)llround(t);
		alias[s] = l;
		p[l] = (p[l] + p[s]) - 1.0;
		if (p[l] < 1.0) {
			nl--;
			small[ns++] = l;
		}
	}
	/* What is left has probability 1 up to rounding: always itself. */
	while (nl)
		thr[large[--nl]] = 0xffffffffu;
	while (ns)
		thr[small[--ns]] = 0xffffffffu;
	free(large);
	free(small);
	free(p);
	return ret;
}

double ag_alias_prob(const uint32_t *thr, const uint32_t *alias, int n, int j)
{
	double pr = 0;
	int i;

	for (i = 0; i < n; i++) {
		/* The kernel picks a when r2 < thr: P(a) = thr / 2^32. */
		double pa = thr[i] / 4294967296.0;

		if (alias[i] == (uint32_t)i)
			pa = 1.0;
		if (i == j)
			pr += pa / n;
		if ((int)alias[i] == j && alias[i] != (uint32_t)i)
			pr += (1.0 - pa) / n;
	}
	return pr;
}

/* ---- building the list ------------------------------------------------- */

struct cbuild {
	struct ag_compiled *c;
	const struct md_state *st;
	int cap_svcs, cap_notes;
};

static void add_note(struct cbuild *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(struct cbuild *b, const char *fmt, ...)
{
	struct ag_compiled *c = b->c;
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = zh_strdup("(note lost: out of memory)");
	va_end(ap);
	if (c->n_notes == b->cap_notes) {
		b->cap_notes = b->cap_notes ? 2 * b->cap_notes : 8;
		c->notes = zh_realloc(c->notes, b->cap_notes * sizeof(*c->notes));
	}
	c->notes[c->n_notes++] = s;
}

/* "ns/name", owned by the caller. Plain memcpy: called for every backend
 * (100,000 times for 10,000 Services), where asprintf would dominate. */
static char *nsname(const struct md_meta *m)
{
	const char *ns = m->ns ? m->ns : MD_DEFAULT_NS;
	size_t a = strlen(ns), b = strlen(m->name);
	char *s = zh_malloc(a + b + 2);

	memcpy(s, ns, a);
	s[a] = '/';
	memcpy(s + a + 1, m->name, b + 1);
	return s;
}

static uint8_t proto_num(enum md_proto p)
{
	return p == MD_PROTO_UDP ? ZH_LB_UDP : ZH_LB_TCP;
}

static void be_clear(struct ag_svc *s)
{
	int i;

	for (i = 0; i < s->n_be; i++) {
		free((char *)s->be[i].pod);
		free((char *)s->be[i].via);
	}
	free(s->be);
	s->be = NULL;
	s->n_be = 0;
}

/* Append the endpoints of one service port, sharing total weight evenly. */
static void be_add_set(struct ag_svc *s, const struct md_service *via,
		       const struct md_endpoint_set *set, double total)
{
	char *via_name;
	int i, n4 = 0;

	/* an IPv6-only pod (ip 0) is no IPv4 backend: rule 5 has it */
	for (i = 0; set && i < set->n; i++)
		n4 += set->v[i].ip != 0;
	if (!n4 || !(total > 0))
		return;
	via_name = nsname(&via->meta);
	s->be = zh_realloc(s->be, (s->n_be + n4) * sizeof(*s->be));
	for (i = 0; i < set->n; i++) {
		const struct md_endpoint *ep = &set->v[i];
		struct ag_wbackend *w;

		if (!ep->ip)
			continue;
		w = &s->be[s->n_be++];
		memset(w, 0, sizeof(*w));
		ag_v4_mapped(w->be.addr, ep->ip);
		w->be.port = htons(ep->port);
		w->weight = total / n4;
		w->pod = ep->pod ? nsname(&ep->pod->meta) : zh_strdup("-");
		w->via = zh_strdup(via_name);
	}
	free(via_name);
}

/* Rule 5: the IPv6 addresses of the pods of set, sharing total evenly
 * (total < 0: weight 1 each). */
static void be_add_set6(struct ag_svc *s, const struct md_service *via,
			const struct md_endpoint_set *set, double total)
{
	char *via_name;
	int i, n6 = 0;

	for (i = 0; set && i < set->n; i++)
		n6 += set->v[i].pod && !IN6_IS_ADDR_UNSPECIFIED(&set->v[i].pod->ip6);
	if (!n6 || total == 0)
		return;
	via_name = nsname(&via->meta);
	s->be = zh_realloc(s->be, (s->n_be + n6) * sizeof(*s->be));
	for (i = 0; i < set->n; i++) {
		const struct md_endpoint *ep = &set->v[i];
		struct ag_wbackend *w;

		if (!ep->pod || IN6_IS_ADDR_UNSPECIFIED(&ep->pod->ip6))
			continue;
		w = &s->be[s->n_be++];
		memset(w, 0, sizeof(*w));
		memcpy(w->be.addr, &ep->pod->ip6, 16);
		w->be.port = htons(ep->port);
		w->weight = total < 0 ? 1.0 : total / n6;
		w->pod = nsname(&ep->pod->meta);
		w->via = zh_strdup(via_name);
	}
	free(via_name);
}

/* Rule 4: ZH_LB_F_L7 for a TCP port of a Service annotated zerohop.io/l7:
 * "true", else 0. Both ag_compile and ag_compile_update call it. */
static uint8_t annotated_l7(const struct md_service *s, const struct md_service_port *sp)
{
	const char *v = md_labels_get(&s->meta.annotations, ZH_LB_ANN_L7);

	return sp->proto == MD_PROTO_TCP && v && !strcmp(v, "true") ? ZH_LB_F_L7 : 0;
}

/* The port of backend service bs that stands for root port rp. */
static int match_port(const struct md_service *bs, const struct md_service_port *rp,
		      uint16_t want_num)
{
	int i, only = -1, n_proto = 0;

	for (i = 0; i < bs->n_ports; i++)
		if (bs->ports[i].proto == rp->proto && bs->ports[i].port == want_num)
			return i;
	for (i = 0; i < bs->n_ports; i++) {
		if (bs->ports[i].proto != rp->proto)
			continue;
		if (rp->name && bs->ports[i].name && !strcmp(rp->name, bs->ports[i].name))
			return i;
		only = i;
		n_proto++;
	}
	return n_proto == 1 ? only : -1;
}

static int cmp_svc(const void *a, const void *b)
{
	const struct ag_svc *x = a, *y = b;

	return memcmp(&x->key, &y->key, sizeof(x->key));
}

/* Entries are sorted by key before splits and routes are applied. The
 * entry of port p of svc's ClusterIP of one family (v6: its IPv6 one), or
 * NULL when svc has no ClusterIP of that family (or no such entry). */
static struct ag_svc *find_svc_entry(struct ag_compiled *c, const struct md_service *svc,
				     const struct md_service_port *p, int v6)
{
	struct ag_svc k = {};

	if (v6 ? IN6_IS_ADDR_UNSPECIFIED(&svc->cluster_ip6) : !svc->cluster_ip)
		return NULL;
	if (v6)
		memcpy(k.key.vip, &svc->cluster_ip6, 16);
	else
		ag_v4_mapped(k.key.vip, svc->cluster_ip);
	k.key.port = htons(p->port);
	k.key.proto = proto_num(p->proto);
	return bsearch(&k, c->svcs, c->n_svcs, sizeof(k), cmp_svc);
}

/* A weighted share of backend Service bs's port bp in entry e of family v6. */
static void be_add_share(struct ag_svc *e, const struct md_service *bs, int bp, double total, int v6)
{
	const struct md_endpoint_set *set = bs->endpoints ? &bs->endpoints[bp] : NULL;

	if (v6)
		be_add_set6(e, bs, set, total);
	else
		be_add_set(e, bs, set, total);
}

/* Rule 5: the IPv6 entry e of port sp of svc needs the L7 proxy. e's one
 * backend is the name the proxy routes by (bpf/lb.bpf.c invariant 9):
 * svc's IPv4 ClusterIP:port, as an IPv4 client's connection is routed
 * (a dual-stack Service keeps its IPv4 endpoints), else (an IPv6
 * single-stack Service) its IPv6 ClusterIP:port, by which the proxy finds
 * it (px_table_find_ip6low) and reaches its pods over IPv6. */
static void l7_v6(struct cbuild *b, struct ag_svc *e, const struct md_service *svc,
		  const struct md_service_port *sp, const char *why)
{
	struct ag_wbackend *w;

	be_clear(e);
	if (sp->proto != MD_PROTO_TCP)
		return;
	e->be = zh_realloc(e->be, sizeof(*e->be));
	w = &e->be[e->n_be++];
	memset(w, 0, sizeof(*w));
	if (svc->cluster_ip) {
		ag_v4_mapped(w->be.addr, svc->cluster_ip);
	} else {
		memcpy(w->be.addr, &svc->cluster_ip6, 16);
		add_note(b, "Service %s/%s port %u: IPv6 single-stack, %s: the node L7 proxy "
			 "routes it by its IPv6 ClusterIP to its pods' IPv6 addresses",
			 e->ns, e->name, ntohs(e->key.port), why);
	}
	w->be.port = htons(sp->port);
	w->weight = 1;
	w->pod = zh_strdup("-");
	w->via = zh_strdup("node proxy");
	e->flags |= ZH_LB_F_L7;
}

static void set_source(struct ag_svc *e, const char *kind, const struct md_meta *m)
{
	free(e->source);
	if (asprintf(&e->source, "%s %s/%s", kind, m->ns ? m->ns : MD_DEFAULT_NS, m->name) < 0)
		abort();
}

static void apply_split(struct cbuild *b, const struct md_trafficsplit *ts)
{
	const struct md_service *root = ts->root_svc;
	int p, i, v6;

	if (!root || root->headless || (!root->cluster_ip && IN6_IS_ADDR_UNSPECIFIED(&root->cluster_ip6))) {
		add_note(b, "TrafficSplit %s/%s: root service %s %s: ignored", ts->meta.ns,
			 ts->meta.name, ts->root, root ? "has no ClusterIP" : "does not exist (yet)");
		return;
	}
	if (ts->n_matches) {
		/* SMI matches (A/B): only matching requests are split, so the
		 * decision is per request: the node L7 proxy's (TCP ports); the
		 * root keeps its own endpoints for everything else */
		for (p = 0; p < root->n_ports; p++) {
			struct ag_svc *e = find_svc_entry(b->c, root, &root->ports[p], 0);
			struct ag_svc *e6 = find_svc_entry(b->c, root, &root->ports[p], 1);

			if (e6 && root->ports[p].proto == MD_PROTO_TCP)
				l7_v6(b, e6, root, &root->ports[p], "a TrafficSplit with matches");
			if (!e)
				continue;
			if (root->ports[p].proto == MD_PROTO_TCP)
				e->flags |= ZH_LB_F_L7;
			add_note(b, "TrafficSplit %s/%s on %s/%s:%u: matches %s", ts->meta.ns,
				 ts->meta.name, root->meta.ns, root->meta.name, root->ports[p].port,
				 root->ports[p].proto == MD_PROTO_TCP ?
				 "enforced by the node L7 proxy (per request)" :
				 "need TCP: not split on this port");
		}
		return;
	}
	for (p = 0; p < root->n_ports; p++) {
		for (v6 = 0; v6 < 2; v6++) {
			struct ag_svc *e = find_svc_entry(b->c, root, &root->ports[p], v6);

			if (!e || (v6 && annotated_l7(root, &root->ports[p])))
				continue;	/* an L7 port's IPv6 entry stays the proxy's */
			be_clear(e);
			for (i = 0; i < ts->n_backends; i++) {
				const struct md_split_backend *sb = &ts->backends[i];
				int bp;

				if (!sb->svc || !sb->weight_milli)
					continue;
				bp = match_port(sb->svc, &root->ports[p], root->ports[p].port);
				if (bp < 0) {
					if (!v6)
						add_note(b, "TrafficSplit %s/%s: backend %s has no port matching %u/%s: no share",
							 ts->meta.ns, ts->meta.name, sb->service,
							 root->ports[p].port, md_proto_name(root->ports[p].proto));
					continue;
				}
				be_add_share(e, sb->svc, bp, (double)sb->weight_milli, v6);
			}
			e->flags |= ZH_LB_F_SPLIT;
			set_source(e, "TrafficSplit", &ts->meta);
		}
	}
}

static bool parent_is_service(const struct md_parent_ref *pr)
{
	return pr->kind && !strcmp(pr->kind, "Service") &&
	       (!pr->group || !pr->group[0] || !strcmp(pr->group, "core"));
}

/* Linear lookup on purpose: works on any struct md_state (also hand-built
 * ones in tests, without the model's private index); routes are few. */
static const struct md_service *svc_by_name(const struct md_state *st, const char *ns,
					    const char *name)
{
	int i;

	for (i = 0; i < st->n_services; i++) {
		const struct md_service *s = &st->services[i];

		if (!strcmp(s->meta.name, name) &&
		    !strcmp(s->meta.ns ? s->meta.ns : MD_DEFAULT_NS, ns ? ns : MD_DEFAULT_NS))
			return s;
	}
	return NULL;
}

static void apply_route(struct cbuild *b, const struct md_state *st, const struct md_httproute *r)
{
	bool l7 = md_route_needs_l7(r);
	int pi, p, ri, bi, v6;

	for (pi = 0; pi < r->n_parents; pi++) {
		const struct md_parent_ref *pr = &r->parents[pi];
		const struct md_service *parent;

		if (!parent_is_service(pr))
			continue;	/* Gateway parents: the L7 proxy's business */
		parent = svc_by_name(st, pr->ns ? pr->ns : r->meta.ns, pr->name);
		if (!parent || parent->headless ||
		    (!parent->cluster_ip && IN6_IS_ADDR_UNSPECIFIED(&parent->cluster_ip6))) {
			add_note(b, "HTTPRoute %s/%s: parent Service %s has no ClusterIP: ignored",
				 r->meta.ns, r->meta.name, pr->name);
			continue;
		}
		for (p = 0; p < parent->n_ports; p++) {
			const struct md_service_port *sp = &parent->ports[p];

			if (pr->port && pr->port != sp->port)
				continue;
			for (v6 = 0; v6 < 2; v6++) {
				struct ag_svc *e = find_svc_entry(b->c, parent, sp, v6);

				if (!e || (v6 && annotated_l7(parent, sp)))
					continue;	/* stays the proxy's (add_service6) */
				if (l7 && v6) {
					if (sp->proto == MD_PROTO_TCP)
						l7_v6(b, e, parent, sp, "an HTTPRoute with matches or filters");
					continue;
				}
				if (l7) {
					if (sp->proto == MD_PROTO_TCP)
						e->flags |= ZH_LB_F_L7;
					add_note(b, "HTTPRoute %s/%s on %s/%s:%u: matches/filters %s",
						 r->meta.ns, r->meta.name, parent->meta.ns, parent->meta.name,
						 sp->port, sp->proto == MD_PROTO_TCP ?
						 "enforced by the node L7 proxy (connections redirected at connect)" :
						 "need TCP: not enforced on this port (balanced at L4)");
					continue;
				}
				if ((e->flags & ZH_LB_F_SPLIT) && !v6)
					add_note(b, "HTTPRoute %s/%s overrides %s on %s/%s:%u",
						 r->meta.ns, r->meta.name, e->source, parent->meta.ns,
						 parent->meta.name, sp->port);
				be_clear(e);
				for (ri = 0; ri < r->n_rules; ri++) {
					const struct md_route_rule *rule = &r->rules[ri];

					for (bi = 0; bi < rule->n_backends; bi++) {
						const struct md_backend_ref *br = &rule->backends[bi];
						int bp;

						if (!br->svc) {
							if (!v6)
								add_note(b, "HTTPRoute %s/%s: backendRef %s not found: no share",
									 r->meta.ns, r->meta.name, br->name);
							continue;
						}
						if (!br->weight)
							continue;
						bp = match_port(br->svc, sp, br->port ? br->port : sp->port);
						if (bp < 0)
							continue;
						be_add_share(e, br->svc, bp, (double)br->weight, v6);
					}
				}
				e->flags |= ZH_LB_F_SPLIT;
				set_source(e, "HTTPRoute", &r->meta);
			}
		}
	}
}

static int build_alias(struct ag_svc *e, char *err, size_t errlen)
{
	uint32_t *thr, *al;
	double *w;
	int i, ret;

	if (e->n_be == 0)
		return 0;
	if (e->n_be > ZH_LB_MAX_BACKENDS) {
		snprintf(err, errlen, "%s: service %s/%s port %u: %d backends, more than the limit %d",
			 e->source, e->ns, e->name, ntohs(e->key.port), e->n_be, ZH_LB_MAX_BACKENDS);
		return -E2BIG;
	}
	w = zh_calloc(e->n_be, sizeof(*w));
	thr = zh_calloc(e->n_be, sizeof(*thr));
	al = zh_calloc(e->n_be, sizeof(*al));
	for (i = 0; i < e->n_be; i++)
		w[i] = e->be[i].weight;
	ret = ag_alias_build(w, e->n_be, thr, al);
	if (ret) {
		snprintf(err, errlen, "service %s/%s: invalid weights", e->ns, e->name);
		goto out;
	}
	e->alias = zh_calloc(e->n_be, sizeof(*e->alias));
	for (i = 0; i < e->n_be; i++) {
		e->alias[i].a = e->be[i].be;
		e->alias[i].b = e->be[al[i]].be;
		e->alias[i].threshold = thr[i];
	}
out:
	free(al);
	free(thr);
	free(w);
	return ret;
}

/* The entries of one Service: one per TCP/UDP port with a ClusterIP
 * (headless Services have none; SCTP has no socket LB yet), each with the
 * port's endpoints as its backends. Used by the full and the incremental
 * compile, so both build byte-identical entries. */
/* A new entry for port sp of s keyed by vip (16 bytes), without backends. */
static struct ag_svc *new_entry(struct cbuild *b, const struct md_service *s,
				const struct md_service_port *sp, const uint8_t vip[16])
{
	struct ag_svc *e = &b->c->svcs[b->c->n_svcs++];

	memcpy(e->key.vip, vip, 16);
	e->key.port = htons(sp->port);
	e->key.proto = proto_num(sp->proto);
	e->ns = zh_strdup(s->meta.ns ? s->meta.ns : MD_DEFAULT_NS);
	e->name = zh_strdup(s->meta.name);
	e->port_name = sp->name ? zh_strdup(sp->name) : NULL;
	e->source = zh_strdup("Service");
	return e;
}

/* Rule 5: the IPv6 entries of s (splits and routes are applied later). */
static void add_service6(struct cbuild *b, const struct md_service *s)
{
	for (int p = 0; p < s->n_ports; p++) {
		const struct md_service_port *sp = &s->ports[p];
		struct ag_svc *e;

		if (sp->proto != MD_PROTO_TCP && sp->proto != MD_PROTO_UDP)
			continue;
		e = new_entry(b, s, sp, (const uint8_t *)&s->cluster_ip6);
		if (annotated_l7(s, sp)) {
			l7_v6(b, e, s, sp, "the zerohop.io/l7 annotation");
			continue;
		}
		be_add_set6(e, s, s->endpoints ? &s->endpoints[p] : NULL, -1);
	}
}

static void add_service(struct cbuild *b, const struct md_service *s)
{
	uint8_t vip[16];

	if (s->headless)
		return;
	if (!s->cluster_ip) {	/* IPv6 single-stack */
		if (!IN6_IS_ADDR_UNSPECIFIED(&s->cluster_ip6))
			add_service6(b, s);
		return;
	}
	ag_v4_mapped(vip, s->cluster_ip);
	for (int p = 0; p < s->n_ports; p++) {
		const struct md_service_port *sp = &s->ports[p];
		struct ag_svc *e;

		if (sp->proto != MD_PROTO_TCP && sp->proto != MD_PROTO_UDP)
			continue;
		e = new_entry(b, s, sp, vip);
		be_add_set(e, s, s->endpoints ? &s->endpoints[p] : NULL,
			   s->endpoints ? (double)s->endpoints[p].n : 0);
		e->flags |= annotated_l7(s, sp);
	}
	if (!IN6_IS_ADDR_UNSPECIFIED(&s->cluster_ip6))
		add_service6(b, s);
}

/* Entries s may need: one per port and family (an upper bound). */
static int svc_entries(const struct md_service *s)
{
	return s->n_ports * (IN6_IS_ADDR_UNSPECIFIED(&s->cluster_ip6) ? 1 : 2);
}

int ag_compile(const struct md_state *st, struct ag_compiled **out, char *err, size_t errlen)
{
	struct cbuild b = {};
	int i, n = 0, ret = 0;

	b.c = zh_calloc(1, sizeof(*b.c));
	b.st = st;
	for (i = 0; i < st->n_services; i++)
		n += svc_entries(&st->services[i]);
	if (n > ZH_LB_MAX_SVC) {
		snprintf(err, errlen, "%d service ports, more than the map limit %d", n, ZH_LB_MAX_SVC);
		ret = -E2BIG;
		goto fail;
	}
	b.c->svcs = zh_calloc(n ? n : 1, sizeof(*b.c->svcs));
	for (i = 0; i < st->n_services; i++)
		add_service(&b, &st->services[i]);
	qsort(b.c->svcs, b.c->n_svcs, sizeof(*b.c->svcs), cmp_svc);
	/* Two Services claiming one ClusterIP:port (the model should refuse):
	 * keep the first, say so. */
	for (i = 1; i < b.c->n_svcs; i++) {
		struct ag_svc *x = &b.c->svcs[i - 1], *y = &b.c->svcs[i];

		if (cmp_svc(x, y))
			continue;
		add_note(&b, "Service %s/%s: ClusterIP:port already used by %s/%s: ignored",
			 y->ns, y->name, x->ns, x->name);
		be_clear(y);
		free(y->ns);
		free(y->name);
		free(y->port_name);
		free(y->source);
		memmove(y, y + 1, (b.c->n_svcs - i - 1) * sizeof(*y));
		b.c->n_svcs--;
		i--;
	}
	for (i = 0; i < st->n_splits; i++)
		apply_split(&b, &st->splits[i]);
	for (i = 0; i < st->n_routes; i++)
		apply_route(&b, st, &st->routes[i]);
	for (i = 0; i < b.c->n_svcs; i++) {
		ret = build_alias(&b.c->svcs[i], err, errlen);
		if (ret)
			goto fail;
	}
	*out = b.c;
	return 0;
fail:
	ag_compiled_free(b.c);
	return ret;
}

/* ---- incremental: recompile the entries of some Services ------------------ */

static void svc_entry_free(struct ag_svc *e)
{
	be_clear(e);
	free(e->alias);
	free(e->ns);
	free(e->name);
	free(e->port_name);
	free(e->source);
}

static bool split_uses(const struct md_trafficsplit *ts, const bool *mark,
		       const struct md_state *st)
{
	for (int i = 0; i < ts->n_backends; i++)
		if (ts->backends[i].svc && mark[ts->backends[i].svc - st->services])
			return true;
	return false;
}

static bool route_uses(const struct md_httproute *r, const bool *mark, const struct md_state *st)
{
	for (int i = 0; i < r->n_rules; i++)
		for (int k = 0; k < r->rules[i].n_backends; k++) {
			const struct md_service *bs = r->rules[i].backends[k].svc;

			/* svc points into st->services (md_state_finish step 7) */
			if (bs && bs >= st->services && bs < st->services + st->n_services &&
			    mark[bs - st->services])
				return true;
		}
	return false;
}

int ag_compile_update(const struct md_state *st, struct ag_compiled *c, const int *svcs, int n,
		      int *n_entries, char *err, size_t errlen)
{
	bool *mark = zh_calloc((size_t)st->n_services + 1, sizeof(*mark));
	bool *root = zh_calloc((size_t)st->n_services + 1, sizeof(*root));
	struct cbuild b = {};
	int i, p, ret = 0, n_e = 0;

	*n_entries = 0;
	for (i = 0; i < n; i++)
		mark[svcs[i]] = root[svcs[i]] = true;
	/* U1: a root whose split or route uses a changed Service changes too */
	for (i = 0; i < st->n_splits; i++) {
		const struct md_service *rs = st->splits[i].root_svc;

		if (rs && split_uses(&st->splits[i], mark, st))
			root[rs - st->services] = true;
	}
	for (i = 0; i < st->n_routes; i++) {
		const struct md_httproute *r = &st->routes[i];

		if (!route_uses(r, mark, st))
			continue;
		for (p = 0; p < r->n_parents; p++) {
			const struct md_service *ps;

			if (!parent_is_service(&r->parents[p]))
				continue;
			ps = svc_by_name(st, r->parents[p].ns ? r->parents[p].ns : r->meta.ns,
					 r->parents[p].name);
			if (ps)
				root[ps - st->services] = true;
		}
	}
	/* U2: the entries of the roots, built exactly as ag_compile builds them
	 * (same loop body, splits and routes applied to this subset: an entry
	 * outside it is not found and left alone) */
	b.c = zh_calloc(1, sizeof(*b.c));
	b.st = st;
	for (i = 0; i < st->n_services; i++)
		if (root[i])
			n_e += svc_entries(&st->services[i]);
	b.c->svcs = zh_calloc(n_e ? n_e : 1, sizeof(*b.c->svcs));
	for (i = 0; i < st->n_services; i++)
		if (root[i])
			add_service(&b, &st->services[i]);
	qsort(b.c->svcs, b.c->n_svcs, sizeof(*b.c->svcs), cmp_svc);
	for (i = 0; i < st->n_splits; i++)
		apply_split(&b, &st->splits[i]);
	for (i = 0; i < st->n_routes; i++)
		apply_route(&b, st, &st->routes[i]);
	for (i = 0; i < b.c->n_svcs; i++) {
		ret = build_alias(&b.c->svcs[i], err, errlen);
		if (ret)
			goto out;
	}
	/* U3: every new entry must replace one of c with the same key and
	 * Service (the keys only depend on manifests, which did not change);
	 * check all before touching c (all or nothing) */
	for (i = 0; i < b.c->n_svcs; i++) {
		const struct ag_svc *x = &b.c->svcs[i];
		const struct ag_svc *y = bsearch(x, c->svcs, c->n_svcs, sizeof(*x), cmp_svc);

		if (!y || strcmp(x->ns, y->ns) || strcmp(x->name, y->name)) {
			snprintf(err, errlen, "incremental compile: service %s/%s port %u not in the previous result",
				 x->ns, x->name, ntohs(x->key.port));
			ret = -ESTALE;
			goto out;
		}
	}
	for (i = 0; i < b.c->n_svcs; i++) {
		struct ag_svc *y = bsearch(&b.c->svcs[i], c->svcs, c->n_svcs, sizeof(*y), cmp_svc);

		svc_entry_free(y);
		*y = b.c->svcs[i];
	}
	*n_entries = b.c->n_svcs;
	b.c->n_svcs = 0;	/* moved into c */
out:
	ag_compiled_free(b.c);	/* its notes: the same as c's (manifests only) */
	free(root);
	free(mark);
	return ret;
}

void ag_compiled_free(struct ag_compiled *c)
{
	int i;

	if (!c)
		return;
	for (i = 0; i < c->n_svcs; i++) {
		struct ag_svc *e = &c->svcs[i];

		be_clear(e);
		free(e->alias);
		free(e->ns);
		free(e->name);
		free(e->port_name);
		free(e->source);
	}
	free(c->svcs);
	for (i = 0; i < c->n_notes; i++)
		free(c->notes[i]);
	free(c->notes);
	free(c);
}
