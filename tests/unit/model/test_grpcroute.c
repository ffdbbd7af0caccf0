/* test_grpcroute.c — GRPCRoute (gateway.networking.k8s.io/v1) decoded into
 * the route model: each method match becomes the path the router matches
 * (src/model/decode_grpc.c G1), precedence keys (G2), filters and
 * backendRefs with weights, references resolved eventually, warnings, and
 * a GRPCRoute always needs the L7 proxy (G4). Errors are in test_errors.c. */
#include <errno.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"

static const char *yaml =
	"apiVersion: v1\nkind: Service\nmetadata: {name: greeter}\n"
	"spec: {selector: {app: g}, ports: [{name: grpc, port: 80, targetPort: 9000}]}\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\n"
	"metadata: {name: greeter}\n"
	"spec:\n"
	"  parentRefs: [{group: \"\", kind: Service, name: greeter, port: 80}]\n"
	"  hostnames: [greeter.example]\n"
	"  rules:\n"
	"  - matches:\n"
	"    - method: {service: helloworld.Greeter, method: SayHello}\n"
	"    - method: {service: helloworld.Greeter}\n"
	"    - method: {method: SayHello}\n"
	"    - method: {type: RegularExpression, service: \"helloworld\\\\..*\", method: \"Say.*\"}\n"
	"    - method: {type: RegularExpression, method: \"Say.*\"}\n"
	"      headers: [{name: x-canary, value: \"yes\"}, {type: RegularExpression, name: x-u, value: \"u[0-9]+\"}]\n"
	"    - headers: [{name: x-any, value: \"1\"}]\n"
	"    filters:\n"
	"    - type: RequestHeaderModifier\n"
	"      requestHeaderModifier: {set: [{name: x-route, value: greeter}], remove: [x-drop]}\n"
	"    - type: ResponseHeaderModifier\n"
	"      responseHeaderModifier: {add: [{name: x-served, value: v2}]}\n"
	"    backendRefs:\n"
	"    - name: greeter-v2\n"
	"      port: 80\n"
	"      filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-b, value: \"2\"}]}}]\n"
	"  - backendRefs:\n"
	"    - {name: greeter, port: 80, weight: 90}\n"
	"    - {name: greeter-v2, port: 80, weight: 10}\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
	"metadata: {name: greeter}\n"
	"spec:\n"
	"  parentRefs: [{group: \"\", kind: Service, name: greeter}]\n"
	"  rules: [{backendRefs: [{name: greeter, port: 80}]}]\n";

static bool has_warning(const struct md_state *st, const char *field, const char *msg)
{
	for (int i = 0; i < st->n_warnings; i++)
		if (!strcmp(st->warnings[i].field, field) && strstr(st->warnings[i].msg, msg))
			return true;
	return false;
}

static void match_is(const struct md_route_match *m, enum md_path_type t, const char *path,
		     int svc_len, int meth_len, const char *what)
{
	is_int(m->path_type, t, "%s: path type", what);
	is_str(m->path, path, "%s: path %s", what, path);
	ok(m->grpc, "%s: marked as a gRPC match", what);
	is_int(m->grpc_svc_len, svc_len, "%s: service length", what);
	is_int(m->grpc_method_len, meth_len, "%s: method length", what);
}

