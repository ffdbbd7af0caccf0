/* lg_json.c — read a run back from JSON (ours or plain fortio) into an
 * lg_series (contract in bench.h). A small strict JSON parser (RFC 8259
 * values; \u escapes outside ASCII are kept as '?', we only need numbers and
 * ASCII names) builds a tree; the series takes what it knows and ignores the
 * rest, so any fortio version's file reads. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/bench.h"
#include "zerohop/log.h"

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype type;
	double num;		/* J_NUM, J_BOOL */
	char *str;		/* J_STR (owned) */
	struct jv *items;	/* J_ARR, J_OBJ values (owned) */
	char **keys;		/* J_OBJ keys (owned) */
	size_t n;
};

struct jparser {
	const char *s;
	size_t len, pos;
	const char *err;	/* constant string, set on the first error */
	int depth;
};

static void jv_free(struct jv *v)
{
	for (size_t i = 0; i < v->n; i++) {
		jv_free(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	memset(v, 0, sizeof(*v));
}

static void skip_ws(struct jparser *p)
{
	while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]))
		p->pos++;
}

static int fail(struct jparser *p, const char *msg)
{
	if (!p->err)
		p->err = msg;
	return -EINVAL;
}

static int parse_value(struct jparser *p, struct jv *v);

static int parse_string(struct jparser *p, char **out)
{
	size_t cap = 16, n = 0;
	char *b;

	if (p->pos >= p->len || p->s[p->pos] != '"')
		return fail(p, "expected a string");
	p->pos++;
	b = zh_malloc(cap);
	while (p->pos < p->len && p->s[p->pos] != '"') {
		char ch = p->s[p->pos++];

		if ((unsigned char)ch < 0x20)
			goto err_ctl;
		if (ch == '\\') {
			if (p->pos >= p->len)
				goto err_esc;
			ch = p->s[p->pos++];
			switch (ch) {
			case '"': case '\\': case '/': break;
			case 'b': ch = '\b'; break;
			case 'f': ch = '\f'; break;
			case 'n': ch = '\n'; break;
			case 'r': ch = '\r'; break;
			case 't': ch = '\t'; break;
			case 'u': {
				unsigned int cp = 0;

				for (int i = 0; i < 4; i++, p->pos++) {
					if (p->pos >= p->len || !isxdigit((unsigned char)p->s[p->pos]))
						goto err_esc;
					cp = cp * 16 + (unsigned int)(isdigit((unsigned char)p->s[p->pos]) ?
						p->s[p->pos] - '0' : (tolower(p->s[p->pos]) - 'a' + 10));
				}
				ch = cp < 0x80 ? (char)cp : '?';
				break;
			}
			default:
				goto err_esc;
			}
		}
		if (n + 2 > cap) {
			cap *= 2;
			b = zh_realloc(b, cap);
		}
		b[n++] = ch;
	}
	if (p->pos >= p->len) {
		free(b);
		return fail(p, "unterminated string");
	}
	p->pos++;
	b[n] = 0;
	*out = b;
	return 0;

err_esc:
	free(b);
	return fail(p, "bad escape in string");
err_ctl:
	free(b);
	return fail(p, "control character in string");
}

static int parse_number(struct jparser *p, struct jv *v)
{
	size_t st = p->pos;
	char tmp[64], *end;

	if (p->pos < p->len && p->s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->len || !isdigit((unsigned char)p->s[p->pos]))
		return fail(p, "bad number");
	while (p->pos < p->len && strchr("0123456789.eE+-", p->s[p->pos]))
		p->pos++;
	if (p->pos - st >= sizeof(tmp))
		return fail(p, "number too long");
	memcpy(tmp, p->s + st, p->pos - st);
	tmp[p->pos - st] = 0;
	v->type = J_NUM;
	v->num = strtod(tmp, &end);
	if (*end)
		return fail(p, "bad number");
	return 0;
}

