/* test_router.c — the route table from real manifests: each match type,
 * precedence, filters (header modifiers, redirect, rewrite), weighted and
 * TrafficSplit choice, refcounting. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/proxy.h"

static const char *manifests =
	"apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
	"spec: {clusterIP: 10.96.0.50, selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\n"
	"spec: {selector: {app: a}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n"
	"spec: {selector: {app: b}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: c}\n"
	"spec: {selector: {app: c}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: empty}\n"
	"spec: {selector: {app: none}, ports: [{port: 80}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: split}\n"
	"spec: {selector: {app: a}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
	"spec: {service: split, backends: [{service: b, weight: 1}, {service: c, weight: 500m}]}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: a1, labels: {app: a}}\n"
	"spec: {nodeName: node-a, containers: [{name: x}]}\nstatus: {podIP: 10.244.0.11, phase: Running}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: b1, labels: {app: b}}\n"
	"spec: {nodeName: node-a, containers: [{name: x}]}\nstatus: {podIP: 10.244.0.21, phase: Running}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: c1, labels: {app: c}}\n"
	"spec: {nodeName: node-a, containers: [{name: x}]}\nstatus: {podIP: 10.244.0.31, phase: Running}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: w1, labels: {app: web}}\n"
	"spec: {nodeName: node-a, containers: [{name: x}]}\nstatus: {podIP: 10.244.0.41, phase: Running}\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r1}\n"
	"spec:\n"
	"  parentRefs: [{group: \"\", kind: Service, name: web, port: 80}]\n"
	"  rules:\n"
	"  - matches: [{path: {type: Exact, value: /exact}}]\n"
	"    backendRefs: [{name: a, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /api}}]\n"
	"    backendRefs: [{name: b, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /api/v2/}}]\n"
	"    backendRefs: [{name: c, port: 80}]\n"
	"  - matches: [{path: {type: RegularExpression, value: \"/re/[0-9]+\"}}]\n"
	"    backendRefs: [{name: c, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /m}, method: POST}]\n"
	"    backendRefs: [{name: a, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /m}}]\n"
	"    backendRefs: [{name: b, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /h}, headers: [{name: x-env, value: canary}]}]\n"
	"    backendRefs: [{name: c, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /h}, headers: [{type: RegularExpression, name: x-env, value: \"pr-[0-9]+\"}]}]\n"
	"    backendRefs: [{name: b, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /q}, queryParams: [{name: v, value: \"2\"}]}]\n"
	"    backendRefs: [{name: c, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /old}}]\n"
	"    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 301}}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /https}}]\n"
	"    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, hostname: secure.example}}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /rw}}]\n"
	"    filters:\n"
	"    - {type: URLRewrite, urlRewrite: {hostname: internal, path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}\n"
	"    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-a, value: \"1\"}], add: [{name: x-b, value: \"2\"}], remove: [x-c]}}\n"
	"    - {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: x-r, value: \"3\"}]}}\n"
	"    backendRefs: [{name: a, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /full}}]\n"
	"    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /fixed}}}]\n"
	"    backendRefs: [{name: a, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /w}}]\n"
	"    backendRefs: [{name: a, port: 80, weight: 1}, {name: b, port: 80, weight: 3}, {name: c, port: 80, weight: 0}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /none}}]\n"
	"    backendRefs: [{name: empty, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /sp}}]\n"
	"    backendRefs: [{name: split, port: 80}]\n";

static struct px_table *tbl;
static const struct px_svc *web;

/* Route "METHOD TARGET" with "name: value" header lines. */
static void route(const char *method, const char *target, const char *hdr_name,
		  const char *hdr_val, uint64_t rnd, struct px_decision *d)
{
	struct h1_header h[1];
	struct px_req_view v = { 0 };

	v.method = method;
	v.method_len = strlen(method);
	px_req_view_target(&v, target, strlen(target));
	if (hdr_name) {
		h[0].name = hdr_name;
		h[0].name_len = strlen(hdr_name);
		h[0].value = hdr_val;
		h[0].value_len = strlen(hdr_val);
		v.headers = h;
		v.n_headers = 1;
	}
	px_decision_free(d);	/* what the last route allocated (proxy.h) */
	is_int(px_route(tbl, web, &v, "web.default:8080", 16, rnd, d), 0, "route %s %s", method,
	       target);
}

static const char *backend_of(const char *method, const char *target, const char *hn,
			      const char *hv)
{
	static struct px_decision d;

	route(method, target, hn, hv, 7, &d);
	return d.action == PX_FORWARD ? d.backend_name : d.action == PX_NOT_FOUND ? "404" :
	       d.action == PX_REDIRECT ? "redirect" : "no-backend";
}

