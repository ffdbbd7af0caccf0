/* echo_params.c — fortio-style echo parameters (contract in echo.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/echo.h"

static int hexv(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int echo_url_decode(const char *src, size_t len, char *dst, int plus)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		if (src[i] == '%') {
			int h, l;

			if (i + 2 >= len)
				return -EINVAL;
			h = hexv(src[i + 1]);
			l = hexv(src[i + 2]);
			if (h < 0 || l < 0)
				return -EINVAL;
			dst[o++] = (char)(h << 4 | l);
			i += 2;
		} else if (plus && src[i] == '+') {
			dst[o++] = ' ';
		} else {
			dst[o++] = src[i];
		}
	}
	return (int)o;
}

/* A decimal number (digits, optional fraction) at s; returns chars used. */
static size_t scan_number(const char *s, size_t len, double *v)
{
	size_t i = 0, digits = 0;
	double x = 0, scale = 1;

	while (i < len && s[i] >= '0' && s[i] <= '9') {
		x = x * 10 + (s[i++] - '0');
		digits++;
	}
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && s[i] >= '0' && s[i] <= '9') {
			scale /= 10;
			x += (s[i++] - '0') * scale;
			digits++;
		}
	}
	*v = x;
	return digits ? i : 0;
}

int echo_parse_duration(const char *s, size_t len, uint64_t *ns)
{
	static const struct {
		const char *u;
		double mult;
	} units[] = {
		{ "ns", 1 }, { "us", 1e3 }, { "\xc2\xb5s", 1e3 }, { "\xce\xbcs", 1e3 },
		{ "ms", 1e6 }, { "s", 1e9 }, { "m", 60e9 }, { "h", 3600e9 },
	};
	double total = 0;
	size_t i = 0;

	if (len == 1 && s[0] == '0') {
		*ns = 0;
		return 0;
	}
	if (!len)
		return -EINVAL;
	while (i < len) {
		double v;
		size_t n = scan_number(s + i, len - i, &v), best = 0, k;
		double mult = 0;

		if (!n)
			return -EINVAL;
		i += n;
		/* Longest unit that matches ("ms" before "m"). */
		for (k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
			size_t ul = strlen(units[k].u);

			if (ul <= len - i && !memcmp(s + i, units[k].u, ul) && ul > best) {
				best = ul;
				mult = units[k].mult;
			}
		}
		if (!best)
			return -EINVAL;
		i += best;
		total += v * mult;
	}
	if (total > 1e18)
		return -EINVAL;
	*ns = (uint64_t)llround(total);
	return 0;
}

static int parse_u64(const char *s, size_t len, uint64_t *v)
{
	uint64_t x = 0;
	size_t i;

	if (!len || len > 18)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = x;
	return 0;
}

static int parse_pct(const char *s, size_t len, double *pct)
{
	double v;

	if (!len || scan_number(s, len, &v) != len || v <= 0 || v > 100)
		return -EINVAL;
	*pct = v;
	return 0;
}

enum dist_kind { D_SIZE, D_STATUS, D_DELAY };

/* "V" or "V:PCT,V:PCT,..." (already percent-decoded). */
static int parse_dist(const char *s, size_t len, enum dist_kind kind, uint64_t max,
		      struct echo_dist *d)
{
	double sum = 0;
	size_t i = 0;

	d->n = 0;
	while (i <= len) {
		size_t j = i, colon = (size_t)-1;
		uint64_t v;
		double pct = 100;
		size_t vlen;
		int r;

		while (j < len && s[j] != ',') {
			if (s[j] == ':' && colon == (size_t)-1)
				colon = j;
			j++;
		}
		vlen = (colon == (size_t)-1 ? j : colon) - i;
		if (colon != (size_t)-1 && parse_pct(s + colon + 1, j - colon - 1, &pct))
			return -EINVAL;
		if (kind == D_DELAY)
			r = echo_parse_duration(s + i, vlen, &v);
		else
			r = parse_u64(s + i, vlen, &v);
		if (r)
			return r;
		if (kind == D_STATUS && (v < 200 || v > 599))
			return -ERANGE;
		if (v > max)
			v = max;
		if (d->n == ECHO_MAX_CHOICES)
			return -E2BIG;
		sum += pct;
		if (sum > 100.0 + 1e-9)
			return -EDOM;
		d->value[d->n] = v;
		d->pct[d->n] = pct;
		d->n++;
		i = j + 1;
	}
	return 0;
}

