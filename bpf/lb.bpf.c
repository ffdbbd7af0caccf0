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
 *   connect4, TCP to an L7 service  VIP:port -> the node proxy (ZH_LB_F_L7,
 *   (ZH_LB_F_L7)                    address from zh_l7cap_cfg[0]); records
 *                                   cookie -> VIP:port in zh_l7cap_sock for
 *                                   the proxy (abi/l7cap.h) and {VIP, proxy}
 *                                   in zh_lb_sock, so getpeername4 shows the
 *                                   VIP. Connected UDP stays at L4.
 *
 * Invariants (the agent, ag_lb_sync in src/agent/lb.c, keeps 1-3):
 *  1. A zh_lb_svc value with count > 0 points at a slot whose entries
 *     0..count-1 all exist: the agent writes the other slot first, then
 *     flips the service value in one map update, then deletes the old slot.
 *  2. A live slot is never rewritten in place, so the pointer lb_pick returns
 *     stays consistent for the rest of the program run.
 *     A slot may be deleted under a program that read its service before
 *     a flip and was preempted; lb_pick_fresh then re-reads the service.
 *  3. count == 0 means "service without ready endpoints": connect and
 *     sendmsg fail at once with ECONNREFUSED (bpf_set_retval), never hang.
 *  4. Sockets whose destination is not a service are never touched.
 *  5. Reverse translation happens only when the observed peer equals the
 *     backend this socket was given (a socket re-connected elsewhere keeps
 *     its real peer).
 *  6. A TCP connect to an L7 service goes to the proxy or fails with
 *     ECONNREFUSED (no proxy address yet, or the cookie record could not be
 *     written): it is never balanced at L4 behind the proxy's back. It is
 *     redirected even when the service has no endpoints of its own (an
 *     HTTPRoute may send it to other Services; the proxy answers 503).
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zerohop/abi/lb.h"
#include "zerohop/abi/l7cap.h"	/* with __bpf__: the shared capture maps */
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

/* lb_pick on the service value *svcp, read at the start of this run. The
 * value is complete when read (invariant 1), but this program can be
 * preempted (cgroup programs run preemptible, and a vCPU can be descheduled
 * by its host) between reading it and reading its alias entry, long enough
 * for the agent to flip the service and delete the old slot: seen once in
 * test_lb_kernel under load. Then re-read the service and pick again from
 * its current, complete slot; a miss after that is counted (must stay 0). */
static __always_inline const struct zh_lb_backend *
lb_pick_fresh(struct zh_lb_svc_val **svcp, __u32 vip, __u32 vport, __u8 proto)
{
	const struct zh_lb_backend *be = lb_pick(*svcp);
	int i;

	for (i = 0; !be && i < 2; i++) {
		struct zh_lb_svc_val *s = lb_svc_of(vip, vport, proto);

		if (!s || !s->count)
			break;
		*svcp = s;
		be = lb_pick(s);
	}
	if (!be)
		lb_count(ZH_LB_STAT_ALIAS_MISS);
	return be;
}

static __always_inline int lb_refuse(__u32 stat)
{
	lb_count(stat);
	bpf_set_retval(-ECONNREFUSED);
	return 0;
}

/* Remember {VIP, backend} on the socket for getpeername4 and recvmsg4. */
static __always_inline void lb_sock_record(struct bpf_sock_addr *ctx, __u32 vip, __u32 vport,
					   const struct zh_lb_backend *be, __u32 svc_id)
{
	struct zh_lb_sock_val *sv;

	sv = bpf_sk_storage_get(&zh_lb_sock, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!sv)
		return;
	lb_v4_mapped(sv->vip, vip);
	sv->vport = (__be16)vport;
	__builtin_memcpy(&sv->be, be, sizeof(sv->be));
	sv->svc_id = svc_id;
}

/* Invariant 6: TCP to an L7 service -> the node proxy, or ECONNREFUSED. */
static __always_inline int lb_l7_redirect(struct bpf_sock_addr *ctx,
					  const struct zh_lb_svc_val *svc, __u32 vip, __u32 vport)
{
	struct zh_l7cap_dst d = { .ip = vip, .port = (__be16)vport };
	struct zh_lb_backend px = {};
	struct zh_l7cap_cfg *cfg;
	__u32 zero = 0;
	__u64 cookie;

	cfg = bpf_map_lookup_elem(&zh_l7cap_cfg, &zero);
	if (!cfg || !cfg->proxy_ip || !cfg->proxy_port)
		return lb_refuse(ZH_LB_STAT_L7_NOPROXY);
	cookie = bpf_get_socket_cookie(ctx);
	if (bpf_map_update_elem(&zh_l7cap_sock, &cookie, &d, BPF_ANY))
		return lb_refuse(ZH_LB_STAT_L7_NOPROXY);
	lb_v4_mapped(px.addr, cfg->proxy_ip);
	px.port = cfg->proxy_port;
	lb_sock_record(ctx, vip, vport, &px, svc->svc_id);
	ctx->user_ip4 = cfg->proxy_ip;
	ctx->user_port = cfg->proxy_port;
	lb_count(ZH_LB_STAT_L7_REDIRECT);
	return 1;
}

SEC("cgroup/connect4")
int zh_lb_connect4(struct bpf_sock_addr *ctx)
{
	const struct zh_lb_backend *be;
	struct zh_lb_svc_val *svc;
	__u32 vip = ctx->user_ip4, vport = ctx->user_port;

	if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
		return 1;
	svc = lb_svc_of(vip, vport, ctx->protocol);
	if (!svc)
		return 1;
	if ((svc->flags & ZH_LB_F_L7) && ctx->protocol == IPPROTO_TCP)
		return lb_l7_redirect(ctx, svc, vip, vport);
	if (svc->count == 0)
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);
	be = lb_pick_fresh(&svc, vip, vport, ctx->protocol);
	if (!be)
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);

	lb_sock_record(ctx, vip, vport, be, svc->svc_id);
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
	be = lb_pick_fresh(&svc, vip, vport, IPPROTO_UDP);
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
