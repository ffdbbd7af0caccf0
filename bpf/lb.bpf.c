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
 *                                   the socket's storage (lb_sock).
 *   sendmsg4 (unconnected UDP)      VIP:port -> backend per datagram;
 *                                   remembers {cookie, backend} -> VIP in
 *                                   lb_udprev for the reply.
 *   recvmsg4 (UDP)                  reply source backend -> VIP.
 *   getpeername4                    peer backend -> VIP: the application
 *                                   never sees that it was translated.
 *   connect4, TCP to an L7 service  VIP:port -> the node proxy (ZH_LB_F_L7,
 *   (ZH_LB_F_L7)                    address from zh_l7cap_cfg[0]); records
 *                                   cookie -> VIP:port in zh_l7cap_sock for
 *                                   the proxy (abi/l7cap.h) and {VIP, proxy}
 *                                   in lb_sock, so getpeername4 shows the
 *                                   VIP. Connected UDP stays at L4.
 *   connect6 sendmsg6 recvmsg6      the same for an AF_INET6 socket whose
 *   getpeername6                    address is v4-mapped (::ffff:VIP): a
 *                                   dual-stack client (gRPC, the JVM,
 *                                   Node.js) of an IPv4 Service. One body
 *                                   per hook (lb_connect ...), two thin
 *                                   entry points (invariant 7).
 *
 * Invariants (the agent, ag_lb_sync in src/agent/lb.c, keeps 1-3):
 *  1. A lb_svc value with count > 0 points at a slot whose entries
 *     0..count-1 all exist: the agent writes the other slot first, then
 *     flips the service value in one map update, then deletes the old slot.
 *  2. A live slot is never rewritten in place, so the pointer lb_pick returns
 *     stays consistent for the rest of the program run.
 *     A slot may be deleted under a program that read its service before
 *     a flip and was preempted; lb_pick_fresh then re-reads the service.
 *  3. count == 0 means "service without ready endpoints": connect and
 *     sendmsg fail at once with ECONNREFUSED (bpf_set_retval), never hang.
 *  4. Sockets whose destination is not a service are never touched, but for
 *     a TCP connect to a STRICT pod of another node (invariant 10).
 *  5. Reverse translation happens only when the observed peer equals the
 *     backend this socket was given (a socket re-connected elsewhere keeps
 *     its real peer).
 *  6. A TCP connect to an L7 service goes to the proxy or fails with
 *     ECONNREFUSED (no proxy address yet, or the cookie record could not be
 *     written): it is never balanced at L4 behind the proxy's back. It is
 *     redirected even when the service has no endpoints of its own (an
 *     HTTPRoute may send it to other Services; the proxy answers 503).
 *  7. An AF_INET6 socket with a v4-mapped destination ::ffff:a.b.c.d is
 *     translated exactly as an AF_INET socket to a.b.c.d (same maps, same
 *     pick, same refusals, same records; the v6 hook rewrites only the last
 *     word of user_ip6, so the socket stays v4-mapped and the connection is
 *     IPv4 on the wire); getpeername6/recvmsg6 give back ::ffff:VIP.
 *  8. A native IPv6 destination (an IPv6 ClusterIP of a dual-stack or IPv6
 *     Service, docs/ipv6.md) takes the *_native6 bodies: the same lookups,
 *     pick, refusals and records with 16-byte addresses, all four words of
 *     user_ip6 rewritten. They run only in the v6 entry points (`v6` is a
 *     constant), so the IPv4 hooks' code is what it was. A native IPv6
 *     address that is no Service is never touched (ZH_LB_STAT_V6_NATIVE).
 *     (For unconnected UDP to a v4-mapped address the kernel runs the
 *     sendmsg4 hook, udpv6_sendmsg -> udp_sendmsg, with the IPv4 address:
 *     sendmsg6 handles whichever it is given.)
 *  9. A native IPv6 TCP connect to an L7 entry (ZH_LB_F_L7 on an IPv6
 *     ClusterIP) goes to the node proxy: its IPv6 listener when the proxy
 *     published one (zh_l7cap_cfg6), else its IPv4 address v4-mapped
 *     (::ffff:proxy; a socket with IPV6_V6ONLY cannot connect there:
 *     ENETUNREACH). The entry's one backend is the name the proxy routes
 *     by: the Service's IPv4 ClusterIP:port (v4-mapped), recorded as
 *     connect4 records it, or, for an IPv6 single-stack Service, its IPv6
 *     ClusterIP:port itself, recorded as its last 32 bits with
 *     ZH_L7CAP_DST_V6LOW (abi/l7cap.h: the record keeps 8 bytes).
 *     getpeername6 gives back the IPv6 ClusterIP. An entry without a
 *     backend refuses (ECONNREFUSED).
 * 10. mTLS (docs/mtls.md "Client side"): a TCP connect whose backend (or,
 *     for a destination that is no Service, the destination itself) is
 *     {pod, port} of another node under STRICT (lb_mtls: the port's entry,
 *     else the pod's) goes to the node proxy with ZH_L7CAP_DST_HBONE and
 *     the pod's address:port recorded, when the proxy carries HBONE
 *     (zh_l7cap_cfg[0].flags ZH_L7CAP_CFG_HBONE); the proxy tunnels it to
 *     the pod's node. getpeername shows what the application asked for
 *     (the ClusterIP, or the pod). If the record cannot be written the
 *     connect is refused (ECONNREFUSED), never sent in plain text. Without
 *     an HBONE proxy nothing changes (one array lookup per TCP connect).
 *     IPv4 and v4-mapped only: a native IPv6 connection is not tunneled.
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
#include "lib/v4mapped.h"

char LICENSE[] SEC("license") = "GPL";

/* Look up the service of a v4 destination; NULL when it is not a VIP. */
static __always_inline struct zh_lb_svc_val *lb_svc_of(__u32 ip4, __u32 port, __u8 proto)
{
	struct zh_lb_svc_key k = {};

	lb_v4_mapped(k.vip, ip4);
	k.port = (__be16)port;
	k.proto = proto;
	return bpf_map_lookup_elem(&lb_svc, &k);
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

	sv = bpf_sk_storage_get(&lb_sock, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!sv)
		return;
	lb_v4_mapped(sv->vip, vip);
	sv->vport = (__be16)vport;
	__builtin_memcpy(&sv->be, be, sizeof(sv->be));
	sv->svc_id = svc_id;
}

/* ---- the two address families ----------------------------------------------
 * Every hook has one body (lb_connect, lb_sendmsg, lb_recvmsg,
 * lb_getpeername) that works on an IPv4 address, and two thin entry points:
 * the ...4 one reads/writes user_ip4, the ...6 one the last word of a
 * v4-mapped user_ip6 (invariant 7). `v6` is a constant at every call site,
 * so each entry point is compiled with only its own context accesses (the
 * verifier refuses user_ip6 in a v4 hook and user_ip4 in a v6 one). */

/* The destination (or peer) of ctx as an IPv4 address in *ip4. Returns 0 for
 * a v6 hook whose address is native IPv6 (not v4-mapped): not ours. */
static __always_inline int lb_get_ip4(struct bpf_sock_addr *ctx, int v6, __u32 *ip4)
{
	if (!v6) {
		*ip4 = ctx->user_ip4;
		return 1;
	}
	if (!zh_is_v4mapped(ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2]))
		return 0;
	*ip4 = ctx->user_ip6[3];
	return 1;
}

