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
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zerohop/abi/l7cap.h"
#include "lib/v4mapped.h"

const volatile struct zh_l7cap_cfg l7cap_cfg = { 0 };

SEC("sockops")
int zh_l7cap_sockops(struct bpf_sock_ops *skops)
{
	struct zh_l7cap_client k = { 0 };
	struct zh_l7cap_dst *d;
	__u32 lip, rip;
	__u64 cookie;

	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB || !zh_sockops_v4(skops, &lip, &rip))
		return 1;
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
