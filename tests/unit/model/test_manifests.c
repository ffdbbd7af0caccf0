/* test_manifests.c — users' manifests as they are written (issue 21): kinds
 * that are skipped or refused, --strict, -n, ServiceAccounts, eventual
 * references (not ready, never refused), HTTPRouteGroup, the decoded retry /
 * mirror / redirect fields, and the warnings for fields not honoured. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"

/* Parse buf into a new state with the options; finish it when parse is ok.
 * Returns the result of the first failing step (0 when both pass). */
static int load(const char *buf, bool strict, const char *ns, struct md_state **out,
		struct md_err *err)
{
	struct md_state *st = md_state_new();
	int r;

	memset(err, 0, sizeof(*err));
	md_state_set_strict(st, strict);
	md_state_set_namespace(st, ns);
	r = md_state_add_buf(st, "t.yaml", buf, strlen(buf), err);
	if (!r)
		r = md_state_finish(st, err);
	*out = st;
	return r;
}

static bool has_warning(const struct md_state *st, int line, const char *field, const char *msg)
{
	for (int i = 0; i < st->n_warnings; i++)
		if (st->warnings[i].line == line && !strcmp(st->warnings[i].field, field) &&
		    strstr(st->warnings[i].msg, msg))
			return true;
	return false;
}

static const char mixed[] =
	"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: reviews}\n"
	"---\napiVersion: v1\nkind: Secret\nmetadata: {name: s1}\n"
	"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw}\n"
	"---\napiVersion: networking.istio.io/v1beta1\nkind: VirtualService\n"
	"metadata: {name: vs, namespace: other}\n"
	"---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: pdb}\n"
	"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: reviews}\n"
	"spec:\n  selector: {matchLabels: {app: reviews}}\n"
	"  template:\n    metadata: {labels: {app: reviews}}\n"
	"    spec: {serviceAccountName: reviews, containers: [{name: c}]}\n";

static void test_skipped(void)
{
	struct md_state *st;
	struct md_err err;
	int r = load(mixed, false, NULL, &st, &err);

	is_int(r, 0, "mixed kinds: accepted");
	is_int(md_state_n_objects(st), 2, "mixed kinds: ServiceAccount and Deployment modelled");
	is_int(st->n_serviceaccounts, 1, "one ServiceAccount");
	is_str(st->serviceaccounts[0].meta.name, "reviews", "its name");
	is_str(st->deployments[0].template.service_account, "reviews",
	       "template serviceAccountName kept");
	is_int(st->n_ignored, 5, "five skipped");
	if (st->n_ignored == 5) {
		is_str(st->ignored[0].kind, "Secret", "Secret skipped");
		is_str(st->ignored[0].group, "", "core group");
		is_int(st->ignored[0].line, 5, "its line");
		is_str(st->ignored[2].group, "gateway.networking.k8s.io", "Gateway's group");
		is_str(st->ignored[2].reason, "no ingress gateway in zerohop", "Gateway's reason");
		is_str(st->ignored[3].ns, "other", "VirtualService's namespace kept for the report");
		is_str(st->ignored[4].kind, "PodDisruptionBudget", "PDB skipped");
	}
	md_state_free(st);

	r = load(mixed, true, NULL, &st, &err);
	is_int(r, -EINVAL, "--strict: refused");
	is_int(err.line, 6, "--strict: the Secret's kind line");
	is_str(err.field, "kind", "--strict: field");
	ok(strstr(err.msg, "Secret (v1) is not acted on by zerohop") != NULL, "--strict: %s", err.msg);
	is_int(md_state_n_objects(st), 0, "--strict: nothing added (all or nothing)");
	md_state_free(st);

	r = load("apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n", false, NULL, &st,
		 &err);
	is_int(r, -EINVAL, "a typo in a Kubernetes group stays an error");
	ok(strstr(err.msg, "unknown kind \"Deploymnet\"") != NULL, "... %s", err.msg);
	md_state_free(st);
	r = load("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", false, NULL, &st,
		 &err);
	is_int(r, 0, "another project's custom resource: skipped");
	is_str(st->n_ignored ? st->ignored[0].reason : "", "no data-plane meaning for zerohop",
	       "... with the reason");
	md_state_free(st);
	r = load("apiVersion: access.smi-spec.io/v1alpha3\nkind: TrafficTarget\nmetadata: {name: t}\n",
		 false, NULL, &st, &err);
	is_str(st->n_ignored ? st->ignored[0].reason : "",
	       "access policy not enforced by zerohop (use NetworkPolicy)",
	       "an SMI TrafficTarget is skipped, saying its denials are not enforced");
	md_state_free(st);
	r = load("apiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {name: t}\n",
		 false, NULL, &st, &err);
	is_int(r, -EINVAL, "TCPRoute refused (its traffic would not be routed as written)");
	md_state_free(st);
}

