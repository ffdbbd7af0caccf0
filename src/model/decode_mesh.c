/* decode_mesh.c — decoders for the mesh kinds: SMI TrafficSplit, Gateway API
 * HTTPRoute, and networking.k8s.io/v1 NetworkPolicy. Same rules as decode.c:
 * unknown fields ignored, every error names line and field path. The
 * NetworkPolicy checks follow Kubernetes' ValidateNetworkPolicy (peers,
 * ipBlock, ports/endPort, policyTypes). */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "md_int.h"

#define PX_MIRRORS_MAX_DECODE 4	/* = PX_MAX_MIRRORS of proxy.h */

/* ---- TrafficSplit ------------------------------------------------------------------ */

static int split_weight(struct dctx *c, const struct yn *b, bool quantity, uint64_t *out)
{
	const struct yn *w = yn_get(b, "weight");
	long long v;

	if (!w)
		return dc_fail(c, b, "weight", "is required");
	if (w->type != YN_SCALAR)
		return dc_fail(c, w, "weight", "must be a %s", quantity ? "quantity" : "integer");
	if (quantity) {
		if (md_quantity_milli(w->s, out))
			return dc_fail(c, w, "weight",
				       "invalid weight \"%s\": must be a non-negative quantity "
				       "such as 1, 500m or 2k", w->s);
		return 0;
	}
	if (dc_int(c, b, "weight", 0, 1000000000LL, &v, NULL))
		return -EINVAL;
	*out = (uint64_t)v * 1000;
	return 0;
}

static int split_match(struct dctx *c, const struct yn *m, void *elem, void *arg)
{
	struct md_split_match *sm = elem;
	char *group;

	(void)arg;
	if (dc_map(c, m, NULL) || dc_str(c, m, "kind", true, &sm->kind) ||
	    dc_str(c, m, "name", true, &sm->name) || dc_str(c, m, "apiGroup", false, &group))
		return -EINVAL;
	sm->line = m->line;
	if (strcmp(sm->kind, "HTTPRouteGroup"))
		return dc_fail(c, yn_get(m, "kind"), "kind",
			       "matches of kind \"%s\" are not supported (HTTPRouteGroup)", sm->kind);
	if (group && strcmp(group, "specs.smi-spec.io"))
		return dc_fail(c, yn_get(m, "apiGroup"), "apiGroup",
			       "must be specs.smi-spec.io, got \"%s\"", group);
	return 0;
}

int md_decode_split(struct dctx *c, const struct yn *root, const char *api, struct md_meta *meta)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_trafficsplit *t = zh_grow((void **)&c->st->splits, &c->st->n_splits,
					    &pv->cap_split, sizeof(*t));
	const struct yn *spec = yn_get(root, "spec"), *bs;
	bool quantity = !strcmp(api, "split.smi-spec.io/v1alpha1");
	uint64_t total = 0;
	size_t old, base;

	t->meta = *meta;
	t->api_version = (char *)api;
	if (!spec)
		return dc_fail(c, root, "spec", "is required");
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) || dc_str(c, spec, "service", true, &t->root))
		return -EINVAL;
	t->root_line = yn_get(spec, "service")->line;
	bs = yn_get(spec, "backends");
	if (!bs)
		return dc_fail(c, spec, "backends", "is required");
	dc_push(c, "backends");
	base = c->plen;
	if (dc_seq(c, bs, NULL))
		return -EINVAL;
	if (!bs->n)
		return dc_fail(c, bs, NULL, "must list at least one backend");
	t->backends = ar_alloc(c->ar, (size_t)bs->n * sizeof(*t->backends));
	for (int i = 0; i < bs->n; i++) {
		const struct yn *b = bs->items[i];
		struct md_split_backend *sb = &t->backends[i];

		dc_push_idx(c, i);
		if (dc_map(c, b, NULL) || dc_str(c, b, "service", true, &sb->service) ||
		    split_weight(c, b, quantity, &sb->weight_milli))
			return -EINVAL;
		sb->line = b->line;
		for (int j = 0; j < i; j++)
			if (!strcmp(t->backends[j].service, sb->service))
				return dc_fail(c, yn_get(b, "service"), "service",
					       "duplicate backend \"%s\"", sb->service);
		if (sb->weight_milli > UINT64_MAX / 2 - total)
			return dc_fail(c, yn_get(b, "weight"), "weight", "weights too large");
		total += sb->weight_milli;
		dc_pop(c, base);
	}
	t->n_backends = bs->n;
	if (!total)
		return dc_fail(c, bs, NULL, "the backends' weights add up to 0");
	dc_pop(c, old);
	/* spec.matches exists from v1alpha3 on (A/B testing) */
	if (strcmp(api, "split.smi-spec.io/v1alpha3") && strcmp(api, "split.smi-spec.io/v1alpha4")) {
		if (yn_get(spec, "matches"))
			return dc_fail(c, yn_get(spec, "matches"), "spec.matches",
				       "not a field of %s (matches need v1alpha3 or v1alpha4)", api);
		return 0;
	}
	dc_push(c, "spec");
	if (dc_seq_each(c, spec, "matches", sizeof(*t->matches), (void **)&t->matches,
			&t->n_matches, split_match, NULL))
		return -EINVAL;
	dc_pop(c, old);
	return 0;
}

