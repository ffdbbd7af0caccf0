/* finish.c — md_state_finish(): what needs the whole state at once.
 *
 * Steps, in order (each may fail; on failure the state must be freed):
 * 1. cluster defaults (two nodes node-a, node-b; 10.244.0.0/16; 10.96.0.0/12)
 * 2. namespaces: explicit ones get label kubernetes.io/metadata.name; each
 *    namespace used by an object and not declared is created (implied)
 * 3. pods: a runtime pod (with status) replaces the same-named manifest pod
 *    (without status); any other same-named pair is a duplicate
 * 4. duplicates of every other kind (same kind, namespace and name)
 * 5. manifest pods' spec.nodeName must name a cluster node (runtime pods
 *    are reported facts and are not checked)
 * 6. ClusterIPs (families.c): each Service's ipFamilyPolicy and ipFamilies
 *    defaulted against the cluster's families as kube-apiserver does; per
 *    family, given ones checked (inside the service CIDR, not its network
 *    or IPv4 broadcast address, unique), then the others allocated
 * 7. TrafficSplit root/backends and HTTPRoute Service parents must exist;
 *    HTTPRoute backendRefs are resolved or left NULL
 * 8. endpoints of every Service with a selector
 *
 * ClusterIP allocation, the same for each family (deterministic, so every
 * agent computes the same addresses from the same state):
 *   offsets 0..15 of the service CIDR are reserved for given addresses (the
 *   lab's DNS uses base + 10, like kube-dns 10.96.0.10), the last one is the
 *   broadcast address. Services with a given clusterIP take theirs first;
 *   the rest, in (namespace, name) byte order, start at
 *   16 + FNV-1a-64("NAMESPACE/NAME") mod (size - 17) and probe linearly,
 *   wrapping within [16, size - 2] (IPv6, which has no broadcast address:
 *   16 + hash mod (size - 16), wrapping within [16, size - 1]).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "zerohop/log.h"
#include "md_int.h"

#define NS_LABEL "kubernetes.io/metadata.name"

static int fail(struct md_err *err, const char *file, int line, const char *field,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(struct md_err *err, const char *file, int line, const char *field,
		const char *fmt, ...)
{
	va_list ap;

	snprintf(err->file, sizeof(err->file), "%s", file ? file : "<state>");
	err->line = line;
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void cluster_defaults(struct md_state *st)
{
	struct md_cluster *cl = &st->cluster;
	struct md_arena *ar = &md_priv(st)->ar;

	if (!cl->present) {
		cl->name = "zerohop";
		inet_pton(AF_INET, "10.244.0.0", &cl->pod_cidr);
		cl->pod_cidr_len = 16;
		inet_pton(AF_INET, "10.96.0.0", &cl->svc_cidr);
		cl->svc_cidr_len = 12;
		cl->primary = MD_FAM_V4;
	}
	if (!cl->n_nodes) {
		cl->nodes = ar_alloc(ar, 2 * sizeof(*cl->nodes));
		cl->nodes[0].name = "node-a";
		cl->nodes[1].name = "node-b";
		cl->n_nodes = 2;
	}
}

/* a + sep + b + sep2 + c in the arena (NULL parts skipped); hot in finish,
 * so no printf */
static char *join3(struct md_arena *ar, const char *a, char sep, const char *b, char sep2,
		   const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = c ? strlen(c) : 0;
	char *p = ar_alloc(ar, la + lb + lc + 3), *q = p;

	memcpy(q, a, la);
	q += la;
	*q++ = sep;
	memcpy(q, b, lb);
	q += lb;
	if (c) {
		*q++ = sep2;
		memcpy(q, c, lc);
		q += lc;
	}
	*q = 0;
	return p;
}

static char *key_of(struct md_arena *ar, const struct md_meta *m)
{
	return join3(ar, m->ns ? m->ns : "", '/', m->name, 0, NULL);
}

