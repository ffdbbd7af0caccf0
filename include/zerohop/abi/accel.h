/* abi/accel.h — types shared by bpf/accel.bpf.c and src/agent/accel.c.
 * Types only; fixed-width fields, explicit padding; compiled by clang -target
 * bpf and by gcc. */
#ifndef ZH_ABI_ACCEL_H
#define ZH_ABI_ACCEL_H

#include <linux/types.h>	/* __u32 etc., for both compilers */

/* Map sizes. */
#define ZH_ACCEL_MAX_SOCKS	65536	/* sockhash entries: established short-circuited sockets */
#define ZH_ACCEL_MAX_LOCAL	4096	/* local endpoints (this node's pod IPv4s; as
					 * many IPv6s in accel_local6) */
#define ZH_ACCEL_MAX_SKIP_PORTS	256	/* ports excluded from the short-circuit */
#define ZH_ACCEL_MAX_PROXY	16	/* node proxy endpoints (accel_proxy) */

/* Backpressure (bpf/accel.bpf.c invariant 13). Each time a sender's
 * short-circuited byte count crosses a multiple of ZH_ACCEL_BP_CHECK, its
 * sk_msg program reads the receiver's short-circuit queue (psock
 * msg_tot_len); deeper than the receiver's sk_rcvbuf + ZH_ACCEL_BP_SLACK,
 * the sender takes the normal path until the receiver has read every byte
 * (ZH_ACCEL_SK_BP). The slack: what TCP lets a sender
 * have outstanding is the receiver's window (at most its rcvbuf) plus its
 * own send buffer, which autotuning grows up to tcp_wmem[2] (4 MiB by
 * default). So a queue holds at most about rcvbuf + SLACK + CHECK bytes. */
#define ZH_ACCEL_BP_SLACK	(4U << 20)
#define ZH_ACCEL_BP_CHECK_SHIFT	20	/* ZH_ACCEL_BP_CHECK = 1 MiB */
#define ZH_ACCEL_BP_CHECK	(1U << ZH_ACCEL_BP_CHECK_SHIFT)

/* accel_rxq / accel_rxq6 value: where a short-circuited socket's queue
 * length is, written by sock_ops when the socket enters the sockhash (its
 * psock exists from then on), read by its peer's sk_msg. */
struct zh_accel_rxq {
	__u64 psock;		/* kernel address of its struct sk_psock (read with
				 * bpf_probe_read_kernel: never dereferenced) */
	__u64 bound;		/* sk_rcvbuf at insert + ZH_ACCEL_BP_SLACK */
};
_Static_assert(sizeof(struct zh_accel_rxq) == 16, "zh_accel_rxq layout");

/* A node L7 proxy endpoint (accel_proxy key): a connection between one of
 * this node's pods and this endpoint is short-circuited like a pod-to-pod
 * one, when the proxy's own cgroup carries the sock_ops link too
 * (ag_accel_attach_proxy). port 0 = any port of ip (the proxy's upstream
 * source address); else exactly ip:port (its capture listener). */
struct zh_accel_proxy_ep {
	__u32 ip4;		/* network byte order */
	__u32 port;		/* host byte order; 0: any */
};
_Static_assert(sizeof(struct zh_accel_proxy_ep) == 8, "zh_accel_proxy_ep layout");

/* The same for the node proxy's IPv6 endpoints (accel_proxy6): its IPv6
 * capture listener, reached by native IPv6 clients of L7 Services. */
struct zh_accel_proxy_ep6 {
	__u32 ip6[4];		/* network byte order */
	__u32 port;		/* host byte order; 0: any */
};
_Static_assert(sizeof(struct zh_accel_proxy_ep6) == 20, "zh_accel_proxy_ep6 layout");

/* Sockhash key: one socket, as seen from its own side. Built by ONE helper
 * (bpf/lib/accel_key.h) from a sock_ops or an sk_msg context.
 * netns is the socket's netns cookie for loopback (127.0.0.0/8: every pod
 * has its own), 0 for pod addresses, which are unique on the node: a pod's
 * peer lives in another netns whose cookie the sender cannot know. */
struct zh_accel_key {
	__u64 netns;		/* netns cookie (loopback only), else 0 */
	__u32 local_ip4;	/* network byte order */
	__u32 remote_ip4;	/* network byte order */
	__u32 local_port;	/* host byte order */
	__u32 remote_port;	/* host byte order */
};
_Static_assert(sizeof(struct zh_accel_key) == 24, "zh_accel_key layout");

