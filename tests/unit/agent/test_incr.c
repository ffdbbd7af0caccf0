/* test_incr.c — the agent's incremental path (agent.c A5): over randomized
 * change sequences, ss_load_delta() + ag_compile_update() must give exactly
 * what a fresh full load + ag_compile() gives (every service entry, backend,
 * weight, alias entry and note; every Service's endpoints), whether the
 * change was patched in place or loaded in full. Changes: runtime pods
 * updated in place (phase, IP, node, container ports: the patchable kind),
 * one to three per load; Services updated in place (selector, targetPort:
 * patchable) or with a new port number (full load); new and deleted pods
 * and label changes (full loads). Also checks that
 * pol_relevant is set exactly when a patched pod changed IP, node or
 * ports, and that patched loads really happened (the test cannot pass by
 * always loading in full).
 * ZH_SEED=N picks another sequence (the seed is printed). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/stat.h>

#include "tap.h"
#include "zerohop/agent.h"
#include "zerohop/state.h"

#define N_ROUNDS 400
#define N_PODS 24

static char tmp[] = "/tmp/zh-incr-XXXXXX";
static char sdir[600], indir[600];

struct sb {
	char *p;
	size_t n, cap;
};

static void sb_add(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if ((size_t)n < b->cap - b->n)
			break;
		b->cap = b->cap * 2 + (size_t)n + 64;
		b->p = realloc(b->p, b->cap);
	}
	b->n += (size_t)n;
}

static void sb_init(struct sb *b)
{
	b->cap = 4096;
	b->n = 0;
	b->p = malloc(b->cap);
	b->p[0] = 0;
}

/* Everything the maps get, and the notes, as text. */
static char *dump_compiled(const struct ag_compiled *c)
{
	struct sb b;
	char a[16];

	sb_init(&b);
	for (int i = 0; i < c->n_svcs; i++) {
		const struct ag_svc *e = &c->svcs[i];

		sb_add(&b, "%s:%u/%u %s/%s %s f%u [%s]", inet_ntop(AF_INET, &e->key.vip[12], a, 16),
		       ntohs(e->key.port), e->key.proto, e->ns, e->name,
		       e->port_name ? e->port_name : "-", e->flags, e->source);
		for (int j = 0; j < e->n_be; j++) {
			uint32_t ip = ag_v4_of(e->be[j].be.addr);

			sb_add(&b, " %s:%u w%.9g %s %s", inet_ntop(AF_INET, &ip, a, 16),
			       ntohs(e->be[j].be.port), e->be[j].weight, e->be[j].pod, e->be[j].via);
		}
		for (int j = 0; e->alias && j < e->n_be; j++)
			sb_add(&b, " a%u:%u:%u", ag_v4_of(e->alias[j].a.addr),
			       ag_v4_of(e->alias[j].b.addr), e->alias[j].threshold);
		sb_add(&b, "\n");
	}
	for (int i = 0; i < c->n_notes; i++)
		sb_add(&b, "note %s\n", c->notes[i]);
	return b.p;
}

/* Endpoints of every Service, pod slots checked to be this state's. */
static char *dump_endpoints(const struct md_state *st)
{
	struct sb b;
	char a[16];

	sb_init(&b);
	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		sb_add(&b, "pod %s/%s %s %d %s\n", p->meta.ns, p->meta.name,
		       inet_ntop(AF_INET, &p->ip, a, 16), p->phase,
		       p->spec.node_name ? p->spec.node_name : "-");
	}
	for (int i = 0; i < st->n_services; i++) {
		const struct md_service *s = &st->services[i];

		sb_add(&b, "svc %s/%s", s->meta.ns, s->meta.name);
		for (int j = 0; j < s->n_ports; j++) {
			sb_add(&b, " port %u ->", s->ports[j].port);
			for (int k = 0; s->endpoints && k < s->endpoints[j].n; k++) {
				const struct md_endpoint *e = &s->endpoints[j].v[k];

				sb_add(&b, " %s:%u(%s)%s", inet_ntop(AF_INET, &e->ip, a, 16), e->port,
				       e->pod->meta.name,
				       e->pod < st->pods || e->pod >= st->pods + st->n_pods ?
					       "!foreign-pod" : "");
			}
		}
		sb_add(&b, "\n");
	}
	return b.p;
}

