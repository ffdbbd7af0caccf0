/* ss_events.c — the shared object-event layer (ss_int.h, invariants E1-E5):
 * every state source turns its store into put/delete events; this file
 * keeps the parsed objects by key and turns a batch of events into the
 * model, patching the caller's state in place when the model allows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/log.h"
#include "ss_int.h"

static void obj_free(struct sev_obj *o)
{
	free(o->key);
	md_file_put(o->f);
	free(o->err);
}

static void op_free(struct sev_op *o)
{
	free(o->key);
	md_file_put(o->f);
	free(o->err);
}

static void chg_clear(struct sev_set *s)
{
	for (int i = 0; i < s->n_chg; i++) {
		md_file_put(s->chg[i].old_f);
		md_file_put(s->chg[i].new_f);
	}
	s->n_chg = 0;
}

/* Record old -> new (references handed over). */
static void chg_add(struct sev_set *s, struct md_file *old_f, struct md_file *new_f)
{
	if (s->n_chg == s->cap_chg) {
		s->cap_chg = s->cap_chg ? 2 * s->cap_chg : 16;
		s->chg = zh_realloc(s->chg, (size_t)s->cap_chg * sizeof(*s->chg));
	}
	s->chg[s->n_chg].old_f = old_f;
	s->chg[s->n_chg++].new_f = new_f;
}

uint64_t sev_begin(struct sev_src *src)
{
	for (int k = 0; k < 2; k++) {
		chg_clear(&src->set[k]);
		src->set[k].reset = src->set[k].full = false;
	}
	return src->epoch++;
}

void sev_reset(struct sev_set *s)
{
	/* events queued before the relist are superseded by it */
	for (int i = 0; i < s->n_ops; i++)
		op_free(&s->ops[i]);
	s->n_ops = 0;
	s->reset = true;
}

void sev_discard(struct sev_set *s)
{
	for (int i = 0; i < s->n_ops; i++)
		op_free(&s->ops[i]);
	s->n_ops = 0;
	s->reset = false;
}

static struct sev_op *op_add(struct sev_set *s, const char *key, uint64_t rev)
{
	struct sev_op *o;

	if (s->n_ops == s->cap_ops) {
		s->cap_ops = s->cap_ops ? 2 * s->cap_ops : 64;
		s->ops = zh_realloc(s->ops, (size_t)s->cap_ops * sizeof(*s->ops));
	}
	o = &s->ops[s->n_ops];
	memset(o, 0, sizeof(*o));
	o->key = zh_strdup(key);
	o->rev = rev;
	o->seq = s->n_ops++;
	return o;
}

void sev_put(struct sev_set *s, const char *key, struct md_file *f, const struct md_err *why,
	     uint64_t rev)
{
	struct sev_op *o = op_add(s, key, rev);

	o->f = f;
	if (!f) {
		o->err = zh_calloc(1, sizeof(*o->err));
		if (why)
			*o->err = *why;
	}
}

void sev_del(struct sev_set *s, const char *key, uint64_t rev)
{
	op_add(s, key, rev)->del = true;
}

