/* px_int.h — internals shared by the proxy's files (not a public contract). */
#ifndef ZH_PX_INT_H
#define ZH_PX_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/h1.h"
#include "zerohop/hist.h"
#include "zerohop/log.h"
#include "zerohop/proxy.h"
#include "zerohop/ioq.h"

/* h2flood.c: control-frame flood limits of one HTTP/2 client connection
 * (SETTINGS, PING, WINDOW_UPDATE, PRIORITY: CVE-2019-9512/9515/9513 and
 * their kin). A token bucket per kind: PX_H2_CTRL_BURST at once, refilled
 * PX_H2_CTRL_RATE a second and by the work the connection gives (streams
 * opened, DATA frames sent), never above the burst. Pure: no I/O. */
enum px_h2_flood {
	PX_H2_FLOOD_SETTINGS,
	PX_H2_FLOOD_PING,
	PX_H2_FLOOD_WINDOW_UPDATE,
	PX_H2_FLOOD_PRIORITY,
	PX_H2_FLOOD__N
};
#define PX_H2_CTRL_BURST	500	/* below nghttp2's 1000 queued acks */
#define PX_H2_CTRL_RATE		100	/* a second, per kind */
#define PX_H2_CTRL_PER_STREAM	4	/* granted per request stream */
#define PX_H2_CTRL_PER_DATA	2	/* granted per DATA frame sent */
struct px_h2_ctrl {
	double tokens[PX_H2_FLOOD__N];
	uint64_t t;		/* last refill (monotonic ns) */
};

/* h2mem.c: libnghttp2's memory for one HTTP/2 connection (design note
 * there): small blocks from per-thread lists of size classes (both sides),
 * big ones on pages of their own, so an idle client connection can give
 * pages back. init fills mem (an nghttp2_mem) to allocate through m; m
 * must outlive the session. trim: drop the pages nghttp2 cannot miss
 * (all-zero pages of big blocks; the outbound frame buffer too when
 * out_idle: the session's output drained, no stream open); returns the
 * bytes handed back. Only between libnghttp2 calls. */
#define PX_H2MEM_BIG		4096	/* blocks from this size get their own pages */
#define PX_H2MEM_SLOTS		8	/* big blocks per connection; more: malloc */
#define PX_H2MEM_MAXPAGES	16	/* larger blocks are never trimmed */
#define PX_H2MEM_FRAMEBUF	(9 + 1 + 16384)	/* NGHTTP2_FRAMEBUF_CHUNKLEN */
struct px_h2mem {
	struct {
		void *p;	/* a mapping of len bytes (whole pages) */
		size_t len;
		bool fb;	/* the outbound frame buffer */
	} b[PX_H2MEM_SLOTS];
	int n;
	bool fb_seen;
};
void px_h2mem_init(struct px_h2mem *m, void *mem);	/* mem: an nghttp2_mem * */
size_t px_h2mem_trim(struct px_h2mem *m, bool out_idle);

struct bpf_link;
struct zh_l7cap;
struct pol_compiled;

struct px_capture {
	struct zh_l7cap *skel;	/* owned */
	struct bpf_link *link;	/* sock_ops on the node cgroup, owned */
	int orig_fd;		/* zh_l7cap_orig map, owned dup */
	int orig6_fd;		/* zh_l7cap_orig6 map, owned dup (-1: no IPv6) */
	char pin_dir[256];	/* what it was opened for (px_capture_refresh) */
	char cgroup[512];
	uint32_t proxy_ip;
	uint8_t proxy_ip6[16];	/* all zero: no IPv6 listener */
	uint16_t cfg_flags;	/* ZH_L7CAP_CFG_* published in zh_l7cap_cfg */
};

/* Load + pin (maps in pin_dir, shared with the agent) + attach (sock_ops
 * on the node cgroup) the capture program; proxy_ip is this proxy's
 * address, written to zh_l7cap_cfg; proxy_ip6 (NULL or all zero: none)
 * its IPv6 listener's, written to zh_l7cap_cfg6; cfg_flags what the proxy
 * serves (ZH_L7CAP_CFG_HBONE: the tunnel, so connect4 sends it STRICT
 * destinations and the node enforces STRICT). 0 or -errno. */
int px_capture_open(const char *pin_dir, const char *cgroup, uint32_t proxy_ip,
		    const uint8_t *proxy_ip6, uint16_t cfg_flags, struct px_capture *cap);
void px_capture_close(struct px_capture *cap);
/* The shared maps were re-created under the pin dir (`agent --cleanup`, then
 * a new agent): open a new capture on them (registering the proxy there),
 * then drop the old one. Returns the zh_l7cap_orig fd to use from now on:
 * the same one when nothing changed or re-opening failed (logged). */
int px_capture_refresh(struct px_capture *cap);

/* ---- proxy objects (docs/proxy.md, "Design note") ------------------------- */