/* Rewrite the address of ctx to ip4:port. For a v6 hook the address already
 * is v4-mapped (lb_get_ip4 said so), only its IPv4 word changes. */
static __always_inline void lb_set_ip4(struct bpf_sock_addr *ctx, int v6, __u32 ip4, __u32 port)
{
	if (v6)
		ctx->user_ip6[3] = ip4;
	else
		ctx->user_ip4 = ip4;
	ctx->user_port = port;
}

/* Invariant 6: TCP to an L7 service -> the node proxy. Records cookie ->
 * vip:vport (the name the proxy routes by: an IPv4 ClusterIP, or with
 * flags ZH_L7CAP_DST_V6LOW the last 32 bits of an IPv6 one, invariant 9)
 * for the proxy and fills *px with the proxy's address (v4-mapped); 0
 * when there is no proxy address yet or the record could not be written
 * (refuse). */
static __always_inline int lb_l7_target(struct bpf_sock_addr *ctx, __u32 vip, __u32 vport,
					__u16 flags, struct zh_lb_backend *px)
{
	struct zh_l7cap_dst d = { .ip = vip, .port = (__be16)vport, .flags = flags };
	struct zh_l7cap_cfg *cfg;
	__u32 zero = 0;
	__u64 cookie;

	cfg = bpf_map_lookup_elem(&zh_l7cap_cfg, &zero);
	if (!cfg || !cfg->proxy_ip || !cfg->proxy_port)
		return 0;
	cookie = bpf_get_socket_cookie(ctx);
	if (bpf_map_update_elem(&zh_l7cap_sock, &cookie, &d, BPF_ANY))
		return 0;
	lb_v4_mapped(px->addr, cfg->proxy_ip);
	px->port = cfg->proxy_port;
	return 1;
}

