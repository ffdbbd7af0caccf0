/* json_tree.c — JSON documents straight to and from the YAML document
 * tree (md_int.h), for the etcd state source, which stores each object as
 * one JSON text (docs/state-etcd.md): 110,000 objects parsed one by one
 * through libyaml cost its parser set-up (~64 KiB of buffers) each time.
 *
 * Design notes (cited J1..):
 *  J1. yn_parse_json builds a tree the decoder reads exactly as the one
 *      libyaml builds from the same text: numbers, true, false and null
 *      are plain scalars keeping their text; a string is double-quoted
 *      where its text would read differently plain (an integer, a null,
 *      a number, true/false: the decoder looks at the style for integers
 *      and nulls only), else plain, and keys are plain, so the YAML
 *      re-emitted from it (get -o yaml) reads as the applied YAML did;
 *      each node has the 1-based line of its first character.
 *  J2. Whatever it does not handle exactly as libyaml would (not strict
 *      JSON, a top level that is not an object, trailing text, a
 *      duplicate key, \u0000 or a surrogate escape, a non-ASCII byte,
 *      nesting deeper than 64)
 *      is YN_JSON_NOT: nothing of it stays in the arenas, the callback is
 *      not called, and yn_parse gives the text to libyaml, which accepts
 *      it as YAML or reports the error in its own words.
 *  J3. yn_emit_json writes a text that yn_parse_json turns into a tree the
 *      decoder reads exactly as the original: the decoder looks at a
 *      scalar's style only for integers (plain [+-]digits) and nulls, so a
 *      plain scalar that is a JSON number, true, false or null is written
 *      bare, any other scalar as a string — except a plain integer or
 *      null JSON cannot write bare ("+80", "0080", "~", empty): -ENOTSUP,
 *      and the caller stores YAML as before.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/buf.h"
#include "zerohop/jsonv.h"
#include "zerohop/log.h"
#include "zerohop/vec.h"
#include "md_int.h"

#define J_MAX_DEPTH 64
#define STYLE_PLAIN 1		/* yaml_scalar_style_t */
#define STYLE_DQUOTED 3

struct jp {
	const char *p, *end;
	int line, depth;
	struct md_arena *strs, *nodes;
	char *tmp;		/* a decoded string */
	size_t cap;
};

static void ws(struct jp *j)
{
	for (; j->p < j->end; j->p++) {
		if (*j->p == '\n')
			j->line++;
		else if (*j->p != ' ' && *j->p != '\t' && *j->p != '\r')
			break;
	}
}

/* A string at j->p (the quote) into the arena; NULL: YN_JSON_NOT (J2):
 * jsonv's lexer, with what libyaml would read differently refused (a
 * non-ASCII byte, any surrogate escape; \u0000 is refused by the lexer). */
static const char *jstr(struct jp *j)
{
	const char *q = j->p + 1, *bad;
	size_t n;

	/* most strings are plain ASCII: taken from the text as they stand */
	while (q < j->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20 &&
	       (unsigned char)*q < 0x80)
		q++;
	if (q < j->end && *q == '"') {
		const char *s = j->p + 1;

		j->p = q + 1;
		return ar_strndup(j->strs, s, (size_t)(q - s));
	}
	q = jv_lex_string_end(j->p, j->end);
	if (!q)
		return NULL;
	if ((size_t)(q - j->p) > j->cap) {
		j->cap = (size_t)(q - j->p) + 256;
		j->tmp = zh_realloc(j->tmp, j->cap);
	}
	if (jv_lex_string(j->p, q, j->tmp, &n, JV_LEX_ASCII | JV_LEX_NO_SURROGATES, &bad))
		return NULL;
	j->p = q + 1;
	return ar_strndup(j->strs, j->tmp, n);
}

static struct yn *node(struct jp *j, enum yn_type t)
{
	struct yn *n = ar_alloc(j->nodes, sizeof(*n));

	n->type = (uint8_t)t;
	n->line = j->line;
	return n;
}

static struct yn *jval(struct jp *j);

static bool int_like(const char *s)	/* what the decoder reads as an integer */
{
	if (*s == '+' || *s == '-')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* Plain, this text would be read as something else than a string (J1). */
static bool reads_other_plain(const char *s)
{
	size_t l = strlen(s);

	return !l || int_like(s) || jv_lex_number(s, s + l) == l || !strcmp(s, "true") ||
	       !strcmp(s, "false") || !strcmp(s, "null") || !strcmp(s, "~") ||
	       !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static struct yn *jcontainer(struct jp *j, bool map)
{
	struct yn *n = node(j, map ? YN_MAP : YN_SEQ);
	struct yn_pair *pairs = NULL;
	struct yn **items = NULL;
	int cnt = 0, cap = 0;
	struct yn *ret = NULL;

	if (++j->depth > J_MAX_DEPTH)
		return NULL;
	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == (map ? '}' : ']')) {
		j->p++;
		goto done;
	}
	for (;;) {
		if (map) {
			struct yn_pair pr = { .key_line = j->line, .key_style = STYLE_PLAIN };

			if (j->p >= j->end || *j->p != '"' || !(pr.key = jstr(j)))
				goto out;
			for (int i = 0; i < cnt; i++)	/* quadratic: mappings are small */
				if (!strcmp(pairs[i].key, pr.key))
					goto out;
			ws(j);
			if (j->p >= j->end || *j->p++ != ':')
				goto out;
			ws(j);
			if (!(pr.val = jval(j)))
				goto out;
			zh_reserve((void **)&pairs, &cap, cnt + 1, sizeof(*pairs));
			pairs[cnt++] = pr;
		} else {
			struct yn *v = jval(j);

			if (!v)
				goto out;
			zh_reserve((void **)&items, &cap, cnt + 1, sizeof(*items));
			items[cnt++] = v;
		}
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			ws(j);
			continue;
		}
		if (j->p < j->end && *j->p == (map ? '}' : ']')) {
			j->p++;
			break;
		}
		goto out;
	}
done:
	n->n = cnt;
	if (map) {
		n->pairs = ar_alloc(j->nodes, (size_t)cnt * sizeof(*pairs));
		if (cnt)
			memcpy(n->pairs, pairs, (size_t)cnt * sizeof(*pairs));
	} else {
		n->items = ar_alloc(j->nodes, (size_t)cnt * sizeof(*items));
		if (cnt)
			memcpy(n->items, items, (size_t)cnt * sizeof(*items));
	}
	ret = n;
	j->depth--;
out:
	free(pairs);
	free(items);
	return ret;
}

