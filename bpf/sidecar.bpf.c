// SPDX-License-Identifier: GPL-2.0
/* sidecar.bpf.c — the sidecar capture of the ASM/Merbridge design, for the
 * sidecar baseline's `--mesh sidecar --accel on` (docs/sidecar-baseline.md).
 * The flow and the maps' contract are in include/zerohop/abi/sidecar.h.
 *
 * Design note
 * -----------
 * istio-init captures with nat REDIRECT, so the two sockets of a captured
 * connection see different 4-tuples (the app: POD:eph -> ClusterIP:80; its
 * sidecar: 127.0.0.1:15001 <- POD:eph) and no tuple-keyed short-circuit can
 * pair them. Here the address is rewritten before the connection exists
 * (connect4), so both ends agree, and the sidecar learns the original
 * destination through the same call it uses under NAT (SO_ORIGINAL_DST),
 * answered by getsockopt from what sock_ops recorded.
 *
 * Invariants
 *  1. A socket is rewritten at most once, only at connect(), only TCP, and
 *     only when its original destination is kept on it (sc_sk) first.
 *  2. The sidecar's own connections (uid or gid ZH_SC_UID) are never sent
 *     to a sidecar's outbound port: no loop (istio-init's uid exemption).
 *  3. sc_orig is written at ACTIVE_ESTABLISHED, which runs before the
 *     client's final ACK leaves, so before the server can accept() and ask.
 *  4. getsockopt only ever answers SOL_IP/SO_ORIGINAL_DST, and only for a
 *     connection in sc_orig; everything else is the kernel's answer,
 *     untouched. A stale sc_orig entry (LRU, a reused tuple) is overwritten
 *     at the next ACTIVE_ESTABLISHED of that tuple, before its accept.
 *  5. Keys do not collide across pods: pod IPs are unique, loopback keys
 *     carry the netns cookie (the accel datapath's rule, bpf/lib/accel_key.h).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "zerohop/abi/sidecar.h"
#include "lib/accel_key.h"

#define SOCK_STREAM 1
#define SOL_IP 0
#define SO_ORIGINAL_DST 80
#define LOOPBACK_1 0x7f000001

char LICENSE[] SEC("license") = "GPL";

/* pod cgroup id -> that pod: pods with a sidecar */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_SC_MAX_PODS);
	__type(key, __u64);
	__type(value, struct zh_sc_pod);
} sc_cgpods SEC(".maps");

/* pod IP -> its node: pods that have a sidecar */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_SC_MAX_PODS);
	__type(key, __u32);
	__type(value, __u32);
} sc_pods SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct zh_sc_addr);
} sc_sk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_SC_MAX);
	__type(key, struct zh_sc_conn);
	__type(value, struct zh_sc_addr);
} sc_orig SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ZH_SC_ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sc_stats SEC(".maps");

static __always_inline void sc_count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&sc_stats, &i);

	if (v)
		*v += 1;
}

/* A connection's sc_orig key from an accel key of one of its sockets:
 * as is for the server's own socket, ends swapped for the client's. */
static __always_inline void sc_conn_of(struct zh_sc_conn *c, const struct zh_accel_key *k,
				       int swap)
{
	c->netns = k->netns;
	c->local_ip4 = swap ? k->remote_ip4 : k->local_ip4;
	c->remote_ip4 = swap ? k->local_ip4 : k->remote_ip4;
	c->local_port = swap ? k->remote_port : k->local_port;
	c->remote_port = swap ? k->local_port : k->remote_port;
}

/* The sidecar's own ports: never redirected (istio-init excludes them). */
static __always_inline int sc_own_port(__u16 port)
{
	return port == ZH_SC_OUTBOUND_PORT || port == ZH_SC_INBOUND_PORT || port == 15008 ||
	       port == 15090 || port == 15021 || port == 15020;
}

