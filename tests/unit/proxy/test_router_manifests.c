/* test_router_manifests.c — the route table for the fields of issue 21:
 * SMI TrafficSplit matches (HTTPRouteGroup), GAMMA consumer routes, the
 * HTTPRoute retry field, RequestMirror choice, and a split backend that
 * does not exist yet (no share, 503 when nothing is servable). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/proxy.h"

static const char manifests[] =
	"apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
	"spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: v2}\n"
	"spec: {selector: {app: v2}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: mirror}\n"
	"spec: {selector: {app: m}, ports: [{port: 80, targetPort: 9090}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: ab}\n"
	"spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: gone-root}\n"
	"spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: w1, labels: {app: web}}\n"
	"spec: {containers: [{name: x}]}\nstatus: {podIP: 10.244.0.11, phase: Running}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: v2a, labels: {app: v2}}\n"
	"spec: {containers: [{name: x}]}\nstatus: {podIP: 10.244.0.21, phase: Running}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: m1, labels: {app: m}}\n"
	"spec: {containers: [{name: x}]}\nstatus: {podIP: 10.244.0.31, phase: Running}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: shopper, namespace: shop, labels: {app: c}}\n"
	"spec: {containers: [{name: x}]}\nstatus: {podIP: 10.244.0.41, phase: Running}\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web}\n"
	"spec:\n  parentRefs: [{group: \"\", kind: Service, name: web, port: 80}]\n"
	"  rules:\n"
	"  - matches: [{path: {type: PathPrefix, value: /r}}]\n"
	"    retry: {attempts: 4, codes: [500], backoff: 50ms}\n"
	"    backendRefs: [{name: web, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /m}}]\n"
	"    filters:\n"
	"    - {type: RequestMirror, requestMirror: {backendRef: {name: mirror, port: 80}}}\n"
	"    - {type: RequestMirror, requestMirror: {backendRef: {name: nowhere, port: 80}}}\n"
	"    backendRefs: [{name: web, port: 80}]\n"
	"  - matches: [{path: {type: PathPrefix, value: /p}}]\n"
	"    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: mirror, port: 80}, percent: 30}}]\n"
	"    backendRefs: [{name: web, port: 80}]\n"
	"  - backendRefs: [{name: web, port: 80}]\n"
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
	"metadata: {name: mine, namespace: shop}\n"
	"spec:\n  parentRefs: [{group: \"\", kind: Service, name: web, namespace: default, port: 80}]\n"
	"  rules:\n"
	"  - matches: [{path: {type: PathPrefix, value: /only}}]\n"
	"    backendRefs: [{name: v2, namespace: default, port: 80}]\n"
	"---\napiVersion: split.smi-spec.io/v1alpha4\nkind: TrafficSplit\nmetadata: {name: ab}\n"
	"spec:\n  service: ab\n  matches: [{kind: HTTPRouteGroup, name: g}]\n"
	"  backends: [{service: v2, weight: 100}]\n"
	"---\napiVersion: specs.smi-spec.io/v1alpha4\nkind: HTTPRouteGroup\nmetadata: {name: g}\n"
	"spec:\n  matches:\n  - name: ff\n    headers: {user-agent: \"Firefox\"}\n"
	"  - name: api\n    pathRegex: \"/api/v[0-9]+\"\n    methods: [POST]\n"
	"---\napiVersion: split.smi-spec.io/v1alpha2\nkind: TrafficSplit\nmetadata: {name: gone}\n"
	"spec:\n  service: gone-root\n  backends: [{service: not-yet, weight: 1}]\n";

static struct px_table *tbl;

static void rt(const char *svc, const char *method, const char *target, const char *ua,
	       const char *client_ns, uint64_t rnd, struct px_decision *d)
{
	struct h1_header h = { .name = "User-Agent", .name_len = 10 };
	struct px_req_view v = { 0 };
	const struct px_svc *s = px_table_find_name(tbl, "default", svc, 80);

	v.method = method;
	v.method_len = strlen(method);
	v.client_ns = client_ns;
	px_req_view_target(&v, target, strlen(target));
	if (ua) {
		h.value = ua;
		h.value_len = strlen(ua);
		v.headers = &h;
		v.n_headers = 1;
	}
	if (!s) {
		ok(0, "service %s in the table", svc);
		memset(d, 0, sizeof(*d));
		return;
	}
	px_route(tbl, s, &v, NULL, 0, rnd, d);
}

static const char *be(const char *svc, const char *method, const char *target, const char *ua,
		      const char *client_ns)
{
	static struct px_decision d;

	rt(svc, method, target, ua, client_ns, 12345, &d);
	return d.action == PX_FORWARD ? d.backend_name :
	       d.action == PX_NO_BACKEND ? (d.status == 503 ? "503" : "500") : "404";
}

int main(void)
{
	struct md_state *st = md_state_new();
	struct px_decision d;
	struct md_err e;
	char err[256];
	int rc, n;

	rc = md_state_add_buf(st, "m.yaml", manifests, strlen(manifests), &e);
	if (!rc)
		rc = md_state_finish(st, &e);
	is_int(rc, 0, "manifests load");
	rc = px_table_build(st, &tbl, err, sizeof(err));
	is_int(rc, 0, "table builds: %s", rc ? err : "");
	if (rc)
		return done_testing();

	/* SMI matches */
	is_str(be("ab", "GET", "/", "Mozilla Firefox/1", NULL), "default/v2",
	       "split matches: header regex (searched) → the split's backend");
	is_str(be("ab", "GET", "/", "curl", NULL), "default/ab",
	       "split matches: no match → the root Service itself");
	is_str(be("ab", "GET", "/", NULL, NULL), "default/ab", "split matches: no header → root");
	is_str(be("ab", "POST", "/api/v2/x", NULL, NULL), "default/v2",
	       "split matches: pathRegex anchored at the start + method");
	is_str(be("ab", "GET", "/api/v2/x", NULL, NULL), "default/ab",
	       "split matches: method not listed → root");
	is_str(be("ab", "POST", "/x/api/v2", NULL, NULL), "default/ab",
	       "split matches: pathRegex anchored (not found mid-path)");

	/* a split whose only backend does not exist yet */
	is_str(be("gone-root", "GET", "/", NULL, NULL), "503",
	       "split with only a missing backend: 503 (nothing servable), not 500");

	/* GAMMA consumer route */
	is_str(be("web", "GET", "/only/x", NULL, "shop"), "default/v2",
	       "consumer route applies to a client of its namespace");
	is_str(be("web", "GET", "/", NULL, "shop"), "404",
	       "... and replaces the producer routes for it (no match → 404)");
	is_str(be("web", "GET", "/only/x", NULL, "default"), "default/web",
	       "a client of another namespace gets the producer route");
	is_str(be("web", "GET", "/only/x", NULL, NULL), "default/web",
	       "a client that is no pod gets the producer route");
	{
		uint32_t ip;

		inet_pton(AF_INET, "10.244.0.41", &ip);
		is_str(px_table_client_ns(tbl, ip) ? px_table_client_ns(tbl, ip) : "(null)", "shop",
		       "px_table_client_ns finds the pod's namespace");
		inet_pton(AF_INET, "10.9.9.9", &ip);
		ok(px_table_client_ns(tbl, ip) == NULL, "... NULL for an address of no pod");
	}

	/* retry field */
	rt("web", "GET", "/r", NULL, NULL, 1, &d);
	is_int(d.retry->retries, 4, "retry.attempts → 4 retries");
	ok(px_retry_status(d.retry, 500) && !px_retry_status(d.retry, 503),
	   "retry.codes [500]: 500 retried, 503 not");
	ok(d.retry->on & PX_RETRY_CONNECT && d.retry->on & PX_RETRY_RESET,
	   "connect failures and resets are retried too");
	is_int((int)d.retry->backoff_ms, 50, "retry.backoff");
	rt("web", "GET", "/x", NULL, NULL, 1, &d);
	is_int(d.retry->retries, 2, "a rule without retry keeps the default (2)");

	/* mirrors */
	rt("web", "GET", "/m", NULL, NULL, 99, &d);
	is_int(d.n_mirrors, 1, "two mirrors, one to a missing Service: one copy");
	is_str(d.n_mirrors ? d.mirrors[0].backend_name : "", "default/mirror", "mirror backend");
	is_int(d.n_mirrors ? d.mirrors[0].port : 0, 9090, "mirror endpoint's targetPort");
	n = 0;
	for (uint64_t r = 0; r < 10000; r++) {
		rt("web", "GET", "/p", NULL, NULL, r * 0x9e3779b97f4a7c15ULL, &d);
		n += d.n_mirrors;
	}
	/* 99.9 %: 3000 ± 3.29 * 45.8 */
	ok(n >= 2849 && n <= 3151, "percent 30: %d of 10000 mirrored (2849..3151)", n);
	px_table_unref(tbl);
	return done_testing();
}
