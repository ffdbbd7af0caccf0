/* h1.h — a strict, zero-copy, resumable HTTP/1.x parser (prefix h1_).
 *
 * picohttpparser's API shape: the caller owns the buffer and the header
 * array; names and values point into the buffer (no copies). The parser is
 * stateless over the head: call again with the grown buffer and the previous
 * length (last_len) after -EAGAIN; it resumes its scan where it can.
 *
 * Results (no macros hide a return):
 *   > 0        the head is complete; that many bytes were consumed.
 *   -EAGAIN    incomplete; read more and call again.
 *   H1_E_*     malformed; each maps to a status code (h1_err_status) and a
 *              constant string (h1_err_str). Never forwarded ambiguously.
 *
 * Strictness (request smuggling is the attack surface): no obsolete line
 * folding, no whitespace before the colon, no empty names, no NUL/CR/LF in
 * names or values, only tchar in names and methods, limits on the request
 * line and the header block. Message framing (Content-Length vs chunked) is
 * decided by h1_body_framing(), which rejects every ambiguous combination.
 */
#ifndef ZH_H1_H
#define ZH_H1_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum h1_err {
	H1_E_BAD_REQUEST = -1000,	/* generic malformed head → 400 */
	H1_E_URI_TOO_LONG,		/* request line over limit → 414 */
	H1_E_HEADERS_TOO_LARGE,		/* header block or count over limit → 431 */
	H1_E_BAD_VERSION,		/* not HTTP/1.0 or 1.1 (incl. HTTP/0.9) → 505/400 */
	H1_E_BAD_METHOD,		/* → 400 */
	H1_E_BAD_TARGET,		/* → 400 */
	H1_E_BAD_HEADER,		/* bad name/value chars, ws before colon, folding → 400 */
	H1_E_BAD_FRAMING,		/* CL+TE, bad TE, duplicate/conflicting CL → 400 (resp: 502) */
	H1_E_BAD_CHUNK,			/* chunk size/extension/terminator → 400 (resp: 502) */
	H1_E_BAD_STATUS,		/* response status line → 502 */
	H1_E_NOT_IMPLEMENTED,		/* request transfer coding other than chunked
					 * before a final chunked → 501 (resp: 502) */
};

/* HTTP status to answer a request error with: 400, 414, 431, 501 or 505
 * (docs/echo.md lists each case). A proxy answers 502 for any H1_E_* met
 * while parsing an upstream response. Unknown values give 400. */
int h1_err_status(int err);
const char *h1_err_str(int err);	/* constant string, compare by pointer */

/* The reason phrase of an HTTP status (RFC 9110: "OK", "Not Found", ...),
 * a constant string; `unknown` for a status without one here. */
const char *h1_reason(int status, const char *unknown);

struct h1_header {
	const char *name;
	size_t name_len;
	const char *value;	/* leading/trailing OWS stripped */
	size_t value_len;
};

struct h1_limits {
	size_t max_line;	/* request/status line, default 8 KiB */
	size_t max_head;	/* whole header block, default 64 KiB */
	size_t max_headers;	/* count, default 100 (also capped by caller's array) */
};

void h1_limits_default(struct h1_limits *l);

struct h1_request {
	const char *method;
	size_t method_len;
	const char *target;	/* request-target as sent */
	size_t target_len;
	int minor_version;	/* 0 or 1 */
};

struct h1_response {
	int minor_version;
	int status;
	const char *reason;
	size_t reason_len;
};

/* *num_headers is in: capacity of headers[]; out: count parsed (valid only
 * when the result is > 0). lim may be NULL for the defaults. last_len is
 * the buffer length at the previous call for this head (0 the first time):
 * bytes before it are only re-scanned when new bytes could change the
 * outcome (a new LF, or a limit crossed), so feeding a head byte by byte
 * costs O(lines x length), and gives the same result as feeding it whole.
 * Leading empty lines (CRLF) before a request line are skipped and counted
 * in the consumed length and in max_line. */
