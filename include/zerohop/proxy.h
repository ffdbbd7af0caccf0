/* proxy.h — the node L7 proxy (prefix px_): the route table (a pure function
 * of the model, testable without sockets) and the proxy server.
 *
 * Route table contract:
 * - px_table_build() compiles a finished md_state into an immutable table:
 *   for every Service port, the HTTPRoute matches attached to it (parentRef
 *   kind Service) sorted by precedence, or one catch-all rule when none is
 *   attached. A backendRef (or the Service itself) that is the root of a
 *   TrafficSplit expands into the split's backends, weights multiplied.
 *   The table takes ownership of st on success (filters and names point
 *   into it) and frees it with the last reference; on error st stays the
 *   caller's.
 * - Tables are refcounted: the server keeps one "current" reference, every
 *   stream takes its own reference when its request head is routed, so a
 *   route update swaps the current table while in-flight requests keep
 *   theirs (px_table_ref / px_table_unref; the last unref frees).
 * - px_route() is pure apart from the random number the caller passes in
 *   (weighted choice), so tests can drive it exactly.
 * - A decision owns two strings, allocated only when used: a URLRewrite's
 *   path and a RequestRedirect's Location, each to its size. The caller
 *   frees them with px_decision_free() (the proxy: px_stream_free, where
 *   every stream ends), so an ordinary stream holds neither.
 *
 * GAMMA consumer routes (a route whose Service parent is in another
 * namespace) apply only to clients of the route's namespace, and for those
 * clients they replace the Service's producer routes; everyone else gets
 * the producer routes (or the implicit catch-all when there are none).
 *
 * A TrafficSplit with matches (SMI v1alpha3/4) splits only the requests
 * that match one of its HTTPRouteGroups' matches; the others go to the
 * root Service's own endpoints.
 *
 * Precedence among all matches of all rules attached to one Service (Gateway
 * API order; the RegularExpression rank is ours, Gateway API leaves it to the
 * implementation): Exact path > RegularExpression (longer pattern first) >
 * PathPrefix (longer prefix first) > a method given > more header matches >
 * more query matches > route namespace/name alphabetical > rule order >
 * match order.
 */
#ifndef ZH_PROXY_H
#define ZH_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "zerohop/h1.h"
#include "zerohop/model.h"

#define PX_OUTBOUND_PORT 15001	/* capture listener port (Istio's outbound port) */

struct px_table;
struct px_svc;			/* one Service port in a table */

/* An upstream endpoint's address, of either family (docs/ipv6.md "L7
 * over IPv6"): IPv4 for the endpoints of IPv4 and dual-stack Services (as
 * always), IPv6 for those of an IPv6 single-stack Service (its pods' IPv6,
 * as its EndpointSlices are). The port stays beside it, as before, in every
 * struct that has one (px_ep, px_decision, the proxy's hosts and upstream
 * connections). Built by px_ip4() / px_ip6() (or zeroed: family 0 = no
 * address); compared with px_ip_eq(). */
struct px_ip {
	uint8_t family;		/* AF_INET, AF_INET6, or 0 */
	uint8_t pad[3];
	union {
		uint32_t v4;	/* network order */
		uint8_t v6[16];
	};
};
#define PX_IP_STRLEN	48	/* "[" INET6_ADDRSTRLEN "]:65535" */

static inline struct px_ip px_ip4(uint32_t v4)	/* network order */
{
	struct px_ip a;

	memset(&a, 0, sizeof(a));
	a.family = AF_INET;
	a.v4 = v4;
	return a;
}

static inline struct px_ip px_ip6(const uint8_t v6[16])
{
	struct px_ip a;

	memset(&a, 0, sizeof(a));
	a.family = AF_INET6;
	memcpy(a.v6, v6, 16);
	return a;
}

static inline bool px_ip_eq(struct px_ip a, struct px_ip b)
{
	return a.family == b.family &&
	       (a.family == AF_INET6 ? !memcmp(a.v6, b.v6, 16) : a.v4 == b.v4);
}

/* "10.0.0.1:80", "[fd00::1]:80" (port 0: the address alone, no
 * brackets; family 0: "-") into b (PX_IP_STRLEN); returns b. */
char *px_ip_fmt(struct px_ip a, uint16_t port, char *b, size_t len);