/* ---- HTTPRoute ---------------------------------------------------------------------- */

int md_route_hdr_match(struct dctx *c, const struct yn *h, void *elem, void *arg)
{
	struct md_header_match *hm = elem;
	char *type;

	(void)arg;
	if (dc_map(c, h, NULL) || dc_str(c, h, "type", false, &type) ||
	    dc_str(c, h, "name", true, &hm->name) || dc_str(c, h, "value", true, &hm->value))
		return -EINVAL;
	if (!type || !strcmp(type, "Exact"))
		hm->type = MD_MATCH_EXACT;
	else if (!strcmp(type, "RegularExpression"))
		hm->type = MD_MATCH_REGEX;
	else
		return dc_fail(c, yn_get(h, "type"), "type",
			       "unknown match type \"%s\" (Exact, RegularExpression)", type);
	if (!*hm->name)
		return dc_fail(c, yn_get(h, "name"), "name", "must not be empty");
	return 0;
}

static int hdr_matches(struct dctx *c, const struct yn *m, const char *field,
		       struct md_header_match **out, int *n_out)
{
	return dc_seq_each(c, m, field, sizeof(**out), (void **)out, n_out, md_route_hdr_match, NULL);
}

static int route_match(struct dctx *c, const struct yn *m, void *elem, void *arg)
{
	static const char *const methods[] = { "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT",
					       "OPTIONS", "TRACE", "PATCH" };
	const struct yn *path = yn_get(m, "path");
	struct md_route_match *rm = elem;

	(void)arg;
	if (dc_map(c, m, NULL))
		return -EINVAL;
	rm->path_type = MD_PATH_PREFIX;
	rm->path = "/";
	if (path) {
		size_t old = dc_push(c, "path");
		char *type, *value;

		if (dc_map(c, path, NULL) || dc_str(c, path, "type", false, &type) ||
		    dc_str(c, path, "value", false, &value))
			return -EINVAL;
		if (!type || !strcmp(type, "PathPrefix"))
			rm->path_type = MD_PATH_PREFIX;
		else if (!strcmp(type, "Exact"))
			rm->path_type = MD_PATH_EXACT;
		else if (!strcmp(type, "RegularExpression"))
			rm->path_type = MD_PATH_REGEX;
		else
			return dc_fail(c, yn_get(path, "type"), "type",
				       "unknown path match type \"%s\" (Exact, PathPrefix, "
				       "RegularExpression)", type);
		if (value)
			rm->path = value;
		if (rm->path_type != MD_PATH_REGEX && rm->path[0] != '/')
			return dc_fail(c, yn_get(path, "value"), "value", "must start with '/'");
		dc_pop(c, old);
	}
	if (hdr_matches(c, m, "headers", &rm->headers, &rm->n_headers) ||
	    hdr_matches(c, m, "queryParams", &rm->query, &rm->n_query) ||
	    dc_str(c, m, "method", false, &rm->method))
		return -EINVAL;
	if (rm->method) {
		size_t i;

		for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
			if (!strcmp(methods[i], rm->method))
				break;
		if (i == sizeof(methods) / sizeof(methods[0]))
			return dc_fail(c, yn_get(m, "method"), "method", "unknown method \"%s\"",
				       rm->method);
	}
	return 0;
}

static int header_kv(struct dctx *c, const struct yn *h, void *elem, void *arg)
{
	struct md_kv *kv = elem;

	(void)arg;
	return dc_map(c, h, NULL) || dc_str(c, h, "name", true, &kv->key) ||
	       dc_str(c, h, "value", true, &kv->value) ? -EINVAL : 0;
}

static int header_list(struct dctx *c, const struct yn *map, const char *field, struct md_labels *l)
{
	return dc_seq_each(c, map, field, sizeof(*l->v), (void **)&l->v, &l->n, header_kv, NULL);
}

static int header_mod(struct dctx *c, const struct yn *f, const char *field, struct md_header_mod *hm)
{
	const struct yn *v = yn_get(f, field);
	size_t old;

	if (!v)
		return dc_fail(c, f, field, "is required for this filter type");
	old = dc_push(c, field);
	if (dc_map(c, v, NULL) || header_list(c, v, "set", &hm->set) ||
	    header_list(c, v, "add", &hm->add) ||
	    dc_str_list(c, v, "remove", &hm->remove, &hm->n_remove))
		return -EINVAL;
	dc_pop(c, old);
	return 0;
}

static int path_mod(struct dctx *c, const struct yn *v, struct md_filter *f)
{
	const struct yn *p = yn_get(v, "path");
	size_t old;
	char *type;

	if (!p)
		return 0;
	old = dc_push(c, "path");
	if (dc_map(c, p, NULL) || dc_str(c, p, "type", true, &type))
		return -EINVAL;
	if (!strcmp(type, "ReplaceFullPath")) {
		f->path_type = MD_PATHMOD_FULL;
		if (dc_str(c, p, "replaceFullPath", true, &f->path))
			return -EINVAL;
	} else if (!strcmp(type, "ReplacePrefixMatch")) {
		f->path_type = MD_PATHMOD_PREFIX;
		if (dc_str(c, p, "replacePrefixMatch", true, &f->path))
			return -EINVAL;
	} else {
		return dc_fail(c, yn_get(p, "type"), "type",
			       "unknown path modifier \"%s\" (ReplaceFullPath, ReplacePrefixMatch)", type);
	}
	dc_pop(c, old);
	return 0;
}

