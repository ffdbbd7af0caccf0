/* decode.c — YAML tree -> typed objects: the decoding helpers (field paths,
 * scalars, labels, selectors) and the core kinds (Cluster, Namespace,
 * ConfigMap, Pod, Deployment, Service). The mesh kinds and NetworkPolicy are
 * in decode_mesh.c.
 *
 * Rules every decoder follows:
 * 1. Unknown fields are ignored; a known field of the wrong type or with an
 *    invalid value is an error naming the line of the value and its path.
 * 2. A required field that is missing is an error at the line of the
 *    mapping that should hold it.
 * 3. Per-object checks (port ranges, unique port names, a Deployment's
 *    selector matching its template) happen here; checks across objects
 *    happen in finish.c.
 * 4. Strings point into the YAML tree, which lives in the state's arena.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "md_int.h"

/* ---- context ------------------------------------------------------------------ */

static size_t dc_fix(struct dctx *c, size_t old, int n)
{
	if (n > 0)
		c->plen += (size_t)n;
	if (c->plen >= sizeof(c->path))
		c->plen = sizeof(c->path) - 1;
	return old;
}

size_t dc_push(struct dctx *c, const char *name)
{
	size_t old = c->plen;

	return dc_fix(c, old, snprintf(c->path + old, sizeof(c->path) - old, "%s%s",
				       old ? "." : "", name));
}

size_t dc_push_idx(struct dctx *c, int i)
{
	size_t old = c->plen;

	return dc_fix(c, old, snprintf(c->path + old, sizeof(c->path) - old, "[%d]", i));
}

void dc_pop(struct dctx *c, size_t len)
{
	c->plen = len;
	c->path[len] = 0;
}

