/* test_finish.c — md_state_finish(): implied namespaces, endpoints (named
 * ports resolved per pod, readiness, ordering), runtime pods replacing
 * manifest pods, ClusterIP allocation (determinism, reservation, given
 * addresses first, exhaustion). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/model.h"

static char ebuf[512];

static struct md_state *load(const char *const *bufs, int n, int *ret)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char name[32];

	*ret = 0;
	for (int i = 0; i < n && !*ret; i++) {
		snprintf(name, sizeof(name), "in%d.yaml", i);
		*ret = md_state_add_buf(st, name, bufs[i], strlen(bufs[i]), &err);
	}
	if (!*ret)
		*ret = md_state_finish(st, &err);
	if (*ret)
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
	return st;
}

static const char *ip_str(uint32_t ip)
{
	static char b[4][INET_ADDRSTRLEN];
	static int i;

	i = (i + 1) % 4;
	inet_ntop(AF_INET, &ip, b[i], sizeof(b[i]));
	return b[i];
}

/* A runtime pod: name, namespace, labels (flow map), IP, phase, and the
 * container port named "web" (0 = none). */
static char *pod(const char *name, const char *ns, const char *labels, const char *ip,
		 const char *phase, int web_port)
{
	char *s = NULL, ports[128] = "";

	if (web_port)
		snprintf(ports, sizeof(ports),
			 "      ports: [{name: web, containerPort: %d}]\n"
			 "    - name: side\n      ports: [{name: web, containerPort: 9, protocol: UDP}]\n",
			 web_port);
	if (asprintf(&s,
		     "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n"
		     "  labels: %s\nspec:\n  nodeName: node-a\n  containers:\n    - name: c\n%s"
		     "status: {podIP: %s, phase: %s}\n",
		     name, ns, labels, ports, ip, phase) < 0)
		abort();
	return s;
}

static void test_endpoints(void)
{
	const char *svc =
		"apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
		"spec:\n  selector: {app: web}\n  ports:\n"
		"    - {name: named, port: 80, targetPort: web}\n"
		"    - {name: num, port: 81, targetPort: 8081}\n"
		"    - {name: udp, port: 82, targetPort: web, protocol: UDP}\n";
	char *bufs[9];
	const struct md_service *s;
	struct md_state *st;
	int r;

	bufs[0] = strdup(svc);
	bufs[1] = pod("p3", "shop", "{app: web}", "10.244.0.30", "Running", 8080);
	bufs[2] = pod("p1", "shop", "{app: web, v: x}", "10.244.0.9", "Running", 9090);
	bufs[3] = pod("p2", "shop", "{app: web}", "10.244.0.10", "Running", 0);	/* no named port */
	bufs[4] = pod("p4", "shop", "{app: web}", "10.244.0.40", "Pending", 8080);	/* not running */
	bufs[5] = pod("p5", "other", "{app: web}", "10.244.0.50", "Running", 8080);	/* other ns */
	bufs[6] = pod("p6", "shop", "{app: db}", "10.244.0.60", "Running", 8080);	/* other app */
	bufs[7] = pod("p7", "shop", "{app: web}", "10.244.0.7", "Failed", 8080);
	bufs[8] = strdup("apiVersion: v1\nkind: Pod\nmetadata: {name: p8, namespace: shop, "
			 "labels: {app: web}}\nspec: {containers: [{name: c}]}\n"
			 "status: {phase: Running}\n");	/* no IP yet */
	st = load((const char *const *)bufs, 9, &r);
	is_int(r, 0, "endpoint state loads");
	s = md_find_service(st, "shop", "web");
	if (s && !r) {
		is_int(s->endpoints[0].n, 2, "named port: two pods declare it");
		is_str(ip_str(s->endpoints[0].v[0].ip), "10.244.0.9", "sorted by IP (numerically)");
		is_int(s->endpoints[0].v[0].port, 9090, "p1 resolves web -> 9090");
		is_str(ip_str(s->endpoints[0].v[1].ip), "10.244.0.30", "then p3");
		is_int(s->endpoints[0].v[1].port, 8080, "p3 resolves web -> 8080");
		is_str(s->endpoints[0].v[0].pod->meta.name, "p1", "endpoint points at its pod");
		is_int(s->endpoints[1].n, 3, "numeric port: all three ready pods");
		is_str(ip_str(s->endpoints[1].v[1].ip), "10.244.0.10", "p2 included for numeric port");
		is_int(s->endpoints[1].v[1].port, 8081, "numeric targetPort");
		is_int(s->endpoints[2].n, 2, "UDP named port resolved by protocol");
		is_int(s->endpoints[2].v[0].port, 9, "UDP 'web' is 9, not the TCP port");
	}
	is_int(st->n_namespaces, 2, "namespaces shop and other implied");
	ok(md_find_namespace(st, "other") != NULL, "namespace other implied");
	md_state_free(st);
	for (int i = 0; i < 9; i++)
		free(bufs[i]);
}