int md_route_hdr_filter(struct dctx *c, const struct yn *n, const char *type, struct md_filter *f)
{
	if (!strcmp(type, "RequestHeaderModifier")) {
		f->type = MD_FILTER_REQUEST_HEADER_MODIFIER;
		return header_mod(c, n, "requestHeaderModifier", &f->headers);
	}
	if (!strcmp(type, "ResponseHeaderModifier")) {
		f->type = MD_FILTER_RESPONSE_HEADER_MODIFIER;
		return header_mod(c, n, "responseHeaderModifier", &f->headers);
	}
	return 1;
}

/* requestMirror: {backendRef: {name, namespace, port}, percent | fraction}
 * (HTTPRoute and GRPCRoute rules; arg is the route's md_meta) */
int md_route_mirror_filter(struct dctx *c, const struct yn *n, struct md_filter *f, void *arg)
{
	const struct md_meta *meta = arg;
	const struct yn *v = yn_get(n, "requestMirror"), *br, *fr;
	char *kind, *group;
	long long x, den = 100;
	bool has;
	size_t old;

	if (!v)
		return dc_fail(c, n, "requestMirror", "is required for this filter type");
	old = dc_push(c, "requestMirror");
	if (dc_map(c, v, NULL))
		return -EINVAL;
	br = yn_get(v, "backendRef");
	if (!br)
		return dc_fail(c, v, "backendRef", "is required");
	dc_push(c, "backendRef");
	if (dc_map(c, br, NULL) || dc_str(c, br, "name", true, &f->mirror_name) ||
	    dc_str(c, br, "namespace", false, &f->mirror_ns) ||
	    dc_str(c, br, "kind", false, &kind) || dc_str(c, br, "group", false, &group) ||
	    dc_int(c, br, "port", 1, 65535, &x, &has))
		return -EINVAL;
	if ((kind && strcmp(kind, "Service")) || (group && *group && strcmp(group, "core")))
		return dc_fail(c, br, "kind", "only a Service can be a mirror backend");
	if (!has)
		return dc_fail(c, br, "port", "is required when referring to a Service");
	f->mirror_port = (uint16_t)x;
	if (!f->mirror_ns)
		f->mirror_ns = meta ? meta->ns : MD_DEFAULT_NS;
	dc_pop(c, old);
	dc_push(c, "requestMirror");
	f->mirror_permille = 1000;
	if (dc_int(c, v, "percent", 0, 100, &x, &has))
		return -EINVAL;
	fr = yn_get(v, "fraction");
	if (has && fr)
		return dc_fail(c, fr, "fraction", "percent and fraction are mutually exclusive");
	if (has)
		f->mirror_permille = (uint32_t)x * 10;
	if (fr) {
		dc_push(c, "fraction");
		if (dc_map(c, fr, NULL) || dc_int(c, fr, "denominator", 1, 1000000, &den, NULL) ||
		    dc_int(c, fr, "numerator", 0, den, &x, &has))
			return -EINVAL;
		if (!has)
			return dc_fail(c, fr, "numerator", "is required");
		f->mirror_permille = (uint32_t)(x * 1000 / den);
	}
	dc_pop(c, old);
	return 0;
}

static int route_filter(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	struct md_filter *f = elem;
	char *type;

	int rc;

	if (dc_map(c, n, NULL) || dc_str(c, n, "type", true, &type))
		return -EINVAL;
	if ((rc = md_route_hdr_filter(c, n, type, f)) <= 0)
		return rc;
	if (!strcmp(type, "RequestRedirect") || !strcmp(type, "URLRewrite")) {
		bool redirect = type[1] == 'e';
		const char *field = redirect ? "requestRedirect" : "urlRewrite";
		const struct yn *v = yn_get(n, field);
		long long x;
		size_t old;

		f->type = redirect ? MD_FILTER_REQUEST_REDIRECT : MD_FILTER_URL_REWRITE;
		f->status_code = redirect ? 302 : 0;
		if (!v)
			return dc_fail(c, n, field, "is required for this filter type");
		old = dc_push(c, field);
		if (dc_map(c, v, NULL) || dc_str(c, v, "hostname", false, &f->hostname) ||
		    path_mod(c, v, f))
			return -EINVAL;
		if (redirect) {
			bool has;

			if (dc_str(c, v, "scheme", false, &f->scheme))
				return -EINVAL;
			if (f->scheme && strcmp(f->scheme, "http") && strcmp(f->scheme, "https"))
				return dc_fail(c, yn_get(v, "scheme"), "scheme",
					       "must be http or https");
			if (dc_int(c, v, "port", 1, 65535, &x, &has))
				return -EINVAL;
			f->port = has ? (uint16_t)x : 0;
			if (dc_int(c, v, "statusCode", 100, 599, &x, &has))
				return -EINVAL;
			if (has && x != 301 && x != 302 && x != 303 && x != 307 && x != 308)
				return dc_fail(c, yn_get(v, "statusCode"), "statusCode",
					       "must be 301, 302, 303, 307 or 308, got %lld", x);
			if (has)
				f->status_code = (int)x;
		}
		dc_pop(c, old);
		return 0;
	}
	if (!strcmp(type, "RequestMirror")) {
		f->type = MD_FILTER_REQUEST_MIRROR;
		return md_route_mirror_filter(c, n, f, arg);
	}
	if (!strcmp(type, "ExtensionRef"))
		return dc_fail(c, yn_get(n, "type"), "type",
			       "ExtensionRef filters are not supported by zerohop (no extensions): "
			       "the request would not be treated as written");
	return dc_fail(c, yn_get(n, "type"), "type",
		       "unknown filter type \"%s\" (RequestHeaderModifier, ResponseHeaderModifier, "
		       "RequestRedirect, URLRewrite, RequestMirror, ExtensionRef)", type);
}