static struct yn *jval(struct jp *j)
{
	static const char *const lit[] = { "true", "false", "null" };
	struct yn *n;
	size_t l;

	if (j->p >= j->end)
		return NULL;
	if (*j->p == '{' || *j->p == '[')
		return jcontainer(j, *j->p == '{');
	n = node(j, YN_SCALAR);
	if (*j->p == '"') {
		n->s = jstr(j);
		n->style = n->s && reads_other_plain(n->s) ? STYLE_DQUOTED : STYLE_PLAIN;
		return n->s ? n : NULL;
	}
	n->style = STYLE_PLAIN;
	l = jv_lex_number(j->p, j->end);
	for (int i = 0; !l && i < 3; i++)
		if ((size_t)(j->end - j->p) >= strlen(lit[i]) &&
		    !memcmp(j->p, lit[i], strlen(lit[i])))
			l = strlen(lit[i]);
	if (!l)
		return NULL;
	n->s = ar_strndup(j->strs, j->p, l);
	j->p += l;
	return n;
}

int yn_parse_json(struct md_arena *strs, struct md_arena *nodes, const char *buf, size_t len,
		  yn_doc_fn fn, void *ctx)
{
	struct jp j = { .p = buf, .end = buf + len, .line = 1, .strs = strs, .nodes = nodes };
	struct md_arena_mark ms = ar_mark(strs), mn = ar_mark(nodes);
	struct yn *root;

	ws(&j);
	if (j.p >= j.end || *j.p != '{')
		return YN_JSON_NOT;
	root = jval(&j);
	ws(&j);
	free(j.tmp);
	if (!root || j.p != j.end) {	/* J2: libyaml's turn */
		ar_reset(strs, ms);
		ar_reset(nodes, mn);
		return YN_JSON_NOT;
	}
	return fn(ctx, root, root->line);
}

/* ---- emitter (J3) ------------------------------------------------------------ */

static void put_str(struct buf *b, const char *s)
{
	buf_append(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			buf_printf(b, "\\u%04x", c);
		else
			buf_append(b, s, 1);
	}
	buf_append(b, "\"", 1);
}

static int emit(struct buf *b, const struct yn *n, int depth, bool drop_rv)
{
	if (depth > J_MAX_DEPTH)
		return -ENOTSUP;
	if (n->type == YN_SCALAR) {
		size_t l = strlen(n->s);

		if (n->style == STYLE_PLAIN &&
		    ((l && jv_lex_number(n->s, n->s + l) == l) || !strcmp(n->s, "true") ||
		     !strcmp(n->s, "false") || !strcmp(n->s, "null"))) {
			buf_append(b, n->s, l);
			return 0;
		}
		if (n->style == STYLE_PLAIN && (int_like(n->s) || yn_is_null(n)))
			return -ENOTSUP;
		put_str(b, n->s);
		return 0;
	}
	buf_append(b, n->type == YN_MAP ? "{" : "[", 1);
	for (int i = 0, c = 0; i < n->n; i++) {
		int ret;

		if (n->type == YN_MAP && drop_rv && !strcmp(n->pairs[i].key, "resourceVersion"))
			continue;
		if (c++)
			buf_append(b, ",", 1);
		if (n->type == YN_MAP) {
			put_str(b, n->pairs[i].key);
			buf_append(b, ":", 1);
			ret = emit(b, n->pairs[i].val, depth + 1,
				   depth == 0 && !strcmp(n->pairs[i].key, "metadata"));
		} else {
			ret = emit(b, n->items[i], depth + 1, false);
		}
		if (ret)
			return ret;
	}
	buf_append(b, n->type == YN_MAP ? "}" : "]", 1);
	return 0;
}

int yn_emit_json(const struct yn *root, char **out, size_t *len)
{
	struct buf b;
	int ret;

	if (!root || root->type != YN_MAP)
		return -ENOTSUP;
	buf_init(&b, 0);
	ret = emit(&b, root, 0, false);
	if (ret) {
		buf_free(&b);
		return ret;
	}
	buf_append(&b, "\n", 1);
	*len = b.data;
	buf_append(&b, "", 1);
	*out = zh_malloc(*len + 1);
	memcpy(*out, buf_head(&b), *len + 1);
	buf_free(&b);
	return 0;
}
