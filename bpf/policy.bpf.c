// SPDX-License-Identifier: GPL-2.0
/* policy.bpf.c — Kubernetes NetworkPolicy enforcement on a node's cgroup.
 *
 * Design note
 * -----------
 * cgroup_skb ingress and egress programs, attached (pinned bpf_links) to the
 * node's cgroup: every packet a pod's socket sends or receives passes here,
 * after the socket load balancer has rewritten a ClusterIP at connect(), so
 * the destination judged is the backend and its targetPort.
 *
 * Per packet (TCP/UDP/SCTP over IPv4 or native IPv6, invariant 10; other
 * IPv4 protocols pass, see docs/policy.md):
 *
 *   local = our pod's address (egress: source, ingress: destination)
 *   fast path: the socket's pol_sk says ALLOW for this tuple under the
 *              current generation  ->  pass                (one lookup)
 *   slow path: ipcache[local] is not a local pod  ->  pass
 *              isolated in neither direction  ->  allowed (and cached)
 *              orientation (who opened the connection):
 *                TCP SYN            the packet's direction
 *                known socket/flow  as recorded (pol_sk or pol_ct)
 *                otherwise          TCP: either orientation that allows
 *                                   (connections older than the program);
 *                                   UDP/SCTP: the packet's direction
 *              verdict = the opener's policy (egress of the local pod for a
 *              connection it opened, ingress for one the peer opened); the
 *              other side's policy is enforced on the peer's own node/cgroup.
 *              Replies therefore pass whenever the connection was admitted.
 *              record {gen, verdict, orientation} in pol_sk (TCP sockets)
 *              or pol_ct (UDP, SYN on a listener); drop and count if denied.
 *
 * State of one connection (per pol_sk / pol_ct entry):
 *
 *      (none) --first packet, allowed--> ALLOW@g --gen moves, still allowed--> ALLOW@g'
 *        |                                  |
 *        +--first packet, denied--> DENY    +--gen moves, now denied--> DENY(revoked)
 *
 * cgroup/connect4 and connect6 (pol_connect4/6, one body pol_connect) only
 * make a denied TCP connect fail fast
 * with EPERM; it judges the same tables and passes whatever it is unsure of
 * (unknown pod, Service VIP), which cgroup_skb then judges per packet.
 *
 * Connections to an L7 Service (docs/policy.md "L7 Services"): the load
 * balancer's connect4 (which runs before ours) rewrites the destination to
 * the node proxy's capture address and records the socket cookie in
 * zh_l7cap_sock (abi/l7cap.h). The proxy judges the client's egress (and
 * the backend's ingress) per request against the backend it picks, so here
 * that socket's one tuple to the proxy is admitted (l7cap_redirected):
 * pol_connect4 sees the cookie entry; cgroup_skb sees it on the socket's
 * SYN and remembers it in pol_sk (POL_SKF_L7CAP), because the proxy's
 * sock_ops program deletes the cookie entry once the handshake completes.
 *
 * Invariants:
 *  1. A program run reads pol_cfg once; every table lookup uses that slot, so
 *     a sync in progress is never half-seen (the loader fills the inactive
 *     slot, then flips state = gen << 1 | slot with one 4-byte write).
 *  2. A cached verdict is used only when its generation is the current one
 *     and its tuple is the packet's; otherwise the packet takes the slow path
 *     (revocation: an established connection a change denies stops passing).
 *  3. Only ALLOW short-cuts; a denied packet is always re-judged, so a DENY
 *     can never outlive the policy that caused it.
 *  4. The slow path costs the same whatever the number of policies: at most
 *     2 ipcache lookups, 1 cidr LPM lookup and 3 rule LPM lookups (plus,
 *     on a SYN, 1 array lookup, and 1 hash lookup when it goes to this
 *     node's proxy: invariant 6).
 *  5. Before the first sync (state == 0) everything passes; a sync never
 *     leaves an empty table in force (the loader fails before flipping).
 *  6. The L7 admission opens exactly the redirected sockets: a cookie entry
 *     exists only for a socket the LB redirected, and it counts only when
 *     the destination is this node's capture address (zh_l7cap_cfg[0]); a
 *     pod connecting to NODE_IP:15001 by hand has no entry and is judged
 *     like any other connection. POL_SKF_L7CAP is set only on the SYN of
 *     such a socket and kept only while the tuple stays the SYN's; a TCP
 *     socket to that address whose SYN we did not see (these programs are
 *     attached on demand, pol_load.c invariant 6) is admitted too: the
 *     proxy judges each request and closes connections it has no original
 *     destination for.
 *  8. Orientation is known for every TCP connection established while the
 *     agent runs: the SYN records it when these programs are attached, and
 *     pol_sockops (always attached, per connection) records it otherwise.
 *     Only connections older than the agent, and UDP flows that began while
 *     the per-packet programs were detached, fall back to guessing (either
 *     opener for TCP, the packet's direction for UDP).
 *  7. Ingress admits the node proxies' upstream source addresses (ipcache
 *     POL_F_PROXY, one per node: the first host address of the node's pod
 *     range, pol_node_proxy_ip) on every node: the proxy judged the client
 *     -> backend pair per request with these same tables (src/proxy/netpol.c),
 *     so a backend near or far sees the same verdict as the direct path.
 *  9. An AF_INET6 socket talking to an IPv4 peer (v4-mapped addresses,
 *     lib/v4mapped.h) is an IPv4 connection: its packets are IPv4 (parse),
 *     pol_connect6 judges a v4-mapped destination exactly as pol_connect4,
 *     pol_sockops records its orientation with the IPv4 peer.
 * 10. Native IPv6 is judged exactly as IPv4 (docs/ipv6.md "NetworkPolicy"):
 *     one body (pol_skb_fam, `v6` a constant at each call site) over the
 *     IPv6 twins of the address-keyed tables — pol_ipc6 (a pod's IPv6 has
 *     its IPv4's identity and flags, pol_compile.c invariant 7), pol_cidr6,
 *     pol_sk6, pol_ct6 — and the shared rule trie; so invariants 1-5 hold
 *     for IPv6 with the same lookup counts (pol_sockops records a native
 *     IPv6 connection's opener in pol_sk6 as an IPv4 one's in pol_sk),
 *     and connect6 fails a denied
 *     native IPv6 TCP connect with EPERM as connect4 does (the connecting
 *     pod found by its cgroup in pol_cgpod). What the tables cannot judge
 *     fails closed for an isolated pod: a next header other than
 *     TCP/UDP/SCTP/ICMPv6 (an extension header may hide the ports), or a
 *     local address not in pol_ipc6; the pod is then found by its
 *     socket's cgroup (pol_cgpod: one hash lookup, then its IPv4 ipcache
 *     entry; for a pod without IPv4, pol_cgpod6 and its IPv6 entry) and
 *     the packet dropped, counted as a denial of its direction.
 *     Loopback and ICMPv6 (neighbour discovery) pass, as ICMP does. L7
 *     admission (invariant 6) over IPv6 is the same with the proxy's IPv6
 *     capture address (zh_l7cap_cfg6) and pol_sk6's flags.
 * 11. mTLS STRICT (docs/mtls.md): a TCP connection opened towards a local
 *     pod flagged POL_F_MTLS, on a port whose mode is STRICT (the rule
 *     trie's {pod id, POL_ID_MTLS, ingress, TCP, port} entry, longest
 *     match: pol_compile.c invariant 8), is refused unless its peer is of
 *     this node (a local pod, or POL_F_NODE: the node and its proxy, which
 *     delivers what arrived through the HBONE tunnel), however the
 *     NetworkPolicies judge it: STRICT is a requirement on top of them,
 *     not an allow of its own. Counted as POL_DROP_MTLS_PLAINTEXT. Only
 *     while this node's proxy carries HBONE (zh_l7cap_cfg[0].flags
 *     ZH_L7CAP_CFG_HBONE): without a tunnel there is no way to be
 *     STRICT, and the mode stays recorded, not enforced. Judged when the
 *     verdict is made (the SYN, or a generation change), like the rest.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zerohop/abi/policy.h"
#include "zerohop/abi/l7cap.h"	/* with __bpf__: the shared capture maps (by name) */
#include "lib/policy_maps.h"
#include "lib/v4mapped.h"