SEC("cgroup/connect4")
int zh_sc_connect4(struct bpf_sock_addr *ctx)
{
	__u64 ug = bpf_get_current_uid_gid(), cg;
	__u32 dip = ctx->user_ip4, *peer_node;
	struct zh_sc_pod *own;
	__u16 dport = bpf_ntohs((__u16)ctx->user_port);
	struct zh_sc_addr *orig;

	if (ctx->type != SOCK_STREAM || accel_is_loopback(dip) || sc_own_port(dport))
		return 1;
	cg = bpf_get_current_cgroup_id();
	own = bpf_map_lookup_elem(&sc_cgpods, &cg);
	if (!own || own->ip4 == dip)
		return 1;	/* not a pod with a sidecar; its own IP: istio-init's rules */
	orig = bpf_sk_storage_get(&sc_sk, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!orig)
		return 1;	/* inv. 1: no record, no rewrite (istio-init's REDIRECT applies) */
	if ((__u32)ug == ZH_SC_UID || (__u32)(ug >> 32) == ZH_SC_UID) {
		/* inv. 2: the sidecar; only to a peer of this node that has one too */
		peer_node = bpf_map_lookup_elem(&sc_pods, &dip);
		if (!peer_node || *peer_node != own->node) {
			bpf_sk_storage_delete(&sc_sk, ctx->sk);
			return 1;
		}
		orig->ip4 = dip;
		orig->port = bpf_htons(dport);
		ctx->user_port = bpf_htons(ZH_SC_INBOUND_PORT);
		sc_count(ZH_SC_ST_INBOUND);
		return 1;
	}
	orig->ip4 = dip;
	orig->port = bpf_htons(dport);
	ctx->user_ip4 = bpf_htonl(LOOPBACK_1);
	ctx->user_port = bpf_htons(ZH_SC_OUTBOUND_PORT);
	sc_count(ZH_SC_ST_OUTBOUND);
	return 1;
}

/* 5: a rewritten socket's peer is its original destination. */
SEC("cgroup/getpeername4")
int zh_sc_getpeername4(struct bpf_sock_addr *ctx)
{
	struct zh_sc_addr *orig = bpf_sk_storage_get(&sc_sk, ctx->sk, 0, 0);

	if (orig) {
		ctx->user_ip4 = orig->ip4;
		ctx->user_port = orig->port;
	}
	return 1;
}

/* 3: record the original destination under the server's view. */
SEC("sockops")
int zh_sc_sockops(struct bpf_sock_ops *skops)
{
	struct zh_accel_key k = {};
	struct zh_sc_conn c = {};
	struct zh_sc_addr *orig;
	struct bpf_sock *sk;

	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	sk = skops->sk;
	if (!sk)
		return 1;
	orig = bpf_sk_storage_get(&sc_sk, sk, 0, 0);
	if (!orig || !accel_key_from_sockops(&k, skops))
		return 1;
	sc_conn_of(&c, &k, 1);	/* the client's key, seen from the server */
	bpf_map_update_elem(&sc_orig, &c, orig, BPF_ANY);
	return 1;
}

/* 4: SO_ORIGINAL_DST from sc_orig. */
SEC("cgroup/getsockopt")
int zh_sc_getsockopt(struct bpf_sockopt *ctx)
{
	struct zh_accel_key k = {};
	struct zh_sc_conn c = {};
	struct zh_sc_addr *orig;
	struct bpf_sock *sk = ctx->sk;
	/* struct sockaddr_in: family, port, addr, 8 bytes of zero */
	struct {
		__u16 family;
		__be16 port;
		__be32 addr;
		__u8 zero[8];
	} *sin = ctx->optval;

	if (ctx->level != SOL_IP || ctx->optname != SO_ORIGINAL_DST || !sk)
		return 1;
	if (!accel_key_from_sockopt(&k, ctx, sk))
		return 1;
	sc_conn_of(&c, &k, 0);
	orig = bpf_map_lookup_elem(&sc_orig, &c);
	if (!orig || (void *)(sin + 1) > ctx->optval_end) {
		sc_count(ZH_SC_ST_ORIGDST_MISS);
		return 1;
	}
	sin->family = 2;	/* AF_INET */
	sin->port = orig->port;
	sin->addr = orig->ip4;
	__builtin_memset(sin->zero, 0, sizeof(sin->zero));
	ctx->optlen = sizeof(*sin);
	/* two 4-byte context stores: clang would merge them into one 8-byte
	 * store, which the verifier refuses on bpf_sockopt */
	asm volatile("" ::: "memory");
	ctx->retval = 0;
	sc_count(ZH_SC_ST_ORIGDST);
	return 1;
}
