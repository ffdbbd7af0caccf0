/* v4mapped.h — IPv4 connections on AF_INET6 sockets (::ffff:a.b.c.d).
 *
 * A dual-stack socket (AF_INET6 without IPV6_V6ONLY: gRPC, the JVM, Node.js
 * servers) that connects to, or accepts from, an IPv4 peer carries both of
 * its addresses as v4-mapped IPv6 addresses; on the wire the connection is
 * plain IPv4. Every program that treats "IPv4 connections" asks here, so
 * such a socket is handled exactly as an AF_INET one (docs/agent.md).
 * Addresses are __u32[4] words in network order, as the contexts give them.
 */
#ifndef ZH_BPF_V4MAPPED_H
#define ZH_BPF_V4MAPPED_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ZH_AF_INET 2
#define ZH_AF_INET6 10

/* Is the IPv6 address w0..w3 (network order) v4-mapped? The IPv4 address
 * is then w3. */
static __always_inline int zh_is_v4mapped(__u32 w0, __u32 w1, __u32 w2)
{
	return w0 == 0 && w1 == 0 && w2 == bpf_htonl(0x0000ffff);
}

/* The IPv4 address fields (local_ip4, src_ip4 ...) hold the socket's IPv4
 * addresses for a v4-mapped AF_INET6 socket too (skc_rcv_saddr and
 * skc_daddr, set by tcp_v4_connect / tcp_v4_syn_recv_sock, which the v6
 * socket goes through), so they are always the ones returned; the IPv6
 * fields only tell whether an AF_INET6 socket is v4-mapped. Reading the
 * ip4 field on one branch and ip6[3] on the other would let clang merge
 * the two loads into one through a computed pointer, which the verifier
 * refuses ("dereference of modified ctx ptr", "pointer arithmetic on
 * sock prohibited"). */

/* sock_ops: is this an IPv4 connection — an AF_INET socket, or an AF_INET6
 * socket whose both ends are v4-mapped? On success *lip / *rip are the
 * local and remote IPv4 addresses (network order). Native IPv6: 0. */
static __always_inline int zh_sockops_v4(struct bpf_sock_ops *s, __u32 *lip, __u32 *rip)
{
	__u32 family = s->family;

	if (family != ZH_AF_INET &&
	    (family != ZH_AF_INET6 ||
	     !zh_is_v4mapped(s->remote_ip6[0], s->remote_ip6[1], s->remote_ip6[2]) ||
	     !zh_is_v4mapped(s->local_ip6[0], s->local_ip6[1], s->local_ip6[2])))
		return 0;
	*lip = s->local_ip4;
	*rip = s->remote_ip4;
	return 1;
}

/* struct bpf_sock: the same test for a full socket. */
static __always_inline int zh_sock_v4(struct bpf_sock *sk, __u32 *lip, __u32 *rip)
{
	__u32 family = sk->family;

	if (family != ZH_AF_INET &&
	    (family != ZH_AF_INET6 ||
	     !zh_is_v4mapped(sk->dst_ip6[0], sk->dst_ip6[1], sk->dst_ip6[2]) ||
	     !zh_is_v4mapped(sk->src_ip6[0], sk->src_ip6[1], sk->src_ip6[2])))
		return 0;
	*lip = sk->src_ip4;
	*rip = sk->dst_ip4;
	return 1;
}

/* struct bpf_sock: the bound IPv4 source of an AF_INET socket, or of an
 * AF_INET6 one bound to a v4-mapped address; 0 when unbound or native. */
static __always_inline __u32 zh_sock_src_v4(struct bpf_sock *sk)
{
	__u32 family = sk->family;

	if (family != ZH_AF_INET &&
	    (family != ZH_AF_INET6 ||
	     !zh_is_v4mapped(sk->src_ip6[0], sk->src_ip6[1], sk->src_ip6[2])))
		return 0;
	return sk->src_ip4;
}

#endif