char LICENSE[] SEC("license") = "GPL";

#define PASS 1
#define DROP 0
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10
#define ORIENT_UNKNOWN 0xff
#define AF_INET ZH_AF_INET

/* What one program run knows about the packet. */
struct pkt {
	__u32 slot, gen;
	__u32 local, peer;	/* network order (IPv4) */
	__u32 local6[4], peer6[4];	/* network order (native IPv6, invariant 10) */
	__u16 lport, pport;	/* network order */
	__u8 proto;
	__u8 dir;		/* direction of this packet (enum pol_dir) */
	__u8 syn;		/* TCP SYN without ACK: opens a connection */
};

static __always_inline void *table(void *outer, __u32 slot)
{
	return bpf_map_lookup_elem(outer, &slot);
}

/* Rule lookup: any entry for {local, peer, d, proto, port}? */
static __always_inline int rule_hit(void *rules, __u32 local_id, __u32 peer_id, __u8 d,
				    __u8 proto, __u16 port)
{
	struct pol_rule_key k = {
		.prefixlen = POL_PLEN_FULL,
		.local = bpf_htonl(local_id),
		.peer = bpf_htonl(peer_id),
		.dir = d,
		.proto = proto,
		.port = port,
	};

	return bpf_map_lookup_elem(rules, &k) != NULL;
}

/* The rule decision once the peer is looked up (both families): may the
 * local pod ep talk with the peer pv (NULL: not in the ipcache, i.e.
 * world) in direction d? cidr: the cidr table of the peer's family, ck its
 * LPM key for the peer's address. */