/* Step 2. */
static int namespaces(struct md_state *st, struct md_err *err)
{
	struct md_priv *pv = md_priv(st);
	struct md_idx *ix = &pv->ix[MD_K_NAMESPACE];
	int n_explicit = st->n_namespaces;

	for (int i = 0; i < n_explicit; i++) {
		struct md_meta *m = &st->namespaces[i].meta;
		int prev = md_idx_put(ix, key_of(&pv->ar, m), i);
		struct md_kv *v;
		int j;

		if (prev >= 0)
			return fail(err, m->file, m->line, "metadata.name",
				    "duplicate Namespace %s (also defined at %s:%d)", m->name,
				    st->namespaces[prev].meta.file, st->namespaces[prev].meta.line);
		for (j = 0; j < m->labels.n && strcmp(m->labels.v[j].key, NS_LABEL); j++)
			;
		if (j == m->labels.n) {
			v = ar_alloc(&pv->ar, (size_t)(m->labels.n + 1) * sizeof(*v));
			if (m->labels.n)
				memcpy(v, m->labels.v, (size_t)m->labels.n * sizeof(*v));
			m->labels.v = v;
			m->labels.n++;
		}
		/* the API server forces the value to the name */
		m->labels.v[j].key = NS_LABEL;
		m->labels.v[j].value = m->name;
	}
	/* implied namespaces, from every namespaced object */
	for (int k = 0; k < 11; k++) {
		const void *arr;
		size_t elem;
		int n;

		switch (k) {
		case 0: arr = st->configmaps; n = st->n_configmaps; elem = sizeof(*st->configmaps); break;
		case 1: arr = st->pods; n = st->n_pods; elem = sizeof(*st->pods); break;
		case 2: arr = st->deployments; n = st->n_deployments; elem = sizeof(*st->deployments); break;
		case 3: arr = st->services; n = st->n_services; elem = sizeof(*st->services); break;
		case 4: arr = st->splits; n = st->n_splits; elem = sizeof(*st->splits); break;
		case 5: arr = st->routes; n = st->n_routes; elem = sizeof(*st->routes); break;
		case 6: arr = st->netpols; n = st->n_netpols; elem = sizeof(*st->netpols); break;
		case 7: arr = st->serviceaccounts; n = st->n_serviceaccounts;
			elem = sizeof(*st->serviceaccounts); break;
		case 8: arr = st->routegroups; n = st->n_routegroups;
			elem = sizeof(*st->routegroups); break;
		case 9: arr = st->peerauths; n = st->n_peerauths;
			elem = sizeof(*st->peerauths); break;
		default: arr = st->authzpols; n = st->n_authzpols;
			elem = sizeof(*st->authzpols); break;
		}
		for (int i = 0; i < n; i++) {
			/* every object struct starts with its md_meta */
			const struct md_meta *m = (const void *)((const char *)arr + (size_t)i * elem);
			struct md_namespace *ns;
			char probe[80], *key;

			/* namespaces are DNS labels (<= 63): the probe key fits */
			snprintf(probe, sizeof(probe), "/%s", m->ns);
			if (md_idx_get(ix, probe) >= 0)
				continue;
			key = join3(&pv->ar, "", '/', m->ns, 0, NULL);
			ns = zh_grow((void **)&st->namespaces, &st->n_namespaces, &pv->cap_ns,
				     sizeof(*ns));
			ns->meta.name = m->ns;
			ns->meta.labels.v = ar_alloc(&pv->ar, sizeof(struct md_kv));
			ns->meta.labels.v[0].key = NS_LABEL;
			ns->meta.labels.v[0].value = m->ns;
			ns->meta.labels.n = 1;
			md_idx_put(ix, key, st->n_namespaces - 1);
		}
	}
	return 0;
}

/* Step 3 and the pod part of step 4. */
static int pods(struct md_state *st, struct md_err *err)
{
	struct md_priv *pv = md_priv(st);
	struct md_idx ix = { 0 };
	bool *drop = zh_calloc((size_t)st->n_pods + 1, sizeof(*drop));
	int ret = 0, n = 0;

	for (int i = 0; i < st->n_pods; i++) {
		struct md_pod *p = &st->pods[i];
		int prev = md_idx_put(&ix, key_of(&pv->ar, &p->meta), i);
		struct md_pod *q;

		if (prev < 0)
			continue;
		q = &st->pods[prev];
		if (p->has_status == q->has_status) {
			ret = fail(err, p->meta.file, p->meta.line, "metadata.name",
				   "duplicate Pod %s/%s (also defined at %s:%d)", p->meta.ns,
				   p->meta.name, q->meta.file, q->meta.line);
			goto out;
		}
		/* the runtime pod (with status) wins; the index keeps it */
		if (p->has_status) {
			drop[prev] = true;
			md_idx_set(&ix, key_of(&pv->ar, &p->meta), i);
		} else {
			drop[i] = true;
		}
	}
	for (int i = 0; i < st->n_pods; i++)
		if (!drop[i])
			st->pods[n++] = st->pods[i];
	st->n_pods = n;
out:
	md_idx_free(&ix);
	free(drop);
	return ret;
}