static void test_namespace(void)
{
	static const char svc[] =
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n"
		"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: shop}\n"
		"spec: {ports: [{port: 80}]}\n";
	struct md_state *st;
	struct md_err err;
	int r = load(svc, false, "shop", &st, &err);

	is_int(r, 0, "-n shop: ok");
	ok(md_find_service(st, "shop", "a") != NULL, "-n: an object without namespace goes to shop");
	ok(md_find_service(st, "shop", "b") != NULL, "-n: the same namespace given is fine");
	ok(md_find_namespace(st, "shop") != NULL, "-n: a Namespace object is cluster-scoped");
	md_state_free(st);
	r = load(svc, false, "prod", &st, &err);
	is_int(r, -EINVAL, "-n prod: b says shop: error");
	is_int(err.line, 12, "-n conflict: line of metadata.namespace");
	is_str(err.field, "metadata.namespace", "-n conflict: field");
	md_state_free(st);
}

static const char refs[] =
	"apiVersion: v1\nkind: Service\nmetadata: {name: root}\nspec: {ports: [{port: 80}]}\n"
	"---\napiVersion: split.smi-spec.io/v1alpha4\nkind: TrafficSplit\nmetadata: {name: s}\n"
	"spec:\n  service: root\n"
	"  matches: [{kind: HTTPRouteGroup, name: g}]\n"
	"  backends:\n    - {service: root, weight: 1}\n    - {service: later, weight: 1}\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\n"
	"spec:\n  parentRefs: [{group: \"\", kind: Service, name: nope}]\n"
	"  rules: [{backendRefs: [{name: root, port: 80}]}]\n";

static void test_eventual(void)
{
	static const char group[] =
		"---\napiVersion: specs.smi-spec.io/v1alpha4\nkind: HTTPRouteGroup\nmetadata: {name: g}\n"
		"spec:\n  matches:\n  - name: ff\n    headers: [{user-agent: \".*Firefox.*\"}]\n"
		"  - name: api\n    pathRegex: \"/api/.*\"\n    methods: [GET, HEAD]\n"
		"    headers: {x-a: \"1\", x-b: \"2\"}\n"
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: later}\nspec: {ports: [{port: 80}]}\n"
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: nope}\nspec: {ports: [{port: 80}]}\n";
	char both[2048];
	struct md_state *st;
	struct md_err err;
	int r = load(refs, false, NULL, &st, &err);

	is_int(r, 0, "split and route naming missing objects: accepted");
	ok(st->splits[0].not_ready && strstr(st->splits[0].not_ready,
					     "backend Service default/later does not exist (yet)"),
	   "split not ready: %s", st->splits[0].not_ready);
	ok(st->splits[0].backends[1].svc == NULL, "the missing backend is unresolved");
	ok(st->routes[0].not_ready && strstr(st->routes[0].not_ready,
					     "parent Service default/nope does not exist (yet)"),
	   "route not ready: %s", st->routes[0].not_ready);
	ok(has_warning(st, 14, "spec.backends[1].service", "does not exist (yet)"),
	   "warning for the missing backend");
	ok(has_warning(st, 11, "spec.matches[0].name", "HTTPRouteGroup default/g does not exist"),
	   "warning for the missing group");
	ok(has_warning(st, 20, "spec.parentRefs[0]", "parent Service default/nope"),
	   "warning for the missing parent");
	md_state_free(st);

	snprintf(both, sizeof(both), "%s%s", refs, group);
	r = load(both, false, NULL, &st, &err);
	is_int(r, 0, "with the objects present");
	is_str(st->splits[0].not_ready, "", "split ready");
	is_str(st->routes[0].not_ready, "", "route ready");
	is_int(st->n_warnings, 0, "no warnings");
	is_int(st->n_routegroups, 1, "one HTTPRouteGroup");
	if (st->n_routegroups == 1) {
		const struct md_routegroup *g = &st->routegroups[0];

		is_int(g->n_matches, 2, "two matches");
		is_str(g->matches[0].headers.v[0].key, "user-agent", "list-of-maps headers");
		is_str(g->matches[0].headers.v[0].value, ".*Firefox.*", "... regex");
		is_str(g->matches[1].path_regex, "/api/.*", "pathRegex");
		is_int(g->matches[1].n_methods, 2, "methods");
		is_int(g->matches[1].headers.n, 2, "map headers");
	}
	is_int(st->splits[0].n_matches, 1, "split matches");
	md_state_free(st);
}

