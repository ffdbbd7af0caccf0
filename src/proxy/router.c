/* router.c — compile the model's HTTPRoutes / TrafficSplits into a route
 * table, and route one request (px_route). No I/O.
 *
 * Invariants:
 * 1. A table is immutable after px_table_build(); only its refcount changes.
 *    It owns the md_state it was built from, so md_filter / md_header_mod
 *    pointers handed out in a px_decision stay valid while the caller holds
 *    a reference.
 * 2. Every Service port (with a ClusterIP) has exactly one px_svc, whose
 *    matches are sorted by precedence (proxy.h); px_route() takes the first
 *    match that accepts the request.
 * 3. Weights are uint64 products of backendRef weight and TrafficSplit
 *    weight_milli; a backend with weight 0 or no endpoints is never chosen
 *    unless every backend has weight 0 (then PX_NO_BACKEND).
 * 4. A backend carrying a px_ab (a split with SMI matches) is eligible only
 *    on its side: the split's backends when the request matches the
 *    split's groups, the root's own endpoints when it does not; the total
 *    weight is summed per request over eligible backends.
 * 5. A match of a consumer route (consumer_ns set) is considered only for
 *    clients of that namespace, and then only consumer matches of that
 *    namespace are; every other client sees only producer matches. A
 *    Service port with no producer match has the implicit catch-all.
 * 6. Mirrors (px_rule.mirrors) never change the forwarded decision: they
 *    are chosen after it, from their own random draw.
 * 7. GRPCRoute matches are paths (src/model/decode_grpc.c G1) and come
 *    before every HTTPRoute match of the same Service port; among
 *    themselves they follow GRPCRoute's precedence (G2): longer service,
 *    longer method, Exact before RegularExpression, more header matches,
 *    then route name, rule and match order.
 */
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>

#include "zerohop/log.h"
#include "zerohop/proxy.h"

const char px_err_connect[] = "upstream connect failed";
const char px_err_no_backend[] = "no backend endpoint";
const char px_err_bad_upstream[] = "malformed upstream response";
const char px_err_upstream_closed[] = "upstream closed early";
const char px_err_no_route[] = "no route matched";
const char px_err_no_service[] = "unknown destination service";
const char px_err_connect_timeout[] = "upstream connect timed out";
const char px_err_timeout[] = "request timed out";
const char px_err_overflow[] = "upstream pool overflow";
const char px_err_stream_idle[] = "stream timeout";	/* (Envoy's local reply text) */
const struct px_pool_policy px_pool_default = {
	.max_connections = 1024,	/* Envoy circuit breaker defaults */
	.max_pending = 1024,
};

const struct px_retry_policy px_retry_default = {
	.retries = 2,
	.on = PX_RETRY_CONNECT | PX_RETRY_RESET,
	.codes = { 1ull << 3, 0 },	/* 503 */
	.grpc = 1u << 14 | 1u << 1,	/* UNAVAILABLE, CANCELLED (Istio's default) */
};

const struct px_lb_policy px_lb_default = { .kind = PX_LB_P2C_EWMA };

#define PX_ANN_LB	"zerohop.io/lb-policy"
#define PX_ANN_HASH_ON	"zerohop.io/hash-on"

static int px_lb_parse(const struct md_httproute *rt, struct px_lb_policy *p, char *err,
		       size_t errlen)
{
	const struct md_labels *a = &rt->meta.annotations;
	const char *v;

	*p = px_lb_default;
	if ((v = md_labels_get(a, PX_ANN_LB))) {
		if (!strcmp(v, "p2c-ewma"))
			p->kind = PX_LB_P2C_EWMA;
		else if (!strcmp(v, "round-robin"))
			p->kind = PX_LB_ROUND_ROBIN;
		else if (!strcmp(v, "ring-hash"))
			p->kind = PX_LB_RING_HASH;
		else {
			snprintf(err, errlen, "%s/%s: annotation %s \"%s\": want p2c-ewma, "
				 "round-robin or ring-hash", rt->meta.ns, rt->meta.name, PX_ANN_LB, v);
			return -EINVAL;
		}
	}
	if ((v = md_labels_get(a, PX_ANN_HASH_ON))) {
		if (!strcmp(v, "source-ip")) {
			p->hash_on = PX_HASH_SOURCE_IP;
		} else if (!strncmp(v, "header:", 7) && v[7] && strlen(v + 7) < sizeof(p->hash_name)) {
			p->hash_on = PX_HASH_HEADER;
			snprintf(p->hash_name, sizeof(p->hash_name), "%s", v + 7);
		} else if (!strncmp(v, "cookie:", 7) && v[7] && strlen(v + 7) < sizeof(p->hash_name)) {
			p->hash_on = PX_HASH_COOKIE;
			snprintf(p->hash_name, sizeof(p->hash_name), "%s", v + 7);
		} else {
			snprintf(err, errlen, "%s/%s: annotation %s \"%s\": want source-ip, "
				 "header:NAME or cookie:NAME (NAME < 64 bytes)", rt->meta.ns,
				 rt->meta.name, PX_ANN_HASH_ON, v);
			return -EINVAL;
		}
	}
	return 0;
}

#define PX_ANN_RETRIES	"zerohop.io/retries"
#define PX_ANN_RETRY_ON	"zerohop.io/retry-on"
#define PX_ANN_PER_TRY	"zerohop.io/per-try-timeout"

/* Parse the retry annotations of an HTTPRoute into p (defaults first).
 * Errors name the route, annotation and bad value. */
static int px_retry_parse(const struct md_httproute *rt, struct px_retry_policy *p, char *err,
			  size_t errlen)
{
	const struct md_labels *a = &rt->meta.annotations;
	const char *v;
	char *end;

	*p = px_retry_default;
	if ((v = md_labels_get(a, PX_ANN_RETRIES))) {
		long n = strtol(v, &end, 10);

		if (!*v || *end || n < 0 || n > PX_RETRY_MAX) {
			snprintf(err, errlen, "%s/%s: annotation %s \"%s\": want 0..%d", rt->meta.ns,
				 rt->meta.name, PX_ANN_RETRIES, v, PX_RETRY_MAX);
			return -EINVAL;
		}
		p->retries = n;
	}
	if ((v = md_labels_get(a, PX_ANN_RETRY_ON))) {
		const char *q = v;

		p->on = 0;
		p->codes[0] = p->codes[1] = 0;
		p->grpc = 0;
		while (*q) {
			const char *e = strchr(q, ',');
			size_t n = e ? (size_t)(e - q) : strlen(q);
			char tok[32];
			long code;

			while (n && (*q == ' ')) {
				q++;
				n--;
			}
			while (n && q[n - 1] == ' ')
				n--;
			snprintf(tok, sizeof(tok), "%.*s", (int)(n < 31 ? n : 31), q);
			if (!strcmp(tok, "connect-failure")) {
				p->on |= PX_RETRY_CONNECT;
			} else if (!strcmp(tok, "reset")) {
				p->on |= PX_RETRY_RESET;
			} else if (!strcmp(tok, "5xx")) {
				p->codes[0] = ~0ull;
				p->codes[1] = (1ull << 36) - 1;	/* 564..599 */
			} else if (!strcmp(tok, "gateway-error")) {
				p->codes[0] |= 7ull << 2;	/* 502, 503, 504 */
			} else if (!strcmp(tok, "unavailable")) {
				p->codes[0] |= 1ull << 3;
				p->grpc |= 1u << 14;
			} else if (!strcmp(tok, "cancelled")) {
				p->grpc |= 1u << 1;
			} else if (!strcmp(tok, "deadline-exceeded")) {
				p->grpc |= 1u << 4;
			} else if (!strcmp(tok, "resource-exhausted")) {
				p->grpc |= 1u << 8;
			} else if (!strcmp(tok, "internal")) {
				p->grpc |= 1u << 13;
			} else if (n == 3 && (code = strtol(tok, &end, 10)) >= 500 && code <= 599 &&
				   !*end) {
				p->codes[(code - 500) / 64] |= 1ull << ((code - 500) % 64);
			} else {
				snprintf(err, errlen, "%s/%s: annotation %s \"%s\": unknown condition "
					 "\"%s\" (want connect-failure, reset, 5xx, gateway-error, "
					 "unavailable, cancelled, deadline-exceeded, internal, "
					 "resource-exhausted or a status 500..599)", rt->meta.ns, rt->meta.name,
					 PX_ANN_RETRY_ON, v, tok);
				return -EINVAL;
			}
			q = e ? e + 1 : q + n;
		}
	}
	if ((v = md_labels_get(a, PX_ANN_PER_TRY))) {
		if (md_duration_ms(v, &p->per_try_ms) || !p->per_try_ms) {
			snprintf(err, errlen, "%s/%s: annotation %s \"%s\": want a positive duration "
				 "like 200ms", rt->meta.ns, rt->meta.name, PX_ANN_PER_TRY, v);
			return -EINVAL;
		}
	}
	return 0;
}


