/* lb_helpers.h — small helpers of the service load balancer: address
 * conversion, counters, the weighted backend pick. No maps defined here
 * (lb_maps.h), no entry points (lb.bpf.c). */
#ifndef ZH_BPF_LB_HELPERS_H
#define ZH_BPF_LB_HELPERS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zerohop/abi/lb.h"
#include "lib/lb_maps.h"

/* Fill a 16-byte v4-mapped address from an IPv4 address in network order. */
static __always_inline void lb_v4_mapped(__u8 addr[16], __u32 ip4)
{
	__builtin_memset(addr, 0, 10);
	addr[10] = 0xff;
	addr[11] = 0xff;
	__builtin_memcpy(&addr[12], &ip4, 4);
}

static __always_inline __u32 lb_v4_of(const __u8 addr[16])
{
	__u32 ip4;

	__builtin_memcpy(&ip4, &addr[12], 4);
	return ip4;
}

/* Is the 16-byte address v4-mapped (an IPv4 address)? */
static __always_inline int lb_is_v4mapped(const __u8 addr[16])
{
	const __u32 *w = (const __u32 *)addr;

	return w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0x0000ffff);
}

static __always_inline int lb_is_zero6(const __u8 addr[16])
{
	const __u32 *w = (const __u32 *)addr;

	return (w[0] | w[1] | w[2] | w[3]) == 0;
}

static __always_inline int lb_addr_eq(const __u8 a[16], const __u8 b[16])
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

static __always_inline void lb_count(__u32 stat)
{
	__u64 *c = bpf_map_lookup_elem(&lb_stats, &stat);

	if (c)
		*c += 1;	/* per-CPU slot: no atomic needed */
}

/* Weighted random backend of svc, O(1): two random numbers, one lookup.
 * Returns a pointer into the alias map value (valid for this program run:
 * the agent never rewrites a live slot, it writes the other slot and flips),
 * or NULL when the entry is missing: svc was read before a sync flipped it
 * and deleted its old slot (the caller re-reads the service, lb.bpf.c
 * lb_pick_fresh). */
static __always_inline const struct zh_lb_backend *
lb_pick(const struct zh_lb_svc_val *svc)
{
	struct zh_lb_alias_key k = {};
	struct zh_lb_alias_val *v;
	__u32 r = bpf_get_prandom_u32();

	k.svc_id = svc->svc_id;
	k.slot = svc->slot;
	/* Multiply-shift instead of %: no division, bias below 2^-20. */
	k.idx = (__u16)(((__u64)r * svc->count) >> 32);
	v = bpf_map_lookup_elem(&lb_alias, &k);
	if (!v)
		return NULL;
	return bpf_get_prandom_u32() < v->threshold ? &v->a : &v->b;
}

#endif