int dc_fail(struct dctx *c, const struct yn *n, const char *field, const char *fmt, ...)
{
	va_list ap;

	snprintf(c->err->file, sizeof(c->err->file), "%s", c->file);
	c->err->line = n ? n->line : 0;
	/* path + "." + field, truncated to the field buffer */
	snprintf(c->err->field, sizeof(c->err->field), "%s", c->path);
	if (field && *field) {
		size_t l = strlen(c->err->field);

		if (l && l + 1 < sizeof(c->err->field))
			c->err->field[l++] = '.';
		c->err->field[l] = 0;
		strncat(c->err->field, field, sizeof(c->err->field) - l - 1);
	}
	va_start(ap, fmt);
	vsnprintf(c->err->msg, sizeof(c->err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

void dc_warn(struct dctx *c, const struct yn *n, const char *field, const char *fmt, ...)
{
	char f[200], msg[400];
	va_list ap;

	snprintf(f, sizeof(f), "%s%s%s", c->path, *c->path && field ? "." : "", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	md_warn(c->st, c->file, n ? n->line : 0, f, "%s", msg);
}

int dc_map(struct dctx *c, const struct yn *n, const char *field)
{
	return n->type == YN_MAP ? 0 : dc_fail(c, n, field, "must be a mapping");
}

int dc_seq(struct dctx *c, const struct yn *n, const char *field)
{
	return n->type == YN_SEQ ? 0 : dc_fail(c, n, field, "must be a list");
}

int dc_str(struct dctx *c, const struct yn *map, const char *field, bool required, char **out)
{
	const struct yn *v = yn_get(map, field);

	*out = NULL;
	if (!v)
		return required ? dc_fail(c, map, field, "is required") : 0;
	if (v->type != YN_SCALAR)
		return dc_fail(c, v, field, "must be a string");
	*out = (char *)v->s;
	return 0;
}

static int parse_ll(const struct yn *v, long long *out)
{
	const char *p = v->s;
	long long x = 0;
	int neg = 0, nd = 0;

	if (v->style != 1 /* YAML_PLAIN_SCALAR_STYLE */)
		return -EINVAL;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	for (; *p >= '0' && *p <= '9'; p++, nd++) {
		if (nd >= 18)
			return -ERANGE;
		x = x * 10 + (*p - '0');
	}
	if (!nd || *p)
		return -EINVAL;
	*out = neg ? -x : x;
	return 0;
}

int dc_int(struct dctx *c, const struct yn *map, const char *field, long long min,
	   long long max, long long *out, bool *present)
{
	const struct yn *v = yn_get(map, field);
	int r;

	if (present)
		*present = v != NULL;
	if (!v)
		return 0;
	if (v->type != YN_SCALAR)
		return dc_fail(c, v, field, "must be an integer");
	r = parse_ll(v, out);
	if (r == -EINVAL)
		return dc_fail(c, v, field, "must be an integer, got \"%s\"", v->s);
	if (r || *out < min || *out > max)
		return dc_fail(c, v, field, "must be between %lld and %lld, got %s", min, max, v->s);
	return 0;
}

int dc_str_list(struct dctx *c, const struct yn *map, const char *field, char ***out, int *n)
{
	const struct yn *v = yn_get(map, field);
	size_t old;

	*out = NULL;
	*n = 0;
	if (!v)
		return 0;
	if (dc_seq(c, v, field))
		return -EINVAL;
	*out = ar_alloc(c->ar, (size_t)(v->n + 1) * sizeof(char *));
	old = dc_push(c, field);
	for (int i = 0; i < v->n; i++) {
		if (v->items[i]->type != YN_SCALAR) {
			size_t o2 = dc_push_idx(c, i);
			int r = dc_fail(c, v->items[i], NULL, "must be a string");

			dc_pop(c, o2);
			return r;
		}
		(*out)[i] = (char *)v->items[i]->s;
	}
	dc_pop(c, old);
	*n = v->n;
	return 0;
}

int dc_labels(struct dctx *c, const struct yn *map, const char *field, bool validate,
	      struct md_labels *out)
{
	const struct yn *v = yn_get(map, field);
	size_t old;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (!v)
		return 0;
	if (dc_map(c, v, field))
		return -EINVAL;
	out->v = ar_alloc(c->ar, (size_t)v->n * sizeof(*out->v));
	old = dc_push(c, field);
	for (int i = 0; i < v->n; i++) {
		const struct yn *val = v->pairs[i].val;
		struct yn kn = { .type = YN_SCALAR, .line = v->pairs[i].key_line,
				 .s = v->pairs[i].key };
		const struct yn *k = &kn;
		const char *why;

		if (val->type != YN_SCALAR) {
			ret = dc_fail(c, val, k->s, "must be a string");
			goto out;
		}
		if (validate && (why = md_check_label_key(k->s))) {
			ret = dc_fail(c, k, k->s, "invalid label key: %s", why);
			goto out;
		}
		out->v[i].key = (char *)k->s;
		out->v[i].value = yn_is_null(val) ? "" : (char *)val->s;
		if (validate && (why = md_check_label_value(out->v[i].value))) {
			ret = dc_fail(c, val, k->s, "invalid label value \"%s\": %s", val->s, why);
			goto out;
		}
	}
	out->n = v->n;
out:
	dc_pop(c, old);
	return ret;
}

static int dc_sel_expr(struct dctx *c, const struct yn *e, struct md_sel_expr *x)
{
	static const char *const ops[] = { "In", "NotIn", "Exists", "DoesNotExist" };
	const struct yn *vals;
	char *op;
	const char *why;
	int i;

	if (dc_map(c, e, NULL) || dc_str(c, e, "key", true, &x->key) ||
	    dc_str(c, e, "operator", true, &op))
		return -EINVAL;
	if ((why = md_check_label_key(x->key)))
		return dc_fail(c, yn_get(e, "key"), "key", "invalid label key: %s", why);
	for (i = 0; i < 4 && strcmp(op, ops[i]); i++)
		;
	if (i == 4)
		return dc_fail(c, yn_get(e, "operator"), "operator",
			       "unknown operator \"%s\" (In, NotIn, Exists, DoesNotExist)", op);
	x->op = (enum md_sel_op)i;
	if (dc_str_list(c, e, "values", &x->values, &x->n_values))
		return -EINVAL;
	vals = yn_get(e, "values");
	if ((x->op == MD_SEL_IN || x->op == MD_SEL_NOT_IN) && !x->n_values)
		return dc_fail(c, vals ? vals : e, "values",
			       "must be non-empty when operator is %s", op);
	if ((x->op == MD_SEL_EXISTS || x->op == MD_SEL_DOES_NOT_EXIST) && x->n_values)
		return dc_fail(c, vals, "values", "must be empty when operator is %s", op);
	return 0;
}

int dc_selector(struct dctx *c, const struct yn *map, const char *field, struct md_selector *out)
{
	const struct yn *v = yn_get(map, field), *exprs;
	size_t old;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	/* a bare "namespaceSelector:" is null, which Kubernetes reads as a nil
	 * pointer: absent, not {} (callers that default, such as a policy's
	 * spec.podSelector, set present themselves) */
	if (!v)
		return 0;
	if (dc_map(c, v, field))
		return -EINVAL;
	out->present = true;
	old = dc_push(c, field);
	if ((ret = dc_labels(c, v, "matchLabels", true, &out->match_labels)))
		goto out;
	exprs = yn_get(v, "matchExpressions");
	if (exprs) {
		size_t o2 = dc_push(c, "matchExpressions");

		if ((ret = dc_seq(c, exprs, NULL))) {
			dc_pop(c, o2);
			goto out;
		}
		out->exprs = ar_alloc(c->ar, (size_t)exprs->n * sizeof(*out->exprs));
		for (int i = 0; i < exprs->n && !ret; i++) {
			size_t o3 = dc_push_idx(c, i);

			ret = dc_sel_expr(c, exprs->items[i], &out->exprs[i]);
			if (!ret)
				dc_pop(c, o3);
		}
		if (ret)
			goto out;
		out->n_exprs = exprs->n;
		dc_pop(c, o2);
	}
out:
	if (!ret)
		dc_pop(c, old);
	return ret;
}

int dc_port_ref(struct dctx *c, const struct yn *map, const char *field, struct md_port_ref *out)
{
	const struct yn *v = yn_get(map, field);
	const char *why;
	long long x;

	memset(out, 0, sizeof(*out));
	if (!v)
		return 0;
	if (v->type != YN_SCALAR)
		return dc_fail(c, v, field, "must be a port number or a port name");
	out->present = true;
	if (!parse_ll(v, &x)) {
		if (x < 1 || x > 65535)
			return dc_fail(c, v, field, "port must be between 1 and 65535, got %s", v->s);
		out->num = (uint16_t)x;
		return 0;
	}
	if ((why = md_check_port_name(v->s)))
		return dc_fail(c, v, field, "invalid port name \"%s\": %s", v->s, why);
	out->name = (char *)v->s;
	return 0;
}

int dc_proto(struct dctx *c, const struct yn *map, const char *field, bool allow_sctp,
	     enum md_proto *out, bool *present)
{
	char *s;

	*out = MD_PROTO_TCP;
	if (present)
		*present = false;
	if (dc_str(c, map, field, false, &s))
		return -EINVAL;
	if (!s)
		return 0;
	if (present)
		*present = true;
	if (!strcmp(s, "TCP"))
		*out = MD_PROTO_TCP;
	else if (!strcmp(s, "UDP"))
		*out = MD_PROTO_UDP;
	else if (!strcmp(s, "SCTP") && allow_sctp)
		*out = MD_PROTO_SCTP;
	else if (!strcmp(s, "SCTP"))
		return dc_fail(c, yn_get(map, field), field, "SCTP is not supported here (TCP or UDP)");
	else
		return dc_fail(c, yn_get(map, field), field,
			       "unknown protocol \"%s\" (TCP, UDP%s)", s, allow_sctp ? ", SCTP" : "");
	return 0;
}

/* ---- metadata --------------------------------------------------------------- */

/* Add "namespace: ns" to an object's metadata mapping, so an object applied
 * with -n is stored with its namespace (the tree is what gets re-emitted).
 * The new pair array lives in the state's arena, as long as the tree. */
static void set_namespace(struct dctx *c, const struct yn *md, const char *ns)
{
	struct yn *m = (struct yn *)md, *v = ar_alloc(c->ar, sizeof(*v));
	struct yn_pair *pairs = ar_alloc(c->ar, (size_t)(m->n + 1) * sizeof(*pairs));

	v->type = YN_SCALAR;
	v->style = 1;	/* YAML_PLAIN_SCALAR_STYLE */
	v->line = m->line;
	v->s = ar_strdup(c->ar, ns);
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->pairs[i].key, "namespace")) {	/* "namespace:" (null) */
			m->pairs[i].val = v;
			return;
		}
	if (m->n)
		memcpy(pairs, m->pairs, (size_t)m->n * sizeof(*pairs));
	pairs[m->n].key = "namespace";
	pairs[m->n].key_line = m->line;
	pairs[m->n].key_style = 1;
	pairs[m->n].val = v;
	m->pairs = pairs;
	m->n++;
}

static int dc_meta(struct dctx *c, const struct yn *root, bool namespaced, struct md_meta *m)
{
	const struct yn *md = yn_get(root, "metadata"), *owners;
	size_t old;
	const char *why;
	int ret = -EINVAL;

	m->file = (char *)c->file;
	m->line = root->line;
	if (!md)
		return dc_fail(c, root, "metadata.name", "is required");
	if (dc_map(c, md, "metadata"))
		return -EINVAL;
	old = dc_push(c, "metadata");
	if (dc_str(c, md, "name", true, &m->name))
		goto out;
	why = namespaced ? md_check_dns_subdomain(m->name) : md_check_dns_label(m->name);
	if (why) {
		dc_fail(c, yn_get(md, "name"), "name", "invalid name \"%s\": %s", m->name, why);
		goto out;
	}
	if (namespaced) {
		const char *dns = md_priv(c->st)->default_ns;

		if (dc_str(c, md, "namespace", false, &m->ns))
			goto out;
		if (!m->ns) {
			m->ns = dns ? ar_strdup(c->ar, dns) : MD_DEFAULT_NS;
			if (dns && md_priv(c->st)->keep_tree)
				set_namespace(c, md, dns);
		} else if ((why = md_check_dns_label(m->ns))) {
			dc_fail(c, yn_get(md, "namespace"), "namespace",
				"invalid namespace \"%s\": %s", m->ns, why);
			goto out;
		} else if (dns && strcmp(dns, m->ns)) {
			/* kubectl's rule: -n never moves an object */
			dc_fail(c, yn_get(md, "namespace"), "namespace",
				"the object's namespace \"%s\" does not match the namespace \"%s\" "
				"given with -n", m->ns, dns);
			goto out;
		}
	}
	if (dc_labels(c, md, "labels", true, &m->labels) ||
	    dc_labels(c, md, "annotations", false, &m->annotations))
		goto out;
	owners = yn_get(md, "ownerReferences");
	if (owners && (owners->type != YN_SEQ || (owners->n && owners->items[0]->type != YN_MAP))) {
		dc_fail(c, owners, "ownerReferences", "must be a list of mappings");
		goto out;
	}
	ret = 0;
out:
	if (!ret)
		dc_pop(c, old);
	return ret;
}

int dc_seq_each(struct dctx *c, const struct yn *map, const char *field, size_t size,
		void **out, int *n_out, dc_item_fn fn, void *arg)
{
	const struct yn *s = yn_get(map, field);
	size_t old, base;

	if (!s)
		return 0;
	old = dc_push(c, field);
	base = c->plen;
	if (dc_seq(c, s, NULL))
		return -EINVAL;
	*out = ar_alloc(c->ar, (size_t)s->n * size);
	for (int i = 0; i < s->n; i++) {
		dc_push_idx(c, i);
		if (fn(c, s->items[i], (char *)*out + (size_t)i * size, arg))
			return -EINVAL;
		dc_pop(c, base);
	}
	*n_out = s->n;
	dc_pop(c, old);
	return 0;
}

/* ---- pods --------------------------------------------------------------------- */

/* Port names seen so far in the pod, and where this container's begin. */
struct port_names {
	const char **v;
	int *n;
	int first;
};

static int container_port(struct dctx *c, const struct yn *p, void *elem, void *arg)
{
	struct md_container_port *cp = elem;
	struct port_names *pn = arg;
	const char *why;
	long long v;
	bool has;

	if (dc_map(c, p, NULL) || dc_int(c, p, "containerPort", 1, 65535, &v, &has) ||
	    dc_str(c, p, "name", false, &cp->name) ||
	    dc_proto(c, p, "protocol", true, &cp->proto, NULL))
		return -EINVAL;
	if (!has)
		return dc_fail(c, p, "containerPort", "is required");
	cp->port = (uint16_t)v;
	if (cp->name) {
		if ((why = md_check_port_name(cp->name)))
			return dc_fail(c, yn_get(p, "name"), "name", "invalid port name \"%s\": %s",
				       cp->name, why);
		/* unique within the container, as Kubernetes checks */
		for (int j = pn->first; j < *pn->n; j++)
			if (!strcmp(pn->v[j], cp->name))
				return dc_fail(c, yn_get(p, "name"), "name",
					       "duplicate port name \"%s\" in container", cp->name);
		pn->v[(*pn->n)++] = cp->name;
	}
	return 0;
}

static int volume_mount(struct dctx *c, const struct yn *m, void *elem, void *arg)
{
	struct md_volume_mount *vm = elem;

	(void)arg;
	if (dc_map(c, m, NULL) || dc_str(c, m, "name", true, &vm->name) ||
	    dc_str(c, m, "mountPath", true, &vm->mount_path) ||
	    dc_str(c, m, "subPath", false, &vm->sub_path))
		return -EINVAL;
	return 0;
}

static int pod_volume(struct dctx *c, const struct yn *v, void *elem, void *arg)
{
	struct md_volume *vol = elem;
	const struct yn *cm;

	(void)arg;
	if (dc_map(c, v, NULL) || dc_str(c, v, "name", true, &vol->name))
		return -EINVAL;
	cm = yn_get(v, "configMap");
	if (cm) {
		dc_push(c, "configMap");
		if (dc_map(c, cm, NULL) || dc_str(c, cm, "name", true, &vol->configmap))
			return -EINVAL;
	}
	return 0;
}

static int dc_container(struct dctx *c, const struct yn *n, struct md_container *k,
			const char **names, int *n_names)
{
	struct port_names pn = { names, n_names, *n_names };
	const char *why;

	if (dc_map(c, n, NULL) || dc_str(c, n, "name", true, &k->name) ||
	    dc_str(c, n, "image", false, &k->image) ||
	    dc_str_list(c, n, "command", &k->command, &k->n_command) ||
	    dc_str_list(c, n, "args", &k->args, &k->n_args))
		return -EINVAL;
	if ((why = md_check_dns_label(k->name)))
		return dc_fail(c, yn_get(n, "name"), "name", "invalid container name: %s", why);
	return dc_seq_each(c, n, "ports", sizeof(*k->ports), (void **)&k->ports, &k->n_ports,
			   container_port, &pn) ||
	       dc_seq_each(c, n, "volumeMounts", sizeof(*k->mounts), (void **)&k->mounts,
			   &k->n_mounts, volume_mount, NULL) ? -EINVAL : 0;
}

static int count_ports(const struct yn *containers)
{
	int n = 0;

	for (int i = 0; i < containers->n; i++) {
		const struct yn *p = yn_get(containers->items[i], "ports");

		if (p && p->type == YN_SEQ)
			n += p->n;
	}
	return n;
}

/* spec of a Pod or of a Deployment's template; path is at the spec. */
static int dc_pod_spec(struct dctx *c, const struct yn *spec, struct md_pod_spec *ps)
{
	const struct yn *cs;
	const char **names;
	int n_names = 0;
	size_t old;

	if (dc_map(c, spec, NULL) || dc_str(c, spec, "nodeName", false, &ps->node_name) ||
	    dc_str(c, spec, "serviceAccountName", false, &ps->service_account))
		return -EINVAL;
	if (!ps->service_account &&
	    dc_str(c, spec, "serviceAccount", false, &ps->service_account))	/* deprecated alias */
		return -EINVAL;
	if (ps->service_account) {
		const char *f = yn_get(spec, "serviceAccountName") ? "serviceAccountName"
								   : "serviceAccount";
		const char *why = md_check_dns_subdomain(ps->service_account);

		if (why)
			return dc_fail(c, yn_get(spec, f), f, "invalid name \"%s\": %s",
				       ps->service_account, why);
	}
	cs = yn_get(spec, "containers");
	if (!cs)
		return dc_fail(c, spec, "containers", "is required");
	if (dc_seq(c, cs, "containers"))
		return -EINVAL;
	if (!cs->n)
		return dc_fail(c, cs, "containers", "must have at least one container");
	names = ar_alloc(c->ar, (size_t)(count_ports(cs) + 1) * sizeof(*names));
	ps->containers = ar_alloc(c->ar, (size_t)cs->n * sizeof(*ps->containers));
	old = dc_push(c, "containers");
	size_t base = c->plen;
	for (int i = 0; i < cs->n; i++) {
		dc_push_idx(c, i);
		if (dc_container(c, cs->items[i], &ps->containers[i], names, &n_names))
			return -EINVAL;
		for (int j = 0; j < i; j++)
			if (!strcmp(ps->containers[j].name, ps->containers[i].name))
				return dc_fail(c, yn_get(cs->items[i], "name"), "name",
					       "duplicate container name \"%s\"",
					       ps->containers[i].name);
		dc_pop(c, base);
	}
	ps->n_containers = cs->n;
	dc_pop(c, old);
	return dc_seq_each(c, spec, "volumes", sizeof(*ps->volumes), (void **)&ps->volumes,
			   &ps->n_volumes, pod_volume, NULL);
}

static int dc_pod(struct dctx *c, const struct yn *root, struct md_meta *meta, bool *has_status)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_pod *p = zh_grow((void **)&c->st->pods, &c->st->n_pods, &pv->cap_pod, sizeof(*p));
	const struct yn *spec = yn_get(root, "spec"), *status = yn_get(root, "status"), *owners;
	size_t old;

	p->meta = *meta;
	if (!spec)
		return dc_fail(c, root, "spec", "is required");
	old = dc_push(c, "spec");
	if (dc_pod_spec(c, spec, &p->spec))
		return -EINVAL;
	dc_pop(c, old);
	if (status && status->type == YN_MAP && status->n > 0) {
		static const char *const phases[] = { "", "Pending", "Running", "Succeeded", "Failed" };
		char *phase;
		int i;

		old = dc_push(c, "status");
		p->has_status = true;
		if (md_decode_pod_ips(c, status, p) || dc_str(c, status, "phase", false, &phase))
			return -EINVAL;
		if (phase) {
			for (i = 1; i < 5 && strcmp(phase, phases[i]); i++)
				;
			if (i == 5)
				return dc_fail(c, yn_get(status, "phase"), "phase",
					       "unknown phase \"%s\" (Pending, Running, Succeeded, Failed)",
					       phase);
			p->phase = (enum md_phase)i;
		}
		dc_pop(c, old);
	} else if (status && status->type != YN_MAP) {
		return dc_fail(c, status, "status", "must be a mapping");
	}
	{
		char *del;

		old = dc_push(c, "metadata");
		if (dc_str(c, yn_get(root, "metadata"), "deletionTimestamp", false, &del))
			return -EINVAL;
		dc_pop(c, old);
		p->terminating = del && del[0];
	}
	owners = yn_get(yn_get(root, "metadata"), "ownerReferences");
	if (owners && owners->n) {
		old = dc_push(c, "metadata.ownerReferences[0]");
		if (dc_str(c, owners->items[0], "name", false, &p->owner))
			return -EINVAL;
		dc_pop(c, old);
	}
	*has_status = p->has_status;
	return 0;
}

static int dc_deployment(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_deployment *d = zh_grow((void **)&c->st->deployments, &c->st->n_deployments,
					  &pv->cap_dep, sizeof(*d));
	const struct yn *spec = yn_get(root, "spec"), *tmpl, *tspec;
	long long replicas = 1;
	bool has;
	size_t old;

	d->meta = *meta;
	if (!spec)
		return dc_fail(c, root, "spec", "is required");
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) || dc_int(c, spec, "replicas", 0, 1000, &replicas, &has) ||
	    dc_selector(c, spec, "selector", &d->selector))
		return -EINVAL;
	d->replicas = (int)replicas;
	if (!yn_get(spec, "selector"))
		return dc_fail(c, spec, "selector", "is required");
	if (!d->selector.match_labels.n && !d->selector.n_exprs)
		return dc_fail(c, yn_get(spec, "selector"), "selector",
			       "empty selector is invalid for a Deployment");
	tmpl = yn_get(spec, "template");
	if (!tmpl)
		return dc_fail(c, spec, "template", "is required");
	dc_push(c, "template");
	if (dc_map(c, tmpl, NULL))
		return -EINVAL;
	{
		const struct yn *tmd = yn_get(tmpl, "metadata");
		size_t o2 = dc_push(c, "metadata");

		if (tmd && (dc_map(c, tmd, NULL) ||
			    dc_labels(c, tmd, "labels", true, &d->template_labels) ||
			    dc_labels(c, tmd, "annotations", false, &d->template_annotations)))
			return -EINVAL;
		dc_pop(c, o2);
	}
	if (!md_selector_matches(&d->selector, &d->template_labels)) {
		dc_pop(c, old);
		dc_push(c, "spec");
		return dc_fail(c, yn_get(spec, "selector"), "selector",
			       "does not match template labels (spec.template.metadata.labels)");
	}
	tspec = yn_get(tmpl, "spec");
	if (!tspec)
		return dc_fail(c, tmpl, "spec", "is required");
	dc_push(c, "spec");
	if (dc_pod_spec(c, tspec, &d->template))
		return -EINVAL;
	dc_pop(c, old);
	return 0;
}

