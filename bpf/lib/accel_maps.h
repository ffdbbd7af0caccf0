/* accel_maps.h — the maps of the same-node short-circuit, one purpose each. */
#ifndef ZH_BPF_ACCEL_MAPS_H
#define ZH_BPF_ACCEL_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "zerohop/abi/accel.h"

/* Established short-circuited sockets, keyed from their own side. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key);
	__type(value, __u64);
} accel_sockhash SEC(".maps");

/* The same for native IPv6 connections (struct zh_accel_key6). The sk_msg
 * program is attached to both sockhashes; a socket is in one of them. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key6);
	__type(value, __u64);
} accel_sockhash6 SEC(".maps");

/* This node's pod IPv4s (network order) -> 1. Written by ag_accel_set_local. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_LOCAL);
	__type(key, __u32);
	__type(value, __u8);
} accel_local SEC(".maps");

/* This node's pod IPv6s (16 bytes, network order) -> 1. Written by
 * ag_accel_set_local6. */
struct zh_accel_ip6 {
	__u32 w[4];
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_LOCAL);
	__type(key, struct zh_accel_ip6);
	__type(value, __u8);
} accel_local6 SEC(".maps");

/* Sockets of accel_sockhash that have left ESTABLISHED (key -> new state).
 * sk_msg cannot hold a reference to the peer socket (no bpf_sk_release in
 * sk_msg programs), so the peer's state is published here by sock_ops. LRU:
 * an entry orphaned by a missed callback ages out; a stale entry can only
 * demote a connection to the normal path, never redirect one. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key);
	__type(value, __u32);
} accel_closing SEC(".maps");

/* accel_closing of accel_sockhash6's sockets (counted in accel_nclosing too). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key6);
	__type(value, __u32);
} accel_closing6 SEC(".maps");

/* Sockets that have ever been sent a redirected message (key -> 1), marked
 * once per connection by the sender. A socket without a mark has nothing in
 * its short-circuit queue, so it can leave accel_sockhash at any time without
 * losing bytes (the kernel drops that queue with the socket's psock). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key);
	__type(value, __u8);
} accel_rx SEC(".maps");

/* accel_rx of accel_sockhash6's sockets. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key6);
	__type(value, __u8);
} accel_rx6 SEC(".maps");

/* Where each short-circuited socket's queue length is (key -> struct
 * zh_accel_rxq), for its peer's backpressure check (accel.bpf.c inv. 13).
 * Written at insert, deleted at TCP_CLOSE; LRU like accel_rx: an orphan
 * ages out, and a stale entry can only make a sender fall back. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key);
	__type(value, struct zh_accel_rxq);
} accel_rxq SEC(".maps");

/* accel_rxq of accel_sockhash6's sockets. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_SOCKS);
	__type(key, struct zh_accel_key6);
	__type(value, struct zh_accel_rxq);
} accel_rxq6 SEC(".maps");

/* Ports (host order) never short-circuited, on either end: an opt-out for
 * applications that read with splice(2) (docs/accel.md). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_SKIP_PORTS);
	__type(key, __u32);
	__type(value, __u8);
} accel_skip SEC(".maps");

/* The node L7 proxy's endpoints (struct zh_accel_proxy_ep -> 1): its
 * capture listener ip:port and its upstream source address (port 0). A
 * connection between a local pod and one of them is short-circuited
 * (invariant 9 of accel.bpf.c). Written by ag_accel_set_proxy. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_PROXY);
	__type(key, struct zh_accel_proxy_ep);
	__type(value, __u8);
} accel_proxy SEC(".maps");

/* The node L7 proxy's IPv6 endpoints (struct zh_accel_proxy_ep6 -> 1):
 * its IPv6 capture listener. Written by ag_accel_set_proxy6. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_ACCEL_MAX_PROXY);
	__type(key, struct zh_accel_proxy_ep6);
	__type(value, __u8);
} accel_proxy6 SEC(".maps");

/* Counters, index enum zh_accel_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ZH_ACCEL_ST__MAX);
	__type(key, __u32);
	__type(value, __u64);
} accel_stats SEC(".maps");

/* Runtime settings, index enum zh_accel_cfg. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ZH_ACCEL_CFG__MAX);
	__type(key, __u32);
	__type(value, __u32);
} accel_cfg SEC(".maps");

/* Per-socket state of sockets in accel_sockhash; freed with the socket. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct zh_accel_sk);
} accel_sk SEC(".maps");

static __always_inline void accel_count(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&accel_stats, &idx);

	if (v)
		*v += n;
}

static __always_inline __u32 accel_cfg_get(__u32 idx)
{
	__u32 *v = bpf_map_lookup_elem(&accel_cfg, &idx);

	return v ? *v : 0;
}

#endif
