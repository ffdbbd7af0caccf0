/* objset.c — the model's object set (struct md_state) built from files:
 * staging, all-or-nothing merge, directory loading, lookups and freeing.
 * (Not the state source: that is src/state, include/zerohop/state.h.)
 *
 * Invariants:
 * 1. md_state_add_*() parse into a fresh staging state; only when every
 *    document of the input decoded cleanly is the staging state merged into
 *    st (arrays appended, arena spliced). A failure frees the staging state,
 *    so st is exactly as before.
 * 2. After md_state_finish() succeeded, st is read-only and its lookup
 *    indexes are valid; adding more input to a finished state is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zerohop/log.h"
#include "md_int.h"

struct md_state *md_state_new(void)
{
	struct md_state *st = zh_calloc(1, sizeof(*st));

	st->priv = zh_calloc(1, sizeof(struct md_priv));
	return st;
}

void md_state_free(struct md_state *st)
{
	struct md_priv *pv;

	if (!st)
		return;
	pv = md_priv(st);
	free(st->namespaces);
	free(st->configmaps);
	free(st->pods);
	free(st->deployments);
	free(st->services);
	free(st->splits);
	free(st->routes);
	free(st->netpols);
	free(st->serviceaccounts);
	free(st->routegroups);
	free(st->peerauths);
	free(st->authzpols);
	free(st->ignored);
	free(st->warnings);
	free(pv->objs);
	for (int i = 0; i < pv->n_files; i++)
		md_file_put(pv->files[i]);
	free(pv->files);
	for (int k = 0; k < MD_K__COUNT; k++)
		md_idx_free(&pv->ix[k]);
	md_idx_free(&pv->ep_ix);
	free(pv->ep_le);
	ar_free(&pv->ar);
	free(pv);
	free(st);
}

static void append(void **dst, int *n, int *cap, const void *src, int m, size_t elem)
{
	if (!m)
		return;
	if (!*cap) {	/* a one-file state (md_file_parse: 100,000s of them) fits exactly */
		*dst = zh_realloc(*dst, (size_t)m * elem);
		*cap = m;
	}
	zh_reserve(dst, cap, *n + m, elem);
	memcpy((char *)*dst + (size_t)*n * elem, src, (size_t)m * elem);
	*n += m;
}

/* Append shallow copies of stg's objects to st's arrays (stg unchanged). */
static void append_all(struct md_state *st, const struct md_state *stg)
{
	struct md_priv *pv = md_priv(st), *ps = md_priv(stg);

	append((void **)&st->namespaces, &st->n_namespaces, &pv->cap_ns, stg->namespaces,
	       stg->n_namespaces, sizeof(*st->namespaces));
	append((void **)&st->configmaps, &st->n_configmaps, &pv->cap_cm, stg->configmaps,
	       stg->n_configmaps, sizeof(*st->configmaps));
	append((void **)&st->pods, &st->n_pods, &pv->cap_pod, stg->pods, stg->n_pods,
	       sizeof(*st->pods));
	append((void **)&st->deployments, &st->n_deployments, &pv->cap_dep, stg->deployments,
	       stg->n_deployments, sizeof(*st->deployments));
	append((void **)&st->services, &st->n_services, &pv->cap_svc, stg->services,
	       stg->n_services, sizeof(*st->services));
	append((void **)&st->splits, &st->n_splits, &pv->cap_split, stg->splits, stg->n_splits,
	       sizeof(*st->splits));
	append((void **)&st->routes, &st->n_routes, &pv->cap_route, stg->routes, stg->n_routes,
	       sizeof(*st->routes));
	append((void **)&st->netpols, &st->n_netpols, &pv->cap_np, stg->netpols, stg->n_netpols,
	       sizeof(*st->netpols));
	append((void **)&st->serviceaccounts, &st->n_serviceaccounts, &pv->cap_sa,
	       stg->serviceaccounts, stg->n_serviceaccounts, sizeof(*st->serviceaccounts));
	append((void **)&st->routegroups, &st->n_routegroups, &pv->cap_rg, stg->routegroups,
	       stg->n_routegroups, sizeof(*st->routegroups));
	append((void **)&st->peerauths, &st->n_peerauths, &pv->cap_pa, stg->peerauths,
	       stg->n_peerauths, sizeof(*st->peerauths));
	append((void **)&st->authzpols, &st->n_authzpols, &pv->cap_az, stg->authzpols,
	       stg->n_authzpols, sizeof(*st->authzpols));
	append((void **)&st->ignored, &st->n_ignored, &pv->cap_ign, stg->ignored, stg->n_ignored,
	       sizeof(*st->ignored));
	append((void **)&st->warnings, &st->n_warnings, &pv->cap_warn, stg->warnings,
	       stg->n_warnings, sizeof(*st->warnings));
	append((void **)&pv->objs, &pv->n_objs, &pv->cap_objs, ps->objs, ps->n_objs,
	       sizeof(*pv->objs));
	if (stg->cluster.present)
		st->cluster = stg->cluster;
}