/* Compiled HTTPRouteGroup matches of one TrafficSplit (SMI): a request
 * matches when any match accepts it; a match needs every given condition. */
struct px_ab_hdr {
	const char *name;
	regex_t re;		/* searched in the header's value (unanchored) */
};

struct px_ab_m {
	bool has_path;
	regex_t path;		/* anchored at the start of the path */
	char **methods;		/* none, or "*", = any */
	int n_methods;
	struct px_ab_hdr *hdr;
	int n_hdr;
};

struct px_ab {
	struct px_ab_m *m;
	int n;
};

struct px_backend {
	char *name;		/* "ns/svc" */
	const struct px_ab *ab;	/* split with matches: only when ... */
	uint8_t ab_side;	/* ... the request matches ab (1) or does not (2) */
	uint64_t weight;
	struct px_ep *eps;
	int n_eps;
	bool invalid;		/* unresolved ref: Gateway API answers 500 */
	uint32_t rr;		/* round-robin position (mutable: single thread) */
	struct px_pool_policy pool;	/* from the backend Service's annotations */
	const struct md_header_mod *req_mod;	/* backendRef filters, or NULL */
	const struct md_header_mod *resp_mod;
};

struct px_rule {
	char *name;		/* "ns/route#i" */
	struct px_retry_policy retry;
	struct px_lb_policy lb;
	const struct md_route_rule *src;	/* NULL for the implicit rule */
	struct px_backend *backends;
	int n_backends;
	uint64_t total_weight;	/* of valid backends with endpoints */
	const struct md_filter *redirect;	/* RequestRedirect, or NULL */
	const struct md_filter *rewrite;	/* URLRewrite, or NULL */
	const struct md_header_mod *req_mod;
	const struct md_header_mod *resp_mod;
	struct px_mirror *mirrors;	/* RequestMirror filters */
	int n_mirrors;
};

struct px_mirror {
	struct px_backend be;	/* invalid when the Service does not exist */
	uint32_t permille;	/* share of requests mirrored */
};

struct px_strm {		/* compiled header / query match */
	const struct md_header_match *m;
	bool is_re;
	regex_t re;
};

struct px_match {
	const struct px_rule *rule;
	enum md_path_type path_type;
	const char *path;	/* prefix normalised: no trailing '/' (except "/") */
	size_t path_len;
	bool has_re;
	regex_t re;
	const char *method;
	struct px_strm *hdr;
	int n_hdr;
	struct px_strm *qry;
	int n_qry;
	const char *consumer_ns;	/* GAMMA consumer route: its namespace; NULL = producer */
	/* sort keys; grpc: from a GRPCRoute (invariant 7) */
	bool grpc, grpc_regex;
	int grpc_svc_len, grpc_method_len;
	const char *route_key;	/* "ns/name" */
	int rule_idx, match_idx;
};

struct px_svc {
	char *name;		/* "ns/name:port" */
	const struct md_service *svc;
	int port_idx;
	uint32_t ip;		/* IPv4 ClusterIP, 0 = none */
	uint32_t ip6low;	/* last 32 bits of its IPv6 ClusterIP (px_table_find_ip6low) */
	bool has_ip6;		/* it has an IPv6 ClusterIP */
	uint16_t port;
	struct px_match *matches;
	int n_matches;
	bool has_consumer;	/* some match is from a consumer route */
};

struct px_client_ent {
	uint32_t ip;
	const char *ns;
};

struct px_ip6_ent {		/* a pod's IPv6 <-> its IPv4 (px_table_ip4_of6, _ip6_of4) */
	uint8_t ip6[16];
	uint32_t ip;
};

struct px_table {
	int refs;
	uint64_t gen;
	struct md_state *st;
	struct px_svc *svcs;
	int n_svcs;
	struct px_rule **rules;	/* all rules, owned, for freeing */
	int n_rules;
	struct px_ep *ep_keys;	/* every endpoint, sorted (px_ep_cmp), built on
				 * first px_table_has_ep (lazily: a reload-time cost) */
	int n_ep_keys;
	struct px_ab **abs;	/* compiled split matches, owned */
	int n_abs;
	bool has_consumer;	/* any consumer route: client namespaces needed */
	struct px_client_ent *clients;	/* pod ip -> namespace, sorted, lazily */
	int n_clients;
	bool clients_built;
	struct px_ip6_ent *ip6s;	/* pod IPv6 -> IPv4, sorted, lazily */
	struct px_ip6_ent *ip4s;	/* the same pairs sorted by IPv4 (px_table_ip6_of4) */
	int n_ip6s;
	bool ip6s_built;
};

static uint64_t px_gen_counter;

static char *px_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *px_asprintf(const char *fmt, ...)
{
	va_list ap;
	char tmp[512];

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	return zh_strdup(tmp);
}

/* Port index of svc for a port number (0 = fallback index). */
static int px_port_idx(const struct md_service *svc, uint16_t port, int fallback)
{
	int i;

	if (!port)
		return fallback < svc->n_ports ? fallback : 0;
	for (i = 0; i < svc->n_ports; i++)
		if (svc->ports[i].port == port)
			return i;
	return -1;
}

static const struct md_trafficsplit *px_split_of(const struct md_state *st,
						 const struct md_service *svc)
{
	int i;

	for (i = 0; i < st->n_splits; i++)
		if (st->splits[i].root_svc == svc)
			return &st->splits[i];
	return NULL;
}

#define PX_ANN_MAX_CONNS	"zerohop.io/max-connections"
#define PX_ANN_MAX_PENDING	"zerohop.io/max-pending-requests"
#define PX_ANN_MAX_RPC		"zerohop.io/max-requests-per-connection"

/* Parse the pool annotations of a Service into p (defaults first). Errors
 * name the service, annotation and bad value. */
static int px_pool_parse(const struct md_service *svc, struct px_pool_policy *p, char *err,
			 size_t errlen)
{
	static const struct {
		const char *key;
		size_t off;
		unsigned long min;
	} f[] = {
		{ PX_ANN_MAX_CONNS, offsetof(struct px_pool_policy, max_connections), 1 },
		{ PX_ANN_MAX_PENDING, offsetof(struct px_pool_policy, max_pending), 0 },
		{ PX_ANN_MAX_RPC, offsetof(struct px_pool_policy, max_requests_per_conn), 0 },
	};
	const char *v;
	char *end;
	size_t i;

	*p = px_pool_default;
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		unsigned long n;

		if (!(v = md_labels_get(&svc->meta.annotations, f[i].key)))
			continue;
		n = strtoul(v, &end, 10);
		if (!*v || *end || *v == '-' || n < f[i].min || n > 1000000) {
			snprintf(err, errlen, "service %s/%s: annotation %s \"%s\": want %lu..1000000",
				 svc->meta.ns, svc->meta.name, f[i].key, v, f[i].min);
			return -EINVAL;
		}
		*(uint32_t *)((char *)p + f[i].off) = n;
	}
	return 0;
}