int main(void)
{
	struct md_state *st = md_state_new();
	const struct md_httproute *g = NULL, *h = NULL;
	const struct md_route_rule *r;
	struct md_err e;
	char eb[512];
	int rc;

	rc = md_state_add_buf(st, "g.yaml", yaml, strlen(yaml), &e);
	if (!rc)
		rc = md_state_finish(st, &e);
	if (!ok(rc == 0, "a GRPCRoute and an HTTPRoute of the same name load")) {
		diag("%s", md_err_str(&e, eb, sizeof(eb)));
		return done_testing();
	}
	is_int(st->n_routes, 2, "both kept in st->routes");
	for (int i = 0; i < st->n_routes; i++)
		*(st->routes[i].grpc ? &g : &h) = &st->routes[i];
	if (!ok(g && h, "one of each kind"))
		return done_testing();
	ok(md_route_needs_l7(g), "a GRPCRoute needs the L7 proxy (per-call balancing)");
	ok(!md_route_needs_l7(h), "the plain HTTPRoute does not");
	is_str(md_kind_name(MD_K_GRPCROUTE), "GRPCRoute", "kind name");
	is_str(md_kind_lower(MD_K_GRPCROUTE), "grpcroute", "kind file name");
	is_int(g->n_parents, 1, "one parent");
	ok(g->parents[0].svc == md_find_service(st, "default", "greeter"), "parent Service resolved");
	ok(has_warning(st, "spec.hostnames", "ignored for a route attached to a Service"),
	   "hostnames on a Service parent: warned, as for HTTPRoute");
	ok(strstr(g->not_ready, "greeter-v2") != NULL, "... the route is not ready, naming it (%s)",
	   g->not_ready);

	is_int(g->n_rules, 2, "two rules");
	r = &g->rules[0];
	is_int(r->n_matches, 6, "six matches");
	match_is(&r->matches[0], MD_PATH_EXACT, "/helloworld.Greeter/SayHello", 18, 8,
		 "Exact service + method");
	match_is(&r->matches[1], MD_PATH_PREFIX, "/helloworld.Greeter", 18, 0, "Exact service");
	match_is(&r->matches[2], MD_PATH_REGEX, "/[^/]+/SayHello", 0, 8, "Exact method");
	match_is(&r->matches[3], MD_PATH_REGEX, "/(helloworld\\..*)/(Say.*)", 14, 5,
		 "RegularExpression service + method");
	ok(r->matches[3].grpc_regex, "... marked RegularExpression");
	match_is(&r->matches[4], MD_PATH_REGEX, "/([^/]+)/(Say.*)", 0, 5,
		 "RegularExpression method only");
	is_int(r->matches[4].n_headers, 2, "header matches kept");
	is_int(r->matches[4].headers[0].type, MD_MATCH_EXACT, "header Exact (default)");
	is_str(r->matches[4].headers[0].name, "x-canary", "header name");
	is_int(r->matches[4].headers[1].type, MD_MATCH_REGEX, "header RegularExpression");
	match_is(&r->matches[5], MD_PATH_PREFIX, "/", 0, 0, "headers only: every method");
	ok(!r->matches[0].method, "no HTTP method constraint (gRPC is POST anyway)");

	is_int(r->n_filters, 2, "two rule filters");
	is_int(r->filters[0].type, MD_FILTER_REQUEST_HEADER_MODIFIER, "RequestHeaderModifier");
	is_str(r->filters[0].headers.set.v[0].key, "x-route", "... set x-route");
	is_str(r->filters[0].headers.remove[0], "x-drop", "... remove x-drop");
	is_int(r->filters[1].type, MD_FILTER_RESPONSE_HEADER_MODIFIER, "ResponseHeaderModifier");
	is_int(r->n_backends, 1, "one backendRef");
	is_int(r->backends[0].weight, 1, "weight defaults to 1");
	is_int(r->backends[0].n_filters, 1, "backendRef header modifier kept");
	ok(r->backends[0].svc == NULL, "missing backend left unresolved");

	r = &g->rules[1];
	is_int(r->n_matches, 0, "a rule without matches (every call)");
	is_int(r->n_backends, 2, "two weighted backends");
	is_int(r->backends[0].weight, 90, "weight 90");
	is_int(r->backends[1].weight, 10, "weight 10");
	is_str(r->backends[0].ns, "default", "backend namespace defaults to the route's");
	ok(!r->has_retry && !r->timeout_request_ms, "no retry or timeout fields on a GRPCRoute");
	md_state_free(st);

	/* a GRPCRoute without a Service parent is accepted, not acted on */
	{
		const char *gw = "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\n"
				 "metadata: {name: gw}\nspec:\n  parentRefs: [{name: my-gateway}]\n"
				 "  rules: [{}]\n";

		st = md_state_new();
		is_int(md_state_add_buf(st, "gw.yaml", gw, strlen(gw), &e), 0,
		       "Gateway parent accepted");
		ok(has_warning(st, "spec.parentRefs", "GRPCRoute default/gw has no Service parent"),
		   "... with the warning naming the kind");
		md_state_free(st);
	}
	return done_testing();
}
