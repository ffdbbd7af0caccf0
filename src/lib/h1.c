/* h1.c — strict, zero-copy, resumable HTTP/1.x head parser, message
 * framing and chunked decoder (contract in h1.h). One file, so a fuzz
 * target links with h1.c and log.c alone.
 *
 * Design notes.
 *
 * The head parser is a pure function of buf[0..len): it always parses from
 * the start, and last_len only decides whether parsing again is worth it
 * (need_reparse). So the outcome never depends on how the bytes arrived,
 * which is what makes byte-by-byte feeding give the same result as one
 * read: invariants
 *  1. parse(buf, len) is -EAGAIN only when some continuation of the bytes
 *     could still be a valid head within the limits;
 *  2. once parse(buf, len) is an error or a success, parse of any longer
 *     buffer with the same prefix gives the same result (errors are decided
 *     by the earliest offending byte, limits by offsets within the prefix);
 *  3. need_reparse() is true whenever the new bytes hold an LF (only then can
 *     a line, hence the head, end) or a CR (a bare CR is an error), or make
 *     the buffer cross a limit. Other errors inside a line are reported once
 *     its LF arrives (or a limit is crossed): later, never differently.
 * Characters are checked through 256-entry tables; no byte is ever read
 * at or beyond buf + len (the guard-page tests check this under ASan).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "zerohop/h1.h"

/* ---- character classes (RFC 9110 5.6.2, 5.5; RFC 3986 for targets) ---- */

#define C_TCHAR  0x01	/* token character */
#define C_FIELD  0x02	/* field-vchar / obs-text / SP / HTAB inside a value */
#define C_TARGET 0x04	/* visible ASCII allowed in a request-target */

static unsigned char ctab[256];
static int ctab_ready;

/* Runs before main (constructor), so threads never race to fill the table;
 * ensure_tables() covers callers from other constructors. */
__attribute__((constructor)) static void ctab_init(void)
{
	const char *extra = "!#$%&'*+-.^_`|~";
	int c;

	for (c = 0; c < 256; c++) {
		unsigned char f = 0;

		if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c && strchr(extra, c)))
			f |= C_TCHAR;
		if ((c >= 0x21 && c <= 0x7e) || c >= 0x80 || c == ' ' || c == '\t')
			f |= C_FIELD;
		if (c >= 0x21 && c <= 0x7e && c != '#')
			f |= C_TARGET;
		ctab[c] = f;
	}
	__atomic_store_n(&ctab_ready, 1, __ATOMIC_RELEASE);
}

static inline int is_class(unsigned char c, unsigned char cls)
{
	return ctab[c] & cls;
}

static inline void ensure_tables(void)
{
	if (!__atomic_load_n(&ctab_ready, __ATOMIC_ACQUIRE))
		ctab_init();
}

/* ---- errors ---- */

static const char h1_s_bad_request[] = "bad request";
static const char h1_s_uri_too_long[] = "request line too long";
static const char h1_s_headers_too_large[] = "header block too large";
static const char h1_s_bad_version[] = "unsupported HTTP version";
static const char h1_s_bad_method[] = "bad method";
static const char h1_s_bad_target[] = "bad request target";
static const char h1_s_bad_header[] = "bad header field";
static const char h1_s_bad_framing[] = "ambiguous message framing";
static const char h1_s_bad_chunk[] = "bad chunked encoding";
static const char h1_s_bad_status[] = "bad status line";
static const char h1_s_not_implemented[] = "transfer coding not implemented";
static const char h1_s_unknown[] = "unknown parser error";