/* ---- services ------------------------------------------------------------------ */

static int dc_service_ports(struct dctx *c, const struct yn *ports, struct md_service *s)
{
	s->ports = ar_alloc(c->ar, (size_t)ports->n * sizeof(*s->ports));
	for (int i = 0; i < ports->n; i++) {
		const struct yn *p = ports->items[i];
		struct md_service_port *sp = &s->ports[i];
		size_t old = dc_push_idx(c, i);
		const char *why;
		long long v;
		bool has;

		if (dc_map(c, p, NULL) || dc_str(c, p, "name", false, &sp->name) ||
		    dc_int(c, p, "port", 1, 65535, &v, &has) ||
		    dc_port_ref(c, p, "targetPort", &sp->target) ||
		    dc_proto(c, p, "protocol", false, &sp->proto, NULL) ||
		    dc_str(c, p, "appProtocol", false, &sp->app_protocol))
			return -EINVAL;
		if (!has)
			return dc_fail(c, p, "port", "is required");
		sp->port = (uint16_t)v;
		if (!sp->target.present) {
			sp->target.present = true;
			sp->target.num = sp->port;
		}
		if (sp->name && (why = md_check_dns_label(sp->name)))
			return dc_fail(c, yn_get(p, "name"), "name", "invalid port name \"%s\": %s",
				       sp->name, why);
		if (!sp->name && ports->n > 1)
			return dc_fail(c, p, "name", "is required when a Service has more than one port");
		for (int j = 0; j < i; j++) {
			if (sp->name && s->ports[j].name && !strcmp(sp->name, s->ports[j].name))
				return dc_fail(c, yn_get(p, "name"), "name",
					       "duplicate port name \"%s\"", sp->name);
			if (sp->port == s->ports[j].port && sp->proto == s->ports[j].proto)
				return dc_fail(c, yn_get(p, "port"), "port",
					       "duplicate port %u/%s", sp->port,
					       md_proto_name(sp->proto));
		}
		dc_pop(c, old);
	}
	s->n_ports = ports->n;
	return 0;
}