/* 64 bits of a's address (a v4 address: itself, as the IPv4-only code
 * always keyed endpoints by it; a v6 one: its bytes folded), e.g. for
 * ring-hash keys and memo slots. */
static inline uint64_t px_ip_bits(struct px_ip a)
{
	uint64_t x = 0;

	if (a.family != AF_INET6)
		return a.v4;
	for (int i = 0; i < 16; i++)
		x = x * 0x100000001b3ULL ^ a.v6[i];
	return x;
}
struct px_rule;			/* one compiled rule */

/* Constant strings (compare by pointer) for connection and request errors,
 * used in the access log and metrics (h2o style). */
extern const char px_err_connect[];	/* upstream connect failed → 503 */
extern const char px_err_no_backend[];	/* no endpoint to send to → 503 */
extern const char px_err_bad_upstream[];	/* malformed upstream response → 502 */
extern const char px_err_upstream_closed[];	/* upstream closed early → 502 */
extern const char px_err_no_route[];	/* no rule matched → 404 */
extern const char px_err_no_service[];	/* destination is no known service → 502 */
extern const char px_err_connect_timeout[];	/* upstream connect timed out → 503 */
extern const char px_err_timeout[];	/* request or backend timeout → 504 */
extern const char px_err_overflow[];	/* endpoint pool full (connections and pending) → 503 */
extern const char px_err_stream_idle[];	/* HTTP/2 stream silent for --stream-idle-timeout → 408 */

int px_table_build(struct md_state *st, struct px_table **out, char *err, size_t errlen);
struct px_table *px_table_ref(struct px_table *t);
void px_table_unref(struct px_table *t);
uint64_t px_table_generation(const struct px_table *t);
/* The state the table was built from (owned by the table; for labels). */
const struct md_state *px_table_state(const struct px_table *t);

/* Lookups; NULL when absent. ip network order, port host order. port 0 in
 * find_name = the service's first port. */
const struct px_svc *px_table_find_ip(const struct px_table *t, uint32_t ip, uint16_t port);
/* The Service port whose IPv6 ClusterIP ends in the 32 bits low (network
 * order), for a connection connect6 captured to an IPv6 single-stack L7
 * Service (include/zerohop/abi/l7cap.h ZH_L7CAP_DST_V6LOW): the cluster's
 * one IPv6 service CIDR is /108 or longer (docs/ipv6.md), so those bits
 * name one ClusterIP. NULL when none, or when two Services would match
 * (a state the model refuses; never guessed). */
const struct px_svc *px_table_find_ip6low(const struct px_table *t, uint32_t low, uint16_t port);
const struct px_svc *px_table_find_name(const struct px_table *t, const char *ns,
					const char *name, uint16_t port);
const char *px_svc_name(const struct px_svc *s);	/* "ns/name:port" */

/* What the router sees of a request: views into the parsed head. */
struct px_req_view {
	const char *method;
	size_t method_len;
	const char *path;	/* target up to '?' */
	size_t path_len;
	const char *query;	/* after '?', NULL when none */
	size_t query_len;
	const struct h1_header *headers;
	size_t n_headers;
	/* namespace of the client pod (px_table_client_ns), or NULL when the
	 * client is no pod: GAMMA consumer routes apply to their namespace's
	 * clients only */
	const char *client_ns;
};

enum px_action {
	PX_FORWARD,		/* send to backend (ip, port) */
	PX_REDIRECT,		/* answer status with Location */
	PX_NOT_FOUND,		/* no rule matched: 404 */
	PX_NO_BACKEND,		/* rule matched, nothing to send to: 503 (or 500 when
				 * the chosen backendRef is invalid, as Gateway API says) */
};

/* Retry policy of a rule (docs/proxy.md "Retries"). Default, as Istio: 2
 * retries on connect failure, reset before the response, and 503. Set per
 * HTTPRoute with the annotations zerohop.io/retries ("0".."10"),
 * zerohop.io/retry-on (comma list of connect-failure, reset, 5xx,
 * gateway-error, unavailable (503 and gRPC UNAVAILABLE), the gRPC
 * cancelled, deadline-exceeded, internal, resource-exhausted, or a status
 * 500..599; the default adds gRPC UNAVAILABLE and CANCELLED, as Istio) and
 * zerohop.io/per-try-timeout (a Gateway API duration). */