static __always_inline int allow_peer(__u32 slot, const struct pol_ipc_val *ep,
				      const struct pol_ipc_val *pv, void *cidr_outer,
				      const void *ck, __u8 d, __u8 proto, __u16 port)
{
	void *rules, *cidr;
	__u32 *cls;

	if (d == POL_DIR_INGRESS && pv && (pv->flags & (POL_F_NODE | POL_F_PROXY)))
		return 1;	/* the node may always reach its pods; a node proxy
				 * judged the request itself (invariant 7) */
	rules = table(&pol_rules, slot);
	if (!rules)
		return 0;
	if (rule_hit(rules, ep->id, pv ? pv->id : POL_ID_WORLD, d, proto, port))
		return 1;
	if (rule_hit(rules, ep->id, POL_ID_ANY, d, proto, port))
		return 1;
	cidr = table(cidr_outer, slot);
	if (!cidr)
		return 0;
	cls = bpf_map_lookup_elem(cidr, ck);
	return cls && rule_hit(rules, ep->id, *cls, d, proto, port);
}

/* May the local pod ep talk with p's peer in direction d, port being the
 * connection's destination port (network order)? ipc: the ipcache of the
 * packet's family (v6, a constant at every call site). */
static __always_inline int allow_dir(const struct pkt *p, const struct pol_ipc_val *ep,
				     void *ipc, __u8 d, __u16 port, const int v6)
{
	__u32 iso = d == POL_DIR_INGRESS ? POL_F_ISO_INGRESS : POL_F_ISO_EGRESS;
	struct pol_cidr6_key ck6;
	struct pol_cidr_key ck;

	if (!(ep->flags & iso))
		return 1;
	if (v6) {
		ck6.prefixlen = 128;
		__builtin_memcpy(ck6.ip, p->peer6, 16);
		return allow_peer(p->slot, ep, bpf_map_lookup_elem(ipc, p->peer6), &pol_cidr6,
				  &ck6, d, p->proto, port);
	}
	ck.prefixlen = 32;
	ck.ip = p->peer;
	return allow_peer(p->slot, ep, bpf_map_lookup_elem(ipc, &p->peer), &pol_cidr, &ck, d,
			  p->proto, port);
}

/* Verdict for a connection opened in direction o (from the local pod's view). */
static __always_inline int allow_orient(const struct pkt *p, const struct pol_ipc_val *ep,
					void *ipc, __u8 o, const int v6)
{
	/* the connection's destination port: the peer's if we opened it */
	return allow_dir(p, ep, ipc, o, o == POL_DIR_EGRESS ? p->pport : p->lport, v6);
}

/* Invariant 11: may the peer that opened a TCP connection to the STRICT-
 * flagged local pod ep send it plain text? ipc: the packet family's ipcache. */
static __always_inline int mtls_admits(const struct pkt *p, const struct pol_ipc_val *ep,
				       void *ipc, const int v6)
{
	struct pol_rule_key k = {
		.prefixlen = POL_PLEN_FULL,
		.local = bpf_htonl(ep->id),
		.peer = bpf_htonl(POL_ID_MTLS),
		.dir = POL_DIR_INGRESS,
		.proto = IPPROTO_TCP,
		.port = p->lport,
	};
	struct pol_ipc_val *pv;
	struct pol_rule_val *mode;
	struct zh_l7cap_cfg *cfg;
	__u32 zero = 0;
	void *rules;

	cfg = bpf_map_lookup_elem(&zh_l7cap_cfg, &zero);
	if (!cfg || !(cfg->flags & ZH_L7CAP_CFG_HBONE))
		return 1;	/* no tunnel on this node: recorded, not enforced */
	pv = v6 ? bpf_map_lookup_elem(ipc, p->peer6) : bpf_map_lookup_elem(ipc, &p->peer);
	if (pv && (pv->flags & (POL_F_LOCAL | POL_F_NODE)))
		return 1;	/* never left this node */
	rules = table(&pol_rules, p->slot);
	if (!rules)
		return 0;
	mode = bpf_map_lookup_elem(rules, &k);
	return !mode || mode->pol != POL_MTLS_STRICT;
}

/* Invariant 6: was this socket (cookie) redirected by the LB to this
 * node's proxy, and is peer:pport (network order) that proxy? */
static __always_inline int l7cap_is_proxy(__u32 peer, __u16 pport)
{
	struct zh_l7cap_cfg *cfg;
	__u32 zero = 0;

	cfg = bpf_map_lookup_elem(&zh_l7cap_cfg, &zero);
	return cfg && cfg->proxy_ip && cfg->proxy_ip == peer && cfg->proxy_port == pport;
}

static __always_inline int l7cap_redirected(__u64 cookie, __u32 peer, __u16 pport)
{
	return l7cap_is_proxy(peer, pport) &&
	       bpf_map_lookup_elem(&zh_l7cap_sock, &cookie) != NULL;
}