static __always_inline int lb_l7_redirect(struct bpf_sock_addr *ctx, int v6,
					  const struct zh_lb_svc_val *svc, __u32 vip, __u32 vport)
{
	struct zh_lb_backend px = {};

	if (!lb_l7_target(ctx, vip, vport, 0, &px))
		return lb_refuse(ZH_LB_STAT_L7_NOPROXY);
	lb_sock_record(ctx, vip, vport, &px, svc->svc_id);
	lb_set_ip4(ctx, v6, lb_v4_of(px.addr), px.port);
	lb_count(ZH_LB_STAT_L7_REDIRECT);
	return 1;
}

/* Invariant 10: does a TCP connection to pod ip4:port (network order) go
 * through the HBONE tunnel? Only when this node's proxy carries HBONE. */
static __always_inline int lb_mtls_strict(__u32 ip4, __u32 port)
{
	struct zh_lb_mtls_key k = { .ip = ip4, .port = (__be16)port };
	struct zh_l7cap_cfg *cfg;
	__u32 zero = 0;
	__u8 *m;

	cfg = bpf_map_lookup_elem(&zh_l7cap_cfg, &zero);
	if (!cfg || !(cfg->flags & ZH_L7CAP_CFG_HBONE))
		return 0;
	m = bpf_map_lookup_elem(&lb_mtls, &k);
	if (!m) {
		k.port = 0;	/* no exception for the port: the pod's own mode */
		m = bpf_map_lookup_elem(&lb_mtls, &k);
	}
	return m && *m == ZH_LB_MTLS_STRICT;
}

/* Invariant 10: vip:vport (what the application asked for) reaches pod
 * ip4:port through the node proxy's tunnel. */
static __always_inline int lb_hbone_redirect(struct bpf_sock_addr *ctx, int v6, __u32 vip,
					     __u32 vport, __u32 ip4, __u32 port, __u32 svc_id)
{
	struct zh_lb_backend px = {};

	if (!lb_l7_target(ctx, ip4, port, ZH_L7CAP_DST_HBONE, &px))
		return lb_refuse(ZH_LB_STAT_L7_NOPROXY);
	lb_sock_record(ctx, vip, vport, &px, svc_id);
	lb_set_ip4(ctx, v6, lb_v4_of(px.addr), px.port);
	lb_count(ZH_LB_STAT_HBONE_REDIRECT);
	return 1;
}

/* A v6 hook with a native IPv6 destination: counted, never touched. */
static __always_inline int lb_native6(void)
{
	lb_count(ZH_LB_STAT_V6_NATIVE);
	return 1;
}

/* ---- native IPv6 (invariant 8) --------------------------------------------- */

/* The 16-byte address of a v6 hook's ctx, in addr. */
static __always_inline void lb_get_ip6(struct bpf_sock_addr *ctx, __u8 addr[16])
{
	__u32 w[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3] };

	__builtin_memcpy(addr, w, 16);
}

static __always_inline void lb_set_ip6(struct bpf_sock_addr *ctx, const __u8 addr[16], __u32 port)
{
	__u32 w[4];

	__builtin_memcpy(w, addr, 16);
	ctx->user_ip6[0] = w[0];
	ctx->user_ip6[1] = w[1];
	ctx->user_ip6[2] = w[2];
	ctx->user_ip6[3] = w[3];
	ctx->user_port = port;
}

static __always_inline int lb_is_native6(struct bpf_sock_addr *ctx)
{
	return !zh_is_v4mapped(ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2]);
}

/* The service of key k and a backend of it, re-reading the service once
 * more if its slot went away meanwhile (as lb_pick_fresh). NULL backend:
 * refuse. */
static __always_inline const struct zh_lb_backend *
lb_pick6(const struct zh_lb_svc_key *k, struct zh_lb_svc_val **svcp)
{
	const struct zh_lb_backend *be = lb_pick(*svcp);
	int i;

	for (i = 0; !be && i < 2; i++) {
		struct zh_lb_svc_val *s = bpf_map_lookup_elem(&lb_svc, k);

		if (!s || !s->count)
			break;
		*svcp = s;
		be = lb_pick(s);
	}
	if (!be)
		lb_count(ZH_LB_STAT_ALIAS_MISS);
	return be;
}