#define PX_RETRY_CONNECT	1u	/* connect refused / failed / timed out */
#define PX_RETRY_RESET		2u	/* upstream closed before any response byte */
#define PX_RETRY_MAX		10
struct px_retry_policy {
	int retries;		/* extra tries after the first */
	unsigned on;		/* PX_RETRY_* */
	uint64_t codes[2];	/* bit i = status 500 + i retriable */
	uint64_t per_try_ms;	/* 0 = none */
	uint64_t backoff_ms;	/* HTTPRoute retry.backoff: each retry waits at least this
				 * (up to 1.25x); 0 = the default jittered backoff */
	uint32_t grpc;		/* bit i = grpc-status i of a headers-only answer
				 * retriable (retry-on cancelled, deadline-exceeded,
				 * internal, resource-exhausted, unavailable) */
};
extern const struct px_retry_policy px_retry_default;

/* grpc-status code (0..16, -1 = none) retriable under p. */
static inline bool px_retry_grpc(const struct px_retry_policy *p, int code)
{
	return code >= 0 && code < 32 && (p->grpc >> code & 1);
}

static inline bool px_retry_status(const struct px_retry_policy *p, int status)
{
	unsigned i = (unsigned)status - 500;

	return i < 128 && (p->codes[i / 64] >> (i % 64) & 1);
}

/* Load balancing among a backend's endpoints (docs/proxy.md "Load
 * balancing"), per HTTPRoute: zerohop.io/lb-policy = p2c-ewma (default,
 * Linkerd's) | round-robin | ring-hash; zerohop.io/hash-on =
 * source-ip (default) | header:NAME | cookie:NAME for ring-hash. */
enum px_lb_kind { PX_LB_P2C_EWMA, PX_LB_ROUND_ROBIN, PX_LB_RING_HASH };
enum px_hash_on { PX_HASH_SOURCE_IP, PX_HASH_HEADER, PX_HASH_COOKIE };
struct px_lb_policy {
	enum px_lb_kind kind;
	enum px_hash_on hash_on;
	char hash_name[64];	/* header or cookie name */
};
extern const struct px_lb_policy px_lb_default;

/* Connection pool of each endpoint (docs/proxy.md "Connection pools"; the
 * Istio DestinationRule connectionPool fields), set per destination Service
 * with the annotations zerohop.io/max-connections (1..1000000, default 1024
 * as Envoy's circuit breaker), zerohop.io/max-pending-requests (0..1000000,
 * default 1024) and zerohop.io/max-requests-per-connection (0 = unlimited,
 * the default). A request that finds no idle connection while
 * max_connections are open waits, at most max_pending of them per endpoint
 * and at most the connect timeout each; beyond that: 503 at once. */
struct px_pool_policy {
	uint32_t max_connections;
	uint32_t max_pending;
	uint32_t max_requests_per_conn;	/* 0 = unlimited */
	/* The backend port speaks cleartext HTTP/2 (as Istio reads a Service
	 * port: appProtocol kubernetes.io/h2c, grpc or http2, else a name
	 * grpc, http2, grpc-* or http2-*): requests go to it over one
	 * multiplexed HTTP/2 connection per endpoint (docs/proxy.md). */
	bool h2c;
};
extern const struct px_pool_policy px_pool_default;

#define PX_MAX_HDR_MODS 3	/* rule RequestHeaderModifier, backendRef one, URLRewrite host */
#define PX_MAX_MIRRORS 4	/* RequestMirror filters honoured per rule */

/* One mirror copy to send (RequestMirror): fire and forget. */
struct px_mirror_to {
	const char *backend_name;	/* "ns/svc" */
	struct px_ip ip;
	uint16_t port;		/* host order */
	bool h2c;		/* the mirror port speaks HTTP/2: the copy goes over h2c */
};

/* The outcome of routing one request. Pointers point into the table (valid
 * while the caller holds a reference), except path and location: those
 * two are the decision's own, allocated by px_route to their exact size
 * only when it sets them (a URLRewrite path, a RequestRedirect location;
 * the common case allocates nothing) and freed by px_decision_free. */
