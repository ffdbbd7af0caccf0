/* hbone.h — the HBONE tunnel's server side (prefix hb_): HTTP/2 CONNECT
 * over mutual TLS 1.3, as Istio ambient's ztunnel on port 15008
 * (docs/mtls.md): the server, which the node proxy runs on NODE_IP:15008
 * and its proxy address :15008 (capture mode, on by default; off with
 * `zerohop proxy --hbone=off` or ZH_PROXY_HBONE=0; src/proxy/hbone_px.c
 * decides each CONNECT). The client side is hbone_out.h.
 *
 * One listener on a caller's event loop (ev.h). Per accepted connection:
 *   HANDSHAKE ── TLS 1.3 done, ALPN h2, peer SVID verified (identity.h I8) ──► H2
 *       │                                                                  │
 *       └── refused: hb_stats.tls_refused++, reason logged (I9) ──► closed   │
 *   H2: each CONNECT stream (":authority" = original destination IP:PORT)
 *       is authorized (opts.authorize with the peer's SPIFFE ID), then
 *       connected; 200 once connected, 403 when denied (counted with the
 *       reason), 503 when the connect fails; bytes both ways until either
 *       side ends (END_STREAM <-> shutdown(SHUT_WR)).
 *
 * Invariants:
 *  H1 No byte reaches a destination before its stream was authorized for
 *     the peer's verified identity.
 *  H2 Flow control end to end: a stream's window is given back only as
 *     its bytes are written to the destination (no unbounded buffering);
 *     the destination is read only while the stream's send buffer is
 *     below HB_HIGH.
 *  H3 Everything a connection owns (streams, their sockets, SSL, session)
 *     is freed when it closes, whichever side closes first.
 *  H4 A connection that has not finished its TLS handshake (and ALPN h2)
 *     within handshake_ms of its accept is closed and counted as refused,
 *     so a peer cannot hold connections open without authenticating.
 *  H5 An authenticated connection with no stream open for idle_ms (since
 *     its handshake or its last stream's end) is closed (GOAWAY, then the
 *     socket) and counted in idle_closed: a peer's idle tunnels do not
 *     hold file descriptors and buffers for ever.
 *  H6 At most max_conns connections are open at once; one more is closed
 *     at its accept, before any TLS work, and counted in cap_refused.
 */
#ifndef ZH_HBONE_H
#define ZH_HBONE_H

#include <stdint.h>

#define HB_PORT 15008	/* Istio's HBONE port */
#define HB_HIGH 65536	/* per-stream buffer high watermark */
/* A tunnel's connection-level receive window, both ends: one stream
 * holding its HB_HIGH (a destination or client not reading, H2) must not
 * stall the others; memory stays bounded per stream by HB_HIGH. 100
 * streams: the client's per-tunnel cap (hbone_out.h O7). */
#define HB_CONN_WINDOW (100 * HB_HIGH)
#define HB_HANDSHAKE_MS 10000	/* H4 default */
#define HB_IDLE_MS 300000	/* H5 default: 5 min, as ztunnel's pool idle timeout */
#define HB_MAX_CONNS 1024	/* H6 default */

struct ev_loop;
struct hb_server;

/* NULL: allow; else the reason (logged, counted). peer is the verified
 * SPIFFE ID, sni the "POD.NS" whose SVID the server presented (NULL with a
 * fixed ns/pod); dst_ip network order, dst_port host order; src_ip the
 * client the stream says it carries (HB_HDR_SOURCE, network order), 0
 * when it says none: a claim, which the callback checks against peer. */
typedef const char *hb_authorize_fn(void *arg, const char *peer, const char *sni,
				    uint32_t dst_ip, uint16_t dst_port, uint32_t src_ip);

/* The CONNECT request header naming the client connection the stream
 * carries, as RFC 7239 writes it and ztunnel sends it: "for=IP" or
 * "for=\"IP:PORT\"" (IPv4). */
#define HB_HDR_SOURCE "forwarded"

struct hb_opts {
	struct ev_loop *loop;
	const char *listen;		/* "IP:PORT" (PORT 0: ephemeral) */
	const char *listen2;		/* a second "IP:PORT" (the node proxy's
					 * address, where clients dial), or NULL */
	const char *svid_dir;		/* the node's SVIDs (identity.h) */
	const char *ns, *pod;		/* whose SVID the server presents; NULL:
					 * the pod named by SNI (id_tls_ctx_sni) */
	hb_authorize_fn *authorize;
	void *arg;
	int handshake_ms;		/* H4; <= 0: HB_HANDSHAKE_MS */
	int idle_ms;			/* H5; <= 0: HB_IDLE_MS */
	int max_conns;			/* H6; <= 0: HB_MAX_CONNS */
};

struct hb_stats {
	uint64_t conns, tls_refused, streams, denied, connect_failed, bytes_up, bytes_down;
	uint64_t idle_closed, cap_refused;	/* H5, H6 */
	uint64_t open;				/* connections open now */
};

/* Listen and serve on o->loop. 0 or -errno (err: a line). */
int hb_server_open(const struct hb_opts *o, struct hb_server **out, char *err, size_t errlen);
/* HB_HDR_SOURCE's value -> the IPv4 it names (network order), 0 if none. */
uint32_t hb_forwarded_for(const char *v, size_t len);
int hb_server_port(const struct hb_server *s);	/* the bound port (of listen) */
const struct hb_stats *hb_server_stats(const struct hb_server *s);
void hb_server_close(struct hb_server *s);	/* closes every connection */

#endif
