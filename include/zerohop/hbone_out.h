/* hbone_out.h — the HBONE tunnel's client side (prefix hbo_): a pod's TCP
 * connection carried to a pod on another node in an HTTP/2 CONNECT stream
 * over mutual TLS 1.3, as Istio ambient's ztunnel outbound (docs/mtls.md
 * "The HBONE client"). The server side is hbone.h; the node proxy decides
 * who is who from its model state (src/proxy/hbone_px.c) and hands each
 * captured connection over with hbo_connect().
 *
 * Objects, on the caller's event loop (ev.h):
 *   client   the pool: tunnels, client connections (streams), the per
 *            source-pod TLS contexts (SVID files re-read when they change)
 *   tunnel   one TCP + TLS + HTTP/2 session to a destination node's HBONE
 *            address, keyed by (source pod, destination pod, node address):
 *            it presents the source pod's SVID, SNI "DSTPOD.DSTNS" (the
 *            server presents that pod's SVID) and expects that pod's
 *            SPIFFE ID; many concurrent CONNECT streams.
 *   stream   one client connection: CONNECT ":authority" = DSTIP:PORT.
 *
 * Tunnel:  CONNECTING ──TCP up──► HANDSHAKE ──TLS 1.3, ALPN h2, the
 *          expected identity──► READY ──GOAWAY received──► GOAWAY
 *            │ refused / timeout (O5)   │ refused / timeout  │ idle (O6),
 *            ▼                          ▼                    ▼ EOF, error
 *          closed: its waiting streams fail (connect_refused, tls_refused)
 * Stream:  WAIT (tunnel not READY) ──CONNECT sent──► ASKED ──200──► RELAY
 *          ──both END_STREAMs, bytes written──► closed gracefully (close)
 *          ASKED: 403 denied, 503 unavailable, other bad_status; RELAY:
 *          RST_STREAM or tunnel lost: reset — each closes the client with
 *          an RST (SO_LINGER 0) and is counted and logged with its reason.
 *          ASKED on a tunnel that dies or refuses the stream (GOAWAY,
 *          REFUSED_STREAM) before any answer: moved once to a new tunnel
 *          (no byte of the client was sent yet: O2).
 *
 * Invariants:
 *  O1 A client connection's bytes go only into a tunnel whose TLS handshake
 *     presented the source pod's own SVID and verified the peer as the
 *     destination pod's SPIFFE ID (identity.h I8); a refusal closes the
 *     client with an RST and counts the reason.
 *  O2 The client is read only once its stream got 200: nothing is sent
 *     for a stream that is denied, and a stream moved to another tunnel
 *     has sent nothing.
 *  O3 Flow control end to end, as the server's H2: a stream's receive
 *     window is given back only as its bytes are written to the client;
 *     the client is read only while the stream's send buffer is below
 *     HB_HIGH. No stream buffers more than HB_HIGH bytes either way.
 *  O4 END_STREAM <-> shutdown(SHUT_WR) both ways: the client's EOF ends
 *     the stream's sending side once its buffer is sent; the peer's
 *     END_STREAM shuts the client's write side once the buffered bytes
 *     are written.
 *  O5 A tunnel not READY within handshake_ms of its connect is closed and
 *     its waiting streams fail (connect_refused when TCP never came up,
 *     else tls_refused).
 *  O6 A READY tunnel with no stream for idle_ms gets a GOAWAY and is
 *     closed (counted in idle_closed). At most max_tunnels tunnels are
 *     open; a new one closes the longest-idle stream-less tunnel first,
 *     else the client connection is refused (tunnel_cap).
 *  O7 A tunnel carries at most min(HBO_MAX_STREAMS, the peer's
 *     SETTINGS_MAX_CONCURRENT_STREAMS) streams; one more, or a tunnel in
 *     GOAWAY, opens another tunnel for the same key.
 *  O8 Everything is freed when it closes (stream: its socket and buffers;
 *     tunnel: SSL, session, socket, its reference to the TLS context; the
 *     context when its last tunnel closes), and by hbo_client_close().
 *  O9 Log lines name pods, addresses and reasons, never key material
 *     (identity.h I9); a tunnel's failure is one line however many client
 *     connections it closes.
 *  O10 Renewal: a tunnel takes new streams only while the source pod's
 *     SVID and bundle it was made with are the newest on disk (looked at
 *     at most once a second per source pod, when one of its connections
 *     comes). After a renewal or a CA rotation new connections get a new
 *     tunnel with the new SVID; the old one is retired (state GOAWAY, no
 *     new stream) and closed as soon as its last stream ends. So a
 *     certificate serves new connections until its renewal at half-life
 *     at the latest, never until its expiry.
 */
#ifndef ZH_HBONE_OUT_H
#define ZH_HBONE_OUT_H

#include <stdint.h>

#include "zerohop/hbone.h"