#define PX_BUFSZ	16384		/* default buffer, pooled */
#define PX_HIGH		65536		/* backpressure watermark per buffer */
#define PX_POOL_BUFS	256		/* free buffers kept */
#define PX_MAX_HDRS	128
#define PX_PICK_MAX	256		/* endpoints considered per pick */
#define PX_EWMA_TAU_NS	100000000ULL	/* latency EWMA time constant (samples) */
#define PX_IDLE_TAU_NS	10000000000ULL	/* cost decay of an unused endpoint (Linkerd: 10 s) */
#define PX_REPLAY_MAX	65536		/* largest request kept for a retry */
#define PX_BUDGET_SECS	10		/* retry budget window (Linkerd ttl) */
#define PX_BUDGET_PCT	20		/* retries per 100 requests */
#define PX_BUDGET_MIN_RPS 10		/* retries per second always allowed */
#define PX_BACKOFF_BASE_NS 25000000ULL	/* retry backoff (Envoy): 25 ms base, */
#define PX_BACKOFF_MAX_NS 250000000ULL	/* doubling, full jitter, capped 250 ms */
#define PX_DRAIN_TICK_NS 50000000ULL	/* drain check period */
#define PX_DRAIN_IDLE_NS 1000000000ULL	/* drain: idle client connections go after this */
#define PX_ACCEPT_BATCH	64		/* connections accepted per listener event */

/* Defaults of the px_config knobs left 0 (include/zerohop/proxy.h). */
#define PX_DEF_CONNECT_MS	1000
#define PX_DEF_CLIENT_IDLE_MS	300000
#define PX_DEF_UPSTREAM_IDLE_MS	60000
#define PX_DEF_STREAM_IDLE_MS	300000	/* Envoy's stream_idle_timeout */
#define PX_DEF_DRAIN_MS		15000
#define PX_DEF_DISCARD_MS	30000	/* nginx's lingering_time (invariant 24) */
#define PX_DEF_OUTLIER_BASE_MS	30000
#define PX_DEF_OUTLIER_CONSEC	5
#define PX_RELOAD_DEBOUNCE_NS	20000000ULL	/* an apply writes several files */
#define PX_CAP_CHECK_NS		1000000000ULL	/* capture re-registration check */
#define PX_SWEEP_MIN_NS		10000000ULL	/* idle sweep period bounds */
#define PX_SWEEP_MAX_NS		1000000000ULL

enum px_rq { RQ_BODY, RQ_DONE };
enum px_rs { RS_CONNECT, RS_HEAD, RS_BODY, RS_DONE };

struct px_server;
struct px_stream;
struct px_conn;
struct px_up;

/* A socket whose output buffer the write queue sends (batch.c design note):
 * embedded in a client connection and in an upstream connection. */
enum px_wr_kind { PX_WR_CONN, PX_WR_UP };
struct px_wr;
/* What batch.c asks of the layer that owns a socket: the socket's events
 * (all sockets register px_io_cb with their px_wr as the argument), whether
 * it wants to be read now, and the result of a batched send (w->res). */
struct px_io_ops {
	void (*event)(struct px_wr *w, int events);
	bool (*want_read)(const struct px_wr *w);
	void (*sent)(struct px_wr *w);
};
struct px_wr {
	const struct px_io_ops *io;
	int slot;		/* index in the queue it is in, -1 = not queued */
	bool in_run;		/* ...which is the batch being sent (wq_run) */
	bool blocked;		/* last send short or -EAGAIN: wait for EV_WRITE */
	uint8_t kind;		/* enum px_wr_kind */
	ssize_t res;		/* the batch's result for it */
};

struct px_up {
	struct px_server *srv;
	int fd;
	int mask;
	struct buf in, out;
	struct px_wr wr;	/* out's sends */
	uint64_t rd_iter;	/* loop iteration whose batch already read it */
	struct px_ip ip;	/* the endpoint, either family (proxy.h) */
	uint16_t port;
	bool connecting;
	bool eof;
	bool wr_dead;		/* a send failed: nothing more is sent, the
				 * answer is read to the end (px_up_sent) */
	struct px_stream *st;	/* NULL while idle */
	struct px_up *next;	/* idle list */
	uint64_t idle_since;	/* when it entered the pool */
	int host;		/* s->hosts index: the endpoint's n_conns (invariant 21) */
	uint32_t n_reqs;	/* requests carried */
	uint32_t max_reqs;	/* pool policy's max requests per connection, 0 = no limit */
	struct px_h2us *h2;	/* an HTTP/2 stream's view (h2up.c): no socket */
	bool in_end;		/* HTTP/2 try: the answer ended (END_STREAM); its
				 * head is fields (px_h2up_resp_head), in holds
				 * its body raw (h2up.c invariant 7) */
};

/* What the stream layer asks of the client connection it serves (conn.c
 * for HTTP/1.1): drive it after something happened outside its own events
 * (an upstream event, a stream timer). */
struct px_conn_ops {
	void (*progress)(struct px_conn *c);
};

