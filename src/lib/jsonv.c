/* jsonv.c — strict JSON reader (see jsonv.h). Recursive descent over the
 * bytes; every allocation goes through zh_* (aborts on out-of-memory). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/json.h"
#include "zerohop/jsonv.h"
#include "zerohop/log.h"

struct jp {
	const char *s;
	size_t len, pos;
	char *err;
	size_t errlen;
	int depth;
};

static struct jv *fail(struct jp *p, const char *what)
{
	if (p->err && !p->err[0])
		snprintf(p->err, p->errlen, "at byte %zu: %s", p->pos, what);
	return NULL;
}

static void ws(struct jp *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static bool lit(struct jp *p, const char *w)
{
	size_t n = strlen(w);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n))
		return false;
	p->pos += n;
	return true;
}

static int hex4(struct jp *p, unsigned *out)
{
	unsigned v = 0;

	if (p->len - p->pos < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p->s[p->pos++];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static void put_utf8(char *o, size_t *n, unsigned cp)
{
	if (cp < 0x80) {
		o[(*n)++] = (char)cp;
	} else if (cp < 0x800) {
		o[(*n)++] = (char)(0xc0 | cp >> 6);
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		o[(*n)++] = (char)(0xe0 | cp >> 12);
		o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		o[(*n)++] = (char)(0xf0 | cp >> 18);
		o[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	}
}

/* p->pos is at the opening quote; the decoded string is never longer than
 * its source. NULL on error. */
static char *string(struct jp *p)
{
	size_t start = ++p->pos, n = 0;
	char *o;

	while (p->pos < p->len && p->s[p->pos] != '"')
		p->pos += p->s[p->pos] == '\\' ? 2 : 1;
	if (p->pos >= p->len) {
		fail(p, "unterminated string");
		return NULL;
	}
	o = zh_malloc(p->pos - start + 1);
	p->pos = start;
	while (p->s[p->pos] != '"') {
		unsigned char c = (unsigned char)p->s[p->pos++];
		unsigned cp, lo;

		if (c < 0x20) {
			fail(p, "control character in a string");
			goto err;
		}
		if (c != '\\') {
			o[n++] = (char)c;
			continue;
		}
		c = (unsigned char)p->s[p->pos++];
		switch (c) {
		case '"': case '\\': case '/': o[n++] = (char)c; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'u':
			if (hex4(p, &cp)) {
				fail(p, "bad \\u escape");
				goto err;
			}
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (!lit(p, "\\u") || hex4(p, &lo) || lo < 0xdc00 || lo > 0xdfff) {
					fail(p, "lone surrogate in \\u escape");
					goto err;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				fail(p, "lone surrogate in \\u escape");
				goto err;
			}
			if (!cp) {
				fail(p, "\\u0000 in a string");
				goto err;
			}
			put_utf8(o, &n, cp);
			break;
		default:
			fail(p, "bad escape in a string");
			goto err;
		}
	}
	p->pos++;
	o[n] = 0;
	return o;
err:
	free(o);
	return NULL;
}

static struct jv *value(struct jp *p);

static void push(struct jv *v, char *key, struct jv *item)
{
	if (!(v->n & (v->n - 1)) || !v->n) {	/* grow at 0, 1, 2, 4, 8 ... */
		int cap = v->n ? v->n * 2 : 1;

		v->items = zh_realloc(v->items, sizeof(*v->items) * cap);
		if (v->type == JV_OBJ)
			v->keys = zh_realloc(v->keys, sizeof(*v->keys) * cap);
	}
	if (v->type == JV_OBJ)
		v->keys[v->n] = key;
	v->items[v->n++] = item;
}

static struct jv *container(struct jp *p, struct jv *v)
{
	char close = v->type == JV_OBJ ? '}' : ']';

