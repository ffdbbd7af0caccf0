/* abi/lb.h — types shared by the service load-balancing BPF programs
 * (bpf/lb.bpf.c) and the agent (src/agent). Types only: no functions, no
 * maps. Compiled by clang -target bpf and by gcc, so every field is
 * fixed-width, padding is explicit and sizes are asserted.
 *
 * Addresses are 16 bytes, IPv4 as v4-mapped IPv6 (::ffff:a.b.c.d): the
 * IPv6 socket hooks (connect6 ... getpeername6) look up a v4-mapped
 * destination of an AF_INET6 socket with the very same keys; native IPv6
 * ClusterIPs and their IPv6 backends use the same layout (docs/ipv6.md). Ports are in network
 * order in every key and value (as the hooks see them in user_port).
 *
 * Map overview (details and limits in docs/maps.md):
 *   lb_svc     hash  zh_lb_svc_key   -> zh_lb_svc_val    one per VIP:port/proto
 *   lb_alias   hash  zh_lb_alias_key -> zh_lb_alias_val  n entries per service
 *                                                            and revision slot
 *   lb_sock    sk_storage           -> zh_lb_sock_val    per connected socket
 *   lb_udprev  lru   zh_lb_udprev_key -> zh_lb_udprev_val unconnected UDP replies
 *   lb_meta    array u32 (ZH_LB_META_*) -> u64           settings + apply marker
 *   lb_stats   percpu array u32 (ZH_LB_STAT_*) -> u64     counters
 */
#ifndef ZH_ABI_LB_H
#define ZH_ABI_LB_H

#include <linux/types.h>

#define ZH_LB_MAX_SVC		65536	/* service entries (VIP:port/proto) */
#define ZH_LB_MAX_ALIAS		(1 << 20)	/* alias entries, both slots together */
#define ZH_LB_MAX_BACKENDS	4096	/* backends of one service (alias n) */
#define ZH_LB_MAX_UDPREV	65536	/* unconnected-UDP reverse entries (LRU) */

enum zh_lb_proto {		/* IPPROTO_* values, as in the socket's sk->protocol */
	ZH_LB_TCP = 6,
	ZH_LB_UDP = 17,
};

enum zh_lb_svc_flags {
	ZH_LB_F_L7 = 1 << 0,	/* TCP only: needs the node L7 proxy (an HTTPRoute
				 * with matches/filters, or the annotation
				 * ZH_LB_ANN_L7): connect4 redirects to the
				 * proxy (abi/l7cap.h), counts ZH_LB_STAT_L7_REDIRECT */
	ZH_LB_F_SPLIT = 1 << 1,	/* weights come from a TrafficSplit/HTTPRoute */
};

/* Service annotation that opts a Service into the L7 proxy (value "true"). */
#define ZH_LB_ANN_L7	"zerohop.io/l7"

struct zh_lb_svc_key {
	__u8 vip[16];		/* v4-mapped */
	__be16 port;		/* network order */
	__u8 proto;		/* enum zh_lb_proto */
	__u8 pad;
};
_Static_assert(sizeof(struct zh_lb_svc_key) == 20, "zh_lb_svc_key size");

/* Invariant: when count > 0, lb_alias holds entries {svc_id, slot, 0..count-1}
 * before this value is written (make-before-break). count == 0: the service
 * exists but has no ready endpoint -> connect fails with ECONNREFUSED. */
struct zh_lb_svc_val {
	__u32 svc_id;		/* stable for the key's lifetime, never 0 */
	__u32 count;		/* alias entries (= backends with weight > 0) */
	__u32 revision;		/* bumped on every content change (debug, get) */
	__u8 slot;		/* 0 or 1: which alias entries are live */
	__u8 flags;		/* enum zh_lb_svc_flags */
	__u16 pad;
};
_Static_assert(sizeof(struct zh_lb_svc_val) == 16, "zh_lb_svc_val size");

struct zh_lb_alias_key {
	__u32 svc_id;
	__u16 slot;		/* 0 or 1 */
	__u16 idx;		/* 0 .. count-1 */
};
_Static_assert(sizeof(struct zh_lb_alias_key) == 8, "zh_lb_alias_key size");

struct zh_lb_backend {
	__u8 addr[16];		/* v4-mapped */
	__be16 port;		/* network order */
	__u16 pad;
};
_Static_assert(sizeof(struct zh_lb_backend) == 20, "zh_lb_backend size");

/* Walker's alias method: pick idx = rand % count, then a when a second random
 * u32 < threshold, else b. Proportions exact to 2^-32. */
