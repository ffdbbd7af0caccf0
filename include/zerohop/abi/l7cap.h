/* abi/l7cap.h — the capture contract between the agent's connect4 hook,
 * the proxy's sock_ops program (bpf/l7cap.bpf.c) and the proxy (user
 * space). Types plus the two shared map definitions (BPF side only), so
 * every object that includes it declares byte-identical, pinned-by-name maps.
 *
 * Flow (docs/proxy.md "Capture"):
 *   1. connect4 (agent, pod cgroups): for a Service that needs L7, rewrite
 *      the destination to the node proxy (node fabric IP : ZH_L7CAP_PORT)
 *      and write zh_l7cap_sock[socket cookie] = original ClusterIP:port.
 *   2. sock_ops (l7cap, node cgroup) at ACTIVE_ESTABLISHED of a socket whose
 *      remote is the proxy: move the entry to zh_l7cap_orig[{client ip,
 *      client port}] and delete the cookie entry. This runs before the
 *      client's final ACK is sent, so before the proxy can accept().
 *   3. The proxy, at accept(): look up zh_l7cap_orig by the peer address,
 *      delete it, and route as if connected to that ClusterIP:port.
 * Invariant: the proxy's own upstream sockets are never redirected: the
 * proxy runs in the node namespace and cgroup, and connect4 is attached
 * where the agent attaches it (pod cgroups under the node's, and the
 * proxy's socket is not in any of them).
 *
 * Byte order: every ip and port in these maps is in network order.
 * Keys are unique across the node: pod IPs are unique in the cluster and
 * the client side of a proxy connection is never loopback.
 */
#ifndef ZH_ABI_L7CAP_H
#define ZH_ABI_L7CAP_H

#include <linux/types.h>

#define ZH_L7CAP_PORT		15001	/* proxy capture listener (Istio's outbound) */
#define ZH_L7CAP_MAX		65536	/* entries of each map (LRU: a crashed
					 * client or proxy cannot fill them) */
#define ZH_L7CAP_SOCK_MAP	"zh_l7cap_sock"	/* pinned names, under the node pin dir */
#define ZH_L7CAP_ORIG_MAP	"zh_l7cap_orig"

struct zh_l7cap_dst {		/* original destination (ClusterIP:port) */
	__be32 ip;
	__be16 port;
	__u16 pad;
};
_Static_assert(sizeof(struct zh_l7cap_dst) == 8, "zh_l7cap_dst size");

struct zh_l7cap_client {	/* client socket address as the proxy sees the peer */
	__be32 ip;
	__be16 port;
	__u16 pad;		/* zero */
};
_Static_assert(sizeof(struct zh_l7cap_client) == 8, "zh_l7cap_client size");

/* Settings of bpf/l7cap.bpf.c (const volatile rodata, set by the loader). */
struct zh_l7cap_cfg {
	__be32 proxy_ip;	/* node fabric IP */
	__be16 proxy_port;	/* htons(ZH_L7CAP_PORT) */
	__u16 pad;
};

#ifdef __bpf__
/* zh_l7cap_sock: socket cookie -> original destination; written by connect4. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_L7CAP_MAX);
	__type(key, __u64);
	__type(value, struct zh_l7cap_dst);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} zh_l7cap_sock SEC(".maps");

/* zh_l7cap_orig: client {ip, port} -> original destination; written by
 * sock_ops, read and deleted by the proxy at accept(). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_L7CAP_MAX);
	__type(key, struct zh_l7cap_client);
	__type(value, struct zh_l7cap_dst);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} zh_l7cap_orig SEC(".maps");
#endif

#endif
