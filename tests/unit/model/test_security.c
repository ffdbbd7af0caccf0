/* test_security.c — security.istio.io PeerAuthentication and
 * AuthorizationPolicy (model.h, docs/mtls.md): decoded as Istio writes
 * them, what an L4 tunnel cannot honour refused with file:line:field, and
 * the decisions md_mtls_mode_of() / md_authz_check() take, case by case
 * against Istio's documented semantics. */
#include <errno.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"

#define PA "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\n"
#define AZ "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n"
#define POD(name, ns, app) \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: " name ", namespace: " ns \
	", labels: {app: " app "}}\nspec: {nodeName: node-a, containers: [{name: c, image: x}]}\n---\n"

static struct md_state *load(const char *yaml, struct md_err *err)
{
	struct md_state *st = md_state_new();

	memset(err, 0, sizeof(*err));
	if (md_state_add_buf(st, "t.yaml", yaml, strlen(yaml), err) || md_state_finish(st, err)) {
		md_state_free(st);
		return NULL;
	}
	return st;
}

struct ecase {
	const char *name, *yaml;
	int line;
	const char *field, *msg;
};

static const struct ecase errs[] = {
	{ "bad mode", PA "metadata: {name: p}\nspec: {mtls: {mode: STRICTT}}\n", 4,
	  "spec.mtls.mode", "expected STRICT, PERMISSIVE, DISABLE or UNSET" },
	{ "typo in spec", PA "metadata: {name: p}\nspec:\n  mtl: {mode: STRICT}\n", 5, "spec.mtl",
	  "unknown field" },
	{ "portLevelMtls without selector",
	  PA "metadata: {name: p}\nspec:\n  portLevelMtls: {8080: {mode: DISABLE}}\n", 5,
	  "spec.portLevelMtls", "needs a selector" },
	{ "portLevelMtls bad port",
	  PA "metadata: {name: p}\nspec:\n  selector: {matchLabels: {app: a}}\n  portLevelMtls:\n    http: {mode: DISABLE}\n",
	  7, "spec.portLevelMtls.http", "not a port number" },
	{ "selector expressions", PA "metadata: {name: p}\nspec:\n  selector: {matchExpressions: []}\n",
	  5, "spec.selector.matchExpressions", "unknown field" },
	{ "action CUSTOM", AZ "metadata: {name: z}\nspec: {action: CUSTOM}\n", 4, "spec.action",
	  "CUSTOM and AUDIT are not supported" },
	{ "HTTP method", AZ "metadata: {name: z}\nspec:\n  rules:\n  - to:\n    - operation: {methods: [GET]}\n",
	  7, "spec.rules[0].to[0].operation.methods", "needs an L7 waypoint" },
	{ "requestPrincipals",
	  AZ "metadata: {name: z}\nspec:\n  rules:\n  - from:\n    - source: {requestPrincipals: [\"*\"]}\n",
	  7, "spec.rules[0].from[0].source.requestPrincipals", "needs an L7 waypoint" },
	{ "ipBlocks", AZ "metadata: {name: z}\nspec:\n  rules:\n  - from:\n    - source: {ipBlocks: [10.0.0.0/8]}\n",
	  7, "spec.rules[0].from[0].source.ipBlocks", "NetworkPolicy" },
	{ "when", AZ "metadata: {name: z}\nspec:\n  rules:\n  - when:\n    - {key: a, values: [b]}\n", 7,
	  "spec.rules[0].when", "conditions" },
	{ "bad port", AZ "metadata: {name: z}\nspec:\n  rules:\n  - to:\n    - operation: {ports: [\"80a\"]}\n",
	  7, "spec.rules[0].to[0].operation.ports[0]", "not a port number" },
	{ "middle wildcard",
	  AZ "metadata: {name: z}\nspec:\n  rules:\n  - from:\n    - source: {principals: [\"a*b\"]}\n", 7,
	  "spec.rules[0].from[0].source.principals", "\"prefix*\"" },
	{ "empty principals", AZ "metadata: {name: z}\nspec:\n  rules:\n  - from:\n    - source: {principals: []}\n",
	  7, "spec.rules[0].from[0].source.principals", "matches nothing" },
	{ "source missing", AZ "metadata: {name: z}\nspec:\n  rules:\n  - from:\n    - {}\n", 7,
	  "spec.rules[0].from[0].source", "is required" },
	{ "targetRef", AZ "metadata: {name: z}\nspec:\n  targetRef: {kind: Gateway, name: g}\n", 5,
	  "spec.targetRef", "waypoint attachment" },
	{ "unsupported apiVersion", "apiVersion: security.istio.io/v1alpha1\nkind: PeerAuthentication\n", 1,
	  "apiVersion", "unsupported apiVersion" },
};