static int parse_container(struct jparser *p, struct jv *v, int obj)
{
	char close = obj ? '}' : ']';
	size_t cap = 0;

	v->type = obj ? J_OBJ : J_ARR;
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return 0;
	}
	for (;;) {
		char *key = NULL;

		skip_ws(p);
		if (obj) {
			if (parse_string(p, &key))
				return -EINVAL;
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':') {
				free(key);
				return fail(p, "expected ':'");
			}
			p->pos++;
		}
		if (v->n == cap) {
			cap = cap ? cap * 2 : 8;
			v->items = zh_realloc(v->items, cap * sizeof(*v->items));
			if (obj)
				v->keys = zh_realloc(v->keys, cap * sizeof(*v->keys));
		}
		memset(&v->items[v->n], 0, sizeof(*v->items));
		if (obj)
			v->keys[v->n] = key;
		v->n++;
		if (parse_value(p, &v->items[v->n - 1]))
			return -EINVAL;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int parse_value(struct jparser *p, struct jv *v)
{
	int err;

	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p, "unexpected end of input");
	if (++p->depth > 64)
		return fail(p, "nested too deeply");
	switch (p->s[p->pos]) {
	case '{':
		err = parse_container(p, v, 1);
		break;
	case '[':
		err = parse_container(p, v, 0);
		break;
	case '"':
		v->type = J_STR;
		err = parse_string(p, &v->str);
		break;
	default:
		if (!strncmp(p->s + p->pos, "true", 4) || !strncmp(p->s + p->pos, "null", 4)) {
			v->type = p->s[p->pos] == 't' ? J_BOOL : J_NULL;
			v->num = 1;
			p->pos += 4;
			err = 0;
		} else if (!strncmp(p->s + p->pos, "false", 5)) {
			v->type = J_BOOL;
			p->pos += 5;
			err = 0;
		} else {
			err = parse_number(p, v);
		}
	}
	p->depth--;
	return err;
}

static const struct jv *jget(const struct jv *o, const char *key)
{
	if (!o || o->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return &o->items[i];
	return NULL;
}

static double jnum(const struct jv *o, const char *key, double dflt)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_NUM ? v->num : dflt;
}

/* Percentile p (0..100) from cumulative bins: the end of the first bin that
 * reaches p (an upper bound, like hist_percentile). */
static double pct_from_bins(const struct lg_series *s, double p)
{
	for (size_t i = 0; i < s->nbins; i++)
		if (s->bins[i].percent >= p - 1e-9)
			return s->bins[i].end;
	return s->max;
}

static int series_from_hist_json(struct lg_series *s, const struct jv *h, const char *path)
{
	const struct jv *data = jget(h, "Data"), *pcts = jget(h, "Percentiles");

	if (!h || h->type != J_OBJ) {
		fprintf(stderr, "%s: DurationHistogram missing or not an object\n", path);
		return -EINVAL;
	}
	s->count = (uint64_t)jnum(h, "Count", 0);
	s->min = jnum(h, "Min", 0);
	s->max = jnum(h, "Max", 0);
	s->avg = jnum(h, "Avg", 0);
	s->stddev = jnum(h, "StdDev", 0);
	if (data && data->type == J_ARR) {
		s->bins = zh_calloc(data->n ? data->n : 1, sizeof(*s->bins));
		for (size_t i = 0; i < data->n; i++) {
			struct lg_bin *b = &s->bins[s->nbins];

			if (data->items[i].type != J_OBJ)
				continue;
			b->start = jnum(&data->items[i], "Start", 0);
			b->end = jnum(&data->items[i], "End", b->start);
			b->percent = jnum(&data->items[i], "Percent", 0);
			b->count = (uint64_t)jnum(&data->items[i], "Count", 0);
			s->nbins++;
		}
	}
	for (int i = 0; i < 6; i++)
		s->p[i] = pct_from_bins(s, lg_report_pcts[i]);
	if (pcts && pcts->type == J_ARR) {
		for (size_t i = 0; i < pcts->n; i++) {
			double pp = jnum(&pcts->items[i], "Percentile", -1);

			for (int k = 0; k < 6; k++)
				if (fabs(pp - lg_report_pcts[k]) < 1e-9)
					s->p[k] = jnum(&pcts->items[i], "Value", s->p[k]);
		}
	}
	s->p[6] = s->max;
	s->has_p = s->count > 0;
	return 0;
}

