// SPDX-License-Identifier: GPL-2.0
/* lb_destroy.bpf.c — destroy established TCP sockets whose peer is a backend
 * that was removed from every Service (agent --destroy-stale=on).
 *
 * Design note
 * -----------
 * An iter/tcp program walks the TCP sockets of the network namespace the
 * iterator was *created* in, so the agent (src/agent/destroy.c) fills
 * lb_stale with the removed backends, then, for each local pod's network
 * namespace, enters it in a child process and reads one iterator there.
 * Invariants:
 *  1. Only sockets whose remote address:port is in lb_stale are touched;
 *     listening sockets (remote 0) never match.
 *  2. The map and program are not pinned: they live for one destroy round.
 *  3. An AF_INET6 socket connected to a v4-mapped address (a dual-stack
 *     client of a Service, connect6 in lb.bpf.c) is an IPv4 connection:
 *     skc_daddr holds its IPv4 peer and it is matched as an AF_INET one.
 * The socket's owner sees ECONNABORTED; the peer gets a RST.
 * Kernel types are declared locally with preserve_access_index (CO-RE):
 * libbpf relocates the field offsets against the running kernel's BTF.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "zerohop/abi/lb.h"

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define AF_INET6 10

struct bpf_iter_meta {
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct in6_addr {
	union {
		__be32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));

struct bpf_iter__tcp {
	union {
		struct bpf_iter_meta *meta;
	};
	union {
		struct sock_common *sk_common;
	};
	__u32 uid;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

/* Removed backends (v4-mapped address, port network order) -> 1. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct zh_lb_backend);
	__type(value, __u8);
} lb_stale SEC(".maps");

/* [0] sockets destroyed, [1] destroy calls that failed, [2] IPv4 TCP
 * sockets walked (AF_INET, and AF_INET6 with a v4-mapped peer). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} lb_destroyed SEC(".maps");

SEC("iter/tcp")
int zh_lb_destroy_iter(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct zh_lb_backend k = {};
	__u32 idx;
	__u64 *c;

	if (!skc)
		return 0;
	if (skc->skc_family == AF_INET6) {	/* invariant 3 */
		if (skc->skc_v6_daddr.in6_u.u6_addr32[0] || skc->skc_v6_daddr.in6_u.u6_addr32[1] ||
		    skc->skc_v6_daddr.in6_u.u6_addr32[2] != __builtin_bswap32(0xffff))
			return 0;
	} else if (skc->skc_family != AF_INET) {
		return 0;
	}
	idx = 2;
	c = bpf_map_lookup_elem(&lb_destroyed, &idx);
	if (c)
		__sync_fetch_and_add(c, 1);
	k.addr[10] = 0xff;
	k.addr[11] = 0xff;
	*(__u32 *)&k.addr[12] = skc->skc_daddr;
	k.port = skc->skc_dport;
	if (!bpf_map_lookup_elem(&lb_stale, &k))
		return 0;
	idx = bpf_sock_destroy(skc) ? 1 : 0;
	c = bpf_map_lookup_elem(&lb_destroyed, &idx);
	if (c)
		__sync_fetch_and_add(c, 1);
	return 0;
}