/* Move everything of stg into st; stg is freed. The caller checked that the
 * merge cannot fail (see cluster_conflict). */
static void merge(struct md_state *st, struct md_state *stg)
{
	append_all(st, stg);
	ar_splice(&md_priv(st)->ar, &md_priv(stg)->ar);
	md_state_free(stg);
}

void md_state_set_strict(struct md_state *st, bool strict)
{
	md_priv(st)->strict = strict;
}

void md_state_set_namespace(struct md_state *st, const char *ns)
{
	md_priv(st)->default_ns = ns;
}

void md_warn(struct md_state *st, const char *file, int line, const char *field,
	     const char *fmt, ...)
{
	struct md_priv *pv = md_priv(st);
	struct md_warning *w = zh_grow((void **)&st->warnings, &st->n_warnings, &pv->cap_warn,
				       sizeof(*w));
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	w->file = ar_strdup(&pv->ar, file ? file : "");
	w->line = line;
	w->field = ar_strdup(&pv->ar, field ? field : "");
	w->msg = ar_strdup(&pv->ar, msg);
}

/* A new staging state with st's input options. */
static struct md_state *staging_of(const struct md_state *st)
{
	struct md_state *stg = md_state_new();

	md_priv(stg)->ident_only = md_priv(st)->ident_only;
	md_priv(stg)->keep_tree = md_priv(st)->keep_tree;
	md_priv(stg)->strict = md_priv(st)->strict;
	md_priv(stg)->default_ns = md_priv(st)->default_ns;
	return stg;
}

static int cluster_conflict(const struct md_state *st, const struct md_state *stg,
			    struct md_err *err)
{
	if (!st->cluster.present || !stg->cluster.present)
		return 0;
	snprintf(err->file, sizeof(err->file), "%s", stg->cluster.file);
	err->line = stg->cluster.line;
	snprintf(err->field, sizeof(err->field), "kind");
	snprintf(err->msg, sizeof(err->msg), "a second Cluster object (the first is at %s:%d)",
		 st->cluster.file, st->cluster.line);
	return -EINVAL;
}

static int refuse_finished(const struct md_state *st, const char *name, struct md_err *err)
{
	if (!st->finished)
		return 0;
	snprintf(err->file, sizeof(err->file), "%s", name);
	err->line = 0;
	err->field[0] = 0;
	snprintf(err->msg, sizeof(err->msg), "state already finished; cannot add input");
	return -EINVAL;
}

struct add_ctx {
	struct md_state *stg;
	const char *fname;
	struct md_arena *tree;
	struct md_err *err;
};

/* One complete document: decode it; drop its tree unless asked to keep it. */
static int add_doc(void *arg, const struct yn *root, int line)
{
	struct add_ctx *a = arg;
	struct md_priv *ps = md_priv(a->stg);
	int first = ps->n_objs, ret = 0;

	if (root && !yn_is_null(root))
		ret = md_decode_doc(a->stg, a->fname, root, a->err);
	if (ps->keep_tree) {
		ar_splice(&ps->ar, a->tree);
	} else {
		for (int i = first; i < ps->n_objs; i++)
			ps->objs[i].node = NULL;
		ar_free(a->tree);	/* blocks go back to the pool for the next one */
	}
	return ret;
}

/* Decode every document of buf into stg itself. Only for a state nobody
 * else sees yet (a staging state, a fresh md_file's): on failure it holds
 * part of buf and must be dropped. */
static int parse_into(struct md_state *stg, const char *name, const char *buf, size_t len,
		      struct md_err *err)
{
	struct md_arena tree = { 0 };
	struct add_ctx a;
	int ret;

	a.stg = stg;
	a.fname = ar_strdup(&md_priv(stg)->ar, name ? name : "<buffer>");
	a.tree = &tree;
	a.err = err;
	ret = yn_parse(&md_priv(stg)->ar, &tree, a.fname, buf, len, add_doc, &a, err);
	ar_free(&tree);	/* what a syntax error left behind */
	return ret;
}