static void test_route_fields(void)
{
	static const char rt[] =
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n"
		"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\n"
		"spec:\n  parentRefs: [{group: \"\", kind: Service, name: a}]\n"
		"  hostnames: [a.example]\n"
		"  rules:\n"
		"  - retry: {attempts: 3, codes: [502, 503], backoff: 200ms}\n"
		"    filters:\n"
		"    - type: RequestMirror\n"
		"      requestMirror: {backendRef: {name: m, namespace: x, port: 8080}, percent: 25}\n"
		"    - type: RequestMirror\n"
		"      requestMirror: {backendRef: {name: m2, port: 80}, fraction: {numerator: 1, denominator: 3}}\n"
		"    backendRefs: [{name: a, port: 80}, {name: z, namespace: other, port: 80}]\n"
		"  - retry: {}\n"
		"    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 308}}]\n"
		"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: g}\n"
		"spec:\n  parentRefs: [{name: gw}]\n"
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
		"spec: {sessionAffinity: ClientIP, ports: [{port: 80}]}\n";
	struct md_state *st;
	struct md_err err;
	int r = load(rt, false, NULL, &st, &err);

	is_int(r, 0, "retry, mirrors, 308: accepted");
	if (!r) {
		const struct md_route_rule *r0 = &st->routes[0].rules[0], *r1 = &st->routes[0].rules[1];

		ok(r0->has_retry, "retry present");
		is_int(r0->retry_attempts, 3, "attempts");
		is_int(r0->n_retry_codes, 2, "codes");
		is_int(r0->retry_codes[1], 503, "code 503");
		is_int((int)r0->retry_backoff_ms, 200, "backoff");
		is_int(r1->retry_attempts, 1, "retry: {} means one retry");
		is_int(r1->filters[0].status_code, 308, "redirect 308");
		is_str(r0->filters[0].mirror_ns, "x", "mirror namespace");
		is_int(r0->filters[0].mirror_port, 8080, "mirror port");
		is_int(r0->filters[0].mirror_permille, 250, "percent 25");
		is_str(r0->filters[1].mirror_ns, "default", "mirror namespace defaults to the route's");
		is_int(r0->filters[1].mirror_permille, 333, "fraction 1/3");
		ok(md_route_needs_l7(&st->routes[0]), "retry/mirror need the node proxy");
		ok(has_warning(st, 11, "spec.hostnames", "ignored for a route attached to a Service"),
		   "hostnames on a mesh route: warned");
		ok(has_warning(st, 19, "spec.rules[0].backendRefs[1].namespace", "without a ReferenceGrant"),
		   "cross-namespace backendRef: warned");
		ok(has_warning(st, 23, "spec.parentRefs", "has no Service parent: not acted on"),
		   "route with a Gateway parent only: warned");
		ok(has_warning(st, 32, "spec.sessionAffinity", "ClientIP is not honoured"),
		   "sessionAffinity: warned");
	}
	md_state_free(st);
}

static void test_consumer(void)
{
	static const char c[] =
		"apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: prod}\n"
		"spec: {ports: [{port: 80}]}\n"
		"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
		"metadata: {name: r, namespace: shop}\n"
		"spec:\n  parentRefs: [{group: \"\", kind: Service, name: a, namespace: prod}]\n"
		"  rules: [{backendRefs: [{name: a, namespace: prod, port: 80}]}]\n";
	struct md_state *st;
	struct md_err err;
	int r = load(c, false, NULL, &st, &err);

	is_int(r, 0, "consumer route accepted");
	ok(md_parent_is_consumer(&st->routes[0], &st->routes[0].parents[0]),
	   "a parent Service of another namespace: consumer route");
	ok(md_route_needs_l7(&st->routes[0]), "a consumer route is always per request");
	md_state_free(st);
}

int main(void)
{
	test_skipped();
	test_namespace();
	test_eventual();
	test_route_fields();
	test_consumer();
	return done_testing();
}