static int route_filters(struct dctx *c, const struct yn *map, struct md_filter **out, int *n_out,
			 const struct md_meta *meta)
{
	return dc_seq_each(c, map, "filters", sizeof(**out), (void **)out, n_out, route_filter,
			   (void *)meta);
}

int md_route_backend_ref(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	const struct md_meta *meta = arg;
	struct md_backend_ref *b = elem;
	char *group;
	long long x;
	bool has;

	if (dc_map(c, n, NULL) || dc_str(c, n, "name", true, &b->name) ||
	    dc_str(c, n, "namespace", false, &b->ns) || dc_str(c, n, "kind", false, &b->kind) ||
	    dc_str(c, n, "group", false, &group))
		return -EINVAL;
	b->line = n->line;
	if (!b->ns)
		b->ns = meta->ns;
	else if (strcmp(b->ns, meta->ns))
		dc_warn(c, yn_get(n, "namespace"), "namespace", "backendRef to %s/%s in another "
			"namespace is honoured without a ReferenceGrant (zerohop does not check "
			"ReferenceGrants)", b->ns, b->name);
	if (!b->kind)
		b->kind = "Service";
	if (dc_int(c, n, "port", 1, 65535, &x, &has))
		return -EINVAL;
	b->port = has ? (uint16_t)x : 0;
	if (!strcmp(b->kind, "Service") && (!group || !*group || !strcmp(group, "core")) && !has)
		return dc_fail(c, n, "port", "is required when referring to a Service");
	if (dc_int(c, n, "weight", 0, 1000000, &x, &has))
		return -EINVAL;
	b->weight = has ? (uint32_t)x : 1;
	if (route_filters(c, n, &b->filters, &b->n_filters, meta))
		return -EINVAL;
	/* the proxy applies header modifiers per backend; anything else there
	 * would be silently dropped, so it is refused */
	for (int i = 0; i < b->n_filters; i++)
		if (b->filters[i].type != MD_FILTER_REQUEST_HEADER_MODIFIER &&
		    b->filters[i].type != MD_FILTER_RESPONSE_HEADER_MODIFIER) {
			const struct yn *fl = yn_get(n, "filters");
			char f[32];

			snprintf(f, sizeof(f), "filters[%d]", i);
			return dc_fail(c, fl->items[i], f,
				       "only RequestHeaderModifier and ResponseHeaderModifier are "
				       "supported on a backendRef (put the filter on the rule)");
		}
	return 0;
}

static int retry_code(struct dctx *c, const struct yn *v, void *elem, void *arg)
{
	long long x;
	char *end;

	(void)arg;
	if (v->type != YN_SCALAR || (x = strtoll(v->s, &end, 10), *end) || !*v->s)
		return dc_fail(c, v, NULL, "must be an integer");
	if (x < 500 || x > 599)
		return dc_fail(c, v, NULL, "zerohop retries 5xx statuses only (500..599), got %lld",
			       x);
	*(int *)elem = (int)x;
	return 0;
}

/* rules[].retry (Gateway API, GEP-1731): {attempts, backoff, codes}. */
static int rule_retry(struct dctx *c, const struct yn *n, struct md_route_rule *r)
{
	const struct yn *rt = yn_get(n, "retry");
	long long x;
	bool has;
	char *bo;
	size_t old;

	if (!rt)
		return 0;
	old = dc_push(c, "retry");
	if (dc_map(c, rt, NULL) || dc_int(c, rt, "attempts", 0, 10, &x, &has) ||
	    dc_str(c, rt, "backoff", false, &bo) ||
	    dc_seq_each(c, rt, "codes", sizeof(int), (void **)&r->retry_codes,
			&r->n_retry_codes, retry_code, NULL))
		return -EINVAL;
	r->has_retry = true;
	r->retry_attempts = has ? (int)x : 1;
	if (bo && (md_duration_ms(bo, &r->retry_backoff_ms) || !r->retry_backoff_ms ||
		   r->retry_backoff_ms > 10000))
		return dc_fail(c, yn_get(rt, "backoff"), "backoff",
			       "invalid duration \"%s\" (1ms..10s, such as 100ms)", bo);
	dc_pop(c, old);
	return 0;
}

