/* test_compile.c — the pure compiler: alias tables give exact proportions,
 * Services / TrafficSplits / HTTPRoutes become the right weighted backends.
 * No BPF, no I/O: states are built by hand from the model's structs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/agent.h"

/* ---- alias tables ------------------------------------------------------ */

static double max_err(const double *w, int n)
{
	uint32_t thr[64], al[64];
	double sum = 0, worst = 0;
	int i;

	for (i = 0; i < n; i++)
		sum += w[i];
	if (ag_alias_build(w, n, thr, al))
		return 1;
	for (i = 0; i < n; i++) {
		double e = fabs(ag_alias_prob(thr, al, n, i) - w[i] / sum);

		if (e > worst)
			worst = e;
	}
	return worst;
}

static void test_alias(void)
{
	double w1[] = { 1 }, w2[] = { 1000, 500 }, w3[] = { 1, 2, 3, 4 };
	double w4[] = { 80, 20 }, w5[] = { 1, 1, 1 }, w6[64], w7[] = { 1e-6, 1 };
	uint32_t thr[4], al[4];
	int i;

	srand(7);
	for (i = 0; i < 64; i++)
		w6[i] = 1 + rand() % 1000;
	ok(max_err(w1, 1) < 1e-9, "alias: one backend gets everything");
	ok(max_err(w2, 2) < 1e-9, "alias: 1 : 500m is exactly 2/3 : 1/3");
	ok(max_err(w3, 4) < 1e-9, "alias: 1:2:3:4 exact");
	ok(max_err(w4, 2) < 1e-9, "alias: 80/20 exact");
	ok(max_err(w5, 3) < 1e-9, "alias: thirds exact");
	ok(max_err(w6, 64) < 1e-9, "alias: 64 random weights exact");
	ok(max_err(w7, 2) < 1e-9, "alias: tiny weight keeps its tiny share");
	ag_alias_build(w1, 1, thr, al);
	is_int(thr[0], 0xffffffffu, "alias: single entry always picks itself");
	is_int(ag_alias_build(w1, 0, thr, al), -EINVAL, "alias: n=0 rejected");
	{
		double bad[] = { 1, 0 };

		is_int(ag_alias_build(bad, 2, thr, al), -EINVAL, "alias: zero weight rejected");
	}
}

/* ---- hand-built states --------------------------------------------------- */

static uint32_t ip(const char *s)
{
	uint32_t v;

	inet_pton(AF_INET, s, &v);
	return v;
}

static struct md_pod pods[16];
static int n_pods;

static struct md_service *svc(struct md_state *st, const char *name, const char *vip,
			      uint16_t port, enum md_proto proto, int n_ep, const char *first_ep)
{
	struct md_service *s = &st->services[st->n_services++];
	int i;

	memset(s, 0, sizeof(*s));
	s->meta.name = (char *)name;
	s->meta.ns = (char *)"default";
	s->cluster_ip = vip ? ip(vip) : 0;
	s->headless = !vip;
	s->n_ports = 1;
	s->ports = calloc(1, sizeof(*s->ports));
	s->ports[0].port = port;
	s->ports[0].proto = proto;
	s->ports[0].name = (char *)"http";
	s->endpoints = calloc(1, sizeof(*s->endpoints));
	s->endpoints[0].n = n_ep;
	s->endpoints[0].v = calloc(n_ep ? n_ep : 1, sizeof(struct md_endpoint));
	for (i = 0; i < n_ep; i++) {
		struct md_pod *p = &pods[n_pods++];

		p->meta.name = (char *)name;
		p->meta.ns = (char *)"default";
		s->endpoints[0].v[i].pod = p;
		s->endpoints[0].v[i].ip = htonl(ntohl(ip(first_ep)) + i);
		s->endpoints[0].v[i].port = 8080;
	}
	return s;
}

static void free_state(struct md_state *st)
{
	int i;

	for (i = 0; i < st->n_services; i++) {
		free(st->services[i].ports);
		free(st->services[i].endpoints[0].v);
		free(st->services[i].endpoints);
	}
}

/* Share of backends whose address starts with prefix (sum of alias probs). */
static double share(const struct ag_svc *e, const char *first, int n)
{
	uint32_t lo = ntohl(ip(first)), a;
	uint32_t thr[ZH_LB_MAX_BACKENDS], al[ZH_LB_MAX_BACKENDS];
	double p = 0;
	int i, j;

	/* Recompute the kernel's view from the alias entries themselves. */
	for (i = 0; i < e->n_be; i++) {
		thr[i] = e->alias[i].threshold;
		al[i] = i;
		for (j = 0; j < e->n_be; j++)
			if (!memcmp(&e->alias[i].b, &e->be[j].be, sizeof(e->be[j].be)) &&
			    memcmp(&e->alias[i].a, &e->alias[i].b, sizeof(e->be[j].be)))
				al[i] = j;
	}
	for (i = 0; i < e->n_be; i++) {
		a = ntohl(ag_v4_of(e->be[i].be.addr));
		if (a >= lo && a < lo + (uint32_t)n)
			p += ag_alias_prob(thr, al, e->n_be, i);
	}
	return p;
}