struct px_conn {
	struct px_server *srv;
	const struct px_conn_ops *ops;
	int fd;
	int mask;
	struct buf in, out;
	struct px_wr wr;	/* out's sends */
	uint64_t rd_iter;	/* loop iteration whose batch already read it */
	size_t last_len;	/* parser resume point */
	uint32_t peer_ip;	/* an IPv6 client: its pod's IPv4 (identity), or 0 */
	uint16_t peer_port;
	uint8_t peer_ip6[16];	/* an IPv6 client: its address; else zero */
	uint32_t dst_ip;	/* captured original destination, 0 = explicit */
	uint16_t dst_port;
	bool dst_v6low;		/* dst_ip is the last 32 bits of an IPv6 ClusterIP
				 * (ZH_L7CAP_DST_V6LOW: an IPv6 single-stack Service) */
	bool dst_hbone;		/* ZH_L7CAP_DST_HBONE: dst_ip:dst_port is a pod on
				 * another node, to tunnel (hbone_px.c), not a client */
	bool rd_eof;
	bool closing;		/* close once out is flushed */
	struct px_stream *st;
	uint64_t last_active;	/* last client read or stream end */
	struct px_conn *prev, *next;	/* all client connections (idle sweep) */
	bool h1_seen;		/* a request head was parsed (no HTTP/2 preface now) */
	bool one_req;		/* an HTTP/2 stream's view: one request only */
	struct px_h2 *h2;	/* HTTP/2 session (h2conn.c), NULL = HTTP/1.1 */
	uint32_t n_sub;		/* HTTP/2 streams open (not idle while > 0) */
	struct buf trailers;	/* an HTTP/2 stream's view: response trailers
				 * ("name: value\r\n" lines) from an HTTP/2 upstream */
	/* An HTTP/2 stream's view, a forwarded answer (h2conn.c invariant 8):
	 * its head as fields, not HTTP/1.1 text, and its body raw in out. A
	 * local answer (px_reply) is HTTP/1.1 text in out, as for a socket. */
	int rstatus;		/* the forwarded answer's status, 0 = none yet */
	struct buf rfields;	/* its fields, "name: value\r\n" lines */
	bool out_end;		/* the raw body in out is complete */
};

struct px_stream {
	struct px_conn *c;
	struct px_table *tbl;
	struct px_up *up;
	struct px_decision d;
	enum px_rq rq;
	enum px_rs rs;
	int req_framing;
	uint64_t req_left;
	struct h1_chunked req_ck;
	int resp_framing;
	uint64_t resp_left;
	struct h1_chunked resp_ck;
	bool out_chunked;	/* re-encode the response body as chunked */
	bool up_keep;		/* upstream reusable after this response */
	bool head_req;
	bool client_keep;
	int client_minor;
	int status;
	int grpc_status;	/* grpc-status of the answer (head or trailers), -1 none */
	bool grpc;		/* a gRPC request (content-type application/grpc*):
				 * local answers are gRPC trailers-only ones */
	const char *err;	/* px_err_* or h1 error string, for the log */
	uint64_t t0;
	uint64_t try_t0;	/* start of the current upstream try */
	uint64_t timer;		/* ev timer id, 0 = none (invariant 6) */
	uint64_t deadline;	/* the timer's deadline */
	uint64_t retry_at;	/* a retry waits for its backoff until then, 0 = none */
	uint64_t bytes_in, bytes_out;
	size_t up_last_len;
	struct buf rb;		/* replay copy of the request (invariant 9) */
	bool rb_off;		/* too large to replay */
	int tries;		/* attempts made (0 = never forwarded) */
	int failed_tries;	/* attempts that ended in a retry */
	int host;		/* s->hosts index of the try in flight, -1 none */
	uint64_t hash_key;	/* ring-hash key */
	bool pending;		/* waiting for a pool slot of hosts[pend_host] (invariant 22) */
	int pend_host;
	struct px_stream *pend_next;
	char method[16];
	char target[256];
	char reqid[40];
	/* RequestMirror (mirror.c): the upstream-framed request copied while it
	 * is read, sent to each chosen mirror once complete */
	struct buf mb;
	bool mb_off;		/* no mirror for this request (none chosen, too large) */
	bool discard;		/* answered before its body was read: the rest
				 * is read and dropped (invariant 23) */
	uint64_t discard_until;	/* ... until then at most (invariant 24) */
};

struct px_host {		/* outlier state of one endpoint */
	struct px_ip ip;	/* family 0 and port 0: a free record */
	uint16_t port;
	uint32_t consec;	/* consecutive failed tries */
	uint32_t n_ejections;
	uint64_t until;		/* ejected until (monotonic ns), 0 = in service */
	uint32_t inflight;	/* tries in flight (invariant 16) */
	double ewma_ns;		/* peak-EWMA of try latency */
	uint64_t ewma_t;	/* last update */
	uint32_t n_conns;	/* upstream connections open: busy, idle, connecting */
	uint32_t n_pending;	/* streams waiting for a connection (FIFO) */
	struct px_stream *pend_head, *pend_tail;
	struct px_h2c *h2c;	/* multiplexed HTTP/2 connections (h2up.c), a list */
	uint32_t h2_max_streams;	/* its last SETTINGS_MAX_CONCURRENT_STREAMS, 0 = none */
};

#define PX_GRPC_OTHER 17	/* px_stat.grpc: a grpc-status beyond 16 */

struct px_stat {
	char *route, *backend;
	uint64_t by_class[6];	/* 1xx..5xx at [1..5], [0] = no response */
	uint64_t attempts, attempts_ok;	/* actual (per try) */
	struct hist *lat;
	/* gRPC calls by their result (px_grpc_result): codes 0..16, then
	 * PX_GRPC_OTHER for any other number (stats.c px_stat_grpc) */
	uint64_t grpc[PX_GRPC_OTHER + 1];
};

