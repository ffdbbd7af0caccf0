/* lb_maps.h — the maps of the service load balancer, one purpose line each.
 * Layouts in include/zerohop/abi/lb.h; limits and lifecycle in docs/maps.md.
 * All maps are pinned by the agent under its --pin-dir (libbpf
 * bpf_map__set_pin_path), so a restarted agent adopts them. lb.bpf.c also
 * uses the L7 capture maps zh_l7cap_cfg / zh_l7cap_sock (and carries
 * zh_l7cap_orig), declared once in zerohop/abi/l7cap.h and pinned in the
 * same dir, shared by name with the node proxy. */
#ifndef ZH_BPF_LB_MAPS_H
#define ZH_BPF_LB_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "zerohop/abi/lb.h"

/* VIP:port/proto -> service (id, live slot, backend count, flags). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_LB_MAX_SVC);
	__type(key, struct zh_lb_svc_key);
	__type(value, struct zh_lb_svc_val);
} lb_svc SEC(".maps");

/* {service id, slot, index} -> alias entry: two backends and a threshold.
 * Not preallocated: 2^20 slots would pin ~100 MB per node. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_LB_MAX_ALIAS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct zh_lb_alias_key);
	__type(value, struct zh_lb_alias_val);
} lb_alias SEC(".maps");

/* Per connected socket: the VIP asked for and the backend given. Freed by the
 * kernel with the socket. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct zh_lb_sock_val);
} lb_sock SEC(".maps");

/* Unconnected UDP: {socket cookie, backend} -> VIP, to restore the reply's
 * source address in recvmsg4. LRU: forgotten entries only affect replies to
 * datagrams sent long ago. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_LB_MAX_UDPREV);
	__type(key, struct zh_lb_udprev_key);
	__type(value, struct zh_lb_udprev_val);
} lb_udprev SEC(".maps");

/* Markers written by the agent (apply generation last, so a reader that sees
 * generation G sees every entry of G). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ZH_LB_META_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lb_meta SEC(".maps");

/* {pod IPv4, port} of another node -> enum zh_lb_mtls_mode (abi/lb.h):
 * where connect4 sends a connection into the HBONE tunnel (invariant 10). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZH_LB_MAX_MTLS);
	__type(key, struct zh_lb_mtls_key);
	__type(value, __u8);
} lb_mtls SEC(".maps");

/* Per-CPU counters indexed by enum zh_lb_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ZH_LB_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lb_stats SEC(".maps");

#endif