static int cmp_op(const void *a, const void *b)
{
	const struct sev_op *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Merge the sorted old table with the sorted ops (last op of a key wins,
 * E3); with reset, old keys without an op are gone. */
void sev_commit(struct sev_set *s)
{
	struct sev_obj *nv;
	int i = 0, j = 0, n = 0;

	if (s->n_ops)
		qsort(s->ops, (size_t)s->n_ops, sizeof(*s->ops), cmp_op);
	nv = zh_calloc((size_t)(s->n + s->n_ops) + 1, sizeof(*nv));
	while (i < s->n || j < s->n_ops) {
		int c = i == s->n ? 1 : j == s->n_ops ? -1 : strcmp(s->v[i].key, s->ops[j].key);
		struct sev_op *op;

		if (c < 0) {	/* no event for this key */
			if (s->reset) {
				chg_add(s, s->v[i].f, NULL);
				s->v[i].f = NULL;
				obj_free(&s->v[i]);
			} else {
				nv[n++] = s->v[i];
			}
			i++;
			continue;
		}
		while (j + 1 < s->n_ops && !strcmp(s->ops[j + 1].key, s->ops[j].key))
			op_free(&s->ops[j++]);	/* superseded within the batch (E3) */
		op = &s->ops[j++];
		if (op->del) {
			if (c == 0) {
				chg_add(s, s->v[i].f, NULL);
				s->v[i].f = NULL;
				obj_free(&s->v[i]);
			}
		} else {
			struct sev_obj *o = &nv[n++];

			o->key = op->key;
			o->f = op->f;
			o->err = op->err;
			o->rev = op->rev;
			op->key = NULL;
			op->f = NULL;
			op->err = NULL;
			if (c == 0) {
				if (s->v[i].f == o->f)
					md_file_put(s->v[i].f);	/* same parse: unchanged */
				else
					chg_add(s, s->v[i].f, md_file_get(o->f));
				s->v[i].f = NULL;
				obj_free(&s->v[i]);
			} else {
				chg_add(s, NULL, md_file_get(o->f));
			}
		}
		op_free(op);
		if (c == 0)
			i++;
	}
	free(s->v);
	s->v = nv;
	s->n = n;
	s->n_ops = 0;
}

const struct sev_obj *sev_find(const struct sev_set *s, const char *key)
{
	int lo = 0, hi = s->n - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(s->v[mid].key, key);

		if (!c)
			return &s->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

void sev_src_clear(struct sev_src *src)
{
	for (int k = 0; k < 2; k++) {
		struct sev_set *s = &src->set[k];

		chg_clear(s);
		free(s->chg);
		for (int i = 0; i < s->n; i++)
			obj_free(&s->v[i]);
		free(s->v);
		for (int i = 0; i < s->n_ops; i++)
			op_free(&s->ops[i]);
		free(s->ops);
		memset(s, 0, sizeof(*s));
	}
}

/* Every object of s in key order (E1); the first unparsed one fails (E2). */
static int set_build(const struct sev_set *s, struct md_state *st, struct md_err *err)
{
	int ret = 0;

	for (int i = 0; !ret && i < s->n; i++) {
		if (!s->v[i].f) {
			*err = *s->v[i].err;
			return -EINVAL;
		}
		ret = md_state_add_parsed(st, s->v[i].f, err);
	}
	return ret;
}

/* A finished state of sets k0..k1. */
static int build(struct sev_src *src, int k0, int k1, struct md_state **out, struct md_err *err)
{
	struct md_state *st = md_state_new();
	int ret = 0;

	for (int k = k0; !ret && k <= k1; k++)
		ret = set_build(&src->set[k], st, err);
	if (!ret)
		ret = md_state_finish(st, err);
	if (ret) {
		md_state_free(st);
		return ret;
	}
	*out = st;
	return 0;
}

int sev_load(struct sev_src *src, struct md_state **out, struct md_err *err)
{
	return build(src, 0, 1, out, err);
}

int sev_load_set(struct sev_src *src, int k, struct md_state **out, struct md_err *err)
{
	return build(src, k, k, out, err);
}

/* The changes of the last commit of s as patches: (slot, new file) pairs
 * when every change is patchable in place; else false. */
struct sev_patch {
	int *idx;
	struct md_file **nf;
	int n;
};

static bool patch_list(const struct sev_set *s, const struct md_state *st, struct sev_patch *p,
		       int (*patchable)(const struct md_state *, const struct md_file *,
					const struct md_file *))
{
	p->idx = zh_calloc((size_t)s->n_chg + 1, sizeof(*p->idx));
	p->nf = zh_calloc((size_t)s->n_chg + 1, sizeof(*p->nf));
	p->n = 0;
	if (s->reset || s->full)
		return false;
	for (int i = 0; i < s->n_chg; i++) {
		int k = patchable(st, s->chg[i].old_f, s->chg[i].new_f);

		/* one entry per key, but an object moved between keys could
		 * show twice: refuse */
		for (int j = 0; k >= 0 && j < p->n; j++)
			if (p->idx[j] == k)
				k = -1;
		if (k < 0)
			return false;
		p->idx[p->n] = k;
		p->nf[p->n++] = s->chg[i].new_f;
	}
	return true;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int sev_load_delta(struct sev_src *src, uint64_t base, struct md_state **io, uint64_t *token,
		   struct ss_delta *d, struct md_err *err)
{
	struct sev_patch pp = {}, sp = {};
	struct md_state *st = NULL;
	int ret = 0;

	memset(d, 0, sizeof(*d));
	if (*io && *token == base && patch_list(&src->set[0], *io, &sp, md_svc_patchable) &&
	    patch_list(&src->set[1], *io, &pp, md_pod_patchable)) {
		int *aff = NULL, n_aff = 0, u = 0;

		/* Services first: the pod patch then recomputes, with the new
		 * selectors, every Service selecting a patched pod */
		md_state_patch_svcs(*io, sp.nf, sp.idx, sp.n);
		md_state_patch_pods(*io, pp.nf, pp.idx, pp.n, &aff, &n_aff, &d->pol_relevant);
		d->svcs = zh_calloc((size_t)(sp.n + n_aff) + 1, sizeof(*d->svcs));
		memcpy(d->svcs, sp.idx, (size_t)sp.n * sizeof(*d->svcs));
		if (n_aff)
			memcpy(d->svcs + sp.n, aff, (size_t)n_aff * sizeof(*d->svcs));
		d->n_svcs = sp.n + n_aff;
		qsort(d->svcs, (size_t)d->n_svcs, sizeof(*d->svcs), cmp_int);
		for (int i = 0; i < d->n_svcs; i++)
			if (!u || d->svcs[u - 1] != d->svcs[i])
				d->svcs[u++] = d->svcs[i];
		d->n_svcs = u;
		free(aff);
		d->patched = true;
		d->n_pods = pp.n;
		d->n_svc_objs = sp.n;
		*token = src->epoch;
		goto out;
	}
	d->pol_relevant = true;
	ret = sev_load(src, &st, err);
	if (ret)
		goto out;
	md_state_free(*io);
	*io = st;
	*token = src->epoch;
out:
	free(pp.idx);
	free(pp.nf);
	free(sp.idx);
	free(sp.nf);
	return ret;
}