/* Istio's protocol selection for a Service port: HTTP/2 cleartext? */
static bool px_port_h2c(const struct md_service_port *sp)
{
	const char *a = sp->app_protocol, *n = sp->name;

	if (a)
		return !strcmp(a, "kubernetes.io/h2c") || !strcmp(a, "grpc") ||
		       !strcmp(a, "http2");
	return n && (!strcmp(n, "grpc") || !strcmp(n, "http2") || !strncmp(n, "grpc-", 5) ||
		     !strncmp(n, "http2-", 6));
}

/* Whether svc's endpoints are reached over IPv6: an IPv6 single-stack
 * Service's are (its EndpointSlices hold its pods' IPv6 addresses, as
 * Kubernetes'); an IPv4 or dual-stack Service's over IPv4, as always (a
 * pod without an IPv4 address is then left out, as the agent's rule 5
 * leaves it out of IPv4 entries). */
static bool px_svc_v6(const struct md_service *svc)
{
	return svc->n_families == 1 && svc->families[0] == MD_FAM_V6;
}

static void px_backend_fill(struct px_backend *b, const struct md_service *svc, int pidx,
			    uint64_t weight)
{
	bool v6 = px_svc_v6(svc);
	char e[8];
	int i, n;

	b->name = px_asprintf("%s/%s", svc->meta.ns, svc->meta.name);
	if (px_pool_parse(svc, &b->pool, e, sizeof(e)))	/* validated in px_table_build */
		b->pool = px_pool_default;
	b->weight = weight;
	if (pidx < 0 || pidx >= svc->n_ports || !svc->endpoints) {
		b->invalid = pidx < 0;
		return;
	}
	b->pool.h2c = px_port_h2c(&svc->ports[pidx]);
	n = svc->endpoints[pidx].n;
	b->eps = zh_calloc(n ? n : 1, sizeof(*b->eps));
	for (i = 0; i < n; i++) {
		const struct md_endpoint *ep = &svc->endpoints[pidx].v[i];
		struct px_ep *x = &b->eps[b->n_eps];

		if (v6 && ep->pod && !IN6_IS_ADDR_UNSPECIFIED(&ep->pod->ip6))
			x->ip = px_ip6(ep->pod->ip6.s6_addr);
		else if (!v6 && ep->ip)
			x->ip = px_ip4(ep->ip);
		else
			continue;	/* no address of the family */
		x->port = ep->port;
		b->n_eps++;
	}
}

/* Compile the HTTPRouteGroups a split's matches name (merged, SMI) into a
 * new px_ab owned by t. A group that does not exist (yet) adds nothing, so
 * with none the split matches no request. Regexes were checked when the
 * groups were decoded; a match whose regex fails here is dropped (the
 * group can only match less, never more). */
static const struct px_ab *px_ab_build(struct px_table *t, const struct md_trafficsplit *sp)
{
	struct px_ab *ab = zh_calloc(1, sizeof(*ab));
	int i, j, k;

	t->abs = zh_realloc(t->abs, (t->n_abs + 1) * sizeof(*t->abs));
	t->abs[t->n_abs++] = ab;
	for (i = 0; i < sp->n_matches; i++) {
		const struct md_routegroup *g = md_find_routegroup(t->st, sp->meta.ns,
								   sp->matches[i].name);

		for (j = 0; g && j < g->n_matches; j++) {
			const struct md_rg_match *gm = &g->matches[j];
			struct px_ab_m *m;
			bool bad = false;

			ab->m = zh_realloc(ab->m, (ab->n + 1) * sizeof(*ab->m));
			m = &ab->m[ab->n];
			memset(m, 0, sizeof(*m));
			if (gm->path_regex) {
				char *pat = px_asprintf("^(%s)", gm->path_regex);

				bad = regcomp(&m->path, pat, REG_EXTENDED | REG_NOSUB) != 0;
				free(pat);
				m->has_path = !bad;
			}
			m->methods = gm->methods;
			m->n_methods = gm->n_methods;
			m->hdr = zh_calloc(gm->headers.n + 1, sizeof(*m->hdr));
			for (k = 0; !bad && k < gm->headers.n; k++) {
				m->hdr[k].name = gm->headers.v[k].key;
				bad = regcomp(&m->hdr[k].re, gm->headers.v[k].value,
					      REG_EXTENDED | REG_NOSUB) != 0;
				if (!bad)
					m->n_hdr++;
			}
			if (bad) {	/* not kept: could only match too much */
				for (k = 0; k < m->n_hdr; k++)
					regfree(&m->hdr[k].re);
				if (m->has_path)
					regfree(&m->path);
				free(m->hdr);
				continue;
			}
			ab->n++;
		}
	}
	return ab;
}

static void px_ab_free(struct px_ab *ab)
{
	for (int i = 0; i < ab->n; i++) {
		for (int k = 0; k < ab->m[i].n_hdr; k++)
			regfree(&ab->m[i].hdr[k].re);
		if (ab->m[i].has_path)
			regfree(&ab->m[i].path);
		free(ab->m[i].hdr);
	}
	free(ab->m);
	free(ab);
}

/* Append the backends for (svc, port) with weight w, expanding a split
 * rooted at svc. A split with matches adds its backends for matching
 * requests and the root's own endpoints for the others. A split backend
 * whose Service does not exist (yet) gets no share, like one without
 * endpoints (SMI: its weight is not served). */
static void px_rule_add_svc(struct px_table *t, struct px_rule *r,
			    const struct md_service *svc, uint16_t port, int fallback_idx,
			    uint64_t w, const struct md_filter *filters, int n_filters)
{
	const struct md_trafficsplit *sp = px_split_of(t->st, svc);
	const struct md_header_mod *rq = NULL, *rs = NULL;
	const struct px_ab *ab = sp && sp->n_matches ? px_ab_build(t, sp) : NULL;
	int pidx = px_port_idx(svc, port, fallback_idx);
	int i, n = sp ? sp->n_backends + (ab ? 1 : 0) : 1;

	for (i = 0; i < n_filters; i++) {
		if (filters[i].type == MD_FILTER_REQUEST_HEADER_MODIFIER)
			rq = &filters[i].headers;
		else if (filters[i].type == MD_FILTER_RESPONSE_HEADER_MODIFIER)
			rs = &filters[i].headers;
	}
	r->backends = zh_realloc(r->backends, (r->n_backends + n) * sizeof(*r->backends));
	for (i = 0; i < n; i++) {
		struct px_backend *b = &r->backends[r->n_backends++];

		memset(b, 0, sizeof(*b));
		b->req_mod = rq;
		b->resp_mod = rs;
		if (!sp || (ab && i == sp->n_backends)) {
			/* the Service itself, or a split's non-matching requests */
			px_backend_fill(b, svc, pidx, w * 1000);
			b->ab = ab;
			b->ab_side = ab ? 2 : 0;
			continue;
		}
		b->ab = ab;
		b->ab_side = ab ? 1 : 0;
		/* a split backend is addressed on the root's port number */
		const struct md_service *bs = sp->backends[i].svc;
		uint16_t pn = pidx >= 0 ? svc->ports[pidx].port : port;

		if (!bs) {
			b->name = zh_strdup(sp->backends[i].service);
			b->pool = px_pool_default;
			continue;	/* no endpoints: no share */
		}
		px_backend_fill(b, bs, px_port_idx(bs, pn, 0), w * sp->backends[i].weight_milli);
	}
}

