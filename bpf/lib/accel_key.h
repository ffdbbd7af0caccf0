/* accel_key.h — the one builder of sockhash keys (struct zh_accel_key), for
 * sock_ops and sk_msg contexts, and the "both ends on this node" test.
 *
 * Byte orders as the two contexts give them (measured on kernel 6.x):
 * local_port is host order, remote_port is the be16 port shifted into the
 * upper half of a u32 in network order, so bpf_ntohl() yields the host-order
 * port. local_ip4/remote_ip4 are kept in network order.
 *
 * An AF_INET6 socket whose ends are v4-mapped (a dual-stack client or
 * server talking to an IPv4 peer, lib/v4mapped.h) gets exactly the key an
 * AF_INET socket of the same connection would get, so either end may be of
 * either family. Native IPv6 connections get no such key (the builders
 * return 0); they get a struct zh_accel_key6 from the ...6 builders below,
 * by the same rules (loopback ::1 carries the netns cookie).
 */
#ifndef ZH_BPF_ACCEL_KEY_H
#define ZH_BPF_ACCEL_KEY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "zerohop/abi/accel.h"
#include "lib/v4mapped.h"

/* 127.0.0.0/8: exists in every pod, so its keys carry the netns cookie. */
static __always_inline int accel_is_loopback(__u32 ip4_net)
{
	return (bpf_ntohl(ip4_net) >> 24) == 127;
}

/* The one builder: fill k for a socket from its own side; ports in host
 * order. The loopback rule is symmetric (either end in 127/8), so both sides
 * of one connection agree on whether the cookie is part of the key. */
static __always_inline void accel_key_make(struct zh_accel_key *k, __u64 netns_cookie,
					   __u32 lip, __u32 rip, __u32 lport, __u32 rport)
{
	k->netns = (accel_is_loopback(lip) || accel_is_loopback(rip)) ? netns_cookie : 0;
	k->local_ip4 = lip;
	k->remote_ip4 = rip;
	k->local_port = lport;
	k->remote_port = rport;
}

/* The key of the peer socket: same connection seen from the other end. */
static __always_inline void accel_key_peer(struct zh_accel_key *peer, const struct zh_accel_key *k)
{
	peer->netns = k->netns;
	peer->local_ip4 = k->remote_ip4;
	peer->remote_ip4 = k->local_ip4;
	peer->local_port = k->remote_port;
	peer->remote_port = k->local_port;
}

/* The contexts, through the one builder above. bpf_sock_ops and sk_msg_md
 * give remote_port as a be16 in the upper half of a u32 (bpf_ntohl), struct
 * bpf_sock gives dst_port as a plain be16 (bpf_ntohs). */
static __always_inline int accel_key_from_sockops(struct zh_accel_key *k, struct bpf_sock_ops *ctx)
{
	__u32 lip, rip;

	if (!zh_sockops_v4(ctx, &lip, &rip))
		return 0;
	accel_key_make(k, bpf_get_netns_cookie(ctx), lip, rip, ctx->local_port,
		       bpf_ntohl(ctx->remote_port));
	return 1;
}

/* (AF_INET sockets only; unused by accel.bpf.c, whose sk_msg reads the
 * peer key built at insert from accel_sk.) */
static __always_inline void accel_key_from_msg(struct zh_accel_key *k, struct sk_msg_md *ctx)
{
	accel_key_make(k, bpf_get_netns_cookie(ctx), ctx->local_ip4, ctx->remote_ip4,
		       ctx->local_port, bpf_ntohl(ctx->remote_port));
}

static __always_inline int accel_key_from_sockopt(struct zh_accel_key *k, struct bpf_sockopt *ctx,
						  struct bpf_sock *sk)
{
	__u32 lip, rip;

	if (!zh_sock_v4(sk, &lip, &rip))
		return 0;
	accel_key_make(k, bpf_get_netns_cookie(ctx), lip, rip, sk->src_port,
		       bpf_ntohs(sk->dst_port));
	return 1;
}

/* ---- Native IPv6 (struct zh_accel_key6) ---- */

static __always_inline int accel_is_loopback6(const __u32 *w)
{
	return w[0] == 0 && w[1] == 0 && w[2] == 0 && w[3] == bpf_htonl(1);
}

static __always_inline void accel_key6_peer(struct zh_accel_key6 *peer, const struct zh_accel_key6 *k)
{
	peer->netns = k->netns;
	__builtin_memcpy(peer->local_ip6, k->remote_ip6, 16);
	__builtin_memcpy(peer->remote_ip6, k->local_ip6, 16);
	peer->local_port = k->remote_port;
	peer->remote_port = k->local_port;
}

/* Fill k for a native IPv6 connection (an AF_INET6 socket whose ends are
 * not v4-mapped); 0 for anything else. Each context word is read on its
 * own, with a constant offset (the verifier allows nothing else). */
static __always_inline int accel_key6_from_sockops(struct zh_accel_key6 *k, struct bpf_sock_ops *ctx)
{
	if (ctx->family != ZH_AF_INET6)
		return 0;
	k->local_ip6[0] = ctx->local_ip6[0];
	k->local_ip6[1] = ctx->local_ip6[1];
	k->local_ip6[2] = ctx->local_ip6[2];
	k->local_ip6[3] = ctx->local_ip6[3];
	k->remote_ip6[0] = ctx->remote_ip6[0];
	k->remote_ip6[1] = ctx->remote_ip6[1];
	k->remote_ip6[2] = ctx->remote_ip6[2];
	k->remote_ip6[3] = ctx->remote_ip6[3];
	if (zh_is_v4mapped(k->local_ip6[0], k->local_ip6[1], k->local_ip6[2]) ||
	    zh_is_v4mapped(k->remote_ip6[0], k->remote_ip6[1], k->remote_ip6[2]))
		return 0;
	k->local_port = ctx->local_port;
	k->remote_port = bpf_ntohl(ctx->remote_port);
	k->netns = (accel_is_loopback6(k->local_ip6) || accel_is_loopback6(k->remote_ip6)) ?
		   bpf_get_netns_cookie(ctx) : 0;
	return 1;
}

static __always_inline int accel_key6_from_sockopt(struct zh_accel_key6 *k, struct bpf_sockopt *ctx,
						   struct bpf_sock *sk)
{
	if (sk->family != ZH_AF_INET6)
		return 0;
	k->local_ip6[0] = sk->src_ip6[0];
	k->local_ip6[1] = sk->src_ip6[1];
	k->local_ip6[2] = sk->src_ip6[2];
	k->local_ip6[3] = sk->src_ip6[3];
	k->remote_ip6[0] = sk->dst_ip6[0];
	k->remote_ip6[1] = sk->dst_ip6[1];
	k->remote_ip6[2] = sk->dst_ip6[2];
	k->remote_ip6[3] = sk->dst_ip6[3];
	if (zh_is_v4mapped(k->local_ip6[0], k->local_ip6[1], k->local_ip6[2]) ||
	    zh_is_v4mapped(k->remote_ip6[0], k->remote_ip6[1], k->remote_ip6[2]))
		return 0;
	k->local_port = sk->src_port;
	k->remote_port = bpf_ntohs(sk->dst_port);
	k->netns = (accel_is_loopback6(k->local_ip6) || accel_is_loopback6(k->remote_ip6)) ?
		   bpf_get_netns_cookie(ctx) : 0;
	return 1;
}

#endif