static void test_errors(void)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		const struct ecase *c = &errs[i];
		struct md_err err;
		struct md_state *st = load(c->yaml, &err);

		ok(!st, "%s: refused", c->name);
		md_state_free(st);
		is_int(err.line, c->line, "%s: line", c->name);
		is_str(err.field, c->field, "%s: field", c->name);
		if (!ok(strstr(err.msg, c->msg) != NULL, "%s: message", c->name))
			diag("got \"%s\", want \"%s\"", err.msg, c->msg);
	}
}

static const struct md_pod *pod(const struct md_state *st, const char *ns, const char *name)
{
	return md_find_pod(st, ns, name);
}

static void test_mtls_modes(void)
{
	const char *y =
		POD("a", "shop", "a") POD("b", "shop", "b") POD("c", "other", "c")
		PA "metadata: {name: mesh, namespace: istio-system}\nspec: {mtls: {mode: STRICT}}\n---\n"
		PA "metadata: {name: ns, namespace: shop}\nspec: {mtls: {mode: PERMISSIVE}}\n---\n"
		PA "metadata: {name: wl, namespace: shop}\nspec:\n  selector: {matchLabels: {app: a}}\n"
		"  mtls: {mode: UNSET}\n  portLevelMtls: {9090: {mode: DISABLE}}\n---\n"
		PA "metadata: {name: wl2, namespace: shop}\nspec:\n  selector: {matchLabels: {app: b}}\n"
		"  mtls: {mode: DISABLE}\n";
	struct md_err err;
	struct md_state *st = load(y, &err);
	char buf[600];

	if (!ok(st != NULL, "PeerAuthentications load"))
		return (void)diag("%s", md_err_str(&err, buf, sizeof(buf)));
	is_int(st->n_peerauths, 4, "4 PeerAuthentications");
	is_str(md_mtls_mode_name(md_mtls_mode_of(st, pod(st, "shop", "a"), 8080)), "PERMISSIVE",
	       "a:8080: workload UNSET inherits the namespace's PERMISSIVE");
	is_str(md_mtls_mode_name(md_mtls_mode_of(st, pod(st, "shop", "a"), 9090)), "DISABLE",
	       "a:9090: portLevelMtls DISABLE");
	is_str(md_mtls_mode_name(md_mtls_mode_of(st, pod(st, "shop", "b"), 8080)), "DISABLE",
	       "b: workload DISABLE beats the namespace");
	is_str(md_mtls_mode_name(md_mtls_mode_of(st, pod(st, "other", "c"), 8080)), "STRICT",
	       "c (no namespace policy): the mesh-wide STRICT of istio-system");
	ok(st->n_warnings >= 1, "STRICT and portLevelMtls warn what STRICT does not cover (%d)",
	   st->n_warnings);
	md_state_free(st);

	st = load(POD("a", "shop", "a"), &err);
	is_str(md_mtls_mode_name(md_mtls_mode_of(st, pod(st, "shop", "a"), 80)), "PERMISSIVE",
	       "no policy at all: PERMISSIVE (Istio's default)");
	md_state_free(st);
}

struct strict_rec {
	char s[200];
};

static void rec_port(void *arg, uint16_t port, bool strict)
{
	struct strict_rec *r = arg;
	size_t n = strlen(r->s);

	snprintf(r->s + n, sizeof(r->s) - n, "%s%u=%s", n ? " " : "", port, strict ? "S" : "p");
}

static const char *strict_ports(const struct md_state *st, const char *ns, const char *name,
				struct strict_rec *r)
{
	r->s[0] = 0;
	if (!md_mtls_strict_ports(st, pod(st, ns, name), rec_port, r))
		snprintf(r->s, sizeof(r->s), "none");
	return r->s;
}

/* What the datapath keys (lb_mtls, the policy rules): the pod's own mode at
 * port 0, then the ports that differ; nothing for a pod without STRICT. */