/* Step 4 for one kind, and the lookup index. */
static int dups(struct md_state *st, enum md_kind k, void *arr, int n, size_t elem,
		struct md_err *err)
{
	struct md_priv *pv = md_priv(st);

	for (int i = 0; i < n; i++) {
		const struct md_meta *m = (const void *)((const char *)arr + (size_t)i * elem);
		int prev = md_idx_put(&pv->ix[k], key_of(&pv->ar, m), i);
		const struct md_meta *q;

		if (prev < 0)
			continue;
		q = (const void *)((const char *)arr + (size_t)prev * elem);
		return fail(err, m->file, m->line, "metadata.name",
			    "duplicate %s %s/%s (also defined at %s:%d)", md_kind_name(k), m->ns,
			    m->name, q->file, q->line);
	}
	return 0;
}

/* HTTPRoutes and GRPCRoutes share st->routes but not their names: a
 * GRPCRoute may have an HTTPRoute's name (two kinds, as in Kubernetes). */
static int route_dups(struct md_state *st, struct md_err *err)
{
	struct md_priv *pv = md_priv(st);

	for (int i = 0; i < st->n_routes; i++) {
		const struct md_httproute *r = &st->routes[i];
		enum md_kind k = r->grpc ? MD_K_GRPCROUTE : MD_K_HTTPROUTE;
		int prev = md_idx_put(&pv->ix[k], key_of(&pv->ar, &r->meta), i);

		if (prev >= 0)
			return fail(err, r->meta.file, r->meta.line, "metadata.name",
				    "duplicate %s %s/%s (also defined at %s:%d)", md_kind_name(k),
				    r->meta.ns, r->meta.name, st->routes[prev].meta.file,
				    st->routes[prev].meta.line);
	}
	return 0;
}

static int node_ok(const struct md_state *st, const char *node)
{
	for (int i = 0; i < st->cluster.n_nodes; i++)
		if (!strcmp(st->cluster.nodes[i].name, node))
			return 1;
	return 0;
}

/* Step 5. */
static int node_names(struct md_state *st, struct md_err *err)
{
	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		/* a runtime pod reports where it runs: not ours to refuse (and
		 * refusing it would make the whole state unloadable) */
		if (p->has_status)
			continue;
		if (p->spec.node_name && !node_ok(st, p->spec.node_name))
			return fail(err, p->meta.file, p->meta.line, "spec.nodeName",
				    "unknown node \"%s\" (not in the Cluster's spec.nodes)",
				    p->spec.node_name);
	}
	for (int i = 0; i < st->n_deployments; i++) {
		const struct md_deployment *d = &st->deployments[i];

		if (d->template.node_name && !node_ok(st, d->template.node_name))
			return fail(err, d->meta.file, d->meta.line, "spec.template.spec.nodeName",
				    "unknown node \"%s\" (not in the Cluster's spec.nodes)",
				    d->template.node_name);
	}
	return 0;
}

/* ---- step 6: ClusterIPs: md_finish_families (families.c) ------------------------- */

/* ---- step 7: references ------------------------------------------------------------ */

/* References resolve eventually, as in Kubernetes: a split or route naming
 * a Service (or HTTPRouteGroup) that does not exist yet is kept, marked not
 * ready with the reason (and a warning), and takes effect when the object
 * appears. Nothing here refuses the state. */