/* Invariant 9: connect6 to the IPv6 ClusterIP of an L7 port. Its entry's
 * one backend is the name the proxy routes by (the agent's rule 5): the
 * Service's IPv4 ClusterIP:port, recorded under the cookie as connect4
 * records it, or (an IPv6 single-stack Service) its IPv6 ClusterIP:port,
 * recorded by its last 32 bits with ZH_L7CAP_DST_V6LOW. The socket goes to the proxy's IPv6 listener when it has
 * one (zh_l7cap_cfg6[0]), else to its IPv4 address v4-mapped
 * (::ffff:proxy). The socket's record keeps the IPv6 ClusterIP for
 * getpeername6. */
static __always_inline int lb_l7_redirect6(struct bpf_sock_addr *ctx, const struct zh_lb_svc_key *k,
					   struct zh_lb_svc_val *svc)
{
	const struct zh_lb_backend *be;
	struct zh_lb_backend px = {};
	struct zh_l7cap_cfg6 *cfg6;
	struct zh_lb_sock_val *sv;
	__u32 zero = 0;

	if (svc->count == 0)	/* no name to route by: refused (rule 5) */
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);
	be = lb_pick6(k, &svc);
	if (!be)
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);
	if (!lb_l7_target(ctx, lb_v4_of(be->addr), be->port,
			  lb_is_v4mapped(be->addr) ? 0 : ZH_L7CAP_DST_V6LOW, &px))
		return lb_refuse(ZH_LB_STAT_L7_NOPROXY);
	cfg6 = bpf_map_lookup_elem(&zh_l7cap_cfg6, &zero);
	if (cfg6 && cfg6->proxy_port && !lb_is_zero6(cfg6->proxy_ip6)) {
		__builtin_memcpy(px.addr, cfg6->proxy_ip6, 16);
		px.port = cfg6->proxy_port;
	}
	sv = bpf_sk_storage_get(&lb_sock, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (sv) {
		__builtin_memcpy(sv->vip, k->vip, 16);
		sv->vport = k->port;
		__builtin_memcpy(&sv->be, &px, sizeof(sv->be));
		sv->svc_id = svc->svc_id;
	}
	lb_set_ip6(ctx, px.addr, px.port);
	lb_count(ZH_LB_STAT_L7_REDIRECT);
	return 1;
}

/* connect6 / sendmsg6 to a native IPv6 address. udp_rev: sendmsg (record
 * the reply's reverse entry) rather than connect (record on the socket). */