static void test_strict_ports(void)
{
	const char *y =
		POD("a", "shop", "a") POD("b", "shop", "b") POD("c", "shop", "c") POD("d", "other", "d")
		PA "metadata: {name: ns, namespace: shop}\nspec: {mtls: {mode: STRICT}}\n---\n"
		PA "metadata: {name: wa, namespace: shop}\nspec:\n  selector: {matchLabels: {app: a}}\n"
		"  portLevelMtls: {9187: {mode: DISABLE}, 8080: {mode: STRICT}}\n---\n"
		PA "metadata: {name: wb, namespace: shop}\nspec:\n  selector: {matchLabels: {app: b}}\n"
		"  mtls: {mode: PERMISSIVE}\n  portLevelMtls: {5432: {mode: STRICT}}\n---\n"
		PA "metadata: {name: wc, namespace: shop}\nspec:\n  selector: {matchLabels: {app: c}}\n"
		"  mtls: {mode: DISABLE}\n";
	struct md_err err;
	struct md_state *st = load(y, &err);
	struct strict_rec r;
	char buf[600];

	if (!ok(st != NULL, "STRICT ports: policies load"))
		return (void)diag("%s", md_err_str(&err, buf, sizeof(buf)));
	is_str(strict_ports(st, "shop", "a", &r), "0=S 9187=p",
	       "a: STRICT from the namespace, 9187 DISABLE an exception (8080 agrees: no entry)");
	is_str(strict_ports(st, "shop", "b", &r), "0=p 5432=S",
	       "b: PERMISSIVE, only 5432 STRICT");
	is_str(strict_ports(st, "shop", "c", &r), "none", "c: DISABLE, no STRICT port: no entries");
	is_str(strict_ports(st, "other", "d", &r), "none", "d: another namespace, PERMISSIVE");
	md_state_free(st);
}

#define P_WEB "cluster.local/ns/shop/sa/web"
#define P_EVIL "cluster.local/ns/evil/sa/default"

static void test_authz(void)
{
	const char *y =
		POD("db", "shop", "db") POD("api", "shop", "api") POD("open", "free", "open")
		AZ "metadata: {name: deny-evil, namespace: shop}\nspec:\n  action: DENY\n  rules:\n"
		"  - from:\n    - source: {namespaces: [evil]}\n---\n"
		AZ "metadata: {name: db-allow, namespace: shop}\nspec:\n  selector: {matchLabels: {app: db}}\n"
		"  action: ALLOW\n  rules:\n  - from:\n    - source: {principals: [\"cluster.local/ns/shop/*\"]}\n"
		"    to:\n    - operation: {ports: [\"5432\"]}\n---\n"
		AZ "metadata: {name: deny-all, namespace: lock}\nspec: {}\n---\n" POD("x", "lock", "x");
	const struct md_authzpol *pol;
	struct md_err err;
	struct md_state *st = load(y, &err);
	const struct md_pod *db, *api;
	char buf[600];

	if (!ok(st != NULL, "AuthorizationPolicies load"))
		return (void)diag("%s", md_err_str(&err, buf, sizeof(buf)));
	db = pod(st, "shop", "db");
	api = pod(st, "shop", "api");
	ok(md_authz_check(st, db, 5432, P_WEB, NULL) == NULL, "web -> db:5432 allowed (prefix match)");
	ok(md_authz_check(st, db, 80, P_WEB, &pol) == MD_AUTHZ_NOT_ALLOWED && pol &&
	   !strcmp(pol->meta.name, "db-allow"), "web -> db:80: no ALLOW matches (db-allow)");
	ok(md_authz_check(st, db, 5432, NULL, NULL) == MD_AUTHZ_NOT_ALLOWED,
	   "plain text -> db:5432: no principal, the ALLOW does not match");
	ok(md_authz_check(st, db, 5432, P_EVIL, &pol) == MD_AUTHZ_DENIED_BY_DENY && pol &&
	   !strcmp(pol->meta.name, "deny-evil"), "evil -> db: the DENY wins");
	ok(md_authz_check(st, api, 80, P_WEB, NULL) == NULL, "web -> api: no ALLOW selects api");
	ok(md_authz_check(st, api, 80, P_EVIL, NULL) == MD_AUTHZ_DENIED_BY_DENY,
	   "evil -> api: namespace-wide DENY");
	ok(md_authz_check(st, api, 80, NULL, NULL) == NULL,
	   "plain text -> api: a DENY on namespaces does not match a peer without identity");
	ok(md_authz_check(st, pod(st, "free", "open"), 80, P_EVIL, NULL) == NULL,
	   "free/open: no policy, allowed");
	ok(md_authz_check(st, pod(st, "lock", "x"), 80, P_WEB, NULL) == MD_AUTHZ_NOT_ALLOWED,
	   "lock/x: an empty ALLOW policy denies everything");
	md_state_free(st);
}

int main(void)
{
	test_errors();
	test_mtls_modes();
	test_strict_ports();
	test_authz();
	return done_testing();
}