static int dc_service(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_service *s = zh_grow((void **)&c->st->services, &c->st->n_services,
				       &pv->cap_svc, sizeof(*s));
	const struct yn *spec = yn_get(root, "spec"), *ports;
	char *type;
	size_t old;

	s->meta = *meta;
	if (!spec)
		return dc_fail(c, root, "spec", "is required");
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) || dc_str(c, spec, "type", false, &type) ||
	    dc_labels(c, spec, "selector", true, &s->selector.match_labels))
		return -EINVAL;
	if (type && strcmp(type, "ClusterIP") && strcmp(type, "NodePort") &&
	    strcmp(type, "LoadBalancer"))
		return dc_fail(c, yn_get(spec, "type"), "type",
			       "unsupported type \"%s\" (ClusterIP, NodePort, LoadBalancer)", type);
	/* clusterIP, clusterIPs, ipFamilies, ipFamilyPolicy (families.c) */
	if (md_decode_svc_families(c, spec, s))
		return -EINVAL;
	/* data-plane fields zerohop does not honour: said, not silent */
	if (type && strcmp(type, "ClusterIP"))
		md_warn(c->st, c->file, yn_get(spec, "type")->line, "spec.type",
			"%s is treated as ClusterIP (zerohop opens no node ports and no load "
			"balancer)", type);
	{
		char *v;

		if (dc_str(c, spec, "sessionAffinity", false, &v))
			return -EINVAL;
		if (v && strcmp(v, "None"))
			md_warn(c->st, c->file, yn_get(spec, "sessionAffinity")->line,
				"spec.sessionAffinity", "%s is not honoured: each connection is "
				"balanced on its own (the ring-hash lb-policy gives affinity through "
				"the node proxy)", v);
		if (dc_str(c, spec, "internalTrafficPolicy", false, &v))
			return -EINVAL;
		if (v && strcmp(v, "Cluster"))
			md_warn(c->st, c->file, yn_get(spec, "internalTrafficPolicy")->line,
				"spec.internalTrafficPolicy", "%s is not honoured: every ready "
				"endpoint of the cluster is used", v);
		const struct yn *pn = yn_get(spec, "publishNotReadyAddresses");

		if (pn && pn->type == YN_SCALAR && !strcmp(pn->s, "true"))
			md_warn(c->st, c->file, pn->line, "spec.publishNotReadyAddresses",
				"not honoured: only running pods are endpoints");
	}
	/* a Service selector is a plain map; empty means "endpoints are
	 * managed elsewhere", i.e. none computed */
	s->selector.present = s->selector.match_labels.n > 0;
	ports = yn_get(spec, "ports");
	if (!ports && !s->headless)
		return dc_fail(c, spec, "ports", "is required");
	if (ports) {
		size_t o2 = dc_push(c, "ports");

		if (dc_seq(c, ports, NULL))
			return -EINVAL;
		if (!ports->n && !s->headless)
			return dc_fail(c, ports, NULL, "must have at least one port");
		if (dc_service_ports(c, ports, s))
			return -EINVAL;
		dc_pop(c, o2);
	}
	dc_pop(c, old);
	return 0;
}