int main(void)
{
	struct md_state *st = md_state_new();
	struct px_decision d = { 0 };
	struct md_err e;
	char err[256], eb[512];
	int rc, i, n[3] = { 0 };

	rc = md_state_add_buf(st, "routes.yaml", manifests, strlen(manifests), &e);
	if (!rc)
		rc = md_state_finish(st, &e);
	is_int(rc, 0, "manifests parse (%s)", rc ? md_err_str(&e, eb, sizeof(eb)) : "ok");
	if (rc)
		return done_testing();
	is_int(px_table_build(st, &tbl, err, sizeof(err)), 0, "table builds");
	web = px_table_find_name(tbl, "default", "web", 0);
	ok(web != NULL, "service web found by name");
	ok(px_table_find_ip(tbl, inet_addr("10.96.0.50"), 80) == web, "and by ClusterIP:port");
	ok(!px_table_find_ip(tbl, inet_addr("10.96.0.50"), 81), "not on another port");

	/* path match types and precedence */
	is_str(backend_of("GET", "/exact", NULL, NULL), "default/a", "Exact matches");
	is_str(backend_of("GET", "/exact/", NULL, NULL), "404", "Exact is exact");
	is_str(backend_of("GET", "/api", NULL, NULL), "default/b", "PathPrefix matches itself");
	is_str(backend_of("GET", "/api/x", NULL, NULL), "default/b", "PathPrefix matches a sub-path");
	is_str(backend_of("GET", "/apix", NULL, NULL), "404", "PathPrefix respects segments");
	is_str(backend_of("GET", "/api/v2", NULL, NULL), "default/c",
	       "longest prefix wins (trailing slash ignored)");
	is_str(backend_of("GET", "/api/v2/z?x=1", NULL, NULL), "default/c", "longest prefix, sub-path");
	is_str(backend_of("GET", "/re/123", NULL, NULL), "default/c", "RegularExpression matches");
	is_str(backend_of("GET", "/re/12a", NULL, NULL), "404", "RegularExpression is anchored");
	/* method */
	is_str(backend_of("POST", "/m", NULL, NULL), "default/a", "method match preferred");
	is_str(backend_of("GET", "/m", NULL, NULL), "default/b", "other methods fall through");
	/* headers */
	is_str(backend_of("GET", "/h", "X-Env", "canary"), "default/c", "header Exact (case-insensitive name)");
	is_str(backend_of("GET", "/h", "x-env", "pr-42"), "default/b", "header RegularExpression");
	is_str(backend_of("GET", "/h", "x-env", "prod"), "404", "header mismatch → 404");
	/* query */
	is_str(backend_of("GET", "/q?a=1&v=2", NULL, NULL), "default/c", "queryParam Exact");
	is_str(backend_of("GET", "/q?v=3", NULL, NULL), "404", "queryParam mismatch");
	is_str(backend_of("GET", "/q?vv=2", NULL, NULL), "404", "queryParam names are exact");

	/* redirects */
	route("GET", "/old/page?x=1", NULL, NULL, 1, &d);
	is_int(d.action, PX_REDIRECT, "RequestRedirect");
	is_int(d.status, 301, "statusCode 301");
	is_str(d.location, "http://web.default:8080/new/page?x=1", "prefix replaced, host kept, query kept");
	route("GET", "/https/a", NULL, NULL, 1, &d);
	is_int(d.status, 302, "default redirect status 302");
	is_str(d.location, "https://secure.example/https/a", "scheme + hostname redirect");

	/* rewrite + header modifiers */
	route("GET", "/rw/x/y?q", NULL, NULL, 1, &d);
	is_int(d.action, PX_FORWARD, "URLRewrite forwards");
	ok(d.path != NULL, "path rewritten");
	is_str(d.path, "/x/y?q", "ReplacePrefixMatch / keeps the rest");
	is_str(d.host ? d.host : "", "internal", "hostname rewritten");
	is_int(d.n_req_mods, 1, "request header modifier attached");
	is_int(d.n_resp_mods, 1, "response header modifier attached");
	if (d.n_req_mods == 1) {
		is_str(d.req_mods[0]->set.v[0].key, "x-a", "set x-a");
		is_str(d.req_mods[0]->add.v[0].key, "x-b", "add x-b");
		is_str(d.req_mods[0]->remove[0], "x-c", "remove x-c");
	}
	route("GET", "/rw", NULL, NULL, 1, &d);
	is_str(d.path, "/", "prefix replaced by / on the bare prefix gives /");
	route("GET", "/full/a/b", NULL, NULL, 1, &d);
	is_str(d.path, "/fixed", "ReplaceFullPath");

	/* the strings are allocated only when used, to their size */
	route("GET", "/rw/x/y?q", NULL, NULL, 1, &d);
	route("GET", "/q?a=1&v=2", NULL, NULL, 1, &d);
	ok(!d.path && !d.location, "no rewrite, no redirect: the decision holds no string");
	{
		static char big[PX_PATH_MAX + 16];
		struct px_req_view v = { .method = "GET", .method_len = 3 };

		memcpy(big, "/rw/", 4);
		memset(big + 4, 'a', sizeof(big) - 5);
		px_req_view_target(&v, big, strlen(big));
		px_decision_free(&d);
		is_int(px_route(tbl, web, &v, NULL, 0, 1, &d), -ENAMETOOLONG,
		       "a rewritten path longer than PX_PATH_MAX: -ENAMETOOLONG");
		ok(!d.path, "... and nothing allocated");
		memcpy(big, "/old/", 5);
		px_req_view_target(&v, big, strlen(big));
		is_int(px_route(tbl, web, &v, NULL, 0, 1, &d), -ENAMETOOLONG,
		       "a redirect to a path longer than PX_PATH_MAX: -ENAMETOOLONG");
		ok(!d.location, "... and nothing allocated");
	}

	/* no endpoints */
	route("GET", "/none", NULL, NULL, 1, &d);
	is_int(d.action, PX_NO_BACKEND, "no endpoints → no backend");
	is_int(d.status, 503, "… answered 503");

	/* weighted choice: 1:3:0 over the whole 64-bit range */
	for (i = 0; i < 4000; i++) {
		{
			struct h1_header *none = NULL;
			struct px_req_view v = { .method = "GET", .method_len = 3, .headers = none };

			px_req_view_target(&v, "/w", 2);
			px_route(tbl, web, &v, NULL, 0, (uint64_t)i * 0x9E3779B97F4A7C15ULL, &d);
		}
		if (d.backend_name && !strcmp(d.backend_name, "default/a"))
			n[0]++;
		else if (d.backend_name && !strcmp(d.backend_name, "default/b"))
			n[1]++;
		else
			n[2]++;
	}
	ok(n[0] > 850 && n[0] < 1150, "weight 1 of 4 gets ~25%% (%d/4000)", n[0]);
	ok(n[1] > 2850 && n[1] < 3150, "weight 3 of 4 gets ~75%% (%d/4000)", n[1]);
	is_int(n[2], 0, "weight 0 gets nothing");

	/* TrafficSplit behind a backendRef: b 1000m : c 500m */
	n[0] = n[1] = n[2] = 0;
	for (i = 0; i < 3000; i++) {
		struct px_req_view v = { .method = "GET", .method_len = 3 };

		px_req_view_target(&v, "/sp", 3);
		px_route(tbl, web, &v, NULL, 0, (uint64_t)i * 0x9E3779B97F4A7C15ULL, &d);
		if (d.backend_name && !strcmp(d.backend_name, "default/b"))
			n[0]++;
		else if (d.backend_name && !strcmp(d.backend_name, "default/c"))
			n[1]++;
		else
			n[2]++;
	}
	ok(n[0] > 1850 && n[0] < 2150, "split root expands: b gets ~2/3 (%d/3000)", n[0]);
	ok(n[1] > 850 && n[1] < 1150, "c gets ~1/3 (%d/3000)", n[1]);
	is_int(n[2], 0, "nothing else");
	ok(d.port == 8080, "endpoint port is the targetPort");

	/* a service without routes routes to itself, its split applies */
	{
		const struct px_svc *sp = px_table_find_name(tbl, "default", "split", 80);
		struct px_req_view v = { .method = "GET", .method_len = 3 };

		px_req_view_target(&v, "/anything", 9);
		ok(sp != NULL, "split root service has a table entry");
		px_route(tbl, sp, &v, NULL, 0, 1, &d);
		is_int(d.action, PX_FORWARD, "implicit rule forwards");
		ok(d.backend_name && strcmp(d.backend_name, "default/split"),
		   "the TrafficSplit applies per request (%s)", d.backend_name);
	}

	/* refcount: a holder keeps the table after the owner lets go */
	{
		struct px_table *held = px_table_ref(tbl);

		px_table_unref(tbl);
		ok(px_table_generation(held) > 0, "table alive while referenced");
		px_table_unref(held);
	}

	/* a bad regex is reported, state stays the caller's */
	{
		static const char bad[] =
			"apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
			"spec: {selector: {app: web}, ports: [{port: 80}]}\n"
			"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: bad}\n"
			"spec:\n  parentRefs: [{group: \"\", kind: Service, name: web}]\n"
			"  rules:\n  - matches: [{path: {type: RegularExpression, value: \"/(\"}}]\n"
			"    backendRefs: [{name: web, port: 80}]\n";
		struct md_state *s2 = md_state_new();
		struct px_table *t2 = NULL;

		rc = md_state_add_buf(s2, "bad.yaml", bad, strlen(bad), &e);
		if (!rc)
			rc = md_state_finish(s2, &e);
		is_int(rc, 0, "bad-regex manifest parses (the model does not compile regexes)");
		rc = px_table_build(s2, &t2, err, sizeof(err));
		is_int(rc, -EINVAL, "invalid regex rejected");
		ok(strstr(err, "default/bad#0") != NULL, "error names the rule: %s", err);
		md_state_free(s2);
	}
	px_decision_free(&d);
	return done_testing();
}
