/* test_router_grpc.c — GRPCRoutes in the proxy's route table: a gRPC call
 * (POST /SERVICE/METHOD) is matched by service and method, Exact and
 * RegularExpression, and by headers; GRPCRoute precedence (router.c
 * invariant 7); weights 90/10 over the random range; header modifiers in
 * the decision; a GRPCRoute beside an HTTPRoute on one Service port. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/proxy.h"

#define POD(n, app, ip)                                                                  \
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: " n ", labels: {app: " app "}}\n" \
	"spec: {nodeName: node-a, containers: [{name: x}]}\n"                              \
	"status: {podIP: " ip ", phase: Running}\n"
#define SVC(n, app)                                                                      \
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: " n "}\n"                     \
	"spec: {selector: {app: " app "}, ports: [{name: grpc, port: 80, targetPort: 9000}]}\n"

static const char *manifests =
	SVC("greeter", "v1") SVC("v1", "v1") SVC("v2", "v2") SVC("v3", "v3") SVC("mixed", "v1")
	POD("p1", "v1", "10.244.0.11") POD("p2", "v2", "10.244.0.12") POD("p3", "v3", "10.244.0.13")
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: g}\n"
	"spec:\n"
	"  parentRefs: [{group: \"\", kind: Service, name: greeter, port: 80}]\n"
	"  rules:\n"
	"  - matches: [{method: {service: hello.Greeter, method: SayHello}}]\n"
	"    filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-v, value: \"2\"}]}}]\n"
	"    backendRefs: [{name: v2, port: 80}]\n"
	"  - matches: [{method: {service: hello.Greeter}}]\n"
	"    backendRefs: [{name: v3, port: 80}]\n"
	"  - matches: [{method: {method: Ping}}]\n"
	"    backendRefs: [{name: v2, port: 80}]\n"
	"  - matches: [{method: {type: RegularExpression, service: \"admin\\\\..*\"}}]\n"
	"    backendRefs: [{name: v3, port: 80}]\n"
	"  - matches: [{headers: [{name: x-canary, value: always}]}]\n"
	"    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: x-c, value: \"1\"}]}}]\n"
	"    backendRefs: [{name: v2, port: 80}]\n"
	"  - backendRefs: [{name: v1, port: 80, weight: 90}, {name: v2, port: 80, weight: 10}]\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: m}\n"
	"spec:\n"
	"  parentRefs: [{group: \"\", kind: Service, name: mixed}]\n"
	"  rules:\n"
	"  - matches: [{method: {service: x.S}}]\n"
	"    backendRefs: [{name: v2, port: 80}]\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: m}\n"
	"spec:\n"
	"  parentRefs: [{group: \"\", kind: Service, name: mixed}]\n"
	"  rules:\n"
	"  - matches: [{path: {type: Exact, value: /x.S/M}}]\n"
	"    backendRefs: [{name: v3, port: 80}]\n"
	"  - backendRefs: [{name: v1, port: 80}]\n";

static struct px_table *tbl;

static const char *call(const char *svc, const char *path, const char *hn, const char *hv,
			uint64_t rnd, struct px_decision *d)
{
	static struct px_decision dd;
	struct h1_header h[1];
	struct px_req_view v = { .method = "POST", .method_len = 4 };
	const struct px_svc *ps = px_table_find_name(tbl, "default", svc, 80);

	if (!d)
		d = &dd;
	px_req_view_target(&v, path, strlen(path));
	if (hn) {
		h[0].name = hn;
		h[0].name_len = strlen(hn);
		h[0].value = hv;
		h[0].value_len = strlen(hv);
		v.headers = h;
		v.n_headers = 1;
	}
	if (!ps || px_route(tbl, ps, &v, NULL, 0, rnd, d))
		return "error";
	return d->action == PX_FORWARD ? d->backend_name : d->action == PX_NOT_FOUND ? "404" :
	       "other";
}

int main(void)
{
	struct md_state *st = md_state_new();
	struct px_decision d;
	struct md_err e;
	char err[256], eb[512];
	int rc, n1 = 0, n2 = 0, total = 100000;

	rc = md_state_add_buf(st, "g.yaml", manifests, strlen(manifests), &e);
	if (!rc)
		rc = md_state_finish(st, &e);
	if (!ok(rc == 0, "manifests load")) {
		diag("%s", md_err_str(&e, eb, sizeof(eb)));
		return done_testing();
	}
	is_int(px_table_build(st, &tbl, err, sizeof(err)), 0, "table builds (%s)", err);

	/* method matches */
	is_str(call("greeter", "/hello.Greeter/SayHello", NULL, NULL, 1, &d), "default/v2",
	       "Exact service + method");
	is_int(d.n_resp_mods, 1, "... with its ResponseHeaderModifier");
	is_str(call("greeter", "/hello.Greeter/SayBye", NULL, NULL, 1, NULL), "default/v3",
	       "Exact service: its other methods");
	is_str(call("greeter", "/hello.Greeter2/SayBye", NULL, NULL, 1, NULL), "default/v1",
	       "a service whose name only starts the same is not matched");
	is_str(call("greeter", "/other.Svc/Ping", NULL, NULL, 1, NULL), "default/v2",
	       "Exact method on any service");
	is_str(call("greeter", "/other.Svc/Ping2", NULL, NULL, 1, NULL), "default/v1",
	       "... and only that method");
	is_str(call("greeter", "/admin.Users/Delete", NULL, NULL, 1, NULL), "default/v3",
	       "RegularExpression service");
	is_str(call("greeter", "/xadmin.Users/Delete", NULL, NULL, 1, NULL), "default/v1",
	       "... anchored");
	/* precedence (invariant 7): service characters first, then method */
	is_str(call("greeter", "/hello.Greeter/Ping", NULL, NULL, 1, NULL), "default/v3",
	       "service match beats method-only match (GRPCRoute precedence)");
	is_str(call("greeter", "/admin.Users/Ping", NULL, NULL, 1, NULL), "default/v3",
	       "regex service (6 chars) beats method-only Ping");
	/* headers */
	is_str(call("greeter", "/other.Svc/Other", "X-Canary", "always", 1, &d), "default/v2",
	       "header match (case-insensitive name)");
	is_int(d.n_req_mods, 1, "... with its RequestHeaderModifier");
	is_str(call("greeter", "/other.Svc/Other", "x-canary", "never", 1, NULL), "default/v1",
	       "header mismatch falls to the weighted rule");

	/* weights 90/10 over the whole random range */
	for (int i = 0; i < total; i++) {
		const char *b = call("greeter", "/other.Svc/Other", NULL, NULL,
				     (uint64_t)i * 0x9E3779B97F4A7C15ULL, NULL);

		n1 += !strcmp(b, "default/v1");
		n2 += !strcmp(b, "default/v2");
	}
	is_int(n1 + n2, total, "every call to v1 or v2");
	ok(n2 > total / 10 - total / 100 && n2 < total / 10 + total / 100,
	   "weights 90/10: v2 got %d of %d", n2, total);

	/* a GRPCRoute beside an HTTPRoute: gRPC matches first (invariant 7) */
	is_str(call("mixed", "/x.S/M", NULL, NULL, 1, NULL), "default/v2",
	       "GRPCRoute service match before an HTTPRoute Exact path");
	is_str(call("mixed", "/y.S/M", NULL, NULL, 1, NULL), "default/v1",
	       "other calls: the HTTPRoute");
	px_table_unref(tbl);
	return done_testing();
}