/* ---- cluster, namespace, configmap ------------------------------------------------ */

static int dc_cluster(struct dctx *c, const struct yn *root)
{
	struct md_cluster *cl = &c->st->cluster;
	const struct yn *md = yn_get(root, "metadata"), *spec = yn_get(root, "spec"), *nodes;
	size_t old;

	if (cl->present)
		return dc_fail(c, root, "kind", "a second Cluster object (the first is at %s:%d)",
			       cl->file, cl->line);
	cl->present = true;
	cl->file = (char *)c->file;
	cl->line = root->line;
	cl->name = "zerohop";
	if (md) {
		old = dc_push(c, "metadata");
		if (dc_map(c, md, NULL) || dc_str(c, md, "name", false, &cl->name))
			return -EINVAL;
		if (!cl->name)
			cl->name = "zerohop";
		dc_pop(c, old);
	}
	if (inet_pton(AF_INET, "10.244.0.0", &cl->pod_cidr) != 1 ||
	    inet_pton(AF_INET, "10.96.0.0", &cl->svc_cidr) != 1)
		return -EINVAL;
	cl->pod_cidr_len = 16;
	cl->svc_cidr_len = 12;
	cl->primary = MD_FAM_V4;
	if (!spec)
		return 0;
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) || md_decode_cluster_cidrs(c, spec, cl))
		return -EINVAL;
	nodes = yn_get(spec, "nodes");
	if (nodes) {
		size_t o2 = dc_push(c, "nodes"), base = c->plen;

		if (dc_seq(c, nodes, NULL))
			return -EINVAL;
		if (!nodes->n)
			return dc_fail(c, nodes, NULL, "must list at least one node");
		cl->nodes = ar_alloc(c->ar, (size_t)nodes->n * sizeof(*cl->nodes));
		for (int i = 0; i < nodes->n; i++) {
			const struct yn *n = nodes->items[i];
			const char *why;

			dc_push_idx(c, i);
			if (n->type == YN_SCALAR) {
				cl->nodes[i].name = (char *)n->s;
			} else if (n->type != YN_MAP) {
				return dc_fail(c, n, NULL, "must be a node name or {name: NAME}");
			} else {
				if (dc_str(c, n, "name", true, &cl->nodes[i].name))
					return -EINVAL;
				n = yn_get(n, "name");
			}
			if ((why = md_check_dns_label(cl->nodes[i].name)))
				return dc_fail(c, n, NULL, "invalid node name \"%s\": %s",
					       cl->nodes[i].name, why);
			if (strlen(cl->nodes[i].name) > 12)
				return dc_fail(c, n, NULL, "node name \"%s\" longer than 12 characters "
					       "(network interface names are short)", cl->nodes[i].name);
			for (int j = 0; j < i; j++)
				if (!strcmp(cl->nodes[j].name, cl->nodes[i].name))
					return dc_fail(c, n, NULL, "duplicate node name \"%s\"",
						       cl->nodes[i].name);
			dc_pop(c, base);
		}
		cl->n_nodes = nodes->n;
		dc_pop(c, o2);
	}
	dc_pop(c, old);
	return 0;
}