static __always_inline int lb_xlate_native6(struct bpf_sock_addr *ctx, int sendmsg)
{
	const struct zh_lb_backend *be;
	struct zh_lb_svc_key k = {};
	struct zh_lb_svc_val *svc;

	lb_get_ip6(ctx, k.vip);
	k.port = (__be16)ctx->user_port;
	k.proto = ctx->protocol;
	svc = bpf_map_lookup_elem(&lb_svc, &k);
	if (!svc)
		return lb_native6();
	if (!sendmsg && (svc->flags & ZH_LB_F_L7) && ctx->protocol == IPPROTO_TCP)
		return lb_l7_redirect6(ctx, &k, svc);
	if (svc->count == 0)
		return lb_refuse(sendmsg ? ZH_LB_STAT_SENDMSG_NOBACKEND : ZH_LB_STAT_CONNECT_NOBACKEND);
	be = lb_pick6(&k, &svc);
	if (!be)
		return lb_refuse(sendmsg ? ZH_LB_STAT_SENDMSG_NOBACKEND : ZH_LB_STAT_CONNECT_NOBACKEND);
	if (sendmsg) {
		struct zh_lb_udprev_key rk = {};
		struct zh_lb_udprev_val rv = {};

		rk.cookie = bpf_get_socket_cookie(ctx);
		__builtin_memcpy(rk.addr, be->addr, 16);
		rk.port = be->port;
		__builtin_memcpy(rv.vip, k.vip, 16);
		rv.vport = k.port;
		bpf_map_update_elem(&lb_udprev, &rk, &rv, BPF_ANY);
	} else {
		struct zh_lb_sock_val *sv;

		sv = bpf_sk_storage_get(&lb_sock, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (sv) {
			__builtin_memcpy(sv->vip, k.vip, 16);
			sv->vport = k.port;
			__builtin_memcpy(&sv->be, be, sizeof(sv->be));
			sv->svc_id = svc->svc_id;
		}
	}
	lb_set_ip6(ctx, be->addr, be->port);
	lb_count(sendmsg ? ZH_LB_STAT_SENDMSG_XLATE : ZH_LB_STAT_CONNECT_XLATE);
	return 1;
}

/* getpeername6 / recvmsg6 from a native IPv6 peer: backend -> VIP. */
static __always_inline int lb_revnat_native6(struct bpf_sock_addr *ctx, int recvmsg)
{
	struct zh_lb_udprev_key rk = {};
	struct zh_lb_udprev_val *rv;
	struct zh_lb_sock_val *sv;
	__u8 peer[16];

	lb_get_ip6(ctx, peer);
	sv = bpf_sk_storage_get(&lb_sock, ctx->sk, 0, 0);
	if (sv && lb_addr_eq(sv->be.addr, peer) && sv->be.port == (__be16)ctx->user_port) {
		lb_set_ip6(ctx, sv->vip, sv->vport);
		lb_count(recvmsg ? ZH_LB_STAT_RECVMSG_REVNAT : ZH_LB_STAT_GETPEERNAME_REVNAT);
		return 1;
	}
	if (!recvmsg)
		return 1;
	rk.cookie = bpf_get_socket_cookie(ctx);
	__builtin_memcpy(rk.addr, peer, 16);
	rk.port = (__be16)ctx->user_port;
	rv = bpf_map_lookup_elem(&lb_udprev, &rk);
	if (rv) {
		lb_set_ip6(ctx, rv->vip, rv->vport);
		lb_count(ZH_LB_STAT_RECVMSG_REVNAT);
	}
	return 1;
}

/* connect4 / connect6: VIP -> backend (or the node proxy), once per socket. */
static __always_inline int lb_connect(struct bpf_sock_addr *ctx, int v6)
{
	const struct zh_lb_backend *be;
	struct zh_lb_svc_val *svc;
	__u32 vip, vport = ctx->user_port;

	if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
		return 1;
	if (v6 && lb_is_native6(ctx))
		return lb_xlate_native6(ctx, 0);
	if (!lb_get_ip4(ctx, v6, &vip))
		return 1;
	svc = lb_svc_of(vip, vport, ctx->protocol);
	if (!svc) {	/* not a Service: only a STRICT pod is ours (invariant 4, 10) */
		if (ctx->protocol == IPPROTO_TCP && lb_mtls_strict(vip, vport))
			return lb_hbone_redirect(ctx, v6, vip, vport, vip, vport, 0);
		return 1;
	}
	if (v6)
		lb_count(ZH_LB_STAT_V6_MAPPED);
	if ((svc->flags & ZH_LB_F_L7) && ctx->protocol == IPPROTO_TCP)
		return lb_l7_redirect(ctx, v6, svc, vip, vport);
	if (svc->count == 0)
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);
	be = lb_pick_fresh(&svc, vip, vport, ctx->protocol);
	if (!be)
		return lb_refuse(ZH_LB_STAT_CONNECT_NOBACKEND);
	if (ctx->protocol == IPPROTO_TCP && lb_mtls_strict(lb_v4_of(be->addr), be->port))
		return lb_hbone_redirect(ctx, v6, vip, vport, lb_v4_of(be->addr), be->port,
					 svc->svc_id);

	lb_sock_record(ctx, vip, vport, be, svc->svc_id);
	lb_set_ip4(ctx, v6, lb_v4_of(be->addr), be->port);
	lb_count(ZH_LB_STAT_CONNECT_XLATE);
	return 1;
}

/* sendmsg4 / sendmsg6 (unconnected UDP): VIP -> backend per datagram. */
static __always_inline int lb_sendmsg(struct bpf_sock_addr *ctx, int v6)
{
	struct zh_lb_udprev_key rk = {};
	struct zh_lb_udprev_val rv = {};
	const struct zh_lb_backend *be;
	struct zh_lb_svc_val *svc;
	__u32 vip, vport = ctx->user_port;

	if (ctx->protocol != IPPROTO_UDP)
		return 1;
	if (v6 && lb_is_native6(ctx))
		return lb_xlate_native6(ctx, 1);
	if (!lb_get_ip4(ctx, v6, &vip))
		return 1;
	svc = lb_svc_of(vip, vport, IPPROTO_UDP);
	if (!svc)
		return 1;
	if (v6)
		lb_count(ZH_LB_STAT_V6_MAPPED);
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
	bpf_map_update_elem(&lb_udprev, &rk, &rv, BPF_ANY);

	lb_set_ip4(ctx, v6, lb_v4_of(be->addr), be->port);
	lb_count(ZH_LB_STAT_SENDMSG_XLATE);
	return 1;
}

