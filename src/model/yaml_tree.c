/* yaml_tree.c — libyaml events -> a small document tree with line numbers,
 * and the way back (emitter), for the state source's one-object files.
 *
 * Design notes:
 * 1. Every node records the 1-based line of its first character, so every
 *    decoding error can name a line.
 * 2. Scalars keep their style: a quoted "80" stays a string, a plain 80 is an
 *    integer, as YAML (and JSON, which is YAML) say.
 * 3. Aliases point at the anchored node (the tree is a DAG); the emitter
 *    expands them. Mapping keys must be scalars and unique per mapping —
 *    a duplicate key is an error, not a silent overwrite.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "zerohop/log.h"
#include "md_int.h"

#define YN_MAX_DEPTH 64

struct frame {
	struct yn *node;
	struct yn **kids;	/* seq: items; map: key, value, key, value ... */
	int n, cap;
};

struct anchor {
	char *name;
	struct yn *node;
};

struct pstate {
	struct md_arena *ar;		/* nodes */
	struct md_arena *strs;		/* scalar strings */
	struct md_arena scratch;	/* key nodes: copied into pairs, then dropped */
	struct frame stack[YN_MAX_DEPTH];
	int depth;
	struct anchor *anchors;
	int n_anchors, cap_anchors;
	struct yn *root;		/* of the current document */
	int doc_line;
	yn_doc_fn fn;
	void *ctx;
	struct md_err *err;
	const char *name;
};