static int dc_configmap(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_configmap *cm = zh_grow((void **)&c->st->configmaps, &c->st->n_configmaps,
					  &pv->cap_cm, sizeof(*cm));

	cm->meta = *meta;
	return dc_labels(c, root, "data", false, &cm->data);
}

/* ---- dispatch --------------------------------------------------------------------- */

struct kind_api {
	const char *kind;
	const char *api;	/* exact apiVersion, or a prefix ending in '*' */
	enum md_kind k;
};

static const struct kind_api kinds[] = {
	{ "Cluster", "zerohop.io/v1alpha1", MD_K_CLUSTER },
	{ "Namespace", "v1", MD_K_NAMESPACE },
	{ "ConfigMap", "v1", MD_K_CONFIGMAP },
	{ "Pod", "v1", MD_K_POD },
	{ "Deployment", "apps/v1", MD_K_DEPLOYMENT },
	{ "Service", "v1", MD_K_SERVICE },
	{ "TrafficSplit", "split.smi-spec.io/v1alpha1", MD_K_TRAFFICSPLIT },
	{ "TrafficSplit", "split.smi-spec.io/v1alpha2", MD_K_TRAFFICSPLIT },
	{ "TrafficSplit", "split.smi-spec.io/v1alpha3", MD_K_TRAFFICSPLIT },
	{ "TrafficSplit", "split.smi-spec.io/v1alpha4", MD_K_TRAFFICSPLIT },
	{ "HTTPRoute", "gateway.networking.k8s.io/v1", MD_K_HTTPROUTE },
	{ "HTTPRoute", "gateway.networking.k8s.io/v1beta1", MD_K_HTTPROUTE },
	{ "GRPCRoute", "gateway.networking.k8s.io/v1", MD_K_GRPCROUTE },
	{ "NetworkPolicy", "networking.k8s.io/v1", MD_K_NETPOL },
	{ "ServiceAccount", "v1", MD_K_SERVICEACCOUNT },
	{ "HTTPRouteGroup", "specs.smi-spec.io/v1alpha2", MD_K_ROUTEGROUP },
	{ "HTTPRouteGroup", "specs.smi-spec.io/v1alpha3", MD_K_ROUTEGROUP },
	{ "HTTPRouteGroup", "specs.smi-spec.io/v1alpha4", MD_K_ROUTEGROUP },
	{ "PeerAuthentication", "security.istio.io/v1", MD_K_PEERAUTH },
	{ "PeerAuthentication", "security.istio.io/v1beta1", MD_K_PEERAUTH },
	{ "AuthorizationPolicy", "security.istio.io/v1", MD_K_AUTHZPOL },
	{ "AuthorizationPolicy", "security.istio.io/v1beta1", MD_K_AUTHZPOL },
};

