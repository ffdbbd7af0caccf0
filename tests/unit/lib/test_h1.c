/* test_h1.c — the HTTP/1 parser, table-driven (HAProxy http-messaging
 * reg-tests in spirit): every case lists its bytes and the exact outcome.
 * Each head case is checked three ways: whole, fed byte by byte (every
 * prefix in its own exact-size heap block, so ASan sees any over-read), and
 * whole at the very end of a page followed by a PROT_NONE page. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/h1.h"

#define OK 0	/* expect: head complete, consumed == whole input */
#define L(s) s, sizeof(s) - 1

enum lims { DEF, SMALL };

struct head_case {
	const char *name;
	const char *in;
	size_t len;
	int expect;
	enum lims lims;
};

/* SMALL limits: 32-byte line, 128-byte head, 4 headers. */
static const struct head_case req_cases[] = {
	{ "simple GET", L("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), OK },
	{ "HTTP/1.0, no headers", L("GET /x?y=1 HTTP/1.0\r\n\r\n"), OK },
	{ "leading empty line skipped", L("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), OK },
	{ "POST with Content-Length", L("POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n"), OK },
	{ "absolute-form target", L("GET http://a.b/c HTTP/1.1\r\nHost: a.b\r\n\r\n"), OK },
	{ "CONNECT authority-form", L("CONNECT a.b:443 HTTP/1.1\r\nHost: a.b:443\r\n\r\n"), OK },
	{ "OPTIONS *", L("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), OK },
	{ "extension method token", L("PURGE / HTTP/1.1\r\n\r\n"), OK },
	{ "obs-text in value", L("GET / HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n"), OK },
	{ "empty value", L("GET / HTTP/1.1\r\nX:\r\n\r\n"), OK },
	{ "tab inside value", L("GET / HTTP/1.1\r\nX: a\tb\r\n\r\n"), OK },
	{ "GET *", L("GET * HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "CONNECT origin-form", L("CONNECT / HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "CONNECT without port", L("CONNECT a.b HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "relative target", L("GET foo HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "fragment in target", L("GET /a#b HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "CTL in target", L("GET /a\x01 HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "raw UTF-8 in target", L("GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "two spaces before target", L("GET  / HTTP/1.1\r\n\r\n"), H1_E_BAD_TARGET },
	{ "space inside target", L("GET /a b HTTP/1.1\r\n\r\n"), H1_E_BAD_REQUEST },
	{ "obs-fold", L("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"), H1_E_BAD_HEADER },
	{ "whitespace before first header", L("GET / HTTP/1.1\r\n X: a\r\n\r\n"), H1_E_BAD_HEADER },
	{ "space before colon", L("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), H1_E_BAD_HEADER },
	{ "tab before colon", L("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"), H1_E_BAD_HEADER },
	{ "empty header name", L("GET / HTTP/1.1\r\n: a\r\n\r\n"), H1_E_BAD_HEADER },
	{ "NUL in header name", L("GET / HTTP/1.1\r\nX\0Y: a\r\n\r\n"), H1_E_BAD_HEADER },
	{ "NUL in header value", L("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"), H1_E_BAD_HEADER },
	{ "bare CR in value", L("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"), H1_E_BAD_HEADER },
	{ "bare LF ends a field line", L("GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n"), H1_E_BAD_HEADER },
	{ "bare LF ends the head", L("GET / HTTP/1.1\r\nX: a\r\n\n"), H1_E_BAD_HEADER },
	{ "CR CR ends the head", L("GET / HTTP/1.1\r\nX: a\r\n\r\r"), H1_E_BAD_HEADER },
	{ "DEL in value", L("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n"), H1_E_BAD_HEADER },
	{ "non-tchar in name", L("GET / HTTP/1.1\r\nX(y): a\r\n\r\n"), H1_E_BAD_HEADER },
	{ "name without colon", L("GET / HTTP/1.1\r\nXY\r\n\r\n"), H1_E_BAD_HEADER },
	{ "bare LF ends request line", L("GET / HTTP/1.1\nHost: a\r\n\r\n"), H1_E_BAD_REQUEST },
	{ "lone CR before request line", L("\rGET / HTTP/1.1\r\n\r\n"), H1_E_BAD_REQUEST },
	{ "bare LF before request line", L("\nGET / HTTP/1.1\r\n\r\n"), H1_E_BAD_REQUEST },
	{ "HTTP/0.9 request", L("GET /\r\n"), H1_E_BAD_VERSION },
	{ "HTTP/2.0 version", L("GET / HTTP/2.0\r\n\r\n"), H1_E_BAD_VERSION },
	{ "HTTP/1.2 version", L("GET / HTTP/1.2\r\n\r\n"), H1_E_BAD_VERSION },
	{ "HTTP/0.9 version token", L("GET / HTTP/0.9\r\n\r\n"), H1_E_BAD_VERSION },
	{ "lower-case version", L("GET / http/1.1\r\n\r\n"), H1_E_BAD_REQUEST },
	{ "space after version", L("GET / HTTP/1.1 \r\n\r\n"), H1_E_BAD_REQUEST },
	{ "three-digit minor", L("GET / HTTP/1.10\r\n\r\n"), H1_E_BAD_REQUEST },
	{ "bad char in method", L("G(ET / HTTP/1.1\r\n\r\n"), H1_E_BAD_METHOD },
	{ "CTL in method", L("GE\x01T / HTTP/1.1\r\n\r\n"), H1_E_BAD_METHOD },
	{ "empty method", L(" / HTTP/1.1\r\n\r\n"), H1_E_BAD_METHOD },
	{ "tab after method", L("GET\t/ HTTP/1.1\r\n\r\n"), H1_E_BAD_METHOD },
	{ "line at limit (32)", L("GET /234567890123456789 HTTP/1.1\r\n\r\n"), OK, SMALL },
	{ "line over limit (33)", L("GET /2345678901234567890 HTTP/1.1\r\n\r\n"), H1_E_URI_TOO_LONG, SMALL },
	{ "endless request line", L("GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), H1_E_URI_TOO_LONG, SMALL },
	{ "bad byte past the line limit", L("GET /2345678901234567890123456789\x01 HTTP/1.1\r\n\r\n"),
	  H1_E_URI_TOO_LONG, SMALL },
	{ "4 headers (limit)", L("GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n\r\n"), OK, SMALL },
	{ "5 headers (over)", L("GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\ne: 5\r\n\r\n"),
	  H1_E_HEADERS_TOO_LARGE, SMALL },
	{ "head of 128 bytes (limit)",
	  L("GET / HTTP/1.1\r\nx: 012345678901234567890123456789012345678901234567890123456789"
	    "012345678901234567890123456789012345678901234\r\n\r\n"), OK, SMALL },
	{ "head of 129 bytes (over)",
	  L("GET / HTTP/1.1\r\nx: 012345678901234567890123456789012345678901234567890123456789"
	    "0123456789012345678901234567890123456789012345\r\n\r\n"), H1_E_HEADERS_TOO_LARGE, SMALL },
	{ "endless header value",
	  L("GET / HTTP/1.1\r\nx: 0123456789012345678901234567890123456789012345678901234567"
	    "8901234567890123456789012345678901234567890123456789"), H1_E_HEADERS_TOO_LARGE, SMALL },
};

static const struct head_case resp_cases[] = {
	{ "200 OK", L("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), OK },
	{ "HTTP/1.0 404", L("HTTP/1.0 404 Not Found\r\n\r\n"), OK },
	{ "no reason, no space", L("HTTP/1.1 200\r\n\r\n"), OK },
	{ "empty reason", L("HTTP/1.1 204 \r\n\r\n"), OK },
	{ "reason with obs-text", L("HTTP/1.1 200 \xc3\xa9\r\n\r\n"), OK },
	{ "HTTP/2 status line", L("HTTP/2 200 OK\r\n\r\n"), H1_E_BAD_STATUS },
	{ "HTTP/2.0 version", L("HTTP/2.0 200 OK\r\n\r\n"), H1_E_BAD_STATUS },
	{ "ICY status line", L("ICY 200 OK\r\n\r\n"), H1_E_BAD_STATUS },
	{ "two-digit status", L("HTTP/1.1 20 OK\r\n\r\n"), H1_E_BAD_STATUS },
	{ "four-digit status", L("HTTP/1.1 2000 OK\r\n\r\n"), H1_E_BAD_STATUS },
	{ "status 099", L("HTTP/1.1 099 X\r\n\r\n"), H1_E_BAD_STATUS },
	{ "status 600", L("HTTP/1.1 600 X\r\n\r\n"), H1_E_BAD_STATUS },
	{ "bare LF after status", L("HTTP/1.1 200 OK\n\r\n"), H1_E_BAD_STATUS },
	{ "NUL in reason", L("HTTP/1.1 200 O\0K\r\n\r\n"), H1_E_BAD_STATUS },
	{ "obs-fold in response", L("HTTP/1.1 200 OK\r\nX: a\r\n\tb\r\n\r\n"), H1_E_BAD_HEADER },
	{ "space before colon", L("HTTP/1.1 200 OK\r\nX : a\r\n\r\n"), H1_E_BAD_HEADER },
	{ "status line over limit", L("HTTP/1.1 200 0123456789012345678901234\r\n\r\n"),
	  H1_E_HEADERS_TOO_LARGE, SMALL },
};

static void set_lims(struct h1_limits *l, enum lims which)
{
	h1_limits_default(l);
	if (which == SMALL) {
		l->max_line = 32;
		l->max_head = 128;
		l->max_headers = 4;
	}
}

static int parse(int is_req, const char *buf, size_t len, size_t last_len,
		 const struct h1_limits *lim, size_t *nh)
{
	struct h1_header hdrs[200];
	struct h1_request req;
	struct h1_response resp;

	*nh = 200;
	if (is_req)
		return h1_parse_request(buf, len, last_len, lim, &req, hdrs, nh);
	return h1_parse_response(buf, len, last_len, lim, &resp, hdrs, nh);
}

/* Whole buffer at the end of a page, followed by a PROT_NONE page. */
static char *guard_base;
static long page;

static int parse_guarded(int is_req, const char *in, size_t len, const struct h1_limits *lim)
{
	char *p;
	size_t nh;

	if (len > (size_t)page)
		return parse(is_req, in, len, 0, lim, &nh);
	p = guard_base + page - len;
	memcpy(p, in, len);
	return parse(is_req, p, len, 0, lim, &nh);
}

static void run_head_cases(int is_req, const struct head_case *cases, size_t n)
{
	size_t i, k, nh;

	for (i = 0; i < n; i++) {
		const struct head_case *c = &cases[i];
		struct h1_limits lim;
		int want = c->expect == OK ? (int)c->len : c->expect;
		int whole, drip = -EAGAIN, at = 0, ok_prefixes = 1;
		size_t last = 0;

		set_lims(&lim, c->lims);
		whole = parse(is_req, c->in, c->len, 0, &lim, &nh);
		if (c->expect == OK && c->in[c->len - 1] != '\n')
			want = -EAGAIN;
		is_int(whole, want, "%s %s: whole", is_req ? "req" : "resp", c->name);
		/* Byte by byte, each prefix in an exact-size heap block. */
		for (k = 1; k <= c->len && drip == -EAGAIN; k++) {
			char *b = malloc(k);

			memcpy(b, c->in, k);
			drip = parse(is_req, b, k, last, &lim, &nh);
			free(b);
			last = k;
			at = (int)k;
		}
		is_int(drip, want, "%s %s: byte by byte (decided at %d of %zu)", is_req ? "req" : "resp",
		       c->name, at, c->len);
		if (c->expect == OK && drip > 0 && at != (int)c->len)
			ok_prefixes = 0;
		ok(ok_prefixes, "%s %s: success only once the head is complete", is_req ? "req" : "resp",
		   c->name);
		is_int(parse_guarded(is_req, c->in, c->len, &lim), want, "%s %s: at a guard page",
		       is_req ? "req" : "resp", c->name);
	}
}

/* Fields of a parsed request and response. */
static void test_fields(void)
{
	const char *in = "\r\nPOST /a?b=c HTTP/1.0\r\nHost: x\r\nX-Trim: \t a b \t\r\nEmpty:\r\n\r\nBODY";
	struct h1_header h[8];
	struct h1_request req;
	struct h1_response resp;
	size_t nh = 8;
	int r;

	r = h1_parse_request(in, strlen(in), 0, NULL, &req, h, &nh);
	is_int(r, (int)strlen(in) - 4, "consumed stops before the body");
	ok(req.method_len == 4 && !memcmp(req.method, "POST", 4), "method");
	ok(req.target_len == 6 && !memcmp(req.target, "/a?b=c", 6), "target");
	is_int(req.minor_version, 0, "minor version");
	is_int(nh, 3, "three headers");
	ok(h[1].value_len == 3 && !memcmp(h[1].value, "a b", 3), "value OWS trimmed both sides");
	is_int(h[2].value_len, 0, "empty value");
	is_int(h1_find_header(h, nh, "x-trim"), 1, "find_header is case-insensitive");
	is_int(h1_find_header(h, nh, "nope"), -1, "find_header miss");
	is_int(h1_check_host(&req, h, nh), 0, "one Host is fine");

	in = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n";
	nh = 8;
	r = h1_parse_response(in, strlen(in), 0, NULL, &resp, h, &nh);
	is_int(r, (int)strlen(in), "response consumed");
	is_int(resp.status, 503, "status");
	ok(resp.reason_len == 19 && !memcmp(resp.reason, "Service Unavailable", 19), "reason");

	/* Caller's array smaller than max_headers caps the count. */
	in = "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\n\r\n";
	nh = 2;
	r = h1_parse_request(in, strlen(in), 0, NULL, &req, h, &nh);
	is_int(r, H1_E_HEADERS_TOO_LARGE, "more headers than the caller's array: 431");

	/* Host rules. */
	in = "GET / HTTP/1.1\r\nA: 1\r\n\r\n";
	nh = 8;
	h1_parse_request(in, strlen(in), 0, NULL, &req, h, &nh);
	is_int(h1_check_host(&req, h, nh), H1_E_BAD_REQUEST, "HTTP/1.1 without Host: 400");
	in = "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n";
	nh = 8;
	h1_parse_request(in, strlen(in), 0, NULL, &req, h, &nh);
	is_int(h1_check_host(&req, h, nh), H1_E_BAD_REQUEST, "two Host lines: 400");
	in = "GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n";
	nh = 8;
	h1_parse_request(in, strlen(in), 0, NULL, &req, h, &nh);
	ok(h1_header_has_token(h, nh, "connection", "close"), "Connection token found in a list");
	ok(!h1_header_has_token(h, nh, "connection", "upgrade"), "absent token");
}

/* ---- framing ---- */

struct framing_case {
	const char *name;
	const char *hdrs;	/* field lines, CRLF-terminated */
	int is_request, status, head;
	int expect;		/* enum h1_framing or H1_E_* */
	uint64_t cl;
};

static const struct framing_case framing_cases[] = {
	{ "no CL/TE", "Host: a\r\n", 1, 0, 0, H1_BODY_NONE },
	{ "CL 10", "Content-Length: 10\r\n", 1, 0, 0, H1_BODY_LENGTH, 10 },
	{ "CL 0", "Content-Length: 0\r\n", 1, 0, 0, H1_BODY_LENGTH, 0 },
	{ "CL max u64", "Content-Length: 18446744073709551615\r\n", 1, 0, 0, H1_BODY_LENGTH,
	  UINT64_MAX },
	{ "CL overflow", "Content-Length: 18446744073709551616\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "CL repeated, equal", "Content-Length: 5\r\nContent-Length: 5\r\n", 1, 0, 0,
	  H1_E_BAD_FRAMING },
	{ "CL list, equal", "Content-Length: 5, 5\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "CL conflicting", "Content-Length: 5\r\ncontent-length: 6\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "CL empty", "Content-Length:\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "CL plus sign", "Content-Length: +5\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "CL negative", "Content-Length: -1\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "CL inner space", "Content-Length: 1 0\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "CL hex", "Content-Length: 0x10\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE chunked", "Transfer-Encoding: chunked\r\n", 1, 0, 0, H1_BODY_CHUNKED },
	{ "TE Chunked (case)", "transfer-encoding: ChUnKeD\r\n", 1, 0, 0, H1_BODY_CHUNKED },
	{ "CL + TE", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 1, 0, 0,
	  H1_E_BAD_FRAMING },
	{ "TE + CL", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 1, 0, 0,
	  H1_E_BAD_FRAMING },
	{ "TE gzip, chunked", "Transfer-Encoding: gzip, chunked\r\n", 1, 0, 0,
	  H1_E_NOT_IMPLEMENTED },
	{ "TE gzip + chunked lines", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 1,
	  0, 0, H1_E_NOT_IMPLEMENTED },
	{ "TE chunked, gzip", "Transfer-Encoding: chunked, gzip\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE gzip", "Transfer-Encoding: gzip\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE identity", "Transfer-Encoding: identity\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE chunked twice", "Transfer-Encoding: chunked, chunked\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE chunked twice (lines)", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
	  1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE empty", "Transfer-Encoding:\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE empty element", "Transfer-Encoding: , chunked\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE xchunked", "Transfer-Encoding: xchunked\r\n", 1, 0, 0, H1_E_BAD_FRAMING },
	{ "TE chunked with params", "Transfer-Encoding: chunked;q=1\r\n", 1, 0, 0,
	  H1_E_BAD_FRAMING },
	{ "resp 200 no framing", "Server: x\r\n", 0, 200, 0, H1_BODY_EOF },
	{ "resp 200 CL", "Content-Length: 7\r\n", 0, 200, 0, H1_BODY_LENGTH, 7 },
	{ "resp 204 with CL", "Content-Length: 7\r\n", 0, 204, 0, H1_BODY_NONE },
	{ "resp 304", "Content-Length: 7\r\n", 0, 304, 0, H1_BODY_NONE },
	{ "resp 101", "Upgrade: x\r\n", 0, 101, 0, H1_BODY_NONE },
	{ "resp to HEAD", "Content-Length: 7\r\n", 0, 200, 1, H1_BODY_NONE },
	{ "resp TE gzip", "Transfer-Encoding: gzip\r\n", 0, 200, 0, H1_BODY_EOF },
	{ "resp TE gzip, chunked", "Transfer-Encoding: gzip, chunked\r\n", 0, 200, 0,
	  H1_BODY_CHUNKED },
	{ "resp TE chunked, gzip", "Transfer-Encoding: chunked, gzip\r\n", 0, 200, 0,
	  H1_E_BAD_FRAMING },
	{ "resp CL + TE", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 0, 200, 0,
	  H1_E_BAD_FRAMING },
	{ "resp CL repeated", "Content-Length: 5\r\nContent-Length: 5\r\n", 0, 200, 0,
	  H1_E_BAD_FRAMING },
};

static void test_framing(void)
{
	size_t i;

	for (i = 0; i < sizeof(framing_cases) / sizeof(framing_cases[0]); i++) {
		const struct framing_case *c = &framing_cases[i];
		char buf[512];
		struct h1_header h[16];
		struct h1_request req;
		size_t nh = 16;
		uint64_t cl = 12345;
		int r, n;

		n = snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\n%s\r\n", c->hdrs);
		r = h1_parse_request(buf, (size_t)n, 0, NULL, &req, h, &nh);
		if (!ok(r == n, "framing %s: head parses", c->name))
			continue;
		r = h1_body_framing(h, nh, c->is_request, c->status, c->head, &cl);
		is_int(r, c->expect, "framing %s", c->name);
		if (c->expect == H1_BODY_LENGTH && cl != c->cl)
			ok(0, "framing %s: content length %llu", c->name, (unsigned long long)cl);
	}
}

/* ---- chunked ---- */

struct chunk_case {
	const char *name;
	const char *in;
	size_t len;
	int expect;		/* 1 = complete, 0 = needs more, H1_E_BAD_CHUNK */
	const char *body;	/* decoded payload when expect >= 0 */
	const char *left;	/* leftover after the end */
};

static const struct chunk_case chunk_cases[] = {
	{ "one chunk", L("5\r\nhello\r\n0\r\n\r\n"), 1, "hello", "" },
	{ "leftover pipelined request", L("5\r\nhello\r\n0\r\n\r\nGET"), 1, "hello", "GET" },
	{ "two chunks", L("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), 1, "abcde", "" },
	{ "upper-case hex", L("A\r\n0123456789\r\n0\r\n\r\n"), 1, "0123456789", "" },
	{ "lower-case hex", L("a\r\n0123456789\r\n0\r\n\r\n"), 1, "0123456789", "" },
	{ "leading zeros", L("00000000000000000005\r\nhello\r\n0\r\n\r\n"), 1, "hello", "" },
	{ "ext name=value", L("5;foo=bar\r\nhello\r\n0\r\n\r\n"), 1, "hello", "" },
	{ "ext with BWS", L("5 ; foo = bar\r\nhello\r\n0\r\n\r\n"), 1, "hello", "" },
	{ "ext name only", L("5;foo\r\nhello\r\n0\r\n\r\n"), 1, "hello", "" },
	{ "ext quoted", L("5;foo=\"b\\\"a;r\"\r\nhello\r\n0\r\n\r\n"), 1, "hello", "" },
	{ "two exts", L("5;a=1;b=2\r\nhello\r\n0;last\r\n\r\n"), 1, "hello", "" },
	{ "trailer", L("5\r\nhello\r\n0\r\nX-T: 1\r\nY:2\r\n\r\n"), 1, "hello", "" },
	{ "incomplete data", L("5\r\nhel"), 0, "hel", "" },
	{ "incomplete trailers", L("5\r\nhello\r\n0\r\nX: 1\r\n"), 0, "hello", "" },
	{ "ext semicolon alone", L("5;\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext empty name", L("5;=x\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext empty value", L("5;foo=\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext two words", L("5;foo bar\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext value two words", L("5;foo=bar baz\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext trailing space", L("5;foo=bar \r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext unterminated quote", L("5;foo=\"bar\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext bare LF", L("5;foo\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "ext NUL", L("5;f\0o\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size leading space", L(" 5\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size trailing space", L("5 \r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size junk", L("5x\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size 0x prefix", L("0x5\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size sign", L("+5\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size negative", L("-5\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size empty", L("\r\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size 17 hex digits", L("10000000000000000\r\n"), H1_E_BAD_CHUNK },
	{ "size bare LF", L("5\nhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "size bare CR", L("5\rhello\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "data too long", L("5\r\nhelloX\r\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "data then bare LF", L("5\r\nhello\n0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "last chunk bare LF", L("0\r\n\n"), H1_E_BAD_CHUNK },
	{ "trailer ws before colon", L("0\r\nX-T : 1\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "trailer obs-fold", L("0\r\nX: 1\r\n 2\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "trailer empty name", L("0\r\n: 1\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "trailer NUL", L("0\r\nX: a\0\r\n\r\n"), H1_E_BAD_CHUNK },
	{ "trailer no colon", L("0\r\nX\r\n\r\n"), H1_E_BAD_CHUNK },
};

/* feed = 0: whole; else in pieces of `feed` bytes. */
static void chunk_run(const struct chunk_case *c, size_t feed, char *body, size_t *blen,
		      ssize_t *res, char *left, size_t *llen)
{
	struct h1_chunked st;
	size_t off = 0;

	h1_chunked_init(&st);
	*blen = 0;
	*llen = 0;
	*res = 0;
	while (off < c->len) {
		size_t n = feed ? feed : c->len;
		char *b;
		ssize_t r;

		if (n > c->len - off)
			n = c->len - off;
		b = malloc(n);
		memcpy(b, c->in + off, n);
		off += n;
		r = h1_decode_chunked(&st, b, &n);
		memcpy(body + *blen, b, n);
		*blen += n;
		if (r > 0) {
			memcpy(left, b + n, (size_t)r);
			*llen = (size_t)r;
		}
		free(b);
		*res = r;
		if (r < 0 || h1_chunked_done(&st)) {
			/* The rest of the input is leftover too. */
			memcpy(left + *llen, c->in + off, c->len - off);
			*llen += c->len - off;
			if (r >= 0)
				*res = 1;
			return;
		}
	}
}

static void test_chunked(void)
{
	static const size_t feeds[] = { 0, 1, 2, 7 };
	size_t i, f;

	for (i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
		const struct chunk_case *c = &chunk_cases[i];

		for (f = 0; f < 4; f++) {
			char body[256], left[256];
			size_t blen, llen;
			ssize_t r;
			int good;

			chunk_run(c, feeds[f], body, &blen, &r, left, &llen);
			if (c->expect < 0) {
				is_int(r, c->expect, "chunked %s (feed %zu)", c->name, feeds[f]);
				continue;
			}
			good = r == c->expect && blen == strlen(c->body) &&
			       !memcmp(body, c->body, blen) && llen == strlen(c->left) &&
			       !memcmp(left, c->left, llen);
			if (!ok(good, "chunked %s (feed %zu)", c->name, feeds[f]))
				diag("result %zd, body %.*s, leftover %.*s", r, (int)blen, body,
				     (int)llen, left);
		}
	}
}

static void test_chunked_limits(void)
{
	struct h1_chunked st;
	char *b = malloc(70000);
	size_t n;
	ssize_t r;

	/* A 5000-byte extension: over the 4 KiB size-line limit. */
	memcpy(b, "5;x=", 4);
	memset(b + 4, 'a', 5000);
	memcpy(b + 5004, "\r\nhello\r\n", 9);
	n = 5013;
	h1_chunked_init(&st);
	r = h1_decode_chunked(&st, b, &n);
	is_int(r, H1_E_BAD_CHUNK, "chunk-size line over 4 KiB rejected");
	n = 1;
	is_int(h1_decode_chunked(&st, b, &n), H1_E_BAD_CHUNK, "errors are sticky");

	/* 20 KiB of trailers: over the 16 KiB limit. */
	memcpy(b, "0\r\n", 3);
	n = 3;
	for (int i = 0; i < 2000; i++) {
		memcpy(b + n, "X-Abcdef: 1\r\n", 13);
		n += 13;
	}
	memcpy(b + n, "\r\n", 2);
	n += 2;
	h1_chunked_init(&st);
	r = h1_decode_chunked(&st, b, &n);
	is_int(r, H1_E_BAD_CHUNK, "trailer section over 16 KiB rejected");

	/* A large chunk passes through in pieces. */
	h1_chunked_init(&st);
	memcpy(b, "10000\r\n", 7);
	memset(b + 7, 'z', 65536);
	memcpy(b + 7 + 65536, "\r\n0\r\n\r\n", 7);
	n = 7 + 65536 + 7;
	r = h1_decode_chunked(&st, b, &n);
	ok(r == 0 && n == 65536 && h1_chunked_done(&st), "64 KiB chunk decoded in one call");
	free(b);
}

static void test_errors(void)
{
	is_int(h1_err_status(H1_E_BAD_REQUEST), 400, "BAD_REQUEST -> 400");
	is_int(h1_err_status(H1_E_URI_TOO_LONG), 414, "URI_TOO_LONG -> 414");
	is_int(h1_err_status(H1_E_HEADERS_TOO_LARGE), 431, "HEADERS_TOO_LARGE -> 431");
	is_int(h1_err_status(H1_E_BAD_VERSION), 505, "BAD_VERSION -> 505");
	is_int(h1_err_status(H1_E_BAD_METHOD), 400, "BAD_METHOD -> 400");
	is_int(h1_err_status(H1_E_BAD_TARGET), 400, "BAD_TARGET -> 400");
	is_int(h1_err_status(H1_E_BAD_HEADER), 400, "BAD_HEADER -> 400");
	is_int(h1_err_status(H1_E_BAD_FRAMING), 400, "BAD_FRAMING -> 400");
	is_int(h1_err_status(H1_E_BAD_CHUNK), 400, "BAD_CHUNK -> 400");
	is_int(h1_err_status(H1_E_NOT_IMPLEMENTED), 501, "NOT_IMPLEMENTED -> 501");
	is_int(h1_err_status(H1_E_BAD_STATUS), 502, "BAD_STATUS -> 502");
	ok(h1_err_str(H1_E_BAD_HEADER) == h1_err_str(H1_E_BAD_HEADER) &&
	   h1_err_str(H1_E_BAD_HEADER) != h1_err_str(H1_E_BAD_CHUNK),
	   "error strings are constants, comparable by pointer");
}

static void test_reason(void)
{
	const char *unknown = "?";

	is_str(h1_reason(200, unknown), "OK", "200 OK");
	is_str(h1_reason(404, unknown), "Not Found", "404 Not Found");
	is_str(h1_reason(308, unknown), "Permanent Redirect", "308 Permanent Redirect");
	is_str(h1_reason(431, unknown), "Request Header Fields Too Large", "431");
	is_str(h1_reason(503, unknown), "Service Unavailable", "503 Service Unavailable");
	ok(h1_reason(299, unknown) == unknown, "a status without a phrase gives the fallback");
	for (int st = 100; st < 600; st++)
		if (h1_reason(st, unknown) != unknown && !*h1_reason(st, unknown))
			ok(0, "status %d has an empty phrase", st);
}

int main(void)
{
	page = sysconf(_SC_PAGESIZE);
	guard_base = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (guard_base == MAP_FAILED || mprotect(guard_base + page, page, PROT_NONE)) {
		ok(0, "guard page mapping");
		return done_testing();
	}
	run_head_cases(1, req_cases, sizeof(req_cases) / sizeof(req_cases[0]));
	run_head_cases(0, resp_cases, sizeof(resp_cases) / sizeof(resp_cases[0]));
	test_fields();
	test_framing();
	test_chunked();
	test_chunked_limits();
	test_errors();
	test_reason();
	return done_testing();
}