/* How the upstream layer reports to the stream it carries (stream.c
 * implements them; upstream.c never calls into the stream otherwise).
 * Each may end the stream; each then drives the stream's client. */
struct px_up_ops {
	/* connect completed: the request bytes can go, connect deadline off */
	void (*connected)(struct px_stream *st);
	/* connect failed (asynchronously): retry, else 503 */
	void (*connect_failed)(struct px_stream *st);
	/* a send failed (reset): retry, else 502 */
	void (*reset)(struct px_stream *st);
	/* bytes arrived or send room freed: move the stream on */
	void (*progress)(struct px_stream *st);
	/* a pending stream's turn (invariant 22): u to attach to hosts[host],
	 * or u NULL when connecting failed with rc */
	void (*slot)(struct px_stream *st, struct px_up *u, int host, int rc);
};

struct hb_server;
struct hbo_client;
/* hbone_px.c: the HBONE server and client (--hbone). 0 or -errno (logged). */
int px_hbone_open(struct px_server *s);
void px_hbone_render(const struct px_server *s, struct buf *b);	/* their metrics */
/* A captured connection flagged ZH_L7CAP_DST_HBONE (c: its addresses only;
 * the caller frees c): fd into a tunnel (hbone_out.h), or refused with an
 * RST, counted and logged. Takes fd. */
void px_hbone_out(struct px_server *s, int fd, const struct px_conn *c);

struct px_server {
	const struct px_config *cfg;	/* the options it was started with */
	struct hb_server *hbone;	/* NULL: no HBONE listener */
	struct hbo_client *hbo;		/* NULL: no HBONE client (with the listener) */
	const struct px_up_ops *up_ops;	/* stream.c's px_stream_up_ops */
	struct ev_loop *loop;
	int lfd, sfd, stats_fd, watch_fd, cap_fd;
	int lfd6, cap6_fd;	/* the IPv6 capture listener and its map, or -1 */
	uint64_t reload_timer;
	uint64_t cap_timer;	/* capture re-registration check (1 s) */
	struct ss *ss;
	struct px_table *tbl;
	char svc_ns[128], svc_name[128];
	uint16_t svc_port;
	bool explicit_mode;
	struct h1_limits lim;
	FILE *alog;
	uint64_t rng;
	struct px_up *idle;	/* idle upstream pool (LIFO) */
	int n_idle;
	char *bufs[PX_POOL_BUFS];
	int n_bufs;
	struct px_stat *stats;
	int n_stats;
	/* retry budget: ring of per-second counts (invariant 11) */
	uint64_t bud_sec[PX_BUDGET_SECS];
	uint32_t bud_req[PX_BUDGET_SECS], bud_retry[PX_BUDGET_SECS];
	uint64_t n_retries, n_budget_denied;
	/* outlier detection (invariants 13-14) */
	struct px_host *hosts;
	int n_hosts;
	int n_ejected;
	uint64_t eject_base_ns;
	uint32_t consec_max;
	uint64_t n_ejections;
	uint64_t active, accepted, reloads, reload_errors;
	struct px_conn *conns;	/* all client connections */
	uint64_t connect_ns, client_idle_ns, up_idle_ns;
	uint64_t stream_idle_ns;	/* 0 = off (h2conn.c invariant 9) */
	uint64_t sweep_ns, sweep_timer;
	uint64_t n_timeouts, n_connect_timeouts, n_client_idle, n_up_idle;
	uint64_t n_stream_idle;	/* HTTP/2 streams ended by the stream idle timeout */
	/* graceful drain (invariants 17-19) */
	bool draining;
	uint64_t drain_ns, drain_deadline, drain_timer;
	uint64_t n_drain_closed;	/* idle client connections closed by the drain */
	/* endpoint updates (invariant 20) */
	uint64_t n_up_gone, n_hosts_pruned;
	/* connection pools (invariants 21-22) */
	uint64_t kick_timer;	/* serve pending streams, armed when a slot frees */
	uint64_t n_overflow, n_pending_timeouts, n_pending_total, n_max_reqs_closed;
	uint64_t n_early_answers;	/* answered before the body was read (invariant 23) */
	uint64_t discard_ns;		/* bound on that dropped body (invariant 24) */
	uint64_t n_discard_closed;	/* connections closed at that bound */
	uint32_t n_pending;	/* all endpoints */
	/* NetworkPolicy per request (netpol.c design note) */
	struct pol_compiled *pol;	/* built with s->tbl's state; NULL = none */
	uint64_t n_pol_denied[2];	/* by enum pol_dir */
	uint32_t src_ip;	/* IPv4 upstream source: this node's proxy address, 0 = any */
	uint8_t src_ip6[16];	/* IPv6 upstream source: its IPv6 (pol_node_proxy_ip6),
				 * all zero = the kernel's choice (netpol.c invariant 6) */
	/* deferred sends (batch.c design note) */
	struct ioq sq;
	struct px_wr **wq, **wq_run;	/* queued; the batch being sent */
	unsigned n_wq, cap_wq, n_run, cap_run;
	uint64_t n_wq_flushes, n_wq_sends, n_rd_batches, n_rd_recvs;
	uint64_t busy_poll_us;	/* --busy-poll */
	/* RequestMirror copies (mirror.c design note) */
	struct px_mirror_conn *mirrors;	/* in flight, a list */
	uint32_t n_mirrors_inflight;
	uint64_t n_mirror_sent, n_mirror_failed;
	uint64_t n_mirror_dropped[3];	/* by enum px_mirror_drop */
	uint64_t n_h2_conns, n_h2_errors;	/* HTTP/2 client connections (h2conn.c) */
	uint64_t n_h2_flood[PX_H2_FLOOD__N];	/* connections ended by h2flood.c */
	uint64_t n_h2_resets_rx, n_h2_refused, n_h2_hdr_big;	/* defences (h2conn.c) */
	/* client streams reset because a forwarded answer's head [0] or
	 * trailers [1] had more fields than HTTP/2 carries here (h2conn.c
	 * invariant 8) */
	uint64_t n_h2_fields_reset[2];
	uint64_t n_h2_trimmed;	/* bytes idle connections gave back (h2mem.c) */
	uint64_t n_h2_up_conns;		/* HTTP/2 upstream connections opened (h2up.c) */
	struct px_h2c **h2q;	/* h2up.c: connections kicked, run before the
				 * loop waits (px_h2up_run_kicked); NULL = a
				 * slot emptied by px_h2c_free */
	unsigned n_h2q, cap_h2q;
	struct px_conn **h2cq;	/* h2conn.c: HTTP/2 client connections whose
				 * views progressed, to send before the loop
				 * waits (px_h2_run_queued); NULL = closed */
	unsigned n_h2cq, cap_h2cq;
	/* typed free lists of per-request objects (px_obj_get) */
	struct px_free *free_st, *free_h2s, *free_h2us;
	unsigned n_free_st, n_free_h2s, n_free_h2us;
};