static const struct ag_svc *find(const struct ag_compiled *c, const char *vip, uint16_t port,
				 uint8_t proto)
{
	int i;

	for (i = 0; i < c->n_svcs; i++)
		if (ag_v4_of(c->svcs[i].key.vip) == ip(vip) && ntohs(c->svcs[i].key.port) == port &&
		    c->svcs[i].key.proto == proto)
			return &c->svcs[i];
	return NULL;
}

static void test_services_and_split(void)
{
	struct md_service services[8];
	struct md_trafficsplit split = {};
	struct md_split_backend sb[3] = {};
	struct md_state st = { .services = services };
	struct ag_compiled *c = NULL;
	const struct ag_svc *e;
	char err[256] = "";
	int i, sorted = 1;

	n_pods = 0;
	svc(&st, "flaskapp", "10.96.0.20", 80, MD_PROTO_TCP, 0, "0.0.0.0");
	svc(&st, "flaskapp-v1", "10.96.0.21", 80, MD_PROTO_TCP, 2, "10.244.0.10");
	svc(&st, "flaskapp-v2", "10.96.0.22", 80, MD_PROTO_TCP, 1, "10.244.1.20");
	svc(&st, "empty", "10.96.0.23", 80, MD_PROTO_TCP, 0, "0.0.0.0");
	svc(&st, "dns", "10.96.0.10", 53, MD_PROTO_UDP, 3, "10.244.0.53");
	svc(&st, "headless", NULL, 80, MD_PROTO_TCP, 2, "10.244.0.99");
	split.meta.name = (char *)"flaskapp-split";
	split.meta.ns = (char *)"default";
	split.root = (char *)"flaskapp";
	split.root_svc = &services[0];
	split.backends = sb;
	split.n_backends = 3;
	sb[0] = (struct md_split_backend){ (char *)"flaskapp-v1", 1000, &services[1] };
	sb[1] = (struct md_split_backend){ (char *)"flaskapp-v2", 500, &services[2] };
	sb[2] = (struct md_split_backend){ (char *)"empty", 3000, &services[3] };
	st.splits = &split;
	st.n_splits = 1;

	is_int(ag_compile(&st, &c, err, sizeof(err)), 0, "compile: services + split");
	if (!c)
		return;
	is_int(c->n_svcs, 5, "compile: one entry per ClusterIP port, headless skipped");
	for (i = 1; i < c->n_svcs; i++)
		sorted &= memcmp(&c->svcs[i - 1].key, &c->svcs[i].key, sizeof(c->svcs[i].key)) < 0;
	ok(sorted, "compile: entries sorted by key, unique");

	e = find(c, "10.96.0.20", 80, ZH_LB_TCP);
	ok(e && e->n_be == 3, "split root: 3 backends (2 of v1, 1 of v2, none of the empty one)");
	if (e) {
		ok(fabs(share(e, "10.244.0.10", 2) - 2.0 / 3) < 1e-9, "split root: v1 share exactly 2/3");
		ok(fabs(share(e, "10.244.1.20", 1) - 1.0 / 3) < 1e-9, "split root: v2 share exactly 1/3");
		ok(e->flags & ZH_LB_F_SPLIT, "split root: flagged as split");
		ok(strstr(e->source, "TrafficSplit default/flaskapp-split") != NULL,
		   "split root: source names the split");
	}
	e = find(c, "10.96.0.21", 80, ZH_LB_TCP);
	ok(e && e->n_be == 2 && fabs(share(e, "10.244.0.10", 1) - 0.5) < 1e-9,
	   "plain service: endpoints equally weighted");
	e = find(c, "10.96.0.23", 80, ZH_LB_TCP);
	ok(e && e->n_be == 0, "service without endpoints: entry with no backend (refuse)");
	e = find(c, "10.96.0.10", 53, ZH_LB_UDP);
	ok(e && e->n_be == 3 && ntohs(e->be[0].be.port) == 8080, "UDP service: proto 17, targetPort");
	ag_compiled_free(c);

	/* The only backend with endpoints is empty -> no backend at all. */
	sb[0].weight_milli = 0;
	sb[1].svc = &services[3];
	c = NULL;
	ag_compile(&st, &c, err, sizeof(err));
	e = c ? find(c, "10.96.0.20", 80, ZH_LB_TCP) : NULL;
	ok(e && e->n_be == 0, "split with only empty/zero-weight backends: refuse");
	ag_compiled_free(c);

	/* A backend Service that does not exist yet (issue 21): no share. */
	sb[0].weight_milli = 1000;
	sb[1] = (struct md_split_backend){ (char *)"later", 1000, NULL };
	split.n_backends = 2;
	c = NULL;
	is_int(ag_compile(&st, &c, err, sizeof(err)), 0, "compile: split with a missing backend");
	e = c ? find(c, "10.96.0.20", 80, ZH_LB_TCP) : NULL;
	ok(e && e->n_be == 2 && fabs(share(e, "10.244.0.10", 2) - 1) < 1e-9,
	   "missing backend Service: its weight is not served, v1 gets everything");
	ag_compiled_free(c);

	/* SMI matches: per request, so the root goes to the node proxy and
	 * keeps its own endpoints (none here) instead of the L4 split. */
	{
		struct md_split_match m = { (char *)"HTTPRouteGroup", (char *)"g", 1 };

		split.matches = &m;
		split.n_matches = 1;
		c = NULL;
		is_int(ag_compile(&st, &c, err, sizeof(err)), 0, "compile: split with matches");
		e = c ? find(c, "10.96.0.20", 80, ZH_LB_TCP) : NULL;
		ok(e && (e->flags & ZH_LB_F_L7) && !(e->flags & ZH_LB_F_SPLIT) && e->n_be == 0,
		   "split with matches: root flagged L7, not split at L4, own endpoints kept");
		ag_compiled_free(c);
		split.matches = NULL;
		split.n_matches = 0;
	}
	free_state(&st);
}