static int perr(struct pstate *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int perr(struct pstate *p, int line, const char *fmt, ...)
{
	va_list ap;

	snprintf(p->err->file, sizeof(p->err->file), "%s", p->name);
	p->err->line = line;
	p->err->field[0] = 0;
	va_start(ap, fmt);
	vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void kid_push(struct frame *f, struct yn *n)
{
	zh_reserve((void **)&f->kids, &f->cap, f->n + 1, sizeof(*f->kids));
	f->kids[f->n++] = n;
}

static void anchor_add(struct pstate *p, const char *name, struct yn *n)
{
	zh_reserve((void **)&p->anchors, &p->cap_anchors, p->n_anchors + 1, sizeof(*p->anchors));
	p->anchors[p->n_anchors].name = zh_strdup(name);
	p->anchors[p->n_anchors].node = n;
	p->n_anchors++;
}

static void anchors_reset(struct pstate *p)
{
	for (int i = 0; i < p->n_anchors; i++)
		free(p->anchors[i].name);
	p->n_anchors = 0;
}

/* Attach a finished node to its parent (or make it the document root). */
static int attach(struct pstate *p, struct yn *n)
{
	struct frame *f;

	if (p->depth == 0) {
		p->root = n;
		return 0;
	}
	f = &p->stack[p->depth - 1];
	if (f->node->type == YN_MAP && f->n % 2 == 0 && n->type != YN_SCALAR)
		return perr(p, n->line, "mapping keys must be scalars");
	kid_push(f, n);
	return 0;
}

static int open_frame(struct pstate *p, struct yn *n)
{
	struct frame *f;

	if (p->depth == YN_MAX_DEPTH)
		return perr(p, n->line, "document nested too deeply");
	f = &p->stack[p->depth++];
	f->node = n;
	f->n = 0;
	return 0;
}

static int close_frame(struct pstate *p)
{
	struct frame *f = &p->stack[--p->depth];
	struct yn *n = f->node;

	if (n->type == YN_SEQ) {
		n->n = f->n;
		n->items = ar_alloc(p->ar, (size_t)f->n * sizeof(*n->items));
		if (f->n)
			memcpy(n->items, f->kids, (size_t)f->n * sizeof(*n->items));
	} else {
		n->n = f->n / 2;
		n->pairs = ar_alloc(p->ar, (size_t)n->n * sizeof(*n->pairs));
		for (int i = 0; i < n->n; i++) {
			const struct yn *k = f->kids[2 * i];

			n->pairs[i].key = k->s;
			n->pairs[i].key_line = k->line;
			n->pairs[i].key_style = k->style;
			n->pairs[i].val = f->kids[2 * i + 1];
			/* duplicate keys: quadratic, mappings are small */
			for (int j = 0; j < i; j++)
				if (!strcmp(n->pairs[j].key, k->s))
					return perr(p, k->line, "duplicate mapping key \"%s\"", k->s);
		}
	}
	return attach(p, n);
}

static struct yn *new_node(struct pstate *p, enum yn_type t, const yaml_mark_t *m, bool key)
{
	struct yn *n = ar_alloc(key ? &p->scratch : p->ar, sizeof(*n));

	n->type = t;
	n->line = (int)m->line + 1;
	return n;
}

static int on_event(struct pstate *p, yaml_event_t *ev)
{
	struct yn *n;
	const char *anchor = NULL;

	switch (ev->type) {
	case YAML_DOCUMENT_START_EVENT:
		p->root = NULL;
		p->doc_line = (int)ev->start_mark.line + 1;
		anchors_reset(p);
		return 0;
	case YAML_DOCUMENT_END_EVENT:
		anchors_reset(p);	/* they point into the tree the callback may drop */
		ar_free(&p->scratch);
		return p->fn(p->ctx, p->root, p->doc_line);
	case YAML_SCALAR_EVENT: {
		const struct frame *top = p->depth ? &p->stack[p->depth - 1] : NULL;
		/* a mapping key is copied into its pair: its node can be dropped,
		 * unless an alias may point at it later */
		bool key = top && top->node->type == YN_MAP && top->n % 2 == 0 &&
			   !ev->data.scalar.anchor;

		if (memchr(ev->data.scalar.value, 0, ev->data.scalar.length))
			return perr(p, (int)ev->start_mark.line + 1,
				    "NUL characters in strings are not supported");
		n = new_node(p, YN_SCALAR, &ev->start_mark, key);
		n->s = ar_strndup(p->strs, (const char *)ev->data.scalar.value, ev->data.scalar.length);
		n->style = (uint8_t)ev->data.scalar.style;
		anchor = (const char *)ev->data.scalar.anchor;
		if (anchor)
			anchor_add(p, anchor, n);
		return attach(p, n);
	}
	case YAML_ALIAS_EVENT:
		for (int i = p->n_anchors - 1; i >= 0; i--)
			if (!strcmp(p->anchors[i].name, (const char *)ev->data.alias.anchor))
				return attach(p, p->anchors[i].node);
		return perr(p, (int)ev->start_mark.line + 1, "unknown alias *%s",
			    (const char *)ev->data.alias.anchor);
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		if (ev->type == YAML_SEQUENCE_START_EVENT) {
			n = new_node(p, YN_SEQ, &ev->start_mark, false);
			anchor = (const char *)ev->data.sequence_start.anchor;
		} else {
			n = new_node(p, YN_MAP, &ev->start_mark, false);
			anchor = (const char *)ev->data.mapping_start.anchor;
		}
		if (anchor)
			anchor_add(p, anchor, n);
		return open_frame(p, n);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		return close_frame(p);
	default:
		return 0;
	}
}

int yn_parse(struct md_arena *strs, struct md_arena *nodes, const char *name, const char *buf,
	     size_t len, yn_doc_fn fn, void *ctx, struct md_err *err)
{
	struct pstate p = { .ar = nodes, .strs = strs, .err = err, .name = name, .fn = fn,
			    .ctx = ctx };
	yaml_parser_t parser;
	yaml_event_t ev;
	int ret = yn_parse_json(strs, nodes, buf, len, fn, ctx), done = 0;

	if (ret != YN_JSON_NOT)	/* json_tree.c J2 */
		return ret;
	ret = 0;
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			char where[128] = "";

			if (parser.context)
				snprintf(where, sizeof(where), " (%s)", parser.context);
			ret = perr(&p, (int)parser.problem_mark.line + 1, "YAML syntax error: %s%s",
				   parser.problem ? parser.problem : "malformed", where);
			break;
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		ret = on_event(&p, &ev);
		yaml_event_delete(&ev);
		if (ret)
			break;
	}
	yaml_parser_delete(&parser);
	ar_free(&p.scratch);
	anchors_reset(&p);
	free(p.anchors);
	for (int i = 0; i < YN_MAX_DEPTH; i++)
		free(p.stack[i].kids);
	return ret;
}

bool yn_is_null(const struct yn *n)
{
	if (!n)
		return true;
	if (n->type != YN_SCALAR || n->style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return n->s[0] == 0 || !strcmp(n->s, "~") || !strcmp(n->s, "null") ||
	       !strcmp(n->s, "Null") || !strcmp(n->s, "NULL");
}

const struct yn *yn_get(const struct yn *map, const char *key)
{
	if (!map || map->type != YN_MAP)
		return NULL;
	for (int i = 0; i < map->n; i++)
		if (!strcmp(map->pairs[i].key, key))
			return yn_is_null(map->pairs[i].val) ? NULL : map->pairs[i].val;
	return NULL;
}

/* ---- emitter ---------------------------------------------------------------- */

struct obuf {
	char *p;
	size_t len, cap;
};

static int obuf_write(void *data, unsigned char *buf, size_t size)
{
	struct obuf *o = data;

	if (o->len + size + 1 > o->cap) {
		o->cap = (o->len + size + 1) * 2;
		o->p = zh_realloc(o->p, o->cap);
	}
	memcpy(o->p + o->len, buf, size);
	o->len += size;
	o->p[o->len] = 0;
	return 1;
}

static int emit_scalar(yaml_emitter_t *em, const char *s, uint8_t style)
{
	bool plain = style == YAML_PLAIN_SCALAR_STYLE;
	yaml_event_t ev;
	int ok;

	/* quoted_implicit always: a plain string libyaml must quote (one read
	 * from JSON, json_tree.c J1) is still a string, with no "!" tag */
	ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), plain,
					  1, plain ? YAML_PLAIN_SCALAR_STYLE : style);
	return ok && yaml_emitter_emit(em, &ev) ? 0 : -EINVAL;
}