const char *h1_err_str(int err)
{
	switch (err) {
	case H1_E_BAD_REQUEST: return h1_s_bad_request;
	case H1_E_URI_TOO_LONG: return h1_s_uri_too_long;
	case H1_E_HEADERS_TOO_LARGE: return h1_s_headers_too_large;
	case H1_E_BAD_VERSION: return h1_s_bad_version;
	case H1_E_BAD_METHOD: return h1_s_bad_method;
	case H1_E_BAD_TARGET: return h1_s_bad_target;
	case H1_E_BAD_HEADER: return h1_s_bad_header;
	case H1_E_BAD_FRAMING: return h1_s_bad_framing;
	case H1_E_BAD_CHUNK: return h1_s_bad_chunk;
	case H1_E_BAD_STATUS: return h1_s_bad_status;
	case H1_E_NOT_IMPLEMENTED: return h1_s_not_implemented;
	}
	return h1_s_unknown;
}

int h1_err_status(int err)
{
	switch (err) {
	case H1_E_URI_TOO_LONG: return 414;
	case H1_E_HEADERS_TOO_LARGE: return 431;
	case H1_E_BAD_VERSION: return 505;
	case H1_E_NOT_IMPLEMENTED: return 501;
	case H1_E_BAD_STATUS: return 502;
	}
	return 400;
}

const char *h1_reason(int status, const char *unknown)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 417: return "Expectation Failed";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	}
	return unknown;
}

void h1_limits_default(struct h1_limits *l)
{
	l->max_line = 8192;
	l->max_head = 65536;
	l->max_headers = 100;
}

/* ---- head parsing ---- */

/* Invariant 3: is there any point in parsing buf[0..len) again? */
static int need_reparse(const char *buf, size_t len, size_t last_len, const struct h1_limits *lim)
{
	if (last_len == 0 || last_len >= len)
		return 1;
	/* CR too: "\r" + anything but LF is an error decided without an LF. */
	if (memchr(buf + last_len, '\n', len - last_len) || memchr(buf + last_len, '\r', len - last_len))
		return 1;
	if (last_len <= lim->max_line && len > lim->max_line)
		return 1;
	if (last_len <= lim->max_head && len > lim->max_head)
		return 1;
	return 0;
}

/* An error decided by the byte at p (for a CR not followed by LF: the byte
 * after the CR) is reported as the limit error when p is past the limit: a
 * shorter prefix of the same bytes already was (invariant 2). */
static int err_at(const char *buf, const char *p, size_t limit, int limit_err, int err)
{
	return (size_t)(p - buf) > limit ? limit_err : err;
}

/* Incomplete start line: too long already, unless the only byte past the
 * limit is the CR that may end a line of exactly limit bytes. */
static int line_incomplete(const char *buf, size_t len, size_t limit, int limit_err)
{
	if (len > limit && !(len == limit + 1 && buf[len - 1] == '\r'))
		return limit_err;
	return -EAGAIN;
}

/* Field lines up to and including the empty line. *pp is the first byte
 * after the start line. Returns the head length, -EAGAIN, or an H1_E_*. */
static int parse_fields(const char *buf, size_t len, const char *p, const struct h1_limits *lim,
			struct h1_header *headers, size_t *num_headers)
{
	const char *end = buf + len;
	size_t n = 0, cap = *num_headers < lim->max_headers ? *num_headers : lim->max_headers;