struct px_decision {
	enum px_action action;
	const struct px_rule *rule;	/* matched rule, or NULL */
	const char *route_name;	/* "ns/name#rule" or "ns/svc#default" */
	const char *backend_name;	/* "ns/svc" chosen, or NULL */
	struct px_ip ip;	/* backend endpoint (family 0: none) */
	uint16_t port;		/* host order */
	int status;		/* PX_REDIRECT: 301/302/...; PX_NO_BACKEND: 500/503 */
	/* Request rewrite: the new path (with the original query appended)
	 * or NULL, the new Host or NULL. Redirect: the Location (NULL
	 * otherwise). path and location: owned by the decision (above). */
	char *path;
	const char *host;
	char *location;
	/* Request header modifiers to apply in order, then response ones. */
	const struct md_header_mod *req_mods[PX_MAX_HDR_MODS];
	int n_req_mods;
	const struct md_header_mod *resp_mods[2];
	int n_resp_mods;
	/* The matched rule's HTTPRoute timeouts (ms, 0 = unset): request is
	 * the whole request from the head's arrival, backend one upstream try. */
	uint64_t timeout_request_ms;
	uint64_t timeout_backend_ms;
	const struct px_retry_policy *retry;	/* never NULL after px_route */
	const struct px_lb_policy *lb;		/* never NULL after px_route */
	const struct px_pool_policy *pool;	/* the backend's; never NULL after px_route */
	/* PX_FORWARD: the rule's RequestMirror filters chosen for this request
	 * (percent / fraction applied), each with an endpoint of its backend;
	 * a mirror backend with no endpoint is left out */
	struct px_mirror_to mirrors[PX_MAX_MIRRORS];
	int n_mirrors;
};

/* Namespace of the pod whose IP is ip (network order) in t's state, or
 * NULL. Only looked up when the table has a consumer route (else NULL at
 * once); the first call builds a sorted index. */
const char *px_table_client_ns(const struct px_table *t, uint32_t ip);

/* The IPv4 address (network order) of the pod whose IPv6 address is ip6 in
 * t's state, or 0 (no such pod, or it has no IPv4): who a native IPv6
 * client of the node proxy is, for policy, routes and metrics, which know
 * pods by IPv4 (docs/ipv6.md "L7 over IPv6"). The first call builds a
 * sorted index. */
uint32_t px_table_ip4_of6(const struct px_table *t, const uint8_t ip6[16]);
/* The reverse: the IPv6 address of the pod whose IPv4 is ip4, into ip6;
 * false when there is none (no such pod, or it has no IPv6). The policy
 * check of an IPv6 endpoint judges an IPv4 client by it (netpol.c). */
bool px_table_ip6_of4(const struct px_table *t, uint32_t ip4, uint8_t ip6[16]);

#define PX_PATH_MAX	2048	/* a rewritten path, with its query, and its NUL */
#define PX_LOCATION_MAX	2304	/* a redirect's Location and its NUL */

/* Route req for the service svc. rnd is a uniform random 64-bit value used
 * for the weighted backend and endpoint choice. host is the request's Host
 * (for redirects), may be NULL. Always fills d, whatever d held before
 * (d->path and d->location start NULL: a decision px_route filled must be
 * freed with px_decision_free before it is routed again); returns 0, or
 * -ENAMETOOLONG when a rewritten path or location does not fit
 * PX_PATH_MAX / PX_LOCATION_MAX (answer 500). Success or not, the caller
 * owns d->path and d->location from then on. */
int px_route(const struct px_table *t, const struct px_svc *svc, const struct px_req_view *req,
	     const char *host, size_t host_len, uint64_t rnd, struct px_decision *d);

/* Free what px_route allocated in d (path, location) and set them NULL;
 * a decision that holds nothing (zeroed, or freed already) is left as it
 * is. The proxy calls it where the stream ends (px_stream_free), the one
 * path every stream takes. */
void px_decision_free(struct px_decision *d);

/* One endpoint of a backend (port host order). */
struct px_ep {
	struct px_ip ip;
	uint16_t port;
};

/* The endpoints of the backend d chose (PX_FORWARD), for outlier-aware
 * re-picking; a view into the table. Returns their number (0 otherwise). */