/* A gRPC status that is the server's failure (as Envoy maps them to 5xx:
 * UNKNOWN, DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS): counted
 * like a 5xx by outlier detection and the attempt metrics. */
static inline bool px_grpc_failed(int code)
{
	return code == 2 || code == 4 || code == 13 || code == 14 || code == 15;
}

/* ---- RequestMirror (mirror.c) ------------------------------------------ */

#define PX_MIRROR_MAX		64	/* mirrors in flight per proxy; more are dropped */
#define PX_MIRROR_TIMEOUT_NS	5000000000ULL	/* a mirror's whole life */

enum px_mirror_drop { PX_MIRROR_LIMIT, PX_MIRROR_TOO_LARGE, PX_MIRROR_POLICY };

/* Stream side: start copying (head already in st->rb), add body bytes,
 * and send the copies once the request is complete. Never fail the stream. */
void px_mirror_begin(struct px_stream *st);
void px_mirror_add(struct px_stream *st, const void *p, size_t n);
void px_mirror_done(struct px_stream *st);	/* request complete: send */
void px_mirror_drop_stream(struct px_stream *st);	/* stream ends: free the copy */
void px_mirror_close_all(struct px_server *s);	/* server exit */

/* mirror_h2.c: an HTTP/2 copy for an h2c mirror port (mirror.c invariant 5).
 * new: the complete HTTP/1.1 copy (data, len; not kept) as one submitted
 * request of a fresh client session; 0, -EPROTO (not a request), -ENOMEM.
 * output: what the session has to send now into *data (malloc'd, the
 * caller frees; NULL when *len is 0); 0 or -EPROTO. input: bytes from the
 * mirror backend; 1 answered (its response HEADERS), 0 more wanted,
 * -EPROTO failed. free: NULL is fine. */
struct px_mirror_h2;
int px_mirror_h2_new(struct px_server *s, const char *data, size_t len, struct px_mirror_h2 **out);
int px_mirror_h2_output(struct px_mirror_h2 *m, char **data, size_t *len);
int px_mirror_h2_input(struct px_mirror_h2 *m, const void *p, size_t n);
void px_mirror_h2_free(struct px_mirror_h2 *m);

#define PX_MS	1000000ULL

static inline uint64_t px_rand(struct px_server *s)
{
	/* xorshift64*: fast, good enough for weighted choice */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545F4914F6CDD1DULL;
}

/* Who c's client is, for metrics and logs: its IPv4 (an IPv6 client's
 * pod's IPv4) when known, else its IPv6 address, else family 0. */
static inline struct px_ip px_conn_peer(const struct px_conn *c)
{
	static const uint8_t zero[16];

	if (c->peer_ip)
		return px_ip4(c->peer_ip);
	if (memcmp(c->peer_ip6, zero, 16))
		return px_ip6(c->peer_ip6);
	return (struct px_ip){ .family = 0 };
}

/* h's name is `name` (lower case), ignoring case. */
static inline bool px_name_is(const struct h1_header *h, const char *name)
{
	size_t n = strlen(name);

	/* (the first letter before the call: most names differ there) */
	return h->name_len == n && (h->name[0] | 0x20) == (name[0] | 0x20) &&
	       !strncasecmp(h->name, name, n);
}