static void px_rule_finish(struct px_rule *r)
{
	int i;

	r->total_weight = 0;
	for (i = 0; i < r->n_backends; i++)
		if (!r->backends[i].invalid && r->backends[i].n_eps)
			r->total_weight += r->backends[i].weight;
}

static struct px_rule *px_rule_new(struct px_table *t)
{
	struct px_rule *r = zh_calloc(1, sizeof(*r));

	r->retry = px_retry_default;
	r->lb = px_lb_default;
	t->rules = zh_realloc(t->rules, (t->n_rules + 1) * sizeof(*t->rules));
	t->rules[t->n_rules++] = r;
	return r;
}

static int px_compile_strm(struct px_strm *s, const struct md_header_match *m, const char *what,
			   const char *rname, char *err, size_t errlen)
{
	char *pat;
	int rc;

	s->m = m;
	if (m->type != MD_MATCH_REGEX)
		return 0;
	pat = px_asprintf("^(%s)$", m->value);
	rc = regcomp(&s->re, pat, REG_EXTENDED | REG_NOSUB);
	free(pat);
	if (rc) {
		snprintf(err, errlen, "%s: %s \"%s\": invalid regular expression \"%s\"", rname,
			 what, m->name, m->value);
		return -EINVAL;
	}
	s->is_re = true;
	return 0;
}

static int px_add_match(struct px_svc *ps, const struct px_rule *rule,
			const struct md_route_match *m, const char *route_key, int ri, int mi,
			bool grpc, char *err, size_t errlen)
{
	struct px_match *x;
	int i, rc;

	ps->matches = zh_realloc(ps->matches, (ps->n_matches + 1) * sizeof(*ps->matches));
	x = &ps->matches[ps->n_matches++];
	memset(x, 0, sizeof(*x));
	x->grpc = grpc;
	if (m) {
		x->grpc_regex = m->grpc_regex;
		x->grpc_svc_len = m->grpc_svc_len;
		x->grpc_method_len = m->grpc_method_len;
	}
	x->rule = rule;
	x->route_key = route_key;
	x->rule_idx = ri;
	x->match_idx = mi;
	x->path_type = m && m->path ? m->path_type : MD_PATH_PREFIX;
	if (x->path_type == MD_PATH_NONE)
		x->path_type = MD_PATH_PREFIX;
	x->path = m && m->path ? m->path : "/";
	x->path_len = strlen(x->path);
	if (x->path_type == MD_PATH_PREFIX)
		while (x->path_len > 1 && x->path[x->path_len - 1] == '/')
			x->path_len--;
	if (x->path_type == MD_PATH_REGEX) {
		char *pat = px_asprintf("^(%s)$", x->path);

		rc = regcomp(&x->re, pat, REG_EXTENDED | REG_NOSUB);
		free(pat);
		if (rc) {
			snprintf(err, errlen, "%s: invalid path regular expression \"%s\"",
				 rule->name, x->path);
			return -EINVAL;
		}
		x->has_re = true;
	}
	if (!m)
		return 0;
	x->method = m->method;
	x->hdr = zh_calloc(m->n_headers + 1, sizeof(*x->hdr));
	for (i = 0; i < m->n_headers; i++, x->n_hdr++)
		if ((rc = px_compile_strm(&x->hdr[i], &m->headers[i], "header", rule->name, err,
					  errlen)))
			return rc;
	x->qry = zh_calloc(m->n_query + 1, sizeof(*x->qry));
	for (i = 0; i < m->n_query; i++, x->n_qry++)
		if ((rc = px_compile_strm(&x->qry[i], &m->query[i], "queryParam", rule->name, err,
					  errlen)))
			return rc;
	return 0;
}

static int px_path_rank(enum md_path_type t)
{
	return t == MD_PATH_EXACT ? 0 : t == MD_PATH_REGEX ? 1 : 2;
}

/* qsort comparator implementing the precedence of proxy.h. */
static int px_match_cmp(const void *pa, const void *pb)
{
	const struct px_match *a = pa, *b = pb;
	int c;

	if (a->grpc != b->grpc)
		return a->grpc ? -1 : 1;	/* invariant 7 */
	if (a->grpc) {
		if (a->grpc_svc_len != b->grpc_svc_len)
			return b->grpc_svc_len - a->grpc_svc_len;
		if (a->grpc_method_len != b->grpc_method_len)
			return b->grpc_method_len - a->grpc_method_len;
		if (a->grpc_regex != b->grpc_regex)
			return a->grpc_regex ? 1 : -1;
		goto headers;
	}
	if ((c = px_path_rank(a->path_type) - px_path_rank(b->path_type)))
		return c;
	if (a->path_type != MD_PATH_EXACT && a->path_len != b->path_len)
		return a->path_len > b->path_len ? -1 : 1;
	if (!!a->method != !!b->method)
		return a->method ? -1 : 1;
headers:
	if (a->n_hdr != b->n_hdr)
		return b->n_hdr - a->n_hdr;
	if (a->n_qry != b->n_qry)
		return b->n_qry - a->n_qry;
	if ((c = strcmp(a->route_key, b->route_key)))
		return c;
	if (a->rule_idx != b->rule_idx)
		return a->rule_idx - b->rule_idx;
	return a->match_idx - b->match_idx;
}

static const struct md_parent_ref *px_route_attached(const struct md_httproute *r,
						     const struct md_service *svc, uint16_t port)
{
	int i;

	for (i = 0; i < r->n_parents; i++) {
		const struct md_parent_ref *p = &r->parents[i];

		if (p->svc == svc && (!p->port || p->port == port))
			return p;
	}
	return NULL;
}

static int px_build_rule(struct px_table *t, const struct md_httproute *rt, int ri,
			 const struct px_svc *ps, struct px_rule **out, char *err, size_t errlen)
{
	const struct md_route_rule *rr = &rt->rules[ri];
	struct px_rule *r = px_rule_new(t);
	int i, rc;

	r->name = px_asprintf("%s/%s#%d", rt->meta.ns, rt->meta.name, ri);
	r->src = rr;
	*out = r;
	if ((rc = px_retry_parse(rt, &r->retry, err, errlen)) ||
	    (rc = px_lb_parse(rt, &r->lb, err, errlen)))
		return rc;
	if (rr->has_retry) {
		/* Gateway API rules[].retry replaces the route's annotations (the
		 * per-try timeout annotation stays): connect failures and resets
		 * are always retried, statuses as listed (default 500, 502-504) */
		r->retry.retries = rr->retry_attempts;
		r->retry.on = PX_RETRY_CONNECT | PX_RETRY_RESET;
		r->retry.codes[0] = r->retry.codes[1] = 0;
		if (!rr->n_retry_codes)
			r->retry.codes[0] = 1ull << 0 | 7ull << 2;
		for (i = 0; i < rr->n_retry_codes; i++)
			r->retry.codes[(rr->retry_codes[i] - 500) / 64] |=
				1ull << ((rr->retry_codes[i] - 500) % 64);
		r->retry.backoff_ms = rr->retry_backoff_ms;
	}
	for (i = 0; i < rr->n_filters; i++) {
		const struct md_filter *f = &rr->filters[i];

		if (f->type == MD_FILTER_REQUEST_MIRROR && r->n_mirrors < PX_MAX_MIRRORS) {
			const struct md_service *ms = md_find_service(t->st, f->mirror_ns,
								      f->mirror_name);
			struct px_mirror *m;

			r->mirrors = zh_realloc(r->mirrors, (r->n_mirrors + 1) * sizeof(*m));
			m = &r->mirrors[r->n_mirrors++];
			memset(m, 0, sizeof(*m));
			m->permille = f->mirror_permille;
			if (ms) {
				px_backend_fill(&m->be, ms, px_port_idx(ms, f->mirror_port, 0), 1);
			} else {
				m->be.name = px_asprintf("%s/%s", f->mirror_ns, f->mirror_name);
				m->be.invalid = true;
			}
		}
		if (f->type == MD_FILTER_REQUEST_REDIRECT)
			r->redirect = f;
		else if (f->type == MD_FILTER_URL_REWRITE)
			r->rewrite = f;
		else if (f->type == MD_FILTER_REQUEST_HEADER_MODIFIER)
			r->req_mod = &f->headers;
		else if (f->type == MD_FILTER_RESPONSE_HEADER_MODIFIER)
			r->resp_mod = &f->headers;
	}
	for (i = 0; i < rr->n_backends; i++) {
		const struct md_backend_ref *b = &rr->backends[i];

		if (!b->svc || (b->kind && strcmp(b->kind, "Service"))) {
			r->backends = zh_realloc(r->backends,
						 (r->n_backends + 1) * sizeof(*r->backends));
			memset(&r->backends[r->n_backends], 0, sizeof(*r->backends));
			r->backends[r->n_backends].name = px_asprintf("%s/%s", b->ns ? b->ns :
								      rt->meta.ns, b->name);
			r->backends[r->n_backends].weight = (uint64_t)b->weight * 1000;
			r->backends[r->n_backends++].invalid = true;
			continue;
		}
		px_rule_add_svc(t, r, b->svc, b->port, b->svc == ps->svc ? ps->port_idx : 0,
				b->weight, b->filters, b->n_filters);
	}
	px_rule_finish(r);
	*out = r;
	return 0;
}