struct zh_lb_alias_val {
	struct zh_lb_backend a;
	struct zh_lb_backend b;
	__u32 threshold;	/* P(a | idx) * 2^32, saturated at 0xffffffff = always a */
};
_Static_assert(sizeof(struct zh_lb_alias_val) == 44, "zh_lb_alias_val size");

/* Per connected socket (TCP, connected UDP): the ClusterIP it asked for and
 * the backend it got, for getpeername and recvmsg. */
struct zh_lb_sock_val {
	__u8 vip[16];
	__be16 vport;
	__u16 pad;
	struct zh_lb_backend be;
	__u32 svc_id;
	__u32 pad2;		/* room for policy state */
};
_Static_assert(sizeof(struct zh_lb_sock_val) == 48, "zh_lb_sock_val size");

struct zh_lb_udprev_key {
	__u64 cookie;		/* socket cookie */
	__u8 addr[16];		/* backend address (reply source) */
	__be16 port;
	__u16 pad;
	__u32 pad2;
};
_Static_assert(sizeof(struct zh_lb_udprev_key) == 32, "zh_lb_udprev_key size");

struct zh_lb_udprev_val {
	__u8 vip[16];
	__be16 vport;
	__u16 pad;
};
_Static_assert(sizeof(struct zh_lb_udprev_val) == 20, "zh_lb_udprev_val size");

/* lb_meta indices: runtime settings and markers, never bare numbers. */
enum zh_lb_meta_idx {
	ZH_LB_META_GENERATION = 0,	/* state generation the maps reflect (written last) */
	ZH_LB_META_SYNCS,		/* number of completed syncs */
	ZH_LB_META_AGENT_PID,		/* pid of the agent that wrote last (get, debug) */
	ZH_LB_META_MAX,
};

/* lb_stats indices; also the metric labels (docs/maps.md). */
enum zh_lb_stat {
	ZH_LB_STAT_CONNECT_XLATE = 0,	/* connect4/6 rewrote a VIP to a backend */
	ZH_LB_STAT_CONNECT_NOBACKEND,	/* connect4/6 refused: service without endpoints */
	ZH_LB_STAT_SENDMSG_XLATE,	/* sendmsg4/6 rewrote a datagram */
	ZH_LB_STAT_SENDMSG_NOBACKEND,	/* sendmsg4/6 refused */
	ZH_LB_STAT_RECVMSG_REVNAT,	/* recvmsg4/6 restored the VIP as source */
	ZH_LB_STAT_GETPEERNAME_REVNAT,	/* getpeername4/6 restored the VIP */
	ZH_LB_STAT_ALIAS_MISS,		/* alias entry missing (must stay 0) */
	ZH_LB_STAT_L7_REDIRECT,		/* connect4/6 redirected an L7 service to the node proxy */
	ZH_LB_STAT_L7_NOPROXY,		/* connect4 refused an L7 service: no proxy address yet */
	ZH_LB_STAT_V6_MAPPED,		/* connect6/sendmsg6 met a v4-mapped VIP (an AF_INET6
					 * socket); also counted by the stat of its outcome */
	ZH_LB_STAT_V6_NATIVE,		/* connect6/sendmsg6 met a native IPv6 destination that
					 * is no Service: passed through untouched (an IPv6
					 * ClusterIP counts as CONNECT/SENDMSG_*, docs/ipv6.md) */
	ZH_LB_STAT_HBONE_REDIRECT,	/* connect4/6 sent a connection to a STRICT pod on
					 * another node to the node proxy's tunnel (invariant 10) */
	ZH_LB_STAT_MAX,
};

/* lb_mtls: the pods of OTHER nodes with a port under STRICT mutual TLS
 * (docs/mtls.md "Client side"), written by the agent (src/agent/mtls.c).
 * Key {pod IPv4, port}: port 0 is the pod's own mode, a port entry is an
 * exception (portLevelMtls) that wins over it. Only pods with some STRICT
 * port have entries. */
#define ZH_LB_MAX_MTLS		65536
struct zh_lb_mtls_key {
	__be32 ip;		/* pod IPv4, network order */
	__be16 port;		/* container port, network order; 0 = the pod's mode */
	__u16 pad;		/* zero */
};
_Static_assert(sizeof(struct zh_lb_mtls_key) == 8, "zh_lb_mtls_key size");
enum zh_lb_mtls_mode {
	ZH_LB_MTLS_STRICT = 1,	/* tunnel (HBONE) */
	ZH_LB_MTLS_PLAIN = 2,	/* a port exception that is not STRICT */
};

#endif
