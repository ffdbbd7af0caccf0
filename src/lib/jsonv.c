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

/* ---- lexing (jsonv.h) --------------------------------------------------- */

const char *jv_lex_string_end(const char *p, const char *end)
{
	const char *start = p + 1, *q = start;

	/* A quote closes the string unless an odd run of backslashes precedes
	 * it: the run starts after a character no backslash escapes. */
	while (q < end && (q = memchr(q, '"', (size_t)(end - q)))) {
		const char *b = q;

		while (b > start && b[-1] == '\\')
			b--;
		if (!((q - b) & 1))
			return q;
		q++;
	}
	return NULL;
}

static int hex4(const char *p, const char *q, unsigned *out)
{
	unsigned v = 0;

	if (q - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];

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

const char *jv_lex_string(const char *p, const char *q, char *out, size_t *n, unsigned flags,
			  const char **bad)
{
	unsigned char hi = flags & JV_LEX_ASCII ? 0x7f : 0xff;	/* highest plain byte */
	size_t o = 0;

	p++;
	while (p < q) {
		const char *r = p;
		unsigned char c;
		unsigned cp, lo;

		/* a run of plain characters at once (base64 values are all plain) */
		while (r < q && *r != '\\' && (unsigned char)*r >= 0x20 && (unsigned char)*r <= hi)
			r++;
		if (r > p) {
			memcpy(out + o, p, (size_t)(r - p));
			o += (size_t)(r - p);
			p = r;
			continue;
		}
		*bad = p;
		c = (unsigned char)*p++;
		if (c < 0x20)
			return "control character in a string";
		if (c != '\\')
			return "non-ASCII byte in a string";
		if (p >= q)
			return "bad escape in a string";
		c = (unsigned char)*p++;
		switch (c) {
		case '"': case '\\': case '/': out[o++] = (char)c; break;
		case 'b': out[o++] = '\b'; break;
		case 'f': out[o++] = '\f'; break;
		case 'n': out[o++] = '\n'; break;
		case 'r': out[o++] = '\r'; break;
		case 't': out[o++] = '\t'; break;
		case 'u':
			if (hex4(p, q, &cp))
				return "bad \\u escape";
			p += 4;
			if (cp >= 0xd800 && cp < 0xe000 && (flags & JV_LEX_NO_SURROGATES))
				return "surrogate in \\u escape";
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (q - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, q, &lo) ||
				    lo < 0xdc00 || lo > 0xdfff)
					return "lone surrogate in \\u escape";
				p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				return "lone surrogate in \\u escape";
			}
			if (!cp)
				return "\\u0000 in a string";
			put_utf8(out, &o, cp);
			break;
		default:
			return "bad escape in a string";
		}
	}
	out[o] = 0;
	*n = o;
	return NULL;
}

/* ---- the tree ------------------------------------------------------------ */

/* p->pos is at the opening quote. NULL on error. */
static char *string(struct jp *p, size_t *len)
{
	const char *s = p->s + p->pos, *end = p->s + p->len, *q = s + 1, *why, *bad;
	char *o;

	/* most strings have no escape: copied as they stand */
	while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
		q++;
	if (q < end && *q == '"') {
		*len = (size_t)(q - s - 1);
		o = zh_malloc(*len + 1);
		memcpy(o, s + 1, *len);
		o[*len] = 0;
		p->pos = (size_t)(q + 1 - p->s);
		return o;
	}
	q = jv_lex_string_end(s, end);
	if (!q) {
		fail(p, "unterminated string");
		return NULL;
	}
	o = zh_malloc((size_t)(q - s));
	why = jv_lex_string(s, q, o, len, 0, &bad);
	if (why) {
		p->pos = (size_t)(bad - p->s);
		fail(p, why);
		free(o);
		return NULL;
	}
	p->pos = (size_t)(q + 1 - p->s);
	return o;
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
			size_t kl;

			key = string(p, &kl);
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
	size_t l = jv_lex_number(p->s + p->pos, p->s + p->len);

	if (!l)
		return fail(p, "bad number");
	v->str = zh_malloc(l + 1);
	memcpy(v->str, p->s + p->pos, l);
	v->str[l] = 0;
	v->len = l;
	v->num = strtod(v->str, NULL);
	p->pos += l;
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
		v->str = string(p, &v->len);
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

uint64_t jv_u64(const struct jv *v, uint64_t def)
{
	unsigned long long x;
	char *end;

	if (!v || (v->type != JV_STR && v->type != JV_NUM) || !v->len || v->str[0] < '0' ||
	    v->str[0] > '9')
		return def;
	errno = 0;
	x = strtoull(v->str, &end, 10);
	if (errno || *end)
		return def;
	return x;
}

bool jv_bool(const struct jv *v)
{
	return v && v->type == JV_BOOL && v->b;
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
		if (v->str)
			fputs(v->str, f);
		else
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

long jv_next(const char *buf, size_t len)
{
	size_t i = 0;
	int depth = 0;
	bool in_str = false, esc = false;

	while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t'))
		i++;
	if (i == len)
		return 0;
	if (buf[i] != '{' && buf[i] != '[')
		return -EINVAL;	/* the gateway streams objects only */
	for (; i < len; i++) {
		char c = buf[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']') {
			if (--depth == 0)
				return (long)(i + 1);
		}
	}
	return 0;
}