static int references(struct md_state *st, struct md_err *err)
{
	struct md_arena *ar = &md_priv(st)->ar;
	char field[96];

	(void)err;
	for (int i = 0; i < st->n_splits; i++) {
		struct md_trafficsplit *t = &st->splits[i];
		const char *why = NULL;

		t->root_svc = md_find_service(st, t->meta.ns, t->root);
		if (!t->root_svc) {
			why = ar_printf(ar, "root Service %s/%s does not exist (yet): the split "
					"has no effect", t->meta.ns, t->root);
			md_warn(st, t->meta.file, t->root_line, "spec.service", "%s", why);
		}
		for (int j = 0; j < t->n_backends; j++) {
			struct md_split_backend *b = &t->backends[j];

			b->svc = md_find_service(st, t->meta.ns, b->service);
			if (b->svc)
				continue;
			snprintf(field, sizeof(field), "spec.backends[%d].service", j);
			if (!why)
				why = ar_printf(ar, "backend Service %s/%s does not exist (yet): its "
						"weight is not served", t->meta.ns, b->service);
			md_warn(st, t->meta.file, b->line, field, "backend Service %s/%s does not "
				"exist (yet): its weight is not served", t->meta.ns, b->service);
		}
		for (int j = 0; j < t->n_matches; j++) {
			if (md_find_routegroup(st, t->meta.ns, t->matches[j].name))
				continue;
			snprintf(field, sizeof(field), "spec.matches[%d].name", j);
			if (!why)
				why = ar_printf(ar, "HTTPRouteGroup %s/%s does not exist (yet): no "
						"request is split", t->meta.ns, t->matches[j].name);
			md_warn(st, t->meta.file, t->matches[j].line, field, "HTTPRouteGroup %s/%s "
				"does not exist (yet): it matches no request", t->meta.ns,
				t->matches[j].name);
		}
		t->not_ready = why ? why : "";
	}
	for (int i = 0; i < st->n_routes; i++) {
		struct md_httproute *r = &st->routes[i];
		const char *why = NULL;

		for (int j = 0; j < r->n_parents; j++) {
			struct md_parent_ref *p = &r->parents[j];

			if (strcmp(p->kind, "Service") || *p->group)
				continue;
			p->svc = md_find_service(st, p->ns, p->name);
			if (p->svc)
				continue;
			snprintf(field, sizeof(field), "spec.parentRefs[%d]", j);
			if (!why)
				why = ar_printf(ar, "parent Service %s/%s does not exist (yet): the "
						"route is not attached there", p->ns, p->name);
			md_warn(st, r->meta.file, p->line, field, "parent Service %s/%s does not "
				"exist (yet): the route is not attached there", p->ns, p->name);
		}
		/* backendRefs to a missing Service: Gateway API reports them as
		 * ResolvedRefs=False and that share of requests gets 500s */
		for (int j = 0; j < r->n_rules; j++)
			for (int k = 0; k < r->rules[j].n_backends; k++) {
				struct md_backend_ref *b = &r->rules[j].backends[k];

				if (!strcmp(b->kind, "Service"))
					b->svc = md_find_service(st, b->ns, b->name);
				if (b->svc || why)
					continue;
				why = ar_printf(ar, "backendRef Service %s/%s does not exist (yet): "
						"its share is answered 500", b->ns, b->name);
			}
		r->not_ready = why ? why : "";
	}
	return 0;
}

/* ---- step 8: endpoints ------------------------------------------------------------ */

static int cmp_pod_ip(const void *a, const void *b)
{
	const struct md_pod *x = *(const struct md_pod *const *)a;
	const struct md_pod *y = *(const struct md_pod *const *)b;
	uint32_t ix = ntohl(x->ip), iy = ntohl(y->ip);
	int r;

	if (ix != iy)
		return ix < iy ? -1 : 1;
	r = strcmp(x->meta.ns, y->meta.ns);
	return r ? r : strcmp(x->meta.name, y->meta.name);
}

/* An endpoint: running, with an address of either family (an IPv6-only
 * pod's endpoint has ip 0: its address is pod->ip6), and not leaving (a
 * terminating pod is dropped from Endpoints at once, as in Kubernetes). */
static bool pod_ready(const struct md_pod *p)
{
	return (p->ip || !IN6_IS_ADDR_UNSPECIFIED(&p->ip6)) && p->phase == MD_PHASE_RUNNING &&
	       !p->terminating;
}

/* Index every pod (ready or not: readiness may change in place, see
 * md_state_patch_pods) by "ns/key=value" of each label; kept in priv. */