/* The same for a native IPv6 connection (accel_sockhash6): netns is the
 * cookie when either end is ::1, addresses are __u32[4] words in network
 * order as the contexts give them. A twin of zh_accel_key rather than one
 * wide key, so the IPv4 fast path hashes 24 bytes, not 48. */
struct zh_accel_key6 {
	__u64 netns;		/* netns cookie (loopback only), else 0 */
	__u32 local_ip6[4];	/* network byte order */
	__u32 remote_ip6[4];	/* network byte order */
	__u32 local_port;	/* host byte order */
	__u32 remote_port;	/* host byte order */
};
_Static_assert(sizeof(struct zh_accel_key6) == 48, "zh_accel_key6 layout");

/* Per-CPU counters, index = enum zh_accel_stat. */
enum zh_accel_stat {
	ZH_ACCEL_ST_SOCKETS = 0,	/* sockets inserted in the sockhash */
	ZH_ACCEL_ST_MSGS,		/* messages redirected */
	ZH_ACCEL_ST_BYTES,		/* bytes redirected */
	ZH_ACCEL_ST_FALLBACKS,		/* messages passed to the normal path */
	ZH_ACCEL_ST_REMOVED,		/* sockets deleted from the sockhash on close */
	ZH_ACCEL_ST_SKIPPED,		/* local<->local sockets not inserted (update failed) */
	ZH_ACCEL_ST_DEMOTED,		/* sockets demoted by a policy generation change */
	ZH_ACCEL_ST_RELEASED,		/* sockets taken out early with an empty queue
					 * (half-close, SO_RCVLOWAT) */
	ZH_ACCEL_ST_PROXY,		/* of SOCKETS: inserted as a node proxy leg
					 * (one end in accel_proxy) */
	ZH_ACCEL_ST_FIN_HELD,		/* FIN segments (or, peer closed first, ACKs
					 * of our FIN) held back while the receiving
					 * socket's short-circuit queue held unread
					 * bytes (half-close; accel.bpf.c inv. 11) */
	ZH_ACCEL_ST_BACKPRESSURE,	/* a sender moved to TCP because its peer's
					 * short-circuit queue was deeper than its
					 * bound (accel.bpf.c inv. 13) */
	ZH_ACCEL_ST_BP_RESUMED,		/* such a sender back on the short-circuit:
					 * the reader had read every byte (inv. 13) */
	ZH_ACCEL_ST__MAX,
};

/* Runtime settings, index = enum zh_accel_cfg (array of __u32). */
enum zh_accel_cfg {
	ZH_ACCEL_CFG_POLICY_GEN = 0,	/* current policy generation (ag_accel_set_policy_gen) */
	ZH_ACCEL_CFG_DISABLED,		/* 1 after --accel off: no insert, every socket demoted */
	ZH_ACCEL_CFG__MAX,
};

/* Per-socket state (BPF_MAP_TYPE_SK_STORAGE), created by sock_ops at insert.
 * It carries the peer's key, built once per socket, so sk_msg builds no key
 * and calls no netns helper per message. */
enum zh_accel_sk_flags {
	ZH_ACCEL_SK_PASS = 1,		/* sticky: this socket sent on the normal path once;
					 * it must never redirect again (ordering) */
	ZH_ACCEL_SK_MARKED = 2,		/* this socket has marked its peer in accel_rx */
	ZH_ACCEL_SK_V6 = 4,		/* a native IPv6 connection: peer6 is the key,
					 * and the maps are the ...6 twins */
	ZH_ACCEL_SK_BP = 8,		/* backpressure: the normal path until the
					 * peer has read every byte (inv. 13) */
};
struct zh_accel_sk {
	union {
		struct zh_accel_key peer;	/* key of the other end of this connection */
		struct zh_accel_key6 peer6;	/* the same, ZH_ACCEL_SK_V6 */
	};
	__u32 policy_gen;		/* generation when inserted */
	__u32 flags;			/* enum zh_accel_sk_flags */
	__u64 sc_tx;			/* bytes this socket sent through the short-circuit
					 * (read at close by bpf/obs.bpf.c: the TCP
					 * counters never see them) */
	__u64 fin_held_ns;		/* when a closing segment (FIN, or ACK of our
					 * FIN) to this socket was first held back
					 * (bpf_ktime_get_ns), 0: never */
};
_Static_assert(sizeof(struct zh_accel_sk) == 72, "zh_accel_sk layout");

#endif
