// SPDX-License-Identifier: GPL-2.0
/* lb.bpf.c — Services resolved at connect(): the socket load balancer.
 *
 * Design note
 * -----------
 * Attached (bpf_link, pinned) to one node's cgroup, so it applies to the
 * sockets of that node's pods and nothing else. Per socket:
 *
 *   connect4 (TCP, connected UDP)   VIP:port -> backend, chosen once per
 *                                   connection; remembers {VIP, backend} in
 *                                   the socket's storage (zh_lb_sock).
 *   sendmsg4 (unconnected UDP)      VIP:port -> backend per datagram;
 *                                   remembers {cookie, backend} -> VIP in
 *                                   zh_lb_udprev for the reply.
 *   recvmsg4 (UDP)                  reply source backend -> VIP.
 *   getpeername4                    peer backend -> VIP: the application
 *                                   never sees that it was translated.
 *
 * Invariants (the agent, src/agent/sync.c, keeps 1-3):
 *  1. A zh_lb_svc value with count > 0 points at a slot whose entries
 *     0..count-1 all exist: the agent writes the other slot first, then
 *     flips the service value in one map update, then deletes the old slot.
 *  2. A live slot is never rewritten in place, so the pointer lb_pick returns
 *     stays consistent for the rest of the program run.
 *  3. count == 0 means "service without ready endpoints": connect and
 *     sendmsg fail at once with ECONNREFUSED (bpf_set_retval), never hang.
 *  4. Sockets whose destination is not a service are never touched.
 *  5. Reverse translation happens only when the observed peer equals the
 *     backend this socket was given (a socket re-connected elsewhere keeps
 *     its real peer).
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zerohop/abi/lb.h"
#include "lib/lb_maps.h"
#include "lib/lb_helpers.h"

char LICENSE[] SEC("license") = "GPL";

/* Look up the service of a v4 destination; NULL when it is not a VIP. */
static __always_inline struct zh_lb_svc_val *lb_svc_of(__u32 ip4, __u32 port, __u8 proto)
{
	struct zh_lb_svc_key k = {};

	lb_v4_mapped(k.vip, ip4);
	k.port = (__be16)port;
	k.proto = proto;
	return bpf_map_lookup_elem(&zh_lb_svc, &k);
}

static __always_inline int lb_refuse(__u32 stat)
{
	lb_count(stat);
	bpf_set_retval(-ECONNREFUSED);
	return 0;
}

SEC("cgroup/connect4")
int zh_lb_connect4(struct bpf_sock_addr *ctx)
{
	const struct zh_lb_backend *be;
	struct zh_lb_svc_val *svc;
	struct zh_lb_sock_val *sv;
	__u32 vip = ctx->user_ip4, vport = ctx->user_port;

	if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
		return 1;
	svc = lb_svc_of(vip, vport, ctx->protocol);
	if (!svc)
		return 1;
	if (svc->count == 0)
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);
	be = lb_pick(svc);
	if (!be)
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);
	if (svc->flags & ZH_LB_F_L7)
		lb_count(ZH_LB_STAT_L7_PENDING);

	sv = bpf_sk_storage_get(&zh_lb_sock, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (sv) {
		lb_v4_mapped(sv->vip, vip);
		sv->vport = (__be16)vport;
		__builtin_memcpy(&sv->be, be, sizeof(sv->be));
		sv->svc_id = svc->svc_id;
	}
	ctx->user_ip4 = lb_v4_of(be->addr);
	ctx->user_port = be->port;
	lb_count(ZH_LB_STAT_CONNECT_XLATE);
	return 1;
}

SEC("cgroup/sendmsg4")
int zh_lb_sendmsg4(struct bpf_sock_addr *ctx)
{
	struct zh_lb_udprev_key rk = {};
	struct zh_lb_udprev_val rv = {};
	const struct zh_lb_backend *be;
	struct zh_lb_svc_val *svc;
	__u32 vip = ctx->user_ip4, vport = ctx->user_port;

	if (ctx->protocol != IPPROTO_UDP)
		return 1;
	svc = lb_svc_of(vip, vport, IPPROTO_UDP);
	if (!svc)
		return 1;
	if (svc->count == 0)
		return lb_refuse(ZH_LB_STAT_SENDMSG_NOBACKEND);
	be = lb_pick(svc);
	if (!be)
		return lb_refuse(ZH_LB_STAT_SENDMSG_NOBACKEND);

	rk.cookie = bpf_get_socket_cookie(ctx);
	__builtin_memcpy(rk.addr, be->addr, 16);
	rk.port = be->port;
	lb_v4_mapped(rv.vip, vip);
	rv.vport = (__be16)vport;
	bpf_map_update_elem(&zh_lb_udprev, &rk, &rv, BPF_ANY);

	ctx->user_ip4 = lb_v4_of(be->addr);
	ctx->user_port = be->port;
	lb_count(ZH_LB_STAT_SENDMSG_XLATE);
	return 1;
}

SEC("cgroup/recvmsg4")
int zh_lb_recvmsg4(struct bpf_sock_addr *ctx)
{
	struct zh_lb_udprev_key rk = {};
	struct zh_lb_udprev_val *rv;
	struct zh_lb_sock_val *sv;
	__u8 src[16];

	lb_v4_mapped(src, ctx->user_ip4);
	/* Connected UDP: the socket's own record. */
	sv = bpf_sk_storage_get(&zh_lb_sock, ctx->sk, 0, 0);
	if (sv && lb_addr_eq(sv->be.addr, src) && sv->be.port == (__be16)ctx->user_port) {
		ctx->user_ip4 = lb_v4_of(sv->vip);
		ctx->user_port = sv->vport;
		lb_count(ZH_LB_STAT_RECVMSG_REVNAT);
		return 1;
	}
	rk.cookie = bpf_get_socket_cookie(ctx);
	__builtin_memcpy(rk.addr, src, 16);
	rk.port = (__be16)ctx->user_port;
	rv = bpf_map_lookup_elem(&zh_lb_udprev, &rk);
	if (rv) {
		ctx->user_ip4 = lb_v4_of(rv->vip);
		ctx->user_port = rv->vport;
		lb_count(ZH_LB_STAT_RECVMSG_REVNAT);
	}
	return 1;
}

SEC("cgroup/getpeername4")
int zh_lb_getpeername4(struct bpf_sock_addr *ctx)
{
	struct zh_lb_sock_val *sv;
	__u8 peer[16];

	sv = bpf_sk_storage_get(&zh_lb_sock, ctx->sk, 0, 0);
	if (!sv)
		return 1;
	lb_v4_mapped(peer, ctx->user_ip4);
	if (lb_addr_eq(sv->be.addr, peer) && sv->be.port == (__be16)ctx->user_port) {
		ctx->user_ip4 = lb_v4_of(sv->vip);
		ctx->user_port = sv->vport;
		lb_count(ZH_LB_STAT_GETPEERNAME_REVNAT);
	}
	return 1;
}
