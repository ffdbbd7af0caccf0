/* decode_grpc.c — Gateway API GRPCRoute (gateway.networking.k8s.io/v1) into
 * the same md_httproute the HTTPRoute decoder fills (grpc set), so the
 * agent, the proxy's router and `get routes` need no second code path.
 *
 * Invariants (cited by the router and docs/model.md "GRPCRoute"):
 * G1. A gRPC call is an HTTP/2 POST to the path /SERVICE/METHOD, so every
 *     method match becomes a path match the router already honours:
 *       Exact service + method  -> Exact "/SERVICE/METHOD"
 *       Exact service only      -> PathPrefix "/SERVICE" (segment semantics:
 *                                  every method of that service)
 *       Exact method only       -> RegularExpression "/[^/]+/METHOD"
 *       RegularExpression       -> RegularExpression "/(S)/(M)", a missing
 *                                  side being [^/]+
 *       no method               -> PathPrefix "/" (every call)
 *     Exact names are checked against the Gateway API patterns, so they
 *     hold no regex metacharacters; regexes are POSIX extended (checked
 *     here with regcomp, as the router compiles them anchored ^(...)$).
 * G2. Each match keeps grpc, the lengths of its service and method: the
 *     router orders GRPCRoute matches by Gateway API's GRPCRoute precedence
 *     (longer service, then longer method, then more header matches), not
 *     by path type.
 * G3. Only what the proxy applies to a call is accepted: header matches,
 *     RequestHeaderModifier and ResponseHeaderModifier (rule and backendRef),
 *     RequestMirror on a rule (at most 4, as on an HTTPRoute; the proxy
 *     copies the call over h2c to an HTTP/2 mirror port, mirror_h2.c),
 *     backendRefs with weights. RequestMirror on a backendRef,
 *     ExtensionRef and sessionPersistence are refused naming the field,
 *     never ignored.
 * G4. A GRPCRoute always needs the L7 proxy (md_route_needs_l7): weights
 *     per connection would pin long-lived gRPC connections.
 */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md_int.h"

#define GRPC_NAME_MAX 1024	/* Gateway API: maxLength of service and method */

/* Gateway API pattern of an Exact service: ^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$ */
static bool grpc_service_ok(const char *s)
{
	bool start = true;

	if (*s == '.')
		s++;
	if (!*s)
		return false;
	for (; *s; s++) {
		char ch = *s;
		bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';

		if (ch == '.') {
			if (start)
				return false;	/* empty component */
			start = true;
			continue;
		}
		if (!alpha && !(ch >= '0' && ch <= '9' && !start))
			return false;
		start = false;
	}
	return !start;
}