#define HBO_IDLE_MS 240000	/* O6 default: below the server's HB_IDLE_MS, so
				 * the client ends an idle tunnel first */
#define HBO_MAX_TUNNELS 1024	/* O6 default */
#define HBO_MAX_STREAMS 100	/* O7: streams per tunnel (ztunnel's pool) */

struct ev_loop;
struct hbo_client;

/* Why a client connection was closed without its answer (metric labels:
 * hbo_fail_name). The first five are decided by the caller (hbone_px.c). */
enum hbo_fail {
	HBO_F_NO_STATE,		/* no model state loaded yet */
	HBO_F_NO_SOURCE_POD,	/* the client is not a pod of this node */
	HBO_F_NO_DESTINATION,	/* no pod with that IP, or its node has no address */
	HBO_F_IPV6,		/* an IPv6 client: not supported yet */
	HBO_F_NETWORK_POLICY,	/* the client's egress or the destination's ingress */
	HBO_F_NO_SOURCE_SVID,	/* no usable SVID for the source pod */
	HBO_F_TUNNEL_CAP,	/* max_tunnels open, none idle (O6) */
	HBO_F_CONNECT_REFUSED,	/* TCP to the destination node failed */
	HBO_F_TLS_REFUSED,	/* handshake refused or timed out (O1, O5) */
	HBO_F_DENIED,		/* 403 */
	HBO_F_UNAVAILABLE,	/* 503: the destination refused the server's connect */
	HBO_F_BAD_STATUS,	/* any other answer */
	HBO_F_RESET,		/* RST_STREAM, or the tunnel lost, after the 200 */
	HBO_F__N
};
const char *hbo_fail_name(enum hbo_fail f);	/* "tls_refused" */

struct hbo_opts {
	struct ev_loop *loop;
	const char *svid_dir;		/* this node's SVIDs (identity.h) */
	int handshake_ms;		/* O5; <= 0: HB_HANDSHAKE_MS */
	int idle_ms;			/* O6; <= 0: HBO_IDLE_MS */
	int max_tunnels;		/* O6; <= 0: HBO_MAX_TUNNELS */
};

/* Where one client connection goes; strings are copied. */
struct hbo_target {
	const char *src_ns, *src_pod;	/* the client's pod: the SVID presented */
	const char *dst_ns, *dst_pod;	/* the destination pod: SNI "POD.NS" */
	const char *dst_sa;		/* its ServiceAccount: the identity expected
					 * is spiffe://TD/ns/DST_NS/sa/DST_SA, TD the
					 * source SVID's trust domain */
	uint32_t node_ip;		/* the destination node's HBONE address (network order) */
	uint16_t node_port;		/* host order; 0: HB_PORT */
	uint32_t bind_ip;		/* a new tunnel leaves from it (network order); 0: any */
	uint32_t dst_ip;		/* the original destination: ":authority" */
	uint16_t dst_port;		/* host order */
	uint32_t client_ip;		/* the client pod: logs, and the CONNECT's
					 * HB_HDR_SOURCE (network order; 0: none) */
	uint16_t client_port;
};

struct hbo_stats {
	uint64_t tunnels;		/* tunnels opened (TCP connects started) */
	uint64_t tunnels_open;		/* open now (gauge) */
	uint64_t idle_closed;		/* closed after idle_ms (O6) */
	uint64_t streams;		/* CONNECT streams sent */
	uint64_t established;		/* ... answered 200 */
	uint64_t retried;		/* moved to another tunnel before an answer */
	uint64_t ctx_loads;		/* TLS contexts made: first use, SVID renewed */
	uint64_t bytes_out, bytes_in;	/* client -> tunnel, tunnel -> client */
	uint64_t buf_peak;		/* the largest stream buffer seen (O3) */
	uint64_t failed[HBO_F__N];	/* client connections refused, by reason */
};

/* 0 or -errno. */
int hbo_client_new(const struct hbo_opts *o, struct hbo_client **out);

/* Carry client socket fd (connected, any blocking mode) to t. fd is owned
 * from now on in every case: on a refusal decided at once (no SVID, the
 * cap) it is closed with an RST, counted and logged, and -errno returned;
 * later failures are handled the same way inside the loop. */
int hbo_connect(struct hbo_client *c, int fd, const struct hbo_target *t);

/* Refuse fd for a reason the caller decided (the HBO_F_NO_* ones): RST,
 * counted, one log line "hbone-out: CLIENT -> DST: why". Takes fd. */
void hbo_refuse(struct hbo_client *c, int fd, enum hbo_fail f, const char *client,
		const char *dst, const char *why);

const struct hbo_stats *hbo_client_stats(const struct hbo_client *c);
/* Closes every tunnel and client connection (RST), frees everything (O8). */
void hbo_client_close(struct hbo_client *c);

#endif