int echo_pick(const struct echo_dist *d, double r, uint64_t *value)
{
	double acc = 0;
	int i;

	for (i = 0; i < d->n; i++) {
		acc += d->pct[i];
		if (r < acc) {
			*value = d->value[i];
			return 1;
		}
	}
	return 0;
}

static int is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *dist_err(int r)
{
	switch (r) {
	case -ERANGE: return "status must be 200..599";
	case -E2BIG: return "too many choices";
	case -EDOM: return "percentages sum over 100";
	}
	return "bad value";
}

int echo_parse_params(const char *q, size_t len, uint64_t max_size, uint64_t max_delay_ns,
		      struct echo_params *p, char *scratch, size_t scratch_len, char *err,
		      size_t errlen)
{
	size_t i = 0, used = 0;

	memset(p, 0, sizeof(*p));
	while (i < len) {
		size_t j = i, eq = (size_t)-1, klen, vlen;
		const char *k, *v;
		char *dv;
		int n, r;

		while (j < len && q[j] != '&') {
			if (q[j] == '=' && eq == (size_t)-1)
				eq = j;
			j++;
		}
		k = q + i;
		klen = (eq == (size_t)-1 ? j : eq) - i;
		v = eq == (size_t)-1 ? q + j : q + eq + 1;
		vlen = eq == (size_t)-1 ? 0 : j - eq - 1;
		i = j + 1;
		if (used + vlen + 2 > scratch_len) {
			snprintf(err, errlen, "query too long");
			return -EINVAL;
		}
		dv = scratch + used;
		n = echo_url_decode(v, vlen, dv, 1);
		if (n < 0) {
			snprintf(err, errlen, "bad %%-escape in parameter '%.*s'", (int)klen, k);
			return -EINVAL;
		}
		dv[n] = 0;
		if (klen == 4 && !memcmp(k, "size", 4)) {
			r = parse_dist(dv, (size_t)n, D_SIZE, max_size, &p->size);
		} else if (klen == 6 && !memcmp(k, "status", 6)) {
			r = parse_dist(dv, (size_t)n, D_STATUS, 599, &p->status);
		} else if (klen == 5 && !memcmp(k, "delay", 5)) {
			r = parse_dist(dv, (size_t)n, D_DELAY, max_delay_ns, &p->delay);
		} else if (klen == 5 && !memcmp(k, "close", 5)) {
			r = 0;
			if (!strcmp(dv, "true"))
				p->close_pct = 100;
			else if (!strcmp(dv, "false") || !strcmp(dv, "0"))
				p->close_pct = 0;
			else
				r = parse_pct(dv, (size_t)n, &p->close_pct);
		} else if (klen == 6 && !memcmp(k, "header", 6)) {
			char *colon = memchr(dv, ':', (size_t)n), *val;
			int c;

			r = -EINVAL;
			if (colon && colon != dv && p->nheaders < ECHO_MAX_HEADERS) {
				r = 0;
				for (c = 0; dv + c < colon; c++)
					if (!is_tchar((unsigned char)dv[c]))
						r = -EINVAL;
				*colon = 0;
				val = colon + 1;
				while (*val == ' ' || *val == '\t')
					val++;
				/* No header injection: only field-vchar, SP, HTAB. */
				for (c = 0; val[c]; c++)
					if (((unsigned char)val[c] < 0x20 && val[c] != '\t') ||
					    val[c] == 0x7f)
						r = -EINVAL;
				if ((size_t)(val - dv) + strlen(val) != (size_t)n)
					r = -EINVAL;	/* NUL inside */
				p->hname[p->nheaders] = dv;
				p->hvalue[p->nheaders] = val;
				if (!r)
					p->nheaders++;
			}
			if (r) {
				snprintf(err, errlen, "bad header parameter '%.*s' (want NAME:VALUE)",
					 n > 64 ? 64 : n, dv);
				return -EINVAL;
			}
			used += (size_t)n + 1;
			continue;
		} else {
			continue;	/* not ours: only echoed back */
		}
		if (r) {
			snprintf(err, errlen, "bad %.*s parameter '%.*s': %s", (int)klen, k,
				 n > 64 ? 64 : n, dv, dist_err(r));
			return -EINVAL;
		}
	}
	return 0;
}