/* ---- kinds that are not acted on ----------------------------------------------------
 *
 * An object of a kind zerohop does not model is skipped (never stored) and
 * reported, unless the input is strict. In the API groups Kubernetes itself
 * defines (core "v1", groups without a dot, *.k8s.io) only the kinds listed
 * here are skipped: an unknown kind there is most likely a typo, so it stays
 * an error. Kinds whose meaning a user would expect zerohop to enforce, but
 * which it cannot, are refused with the reason (reason starting with '!').
 * Any other group (Istio, Linkerd, cert-manager, ...) is skipped. */
struct kind_skip {
	const char *group;
	const char *kind;
	const char *reason;	/* NULL = "no data-plane meaning for zerohop" */
};

static const struct kind_skip skips[] = {
	{ "", "Secret", NULL },
	{ "", "Endpoints", "computed by zerohop from Services and pods" },
	{ "", "PersistentVolumeClaim", NULL },
	{ "", "PersistentVolume", NULL },
	{ "", "LimitRange", NULL },
	{ "", "ResourceQuota", NULL },
	{ "", "Event", NULL },
	{ "", "ReplicationController", "workload kind not run by the zerohop lab (use a Deployment)" },
	{ "apps", "StatefulSet", "workload kind not run by the zerohop lab (use a Deployment)" },
	{ "apps", "DaemonSet", "workload kind not run by the zerohop lab (use a Deployment)" },
	{ "apps", "ReplicaSet", "workload kind not run by the zerohop lab (use a Deployment)" },
	{ "batch", "Job", "workload kind not run by the zerohop lab" },
	{ "batch", "CronJob", "workload kind not run by the zerohop lab" },
	{ "policy", "PodDisruptionBudget", NULL },
	{ "policy", "PodSecurityPolicy", NULL },
	{ "autoscaling", "HorizontalPodAutoscaler", NULL },
	{ "rbac.authorization.k8s.io", "Role", NULL },
	{ "rbac.authorization.k8s.io", "ClusterRole", NULL },
	{ "rbac.authorization.k8s.io", "RoleBinding", NULL },
	{ "rbac.authorization.k8s.io", "ClusterRoleBinding", NULL },
	{ "networking.k8s.io", "Ingress", "no ingress gateway in zerohop" },
	{ "networking.k8s.io", "IngressClass", "no ingress gateway in zerohop" },
	{ "apiextensions.k8s.io", "CustomResourceDefinition", NULL },
	{ "storage.k8s.io", "StorageClass", NULL },
	{ "scheduling.k8s.io", "PriorityClass", NULL },
	{ "coordination.k8s.io", "Lease", NULL },
	{ "discovery.k8s.io", "EndpointSlice", "computed by zerohop from Services and pods" },
	{ "admissionregistration.k8s.io", "ValidatingWebhookConfiguration", NULL },
	{ "admissionregistration.k8s.io", "MutatingWebhookConfiguration", NULL },
	{ "gateway.networking.k8s.io", "Gateway", "no ingress gateway in zerohop" },
	{ "gateway.networking.k8s.io", "GatewayClass", "no ingress gateway in zerohop" },
	{ "gateway.networking.k8s.io", "ReferenceGrant", NULL },
	{ "gateway.networking.k8s.io", "TCPRoute",
	  "!not supported: its connections would not be routed as written" },
	{ "gateway.networking.k8s.io", "TLSRoute",
	  "!not supported: its connections would not be routed as written" },
	{ "gateway.networking.k8s.io", "UDPRoute",
	  "!not supported: its datagrams would not be routed as written" },
	{ "split.smi-spec.io", "", "!unknown kind of split.smi-spec.io (TrafficSplit)" },
	/* other projects' access policies: skipped like the rest, but the
	 * reason says the traffic they would deny is not denied */
	{ "access.smi-spec.io", "", "access policy not enforced by zerohop (use NetworkPolicy)" },
	{ "policy.linkerd.io", "AuthorizationPolicy",
	  "access policy not enforced by zerohop (use NetworkPolicy)" },
	{ "policy.linkerd.io", "ServerAuthorization",
	  "access policy not enforced by zerohop (use NetworkPolicy)" },
};

static bool builtin_group(const char *g)
{
	size_t l = strlen(g);

	return !*g || !strchr(g, '.') || (l > 7 && !strcmp(g + l - 7, ".k8s.io"));
}