int md_state_add_buf(struct md_state *st, const char *name, const char *buf, size_t len,
		     struct md_err *err)
{
	struct md_state *stg;
	struct md_arena_mark mark;
	int ret;

	if ((ret = refuse_finished(st, name, err)))
		return ret;
	/* the staging state borrows st's arena (so a small file does not
	 * cost a whole block); a failure rolls the arena back to the mark */
	stg = staging_of(st);
	mark = ar_mark(&md_priv(st)->ar);
	md_priv(stg)->ar = md_priv(st)->ar;
	md_priv(st)->ar.head = NULL;
	ret = parse_into(stg, name, buf, len, err);
	if (!ret)
		ret = cluster_conflict(st, stg, err);
	md_priv(st)->ar = md_priv(stg)->ar;
	md_priv(stg)->ar.head = NULL;
	if (ret) {
		ar_reset(&md_priv(st)->ar, mark);
		md_state_free(stg);
		return ret;
	}
	merge(st, stg);
	return 0;
}

/* Read a whole file (name relative to dfd, or absolute) into a malloc'd,
 * NUL-terminated buffer. No fstat: manifests are small, the first read
 * usually gets everything. */
static int read_all(int dfd, const char *name, char **out, size_t *len)
{
	size_t cap = 8192, n = 0;
	char *buf;
	int fd, ret = 0;

	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = zh_malloc(cap);
	for (;;) {
		ssize_t r;

		if (n + 1 == cap) {
			cap *= 2;
			buf = zh_realloc(buf, cap);
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;	/* EISDIR for a directory */
			free(buf);
			goto out;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
out:
	close(fd);
	return ret;
}

static int add_file_at(struct md_state *st, int dfd, const char *name, const char *path,
		       struct md_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	int ret;

	if ((ret = refuse_finished(st, path, err)))
		return ret;
	ret = read_all(dfd, name, &buf, &len);
	if (ret)
		return md_err_io(err, path, -ret, "cannot read");
	ret = md_state_add_buf(st, path, buf, len, err);
	free(buf);
	return ret;
}

int md_state_add_file(struct md_state *st, const char *path, struct md_err *err)
{
	return add_file_at(st, AT_FDCWD, path, path, err);
}

bool md_manifest_name(const char *n)
{
	size_t l = strlen(n);

	if (n[0] == '.')
		return false;
	return (l > 5 && !strcmp(n + l - 5, ".yaml")) || (l > 4 && !strcmp(n + l - 4, ".yml")) ||
	       (l > 5 && !strcmp(n + l - 5, ".json"));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int md_state_add_dir(struct md_state *st, const char *dir, struct md_err *err)
{
	struct md_state *stg = NULL;
	char **names = NULL, path[4096];
	int n = 0, cap = 0, ret;
	struct dirent *de;
	DIR *d;

	if ((ret = refuse_finished(st, dir, err)))
		return ret;
	d = opendir(dir);
	if (!d)
		return md_err_io(err, dir, errno, "cannot open directory");
	while ((de = readdir(d))) {
		if (!md_manifest_name(de->d_name) || de->d_type == DT_DIR)
			continue;
		zh_reserve((void **)&names, &cap, n + 1, sizeof(*names));
		names[n++] = zh_strdup(de->d_name);
	}
	if (n)
		qsort(names, (size_t)n, sizeof(*names), cmp_str);
	/* the whole directory is one all-or-nothing unit */
	stg = staging_of(st);
	/* "DIR/" names its files DIR/file, not DIR//file */
	size_t dl = strlen(dir);

	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	for (int i = 0; i < n; i++) {
		if (snprintf(path, sizeof(path), "%.*s/%s", (int)dl, dir, names[i]) >=
		    (int)sizeof(path)) {
			ret = md_err_io(err, dir, ENAMETOOLONG, names[i]);
			goto out;
		}
		ret = add_file_at(stg, dirfd(d), names[i], path, err);
		if (ret)
			goto out;
	}
	ret = cluster_conflict(st, stg, err);
	if (ret)
		goto out;
	merge(st, stg);
	stg = NULL;
out:
	closedir(d);
	md_state_free(stg);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

/* ---- parsed files (md_int.h) ---------------------------------------------------- */

int md_file_load(int dfd, const char *name, const char *path, struct md_file **out,
		 struct md_err *err)
{
	struct md_file *f = zh_calloc(1, sizeof(*f));
	char *buf = NULL;
	size_t len = 0, blk = 1024;
	int ret;

	f->refs = 1;
	f->path = zh_strdup(path);
	f->st = md_state_new();
	ret = read_all(dfd, name, &buf, &len);
	if (ret) {
		ret = md_err_io(err, path, -ret, "cannot read");
		goto fail;
	}
	/* a cache holds thousands of these: blocks sized to the file (the
	 * decoded objects take about as much as the text) instead of 64 KiB */
	while (blk < len && blk < 64 * 1024)
		blk *= 2;
	md_priv(f->st)->ar.blk = blk;
	ret = parse_into(f->st, path, buf, len, err);	/* fresh: its own staging */
	if (ret)
		goto fail;
	free(buf);
	*out = f;
	return 0;
fail:
	free(buf);
	md_file_put(f);
	return ret;
}

int md_file_parse(const char *path, const char *buf, size_t len, struct md_file **out,
		  struct md_err *err)
{
	struct md_file *f = zh_calloc(1, sizeof(*f));
	size_t blk = 256;
	int ret;

	f->refs = 1;
	f->path = zh_strdup(path);
	f->st = md_state_new();
	while (blk < len && blk < 64 * 1024)	/* as md_file_load */
		blk *= 2;
	md_priv(f->st)->ar.blk = blk;
	ret = parse_into(f->st, path, buf, len, err);	/* as md_file_load */
	if (ret) {
		md_file_put(f);
		return ret;
	}
	*out = f;
	return 0;
}

struct md_file *md_file_get(struct md_file *f)
{
	if (f)
		f->refs++;
	return f;
}

void md_file_put(struct md_file *f)
{
	if (!f || --f->refs > 0)
		return;
	md_state_free(f->st);
	free(f->path);
	free(f);
}

static void *ar_dup(struct md_arena *a, const void *src, size_t n)
{
	void *p;

	if (!src || !n)
		return (void *)src;
	p = ar_alloc(a, n);
	memcpy(p, src, n);
	return p;
}

int md_state_add_parsed(struct md_state *st, struct md_file *f, struct md_err *err)
{
	struct md_priv *pv = md_priv(st);
	struct md_arena *ar = &pv->ar;
	int ns0 = st->n_namespaces, sp0 = st->n_splits, rt0 = st->n_routes, ret;

	if ((ret = refuse_finished(st, f->path, err)) ||
	    (ret = cluster_conflict(st, f->st, err)))
		return ret;
	append_all(st, f->st);
	/* the sub-arrays md_state_finish() writes into become st's own */
	for (int i = ns0; i < st->n_namespaces; i++) {
		struct md_labels *l = &st->namespaces[i].meta.labels;

		l->v = ar_dup(ar, l->v, (size_t)l->n * sizeof(*l->v));
	}
	for (int i = sp0; i < st->n_splits; i++) {
		struct md_trafficsplit *t = &st->splits[i];

		t->backends = ar_dup(ar, t->backends, (size_t)t->n_backends * sizeof(*t->backends));
	}
	for (int i = rt0; i < st->n_routes; i++) {
		struct md_httproute *r = &st->routes[i];

		r->parents = ar_dup(ar, r->parents, (size_t)r->n_parents * sizeof(*r->parents));
		r->rules = ar_dup(ar, r->rules, (size_t)r->n_rules * sizeof(*r->rules));
		for (int j = 0; j < r->n_rules; j++)
			r->rules[j].backends = ar_dup(ar, r->rules[j].backends,
						      (size_t)r->rules[j].n_backends *
							      sizeof(*r->rules[j].backends));
	}
	if (pv->n_files == pv->cap_files) {
		pv->cap_files = pv->cap_files ? 2 * pv->cap_files : 64;
		pv->files = zh_realloc(pv->files, (size_t)pv->cap_files * sizeof(*pv->files));
	}
	pv->files[pv->n_files++] = f;
	f->refs++;
	return 0;
}

const char *md_pod_service_account(const struct md_state *st, const struct md_pod *p)
{
	const struct md_deployment *d;

	if (p->spec.service_account)
		return p->spec.service_account;
	d = p->owner ? md_find_deployment(st, p->meta.ns, p->owner) : NULL;
	if (d && d->template.service_account)
		return d->template.service_account;
	return "default";
}

int md_state_n_objects(const struct md_state *st)
{
	return md_priv(st)->n_objs;
}

void md_state_set_parse(struct md_state *st, enum md_parse_mode mode)
{
	md_priv(st)->keep_tree = mode == MD_PARSE_KEEP_TREE;
	md_priv(st)->ident_only = mode == MD_PARSE_IDENT_ONLY;
}

void md_state_obj_id(const struct md_state *st, int i, struct md_obj_id *out)
{
	const struct md_obj *o = &md_priv(st)->objs[i];

	out->kind = o->kind;
	out->ns = o->ns;
	out->name = o->name;
	out->file = o->file;
	out->line = o->line;
}

int md_state_obj_yaml(const struct md_state *st, int i, char **text, size_t *len)
{
	const struct md_obj *o = &md_priv(st)->objs[i];

	if (!o->node)
		return -EINVAL;
	return yn_emit(o->node, text, len);
}

int md_state_obj_json(const struct md_state *st, int i, char **text, size_t *len)
{
	const struct md_obj *o = &md_priv(st)->objs[i];

	if (!o->node)
		return -EINVAL;
	return yn_emit_json(o->node, text, len);
}

/* ---- lookups ------------------------------------------------------------------ */

static int find(const struct md_state *st, enum md_kind k, const void *arr, int n, size_t elem,
		const char *ns, const char *name)
{
	const struct md_priv *pv = md_priv(st);
	char key[320];

	if (!name)
		return -1;
	if (!ns && md_kind_namespaced(k))
		ns = MD_DEFAULT_NS;
	if (pv->indexed) {
		snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
		return md_idx_get(&pv->ix[k], key);
	}
	for (int i = 0; i < n; i++) {
		const struct md_meta *m = (const void *)((const char *)arr + (size_t)i * elem);

		if (!strcmp(m->name, name) && (!ns || (m->ns && !strcmp(m->ns, ns))))
			return i;
	}
	return -1;
}

const struct md_service *md_find_service(const struct md_state *st, const char *ns,
					 const char *name)
{
	int i = find(st, MD_K_SERVICE, st->services, st->n_services, sizeof(*st->services), ns,
		     name);

	return i < 0 ? NULL : &st->services[i];
}

const struct md_pod *md_find_pod(const struct md_state *st, const char *ns, const char *name)
{
	int i = find(st, MD_K_POD, st->pods, st->n_pods, sizeof(*st->pods), ns, name);

	return i < 0 ? NULL : &st->pods[i];
}

const struct md_deployment *md_find_deployment(const struct md_state *st, const char *ns,
					       const char *name)
{
	int i = find(st, MD_K_DEPLOYMENT, st->deployments, st->n_deployments,
		     sizeof(*st->deployments), ns, name);

	return i < 0 ? NULL : &st->deployments[i];
}

const struct md_configmap *md_find_configmap(const struct md_state *st, const char *ns,
					     const char *name)
{
	int i = find(st, MD_K_CONFIGMAP, st->configmaps, st->n_configmaps,
		     sizeof(*st->configmaps), ns, name);

	return i < 0 ? NULL : &st->configmaps[i];
}

const struct md_routegroup *md_find_routegroup(const struct md_state *st, const char *ns,
					       const char *name)
{
	int i = find(st, MD_K_ROUTEGROUP, st->routegroups, st->n_routegroups,
		     sizeof(*st->routegroups), ns, name);

	return i < 0 ? NULL : &st->routegroups[i];
}

const struct md_serviceaccount *md_find_serviceaccount(const struct md_state *st,
						       const char *ns, const char *name)
{
	int i = find(st, MD_K_SERVICEACCOUNT, st->serviceaccounts, st->n_serviceaccounts,
		     sizeof(*st->serviceaccounts), ns, name);

	return i < 0 ? NULL : &st->serviceaccounts[i];
}

const struct md_namespace *md_find_namespace(const struct md_state *st, const char *name)
{
	int i = find(st, MD_K_NAMESPACE, st->namespaces, st->n_namespaces,
		     sizeof(*st->namespaces), NULL, name);

	return i < 0 ? NULL : &st->namespaces[i];
}

const struct md_labels *md_namespace_labels(const struct md_state *st, const char *ns)
{
	static const struct md_labels empty;
	const struct md_namespace *n = md_find_namespace(st, ns ? ns : MD_DEFAULT_NS);

	return n ? &n->meta.labels : &empty;
}

uint16_t md_pod_resolve_port(const struct md_pod *pod, const struct md_port_ref *ref,
			     enum md_proto proto)
{
	if (!ref->present)
		return 0;
	if (!ref->name)
		return ref->num;
	for (int i = 0; i < pod->spec.n_containers; i++) {
		const struct md_container *c = &pod->spec.containers[i];

		for (int j = 0; j < c->n_ports; j++)
			if (c->ports[j].name && c->ports[j].proto == proto &&
			    !strcmp(c->ports[j].name, ref->name))
				return c->ports[j].port;
	}
	return 0;
}