	for (;;) {
		const char *name, *val, *vend;

		if ((size_t)(p - buf) > lim->max_head)
			return H1_E_HEADERS_TOO_LARGE;
		if (p == end)
			goto incomplete;
		if (*p == '\r') {
			if (p + 1 == end)
				goto incomplete;
			if (p[1] != '\n')
				return err_at(buf, p + 1, lim->max_head, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_HEADER);
			p += 2;
			if ((size_t)(p - buf) > lim->max_head)
				return H1_E_HEADERS_TOO_LARGE;
			*num_headers = n;
			return (int)(p - buf);
		}
		/* SP/HTAB here is obs-fold (or whitespace before the first
		 * field, RFC 9112 2.2): both rejected. */
		name = p;
		while (p < end && is_class((unsigned char)*p, C_TCHAR))
			p++;
		if (p == end)
			goto incomplete;
		if (*p != ':' || p == name)	/* ws before colon, empty name, CTL, ... */
			return err_at(buf, p, lim->max_head, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_HEADER);
		if (n >= cap)
			return H1_E_HEADERS_TOO_LARGE;
		headers[n].name = name;
		headers[n].name_len = (size_t)(p - name);
		p++;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		val = p;
		while (p < end && is_class((unsigned char)*p, C_FIELD))
			p++;
		if (p == end)
			goto incomplete;
		if (*p != '\r')		/* NUL, bare LF, other CTL */
			return err_at(buf, p, lim->max_head, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_HEADER);
		if (p + 1 == end)
			goto incomplete;
		if (p[1] != '\n')	/* bare CR */
			return err_at(buf, p + 1, lim->max_head, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_HEADER);
		vend = p;
		while (vend > val && (vend[-1] == ' ' || vend[-1] == '\t'))
			vend--;
		headers[n].value = val;
		headers[n].value_len = (size_t)(vend - val);
		n++;
		p += 2;
	}

incomplete:
	if (len > lim->max_head)
		return H1_E_HEADERS_TOO_LARGE;
	return -EAGAIN;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* "HTTP/" DIGIT "." DIGIT at p. Returns 1 = HTTP/1.0 or 1.1 (minor set),
 * 0 = well-formed other version, -1 = malformed (*bad = offending byte),
 * -EAGAIN = need bytes. */
static int parse_version(const char *p, const char *end, int *minor, const char **bad)
{
	static const char pat[] = "HTTP/d.d";
	size_t i;

	for (i = 0; i < 8; i++) {
		if (p + i == end)
			return -EAGAIN;
		if (pat[i] == 'd' ? !is_digit(p[i]) : p[i] != pat[i]) {
			*bad = p + i;
			return -1;
		}
	}
	if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
		return 0;
	*minor = p[7] - '0';
	return 1;
}

static int target_form_ok(const char *m, size_t mlen, const char *t, size_t tlen)
{
	size_t i;

	if (t[0] == '/')
		return !(mlen == 7 && !memcmp(m, "CONNECT", 7));
	if (tlen == 1 && t[0] == '*')
		return mlen == 7 && !memcmp(m, "OPTIONS", 7);
	if (mlen == 7 && !memcmp(m, "CONNECT", 7)) {
		/* authority-form: host ":" port, nothing else */
		const char *colon = memchr(t, ':', tlen);

		if (!colon || colon == t || colon + 1 == t + tlen || memchr(t, '/', tlen) ||
		    memchr(t, '@', tlen))
			return 0;
		for (i = (size_t)(colon + 1 - t); i < tlen; i++)
			if (!is_digit(t[i]))
				return 0;
		return 1;
	}
	/* absolute-form: scheme "://" ... (RFC 3986 scheme syntax) */
	if (!((t[0] >= 'a' && t[0] <= 'z') || (t[0] >= 'A' && t[0] <= 'Z')))
		return 0;
	for (i = 1; i < tlen; i++) {
		char c = t[i];

		if (c == ':')
			return i + 2 < tlen && t[i + 1] == '/' && t[i + 2] == '/';
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '+' ||
		      c == '-' || c == '.'))
			return 0;
	}
	return 0;
}

