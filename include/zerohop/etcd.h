/* etcd.h — a small client of etcd v3's JSON gateway (prefix eg_): the
 * pieces the etcd state source (src/state/ss_etcd.c) is built from, each
 * testable on its own (tests/unit/state/test_etcd_gw.c).
 *
 * Why a client of our own: Debian ships no maintained C client of etcd's
 * v3 API (the v3 API is gRPC; apt-cache search finds only Go, Python and
 * Java bindings). etcd 3.4 serves the same API as JSON over HTTP/1.1
 * (grpc-gateway): POST /v3/kv/range, /v3/kv/txn, /v3/watch ...; keys and
 * values are base64, 64-bit integers are JSON strings, fields equal to
 * their zero value are omitted ("succeeded": false is simply absent).
 *
 * Contract:
 * - eg_json_parse() accepts exactly one RFC 8259 value (surrounding white
 *   space allowed), depth <= 64; anything else is -EINVAL. Strings are
 *   decoded (\uXXXX to UTF-8, surrogate pairs joined); numbers are kept as
 *   their text.
 * - eg_b64_decode() accepts standard base64 with padding (what the gateway
 *   sends) and rejects anything else with -EINVAL.
 * - eg_json_next() frames a byte stream of concatenated JSON values (the
 *   watch response body after de-chunking): the length of the first
 *   complete value, 0 while incomplete, -EINVAL on bytes that cannot start
 *   or continue one. It only tracks nesting and strings; the value is then
 *   parsed with eg_json_parse.
 * - eg_dechunk() decodes HTTP/1.1 chunked transfer coding incrementally.
 * - eg_call() is one POST with a JSON body on a fresh connection
 *   (Connection: close), bounded by timeout_ms end to end. 0 with the HTTP
 *   status and body, or -errno (-ETIMEDOUT, -ECONNREFUSED, -EPROTO for a
 *   malformed response).
 * All results are 0 or -errno unless said.
 */
#ifndef ZH_ETCD_H
#define ZH_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zerohop/buf.h"

enum eg_type { EG_NULL, EG_BOOL, EG_NUM, EG_STR, EG_ARR, EG_OBJ };

struct eg_json {
	enum eg_type t;
	bool b;
	char *s;		/* EG_STR (decoded, NUL-terminated) / EG_NUM (text) */
	size_t len;
	struct eg_json *v;	/* EG_ARR / EG_OBJ members */
	char **k;		/* EG_OBJ keys */
	int n;
};

int eg_json_parse(const char *text, size_t len, struct eg_json **out);
void eg_json_free(struct eg_json *j);
const struct eg_json *eg_json_get(const struct eg_json *o, const char *key);	/* NULL if absent */
/* etcd's int64 (a JSON string or number); def when absent or not a number. */
uint64_t eg_json_u64(const struct eg_json *v, uint64_t def);
bool eg_json_bool(const struct eg_json *v);	/* absent = false */
long eg_json_next(const char *buf, size_t len);

char *eg_b64_encode(const void *data, size_t len);	/* malloc'd, NUL-terminated */
int eg_b64_decode(const char *s, size_t len, char **out, size_t *out_len);	/* out NUL-terminated */

struct eg_dechunk {
	int st;			/* internal state */
	uint64_t left;		/* bytes left in the current chunk */
	bool done;		/* the last (zero) chunk was seen */
};
/* Append the data of in[0..n) to out; -EINVAL on a malformed framing. */
int eg_dechunk(struct eg_dechunk *d, const char *in, size_t n, struct buf *out);

struct eg_ep {
	char host[160];		/* a host name or address; a socket path with unix */
	int port;		/* 0 with unix */
	bool unix_sock;
};
/* "etcd://h:p,h:p" or "h:p,h:p" into eps (at most max); the count, or
 * -EINVAL naming nothing (the caller says which spec). An endpoint
 * "unix:PATH" is a Unix socket (etcd's unix://NAME:PORT client listener
 * creates the file NAME:PORT in its working directory). */
int eg_parse_endpoints(const char *spec, struct eg_ep *eps, int max);

/* Connect with a timeout: a connected blocking socket or -errno. */
int eg_connect(const struct eg_ep *ep, int timeout_ms);
/* Send "POST path" with body on fd (no response read). */
int eg_send(int fd, const struct eg_ep *ep, const char *path, const char *body, int timeout_ms);
/* Read a response head from fd into b: its length, status, and whether the
 * body is chunked (else *clen, -1 when read to close). */
int eg_read_head(int fd, struct buf *b, int timeout_ms, int *status, bool *chunked,
		 long long *clen);
int eg_call(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms,
	    int *status, struct buf *resp);
/* eg_call in two halves, so a caller can have etcd work on the next
 * request while it processes the last answer (a paginated listing):
 * eg_call_send connects and sends (a socket or -errno); eg_call_recv reads
 * the answer within timeout_ms and always closes fd. */
int eg_call_send(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms);
int eg_call_recv(int fd, int timeout_ms, int *status, struct buf *resp);

#endif