static void test_routes(void)
{
	struct md_service services[8];
	struct md_httproute r[2] = {};
	struct md_parent_ref pr[2] = {};
	struct md_route_rule rule[2] = {};
	struct md_backend_ref br[3] = {};
	struct md_filter filt = {};
	struct md_state st = { .services = services };
	struct ag_compiled *c = NULL;
	const struct ag_svc *e;
	char err[256] = "";

	n_pods = 0;
	svc(&st, "web", "10.96.1.1", 80, MD_PROTO_TCP, 1, "10.244.2.1");
	svc(&st, "web-a", "10.96.1.2", 80, MD_PROTO_TCP, 1, "10.244.2.10");
	svc(&st, "web-b", "10.96.1.3", 80, MD_PROTO_TCP, 2, "10.244.2.20");
	svc(&st, "web-c", "10.96.1.4", 80, MD_PROTO_TCP, 1, "10.244.2.30");
	svc(&st, "api", "10.96.1.5", 80, MD_PROTO_TCP, 1, "10.244.2.40");
	pr[0] = (struct md_parent_ref){ (char *)"", (char *)"Service", (char *)"web", (char *)"default", 0 };
	pr[1] = (struct md_parent_ref){ (char *)"", (char *)"Service", (char *)"api", (char *)"default", 80 };
	br[0] = (struct md_backend_ref){ .name = (char *)"web-a", .weight = 1, .svc = &services[1] };
	br[1] = (struct md_backend_ref){ .name = (char *)"web-b", .weight = 2, .svc = &services[2] };
	br[2] = (struct md_backend_ref){ .name = (char *)"web-c", .weight = 3, .svc = &services[3] };
	rule[0].backends = br;
	rule[0].n_backends = 3;
	r[0].meta.name = (char *)"three-way";
	r[0].meta.ns = (char *)"default";
	r[0].parents = &pr[0];
	r[0].n_parents = 1;
	r[0].rules = &rule[0];
	r[0].n_rules = 1;
	/* An L7 route: a filter. */
	filt.type = MD_FILTER_REQUEST_HEADER_MODIFIER;
	rule[1].filters = &filt;
	rule[1].n_filters = 1;
	rule[1].backends = &br[0];
	rule[1].n_backends = 1;
	r[1].meta.name = (char *)"needs-l7";
	r[1].meta.ns = (char *)"default";
	r[1].parents = &pr[1];
	r[1].n_parents = 1;
	r[1].rules = &rule[1];
	r[1].n_rules = 1;
	st.routes = r;
	st.n_routes = 2;

	is_int(ag_compile(&st, &c, err, sizeof(err)), 0, "compile: routes");
	if (!c)
		return;
	e = find(c, "10.96.1.1", 80, ZH_LB_TCP);
	ok(e && e->n_be == 4, "route: parent gets the backendRefs' endpoints");
	if (e) {
		ok(fabs(share(e, "10.244.2.10", 1) - 1.0 / 6) < 1e-9, "route: web-a 1/6");
		ok(fabs(share(e, "10.244.2.20", 2) - 2.0 / 6) < 1e-9, "route: web-b 2/6 over 2 pods");
		ok(fabs(share(e, "10.244.2.30", 1) - 3.0 / 6) < 1e-9, "route: web-c 3/6");
		ok(!(e->flags & ZH_LB_F_L7), "route with weights only: enforced at L4");
	}
	e = find(c, "10.96.1.5", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_L7) && e->n_be == 1 &&
	   ag_v4_of(e->be[0].be.addr) == ip("10.244.2.40"),
	   "route with a filter: flagged L7, own endpoints kept");
	ok(c->n_notes >= 1 && strstr(c->notes[0], "enforced by the node L7 proxy"),
	   "route with a filter: a note says the node proxy enforces it");
	ag_compiled_free(c);
	free_state(&st);
}