static int parse_request_line(const char *buf, size_t len, const struct h1_limits *lim,
			      void *msg, const char **after)
{
	struct h1_request *req = msg;
	const char *p = buf, *end = buf + len, *m, *t, *bad = NULL;
	int v;

	/* RFC 9112 2.2: ignore empty lines before the request line. */
	while (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
		p += 2;
	if (p < end && *p == '\n')
		return err_at(buf, p, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_REQUEST);
	m = p;
	while (p < end && is_class((unsigned char)*p, C_TCHAR))
		p++;
	if (p == end)
		goto incomplete;
	if (*p == '\r' && p == m) {	/* lone CR before anything */
		if (p + 1 == end)
			goto incomplete;
		return err_at(buf, p + 1, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_REQUEST);
	}
	if (*p != ' ' || p == m)
		return err_at(buf, p, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_METHOD);
	req->method = m;
	req->method_len = (size_t)(p - m);
	t = ++p;
	while (p < end && is_class((unsigned char)*p, C_TARGET))
		p++;
	if (p == end)
		goto incomplete;
	if (*p == '\r' || *p == '\n')	/* "GET /" alone: HTTP/0.9 */
		return err_at(buf, p, lim->max_line, H1_E_URI_TOO_LONG,
			      p == t ? H1_E_BAD_TARGET : H1_E_BAD_VERSION);
	if (*p != ' ' || p == t)
		return err_at(buf, p, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_TARGET);
	req->target = t;
	req->target_len = (size_t)(p - t);
	p++;
	v = parse_version(p, end, &req->minor_version, &bad);
	if (v == -EAGAIN)
		goto incomplete;
	if (v < 0)
		return err_at(buf, bad, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_REQUEST);
	p += 8;
	if (p == end)
		goto incomplete;
	if (*p != '\r')
		return err_at(buf, p, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_REQUEST);
	if (p + 1 == end)
		goto incomplete;
	if (p[1] != '\n')
		return err_at(buf, p + 1, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_REQUEST);
	if ((size_t)(p - buf) > lim->max_line)
		return H1_E_URI_TOO_LONG;
	if (v == 0)
		return H1_E_BAD_VERSION;
	if (!target_form_ok(req->method, req->method_len, req->target, req->target_len))
		return err_at(buf, p, lim->max_line, H1_E_URI_TOO_LONG, H1_E_BAD_TARGET);
	*after = p + 2;
	return 0;

incomplete:
	return line_incomplete(buf, len, lim->max_line, H1_E_URI_TOO_LONG);
}

typedef int (*start_line_fn)(const char *buf, size_t len, const struct h1_limits *lim,
			     void *msg, const char **after);

/* A message head: its start line (request or status line), then fields. */
static int parse_head(const char *buf, size_t len, size_t last_len, const struct h1_limits *lim,
		      start_line_fn start, void *msg, struct h1_header *headers,
		      size_t *num_headers)
{
	struct h1_limits def;
	const char *p;
	int r;

	ensure_tables();
	if (!lim) {
		h1_limits_default(&def);
		lim = &def;
	}
	if (!need_reparse(buf, len, last_len, lim))
		return -EAGAIN;
	r = start(buf, len, lim, msg, &p);
	if (r)
		return r;
	return parse_fields(buf, len, p, lim, headers, num_headers);
}

int h1_parse_request(const char *buf, size_t len, size_t last_len, const struct h1_limits *lim,
		     struct h1_request *req, struct h1_header *headers, size_t *num_headers)
{
	return parse_head(buf, len, last_len, lim, parse_request_line, req, headers, num_headers);
}

static int parse_status_line(const char *buf, size_t len, const struct h1_limits *lim,
			     void *msg, const char **after)
{
	struct h1_response *resp = msg;
	const char *p = buf, *end = buf + len, *r, *bad = buf;
	int v, i;

	v = parse_version(p, end, &resp->minor_version, &bad);
	if (v == -EAGAIN)
		goto incomplete;
	if (v <= 0)	/* a version other than 1.x is decided within 8 bytes */
		return err_at(buf, bad, lim->max_line, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_STATUS);
	p += 8;
	if (p == end)
		goto incomplete;
	if (*p != ' ')
		return err_at(buf, p, lim->max_line, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_STATUS);
	p++;
	resp->status = 0;
	for (i = 0; i < 3; i++, p++) {
		if (p == end)
			goto incomplete;
		if (!is_digit(*p))
			return err_at(buf, p, lim->max_line, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_STATUS);
		resp->status = resp->status * 10 + (*p - '0');
	}
	if (resp->status < 100 || resp->status > 599)
		return err_at(buf, p, lim->max_line, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_STATUS);
	if (p == end)
		goto incomplete;
	/* "HTTP/1.1 200\r\n" (no reason, no SP) is accepted for interop. */
	if (*p == ' ')
		p++;
	else if (*p != '\r')
		return err_at(buf, p, lim->max_line, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_STATUS);
	r = p;
	while (p < end && is_class((unsigned char)*p, C_FIELD))
		p++;
	if (p == end)
		goto incomplete;
	if (*p != '\r')
		return err_at(buf, p, lim->max_line, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_STATUS);
	if (p + 1 == end)
		goto incomplete;
	if (p[1] != '\n')
		return err_at(buf, p + 1, lim->max_line, H1_E_HEADERS_TOO_LARGE, H1_E_BAD_STATUS);
	if ((size_t)(p - buf) > lim->max_line)
		return H1_E_HEADERS_TOO_LARGE;
	resp->reason = r;
	resp->reason_len = (size_t)(p - r);
	*after = p + 2;
	return 0;

incomplete:
	return line_incomplete(buf, len, lim->max_line, H1_E_HEADERS_TOO_LARGE);
}

int h1_parse_response(const char *buf, size_t len, size_t last_len, const struct h1_limits *lim,
		      struct h1_response *resp, struct h1_header *headers, size_t *num_headers)
{
	return parse_head(buf, len, last_len, lim, parse_status_line, resp, headers, num_headers);
}

/* ---- lookups and framing ---- */

static int name_is(const struct h1_header *h, const char *name, size_t nlen)
{
	return h->name_len == nlen && !strncasecmp(h->name, name, nlen);
}

int h1_find_header(const struct h1_header *headers, size_t n, const char *name)
{
	size_t i, nlen = strlen(name);

	for (i = 0; i < n; i++)
		if (name_is(&headers[i], name, nlen))
			return (int)i;
	return -1;
}

/* Calls fn for each element of a comma-separated list (OWS trimmed; empty
 * elements included, as zero-length). Stops at the first non-zero result. */
static int for_each_elem(const char *v, size_t vlen, int (*fn)(const char *, size_t, void *),
			 void *arg)
{
	const char *p = v, *end = v + vlen;

	for (;;) {
		const char *s = p, *e;
		int r;

		while (p < end && *p != ',')
			p++;
		e = p;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		r = fn(s, (size_t)(e - s), arg);
		if (r)
			return r;
		if (p == end)
			return 0;
		p++;
	}
}

struct tok_find {
	const char *tok;
	size_t len;
};

static int tok_eq(const char *s, size_t n, void *arg)
{
	struct tok_find *f = arg;

	return n == f->len && !strncasecmp(s, f->tok, n);
}

int h1_header_has_token(const struct h1_header *headers, size_t n, const char *name,
			const char *token)
{
	struct tok_find f = { token, strlen(token) };
	size_t i, nlen = strlen(name);

	for (i = 0; i < n; i++)
		if (name_is(&headers[i], name, nlen) &&
		    for_each_elem(headers[i].value, headers[i].value_len, tok_eq, &f))
			return 1;
	return 0;
}

int h1_check_host(const struct h1_request *req, const struct h1_header *headers, size_t n)
{
	size_t i, hosts = 0;

	for (i = 0; i < n; i++)
		if (name_is(&headers[i], "host", 4))
			hosts++;
	if (hosts > 1 || (req->minor_version == 1 && hosts == 0))
		return H1_E_BAD_REQUEST;
	return 0;
}

struct te_state {
	int count;		/* codings seen */
	int chunked_at;		/* index of the last "chunked", -1 */
	int chunked_twice;
	int empty;
};

static int te_elem(const char *s, size_t n, void *arg)
{
	struct te_state *st = arg;

	if (n == 0) {
		st->empty = 1;
		return 0;
	}
	if (n == 7 && !strncasecmp(s, "chunked", 7)) {
		if (st->chunked_at >= 0)
			st->chunked_twice = 1;
		st->chunked_at = st->count;
	}
	st->count++;
	return 0;
}

static int parse_cl(const char *v, size_t n, uint64_t *out)
{
	uint64_t x = 0;
	size_t i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (!is_digit(v[i]))
			return -1;	/* sign, comma list, inner space, ... */
		if (x > (UINT64_MAX - (uint64_t)(v[i] - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = x;
	return 0;
}

int h1_body_framing(const struct h1_header *headers, size_t n, int is_request, int status,
		    int head_request, uint64_t *content_length)
{
	struct te_state te = { .chunked_at = -1 };
	int cl_seen = 0, te_seen = 0;
	uint64_t cl = 0;
	size_t i;

	if (!is_request && ((status >= 100 && status < 200) || status == 204 || status == 304 ||
			    head_request))
		return H1_BODY_NONE;
	for (i = 0; i < n; i++) {
		const struct h1_header *h = &headers[i];

		if (name_is(h, "content-length", 14)) {
			if (cl_seen || parse_cl(h->value, h->value_len, &cl))
				return H1_E_BAD_FRAMING;
			cl_seen = 1;
		} else if (name_is(h, "transfer-encoding", 17)) {
			te_seen = 1;
			for_each_elem(h->value, h->value_len, te_elem, &te);
		}
	}
	if (te_seen) {
		if (cl_seen || te.empty || te.chunked_twice)
			return H1_E_BAD_FRAMING;
		if (te.chunked_at == te.count - 1) {
			if (is_request && te.count > 1)
				return H1_E_NOT_IMPLEMENTED;
			return H1_BODY_CHUNKED;
		}
		if (is_request || te.chunked_at >= 0)
			return H1_E_BAD_FRAMING;	/* chunked not final */
		return H1_BODY_EOF;
	}
	if (cl_seen) {
		*content_length = cl;
		return H1_BODY_LENGTH;
	}
	return is_request ? H1_BODY_NONE : H1_BODY_EOF;
}

/* ---- chunked decoder (RFC 9112 7.1) ----
 *
 * Design notes: one byte-at-a-time state machine except for chunk data,
 * which is moved in bulk. States and transitions (CR/LF always as a strict
 * CRLF pair: a bare CR or LF anywhere is an error):
 *
 *   SIZE0 --hex--> SIZE --hex--> SIZE
 *                  SIZE --SP/HT--> SIZE_WS --SP/HT--> SIZE_WS
 *                  SIZE, SIZE_WS --;--> EXT_PRE
 *                  SIZE --CR--> SIZE_LF
 *   EXT_PRE --SP/HT--> EXT_PRE --tchar--> EXT_NAME
 *   EXT_NAME --tchar--> EXT_NAME, --SP/HT--> EXT_NAME_WS, --=--> EXT_EQ,
 *            --;--> EXT_PRE, --CR--> SIZE_LF
 *   EXT_NAME_WS --SP/HT--> itself, --=--> EXT_EQ, --;--> EXT_PRE
 *   EXT_EQ --SP/HT--> itself, --tchar--> EXT_TOK, --"--> EXT_QS
 *   EXT_TOK --tchar--> itself, --SP/HT--> EXT_VAL_WS, --;--> EXT_PRE, --CR--> SIZE_LF
 *   EXT_QS --qdtext--> itself, --\--> EXT_QP --quotable--> EXT_QS, --"--> EXT_QEND
 *   EXT_QEND --SP/HT--> EXT_VAL_WS, --;--> EXT_PRE, --CR--> SIZE_LF
 *   EXT_VAL_WS --SP/HT--> itself, --;--> EXT_PRE
 *   SIZE_LF --LF--> DATA (size > 0) or TRL_START (size 0)
 *   DATA --size bytes--> DATA_CR --CR--> DATA_LF --LF--> SIZE0
 *   TRL_START --CR--> TRL_END_LF --LF--> DONE
 *   TRL_START --tchar--> TRL_NAME --tchar--> itself, --:--> TRL_VAL
 *   TRL_VAL --field char--> itself, --CR--> TRL_LF --LF--> TRL_START
 *   any other byte in any state --> ERROR (sticky)
 *
 * Invariants:
 *  1. line_bytes counts the bytes of the current chunk-size line; it never
 *     exceeds H1_CHUNK_LINE_MAX (extensions cannot be used to make us work
 *     unboundedly per payload byte, cf. picohttpparser 3665241).
 *  2. A size has at most 16 significant hex digits (no uint64 overflow).
 *  3. trailer_bytes never exceeds H1_TRAILER_MAX.
 */
#define H1_CHUNK_LINE_MAX 4096
#define H1_TRAILER_MAX 16384

enum {
	CS_SIZE0, CS_SIZE, CS_SIZE_WS,
	CS_EXT_PRE, CS_EXT_NAME, CS_EXT_NAME_WS, CS_EXT_EQ, CS_EXT_TOK,
	CS_EXT_QS, CS_EXT_QP, CS_EXT_QEND, CS_EXT_VAL_WS,
	CS_SIZE_LF,
	CS_DATA, CS_DATA_CR, CS_DATA_LF,
	CS_TRL_START, CS_TRL_NAME, CS_TRL_VAL, CS_TRL_LF, CS_TRL_END_LF,
	CS_DONE, CS_ERROR,
};

void h1_chunked_init(struct h1_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CS_SIZE0;
}

int h1_chunked_done(const struct h1_chunked *c)
{
	return c->state == CS_DONE;
}

static int hexval(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int is_tchar(unsigned char ch)
{
	return is_class(ch, C_TCHAR);	/* tables set up by h1_decode_chunked */
}

static int is_ws(unsigned char ch)
{
	return ch == ' ' || ch == '\t';
}

/* field-vchar / obs-text / SP / HTAB */
static int is_field(unsigned char ch)
{
	return (ch >= 0x21 && ch <= 0x7e) || ch >= 0x80 || is_ws(ch);
}

/* qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
static int is_qdtext(unsigned char ch)
{
	return is_ws(ch) || ch == 0x21 || (ch >= 0x23 && ch <= 0x5b) || (ch >= 0x5d && ch <= 0x7e) ||
	       ch >= 0x80;
}

/* One byte of a chunk-size line or trailer section; returns the next state. */
static int step(struct h1_chunked *c, unsigned char ch)
{
	int h;

	switch (c->state) {
	case CS_SIZE0:
		h = hexval(ch);
		if (h < 0)
			return CS_ERROR;
		c->remaining = (uint64_t)h;
		return CS_SIZE;
	case CS_SIZE:
		h = hexval(ch);
		if (h >= 0) {
			/* Invariant 2: leading zeros are free, 16 significant digits max. */
			if (c->remaining >> 60)
				return CS_ERROR;
			c->remaining = c->remaining << 4 | (uint64_t)h;
			return CS_SIZE;
		}
		if (ch == '\r')
			return CS_SIZE_LF;
		if (ch == ';')
			return CS_EXT_PRE;
		if (is_ws(ch))
			return CS_SIZE_WS;
		return CS_ERROR;
	case CS_SIZE_WS:
		if (is_ws(ch))
			return CS_SIZE_WS;
		return ch == ';' ? CS_EXT_PRE : CS_ERROR;
	case CS_EXT_PRE:
		if (is_ws(ch))
			return CS_EXT_PRE;
		return is_tchar(ch) ? CS_EXT_NAME : CS_ERROR;
	case CS_EXT_NAME:
		if (is_tchar(ch))
			return CS_EXT_NAME;
		if (is_ws(ch))
			return CS_EXT_NAME_WS;
		if (ch == '=')
			return CS_EXT_EQ;
		if (ch == ';')
			return CS_EXT_PRE;
		return ch == '\r' ? CS_SIZE_LF : CS_ERROR;
	case CS_EXT_NAME_WS:
		if (is_ws(ch))
			return CS_EXT_NAME_WS;
		if (ch == '=')
			return CS_EXT_EQ;
		return ch == ';' ? CS_EXT_PRE : CS_ERROR;
	case CS_EXT_EQ:
		if (is_ws(ch))
			return CS_EXT_EQ;
		if (ch == '"')
			return CS_EXT_QS;
		return is_tchar(ch) ? CS_EXT_TOK : CS_ERROR;
	case CS_EXT_TOK:
		if (is_tchar(ch))
			return CS_EXT_TOK;
		if (is_ws(ch))
			return CS_EXT_VAL_WS;
		if (ch == ';')
			return CS_EXT_PRE;
		return ch == '\r' ? CS_SIZE_LF : CS_ERROR;
	case CS_EXT_QS:
		if (ch == '"')
			return CS_EXT_QEND;
		if (ch == '\\')
			return CS_EXT_QP;
		return is_qdtext(ch) ? CS_EXT_QS : CS_ERROR;
	case CS_EXT_QP:
		return is_field(ch) ? CS_EXT_QS : CS_ERROR;
	case CS_EXT_QEND:
		if (is_ws(ch))
			return CS_EXT_VAL_WS;
		if (ch == ';')
			return CS_EXT_PRE;
		return ch == '\r' ? CS_SIZE_LF : CS_ERROR;
	case CS_EXT_VAL_WS:
		if (is_ws(ch))
			return CS_EXT_VAL_WS;
		return ch == ';' ? CS_EXT_PRE : CS_ERROR;
	case CS_SIZE_LF:
		if (ch != '\n')
			return CS_ERROR;
		if (c->remaining)
			return CS_DATA;
		c->trailer_bytes = 0;
		return CS_TRL_START;
	case CS_DATA_CR:
		return ch == '\r' ? CS_DATA_LF : CS_ERROR;
	case CS_DATA_LF:
		return ch == '\n' ? CS_SIZE0 : CS_ERROR;
	case CS_TRL_START:
		if (ch == '\r')
			return CS_TRL_END_LF;
		return is_tchar(ch) ? CS_TRL_NAME : CS_ERROR;	/* SP/HT = obs-fold */
	case CS_TRL_NAME:
		if (is_tchar(ch))
			return CS_TRL_NAME;
		return ch == ':' ? CS_TRL_VAL : CS_ERROR;
	case CS_TRL_VAL:
		if (is_field(ch))
			return CS_TRL_VAL;
		return ch == '\r' ? CS_TRL_LF : CS_ERROR;
	case CS_TRL_LF:
		return ch == '\n' ? CS_TRL_START : CS_ERROR;
	case CS_TRL_END_LF:
		return ch == '\n' ? CS_DONE : CS_ERROR;
	}
	return CS_ERROR;
}

static int in_size_line(int state)
{
	return state >= CS_SIZE0 && state <= CS_SIZE_LF;
}

static int in_trailers(int state)
{
	return state >= CS_TRL_START && state <= CS_TRL_END_LF;
}

ssize_t h1_decode_chunked(struct h1_chunked *c, char *buf, size_t *len)
{
	size_t src = 0, dst = 0, n = *len, left;

	ensure_tables();
	while (src < n && c->state != CS_DONE && c->state != CS_ERROR) {
		if (c->state == CS_DATA) {
			size_t take = n - src;

			if ((uint64_t)take > c->remaining)
				take = (size_t)c->remaining;
			if (dst != src)
				memmove(buf + dst, buf + src, take);
			dst += take;
			src += take;
			c->remaining -= take;
			if (!c->remaining)
				c->state = CS_DATA_CR;
			continue;
		}
		if (c->state == CS_SIZE0)
			c->line_bytes = 0;
		c->state = step(c, (unsigned char)buf[src++]);
		if (in_size_line(c->state) && ++c->line_bytes > H1_CHUNK_LINE_MAX)
			c->state = CS_ERROR;	/* invariant 1 */
		else if (in_trailers(c->state) && ++c->trailer_bytes > H1_TRAILER_MAX)
			c->state = CS_ERROR;	/* invariant 3 */
	}
	*len = dst;
	if (c->state == CS_ERROR)
		return H1_E_BAD_CHUNK;
	if (c->state != CS_DONE)
		return 0;
	left = n - src;
	if (left && dst != src)
		memmove(buf + dst, buf + src, left);
	return (ssize_t)left;
}