int lg_series_read_json(const char *path, struct lg_series *s)
{
	struct jparser p = { 0 };
	struct jv root = { 0 };
	const struct jv *v, *rc;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	FILE *f;
	int err = 0;

	memset(s, 0, sizeof(*s));
	f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	if (!f) {
		err = -errno;
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return err;
	}
	for (;;) {
		if (cap - n < 65536) {
			cap = cap ? cap * 2 : 131072;
			buf = zh_realloc(buf, cap);
		}
		size_t r = fread(buf + n, 1, cap - n, f);

		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "%s: read error\n", path);
		err = -EIO;
		goto out;
	}
	p.s = buf;
	p.len = n;
	if (parse_value(&p, &root) == 0) {
		skip_ws(&p);
		if (p.pos != p.len)
			fail(&p, "trailing data after the JSON value");
	}
	if (p.err) {
		fprintf(stderr, "%s: byte %zu: invalid JSON: %s\n", path, p.pos, p.err);
		err = -EINVAL;
		goto out;
	}
	if (root.type != J_OBJ) {
		fprintf(stderr, "%s: byte 0: not a JSON object\n", path);
		err = -EINVAL;
		goto out;
	}
	err = series_from_hist_json(s, jget(&root, "DurationHistogram"), path);
	if (err)
		goto out;
	v = jget(&root, "Labels");
	if (v && v->type == J_STR && v->str[0])
		snprintf(s->label, sizeof(s->label), "%s", v->str);
	else
		snprintf(s->label, sizeof(s->label), "%s", path);
	v = jget(&root, "RequestedQPS");
	if (v && v->type == J_STR)
		s->requested_qps = strcmp(v->str, "max") ? atof(v->str) : 0;
	else if (v && v->type == J_NUM)
		s->requested_qps = v->num;
	v = jget(&root, "Mode");
	if (v && v->type == J_STR)
		snprintf(s->mode, sizeof(s->mode), "%s", v->str);
	else if (s->requested_qps > 0)
		snprintf(s->mode, sizeof(s->mode), "fixed %g req/s (fortio file: latency not "
			 "corrected for coordinated omission)", s->requested_qps);
	else
		snprintf(s->mode, sizeof(s->mode), "maximum rate");
	s->actual_qps = jnum(&root, "ActualQPS", 0);
	s->duration_s = jnum(&root, "ActualDuration", 0) / 1e9;
	rc = jget(&root, "RetCodes");
	for (size_t i = 0; rc && rc->type == J_OBJ && i < rc->n; i++) {
		long code = atol(rc->keys[i]);

		if (rc->items[i].type == J_NUM && strcmp(rc->keys[i], "OK") &&
		    strcmp(rc->keys[i], "SERVING") && (code < 200 || code >= 400))
			s->errors += (uint64_t)rc->items[i].num;
	}
	/* closed loop: uncorrected == corrected, not worth a second curve */
	v = jget(&root, "Loop");
	v = v && v->type == J_STR && !strcmp(v->str, "open") ?
		jget(&root, "UncorrectedDurationHistogram") : NULL;
	if (v && v->type == J_OBJ) {
		s->uncorrected = zh_calloc(1, sizeof(*s->uncorrected));
		snprintf(s->uncorrected->label, sizeof(s->uncorrected->label), "%.200s (uncorrected)",
			 s->label);
		if (series_from_hist_json(s->uncorrected, v, path)) {
			lg_series_free(s->uncorrected);
			free(s->uncorrected);
			s->uncorrected = NULL;
		} else {
			s->uncorrected->actual_qps = s->actual_qps;
			s->uncorrected->errors = s->errors;
			snprintf(s->uncorrected->mode, sizeof(s->uncorrected->mode),
				 "uncorrected: from the actual send");
		}
	}
out:
	jv_free(&root);
	free(buf);
	if (f != stdin)
		fclose(f);
	if (err)
		lg_series_free(s);
	return err;
}