static int px_build_svc(struct px_table *t, struct px_svc *ps, char *err, size_t errlen)
{
	const struct md_state *st = t->st;
	int i, j, k, rc, n_producer = 0;

	for (i = 0; i < st->n_routes; i++) {
		const struct md_httproute *rt = &st->routes[i];
		const struct md_parent_ref *pr = px_route_attached(rt, ps->svc, ps->port);
		const char *cns;
		int m0 = ps->n_matches;
		char *key;

		if (!pr)
			continue;
		cns = md_parent_is_consumer(rt, pr) ? rt->meta.ns : NULL;
		key = px_asprintf("%s/%s", rt->meta.ns, rt->meta.name);
		/* the key lives as long as the table: keep it in a rule name slot */
		for (j = 0; j < rt->n_rules; j++) {
			struct px_rule *r;

			if ((rc = px_build_rule(t, rt, j, ps, &r, err, errlen)))
				goto fail;
			if (!rt->rules[j].n_matches) {
				if ((rc = px_add_match(ps, r, NULL, key, j, 0, rt->grpc, err,
						       errlen)))
					goto fail;
				continue;
			}
			for (k = 0; k < rt->rules[j].n_matches; k++)
				if ((rc = px_add_match(ps, r, &rt->rules[j].matches[k], key, j, k,
						       rt->grpc, err, errlen)))
					goto fail;
		}
		/* key is owned by an extra rule-less holder: park it in t->rules as
		 * a rule with only a name, freed with the rules */
		{
			struct px_rule *holder = px_rule_new(t);

			holder->name = key;
		}
		for (k = m0; k < ps->n_matches; k++)
			ps->matches[k].consumer_ns = cns;
		if (cns)
			ps->has_consumer = t->has_consumer = true;
		else
			n_producer += ps->n_matches - m0;
		continue;
fail:
		{
			struct px_rule *holder = px_rule_new(t);

			holder->name = key;
		}
		return rc;
	}
	if (!n_producer) {
		/* no producer HTTPRoute: the Service itself (or its TrafficSplit) */
		struct px_rule *r = px_rule_new(t);

		r->name = px_asprintf("%s/%s#default", ps->svc->meta.ns, ps->svc->meta.name);
		px_rule_add_svc(t, r, ps->svc, ps->port, ps->port_idx, 1, NULL, 0);
		px_rule_finish(r);
		if ((rc = px_add_match(ps, r, NULL, "", 0, 0, false, err, errlen)))
			return rc;
	}
	qsort(ps->matches, ps->n_matches, sizeof(*ps->matches), px_match_cmp);
	return 0;
}

static void px_table_free(struct px_table *t)
{
	int i, j;

	for (i = 0; i < t->n_svcs; i++) {
		struct px_svc *ps = &t->svcs[i];

		for (j = 0; j < ps->n_matches; j++) {
			struct px_match *x = &ps->matches[j];
			int k;

			if (x->has_re)
				regfree(&x->re);
			for (k = 0; k < x->n_hdr; k++)
				if (x->hdr[k].is_re)
					regfree(&x->hdr[k].re);
			for (k = 0; k < x->n_qry; k++)
				if (x->qry[k].is_re)
					regfree(&x->qry[k].re);
			free(x->hdr);
			free(x->qry);
		}
		free(ps->matches);
		free(ps->name);
	}
	free(t->svcs);
	for (i = 0; i < t->n_rules; i++) {
		struct px_rule *r = t->rules[i];

		for (j = 0; j < r->n_backends; j++) {
			free(r->backends[j].name);
			free(r->backends[j].eps);
		}
		for (j = 0; j < r->n_mirrors; j++) {
			free(r->mirrors[j].be.name);
			free(r->mirrors[j].be.eps);
		}
		free(r->mirrors);
		free(r->backends);
		free(r->name);
		free(r);
	}
	free(t->rules);
	free(t->ep_keys);
	for (i = 0; i < t->n_abs; i++)
		px_ab_free(t->abs[i]);
	free(t->abs);
	free(t->clients);
	free(t->ip6s);
	free(t->ip4s);
	if (t->st)
		md_state_free(t->st);
	free(t);
}

int px_table_build(struct md_state *st, struct px_table **out, char *err, size_t errlen)
{
	struct px_table *t = zh_calloc(1, sizeof(*t));
	int i, j, n = 0, rc;

	t->refs = 1;
	t->gen = ++px_gen_counter;
	t->st = st;
	for (i = 0; i < st->n_services; i++)
		n += st->services[i].n_ports;
	t->svcs = zh_calloc(n ? n : 1, sizeof(*t->svcs));
	for (i = 0; i < st->n_services; i++) {
		struct px_pool_policy pool;

		if ((rc = px_pool_parse(&st->services[i], &pool, err, errlen)))
			goto fail;
	}
	for (i = 0; i < st->n_services; i++) {
		const struct md_service *s = &st->services[i];

		for (j = 0; j < s->n_ports; j++) {
			struct px_svc *ps = &t->svcs[t->n_svcs++];

			ps->svc = s;
			ps->port_idx = j;
			ps->ip = s->cluster_ip;
			ps->has_ip6 = !IN6_IS_ADDR_UNSPECIFIED(&s->cluster_ip6);
			memcpy(&ps->ip6low, &s->cluster_ip6.s6_addr[12], 4);
			ps->port = s->ports[j].port;
			ps->name = px_asprintf("%s/%s:%u", s->meta.ns, s->meta.name, ps->port);
			if ((rc = px_build_svc(t, ps, err, errlen)))
				goto fail;
		}
	}
	*out = t;
	return 0;
fail:
	t->st = NULL;	/* stays the caller's */
	px_table_free(t);
	return rc;
}

struct px_table *px_table_ref(struct px_table *t)
{
	t->refs++;
	return t;
}

void px_table_unref(struct px_table *t)
{
	if (t && --t->refs == 0)
		px_table_free(t);
}

