// SPDX-License-Identifier: GPL-2.0
/* l7cap.bpf.c — sock_ops on a node's cgroup: hand the original destination
 * of a connection redirected to the node proxy over to the proxy.
 *
 * Invariants:
 * 1. Only ACTIVE_ESTABLISHED of an IPv4 connection (an AF_INET socket, or
 *    an AF_INET6 one with v4-mapped ends: lib/v4mapped.h) whose remote is
 *    exactly the configured proxy ip:port is touched; everything else
 *    returns at once.
 * 2. An entry moves from zh_l7cap_sock (cookie) to zh_l7cap_orig (client
 *    address) at most once, and the cookie entry is deleted, so a reused
 *    cookie-less path never finds stale data.
 * 3. The program never fails a connection: a missing cookie entry (the
 *    client connected to the proxy directly) simply records nothing, and
 *    the proxy closes connections it has no destination for.
 * 4. A native IPv6 connection is touched only when the proxy has an IPv6
 *    listener (l7cap_cfg6, docs/ipv6.md "L7 over IPv6") and its remote is
 *    exactly that ip6:port; its entry goes to zh_l7cap_orig6 keyed by the
 *    client's IPv6 address, as invariant 2 says for IPv4.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zerohop/abi/l7cap.h"
#include "lib/v4mapped.h"

const volatile struct zh_l7cap_cfg l7cap_cfg = { 0 };
const volatile struct zh_l7cap_cfg6 l7cap_cfg6 = { 0 };

/* Invariant 4: a native IPv6 socket to the proxy's IPv6 listener. */
static __always_inline void l7cap_native6(struct bpf_sock_ops *skops)
{
	struct zh_l7cap_client6 k = { 0 };
	__u32 r[4] = { skops->remote_ip6[0], skops->remote_ip6[1], skops->remote_ip6[2],
		       skops->remote_ip6[3] };
	__u32 l[4] = { skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2],
		       skops->local_ip6[3] };
	/* volatile reads: a plain copy would let clang fold the loader's
	 * value into the {0} it was initialised with */
	const volatile __u32 *want = (const volatile __u32 *)l7cap_cfg6.proxy_ip6;
	struct zh_l7cap_dst *d;
	__u64 cookie;

	if (!l7cap_cfg6.proxy_port)
		return;
	if (r[0] != want[0] || r[1] != want[1] || r[2] != want[2] || r[3] != want[3] ||
	    (__u16)bpf_ntohl(skops->remote_port) != bpf_ntohs(l7cap_cfg6.proxy_port))
		return;
	cookie = bpf_get_socket_cookie(skops);
	d = bpf_map_lookup_elem(&zh_l7cap_sock, &cookie);
	if (!d)
		return;
	__builtin_memcpy(k.ip, l, 16);
	k.port = bpf_htons((__u16)skops->local_port);
	bpf_map_update_elem(&zh_l7cap_orig6, &k, d, BPF_ANY);
	bpf_map_delete_elem(&zh_l7cap_sock, &cookie);
}

SEC("sockops")
int zh_l7cap_sockops(struct bpf_sock_ops *skops)
{
	struct zh_l7cap_client k = { 0 };
	struct zh_l7cap_dst *d;
	__u32 lip, rip;
	__u64 cookie;

	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	if (!zh_sockops_v4(skops, &lip, &rip)) {
		if (skops->family == ZH_AF_INET6)
			l7cap_native6(skops);
		return 1;
	}
	/* remote_port is in network order in the upper half (bpf/lib/accel_key.h) */
	if (rip != l7cap_cfg.proxy_ip ||
	    (__u16)bpf_ntohl(skops->remote_port) != bpf_ntohs(l7cap_cfg.proxy_port))
		return 1;
	cookie = bpf_get_socket_cookie(skops);
	d = bpf_map_lookup_elem(&zh_l7cap_sock, &cookie);
	if (!d)
		return 1;
	k.ip = lip;
	k.port = bpf_htons((__u16)skops->local_port);	/* local_port: host order */
	bpf_map_update_elem(&zh_l7cap_orig, &k, d, BPF_ANY);
	bpf_map_delete_elem(&zh_l7cap_sock, &cookie);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