/* The same for a native IPv6 peer: the proxy's IPv6 listener. */
static __always_inline int l7cap_is_proxy6(const __u32 peer[4], __u16 pport)
{
	struct zh_l7cap_cfg6 *cfg;
	__u32 zero = 0, w[4];

	cfg = bpf_map_lookup_elem(&zh_l7cap_cfg6, &zero);
	if (!cfg || !cfg->proxy_port || cfg->proxy_port != pport)
		return 0;
	__builtin_memcpy(w, cfg->proxy_ip6, 16);
	return w[0] == peer[0] && w[1] == peer[1] && w[2] == peer[2] && w[3] == peer[3];
}

static __always_inline int l7cap_redirected6(__u64 cookie, const __u32 peer[4], __u16 pport)
{
	return l7cap_is_proxy6(peer, pport) &&
	       bpf_map_lookup_elem(&zh_l7cap_sock, &cookie) != NULL;
}

static __always_inline void count_drop(__u32 reason, __u32 pol)
{
	struct pol_pdrop_key k = { .pol = pol, .reason = reason };
	__u64 one = 1, *c;

	c = bpf_map_lookup_elem(&pol_drops, &reason);
	if (c)
		*c += 1;
	c = bpf_map_lookup_elem(&pol_pdrops, &k);
	if (c)
		__sync_fetch_and_add(c, 1);
	else
		bpf_map_update_elem(&pol_pdrops, &k, &one, BPF_NOEXIST);
}

static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	struct iphdr iph;
	__u16 ports[2];
	__u8 flags;

	if (skb->protocol != bpf_htons(ETH_P_IP))
		return -1;
	if (bpf_skb_load_bytes(skb, 0, &iph, sizeof(iph)) || iph.version != 4)
		return -1;
	if (iph.protocol != IPPROTO_TCP && iph.protocol != IPPROTO_UDP &&
	    iph.protocol != IPPROTO_SCTP)
		return -1;
	/* the hooks see whole datagrams (before fragmentation, after
	 * reassembly); a non-first fragment has no ports to judge */
	if (iph.frag_off & bpf_htons(0x1fff))
		return -1;
	if (bpf_skb_load_bytes(skb, iph.ihl * 4, ports, sizeof(ports)))
		return -1;
	p->proto = iph.protocol;
	if (p->dir == POL_DIR_EGRESS) {
		p->local = iph.saddr;
		p->peer = iph.daddr;
		p->lport = ports[0];
		p->pport = ports[1];
	} else {
		p->local = iph.daddr;
		p->peer = iph.saddr;
		p->lport = ports[1];
		p->pport = ports[0];
	}
	p->syn = 0;
	if (iph.protocol == IPPROTO_TCP) {
		if (bpf_skb_load_bytes(skb, iph.ihl * 4 + 13, &flags, 1))
			return -1;
		p->syn = (flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
	}
	return 0;
}

static __always_inline int is_loopback(__u32 ip)
{
	return (ip & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000);
}

/* Invariant 1: the configuration word read once per run (0: never synced,
 * invariant 5). */
static __always_inline __u32 pol_state(void)
{
	struct pol_cfg *cfg;
	__u32 zero = 0;

	cfg = bpf_map_lookup_elem(&pol_cfg, &zero);
	return cfg ? *(volatile __u32 *)&cfg->state : 0;
}

/* Invariant 10: is the local pod owning this socket (cgroup id) isolated?
 * Returns its ipcache entry when it is, NULL otherwise. */
static __always_inline struct pol_ipc_val *iso_pod_of_cgroup(__u64 cgid, __u32 slot)
{
	struct pol_ipc_val *ep;
	void *ipc, *ip;

	if (!cgid)
		return NULL;
	ip = bpf_map_lookup_elem(&pol_cgpod, &cgid);
	if (ip) {
		ipc = table(&pol_ipc, slot);
	} else {		/* an IPv6-only pod: its IPv6 entry */
		ip = bpf_map_lookup_elem(&pol_cgpod6, &cgid);
		if (!ip)
			return NULL;
		ipc = table(&pol_ipc6, slot);
	}
	if (!ipc)
		return NULL;
	ep = bpf_map_lookup_elem(ipc, ip);
	if (!ep || !(ep->flags & POL_F_LOCAL) ||
	    !(ep->flags & (POL_F_ISO_INGRESS | POL_F_ISO_EGRESS)))
		return NULL;
	return ep;
}

/* Invariant 10: the policy a native IPv6 drop in direction dir is counted
 * against: the one isolating that direction, else the other one (the pod
 * is isolated in some direction, or it would not be dropped). */
static __always_inline __u32 v6_drop_pol(const struct pol_ipc_val *ep, __u8 dir)
{
	__u32 iso = dir == POL_DIR_EGRESS ? POL_F_ISO_EGRESS : POL_F_ISO_INGRESS;

	return ep->flags & iso ? ep->pol[dir & 1] : ep->pol[(dir ^ 1) & 1];
}

static __always_inline int is_loopback6(const __u32 *a)
{
	return !a[0] && !a[1] && !a[2] && a[3] == bpf_htonl(1);
}