/* A pod with a deletionTimestamp (the lab's graceful termination) is no
 * endpoint, but stays a pod (NetworkPolicy still sees it). */
static void test_terminating(void)
{
	const char *svc = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n"
			  "spec: {selector: {app: a}, ports: [{port: 80}]}\n";
	const char *leaving =
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: q\n"
		"  deletionTimestamp: \"2026-12-03T07:00:00Z\"\n  labels: {app: a}\n"
		"spec: {containers: [{name: c}]}\nstatus: {podIP: 10.244.1.3, phase: Running}\n";
	const char *bad =
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: q\n  deletionTimestamp: [1]\n"
		"spec: {containers: [{name: c}]}\n";
	char *staying = pod("p", "default", "{app: a}", "10.244.1.2", "Running", 0);
	const char *bufs[] = { svc, staying, leaving };
	const struct md_pod *q;
	struct md_state *st;
	int r;

	st = load(bufs, 3, &r);
	is_int(r, 0, "a terminating pod loads");
	q = md_find_pod(st, NULL, "q");
	ok(q && q->terminating && q->phase == MD_PHASE_RUNNING, "terminating, phase kept");
	ok(!md_find_pod(st, NULL, "p")->terminating, "the other pod is not");
	is_int(md_find_service(st, NULL, "a")->endpoints[0].n, 1, "only the staying pod is an endpoint");
	md_state_free(st);
	st = load(&bad, 1, &r);
	ok(r != 0 && strstr(ebuf, "deletionTimestamp"), "a deletionTimestamp that is no string is refused (%s)",
	   ebuf);
	md_state_free(st);
	free(staying);
}

static void test_pod_replacement(void)
{
	const char *manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: a}}\n"
			       "spec: {containers: [{name: c}]}\n";
	const char *svc = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n"
			  "spec: {selector: {app: a}, ports: [{port: 80}]}\n";
	char *runtime = pod("p", "default", "{app: a}", "10.244.1.2", "Running", 0);
	const char *order1[] = { manifest, runtime, svc };
	const char *order2[] = { runtime, manifest, svc };
	const char *twice[] = { runtime, runtime };
	struct md_state *st;
	int r;

	st = load(order1, 3, &r);
	is_int(r, 0, "manifest pod then runtime pod");
	is_int(st->n_pods, 1, "one pod left");
	ok(st->pods[0].has_status, "the runtime pod replaced the manifest pod");
	is_int(md_find_service(st, NULL, "a")->endpoints[0].n, 1, "and it is an endpoint");
	ok(md_find_pod(st, NULL, "p") == &st->pods[0], "lookup finds it");
	md_state_free(st);
	st = load(order2, 3, &r);
	is_int(r, 0, "runtime pod then manifest pod");
	ok(st->n_pods == 1 && st->pods[0].has_status, "runtime pod wins in either order");
	md_state_free(st);
	st = load(twice, 2, &r);
	is_int(r, -EINVAL, "two runtime pods of one name are a duplicate");
	md_state_free(st);
	{
		char *elsewhere = pod("q", "default", "{app: a}", "10.244.1.3", "Running", 0);
		char *z = strstr(elsewhere, "node-a");
		const char *in[1];

		memcpy(z, "node-z", 6);
		in[0] = elsewhere;
		st = load(in, 1, &r);
		is_int(r, 0, "a runtime pod on a node the Cluster does not list is accepted");
		md_state_free(st);
		free(elsewhere);
	}
	free(runtime);
}

static char *services(int n, int first, const char *ns, int reverse)
{
	size_t cap = (size_t)n * 160 + 1, len = 0;
	char *s = malloc(cap);

	s[0] = 0;
	for (int k = 0; k < n; k++) {
		int i = reverse ? first + n - 1 - k : first + k;

		len += (size_t)snprintf(s + len, cap - len,
					"---\napiVersion: v1\nkind: Service\n"
					"metadata: {name: s%d, namespace: %s}\n"
					"spec: {ports: [{port: 80}]}\n", i, ns);
	}
	return s;
}