static void ep_index(struct md_state *st)
{
	struct md_priv *pv = md_priv(st);
	int total = 0;

	for (int i = 0; i < st->n_pods; i++)
		total += st->pods[i].meta.labels.n;
	pv->ep_le = zh_calloc((size_t)total + 1, sizeof(*pv->ep_le));
	pv->n_ep_le = 0;
	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		for (int j = 0; j < p->meta.labels.n; j++) {
			char *key = join3(&pv->ar, p->meta.ns, '/', p->meta.labels.v[j].key, '=',
					  p->meta.labels.v[j].value);
			struct md_lent *le = pv->ep_le;
			int n = pv->n_ep_le++, head = md_idx_put(&pv->ep_ix, key, n);

			le[n].pod = i;
			le[n].next = -1;
			if (head >= 0) {
				/* keep the head in the index: chain behind it */
				le[n].next = le[head].next;
				le[head].next = n;
			}
		}
	}
}

/* The endpoints of one Service from the index; cand has room for every pod.
 * The result is sorted by (IP, namespace, name), so it does not depend on
 * the chain order. */
static void svc_endpoints(struct md_state *st, struct md_service *s, const struct md_pod **cand)
{
	struct md_priv *pv = md_priv(st);
	const struct md_kv *first;
	char key[600];
	int n = 0;

	s->endpoints = ar_alloc(&pv->ar, (size_t)(s->n_ports ? s->n_ports : 1) *
					 sizeof(*s->endpoints));
	if (!s->selector.present || !s->selector.match_labels.n)
		return;
	first = &s->selector.match_labels.v[0];
	snprintf(key, sizeof(key), "%s/%s=%s", s->meta.ns, first->key, first->value);
	for (int e = md_idx_get(&pv->ep_ix, key); e >= 0; e = pv->ep_le[e].next) {
		const struct md_pod *p = &st->pods[pv->ep_le[e].pod];

		if (pod_ready(p) && md_selector_matches(&s->selector, &p->meta.labels))
			cand[n++] = p;
	}
	qsort(cand, (size_t)n, sizeof(*cand), cmp_pod_ip);
	for (int j = 0; j < s->n_ports; j++) {
		struct md_endpoint_set *es = &s->endpoints[j];

		es->v = ar_alloc(&pv->ar, (size_t)n * sizeof(*es->v));
		for (int k = 0; k < n; k++) {
			uint16_t port = md_pod_resolve_port(cand[k], &s->ports[j].target,
							    s->ports[j].proto);

			if (!port)
				continue;	/* no such named port on this pod */
			es->v[es->n].pod = cand[k];
			es->v[es->n].ip = cand[k]->ip;
			es->v[es->n].port = port;
			es->n++;
		}
	}
}

static void endpoints(struct md_state *st)
{
	const struct md_pod **cand = zh_calloc((size_t)st->n_pods + 1, sizeof(*cand));

	ep_index(st);
	for (int i = 0; i < st->n_services; i++)
		svc_endpoints(st, &st->services[i], cand);
	free(cand);
}

/* ---- incremental: runtime pods updated in place (md_int.h) -------------------- */

/* The one object of a parsed file, when it is a runtime Pod. */
static const struct md_pod *only_runtime_pod(const struct md_file *f)
{
	const struct md_state *fs = f ? f->st : NULL;

	if (!fs || fs->n_pods != 1 || md_state_n_objects(fs) != 1 || !fs->pods[0].has_status)
		return NULL;
	return &fs->pods[0];
}

static bool labels_eq(const struct md_labels *a, const struct md_labels *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->v[i].key, b->v[i].key) || strcmp(a->v[i].value, b->v[i].value))
			return false;
	return true;
}

int md_pod_patchable(const struct md_state *st, const struct md_file *old_f,
		     const struct md_file *new_f)
{
	const struct md_pod *op = only_runtime_pod(old_f), *np = only_runtime_pod(new_f);
	const struct md_pod *cur;

	if (!st->finished || !op || !np || strcmp(op->meta.ns, np->meta.ns) ||
	    strcmp(op->meta.name, np->meta.name) || !labels_eq(&op->meta.labels, &np->meta.labels))
		return -1;
	cur = md_find_pod(st, op->meta.ns, op->meta.name);
	/* st must hold old_f's very copy (shared strings), not a manifest pod
	 * of the same name or a state built from other files */
	if (!cur || cur->meta.name != op->meta.name || cur->meta.labels.v != op->meta.labels.v)
		return -1;
	return (int)(cur - st->pods);
}