static inline uint64_t px_min_dl(uint64_t a, uint64_t b)	/* earliest deadline, 0 = none */
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* batch.c: deferred sends. px_wq_add queues w's output to be sent before the
 * loop next waits (not when blocked: EV_WRITE re-arms it); px_wq_del takes
 * a closing socket out; px_wq_flush sends everything queued (the loop's
 * before-poll hook, and once more before the proxy exits). */
static inline void px_wr_init(struct px_wr *w, enum px_wr_kind kind,
			      const struct px_io_ops *io)
{
	*w = (struct px_wr){ .io = io, .slot = -1, .kind = (uint8_t)kind };
}
/* The ev callback of every proxy socket (arg: its px_wr): w->io->event. */
void px_io_cb(struct ev_loop *loop, int fd, int events, void *arg);
void px_wq_add(struct px_server *s, struct px_wr *w);
void px_wq_del(struct px_server *s, struct px_wr *w);
void px_wq_flush(struct ev_loop *loop, void *arg);
/* batch.c: the loop's after-poll hook: one batched receive for every ready
 * client and upstream connection that wants to read (each then marked with
 * rd_iter, so its callback does not receive again). */
void px_rd_batch(struct ev_loop *loop, const struct ev_ready *r, int n, void *arg);

/* stats.c: counters keyed by route and backend names (kept across route
 * reloads), and the --stats-addr listener's accept callback. */
struct px_stat *px_stat_get(struct px_server *s, const char *route, const char *backend);
/* stats.c: a gRPC call's result (-2 not gRPC, -1 nothing answered, else the
 * code: grpc-status of the answer, or its HTTP status mapped as the gRPC
 * spec does), the same value istio_requests_total's grpc_response_status
 * shows; px_stat_grpc counts it into ps->grpc at stream end. */
int px_grpc_result(const struct px_stream *st);
void px_stat_grpc(struct px_stat *ps, const struct px_stream *st);
void px_stats_accept_cb(struct ev_loop *loop, int fd, int events, void *arg);
/* stats.c: one finished request into the Istio standard metrics
 * (istio_requests_total ...; docs/observability.md), at stream end. */
void px_istio_record(struct px_server *s, const struct px_stream *st);

/* balance.c: outlier detection and endpoint choice (invariants 13-16). */
struct px_host *px_host_find(struct px_server *s, struct px_ip ip, uint16_t port, bool add);
bool px_host_out(struct px_server *s, struct px_host *h, uint64_t now);
bool px_ep_out(struct px_server *s, struct px_ip ip, uint16_t port, uint64_t now);
void px_outlier_note(struct px_stream *st, bool failed);	/* one try ended */
void px_try_end(struct px_stream *st);		/* in-flight and latency */
uint64_t px_hash_key(struct px_stream *st, const struct h1_header *h, size_t n);
void px_stream_pick(struct px_stream *st, bool retry);
void px_hosts_prune(struct px_server *s);	/* route reload: endpoints that left */

/* netpol.c: NetworkPolicy judged per request (its design note). */
struct md_state;
extern const char px_err_policy_egress[];	/* 403: the client's egress denies */
extern const char px_err_policy_ingress[];	/* 403: the backend's ingress denies */
/* Compile st's policies for the proxy (every pod local). 0, or -errno with
 * the reason logged; *out is the caller's (px_netpol_swap takes it). */
int px_netpol_compile(const struct md_state *st, struct pol_compiled **out);
/* Install pc (owned from now on, may be NULL), freeing the previous one,
 * and (capture mode) pick s->src_ip and s->src_ip6: the node proxy
 * addresses pc knows that are addresses of this network namespace, else
 * 0 / all zero. */
void px_netpol_swap(struct px_server *s, struct pol_compiled *pc);
/* Non-blocking TCP connect to ip:port (port host order) in ip's family:
 * IPv4 from s->src_ip, IPv6 from s->src_ip6 when set, else from the
 * address the kernel picks (netpol.c invariant 6). TCP_NODELAY on (net_connect's contract: fd, or
 * -errno; -EAFNOSUPPORT for family 0). */
int px_netpol_connect(struct px_server *s, struct px_ip ip, uint16_t port);
/* Whether NetworkPolicy lets c's client reach ip:port (TCP), pol_eval's
 * *reason / *pol_id. An IPv6 endpoint is judged with the IPv6 tables:
 * the client by its IPv6 address, or its pod's (px_table_ip6_of4). */
bool px_netpol_allows(struct px_server *s, const struct px_conn *c, struct px_ip ip,
		      uint16_t port, uint32_t *reason, uint32_t *pol_id);
/* Whether NetworkPolicy lets pod src_ip reach pod dst_ip:port (TCP, IPv4),
 * for a connection that did not come from a captured socket (the HBONE
 * server's: the client another node's proxy carried). false: *why names
 * the side and the policy ("ingress of NS/NAME", static). No tables: true. */
bool px_netpol_pair(struct px_server *s, uint32_t src_ip, uint32_t dst_ip, uint16_t port,
		    const char **why);
/* stats.c: one ready JSON line (with its newline) to the /flows followers
 * (`zerohop observe --follow`); whether there are any. */