	if (++p->depth > JV_MAX_DEPTH)
		return fail(p, "nested too deep");
	p->pos++;
	ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		p->depth--;
		return v;
	}
	for (;;) {
		char *key = NULL;
		struct jv *item;

		ws(p);
		if (v->type == JV_OBJ) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return fail(p, "expected a string key");
			key = string(p);
			if (!key)
				return NULL;
			ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':') {
				free(key);
				return fail(p, "expected ':'");
			}
			p->pos++;
		}
		item = value(p);
		if (!item) {
			free(key);
			return NULL;
		}
		push(v, key, item);
		ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			p->depth--;
			return v;
		}
		return fail(p, v->type == JV_OBJ ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static struct jv *number(struct jp *p, struct jv *v)
{
	size_t start = p->pos;
	char buf[64], *end;

	if (p->s[p->pos] == '-')
		p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '0')
		p->pos++;
	else if (p->pos < p->len && p->s[p->pos] >= '1' && p->s[p->pos] <= '9')
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	else
		return fail(p, "bad number");
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
			return fail(p, "bad number");
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
			return fail(p, "bad number");
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos - start >= sizeof(buf))
		return fail(p, "number too long");
	memcpy(buf, p->s + start, p->pos - start);
	buf[p->pos - start] = 0;
	v->num = strtod(buf, &end);
	return v;
}

static struct jv *value(struct jp *p)
{
	struct jv *v = zh_calloc(1, sizeof(*v)), *r;

	ws(p);
	if (p->pos >= p->len) {
		r = fail(p, "expected a value, got the end of the input");
	} else if (p->s[p->pos] == '{') {
		v->type = JV_OBJ;
		r = container(p, v);
	} else if (p->s[p->pos] == '[') {
		v->type = JV_ARR;
		r = container(p, v);
	} else if (p->s[p->pos] == '"') {
		v->type = JV_STR;
		v->str = string(p);
		r = v->str ? v : NULL;
	} else if (lit(p, "true") || lit(p, "false")) {
		v->type = JV_BOOL;
		v->b = p->s[p->pos - 1] == 'e' && p->s[p->pos - 2] == 'u';
		r = v;
	} else if (lit(p, "null")) {
		r = v;
	} else if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9')) {
		v->type = JV_NUM;
		r = number(p, v);
	} else {
		r = fail(p, "expected a value");
	}
	if (!r)
		jv_free(v);
	return r;
}

struct jv *jv_parse(const char *s, size_t len, char *err, size_t errlen)
{
	struct jp p = { .s = s, .len = len, .err = err, .errlen = errlen };
	struct jv *v;

	if (err && errlen)
		err[0] = 0;
	v = value(&p);
	if (!v)
		return NULL;
	ws(&p);
	if (p.pos != p.len) {
		jv_free(v);
		return fail(&p, "trailing text after the value");
	}
	return v;
}

void jv_free(struct jv *v)
{
	if (!v)
		return;
	for (int i = 0; i < v->n; i++) {
		jv_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	free(v);
}

const struct jv *jv_get(const struct jv *obj, const char *key)
{
	if (!obj || obj->type != JV_OBJ)
		return NULL;
	for (int i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			return obj->items[i];
	return NULL;
}

const struct jv *jv_at(const struct jv *arr, int i)
{
	if (!arr || arr->type != JV_ARR || i < 0 || i >= arr->n)
		return NULL;
	return arr->items[i];
}

const char *jv_str(const struct jv *v)
{
	return v && v->type == JV_STR ? v->str : NULL;
}

bool jv_is(const struct jv *v, enum jv_type t)
{
	return v && v->type == t;
}

void jv_print(FILE *f, const struct jv *v)
{
	if (!v || v->type == JV_NULL) {
		fputs("null", f);
		return;
	}
	switch (v->type) {
	case JV_BOOL:
		fputs(v->b ? "true" : "false", f);
		return;
	case JV_NUM:
		fprintf(f, "%.17g", v->num);
		return;
	case JV_STR:
		json_put_str(f, v->str);
		return;
	default:
		break;
	}
	fputc(v->type == JV_OBJ ? '{' : '[', f);
	for (int i = 0; i < v->n; i++) {
		if (i)
			fputc(',', f);
		if (v->type == JV_OBJ) {
			json_put_str(f, v->keys[i]);
			fputc(':', f);
		}
		jv_print(f, v->items[i]);
	}
	fputc(v->type == JV_OBJ ? '}' : ']', f);
}