uint64_t px_table_generation(const struct px_table *t)
{
	return t->gen;
}

const struct md_state *px_table_state(const struct px_table *t)
{
	return t->st;
}

const struct px_svc *px_table_find_ip(const struct px_table *t, uint32_t ip, uint16_t port)
{
	int i;

	for (i = 0; i < t->n_svcs; i++)
		if (t->svcs[i].ip == ip && t->svcs[i].port == port && ip)
			return &t->svcs[i];
	return NULL;
}

const struct px_svc *px_table_find_ip6low(const struct px_table *t, uint32_t low, uint16_t port)
{
	const struct px_svc *found = NULL;

	for (int i = 0; i < t->n_svcs; i++) {
		const struct px_svc *ps = &t->svcs[i];

		if (!ps->has_ip6 || ps->ip6low != low || ps->port != port)
			continue;
		if (found && found->svc != ps->svc)
			return NULL;	/* two Services: ambiguous, never guessed */
		found = found ? found : ps;
	}
	return found;
}

char *px_ip_fmt(struct px_ip a, uint16_t port, char *b, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (!a.family) {
		snprintf(b, len, "-");
		return b;
	}
	inet_ntop(a.family, a.family == AF_INET6 ? (const void *)a.v6 : (const void *)&a.v4, ip,
		  sizeof(ip));
	if (!port)
		snprintf(b, len, "%s", ip);
	else if (a.family == AF_INET6)
		snprintf(b, len, "[%s]:%u", ip, port);
	else
		snprintf(b, len, "%s:%u", ip, port);
	return b;
}

const struct px_svc *px_table_find_name(const struct px_table *t, const char *ns,
					const char *name, uint16_t port)
{
	int i;

	for (i = 0; i < t->n_svcs; i++) {
		const struct px_svc *ps = &t->svcs[i];

		if (strcmp(ps->svc->meta.name, name) || strcmp(ps->svc->meta.ns, ns ? ns :
							       MD_DEFAULT_NS))
			continue;
		if (!port || ps->port == port)
			return ps;
	}
	return NULL;
}

const char *px_svc_name(const struct px_svc *s)
{
	return s->name;
}

void px_req_view_target(struct px_req_view *v, const char *target, size_t len)
{
	const char *q = memchr(target, '?', len);

	v->path = target;
	v->path_len = q ? (size_t)(q - target) : len;
	v->query = q ? q + 1 : NULL;
	v->query_len = q ? len - v->path_len - 1 : 0;
}

/* ---- matching -------------------------------------------------------------- */

static bool px_re_match(const regex_t *re, const char *s, size_t len)
{
	char tmp[2048];

	if (len >= sizeof(tmp))
		return false;	/* longer than any path we accept for regex matching */
	memcpy(tmp, s, len);
	tmp[len] = 0;
	return regexec(re, tmp, 0, NULL, 0) == 0;
}

static bool px_str_match(const struct px_strm *s, const char *v, size_t len)
{
	if (s->is_re)
		return px_re_match(&s->re, v, len);
	return strlen(s->m->value) == len && !memcmp(s->m->value, v, len);
}

static bool px_path_match(const struct px_match *x, const char *p, size_t len)
{
	switch (x->path_type) {
	case MD_PATH_EXACT:
		return len == x->path_len && !memcmp(p, x->path, len);
	case MD_PATH_REGEX:
		return px_re_match(&x->re, p, len);
	default:
		/* segment semantics: "/foo" matches "/foo", "/foo/..." not "/foobar" */
		if (x->path_len == 1)
			return len >= 1 && p[0] == '/';
		if (len < x->path_len || memcmp(p, x->path, x->path_len))
			return false;
		return len == x->path_len || p[x->path_len] == '/';
	}
}

static bool px_hdr_match(const struct px_strm *s, const struct px_req_view *r)
{
	size_t nl = strlen(s->m->name), i;

	/* any line of the header may match (repeated lines are distinct values) */
	for (i = 0; i < r->n_headers; i++)
		if (r->headers[i].name_len == nl && !strncasecmp(r->headers[i].name, s->m->name, nl)
		    && px_str_match(s, r->headers[i].value, r->headers[i].value_len))
			return true;
	return false;
}

static bool px_qry_match(const struct px_strm *s, const struct px_req_view *r)
{
	const char *p = r->query, *end = r->query + r->query_len;
	size_t nl = strlen(s->m->name);

	if (!p)
		return false;
	/* Gateway API: the first value of a repeated parameter is the one matched */
	while (p < end) {
		const char *amp = memchr(p, '&', end - p), *e = amp ? amp : end;
		const char *eq = memchr(p, '=', e - p);
		size_t kl = eq ? (size_t)(eq - p) : (size_t)(e - p);

		if (kl == nl && !memcmp(p, s->m->name, nl))
			return eq ? px_str_match(s, eq + 1, e - eq - 1) : px_str_match(s, "", 0);
		p = e + 1;
	}
	return false;
}

static bool px_match_req(const struct px_match *x, const struct px_req_view *r)
{
	int i;

	if (!px_path_match(x, r->path, r->path_len))
		return false;
	if (x->method && (strlen(x->method) != r->method_len ||
			  memcmp(x->method, r->method, r->method_len)))
		return false;
	for (i = 0; i < x->n_hdr; i++)
		if (!px_hdr_match(&x->hdr[i], r))
			return false;
	for (i = 0; i < x->n_qry; i++)
		if (!px_qry_match(&x->qry[i], r))
			return false;
	return true;
}

static uint64_t px_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* New path for a prefix replacement: matched prefix (normalised) of path
 * replaced by repl, keeping segment boundaries ("/foo/bar" with "/foo" →
 * "/baz" gives "/baz/bar"; with "/" gives "/bar"). */
static int px_replace_prefix(char *out, size_t outlen, const char *path, size_t plen,
			     size_t matched, const char *repl)
{
	const char *rest = path + (matched == 1 ? 0 : matched);
	size_t rl = plen - (matched == 1 ? 0 : matched), pl = strlen(repl);
	int n;

	while (pl > 0 && repl[pl - 1] == '/' && (rl > 0 || pl > 1))
		pl--;	/* rest starts with '/' (or is empty): no double slash */
	if (rl && rest[0] != '/')
		return -EINVAL;
	n = snprintf(out, outlen, "%.*s%.*s", (int)pl, repl, (int)rl, rest);
	if (n >= (int)outlen)
		return -ENAMETOOLONG;
	if (n == 0)
		snprintf(out, outlen, "/");
	return 0;
}