/* recvmsg4 / recvmsg6 (UDP): reply source backend -> VIP. */
static __always_inline int lb_recvmsg(struct bpf_sock_addr *ctx, int v6)
{
	struct zh_lb_udprev_key rk = {};
	struct zh_lb_udprev_val *rv;
	struct zh_lb_sock_val *sv;
	__u8 src[16];
	__u32 ip4;

	if (v6 && lb_is_native6(ctx))
		return lb_revnat_native6(ctx, 1);
	if (!lb_get_ip4(ctx, v6, &ip4))
		return 1;
	lb_v4_mapped(src, ip4);
	/* Connected UDP: the socket's own record. */
	sv = bpf_sk_storage_get(&lb_sock, ctx->sk, 0, 0);
	if (sv && lb_addr_eq(sv->be.addr, src) && sv->be.port == (__be16)ctx->user_port) {
		lb_set_ip4(ctx, v6, lb_v4_of(sv->vip), sv->vport);
		lb_count(ZH_LB_STAT_RECVMSG_REVNAT);
		return 1;
	}
	rk.cookie = bpf_get_socket_cookie(ctx);
	__builtin_memcpy(rk.addr, src, 16);
	rk.port = (__be16)ctx->user_port;
	rv = bpf_map_lookup_elem(&lb_udprev, &rk);
	if (rv) {
		lb_set_ip4(ctx, v6, lb_v4_of(rv->vip), rv->vport);
		lb_count(ZH_LB_STAT_RECVMSG_REVNAT);
	}
	return 1;
}

/* getpeername4 / getpeername6: peer backend (or proxy) -> VIP. */
static __always_inline int lb_getpeername(struct bpf_sock_addr *ctx, int v6)
{
	struct zh_lb_sock_val *sv;
	__u8 peer[16];
	__u32 ip4;

	if (v6 && lb_is_native6(ctx))
		return lb_revnat_native6(ctx, 0);
	sv = bpf_sk_storage_get(&lb_sock, ctx->sk, 0, 0);
	if (!sv || !lb_get_ip4(ctx, v6, &ip4))
		return 1;
	lb_v4_mapped(peer, ip4);
	if (lb_addr_eq(sv->be.addr, peer) && sv->be.port == (__be16)ctx->user_port) {
		/* an IPv6 ClusterIP served by the proxy over IPv4 (inv. 9) */
		if (v6 && !lb_is_v4mapped(sv->vip))
			lb_set_ip6(ctx, sv->vip, sv->vport);
		else
			lb_set_ip4(ctx, v6, lb_v4_of(sv->vip), sv->vport);
		lb_count(ZH_LB_STAT_GETPEERNAME_REVNAT);
	}
	return 1;
}

SEC("cgroup/connect4")
int zh_lb_connect4(struct bpf_sock_addr *ctx)
{
	return lb_connect(ctx, 0);
}

SEC("cgroup/connect6")
int zh_lb_connect6(struct bpf_sock_addr *ctx)
{
	return lb_connect(ctx, 1);
}

SEC("cgroup/sendmsg4")
int zh_lb_sendmsg4(struct bpf_sock_addr *ctx)
{
	return lb_sendmsg(ctx, 0);
}

SEC("cgroup/sendmsg6")
int zh_lb_sendmsg6(struct bpf_sock_addr *ctx)
{
	return lb_sendmsg(ctx, 1);
}

SEC("cgroup/recvmsg4")
int zh_lb_recvmsg4(struct bpf_sock_addr *ctx)
{
	return lb_recvmsg(ctx, 0);
}

SEC("cgroup/recvmsg6")
int zh_lb_recvmsg6(struct bpf_sock_addr *ctx)
{
	return lb_recvmsg(ctx, 1);
}

SEC("cgroup/getpeername4")
int zh_lb_getpeername4(struct bpf_sock_addr *ctx)
{
	return lb_getpeername(ctx, 0);
}

SEC("cgroup/getpeername6")
int zh_lb_getpeername6(struct bpf_sock_addr *ctx)
{
	return lb_getpeername(ctx, 1);
}
