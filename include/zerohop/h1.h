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
};

int h1_err_status(int err);		/* HTTP status to answer a request error with */
const char *h1_err_str(int err);	/* constant string, compare by pointer */

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

/* *num_headers is in: capacity of headers[]; out: count parsed. */
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
 * (>= 0) or an H1_E_* error. */
int h1_body_framing(const struct h1_header *headers, size_t n, int is_request, int status,
		    int head_request, uint64_t *content_length);

/* Case-insensitive header lookup; returns index or -1. */
int h1_find_header(const struct h1_header *headers, size_t n, const char *name);

/* Incremental chunked-body decoder (in place, like phr_decode_chunked). */
struct h1_chunked {
	int state;		/* private */
	uint64_t remaining;	/* private */
	size_t trailer_bytes;	/* private */
};

/* Decodes buf[0..*len) in place, leaving the payload bytes compacted at the
 * start and setting *len to their count. Returns 0 when more input is needed,
 * > 0 = bytes of buf left over after the terminating chunk (the body ended),
 * or H1_E_BAD_CHUNK. Use h1_chunked_done() to test for the end with no
 * leftover. */
ssize_t h1_decode_chunked(struct h1_chunked *c, char *buf, size_t *len);
int h1_chunked_done(const struct h1_chunked *c);

#endif