static int px_new_path(const struct md_filter *f, const struct px_match *x,
		       const struct px_req_view *r, char *out, size_t outlen)
{
	char tmp[PX_PATH_MAX];
	int n, rc;

	if (f->path_type == MD_PATHMOD_FULL) {
		n = snprintf(tmp, sizeof(tmp), "%s", f->path);
	} else if (f->path_type == MD_PATHMOD_PREFIX && x->path_type == MD_PATH_PREFIX) {
		if ((rc = px_replace_prefix(tmp, sizeof(tmp), r->path, r->path_len, x->path_len,
					    f->path)))
			return rc;
		n = strlen(tmp);
	} else {
		n = snprintf(tmp, sizeof(tmp), "%.*s", (int)r->path_len, r->path);
	}
	if (n >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if (r->query)
		n = snprintf(out, outlen, "%s?%.*s", tmp, (int)r->query_len, r->query);
	else
		n = snprintf(out, outlen, "%s", tmp);
	return n >= (int)outlen ? -ENAMETOOLONG : 0;
}

static int px_redirect(const struct md_filter *f, const struct px_match *x,
		       const struct px_req_view *r, const char *host, size_t host_len,
		       struct px_decision *d)
{
	const char *scheme = f->scheme ? f->scheme : "http";
	size_t hl = host_len;
	char port[16] = "", path[PX_PATH_MAX], loc[PX_LOCATION_MAX];
	int n, rc;

	/* host without its port when we decide the port */
	if (host) {
		const char *c = memrchr(host, ':', host_len);

		if (c && !memchr(c, ']', host_len - (c - host)) && (f->port || f->scheme))
			hl = c - host;
	}
	if (f->port && !((f->port == 80 && !strcmp(scheme, "http")) ||
			 (f->port == 443 && !strcmp(scheme, "https"))))
		snprintf(port, sizeof(port), ":%u", f->port);
	d->status = f->status_code ? f->status_code : 302;
	if ((rc = px_new_path(f, x, r, path, sizeof(path))))
		return rc;
	if (f->hostname)
		n = snprintf(loc, sizeof(loc), "%s://%s%s%s", scheme, f->hostname, port, path);
	else
		n = snprintf(loc, sizeof(loc), "%s://%.*s%s%s", scheme, (int)hl,
			     host ? host : "", port, path);
	if (n >= (int)sizeof(loc))
		return -ENAMETOOLONG;
	d->location = zh_strdup(loc);	/* its size only (proxy.h) */
	return 0;
}

void px_decision_free(struct px_decision *d)
{
	free(d->path);
	free(d->location);
	d->path = NULL;
	d->location = NULL;
}

/* Does the request match one of ab's matches (SMI HTTPRouteGroup)? */
static bool px_ab_match(const struct px_ab *ab, const struct px_req_view *r)
{
	for (int i = 0; i < ab->n; i++) {
		const struct px_ab_m *m = &ab->m[i];
		bool ok = true;
		int k;

		if (m->has_path && !px_re_match(&m->path, r->path, r->path_len))
			continue;
		if (m->n_methods) {
			ok = false;
			for (k = 0; k < m->n_methods && !ok; k++)
				ok = !strcmp(m->methods[k], "*") ||
				     (strlen(m->methods[k]) == r->method_len &&
				      !memcmp(m->methods[k], r->method, r->method_len));
		}
		for (k = 0; ok && k < m->n_hdr; k++) {
			size_t nl = strlen(m->hdr[k].name), j;
			bool hit = false;

			for (j = 0; j < r->n_headers && !hit; j++)
				hit = r->headers[j].name_len == nl &&
				      !strncasecmp(r->headers[j].name, m->hdr[k].name, nl) &&
				      px_re_match(&m->hdr[k].re, r->headers[j].value,
						  r->headers[j].value_len);
			ok = hit;
		}
		if (ok)
			return true;
	}
	return false;
}

/* Per-request memo of px_ab_match: a rule rarely has more than one split. */
struct px_ab_memo {
	const struct px_ab *ab[4];
	bool hit[4];
	int n;
};

static bool px_backend_eligible(const struct px_backend *b, const struct px_req_view *r,
				struct px_ab_memo *mm)
{
	int i;
	bool hit;

	if (!b->ab)
		return true;
	for (i = 0; i < mm->n; i++)
		if (mm->ab[i] == b->ab)
			return mm->hit[i] == (b->ab_side == 1);
	hit = px_ab_match(b->ab, r);
	if (mm->n < 4) {
		mm->ab[mm->n] = b->ab;
		mm->hit[mm->n++] = hit;
	}
	return hit == (b->ab_side == 1);
}

static void px_pick_mirrors(const struct px_rule *r, uint64_t rnd, struct px_decision *d)
{
	for (int i = 0; i < r->n_mirrors && d->n_mirrors < PX_MAX_MIRRORS; i++) {
		const struct px_mirror *m = &r->mirrors[i];
		uint64_t x = px_mix(rnd ^ (0x6d6972726f72ULL + (uint64_t)i));
		const struct px_ep *ep;

		if (m->be.invalid || !m->be.n_eps || x % 1000 >= m->permille)
			continue;
		ep = &m->be.eps[px_mix(x) % m->be.n_eps];
		d->mirrors[d->n_mirrors].backend_name = m->be.name;
		d->mirrors[d->n_mirrors].ip = ep->ip;
		d->mirrors[d->n_mirrors].h2c = m->be.pool.h2c;
		d->mirrors[d->n_mirrors++].port = ep->port;
	}
}

int px_route(const struct px_table *t, const struct px_svc *svc, const struct px_req_view *req,
	     const char *host, size_t host_len, uint64_t rnd, struct px_decision *d)
{
	const struct px_match *x = NULL;
	const struct px_rule *r;
	const char *cns = svc->has_consumer ? req->client_ns : NULL;
	struct px_ab_memo mm = { .n = 0 };
	uint64_t pick, total = 0;
	bool use_consumer = false, any_invalid = false;
	int i, rc;

	(void)t;
	d->action = PX_NOT_FOUND;
	d->rule = NULL;
	d->route_name = NULL;
	d->backend_name = NULL;
	memset(&d->ip, 0, sizeof(d->ip));
	d->port = 0;
	d->status = 404;
	d->path = NULL;
	d->host = NULL;
	d->location = NULL;
	d->n_req_mods = 0;
	d->n_resp_mods = 0;
	d->n_mirrors = 0;
	d->timeout_request_ms = 0;
	d->timeout_backend_ms = 0;
	d->retry = &px_retry_default;
	d->lb = &px_lb_default;
	d->pool = &px_pool_default;
	/* GAMMA: a client whose namespace has consumer routes on this Service
	 * uses those only; every other client the producer routes */
	for (i = 0; cns && i < svc->n_matches && !use_consumer; i++)
		use_consumer = svc->matches[i].consumer_ns &&
			       !strcmp(svc->matches[i].consumer_ns, cns);
	for (i = 0; i < svc->n_matches; i++) {
		const struct px_match *m = &svc->matches[i];

		if (use_consumer ? !m->consumer_ns || strcmp(m->consumer_ns, cns) :
				   m->consumer_ns != NULL)
			continue;
		if (px_match_req(m, req)) {
			x = m;
			break;
		}
	}
	if (!x)
		return 0;
	r = x->rule;
	d->rule = r;
	d->route_name = r->name;
	d->retry = &r->retry;
	d->lb = &r->lb;
	if (r->src) {
		d->timeout_request_ms = r->src->timeout_request_ms;
		d->timeout_backend_ms = r->src->timeout_backend_ms;
	}
	if (r->redirect) {
		d->action = PX_REDIRECT;
		return px_redirect(r->redirect, x, req, host, host_len, d);
	}
	if (r->req_mod)
		d->req_mods[d->n_req_mods++] = r->req_mod;
	if (r->resp_mod)
		d->resp_mods[d->n_resp_mods++] = r->resp_mod;
	if (r->rewrite) {
		if (r->rewrite->path_type != MD_PATHMOD_NONE) {
			char path[PX_PATH_MAX];

			if ((rc = px_new_path(r->rewrite, x, req, path, sizeof(path))))
				return rc;
			d->path = zh_strdup(path);	/* its size only (proxy.h) */
		}
		d->host = r->rewrite->hostname;
	}
	d->action = PX_NO_BACKEND;
	d->status = 503;
	for (i = 0; i < r->n_backends; i++) {
		const struct px_backend *b = &r->backends[i];

		if (!px_backend_eligible(b, req, &mm))
			continue;
		any_invalid |= b->invalid;
		if (!b->invalid && b->n_eps)
			total += b->weight;
	}
	if (!total) {
		/* Gateway API: invalid backendRefs get 500 for their share */
		if (any_invalid)
			d->status = 500;
		return 0;
	}
	pick = rnd % total;
	for (i = 0; i < r->n_backends; i++) {
		const struct px_backend *b = &r->backends[i];

		if (b->invalid || !b->n_eps || !px_backend_eligible(b, req, &mm))
			continue;
		if (pick >= b->weight) {
			pick -= b->weight;
			continue;
		}
		const struct px_ep *ep = &b->eps[px_mix(rnd) % b->n_eps];

		d->action = PX_FORWARD;
		d->status = 0;
		d->backend_name = b->name;
		d->pool = &b->pool;
		d->ip = ep->ip;
		d->port = ep->port;
		if (b->req_mod && d->n_req_mods < PX_MAX_HDR_MODS)
			d->req_mods[d->n_req_mods++] = b->req_mod;
		if (b->resp_mod)
			d->resp_mods[d->n_resp_mods++] = b->resp_mod;
		px_pick_mirrors(r, rnd, d);
		return 0;
	}
	return 0;
}

static int px_client_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct px_client_ent *)a)->ip, y = ((const struct px_client_ent *)b)->ip;

	return x < y ? -1 : x > y;
}