static __always_inline int same6(const __u32 *a, const __u32 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* Invariant 10: a native IPv6 packet the tables cannot judge (a next
 * header other than TCP/UDP/SCTP/ICMPv6, e.g. an extension header that
 * may hide one; a local address not in the IPv6 ipcache): dropped when the
 * pod owning the socket is isolated, found by its cgroup. */
static __always_inline int unjudged6(struct __sk_buff *skb, __u8 dir, __u32 slot)
{
	struct pol_ipc_val *ep = iso_pod_of_cgroup(bpf_skb_cgroup_id(skb), slot);

	if (!ep)
		return PASS;
	count_drop(dir == POL_DIR_EGRESS ? POL_DROP_EGRESS_DENIED : POL_DROP_INGRESS_DENIED,
		   v6_drop_pol(ep, dir));
	return DROP;
}

/* parse() for native IPv6: 0 judged like IPv4, 1 pass (ICMPv6, loopback, a
 * pod to itself), -1 not judgeable (unjudged6). */
static __always_inline int parse6(struct __sk_buff *skb, struct pkt *p)
{
	struct ipv6hdr h;
	__u16 ports[2];
	__u8 flags;

	if (bpf_skb_load_bytes(skb, 0, &h, sizeof(h)) || h.version != 6)
		return 1;
	if (h.nexthdr == IPPROTO_ICMPV6)
		return 1;	/* neighbour discovery, ping: as ICMP over IPv4 */
	if (is_loopback6(h.saddr.in6_u.u6_addr32) || is_loopback6(h.daddr.in6_u.u6_addr32) ||
	    same6(h.saddr.in6_u.u6_addr32, h.daddr.in6_u.u6_addr32))
		return 1;	/* a pod may always reach itself */
	if (h.nexthdr != IPPROTO_TCP && h.nexthdr != IPPROTO_UDP && h.nexthdr != IPPROTO_SCTP)
		return -1;
	if (bpf_skb_load_bytes(skb, sizeof(h), ports, sizeof(ports)))
		return -1;
	p->proto = h.nexthdr;
	if (p->dir == POL_DIR_EGRESS) {
		__builtin_memcpy(p->local6, h.saddr.in6_u.u6_addr32, 16);
		__builtin_memcpy(p->peer6, h.daddr.in6_u.u6_addr32, 16);
		p->lport = ports[0];
		p->pport = ports[1];
	} else {
		__builtin_memcpy(p->local6, h.daddr.in6_u.u6_addr32, 16);
		__builtin_memcpy(p->peer6, h.saddr.in6_u.u6_addr32, 16);
		p->lport = ports[1];
		p->pport = ports[0];
	}
	p->syn = 0;
	if (h.nexthdr == IPPROTO_TCP) {
		if (bpf_skb_load_bytes(skb, sizeof(h) + 13, &flags, 1))
			return -1;
		p->syn = (flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
	}
	return 0;
}

/* One body for both families (invariant 10): v6 is a constant at each call
 * site, so the IPv4 program is the IPv4 code alone and the IPv6 one differs
 * only in its address-keyed tables (pol_ipc6, pol_cidr6, pol_sk6, pol_ct6)
 * and in the proxy's capture address they admit (zh_l7cap_cfg6). */
static __always_inline int pol_skb_fam(struct __sk_buff *skb, __u8 dir, __u32 state,
				       const int v6)
{
	struct pkt p = { .dir = dir };
	struct pol_ct_key ck = {};
	struct pol_ct6_key ck6 = {};
	struct pol_ct_val cv = {}, *ct = NULL;
	struct pol_ipc_val *ep;
	struct pol_sk *st = NULL;
	struct pol_sk6 *st6 = NULL;
	struct bpf_sock *sk;
	__u32 reason;
	__u8 orient = ORIENT_UNKNOWN, prev_reason = POL_DROP_NONE, prev_verdict = POL_V_NONE;
	__u8 skf = 0;
	int allowed, use_sk = 0, known = 0, r;
	void *ipc;

	p.gen = state >> 1;
	p.slot = state & 1;
	if (v6) {
		r = parse6(skb, &p);
		if (r)
			return r > 0 ? PASS : unjudged6(skb, dir, p.slot);
	} else {
		if (parse(skb, &p))
			return PASS;
		if (p.local == p.peer || is_loopback(p.local) || is_loopback(p.peer))
			return PASS;		/* a pod may always reach itself */
	}

	/* fast path (invariant 2) */
	sk = skb->sk;
	if (sk)
		sk = bpf_sk_fullsock(sk);
	if (sk && p.proto == IPPROTO_TCP && sk->state != BPF_TCP_LISTEN) {
		use_sk = 1;
		if (v6) {
			st6 = bpf_sk_storage_get(&pol_sk6, sk, 0, 0);
			if (st6 && same6(st6->peer, p.peer6) && st6->lport == p.lport &&
			    st6->pport == p.pport) {
				if (st6->gen == p.gen && st6->verdict == POL_V_ALLOW)
					return PASS;
				orient = st6->orient;
				prev_verdict = st6->verdict;
				prev_reason = st6->reason;
				skf = st6->flags & POL_SKF_L7CAP;
				known = 1;
			}
		} else {
			st = bpf_sk_storage_get(&pol_sk, sk, 0, 0);
			if (st && st->peer_ip == p.peer && st->lport == p.lport &&
			    st->pport == p.pport) {
				if (st->gen == p.gen && st->verdict == POL_V_ALLOW)
					return PASS;
				orient = st->orient;
				prev_verdict = st->verdict;
				prev_reason = st->reason;
				skf = st->flags & POL_SKF_L7CAP;
				known = 1;
			}
		}
	}
	/* no socket of its own, or a socket's first packet: the flow table
	 * (an accepted socket learns from its listener's SYN who opened it) */
	if (!known) {
		if (v6) {
			__builtin_memcpy(ck6.local, p.local6, 16);
			__builtin_memcpy(ck6.peer, p.peer6, 16);
			ck6.lport = p.lport;
			ck6.pport = p.pport;
			ck6.proto = p.proto;
			ct = bpf_map_lookup_elem(&pol_ct6, &ck6);
		} else {
			ck.local_ip = p.local;
			ck.peer_ip = p.peer;
			ck.lport = p.lport;
			ck.pport = p.pport;
			ck.proto = p.proto;
			ct = bpf_map_lookup_elem(&pol_ct, &ck);
		}
		if (ct) {
			if (ct->gen == p.gen && ct->verdict == POL_V_ALLOW)
				return PASS;
			orient = ct->orient;
			prev_verdict = ct->verdict;
			prev_reason = ct->reason;
		}
	}

	/* slow path */
	if (v6) {
		ipc = table(&pol_ipc6, p.slot);
		if (!ipc)
			return unjudged6(skb, dir, p.slot);
		ep = bpf_map_lookup_elem(ipc, p.local6);
		if (!ep)	/* an address of no known pod: whose socket is it? */
			return unjudged6(skb, dir, p.slot);
	} else {
		ipc = table(&pol_ipc, p.slot);
		if (!ipc)
			return PASS;
		ep = bpf_map_lookup_elem(ipc, &p.local);
	}
	if (!ep || !(ep->flags & POL_F_LOCAL))
		return PASS;		/* not one of this node's pods */
	if (p.syn) {
		orient = dir;
		prev_verdict = POL_V_NONE;	/* a new connection on this tuple */
		prev_reason = POL_DROP_NONE;
		/* invariant 6: judged once, on the SYN, whatever the isolation
		 * now (a later policy may isolate the pod) */
		if (v6)
			skf = use_sk && dir == POL_DIR_EGRESS &&
			      l7cap_redirected6(bpf_get_socket_cookie(skb), p.peer6, p.pport) ?
			      POL_SKF_L7CAP : 0;
		else
			skf = use_sk && dir == POL_DIR_EGRESS &&
			      l7cap_redirected(bpf_get_socket_cookie(skb), p.peer, p.pport) ?
			      POL_SKF_L7CAP : 0;
	} else if (use_sk && prev_verdict == POL_V_NONE &&
		   (v6 ? l7cap_is_proxy6(p.peer6, p.pport) : l7cap_is_proxy(p.peer, p.pport))) {
		/* a connection to this node's proxy whose SYN these programs
		 * did not see (they are attached only while a pod of the node
		 * is isolated: pol_load.c invariant 6). The proxy judges every
		 * request it forwards, and closes a connection it has no
		 * original destination for, so this admits nothing new. */
		skf = POL_SKF_L7CAP;
	}
	if (skf & POL_SKF_L7CAP) {
		/* the proxy judges this client per request (invariant 6) */
		allowed = 1;
	} else if (!(ep->flags & (POL_F_ISO_INGRESS | POL_F_ISO_EGRESS))) {
		/* isolated in no direction: allowed, but cached like any other
		 * verdict so that its next packets cost one lookup (an unknown
		 * orientation stays unknown for a later re-judgement) */
		allowed = 1;
	} else if (orient == POL_DIR_INGRESS || orient == POL_DIR_EGRESS) {
		allowed = allow_orient(&p, ep, ipc, orient, v6);
	} else {
		orient = dir;
		allowed = allow_orient(&p, ep, ipc, orient, v6);
		if (!allowed && p.proto == IPPROTO_TCP && !p.syn) {
			/* a connection older than our state: either opener */
			orient = dir ^ 1;
			allowed = allow_orient(&p, ep, ipc, orient, v6);
			if (!allowed)
				orient = dir;
		}
	}

	if (allowed && orient == POL_DIR_INGRESS && p.proto == IPPROTO_TCP &&
	    (ep->flags & POL_F_MTLS) && !mtls_admits(&p, ep, ipc, v6))
		reason = POL_DROP_MTLS_PLAINTEXT, allowed = 0;	/* invariant 11 */
	else if (allowed)
		reason = POL_DROP_NONE;
	else if (prev_verdict == POL_V_ALLOW || prev_reason == POL_DROP_REVOKED)
		reason = POL_DROP_REVOKED;
	else
		reason = orient == POL_DIR_EGRESS ? POL_DROP_EGRESS_DENIED : POL_DROP_INGRESS_DENIED;

	cv.gen = p.gen;
	cv.verdict = allowed ? POL_V_ALLOW : POL_V_DENY;
	cv.orient = orient;
	cv.reason = (__u8)reason;
	if (use_sk && v6) {
		st6 = bpf_sk_storage_get(&pol_sk6, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (st6) {
			st6->gen = cv.gen;
			st6->verdict = cv.verdict;
			st6->orient = orient;
			st6->reason = cv.reason;
			st6->flags = skf;
			__builtin_memcpy(st6->peer, p.peer6, 16);
			st6->lport = p.lport;
			st6->pport = p.pport;
		}
	} else if (use_sk) {
		st = bpf_sk_storage_get(&pol_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (st) {
			st->gen = cv.gen;
			st->verdict = cv.verdict;
			st->orient = orient;
			st->reason = cv.reason;
			st->flags = skf;
			st->peer_ip = p.peer;
			st->lport = p.lport;
			st->pport = p.pport;
		}
	} else if (v6) {
		bpf_map_update_elem(&pol_ct6, &ck6, &cv, BPF_ANY);
	} else {
		bpf_map_update_elem(&pol_ct, &ck, &cv, BPF_ANY);
	}
	if (allowed)
		return PASS;
	/* orient is a direction here; STRICT is no NetworkPolicy's doing */
	count_drop(reason, reason == POL_DROP_MTLS_PLAINTEXT ? 0 : ep->pol[orient & 1]);
	return DROP;
}

static __always_inline int pol_skb(struct __sk_buff *skb, __u8 dir)
{
	__u32 state = pol_state();

	if (!state)
		return PASS;		/* invariant 5: never synced */
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return pol_skb_fam(skb, dir, state, 1);
	return pol_skb_fam(skb, dir, state, 0);
}

/* Fail fast: a TCP connect() the local pod's egress policy denies returns
 * EPERM at once instead of a SYN that times out. Only judged when the
 * connecting pod is known (bound source address, or its cgroup in
 * pol_cgpod) and the destination is not a Service VIP (those are judged on
 * the chosen backend by cgroup_skb; when the load balancer's connect4 runs
 * first, the destination here already is the backend). Anything unsure
 * passes: cgroup_skb still enforces every packet. peer/pport: the IPv4
 * destination (network order), from connect4 or a v4-mapped connect6. */
static __always_inline int pol_connect(struct bpf_sock_addr *ctx, __u32 peer, __u16 pport)
{
	struct pkt p = { .dir = POL_DIR_EGRESS, .syn = 1 };
	struct pol_ipc_val *ep, *pv;
	struct bpf_sock *sk = ctx->sk;
	__u32 state, *ip;
	__u64 cgid;
	void *ipc;

	if (ctx->protocol != IPPROTO_TCP || !sk)
		return 1;
	state = pol_state();
	if (!state)
		return 1;
	p.gen = state >> 1;
	p.slot = state & 1;
	p.proto = IPPROTO_TCP;
	p.peer = peer;
	p.pport = pport;
	/* a bound source (its dst is not set yet: ask for the source alone) */
	p.local = zh_sock_src_v4(sk);
	if (!p.local) {
		cgid = bpf_get_current_cgroup_id();
		ip = bpf_map_lookup_elem(&pol_cgpod, &cgid);
		if (!ip)
			return 1;
		p.local = *ip;
	}
	if (p.local == p.peer || is_loopback(p.local) || is_loopback(p.peer))
		return 1;
	ipc = table(&pol_ipc, p.slot);
	if (!ipc)
		return 1;
	ep = bpf_map_lookup_elem(ipc, &p.local);
	if (!ep || !(ep->flags & POL_F_LOCAL) || !(ep->flags & POL_F_ISO_EGRESS))
		return 1;
	pv = bpf_map_lookup_elem(ipc, &p.peer);
	if (pv && (pv->flags & POL_F_VIP))
		return 1;
	if (l7cap_redirected(bpf_get_socket_cookie(ctx), p.peer, p.pport))
		return 1;	/* invariant 6: the proxy judges it per request */
	if (allow_dir(&p, ep, ipc, POL_DIR_EGRESS, p.pport, 0))
		return 1;
	count_drop(POL_DROP_EGRESS_DENIED, ep->pol[POL_DIR_EGRESS]);
	return 0;	/* connect() fails with EPERM */
}

SEC("cgroup/connect4")
int pol_connect4(struct bpf_sock_addr *ctx)
{
	return pol_connect(ctx, ctx->user_ip4, (__u16)ctx->user_port);
}

/* An AF_INET6 socket: a v4-mapped destination is an IPv4 connection and
 * judged as connect4 does (invariant 9); a native IPv6 TCP connect from a
 * pod whose egress policy denies it fails at once (invariant 10), judged
 * with the IPv6 tables like connect4 with the IPv4 ones. The connecting
 * pod is found by its cgroup (pol_cgpod: its identity is that of its IPv4
 * entry; pol_cgpod6 for a pod without IPv4); anything unsure passes,
 * cgroup_skb judges every packet. */
SEC("cgroup/connect6")
int pol_connect6(struct bpf_sock_addr *ctx)
{
	struct pkt p = { .dir = POL_DIR_EGRESS, .syn = 1, .proto = IPPROTO_TCP };
	struct pol_ipc_val *ep, *pv;
	__u32 state;
	void *ipc6;

	if (zh_is_v4mapped(ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2]))
		return pol_connect(ctx, ctx->user_ip6[3], (__u16)ctx->user_port);
	if (ctx->protocol != IPPROTO_TCP)
		return 1;
	p.peer6[0] = ctx->user_ip6[0];
	p.peer6[1] = ctx->user_ip6[1];
	p.peer6[2] = ctx->user_ip6[2];
	p.peer6[3] = ctx->user_ip6[3];
	p.pport = (__u16)ctx->user_port;
	if (is_loopback6(p.peer6))
		return 1;
	state = pol_state();
	if (!state)
		return 1;
	p.gen = state >> 1;
	p.slot = state & 1;
	ep = iso_pod_of_cgroup(bpf_get_current_cgroup_id(), p.slot);
	if (!ep || !(ep->flags & POL_F_ISO_EGRESS))
		return 1;
	ipc6 = table(&pol_ipc6, p.slot);
	if (!ipc6)
		return 1;
	pv = bpf_map_lookup_elem(ipc6, p.peer6);
	if (pv && (pv->flags & POL_F_VIP))
		return 1;	/* judged on the chosen backend by cgroup_skb */
	if (l7cap_redirected6(bpf_get_socket_cookie(ctx), p.peer6, p.pport))
		return 1;	/* invariant 6: the proxy judges it per request */
	if (allow_dir(&p, ep, ipc6, POL_DIR_EGRESS, p.pport, 1))
		return 1;
	count_drop(POL_DROP_EGRESS_DENIED, ep->pol[POL_DIR_EGRESS]);
	return 0;	/* connect() fails with EPERM */
}

/* Who opened each TCP connection, recorded when it is established, so that
 * the per-packet programs (attached only while a pod of the node is
 * isolated: pol_load.c invariant 6) know the orientation of connections
 * that began without them, and judge them by the right policy (invariant 8).
 * Per connection, never per packet. A socket already judged on its SYN
 * keeps its entry. */
/* pol_sockops for a native IPv6 connection (invariant 10): the same record
 * in pol_sk6, which the per-packet programs read for IPv6 as pol_sk for
 * IPv4. Addresses and ports as the packet parser writes them. */
static __always_inline int pol_sockops6(struct bpf_sock_ops *skops, struct bpf_sock *sk, __u8 orient)
{
	struct pol_sk6 *st6 = bpf_sk_storage_get(&pol_sk6, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (!st6 || st6->verdict != POL_V_NONE)
		return 1;
	st6->gen = 0;		/* never a generation in force: judged on the next packet */
	st6->orient = orient;
	st6->peer[0] = skops->remote_ip6[0];
	st6->peer[1] = skops->remote_ip6[1];
	st6->peer[2] = skops->remote_ip6[2];
	st6->peer[3] = skops->remote_ip6[3];
	st6->pport = bpf_htons((__u16)bpf_ntohl(skops->remote_port));
	st6->lport = bpf_htons((__u16)skops->local_port);
	return 1;
}

SEC("sockops")
int pol_sockops(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct pol_sk *st;
	__u32 lip, rip;
	__u8 orient;

	/* The op first: this runs for every callback of every socket (state
	 * changes too, once another program asked for them), and only the
	 * two ESTABLISHED ones matter here. */
	if (skops->op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		orient = POL_DIR_EGRESS;
	else if (skops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		orient = POL_DIR_INGRESS;
	else
		return 1;
	if (!sk)
		return 1;
	/* AF_INET, or AF_INET6 with v4-mapped ends (invariant 9) */
	if (!zh_sockops_v4(skops, &lip, &rip))
		return skops->family == ZH_AF_INET6 ? pol_sockops6(skops, sk, orient) : 1;
	st = bpf_sk_storage_get(&pol_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st || st->verdict != POL_V_NONE)
		return 1;
	st->gen = 0;		/* never a generation in force: judged on the next packet */
	st->orient = orient;
	st->peer_ip = rip;
	/* remote_port: network order in the upper half; local_port: host
	 * order (bpf/lib/accel_key.h states both) */
	st->pport = bpf_htons((__u16)bpf_ntohl(skops->remote_port));
	st->lport = bpf_htons((__u16)skops->local_port);
	return 1;
}

SEC("cgroup_skb/ingress")
int pol_ingress(struct __sk_buff *skb)
{
	return pol_skb(skb, POL_DIR_INGRESS);
}

SEC("cgroup_skb/egress")
int pol_egress(struct __sk_buff *skb)
{
	return pol_skb(skb, POL_DIR_EGRESS);
}