static void test_cluster_ips(void)
{
	char *fwd = services(200, 0, "a", 0), *rev = services(200, 0, "a", 1);
	const char *given = "apiVersion: v1\nkind: Service\nmetadata: {name: dns, namespace: kube-system}\n"
			    "spec: {clusterIP: 10.96.0.10, ports: [{port: 53, protocol: UDP}]}\n";
	const char *in1[] = { fwd, given }, *in2[] = { given, rev };
	struct md_state *a, *b;
	uint32_t base;
	int r1, r2, same = 1, reserved = 0, dup = 0;

	a = load(in1, 2, &r1);
	b = load(in2, 2, &r2);
	ok(!r1 && !r2, "200 services load in both orders");
	inet_pton(AF_INET, "10.96.0.0", &base);
	for (int i = 0; i < 200 && !r1 && !r2; i++) {
		char name[16];
		const struct md_service *x, *y;
		uint32_t off;

		snprintf(name, sizeof(name), "s%d", i);
		x = md_find_service(a, "a", name);
		y = md_find_service(b, "a", name);
		same &= x->cluster_ip == y->cluster_ip;
		off = ntohl(x->cluster_ip) - ntohl(base);
		reserved |= off < 16;
		for (int j = 0; j < a->n_services; j++)
			dup |= &a->services[j] != x && a->services[j].cluster_ip == x->cluster_ip;
	}
	ok(same, "allocation does not depend on input order");
	ok(!reserved, "no allocated address in the first 16 of the CIDR");
	ok(!dup, "all addresses distinct");
	is_str(ip_str(md_find_service(a, "kube-system", "dns")->cluster_ip), "10.96.0.10",
	       "given address inside the reserved range is honoured");
	md_state_free(a);
	md_state_free(b);
	free(fwd);
	free(rev);

	/* exhaustion: a /26 has 64 addresses: 16 reserved + broadcast leave 47 */
	{
		const char *cl = "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\n"
				 "spec: {serviceCIDR: 10.96.0.0/26}\n";
		char *s47 = services(47, 0, "x", 0), *s48 = services(48, 0, "x", 0);
		const char *ok47[] = { cl, s47 }, *bad48[] = { cl, s48 };
		struct md_state *st;
		struct md_err err;
		int r;

		st = load(ok47, 2, &r);
		is_int(r, 0, "47 services fit a /26");
		if (!r) {
			int lo = 64, hi = 0;

			for (int i = 0; i < st->n_services; i++) {
				int off = (int)(ntohl(st->services[i].cluster_ip) - ntohl(base));

				lo = off < lo ? off : lo;
				hi = off > hi ? off : hi;
			}
			ok(lo == 16 && hi == 62, "they fill offsets 16..62 exactly (probing wraps)");
		}
		md_state_free(st);
		st = md_state_new();
		md_state_add_buf(st, "c.yaml", bad48[0], strlen(bad48[0]), &err);
		md_state_add_buf(st, "s.yaml", bad48[1], strlen(bad48[1]), &err);
		r = md_state_finish(st, &err);
		is_int(r, -EINVAL, "the 48th does not");
		ok(strstr(err.msg, "no free address") != NULL, "exhaustion message: %s", err.msg);
		is_str(err.field, "spec.clusterIP", "exhaustion field");
		md_state_free(st);
		(void)ok47;
		free(s47);
		free(s48);
	}
}

static void test_namespaces(void)
{
	const char *in[] = {
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"
		"  labels: {kubernetes.io/metadata.name: wrong, team: t}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: y}\n",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
	};
	struct md_state *st;
	int r;

	st = load(in, 2, &r);
	is_int(r, 0, "namespaces load");
	is_str(md_labels_get(md_namespace_labels(st, "x"), "kubernetes.io/metadata.name"), "x",
	       "metadata.name label forced to the name");
	is_str(md_labels_get(md_namespace_labels(st, "x"), "team"), "t", "other labels kept");
	is_int(md_namespace_labels(st, "x")->n, 2, "no duplicate label added");
	is_int(md_namespace_labels(st, "y")->n, 1, "implied namespace has only the name label");
	ok(md_find_namespace(st, "default") == NULL, "no namespace without objects");
	md_state_free(st);
	st = load(in, 3, &r);
	is_int(r, -EINVAL, "duplicate Namespace is an error");
	md_state_free(st);
}

int main(void)
{
	test_endpoints();
	test_pod_replacement();
	test_terminating();
	test_cluster_ips();
	test_namespaces();
	return done_testing();
}