static bool str_eq0(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* What NetworkPolicy reads of a pod, labels aside (src/policy). */
static bool pol_fields_eq(const struct md_pod *a, const struct md_pod *b)
{
	if (a->ip != b->ip || memcmp(&a->ip6, &b->ip6, sizeof(a->ip6)) || !str_eq0(a->spec.node_name, b->spec.node_name) ||
	    a->spec.n_containers != b->spec.n_containers)
		return false;
	for (int c = 0; c < a->spec.n_containers; c++) {
		const struct md_container *x = &a->spec.containers[c], *y = &b->spec.containers[c];

		if (x->n_ports != y->n_ports)
			return false;
		for (int i = 0; i < x->n_ports; i++)
			if (x->ports[i].port != y->ports[i].port ||
			    x->ports[i].proto != y->ports[i].proto ||
			    !str_eq0(x->ports[i].name, y->ports[i].name))
				return false;
	}
	return true;
}

/* The one object of a parsed file, when it is a Service. */
static const struct md_service *only_service(const struct md_file *f)
{
	const struct md_state *fs = f ? f->st : NULL;

	if (!fs || fs->n_services != 1 || md_state_n_objects(fs) != 1)
		return NULL;
	return &fs->services[0];
}

/* Same dual-stack input (both as parsed): the defaulting and allocation of
 * step 6 give the same families and addresses. */
static bool same_families(const struct md_service *a, const struct md_service *b)
{
	return a->fam_policy == b->fam_policy && a->n_families == b->n_families &&
	       !memcmp(a->families, b->families, sizeof(a->families[0]) * (size_t)a->n_families) &&
	       a->n_given_ips == b->n_given_ips && a->ip6_given == b->ip6_given &&
	       (!a->ip6_given || !memcmp(&a->cluster_ip6, &b->cluster_ip6, sizeof(a->cluster_ip6)));
}

int md_svc_patchable(const struct md_state *st, const struct md_file *old_f,
		     const struct md_file *new_f)
{
	const struct md_service *os = only_service(old_f), *ns = only_service(new_f);
	const struct md_service *cur;

	if (!st->finished || !os || !ns || strcmp(os->meta.ns, ns->meta.ns) ||
	    strcmp(os->meta.name, ns->meta.name) || os->headless != ns->headless ||
	    os->ip_given != ns->ip_given || (os->ip_given && os->cluster_ip != ns->cluster_ip) ||
	    !same_families(os, ns) ||
	    os->n_ports != ns->n_ports)
		return -1;
	/* same ports (number, protocol, name): the same map keys, the same
	 * split/route port matching, the same notes */
	for (int i = 0; i < os->n_ports; i++)
		if (os->ports[i].port != ns->ports[i].port ||
		    os->ports[i].proto != ns->ports[i].proto ||
		    !str_eq0(os->ports[i].name, ns->ports[i].name))
			return -1;
	cur = md_find_service(st, os->meta.ns, os->meta.name);
	if (!cur || cur->meta.name != os->meta.name || cur->ports != os->ports)
		return -1;
	return (int)(cur - st->services);
}

void md_state_patch_svcs(struct md_state *st, struct md_file *const *nf, const int *idx, int n)
{
	struct md_priv *pv = md_priv(st);
	const struct md_pod **cand = zh_calloc((size_t)st->n_pods + 1, sizeof(*cand));

	for (int i = 0; i < n; i++) {
		struct md_service *s = &st->services[idx[i]];
		struct md_service was = *s;

		*s = *only_service(nf[i]);
		/* same names, same given addresses and families: the
		 * defaulting and allocation (step 6) give the same result */
		s->cluster_ip = was.cluster_ip;
		s->cluster_ip6 = was.cluster_ip6;
		s->fam_policy = was.fam_policy;
		memcpy(s->families, was.families, sizeof(s->families));
		s->n_families = was.n_families;
		if (pv->n_files == pv->cap_files) {
			pv->cap_files = pv->cap_files ? 2 * pv->cap_files : 64;
			pv->files = zh_realloc(pv->files, (size_t)pv->cap_files * sizeof(*pv->files));
		}
		pv->files[pv->n_files++] = nf[i];
		nf[i]->refs++;
		svc_endpoints(st, s, cand);
	}
	free(cand);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

void md_state_patch_pods(struct md_state *st, struct md_file *const *nf, const int *idx, int n,
			 int **aff, int *n_aff, bool *pol_relevant)
{
	struct md_priv *pv = md_priv(st);
	const struct md_pod **cand = zh_calloc((size_t)st->n_pods + 1, sizeof(*cand));
	int *out = NULL, n_out = 0, cap = 0;

	*pol_relevant = false;
	for (int i = 0; i < n; i++) {
		struct md_pod *p = &st->pods[idx[i]];
		const struct md_pod *np = only_runtime_pod(nf[i]);

		if (!pol_fields_eq(p, np))
			*pol_relevant = true;
		/* same labels: the index and the selecting Services stay */
		*p = *np;
		if (pv->n_files == pv->cap_files) {
			pv->cap_files = pv->cap_files ? 2 * pv->cap_files : 64;
			pv->files = zh_realloc(pv->files, (size_t)pv->cap_files * sizeof(*pv->files));
		}
		pv->files[pv->n_files++] = nf[i];
		nf[i]->refs++;
		for (int s = 0; s < st->n_services; s++) {
			const struct md_service *sv = &st->services[s];

			if (!sv->selector.present || !sv->selector.match_labels.n ||
			    strcmp(sv->meta.ns, p->meta.ns) ||
			    !md_selector_matches(&sv->selector, &p->meta.labels))
				continue;
			if (n_out == cap) {
				cap = cap ? 2 * cap : 8;
				out = zh_realloc(out, (size_t)cap * sizeof(*out));
			}
			out[n_out++] = s;
		}
	}
	if (n_out)
		qsort(out, (size_t)n_out, sizeof(*out), cmp_int);
	{
		int u = 0;

		for (int i = 0; i < n_out; i++)
			if (!u || out[u - 1] != out[i])
				out[u++] = out[i];
		n_out = u;
	}
	for (int i = 0; i < n_out; i++)
		svc_endpoints(st, &st->services[out[i]], cand);
	free(cand);
	*aff = out;
	*n_aff = n_out;
}

int md_state_finish(struct md_state *st, struct md_err *err)
{
	struct md_priv *pv = md_priv(st);
	int ret;

	if (st->finished)
		return 0;
	cluster_defaults(st);
	if ((ret = namespaces(st, err)) || (ret = pods(st, err)))
		return ret;
	if ((ret = dups(st, MD_K_POD, st->pods, st->n_pods, sizeof(*st->pods), err)) ||
	    (ret = dups(st, MD_K_CONFIGMAP, st->configmaps, st->n_configmaps,
			sizeof(*st->configmaps), err)) ||
	    (ret = dups(st, MD_K_DEPLOYMENT, st->deployments, st->n_deployments,
			sizeof(*st->deployments), err)) ||
	    (ret = dups(st, MD_K_SERVICE, st->services, st->n_services, sizeof(*st->services),
			err)) ||
	    (ret = dups(st, MD_K_TRAFFICSPLIT, st->splits, st->n_splits, sizeof(*st->splits),
			err)) ||
	    (ret = route_dups(st, err)) ||
	    (ret = dups(st, MD_K_NETPOL, st->netpols, st->n_netpols, sizeof(*st->netpols), err)) ||
	    (ret = dups(st, MD_K_SERVICEACCOUNT, st->serviceaccounts, st->n_serviceaccounts,
			sizeof(*st->serviceaccounts), err)) ||
	    (ret = dups(st, MD_K_ROUTEGROUP, st->routegroups, st->n_routegroups,
			sizeof(*st->routegroups), err)) ||
	    (ret = dups(st, MD_K_PEERAUTH, st->peerauths, st->n_peerauths,
			sizeof(*st->peerauths), err)) ||
	    (ret = dups(st, MD_K_AUTHZPOL, st->authzpols, st->n_authzpols,
			sizeof(*st->authzpols), err)))
		return ret;
	pv->indexed = true;	/* lookups below use the indexes */
	if ((ret = node_names(st, err)) || (ret = md_finish_families(st, err)) ||
	    (ret = references(st, err)))
		return ret;
	endpoints(st);
	st->finished = true;
	return 0;
}