static int route_rule(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	struct md_route_rule *r = elem;
	const struct yn *to;
	size_t old;

	if (dc_map(c, n, NULL) ||
	    dc_seq_each(c, n, "matches", sizeof(*r->matches), (void **)&r->matches,
			&r->n_matches, route_match, NULL) ||
	    route_filters(c, n, &r->filters, &r->n_filters, arg) ||
	    dc_seq_each(c, n, "backendRefs", sizeof(*r->backends), (void **)&r->backends,
			&r->n_backends, md_route_backend_ref, arg))
		return -EINVAL;
	/* Gateway API: each filter type at most once per rule (RequestMirror
	 * excepted), and RequestRedirect excludes URLRewrite; the proxy would
	 * otherwise apply only one of them */
	{
		int seen[MD_FILTER_EXTENSION_REF + 1] = { 0 };
		const struct yn *fl = yn_get(n, "filters");

		for (int i = 0; i < r->n_filters; i++) {
			enum md_filter_type t = r->filters[i].type;
			char f[32];

			snprintf(f, sizeof(f), "filters[%d]", i);
			if (t != MD_FILTER_REQUEST_MIRROR && seen[t]++)
				return dc_fail(c, fl->items[i], f,
					       "a filter of this type is already given (at most one "
					       "per rule)");
			if (t == MD_FILTER_REQUEST_MIRROR && ++seen[t] > PX_MIRRORS_MAX_DECODE)
				return dc_fail(c, fl->items[i], f,
					       "at most %d RequestMirror filters per rule",
					       PX_MIRRORS_MAX_DECODE);
		}
		if (seen[MD_FILTER_REQUEST_REDIRECT] && seen[MD_FILTER_URL_REWRITE])
			return dc_fail(c, fl, "filters",
				       "RequestRedirect and URLRewrite cannot be used together");
	}
	if (yn_get(n, "sessionPersistence"))
		return dc_fail(c, yn_get(n, "sessionPersistence"), "sessionPersistence",
			       "not supported (use the zerohop.io/lb-policy ring-hash annotation)");
	to = yn_get(n, "timeouts");
	if (to) {
		char *req, *be;

		old = dc_push(c, "timeouts");
		if (dc_map(c, to, NULL) || dc_str(c, to, "request", false, &req) ||
		    dc_str(c, to, "backendRequest", false, &be))
			return -EINVAL;
		if (req && md_duration_ms(req, &r->timeout_request_ms))
			return dc_fail(c, yn_get(to, "request"), "request",
				       "invalid duration \"%s\" (such as 500ms, 10s, 1m30s)", req);
		if (be && md_duration_ms(be, &r->timeout_backend_ms))
			return dc_fail(c, yn_get(to, "backendRequest"), "backendRequest",
				       "invalid duration \"%s\" (such as 500ms, 10s, 1m30s)", be);
		if (r->timeout_request_ms && r->timeout_backend_ms > r->timeout_request_ms)
			return dc_fail(c, yn_get(to, "backendRequest"), "backendRequest",
				       "must not be longer than timeouts.request");
		dc_pop(c, old);
	}
	return rule_retry(c, n, r);
}

int md_route_parent_ref(struct dctx *c, const struct yn *p, void *elem, void *arg)
{
	const struct md_meta *meta = arg;
	struct md_parent_ref *pr = elem;
	long long x;
	bool has;

	if (dc_map(c, p, NULL) || dc_str(c, p, "name", true, &pr->name) ||
	    dc_str(c, p, "namespace", false, &pr->ns) ||
	    dc_str(c, p, "kind", false, &pr->kind) ||
	    dc_str(c, p, "group", false, &pr->group) ||
	    dc_int(c, p, "port", 1, 65535, &x, &has))
		return -EINVAL;
	pr->port = has ? (uint16_t)x : 0;
	pr->line = p->line;
	if (!pr->kind)
		pr->kind = "Gateway";
	if (!pr->group)
		pr->group = "gateway.networking.k8s.io";
	if (!strcmp(pr->group, "core"))
		pr->group = "";
	if (!pr->ns)
		pr->ns = meta->ns;
	if (!strcmp(pr->kind, "Service") && !*pr->group && yn_get(p, "sectionName"))
		return dc_fail(c, yn_get(p, "sectionName"), "sectionName",
			       "not supported for a Service parent: use port");
	return 0;
}

static void route_warn(struct dctx *c, const struct yn *root, const struct md_httproute *rt);

int md_decode_route(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	return md_route_decode(c, root, meta, false, route_rule);
}