/* Gateway API pattern of an Exact method: ^[A-Za-z_][A-Za-z_0-9]*$ */
static bool grpc_method_ok(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static int grpc_regex_ok(struct dctx *c, const struct yn *m, const char *field, const char *re)
{
	char *pat = ar_printf(c->ar, "^(%s)$", re);
	regex_t rx;

	if (regcomp(&rx, pat, REG_EXTENDED | REG_NOSUB))
		return dc_fail(c, yn_get(m, field), field,
			       "invalid regular expression \"%s\" (POSIX extended)", re);
	regfree(&rx);
	return 0;
}

/* matches[].method {type, service, method} into rm's path (G1). */
static int grpc_method(struct dctx *c, const struct yn *m, struct md_route_match *rm)
{
	char *type, *svc, *meth;
	bool regex;
	size_t old = dc_push(c, "method");

	if (dc_map(c, m, NULL) || dc_str(c, m, "type", false, &type) ||
	    dc_str(c, m, "service", false, &svc) || dc_str(c, m, "method", false, &meth))
		return -EINVAL;
	if (type && strcmp(type, "Exact") && strcmp(type, "RegularExpression"))
		return dc_fail(c, yn_get(m, "type"), "type",
			       "unknown method match type \"%s\" (Exact, RegularExpression)", type);
	regex = type && !strcmp(type, "RegularExpression");
	if (svc && !*svc)
		svc = NULL;
	if (meth && !*meth)
		meth = NULL;
	if (!svc && !meth)
		return dc_fail(c, m, "service",
			       "one or both of service and method must be given");
	if (svc && strlen(svc) > GRPC_NAME_MAX)
		return dc_fail(c, yn_get(m, "service"), "service", "longer than %d characters",
			       GRPC_NAME_MAX);
	if (meth && strlen(meth) > GRPC_NAME_MAX)
		return dc_fail(c, yn_get(m, "method"), "method", "longer than %d characters",
			       GRPC_NAME_MAX);
	if (regex) {
		if ((svc && grpc_regex_ok(c, m, "service", svc)) ||
		    (meth && grpc_regex_ok(c, m, "method", meth)))
			return -EINVAL;
		rm->path_type = MD_PATH_REGEX;
		rm->path = ar_printf(c->ar, "/(%s)/(%s)", svc ? svc : "[^/]+",
				     meth ? meth : "[^/]+");
	} else {
		if (svc && !grpc_service_ok(svc))
			return dc_fail(c, yn_get(m, "service"), "service",
				       "invalid gRPC service name \"%s\" (dot-separated identifiers "
				       "such as helloworld.Greeter; use type RegularExpression "
				       "for patterns)", svc);
		if (meth && !grpc_method_ok(meth))
			return dc_fail(c, yn_get(m, "method"), "method",
				       "invalid gRPC method name \"%s\" (an identifier such as "
				       "SayHello; use type RegularExpression for patterns)", meth);
		if (svc && meth) {
			rm->path_type = MD_PATH_EXACT;
			rm->path = ar_printf(c->ar, "/%s/%s", svc, meth);
		} else if (svc) {
			rm->path_type = MD_PATH_PREFIX;
			rm->path = ar_printf(c->ar, "/%s", svc);
		} else {
			rm->path_type = MD_PATH_REGEX;
			rm->path = ar_printf(c->ar, "/[^/]+/%s", meth);
		}
	}
	rm->grpc_regex = regex;
	rm->grpc_svc_len = svc ? (int)strlen(svc) : 0;
	rm->grpc_method_len = meth ? (int)strlen(meth) : 0;
	dc_pop(c, old);
	return 0;
}

static int grpc_match(struct dctx *c, const struct yn *m, void *elem, void *arg)
{
	struct md_route_match *rm = elem;
	const struct yn *meth = yn_get(m, "method");

	(void)arg;
	if (dc_map(c, m, NULL))
		return -EINVAL;
	rm->grpc = true;
	rm->path_type = MD_PATH_PREFIX;
	rm->path = "/";
	if (meth && grpc_method(c, meth, rm))
		return -EINVAL;
	return dc_seq_each(c, m, "headers", sizeof(*rm->headers), (void **)&rm->headers,
			   &rm->n_headers, md_route_hdr_match, NULL);
}

static const char grpc_filters_ok[] =
	"RequestHeaderModifier, ResponseHeaderModifier and (on a rule) RequestMirror";

/* Refuse (G3) what the schema has but the proxy would not apply to a call. */
static int grpc_filter_refused(struct dctx *c, const struct yn *n, const char *type)
{
	if (!strcmp(type, "RequestMirror"))
		return dc_fail(c, yn_get(n, "type"), "type",
			       "RequestMirror is not supported on a GRPCRoute backendRef (only "
			       "on a rule): the calls would not be mirrored as written; "
			       "supported: %s", grpc_filters_ok);
	if (!strcmp(type, "ExtensionRef"))
		return dc_fail(c, yn_get(n, "type"), "type",
			       "ExtensionRef filters are not supported by zerohop (no "
			       "extensions); supported: %s", grpc_filters_ok);
	return dc_fail(c, yn_get(n, "type"), "type",
		       "unknown GRPCRoute filter type \"%s\" (%s; ExtensionRef "
		       "is refused)", type, grpc_filters_ok);
}

static int grpc_filter(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	struct md_filter *f = elem;
	char *type;

	(void)arg;
	int rc;

	if (dc_map(c, n, NULL) || dc_str(c, n, "type", true, &type))
		return -EINVAL;
	if ((rc = md_route_hdr_filter(c, n, type, f)) <= 0)
		return rc;
	if (!strcmp(type, "RequestMirror")) {	/* G3 */
		f->type = MD_FILTER_REQUEST_MIRROR;
		return md_route_mirror_filter(c, n, f, arg);
	}
	return grpc_filter_refused(c, n, type);
}

/* A backendRef as HTTPRoute's, after its filters' types were checked here
 * so a refused one is named with the GRPCRoute reason. */
static int grpc_backend(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	const struct yn *fl = n->type == YN_MAP ? yn_get(n, "filters") : NULL;

	for (int i = 0; fl && fl->type == YN_SEQ && i < fl->n; i++) {
		const struct yn *f = fl->items[i], *t = f->type == YN_MAP ? yn_get(f, "type") : NULL;
		size_t old;
		int rc;

		if (!t || t->type != YN_SCALAR || !strcmp(t->s, "RequestHeaderModifier") ||
		    !strcmp(t->s, "ResponseHeaderModifier"))
			continue;	/* the shared decoder names a malformed one */
		old = dc_push(c, "filters");
		dc_push_idx(c, i);
		rc = grpc_filter_refused(c, f, t->s);
		dc_pop(c, old);
		return rc;
	}
	return md_route_backend_ref(c, n, elem, arg);
}

static int grpc_rule(struct dctx *c, const struct yn *n, void *elem, void *arg)
{
	struct md_route_rule *r = elem;
	int seen[MD_FILTER_EXTENSION_REF + 1] = { 0 };
	const struct yn *fl;

	if (dc_map(c, n, NULL) ||
	    dc_seq_each(c, n, "matches", sizeof(*r->matches), (void **)&r->matches,
			&r->n_matches, grpc_match, NULL) ||
	    dc_seq_each(c, n, "filters", sizeof(*r->filters), (void **)&r->filters,
			&r->n_filters, grpc_filter, arg) ||
	    dc_seq_each(c, n, "backendRefs", sizeof(*r->backends), (void **)&r->backends,
			&r->n_backends, grpc_backend, arg))
		return -EINVAL;
	/* Gateway API: each filter type at most once per rule, RequestMirror
	 * at most 4 times (as decode_mesh.c checks an HTTPRoute's) */
	fl = yn_get(n, "filters");
	for (int i = 0; i < r->n_filters; i++) {
		int t = r->filters[i].type;
		char f[32];

		snprintf(f, sizeof(f), "filters[%d]", i);
		if (t != MD_FILTER_REQUEST_MIRROR && seen[t]++)
			return dc_fail(c, fl->items[i], f, "a filter of this type is already given "
				       "(at most one per rule)");
		if (t == MD_FILTER_REQUEST_MIRROR && ++seen[t] > 4)
			return dc_fail(c, fl->items[i], f, "at most 4 RequestMirror filters per rule");
	}
	if (yn_get(n, "sessionPersistence"))
		return dc_fail(c, yn_get(n, "sessionPersistence"), "sessionPersistence",
			       "not supported (use the zerohop.io/lb-policy ring-hash annotation)");
	return 0;
}

int md_decode_grpcroute(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	return md_route_decode(c, root, meta, true, grpc_rule);
}