/* zerohop.io/l7: "true" opts a Service's TCP ports into the proxy; its
 * UDP ports, other values and other Services stay at L4. */
static void test_l7_annotation(void)
{
	struct md_service services[4];
	struct md_kv yes = { (char *)ZH_LB_ANN_L7, (char *)"true" };
	struct md_kv no = { (char *)ZH_LB_ANN_L7, (char *)"false" };
	struct md_state st = { .services = services };
	struct ag_compiled *c = NULL;
	const struct ag_svc *e;
	char err[256] = "";

	n_pods = 0;
	svc(&st, "opt-in", "10.96.2.1", 80, MD_PROTO_TCP, 2, "10.244.3.1")->meta.annotations =
		(struct md_labels){ &yes, 1 };
	svc(&st, "opt-in-udp", "10.96.2.2", 53, MD_PROTO_UDP, 1, "10.244.3.10")->meta.annotations =
		(struct md_labels){ &yes, 1 };
	svc(&st, "opt-out", "10.96.2.3", 80, MD_PROTO_TCP, 1, "10.244.3.20")->meta.annotations =
		(struct md_labels){ &no, 1 };
	svc(&st, "plain", "10.96.2.4", 80, MD_PROTO_TCP, 1, "10.244.3.30");
	is_int(ag_compile(&st, &c, err, sizeof(err)), 0, "compile: l7 annotation");
	if (!c)
		return;
	e = find(c, "10.96.2.1", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_L7) && e->n_be == 2, "annotated TCP service: flagged L7, endpoints kept");
	e = find(c, "10.96.2.2", 53, ZH_LB_UDP);
	ok(e && !(e->flags & ZH_LB_F_L7), "annotated UDP service: stays at L4");
	e = find(c, "10.96.2.3", 80, ZH_LB_TCP);
	ok(e && !(e->flags & ZH_LB_F_L7), "annotation value other than \"true\": L4");
	e = find(c, "10.96.2.4", 80, ZH_LB_TCP);
	ok(e && !(e->flags & ZH_LB_F_L7), "service without the annotation: L4");
	{
		int changed[1] = { 0 }, n_e = 0;

		is_int(ag_compile_update(&st, c, changed, 1, &n_e, err, sizeof(err)), 0,
		       "incremental compile of the annotated service");
		e = find(c, "10.96.2.1", 80, ZH_LB_TCP);
		ok(e && (e->flags & ZH_LB_F_L7), "... keeps it flagged L7");
	}
	ag_compiled_free(c);
	free_state(&st);
}

static void test_limits(void)
{
	struct md_service services[1];
	struct md_state st = { .services = services };
	struct ag_compiled *c = NULL;
	char err[256] = "";

	n_pods = 0;
	svc(&st, "big", "10.96.2.1", 80, MD_PROTO_TCP, 0, "10.0.0.1");
	free(services[0].endpoints[0].v);
	services[0].endpoints[0].n = ZH_LB_MAX_BACKENDS + 1;
	services[0].endpoints[0].v = calloc(ZH_LB_MAX_BACKENDS + 1, sizeof(struct md_endpoint));
	for (int i = 0; i <= ZH_LB_MAX_BACKENDS; i++) {	/* IPv4 endpoints (ip 0: IPv6-only) */
		services[0].endpoints[0].v[i].ip = htonl(0x0a000001u + (uint32_t)i);
		services[0].endpoints[0].v[i].port = 80;
	}
	is_int(ag_compile(&st, &c, err, sizeof(err)), -E2BIG, "compile: too many backends -> E2BIG");
	ok(strstr(err, "more than the limit") != NULL, "compile: limit error names the service: %s", err);
	ok(c == NULL, "compile: nothing returned on error");
	free_state(&st);
}

int main(void)
{
	test_alias();
	test_services_and_split();
	test_routes();
	test_l7_annotation();
	test_limits();
	return done_testing();
}