int md_route_decode(struct dctx *c, const struct yn *root, struct md_meta *meta, bool grpc,
		    dc_item_fn rule)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_httproute *rt = zh_grow((void **)&c->st->routes, &c->st->n_routes,
					  &pv->cap_route, sizeof(*rt));
	const struct yn *spec = yn_get(root, "spec");
	size_t old;

	rt->meta = *meta;
	rt->grpc = grpc;
	if (!spec)
		return dc_fail(c, root, "spec", "is required");
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) ||
	    dc_str_list(c, spec, "hostnames", &rt->hostnames, &rt->n_hostnames) ||
	    dc_seq_each(c, spec, "parentRefs", sizeof(*rt->parents), (void **)&rt->parents,
			&rt->n_parents, md_route_parent_ref, meta) ||
	    dc_seq_each(c, spec, "rules", sizeof(*rt->rules), (void **)&rt->rules, &rt->n_rules,
			rule, meta))
		return -EINVAL;
	dc_pop(c, old);
	route_warn(c, root, rt);
	return 0;
}

static void route_warn(struct dctx *c, const struct yn *root, const struct md_httproute *rt)
{
	const struct yn *spec = yn_get(root, "spec");
	bool svc_parent = false;

	/* what is accepted but not acted on is said on apply */
	for (int i = 0; i < rt->n_parents; i++)
		if (!strcmp(rt->parents[i].kind, "Service") && !*rt->parents[i].group)
			svc_parent = true;
	if (!svc_parent)
		md_warn(c->st, c->file, root->line, "spec.parentRefs",
			"%s %s/%s has no Service parent: not acted on (zerohop has no "
			"ingress gateway; attach it to a Service for the mesh)",
			rt->grpc ? "GRPCRoute" : "HTTPRoute", rt->meta.ns, rt->meta.name);
	else if (rt->n_hostnames)
		md_warn(c->st, c->file, yn_get(spec, "hostnames")->line, "spec.hostnames",
			"ignored for a route attached to a Service (GAMMA: the Service is "
			"what is matched)");
}

/* ---- SMI HTTPRouteGroup ------------------------------------------------------------- */

static int rg_regex(struct dctx *c, const struct yn *at, const char *field, const char *re)
{
	regex_t rx;

	if (regcomp(&rx, re, REG_EXTENDED | REG_NOSUB))
		return dc_fail(c, at, field, "invalid regular expression \"%s\"", re);
	regfree(&rx);
	return 0;
}

static int rg_match(struct dctx *c, const struct yn *m, void *elem, void *arg)
{
	struct md_rg_match *rm = elem;
	const struct yn *h;

	(void)arg;
	if (dc_map(c, m, NULL) || dc_str(c, m, "name", true, &rm->name) ||
	    dc_str(c, m, "pathRegex", false, &rm->path_regex) ||
	    dc_str_list(c, m, "methods", &rm->methods, &rm->n_methods))
		return -EINVAL;
	if (rm->path_regex && rg_regex(c, yn_get(m, "pathRegex"), "pathRegex", rm->path_regex))
		return -EINVAL;
	h = yn_get(m, "headers");
	if (!h)
		return 0;
	if (h->type == YN_MAP) {
		/* v1alpha4 spec text: headers: {name: regex, ...} */
		if (dc_labels(c, m, "headers", false, &rm->headers))
			return -EINVAL;
	} else if (h->type == YN_SEQ) {
		/* the split spec's example: headers: [{name: regex}, ...] */
		int n = 0;

		for (int i = 0; i < h->n; i++) {
			if (h->items[i]->type != YN_MAP)
				return dc_fail(c, h->items[i], "headers",
					       "must be a mapping of header name to regex");
			n += h->items[i]->n;
		}
		rm->headers.v = ar_alloc(c->ar, (size_t)(n + 1) * sizeof(*rm->headers.v));
		for (int i = 0; i < h->n; i++)
			for (int j = 0; j < h->items[i]->n; j++) {
				const struct yn_pair *pr = &h->items[i]->pairs[j];

				if (pr->val->type != YN_SCALAR)
					return dc_fail(c, pr->val, "headers", "must be a string");
				rm->headers.v[rm->headers.n].key = (char *)pr->key;
				rm->headers.v[rm->headers.n++].value = (char *)pr->val->s;
			}
	} else {
		return dc_fail(c, h, "headers", "must be a mapping of header name to regex");
	}
	for (int i = 0; i < rm->headers.n; i++)
		if (rg_regex(c, h, "headers", rm->headers.v[i].value))
			return -EINVAL;
	return 0;
}

int md_decode_routegroup(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_routegroup *g = zh_grow((void **)&c->st->routegroups, &c->st->n_routegroups,
					  &pv->cap_rg, sizeof(*g));
	const struct yn *spec = yn_get(root, "spec");
	size_t old;

	g->meta = *meta;
	if (!spec)
		return dc_fail(c, root, "spec", "is required");
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) ||
	    dc_seq_each(c, spec, "matches", sizeof(*g->matches), (void **)&g->matches,
			&g->n_matches, rg_match, NULL))
		return -EINVAL;
	if (!g->n_matches)
		return dc_fail(c, spec, "matches", "must list at least one match");
	dc_pop(c, old);
	return 0;
}

static bool match_is_default(const struct md_route_match *m)
{
	return m->path_type == MD_PATH_PREFIX && !strcmp(m->path, "/") && !m->n_headers &&
	       !m->n_query && !m->method;
}