void px_flows_follow(const struct buf *line);
bool px_flows_followed(void);
/* hbone_px.c: the HBONE server's last denials as flow lines ("drop"). */
void px_hbone_flows(struct buf *b);
/* "ns/name" of the policy pol_id (px_netpol_allows), or "-". */
const char *px_netpol_name(const struct pol_compiled *c, uint32_t pol_id);
/* Judge st's chosen endpoint for st's client. True: go on. False: denied
 * (st->err says which side, counted and logged); the caller answers 403. */
bool px_netpol_check(struct px_stream *st);

/* ---- buffers: lazily allocated, pooled (inline: on every hot path) ------- */
static inline void px_buf_get(struct px_server *s, struct buf *b)
{
	if (b->area)
		return;
	b->area = s->n_bufs ? s->bufs[--s->n_bufs] : zh_malloc(PX_BUFSZ);
	b->size = PX_BUFSZ;
	b->head = b->data = 0;
}

/* Give an empty buffer's storage back (idle connections hold none). */
static inline void px_buf_put(struct px_server *s, struct buf *b)
{
	if (!b->area || b->data)
		return;
	if (b->size == PX_BUFSZ && s->n_bufs < PX_POOL_BUFS)
		s->bufs[s->n_bufs++] = b->area;
	else
		free(b->area);
	b->area = NULL;
	b->size = b->head = b->data = 0;
}

/* A pooled buffer holding at most max bytes moves them into storage of
 * their own size and goes back to the pool (a copy kept long: the replay
 * copy of an idle stream's head, h2conn.c invariant 7). It grows again
 * through buf_reserve if more is appended. */
static inline void px_buf_fit(struct px_server *s, struct buf *b, size_t max)
{
	struct buf small;

	if (!b->area || b->size != PX_BUFSZ || !b->data || b->data > max)
		return;
	small.size = (b->data + 63) & ~(size_t)63;
	small.area = zh_malloc(small.size);
	small.head = 0;
	small.data = b->data;
	memcpy(small.area, b->area + b->head, b->data);
	b->data = 0;
	px_buf_put(s, b);
	*b = small;
}

static inline void px_buf_drop(struct px_server *s, struct buf *b)
{
	b->data = b->head = 0;
	px_buf_put(s, b);
}

/* ---- typed free lists: the objects every request allocates (a px_stream,
 * an HTTP/2 client stream, an HTTP/2 upstream try) are kept for reuse, at
 * most PX_POOL_OBJS of each kind (memory by lifetime, DESIGN.md 7.8). The
 * caller initializes what it gets: the storage is not zeroed. --------- */
#define PX_POOL_OBJS 256

struct px_free {
	struct px_free *next;
};

static inline void *px_obj_get(struct px_free **fl, unsigned *n, size_t size)
{
	struct px_free *f = *fl;

	if (!f)
		return zh_malloc(size);
	*fl = f->next;
	(*n)--;
	return f;
}

static inline void px_obj_put(struct px_free **fl, unsigned *n, void *p)
{
	struct px_free *f = p;

	if (*n >= PX_POOL_OBJS) {
		free(p);
		return;
	}
	f->next = *fl;
	*fl = f;
	(*n)++;
}

/* At exit: give every kept object back (leak checkers see none). */
static inline void px_obj_pools_free(struct px_server *s)
{
	struct px_free **lists[] = { &s->free_st, &s->free_h2s, &s->free_h2us };

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		while (*lists[i]) {
			struct px_free *f = *lists[i];

			*lists[i] = f->next;
			free(f);
		}
	s->n_free_st = s->n_free_h2s = s->n_free_h2us = 0;
}

/* ---- layers, top to bottom (docs/proxy.md "Design note": files) ---------- */

/* conn.c: the listener and HTTP/1.1 client connections. */
void px_accept_cb(struct ev_loop *loop, int fd, int events, void *arg);
void px_conn_close(struct px_conn *c);
/* Close client connections with no stream and nothing to write that were
 * silent for at least min_idle; returns how many. */
uint64_t px_conn_close_idle(struct px_server *s, uint64_t min_idle);
/* Drain (invariant 18): HTTP/2 connections get a GOAWAY now. */
void px_conn_drain(struct px_server *s);

/* h1req.c: HTTP/1.1 requests over c->in / c->out: start, pump and end
 * streams as far as the buffered bytes allow (no socket touched). */
void px_h1_run(struct px_conn *c);

/* h2conn.c: HTTP/2 client connections (prior knowledge, RFC 9113 3.3). */
/* b starts with the client preface: 1; b holds a prefix of it (maybe
 * empty): 0; anything else: -1. */
int px_h2_preface(const struct buf *b);
void px_h2_start(struct px_conn *c);	/* c's bytes are HTTP/2 from now on */
void px_h2_run(struct px_conn *c);	/* frames in c->in, out to c->out */
void px_h2_free(struct px_conn *c);	/* c closes: its streams go */
void px_h2_goaway(struct px_conn *c);	/* drain: GOAWAY, in-flight streams finish */
/* The idle sweep found c without a request stream: libnghttp2's pages it
 * cannot miss go back to the kernel (h2mem.c), once per idle period. */
void px_h2_idle(struct px_conn *c);
/* The idle sweep: end every HTTP/2 client stream without a frame either
 * way for s->stream_idle_ns (h2conn.c invariant 9), counted in
 * s->n_stream_idle. No-op when the timeout is off. */