int h1_parse_request(const char *buf, size_t len, size_t last_len, const struct h1_limits *lim,
		     struct h1_request *req, struct h1_header *headers, size_t *num_headers);
int h1_parse_response(const char *buf, size_t len, size_t last_len, const struct h1_limits *lim,
		      struct h1_response *resp, struct h1_header *headers, size_t *num_headers);

/* Body framing of a parsed message (RFC 9112 section 6). */
enum h1_framing {
	H1_BODY_NONE,		/* no body (request without CL/TE, 1xx/204/304, HEAD reply) */
	H1_BODY_LENGTH,		/* Content-Length: *content_length bytes */
	H1_BODY_CHUNKED,	/* Transfer-Encoding ends in chunked */
	H1_BODY_EOF,		/* response delimited by close */
};

/* is_request: 1 for requests (no EOF framing allowed), 0 for responses;
 * status/head_request only matter for responses. Returns enum h1_framing
 * (>= 0) or an H1_E_* error. Strict choices (docs/echo.md):
 * - Content-Length with Transfer-Encoding: H1_E_BAD_FRAMING, both ways.
 * - More than one Content-Length (repeated lines or a list, even if equal),
 *   an empty one, anything but digits, or over 2^64-1: H1_E_BAD_FRAMING.
 * - Request Transfer-Encoding: exactly "chunked" → CHUNKED; other codings
 *   before a final chunked → H1_E_NOT_IMPLEMENTED (501); final coding not
 *   chunked, chunked twice, empty elements → H1_E_BAD_FRAMING (400).
 * - Response Transfer-Encoding ending in chunked → CHUNKED (other codings
 *   are passed on); not ending in chunked → EOF; chunked twice or empty
 *   elements → H1_E_BAD_FRAMING. */
int h1_body_framing(const struct h1_header *headers, size_t n, int is_request, int status,
		    int head_request, uint64_t *content_length);

/* Case-insensitive header lookup; returns index or -1. */
int h1_find_header(const struct h1_header *headers, size_t n, const char *name);

/* 1 when the comma-separated list value of header `name` (all its lines)
 * holds `token` (case-insensitive), e.g. Connection: close. */
int h1_header_has_token(const struct h1_header *headers, size_t n, const char *name,
			const char *token);

/* RFC 9112 3.2: an HTTP/1.1 request needs exactly one Host line, an
 * HTTP/1.0 request at most one. 0 or H1_E_BAD_REQUEST. */
int h1_check_host(const struct h1_request *req, const struct h1_header *headers, size_t n);

/* Incremental chunked-body decoder (in place, like phr_decode_chunked).
 * Zero the struct (or call h1_chunked_init) before the first call.
 * Accepts chunk extensions of RFC 9112 7.1.1 syntax (BWS ; name [= token or
 * quoted-string]) and ignores them; rejects anything else on a chunk-size
 * line, bare CR or LF, more than 16 hex digits, a size line over 4 KiB, and
 * trailer sections that are not strict field lines or exceed 16 KiB.
 * Trailer fields are validated and dropped. */
struct h1_chunked {
	int state;		/* private */
	uint64_t remaining;	/* private */
	size_t trailer_bytes;	/* private */
	size_t line_bytes;	/* private: bytes of the current chunk-size line */
};

void h1_chunked_init(struct h1_chunked *c);

/* Decodes buf[0..*len) in place, leaving the payload bytes compacted at the
 * start and setting *len to their count. Returns 0 when more input is needed,
 * > 0 = bytes of buf left over after the terminating chunk (the body ended;
 * they follow the payload, at buf[*len .. *len + result)), or H1_E_BAD_CHUNK
 * (then every later call fails too). Use h1_chunked_done() to test for the
 * end with no leftover. */
ssize_t h1_decode_chunked(struct h1_chunked *c, char *buf, size_t *len);
int h1_chunked_done(const struct h1_chunked *c);

#endif