bool md_parent_is_consumer(const struct md_httproute *r, const struct md_parent_ref *p)
{
	return !strcmp(p->kind, "Service") && !*p->group && p->ns && r->meta.ns &&
	       strcmp(p->ns, r->meta.ns);
}

bool md_route_needs_l7(const struct md_httproute *r)
{
	/* a consumer route applies to some clients only: per request */
	if (r->grpc)
		return true;
	for (int i = 0; i < r->n_parents; i++)
		if (md_parent_is_consumer(r, &r->parents[i]))
			return true;
	for (int i = 0; i < r->n_rules; i++) {
		const struct md_route_rule *ru = &r->rules[i];

		if (ru->n_filters || ru->timeout_request_ms || ru->timeout_backend_ms ||
		    ru->has_retry)
			return true;
		for (int j = 0; j < ru->n_matches; j++)
			if (!match_is_default(&ru->matches[j]))
				return true;
		for (int j = 0; j < ru->n_backends; j++)
			if (ru->backends[j].n_filters)
				return true;
	}
	return false;
}

/* ---- NetworkPolicy --------------------------------------------------------------- */

static int np_cidr(struct dctx *c, const struct yn *map, const char *field, const char *s,
		   uint32_t *net, int *len)
{
	bool canon;

	if (md_parse_cidr_loose(s, net, len, &canon))
		return dc_fail(c, yn_get(map, field), field, "invalid CIDR \"%s\"", s);
	if (!canon) {
		struct in_addr a = { .s_addr = *net & htonl(md_mask(*len)) };
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		return dc_fail(c, yn_get(map, field), field,
			       "invalid CIDR \"%s\": host bits set (did you mean %s/%d?)", s, ip, *len);
	}
	return 0;
}

/* An IPv6 ipBlock (docs/policy.md "IPv6"): cidr and every except IPv6,
 * no host bits, each except strictly inside cidr. */
static int np_ipblock6(struct dctx *c, const struct yn *n, const char *cidr, char **except,
		       int n_except, struct md_ipblock *b)
{
	const struct yn *ex = yn_get(n, "except");

	if (md_parse_cidr6(cidr, &b->cidr6, &b->len))
		return dc_fail(c, yn_get(n, "cidr"), "cidr",
			       "invalid CIDR \"%s\" (IPv6: no host bits may be set)", cidr);
	b->v6 = true;
	b->except6 = ar_alloc(c->ar, (size_t)n_except * sizeof(*b->except6));
	b->except_len = ar_alloc(c->ar, (size_t)n_except * sizeof(*b->except_len));
	for (int i = 0; i < n_except; i++) {
		size_t old;
		int len, r;

		if (!md_parse_cidr6(except[i], &b->except6[i], &len) && len > b->len &&
		    md_in_cidr6(&b->except6[i], &b->cidr6, b->len)) {
			b->except_len[i] = len;
			continue;
		}
		old = dc_push(c, "except");
		dc_push_idx(c, i);
		r = md_parse_cidr6(except[i], &b->except6[i], &len) ?
			dc_fail(c, ex->items[i], NULL,
				"invalid CIDR \"%s\" (an IPv6 cidr takes IPv6 excepts, no host bits set)",
				except[i]) :
			dc_fail(c, ex->items[i], NULL, "\"%s\" is not strictly within cidr %s",
				except[i], cidr);
		dc_pop(c, old);
		return r;
	}
	b->n_except = n_except;
	return 0;
}

static int np_ipblock(struct dctx *c, const struct yn *n, struct md_ipblock *b)
{
	const struct yn *ex;
	char *cidr;
	char **except;
	int n_except;

	if (dc_map(c, n, NULL) || dc_str(c, n, "cidr", true, &cidr) ||
	    dc_str_list(c, n, "except", &except, &n_except))
		return -EINVAL;
	if (strchr(cidr, ':'))
		return np_ipblock6(c, n, cidr, except, n_except, b);
	if (np_cidr(c, n, "cidr", cidr, &b->cidr, &b->len))
		return -EINVAL;
	ex = yn_get(n, "except");
	b->except = ar_alloc(c->ar, (size_t)n_except * sizeof(*b->except));
	b->except_len = ar_alloc(c->ar, (size_t)n_except * sizeof(*b->except_len));
	for (int i = 0; i < n_except; i++) {
		char f[32];
		uint32_t net;
		int len;

		snprintf(f, sizeof(f), "except[%d]", i);
		if (md_parse_cidr(except[i], &net, &len)) {
			size_t old = dc_push(c, "except");
			bool canon;
			int r;

			dc_push_idx(c, i);
			r = md_parse_cidr_loose(except[i], &net, &len, &canon) ?
				dc_fail(c, ex->items[i], NULL, "invalid CIDR \"%s\"", except[i]) :
				dc_fail(c, ex->items[i], NULL, "invalid CIDR \"%s\": host bits set",
					except[i]);
			dc_pop(c, old);
			return r;
		}
		/* strictly inside: same network under cidr's mask, longer prefix */
		if (len <= b->len || ((ntohl(net) ^ ntohl(b->cidr)) & md_mask(b->len))) {
			size_t old = dc_push(c, "except");
			int r;

			dc_push_idx(c, i);
			r = dc_fail(c, ex->items[i], NULL, "\"%s\" is not strictly within cidr %s",
				    except[i], cidr);
			dc_pop(c, old);
			return r;
		}
		b->except[i] = net;
		b->except_len[i] = len;
	}
	b->n_except = n_except;
	return 0;
}

