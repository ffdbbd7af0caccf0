/* policy_maps.h — the maps of the NetworkPolicy datapath, one purpose line
 * each. Layouts and pin names in include/zerohop/abi/policy.h; limits and
 * lifecycle in docs/policy.md. Pinned by src/policy/pol_load.c under the
 * node's pin dir (libbpf bpf_map__set_pin_path), so a restarted agent adopts
 * them and established connections keep their cached verdicts. */
#ifndef ZH_BPF_POLICY_MAPS_H
#define ZH_BPF_POLICY_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "zerohop/abi/policy.h"

/* Index 0: generation and active table slot (struct pol_cfg). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pol_cfg);
} pol_cfg SEC(".maps");

/* The three compiled tables, double-buffered: slot -> inner map. The loader
 * creates fresh inner maps for the inactive slot, fills them, then flips
 * pol_cfg (make-before-break; a program run reads pol_cfg once and uses one
 * slot throughout). Inner maps are not preallocated; sizes instead of BTF
 * types because clang emits only forward declarations for types reached
 * through an inner-map template. */
struct pol_ipc_inner {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_IPCACHE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(__u32));	/* IPv4, network order */
	__uint(value_size, sizeof(struct pol_ipc_val));
};

struct pol_cidr_inner {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, POL_MAX_CIDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(struct pol_cidr_key));
	__uint(value_size, sizeof(__u32));	/* class id */
};

struct pol_rule_inner {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, POL_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(struct pol_rule_key));
	__uint(value_size, sizeof(struct pol_rule_val));
};

/* IP -> identity, local/isolation flags, policies charged for drops. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct pol_ipc_inner);
} pol_ipc SEC(".maps");

/* ipBlock prefixes -> class id (longest match decides membership). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct pol_cidr_inner);
} pol_cidr SEC(".maps");

/* {local id, peer id/class/ANY, dir, proto, port prefix} -> allowing policy. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct pol_rule_inner);
} pol_rules SEC(".maps");

/* Per socket: verdict, orientation and the generation it was taken under
 * (the fast path: one lookup per packet of an established connection). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pol_sk);
} pol_sk SEC(".maps");

/* Flows without a connected socket of their own: UDP datagrams (so replies
 * of an admitted flow pass), TCP SYNs seen on a listener (so the accepted
 * child socket knows it was opened by the peer). LRU: never fails closed. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_CT);
	__type(key, struct pol_ct_key);
	__type(value, struct pol_ct_val);
} pol_ct SEC(".maps");

/* Packets dropped, per reason (enum pol_drop_reason). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POL_DROP__MAX);
	__type(key, __u32);
	__type(value, __u64);
} pol_drops SEC(".maps");

/* Packets dropped, per {policy charged, reason}. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_POLICIES);
	__type(key, struct pol_pdrop_key);
	__type(value, __u64);
} pol_pdrops SEC(".maps");

/* Policy id -> "ns/name", written by the loader for `get policy-drops`. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_POLICIES);
	__type(key, __u32);
	__type(value, struct pol_name);
} pol_names SEC(".maps");

/* Pod cgroup id -> the pod's IP, so that connect4 knows who connects before
 * the socket has a source address. Written by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_CGPODS);
	__type(key, __u64);
	__type(value, __u32);
} pol_cgpod SEC(".maps");

/* Pod cgroup id -> the pod's IPv6 address, for a pod that has no IPv4
 * (an IPv6-only cluster): connect6 and the fail-closed IPv6 path find its
 * identity in pol_ipc6 with it. A dual-stack pod is in pol_cgpod only (its
 * IPv4 entry has the same identity). Written by the loader. */
struct pol_ip6 {
	__u32 w[4];				/* IPv6, network order */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_CGPODS);
	__type(key, __u64);
	__type(value, struct pol_ip6);
} pol_cgpod6 SEC(".maps");

/* ---- IPv6 twins of the address-keyed tables (abi/policy.h) ---- */

struct pol_ipc6_inner {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_IPCACHE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, 16);			/* IPv6, network order */
	__uint(value_size, sizeof(struct pol_ipc_val));
};

struct pol_cidr6_inner {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, POL_MAX_CIDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(struct pol_cidr6_key));
	__uint(value_size, sizeof(__u32));	/* class id */
};

/* IPv6 -> identity and flags (a pod's IPv6: the same value as its IPv4). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct pol_ipc6_inner);
} pol_ipc6 SEC(".maps");

/* IPv6 ipBlock prefixes -> class id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct pol_cidr6_inner);
} pol_cidr6 SEC(".maps");

/* pol_sk for native IPv6 connections. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pol_sk6);
} pol_sk6 SEC(".maps");

/* pol_ct for native IPv6 flows. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_CT);
	__type(key, struct pol_ct6_key);
	__type(value, struct pol_ct_val);
} pol_ct6 SEC(".maps");

#endif