static int emit_node(yaml_emitter_t *em, const struct yn *n, int depth)
{
	yaml_event_t ev;
	int ok;

	if (depth > YN_MAX_DEPTH)
		return -EINVAL;
	switch (n->type) {
	case YN_SCALAR:
		return emit_scalar(em, n->s, n->style);
	case YN_SEQ:
		ok = yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
		if (!ok || !yaml_emitter_emit(em, &ev))
			return -EINVAL;
		for (int i = 0; i < n->n; i++)
			if (emit_node(em, n->items[i], depth + 1))
				return -EINVAL;
		ok = yaml_sequence_end_event_initialize(&ev);
		return ok && yaml_emitter_emit(em, &ev) ? 0 : -EINVAL;
	default:
		ok = yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
		if (!ok || !yaml_emitter_emit(em, &ev))
			return -EINVAL;
		for (int i = 0; i < n->n; i++)
			if (emit_scalar(em, n->pairs[i].key, n->pairs[i].key_style) ||
			    emit_node(em, n->pairs[i].val, depth + 1))
				return -EINVAL;
		ok = yaml_mapping_end_event_initialize(&ev);
		return ok && yaml_emitter_emit(em, &ev) ? 0 : -EINVAL;
	}
}

int yn_emit(const struct yn *root, char **out, size_t *len)
{
	struct obuf o = { 0 };
	yaml_emitter_t em;
	yaml_event_t ev;
	int ret = -EINVAL;

	if (!yaml_emitter_initialize(&em))
		return -ENOMEM;
	yaml_emitter_set_output(&em, obuf_write, &o);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
	    !yaml_emitter_emit(&em, &ev))
		goto out;
	if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
	    !yaml_emitter_emit(&em, &ev))
		goto out;
	if (emit_node(&em, root, 0))
		goto out;
	if (!yaml_document_end_event_initialize(&ev, 1) || !yaml_emitter_emit(&em, &ev))
		goto out;
	if (!yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(&em, &ev))
		goto out;
	if (!yaml_emitter_flush(&em))
		goto out;
	*out = o.p;
	*len = o.len;
	o.p = NULL;
	ret = 0;
out:
	yaml_emitter_delete(&em);
	free(o.p);
	return ret;
}
