/* test_policy.c — part-2 route policy from real manifests: HTTPRoute
 * timeouts and the retry / load-balancing annotations in px_decision, the
 * retry-on status map, endpoints of a backend (px_route_eps), round-robin
 * rotation, bad annotations rejected with errors naming the route, the
 * connection-pool annotations of a Service and px_table_has_ep. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/proxy.h"

#define SVC_PODS \
	"apiVersion: v1\nkind: Service\nmetadata: {name: web}\n" \
	"spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n" \
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: w1, labels: {app: web}}\n" \
	"spec: {nodeName: n, containers: [{name: x}]}\nstatus: {podIP: 10.244.0.1, phase: Running}\n" \
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: w2, labels: {app: web}}\n" \
	"spec: {nodeName: n, containers: [{name: x}]}\nstatus: {podIP: 10.244.0.2, phase: Running}\n" \
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: w3, labels: {app: web}}\n" \
	"spec: {nodeName: n, containers: [{name: x}]}\nstatus: {podIP: 10.244.0.3, phase: Running}\n"

#define ROUTE(NAME, PREFIX, ANN, EXTRA) \
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n" \
	"metadata: {name: " NAME ", annotations: {" ANN "}}\nspec:\n" \
	"  parentRefs: [{group: \"\", kind: Service, name: web, port: 80}]\n  rules:\n" \
	"  - matches: [{path: {type: PathPrefix, value: " PREFIX "}}]\n" EXTRA \
	"    backendRefs: [{name: web, port: 80}]\n"

static const char *good = SVC_PODS
	ROUTE("dflt", "/d", "", "")
	ROUTE("tuned", "/t", "zerohop.io/retries: \"3\", zerohop.io/retry-on: \"5xx,reset\", "
	      "zerohop.io/per-try-timeout: 200ms, zerohop.io/lb-policy: round-robin",
	      "    timeouts: {request: 2s, backendRequest: 500ms}\n")
	ROUTE("hash", "/h", "zerohop.io/lb-policy: ring-hash, zerohop.io/hash-on: \"cookie:sess\"", "")
	ROUTE("gw", "/g", "zerohop.io/retry-on: \"gateway-error, 599\", zerohop.io/retries: \"0\"", "");

static struct px_table *load(const char *yaml, char *err, size_t errlen, int *rc)
{
	struct md_state *st = md_state_new();
	struct px_table *t = NULL;
	struct md_err e;

	*rc = md_state_add_buf(st, "p.yaml", yaml, strlen(yaml), &e);
	if (!*rc)
		*rc = md_state_finish(st, &e);
	if (*rc) {
		md_err_str(&e, err, errlen);
		md_state_free(st);
		return NULL;
	}
	*rc = px_table_build(st, &t, err, errlen);
	if (*rc)
		md_state_free(st);
	return t;
}

static void route(struct px_table *t, const char *target, struct px_decision *d)
{
	const struct px_svc *svc = px_table_find_name(t, "default", "web", 0);
	struct px_req_view v = { 0 };

	v.method = "GET";
	v.method_len = 3;
	px_req_view_target(&v, target, strlen(target));
	px_route(t, svc, &v, NULL, 0, 12345, d);
}

static void bad(const char *ann, const char *want, const char *what)
{
	char yaml[4096], err[512];
	struct px_table *t;
	int rc;

	snprintf(yaml, sizeof(yaml), "%s---\napiVersion: gateway.networking.k8s.io/v1\n"
		 "kind: HTTPRoute\nmetadata: {name: badr, annotations: {%s}}\nspec:\n"
		 "  parentRefs: [{group: \"\", kind: Service, name: web, port: 80}]\n"
		 "  rules:\n  - backendRefs: [{name: web, port: 80}]\n", SVC_PODS, ann);
	err[0] = 0;
	t = load(yaml, err, sizeof(err), &rc);
	is_int(rc, -EINVAL, "%s: rejected", what);
	ok(strstr(err, want) != NULL, "%s: error says '%s' (%s)", what, want, err);
	if (t)
		px_table_unref(t);
}

static void bad_svc(const char *ann, const char *want, const char *what)
{
	char yaml[4096], err[512];
	struct px_table *t;
	int rc;

	snprintf(yaml, sizeof(yaml), "apiVersion: v1\nkind: Service\n"
		 "metadata: {name: web, annotations: {%s}}\n"
		 "spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n", ann);
	err[0] = 0;
	t = load(yaml, err, sizeof(err), &rc);
	is_int(rc, -EINVAL, "%s: rejected", what);
	ok(strstr(err, want) != NULL, "%s: error says '%s' (%s)", what, want, err);
	if (t)
		px_table_unref(t);
}

int main(void)
{
	struct px_decision d;
	const struct px_ep *eps;
	char err[512];
	struct px_table *t;
	uint32_t r0;
	int rc, n;

	t = load(good, err, sizeof(err), &rc);
	is_int(rc, 0, "manifests load (%s)", rc ? err : "ok");
	if (rc)
		return done_testing();

	route(t, "/d", &d);
	is_int(d.action, PX_FORWARD, "default route forwards");
	ok(!memcmp(d.retry, &px_retry_default, sizeof(*d.retry)), "no annotation: the default retry policy");
	is_int(d.retry->retries, 2, "default: 2 retries");
	is_int(d.retry->on, PX_RETRY_CONNECT | PX_RETRY_RESET, "default: connect-failure, reset");
	ok(px_retry_status(d.retry, 503), "default retries 503");
	ok(!px_retry_status(d.retry, 500) && !px_retry_status(d.retry, 502), "… not 500 or 502");
	ok(!px_retry_status(d.retry, 200) && !px_retry_status(d.retry, 404), "… nor 2xx/4xx");
	is_int(d.lb->kind, PX_LB_P2C_EWMA, "default lb: p2c-ewma");
	is_int((int)d.timeout_request_ms, 0, "no timeouts.request");
	n = px_route_eps(&d, &eps);
	is_int(n, 3, "px_route_eps: the backend's three endpoints");

	route(t, "/t", &d);
	is_int(d.retry->retries, 3, "retries annotation");
	is_int(d.retry->on, PX_RETRY_RESET, "retry-on 5xx,reset: reset, not connect-failure");
	ok(px_retry_status(d.retry, 500) && px_retry_status(d.retry, 599), "5xx covers 500..599");
	is_int((int)d.retry->per_try_ms, 200, "per-try-timeout 200ms");
	is_int((int)d.timeout_request_ms, 2000, "timeouts.request 2s");
	is_int((int)d.timeout_backend_ms, 500, "timeouts.backendRequest 500ms");
	is_int(d.lb->kind, PX_LB_ROUND_ROBIN, "lb-policy round-robin");
	r0 = px_route_rr_next(&d);
	is_int((int)px_route_rr_next(&d), (int)r0 + 1, "round-robin counter advances");

	route(t, "/h", &d);
	is_int(d.lb->kind, PX_LB_RING_HASH, "lb-policy ring-hash");
	is_int(d.lb->hash_on, PX_HASH_COOKIE, "hash-on cookie");
	is_str(d.lb->hash_name, "sess", "… named sess");

	route(t, "/g", &d);
	is_int(d.retry->retries, 0, "retries \"0\"");
	ok(px_retry_status(d.retry, 502) && px_retry_status(d.retry, 503) &&
	   px_retry_status(d.retry, 504), "gateway-error: 502, 503, 504");
	ok(px_retry_status(d.retry, 599) && !px_retry_status(d.retry, 500), "a listed status 599, not 500");
	is_int(d.retry->on, 0, "no connect-failure/reset unless listed");

	/* connection pool defaults (Envoy circuit breakers) and endpoints */
	route(t, "/d", &d);
	is_int((int)d.pool->max_connections, 1024, "pool default: 1024 connections");
	is_int((int)d.pool->max_pending, 1024, "pool default: 1024 pending");
	is_int((int)d.pool->max_requests_per_conn, 0, "pool default: unlimited requests per connection");
	ok(px_table_has_ep(t, px_ip4(htonl(0x0af40002)), 8080), "px_table_has_ep: 10.244.0.2:8080");
	ok(!px_table_has_ep(t, px_ip4(htonl(0x0af40002)), 8081), "… not another port");
	ok(!px_table_has_ep(t, px_ip4(htonl(0x0af40009)), 8080), "… not another ip");
	px_table_unref(t);

	/* pool annotations on the destination Service */
	{
		static const char *pooled =
			"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  annotations:\n"
			"    zerohop.io/max-connections: \"8\"\n"
			"    zerohop.io/max-pending-requests: \"0\"\n"
			"    zerohop.io/max-requests-per-connection: \"100\"\n"
			"spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n"
			"---\napiVersion: v1\nkind: Pod\nmetadata: {name: w1, labels: {app: web}}\n"
			"spec: {nodeName: n, containers: [{name: x}]}\n"
			"status: {podIP: 10.244.0.1, phase: Running}\n";
		t = load(pooled, err, sizeof(err), &rc);
		is_int(rc, 0, "pool annotations load (%s)", rc ? err : "ok");
		if (t) {
			route(t, "/", &d);
			is_int((int)d.pool->max_connections, 8, "max-connections 8");
			is_int((int)d.pool->max_pending, 0, "max-pending-requests 0 (no queue)");
			is_int((int)d.pool->max_requests_per_conn, 100, "max-requests-per-connection 100");
			px_table_unref(t);
		}
	}

	bad("zerohop.io/retries: \"11\"", "default/badr: annotation zerohop.io/retries \"11\"",
	    "retries above 10");
	bad("zerohop.io/retries: \"-1\"", "want 0..10", "negative retries");
	bad("zerohop.io/retry-on: \"5xx,oops\"", "unknown condition \"oops\"", "unknown retry-on");
	bad("zerohop.io/retry-on: \"404\"", "unknown condition \"404\"", "a non-5xx status");
	bad("zerohop.io/per-try-timeout: soon", "zerohop.io/per-try-timeout \"soon\"",
	    "bad per-try-timeout");
	bad("zerohop.io/lb-policy: fastest", "zerohop.io/lb-policy \"fastest\"", "unknown lb-policy");
	bad("zerohop.io/hash-on: \"header:\"", "zerohop.io/hash-on \"header:\"", "empty header name");
	bad_svc("zerohop.io/max-connections: \"0\"",
		"service default/web: annotation zerohop.io/max-connections \"0\": want 1..1000000",
		"zero max-connections");
	bad_svc("zerohop.io/max-pending-requests: \"-3\"", "max-pending-requests \"-3\"",
		"negative max-pending-requests");
	bad_svc("zerohop.io/max-requests-per-connection: lots",
		"max-requests-per-connection \"lots\"", "non-numeric max-requests-per-connection");
	return done_testing();
}
