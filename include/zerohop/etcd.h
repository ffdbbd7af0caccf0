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
 * - Responses are read with the generic JSON reader, jsonv.h (jv_parse;
 *   jv_u64 for the int64 fields; jv_next frames the watch stream).
 * - eg_b64_decode() accepts standard base64 with padding (what the gateway
 *   sends) and rejects anything else with -EINVAL.
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

char *eg_b64_encode(const void *data, size_t len);	/* malloc'd, NUL-terminated */
int eg_b64_decode(const char *s, size_t len, char **out, size_t *out_len);	/* out NUL-terminated */

struct eg_dechunk {
	int st;			/* internal state */
	uint64_t left;		/* bytes left in the current chunk */
	bool done;		/* the last (zero) chunk was seen */
};
/* Append the data of in[0..n) to out; -EINVAL on a malformed framing. */
int eg_dechunk(struct eg_dechunk *d, const char *in, size_t n, struct buf *out);

/* The client's side of TLS (src/state/etcd_conn.c): one context shared by
 * every TLS endpoint of a spec. */
struct eg_tls;
struct eg_tls_opts {
	const char *cacert;	/* PEM CA bundle; NULL: the system's CAs */
	const char *cert;	/* PEM client certificate (chain); NULL: none */
	const char *key;	/* PEM key of cert; NULL: in the cert file */
};
/* The options from the environment: ZEROHOP_ETCD_CACERT, ZEROHOP_ETCD_CERT,
 * ZEROHOP_ETCD_KEY (the CLI's --etcd-cacert/--etcd-cert/--etcd-key set
 * them); an empty variable is unset. */
void eg_tls_opts_env(struct eg_tls_opts *o);
/* The CLI flags --etcd-cacert/--etcd-cert/--etcd-key of the commands that
 * take --state (entries of a getopt_long table; their codes are
 * EG_TLS_FLAG..EG_TLS_FLAG+2): eg_tls_flag(code, optarg) sets the matching
 * ZEROHOP_ETCD_* variable, so a flag wins over the environment and the
 * state source reads one place. */
#define EG_TLS_FLAG 0x1e0
#define EG_TLS_OPTIONS                                                   \
	{ "etcd-cacert", required_argument, NULL, EG_TLS_FLAG },         \
	{ "etcd-cert", required_argument, NULL, EG_TLS_FLAG + 1 },       \
	{ "etcd-key", required_argument, NULL, EG_TLS_FLAG + 2 }
void eg_tls_flag(int code, const char *val);
/* A context (T2) or NULL with err naming the file that is wrong (T4). */
struct eg_tls *eg_tls_new(const struct eg_tls_opts *o, char *err, size_t errlen);
void eg_tls_free(struct eg_tls *t);
/* T3: the calling thread's reason for its last TLS failure, "" if none. */
const char *eg_last_error(void);

struct eg_ep {
	char host[160];		/* a host name or address; a socket path with unix */
	int port;		/* 0 with unix */
	bool unix_sock;
	bool tls;		/* https:// or etcds:// */
	const struct eg_tls *tlsc;	/* the context of a tls endpoint (borrowed) */
};
/* "etcd://h:p,h:p" or "h:p,h:p" into eps (at most max); the count, or
 * -EINVAL naming nothing (the caller says which spec). An endpoint
 * "unix:PATH" is a Unix socket (etcd's unix://NAME:PORT client listener
 * creates the file NAME:PORT in its working directory). A spec that starts
 * with https:// or etcds:// is TLS: each endpoint may repeat the scheme
 * ("https://a:1,https://b:2", as Calico's ETCD_ENDPOINTS), an endpoint
 * without one takes the first's, and mixing TLS with plain endpoints, or
 * TLS with unix:, is -EINVAL (no silent downgrade). tlsc is left NULL. */
int eg_parse_endpoints(const char *spec, struct eg_ep *eps, int max);
/* "https://h:p" for a TLS endpoint, "h:p" (or the socket path) else: how
 * errors name it. */
const char *eg_ep_str(const struct eg_ep *ep, char *buf, size_t len);

/* One connection to an endpoint (T1). */
struct eg_conn {
	int fd;			/* -1: closed */
	void *ssl;		/* SSL *, NULL for plain */
	short want;		/* after -EAGAIN: what to poll fd for (POLLIN/POLLOUT) */
};
/* Connect (and handshake) within timeout_ms: 0 with c open, or -errno with
 * c closed. */
int eg_connect(const struct eg_ep *ep, int timeout_ms, struct eg_conn *c);
void eg_close(struct eg_conn *c);
/* Read what is there into b's tail (TLS: every decrypted byte buffered, so
 * a poll on fd afterwards never misses data): bytes read, 0 at EOF,
 * -EAGAIN when none yet (poll c->fd for c->want), -errno. */
ssize_t eg_read(struct eg_conn *c, struct buf *b);
/* Write up to n bytes: how many, -EAGAIN (poll for c->want), -errno. */
ssize_t eg_write(struct eg_conn *c, const void *p, size_t n);
/* Wait until c->fd is ready for c->want, or -ETIMEDOUT at deadline. */
int eg_wait(struct eg_conn *c, long long deadline);
long long eg_now_ms(void);	/* CLOCK_MONOTONIC, what deadlines are in */
/* Send "POST path" with body on c (no response read). */
int eg_send(struct eg_conn *c, const struct eg_ep *ep, const char *path, const char *body,
	    int timeout_ms);
/* Read a response head from c into b: its length, status, and whether the
 * body is chunked (else *clen, -1 when read to close). */
int eg_read_head(struct eg_conn *c, struct buf *b, int timeout_ms, int *status, bool *chunked,
		 long long *clen);
int eg_call(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms,
	    int *status, struct buf *resp);
/* eg_call in two halves, so a caller can have etcd work on the next
 * request while it processes the last answer (a paginated listing):
 * eg_call_send connects and sends (0 with c open, or -errno with c
 * closed); eg_call_recv reads the answer within timeout_ms and always
 * closes c. */
int eg_call_send(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms,
		 struct eg_conn *c);
int eg_call_recv(struct eg_conn *c, int timeout_ms, int *status, struct buf *resp);
/* eg_call on a connection kept for the next call (HTTP keep-alive; c
 * starts closed, fd -1, and the caller eg_close()s it at the end): a
 * request repeated every second (the watcher's probe) costs no new
 * connection, over TLS no new handshake. A kept connection that fails is
 * replaced once by a fresh one within timeout_ms; no answer in time is
 * the result as it is. */
int eg_call_keep(struct eg_conn *c, const struct eg_ep *ep, const char *path, const char *body,
		 int timeout_ms, int *status, struct buf *resp);

#endif