static int apply_text(struct ss *s, const char *text)
{
	char path[700], ebuf[800];
	char *paths[] = { path };
	struct md_err err;
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/in.yaml", indir);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	ret = ss_apply(s, paths, 1, &err);
	if (ret)
		diag("apply: %s", md_err_str(&err, ebuf, sizeof(ebuf)));
	return ret;
}

/* What the test believes each runtime pod is. */
struct tpod {
	bool exists;
	int app;		/* label app=aN */
	int ver;		/* label version=vN */
	int ip;			/* last octet */
	int node;		/* 0 node-a, 1 node-b */
	int port;		/* containerPort of "http" */
	int phase;		/* 0 Running, 1 Pending, 2 Failed */
	bool terminating;	/* metadata.deletionTimestamp (lab_sup.c invariant 1) */
};

static struct tpod pods[N_PODS];

static int put_pod(struct ss *wr, int k)
{
	static const char *const phases[] = { "Running", "Pending", "Failed" };
	const struct tpod *p = &pods[k];
	char text[1024], name[32];

	snprintf(name, sizeof(name), "pod-%d", k);
	snprintf(text, sizeof(text),
		 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n%s"
		 "  labels: {app: a%d, version: v%d}\n"
		 "spec:\n  nodeName: node-%c\n"
		 "  containers: [{name: c, ports: [{name: http, containerPort: %d}]}]\n"
		 "status: {podIP: 10.244.0.%d, phase: %s}\n",
		 name, p->terminating ? "  deletionTimestamp: \"2026-12-03T07:00:00Z\"\n" : "",
		 p->app, p->ver, p->node ? 'b' : 'a', p->port, p->ip, phases[p->phase]);
	return ss_put_pod(wr, "default", name, text);
}

static int fresh(const char *dir, struct md_state **st, struct ag_compiled **c)
{
	struct md_err err = {};
	struct ss *s = NULL;
	char ebuf[300];
	int ret = ss_open(dir, &s);

	if (!ret)
		ret = ss_load(s, st, &err);
	if (!ret)
		ret = ag_compile(*st, c, ebuf, sizeof(ebuf));
	ss_close(s);
	return ret;
}

static const char *const manifests =
	"apiVersion: v1\nkind: Service\nmetadata: {name: svc-a0}\n"
	"spec:\n  selector: {app: a0}\n  ports: [{port: 80, targetPort: http}]\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: svc-a1}\n"
	"spec:\n  selector: {app: a1}\n  ports: [{name: web, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP, targetPort: 8053}]\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: svc-a2v1}\n"
	"spec:\n  selector: {app: a2, version: v1}\n  ports: [{port: 80, targetPort: http}]\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: svc-v2}\n"
	"spec:\n  selector: {version: v2}\n  ports: [{port: 81, targetPort: http}]\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: svc-head}\n"
	"spec:\n  clusterIP: None\n  selector: {app: a0}\n  ports: [{port: 80}]\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: root}\n"
	"spec:\n  selector: {app: none}\n  ports: [{port: 80}]\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: parent}\n"
	"spec:\n  selector: {app: a3}\n  ports: [{port: 80, targetPort: http}]\n---\n"
	"apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\n"
	"metadata: {name: ts}\nspec:\n  service: root\n  backends:\n"
	"    - {service: svc-a0, weight: 1}\n    - {service: svc-a2v1, weight: 500m}\n---\n"
	"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
	"metadata: {name: rt}\nspec:\n"
	"  parentRefs: [{kind: Service, group: \"\", name: parent}]\n"
	"  rules: [{backendRefs: [{name: svc-a1, port: 80, weight: 3}, {name: svc-v2, port: 81}]}]\n";