/* Kind unknown to the model: record it as ignored (0), or fail. */
static int skip_obj(struct dctx *c, const struct yn *root, const char *api, const char *kind)
{
	struct md_priv *pv = md_priv(c->st);
	const char *slash = strrchr(api, '/'), *reason = NULL;
	const struct yn *md = yn_get(root, "metadata");
	char group[128];
	struct md_ignored *ig;
	char *name = NULL, *ns = NULL;
	bool listed = false;

	snprintf(group, sizeof(group), "%.*s", slash ? (int)(slash - api) : 0, api);
	for (size_t i = 0; i < sizeof(skips) / sizeof(skips[0]); i++)
		if (!strcmp(skips[i].group, group) &&
		    (!*skips[i].kind || !strcmp(skips[i].kind, kind))) {
			listed = true;
			reason = skips[i].reason;
			break;
		}
	if (!listed && builtin_group(group))
		return dc_fail(c, yn_get(root, "kind"), "kind",
			       "unknown kind \"%s\" (Cluster, Namespace, ConfigMap, Pod, Deployment, "
			       "Service, ServiceAccount, TrafficSplit, HTTPRoute, HTTPRouteGroup, "
			       "NetworkPolicy; %s kinds with no data-plane meaning are skipped)",
			       kind, *group ? group : "v1");
	if (reason && reason[0] == '!')
		return dc_fail(c, yn_get(root, "kind"), "kind", "%s (%s): %s", kind,
			       api, reason + 1);
	if (!md || dc_map(c, md, "metadata"))
		return md ? -EINVAL : dc_fail(c, root, "metadata.name", "is required");
	{
		size_t old = dc_push(c, "metadata");

		if (dc_str(c, md, "name", true, &name) || dc_str(c, md, "namespace", false, &ns))
			return -EINVAL;
		if (ns && pv->default_ns && strcmp(ns, pv->default_ns))
			return dc_fail(c, yn_get(md, "namespace"), "namespace",
				       "the object's namespace \"%s\" does not match the namespace "
				       "\"%s\" given with -n", ns, pv->default_ns);
		dc_pop(c, old);
	}
	if (pv->strict)
		return dc_fail(c, yn_get(root, "kind"), "kind",
			       "%s (%s) is not acted on by zerohop (%s); refused with --strict", kind,
			       api, reason ? reason : "no data-plane meaning for zerohop");
	ig = zh_grow((void **)&c->st->ignored, &c->st->n_ignored, &pv->cap_ign, sizeof(*ig));
	ig->kind = (char *)kind;
	ig->group = ar_strdup(c->ar, group);
	ig->ns = ns ? ns : (char *)pv->default_ns;
	ig->name = name;
	ig->file = (char *)c->file;
	ig->line = root->line;
	ig->reason = reason ? reason : "no data-plane meaning for zerohop";
	return 0;
}

static int decode_obj(struct dctx *c, const struct yn *root);

static int decode_list(struct dctx *c, const struct yn *root)
{
	const struct yn *items = yn_get(root, "items");
	size_t old;

	if (!items)
		return 0;
	old = dc_push(c, "items");
	size_t base = c->plen;
	if (dc_seq(c, items, NULL))
		return -EINVAL;
	for (int i = 0; i < items->n; i++) {
		dc_push_idx(c, i);
		if (decode_obj(c, items->items[i]))
			return -EINVAL;
		dc_pop(c, base);
	}
	dc_pop(c, old);
	return 0;
}

static int decode_obj(struct dctx *c, const struct yn *root)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_meta meta = { 0 };
	struct md_obj *o;
	char *api, *kind;
	bool known_kind = false, has_status = false;
	enum md_kind k = MD_K__COUNT;
	int r = 0;

	if (root->type != YN_MAP)
		return dc_fail(c, root, NULL, "an object must be a mapping");
	if (dc_str(c, root, "apiVersion", true, &api) || dc_str(c, root, "kind", true, &kind))
		return -EINVAL;
	if (!strcmp(kind, "List") && !strcmp(api, "v1"))
		return decode_list(c, root);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(kinds[i].kind, kind))
			continue;
		known_kind = true;
		if (!strcmp(kinds[i].api, api)) {
			k = kinds[i].k;
			break;
		}
	}
	if (!known_kind)
		return skip_obj(c, root, api, kind);
	if (k == MD_K__COUNT)
		return dc_fail(c, yn_get(root, "apiVersion"), "apiVersion",
			       "unsupported apiVersion \"%s\" for kind %s", api, kind);
	if (!pv->ident_only && md_check_fields(c, root, k))
		return -EINVAL;
	if (k == MD_K_CLUSTER && pv->ident_only) {
		meta.name = "cluster";
	} else if (k == MD_K_CLUSTER) {
		r = dc_cluster(c, root);
		meta.name = c->st->cluster.name;
	} else {
		r = dc_meta(c, root, md_kind_namespaced(k), &meta);
	}
	if (r)
		return r;
	if (pv->ident_only)
		goto record;
	switch (k) {
	case MD_K_CLUSTER:
		break;
	case MD_K_NAMESPACE: {
		struct md_namespace *ns = zh_grow((void **)&c->st->namespaces,
						  &c->st->n_namespaces, &pv->cap_ns, sizeof(*ns));

		ns->meta = meta;
		break;
	}
	case MD_K_CONFIGMAP:
		r = dc_configmap(c, root, &meta);
		break;
	case MD_K_POD:
		r = dc_pod(c, root, &meta, &has_status);
		break;
	case MD_K_DEPLOYMENT:
		r = dc_deployment(c, root, &meta);
		break;
	case MD_K_SERVICE:
		r = dc_service(c, root, &meta);
		break;
	case MD_K_TRAFFICSPLIT:
		r = md_decode_split(c, root, api, &meta);
		break;
	case MD_K_HTTPROUTE:
		r = md_decode_route(c, root, &meta);
		break;
	case MD_K_GRPCROUTE:
		r = md_decode_grpcroute(c, root, &meta);
		break;
	case MD_K_SERVICEACCOUNT: {
		struct md_serviceaccount *sa = zh_grow((void **)&c->st->serviceaccounts,
						       &c->st->n_serviceaccounts, &pv->cap_sa,
						       sizeof(*sa));

		sa->meta = meta;
		break;
	}
	case MD_K_ROUTEGROUP:
		r = md_decode_routegroup(c, root, &meta);
		break;
	case MD_K_PEERAUTH:
		r = md_decode_peerauth(c, root, &meta);
		break;
	case MD_K_AUTHZPOL:
		r = md_decode_authzpol(c, root, &meta);
		break;
	default:
		r = md_decode_netpol(c, root, &meta);
		break;
	}
	if (r)
		return r;
record:
	o = zh_grow((void **)&pv->objs, &pv->n_objs, &pv->cap_objs, sizeof(*o));
	o->kind = k;
	o->ns = meta.ns;
	o->name = meta.name;
	o->file = c->file;
	o->line = root->line;
	o->node = root;
	o->has_status = has_status;
	return 0;
}

int md_decode_doc(struct md_state *st, const char *file, const struct yn *root, struct md_err *err)
{
	struct dctx c = { .st = st, .ar = &md_priv(st)->ar, .file = file, .err = err };

	return decode_obj(&c, root);
}