static int np_peer(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	struct md_np_peer *p = elem;
	const struct yn *ib;

	(void)arg;
	if (dc_map(c, n, NULL) || dc_selector(c, n, "podSelector", &p->pod_sel) ||
	    dc_selector(c, n, "namespaceSelector", &p->ns_sel))
		return -EINVAL;
	ib = yn_get(n, "ipBlock");
	if (ib) {
		size_t old = dc_push(c, "ipBlock");

		if (p->pod_sel.present || p->ns_sel.present)
			return dc_fail(c, ib, NULL,
				       "may not be combined with podSelector or namespaceSelector");
		if (np_ipblock(c, ib, &p->ipblock))
			return -EINVAL;
		p->has_ipblock = true;
		dc_pop(c, old);
	}
	if (!p->pod_sel.present && !p->ns_sel.present && !p->has_ipblock)
		return dc_fail(c, n, NULL,
			       "must specify podSelector, namespaceSelector or ipBlock");
	return 0;
}

static int np_port(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	struct md_np_port *p = elem;
	long long end;
	bool has_end;

	(void)arg;
	if (dc_map(c, n, NULL) || dc_proto(c, n, "protocol", true, &p->proto, &p->has_proto) ||
	    dc_port_ref(c, n, "port", &p->port) ||
	    dc_int(c, n, "endPort", 1, 65535, &end, &has_end))
		return -EINVAL;
	if (!has_end)
		return 0;
	if (!p->port.present)
		return dc_fail(c, yn_get(n, "endPort"), "endPort",
			       "may not be specified when port is not specified");
	if (p->port.name)
		return dc_fail(c, yn_get(n, "endPort"), "endPort",
			       "may not be specified when port is a named port");
	if (end < p->port.num)
		return dc_fail(c, yn_get(n, "endPort"), "endPort",
			       "must be greater than or equal to port (%u)", p->port.num);
	p->end_port = (uint16_t)end;
	return 0;
}

/* One ingress or egress rule; arg is the peers field ("from" or "to"). */
static int np_rule(struct dctx *c, const struct yn *r, void *elem, void *arg)
{
	struct md_np_rule *ru = elem;

	if (yn_is_null(r))	/* "- {}" written as "-": allow all */
		return 0;
	if (dc_map(c, r, NULL) ||
	    dc_seq_each(c, r, arg, sizeof(*ru->peers), (void **)&ru->peers, &ru->n_peers,
			np_peer, NULL) ||
	    dc_seq_each(c, r, "ports", sizeof(*ru->ports), (void **)&ru->ports, &ru->n_ports,
			np_port, NULL))
		return -EINVAL;
	ru->peers_present = yn_get(r, arg) != NULL;
	return 0;
}

static int np_rules(struct dctx *c, const struct yn *spec, const char *field, const char *peers,
		    struct md_np_rule **out, int *n_out)
{
	return dc_seq_each(c, spec, field, sizeof(**out), (void **)out, n_out, np_rule,
			   (void *)peers);
}

int md_decode_netpol(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_netpol *np = zh_grow((void **)&c->st->netpols, &c->st->n_netpols,
				       &pv->cap_np, sizeof(*np));
	const struct yn *spec = yn_get(root, "spec"), *types;
	size_t old;

	np->meta = *meta;
	if (!spec)
		return dc_fail(c, root, "spec", "is required");
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) || dc_selector(c, spec, "podSelector", &np->pod_sel) ||
	    np_rules(c, spec, "ingress", "from", &np->ingress, &np->n_ingress) ||
	    np_rules(c, spec, "egress", "to", &np->egress, &np->n_egress))
		return -EINVAL;
	np->pod_sel.present = true;	/* absent podSelector defaults to {} (all pods) */
	types = yn_get(spec, "policyTypes");
	if (types) {
		char **v;
		int n;

		if (dc_str_list(c, spec, "policyTypes", &v, &n))
			return -EINVAL;
		np->types_given = true;
		for (int i = 0; i < n; i++) {
			bool *t = !strcmp(v[i], "Ingress") ? &np->type_ingress :
				  !strcmp(v[i], "Egress") ? &np->type_egress : NULL;
			size_t o2 = dc_push(c, "policyTypes");

			dc_push_idx(c, i);
			if (!t)
				return dc_fail(c, types->items[i], NULL,
					       "unknown policy type \"%s\" (Ingress, Egress)", v[i]);
			if (*t)
				return dc_fail(c, types->items[i], NULL, "duplicate policy type \"%s\"",
					       v[i]);
			*t = true;
			dc_pop(c, o2);
		}
	} else {
		/* SetDefaults_NetworkPolicy: Ingress always, Egress when rules exist */
		np->type_ingress = true;
		np->type_egress = np->n_egress > 0;
	}
	dc_pop(c, old);
	return 0;
}