int main(void)
{
	unsigned seed = getenv("ZH_SEED") ? (unsigned)atoi(getenv("ZH_SEED")) : 20261202;
	struct ss *wr = NULL, *rd = NULL;
	struct md_state *st = NULL;
	struct ag_compiled *c = NULL;
	uint64_t token = 0;
	int n_patched = 0, n_full = 0, bad = 0, bad_pol = 0, n_pol_skip = 0, n_svc_applies = 0;
	int n_svc_patched = 0;
	char ebuf[300];

	if (!mkdtemp(tmp))
		return 1;
	snprintf(sdir, sizeof(sdir), "%s/state", tmp);
	snprintf(indir, sizeof(indir), "%s/in", tmp);
	mkdir(indir, 0755);
	diag("seed %u (ZH_SEED)", seed);
	srand(seed);
	ok(ss_open(sdir, &wr) == 0 && ss_open(sdir, &rd) == 0, "writer and reader handles");
	ok(ss_watch_fd(rd) >= 0, "the reader watches (inotify names the changed files)");
	ok(apply_text(wr, manifests) == 0, "services, a TrafficSplit and an HTTPRoute applied");
	for (int k = 0; k < N_PODS; k++) {
		pods[k] = (struct tpod){ true, k % 5, 1 + k % 2, 2 + k, k % 2, 8080, 0 };
		put_pod(wr, k);
	}
	{
		struct ss_delta d = {};
		struct md_err err = {};

		ok(ss_load_delta(rd, &st, &token, &d, &err) == 0 && !d.patched &&
		   ag_compile(st, &c, ebuf, sizeof(ebuf)) == 0, "first load: full");
		ss_delta_free(&d);
	}

	for (int r = 0; r < N_ROUNDS; r++) {
		struct ss_delta d = {};
		struct md_err err = {};
		struct md_state *fst = NULL;
		struct ag_compiled *fc = NULL;
		int n_ops = 1 + rand() % 3, ret, n_upd = 0;
		bool want_pol = false, only_inplace = true;

		for (int o = 0; o < n_ops; o++) {
			int k = rand() % N_PODS, what = rand() % 100;
			struct tpod *p = &pods[k];

			if (what < 75 && p->exists) {
				/* in place: mostly readiness, sometimes what policy reads */
				int f = rand() % 10;

				if (f < 5) {
					p->phase = (p->phase + 1 + rand() % 2) % 3;
				} else if (f < 6) {
					/* leaving or back (the lab only ever sets it,
					 * but both ways must patch in place) */
					p->terminating = !p->terminating;
				} else if (f < 8) {
					p->ip = 2 + rand() % 200;
					want_pol = true;
				} else if (f < 9) {
					p->node ^= 1;
					want_pol = true;
				} else {
					p->port = p->port == 8080 ? 8081 : 8080;
					want_pol = true;
				}
				/* two pods may briefly share an IP: still a valid state */
				put_pod(wr, k);
			} else if (what < 83) {
				if (p->exists) {
					char name[32];

					snprintf(name, sizeof(name), "pod-%d", k);
					ss_del_pod(wr, "default", name);
					p->exists = false;
				} else {
					p->exists = true;
					p->terminating = false;	/* a new pod */
					put_pod(wr, k);
				}
				only_inplace = false;
			} else if (what < 91 && p->exists) {
				p->app = rand() % 5;
				p->ver = 1 + rand() % 2;
				put_pod(wr, k);
				only_inplace = false;
			} else if (what < 96) {
				/* Services: selector and targetPort changes are
				 * patched in place, a port number change is not */
				char text[512];
				int v = rand() % 4;

				if (v == 0)
					snprintf(text, sizeof(text),
						 "apiVersion: v1\nkind: Service\nmetadata: {name: svc-a1}\n"
						 "spec:\n  selector: {app: a%d}\n  ports: [{name: web, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP, targetPort: 8053}]\n",
						 1 + rand() % 2);
				else if (v == 1)
					snprintf(text, sizeof(text),
						 "apiVersion: v1\nkind: Service\nmetadata: {name: svc-a0}\n"
						 "spec:\n  selector: {app: a0}\n  ports: [{port: 80, targetPort: %s}]\n",
						 rand() % 2 ? "http" : "8081");
				else if (v == 2)
					snprintf(text, sizeof(text),
						 "apiVersion: v1\nkind: Service\nmetadata: {name: svc-a2v1}\n"
						 "spec:\n  selector: {app: a2, version: v%d}\n  ports: [{port: 80, targetPort: http}]\n",
						 1 + rand() % 2);
				else
					snprintf(text, sizeof(text),
						 "apiVersion: v1\nkind: Service\nmetadata: {name: svc-v2}\n"
						 "spec:\n  selector: {version: v2}\n  ports: [{port: %d, targetPort: http}]\n",
						 81 + rand() % 2);
				n_svc_applies += apply_text(wr, text) == 0;
				only_inplace = false;
			} else {
				only_inplace = false;	/* nothing: an empty change */
			}
		}

		/* the agent's path (agent.c sync_once) */
		ret = ss_load_delta(rd, &st, &token, &d, &err);
		if (!ret && d.patched && c) {
			ret = ag_compile_update(st, c, d.svcs, d.n_svcs, &n_upd, ebuf, sizeof(ebuf));
			n_patched++;
			n_svc_patched += d.n_svc_objs > 0;
			if (d.pol_relevant != want_pol)
				bad_pol++;
			if (!d.pol_relevant)
				n_pol_skip++;
		} else if (!ret) {
			ag_compiled_free(c);
			c = NULL;
			ret = ag_compile(st, &c, ebuf, sizeof(ebuf));
			n_full++;
		}
		if (ret) {
			bad++;
			diag("round %d: incremental path failed: %d", r, ret);
			ss_delta_free(&d);
			break;
		}
		if (only_inplace && !d.patched) {
			bad++;
			diag("round %d: only in-place pod updates, yet a full load", r);
		}
		/* the reference: a fresh source, full load, full compile */
		if (fresh(sdir, &fst, &fc)) {
			bad++;
			diag("round %d: fresh load failed", r);
		} else {
			char *a = dump_compiled(c), *b = dump_compiled(fc);
			char *ea = dump_endpoints(st), *eb = dump_endpoints(fst);

			if (strcmp(a, b) || strcmp(ea, eb) || strstr(ea, "!foreign")) {
				bad++;
				if (bad < 3)
					diag("round %d (%s): differ\n--- incremental\n%s%s--- full\n%s%s", r,
					     d.patched ? "patched" : "full", a, ea, b, eb);
			}
			free(a);
			free(b);
			free(ea);
			free(eb);
		}
		ag_compiled_free(fc);
		md_state_free(fst);
		ss_delta_free(&d);
	}
	diag("%d patched loads (%d without policy change, %d with a Service patched), %d full loads, %d service applies",
	     n_patched, n_pol_skip, n_svc_patched, n_full, n_svc_applies);
	is_int(bad, 0, "incremental state and compiled result equal the full recompute every round");
	is_int(bad_pol, 0, "pol_relevant exactly when a patched pod changed IP, node or ports");
	ok(n_patched > N_ROUNDS / 3, "most rounds took the incremental path (%d of %d)", n_patched,
	   N_ROUNDS);
	ok(n_full > 10 && n_pol_skip > 10 && n_svc_patched > 5,
	   "both paths, policy-irrelevant patches and Service patches exercised");

	ag_compiled_free(c);
	md_state_free(st);
	ss_close(rd);
	ss_close(wr);
	{
		char cmd[700];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
		if (system(cmd))
			diag("could not remove %s", tmp);
	}
	done_testing();
}