int px_route_eps(const struct px_decision *d, const struct px_ep **eps);

/* Whether ip:port (port host order) is an endpoint of any backend of
 * any rule of table t. Used on route reloads (endpoints that went away:
 * their pooled connections are closed, their state pruned) and when a
 * stream routed with an older table returns its upstream. The first call
 * builds a sorted index (O(n log n)); later calls are O(log n). */
bool px_table_has_ep(const struct px_table *t, struct px_ip ip, uint16_t port);

/* Round robin: the next index (0..n-1) of d's backend's rotation; the
 * counter lives in the table's backend (the proxy is single-threaded). */
uint32_t px_route_rr_next(const struct px_decision *d);

/* Retry helper: move d (PX_FORWARD) to another endpoint of the same
 * backend, avoiding the current one when there is a choice. */
void px_route_repick(struct px_decision *d, uint64_t rnd);

/* Split a request-target into path and query for px_req_view. */
void px_req_view_target(struct px_req_view *v, const char *target, size_t len);

/* ---- the server ---------------------------------------------------------- */

struct px_capture;	/* src/proxy/px_int.h */

struct px_config {
	const char *listen;	/* ADDR:PORT */
	/* capture mode: [IPv6]:PORT of a second listener for native IPv6
	 * clients (docs/ipv6.md "L7 over IPv6"), or NULL */
	const char *listen6;
	const char *service;	/* explicit mode: NS/NAME[:PORT] of every connection */
	const char *state_dir;	/* state source directory (watched), or NULL */
	char **files;		/* -f manifests (when no state_dir) */
	int n_files;
	const char *stats_addr;	/* Prometheus text endpoint, or NULL */
	const char *access_log;	/* path, or NULL (off) */
	int capture_fd;		/* zh_l7cap_orig map fd (capture mode, not owned), or -1 */
	/* capture mode: checked every second and re-opened by the server when
	 * the shared maps were re-created (px_capture_refresh), or NULL */
	struct px_capture *capture;
	size_t max_line, max_head, max_headers;	/* h1 limits */
	/* Connection timeouts in ms; 0 = the default (docs/proxy.md):
	 * connect 1000, client idle 300000, upstream idle 60000. */
	uint64_t connect_timeout_ms;
	uint64_t client_idle_ms;
	uint64_t upstream_idle_ms;
	/* An HTTP/2 client stream with no frame either way this long is ended
	 * (Envoy's stream_idle_timeout; docs/proxy.md "Timeouts"): 0 = the
	 * default 300000, PX_STREAM_IDLE_OFF = never. */
	uint64_t stream_idle_ms;
#define PX_STREAM_IDLE_OFF	UINT64_MAX
	/* Passive outlier detection: eject after outlier_consecutive (5)
	 * failed tries in a row for outlier_base_ms (30000) x ejections. */
	uint64_t outlier_base_ms;
	uint32_t outlier_consecutive;
	/* Graceful drain on SIGTERM: in-flight requests finish, keep-alive
	 * responses carry Connection: close, exit when no client connection is
	 * left or after drain_timeout_ms (0 = 15000, Envoy's --drain-time-s). */
	uint64_t drain_timeout_ms;
	/* An HTTP/1.1 client's request body still coming after its answer is
	 * read and dropped for at most discard_ms (0 = 30000, nginx's
	 * lingering_time), then the connection closes (docs/proxy.md
	 * invariant 24). */
	uint64_t discard_ms;
	/* Busy polling (docs/proxy.md "Latency and busy polling"): before the
	 * loop sleeps, poll without sleeping this long, so a vCPU that would
	 * halt between requests stays awake. 0 = off (the default). */
	uint64_t busy_poll_us;
	/* HBONE (hbone.h, hbone_out.h, docs/mtls.md; WIP, opt-in: --hbone):
	 * the listener's ADDR:PORT or NULL (off: no server, no client), the
	 * node's SVID directory and name (its pods are the server's
	 * destinations and the client's sources) */
	const char *hbone_listen, *svid_dir, *node;
};

/* Runs until SIGINT, or SIGTERM then the drain (a second SIGTERM or a
 * SIGINT during the drain stops at once). Returns 0 or -errno; messages go
 * to stderr. */
int px_serve(const struct px_config *cfg);

#endif