void px_h2_sweep_streams(struct px_server *s, uint64_t now);
/* Send for every connection whose views progressed (h2conn.c invariant 5):
 * called by px_wq_flush before each round of sends. */
void px_h2_run_queued(struct px_server *s);

/* h2flood.c (types at the top) */
void px_h2_ctrl_init(struct px_h2_ctrl *b, uint64_t now);
void px_h2_ctrl_credit(struct px_h2_ctrl *b, double n);	/* work done: n to every kind */
/* A frame of type/flags arrived at now: -1 when it is not a limited control
 * frame (or an ACK) or within its kind's budget; else the enum px_h2_flood
 * of the kind whose budget it exceeds (the caller ends the connection). */
int px_h2_ctrl_take(struct px_h2_ctrl *b, uint8_t type, uint8_t flags, uint64_t now);
const char *px_h2_flood_name(enum px_h2_flood k);	/* "ping_flood" (metric label) */

/* stream.c: a request (head parsed by the client layer) → stream: route,
 * forward, pumps both ways, replies, retries and timers, the end. */
extern const struct px_up_ops px_stream_up_ops;
struct px_stream *px_stream_new(struct px_conn *c);
/* The head did not parse (h1 error e): answer it and end st. */
void px_stream_bad_head(struct px_stream *st, int e);
/* Start st from its parsed head (head_len bytes at the front of c->in):
 * checks, route, local answer or first try. Always 0. */
int px_stream_open(struct px_stream *st, const struct h1_request *rq,
		   const struct h1_header *h, size_t n, size_t head_len);
int px_pump_req(struct px_stream *st);
int px_pump_resp(struct px_stream *st);
/* st's response is complete while its request body is still coming: the
 * upstream is released, the rest of the body dropped (invariant 23). */
void px_stream_early_answer(struct px_stream *st);
void px_reply(struct px_conn *c, int status, const char *reason, const char *extra,
	      bool close_conn);
const char *px_reason(int status);
void px_stream_fail(struct px_stream *st, int status, const char *err);
void px_stream_end(struct px_stream *st);
void px_stream_free(struct px_stream *st);	/* client gone: no answer */

/* h2up.c: HTTP/2 upstreams (backends whose port declares h2c): one
 * multiplexed connection per endpoint, more while the backend's
 * SETTINGS_MAX_CONCURRENT_STREAMS is reached on each (up to max_conns);
 * each try is a socketless px_up (u->h2) whose out/in hold the
 * request/response as HTTP/1.1 bytes. 0 or -errno. */
int px_h2up_get(struct px_server *s, int host, uint32_t max_conns, struct px_up **out);
void px_h2up_release(struct px_up *u);	/* the stream is done with u: reset if open */
/* Whether a try to hosts[host] would get a stream now: a live connection
 * below the backend's stream limit, or fewer than max_conns connections
 * (so one opens). False: px_pool_get makes it wait (invariant 22). */
bool px_h2up_room(struct px_server *s, int host, uint32_t max_conns);
void px_h2up_update(struct px_up *u);	/* u->out grew or u->in drained */
/* The answer's head as fields (h2up.c invariant 7): 0 with *r and h[0..*n)
 * filled (pointing into the try, valid until it is released; a headers-
 * only answer gets "content-length: 0"), -EAGAIN before it arrived,
 * -EPROTO when it has more than *n fields (in: the capacity of h). */
int px_h2up_resp_head(struct px_up *u, struct h1_response *r, struct h1_header *h, size_t *n);
/* Run every kicked connection's session (h2up.c invariant 1): called by
 * px_wq_flush before each round of sends, so the loop never waits with a
 * connection kicked and not run. */
void px_h2up_run_kicked(struct px_server *s);
void px_h2up_close_all(struct px_server *s);	/* server exit */
/* Close connections without a try that idled up_idle (the idle sweep,
 * invariant 8) or whose endpoint left the table (a reload, invariant 20;
 * gone_only: only those). */
void px_h2up_close_idle(struct px_server *s, uint64_t now, bool gone_only);

/* upstream.c: upstream connections and the per-endpoint pools. */
/* An upstream for a try of st to hosts[host] (invariants 21-22): 0 with
 * *out (a pooled idle one, else a new connecting one), -EAGAIN when st was
 * put on the endpoint's pending FIFO (s->up_ops->slot serves it later),
 * -EBUSY when that is full, or -errno when connecting failed at once. */
int px_pool_get(struct px_server *s, int host, struct px_stream *st, struct px_up **out);
void px_up_attach(struct px_up *u, struct px_stream *st);
void px_up_release(struct px_up *u, bool reusable);
void px_up_update(struct px_up *u);
void px_up_close(struct px_up *u);
void px_pend_remove(struct px_stream *st);	/* leave the pending FIFO, if in it */
/* A slot of hosts[host] may have freed (an h2c try released, a connection
 * closed, a backend's SETTINGS): serve its pending FIFO soon, if any. */
void px_pool_wake(struct px_server *s, int host);
void px_pool_prune(struct px_server *s);	/* route reload: close idle upstreams that left */
void px_pool_close_idle(struct px_server *s, uint64_t now);	/* idle sweep (invariant 8) */
void px_pool_close_all(struct px_server *s);	/* server exit */

#endif