const char *px_table_client_ns(const struct px_table *ct, uint32_t ip)
{
	struct px_table *t = (struct px_table *)ct;	/* lazy index only */
	struct px_client_ent key = { .ip = ip }, *e;
	int i;

	if (!t->has_consumer || !ip)
		return NULL;
	if (!t->clients_built) {
		t->clients = zh_calloc(t->st->n_pods + 1, sizeof(*t->clients));
		for (i = 0; i < t->st->n_pods; i++)
			if (t->st->pods[i].ip) {
				t->clients[t->n_clients].ip = t->st->pods[i].ip;
				t->clients[t->n_clients++].ns = t->st->pods[i].meta.ns;
			}
		qsort(t->clients, t->n_clients, sizeof(*t->clients), px_client_cmp);
		t->clients_built = true;
	}
	e = bsearch(&key, t->clients, t->n_clients, sizeof(key), px_client_cmp);
	return e ? e->ns : NULL;
}

static int px_ip6_cmp(const void *a, const void *b)
{
	return memcmp(((const struct px_ip6_ent *)a)->ip6, ((const struct px_ip6_ent *)b)->ip6, 16);
}

static int px_ip4_cmp(const void *a, const void *b)
{
	uint32_t x = ntohl(((const struct px_ip6_ent *)a)->ip), y = ntohl(((const struct px_ip6_ent *)b)->ip);

	return x < y ? -1 : x > y;
}

/* Both indexes of the pods that have both families (built once a table). */
static void px_ip6s_build(struct px_table *t)
{
	int i;

	if (t->ip6s_built)
		return;
	t->ip6s = zh_calloc(t->st->n_pods + 1, sizeof(*t->ip6s));
	for (i = 0; i < t->st->n_pods; i++) {
		const struct md_pod *p = &t->st->pods[i];

		if (!p->ip || IN6_IS_ADDR_UNSPECIFIED(&p->ip6))
			continue;
		memcpy(t->ip6s[t->n_ip6s].ip6, &p->ip6, 16);
		t->ip6s[t->n_ip6s++].ip = p->ip;
	}
	t->ip4s = zh_calloc(t->n_ip6s + 1, sizeof(*t->ip4s));
	memcpy(t->ip4s, t->ip6s, t->n_ip6s * sizeof(*t->ip6s));
	qsort(t->ip6s, t->n_ip6s, sizeof(*t->ip6s), px_ip6_cmp);
	qsort(t->ip4s, t->n_ip6s, sizeof(*t->ip4s), px_ip4_cmp);
	t->ip6s_built = true;
}

uint32_t px_table_ip4_of6(const struct px_table *ct, const uint8_t ip6[16])
{
	struct px_table *t = (struct px_table *)ct;	/* lazy index only */
	struct px_ip6_ent key = {}, *e;

	px_ip6s_build(t);
	memcpy(key.ip6, ip6, 16);
	e = bsearch(&key, t->ip6s, t->n_ip6s, sizeof(key), px_ip6_cmp);
	return e ? e->ip : 0;
}

bool px_table_ip6_of4(const struct px_table *ct, uint32_t ip4, uint8_t ip6[16])
{
	struct px_table *t = (struct px_table *)ct;	/* lazy index only */
	struct px_ip6_ent key = { .ip = ip4 }, *e;

	px_ip6s_build(t);
	e = ip4 ? bsearch(&key, t->ip4s, t->n_ip6s, sizeof(key), px_ip4_cmp) : NULL;
	if (e)
		memcpy(ip6, e->ip6, 16);
	return e != NULL;
}

void px_route_repick(struct px_decision *d, uint64_t rnd)
{
	const struct px_rule *r = d->rule;
	const struct px_backend *b = NULL;
	int i, k;

	if (!r || d->action != PX_FORWARD)
		return;
	for (i = 0; i < r->n_backends && !b; i++)
		if (r->backends[i].name == d->backend_name)
			b = &r->backends[i];
	if (!b || b->n_eps < 2)
		return;
	k = px_mix(rnd) % (b->n_eps - 1);
	for (i = 0; i < b->n_eps; i++) {
		if (px_ip_eq(b->eps[i].ip, d->ip) && b->eps[i].port == d->port)
			continue;
		if (!k--) {
			d->ip = b->eps[i].ip;
			d->port = b->eps[i].port;
			return;
		}
	}
}

int px_route_eps(const struct px_decision *d, const struct px_ep **eps)
{
	const struct px_rule *r = d->rule;
	int i;

	*eps = NULL;
	if (!r || d->action != PX_FORWARD)
		return 0;
	for (i = 0; i < r->n_backends; i++)
		if (r->backends[i].name == d->backend_name) {
			*eps = r->backends[i].eps;
			return r->backends[i].n_eps;
		}
	return 0;
}

/* Total order of endpoints: family, address bytes, port. */
static int px_ep_cmp(const void *a, const void *b)
{
	const struct px_ep *x = a, *y = b;
	int c = (int)x->ip.family - (int)y->ip.family;

	if (!c)
		c = x->ip.family == AF_INET6 ? memcmp(x->ip.v6, y->ip.v6, 16) :
		    memcmp(&x->ip.v4, &y->ip.v4, 4);
	return c ? c : (int)x->port - (int)y->port;
}

bool px_table_has_ep(const struct px_table *ct, struct px_ip ip, uint16_t port)
{
	struct px_table *t = (struct px_table *)ct;	/* lazy index only */
	struct px_ep key = { .ip = ip, .port = port };
	int i, j, n = 0;

	if (!t->ep_keys) {
		for (i = 0; i < t->n_rules; i++)
			for (j = 0; j < t->rules[i]->n_backends; j++)
				n += t->rules[i]->backends[j].n_eps;
		t->ep_keys = zh_calloc(n ? n : 1, sizeof(*t->ep_keys));
		for (i = 0; i < t->n_rules; i++)
			for (j = 0; j < t->rules[i]->n_backends; j++) {
				const struct px_backend *b = &t->rules[i]->backends[j];

				for (int k = 0; k < b->n_eps; k++)
					t->ep_keys[t->n_ep_keys++] = b->eps[k];
			}
		qsort(t->ep_keys, t->n_ep_keys, sizeof(*t->ep_keys), px_ep_cmp);
	}
	return bsearch(&key, t->ep_keys, t->n_ep_keys, sizeof(key), px_ep_cmp) != NULL;
}

uint32_t px_route_rr_next(const struct px_decision *d)
{
	const struct px_rule *r = d->rule;
	int i;

	if (!r || d->action != PX_FORWARD)
		return 0;
	for (i = 0; i < r->n_backends; i++)
		if (r->backends[i].name == d->backend_name)
			return ((struct px_backend *)&r->backends[i])->rr++;
	return 0;
}
