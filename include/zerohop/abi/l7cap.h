/* abi/l7cap.h — the capture contract between the agent's connect4 hook,
 * the proxy's sock_ops program (bpf/l7cap.bpf.c) and the proxy (user
 * space). Types plus the two shared map definitions (BPF side only), so
 * every object that includes it declares byte-identical, pinned-by-name maps.
 *
 * Flow (docs/proxy.md "Capture"):
 *   0. The proxy, once loaded, writes its address (node fabric IP :
 *      ZH_L7CAP_PORT) into zh_l7cap_cfg[0]: the proxy owns its listen
 *      address, so the agent needs no node-IP knowledge. Never cleared:
 *      a proxy that is down refuses (RST), it is never bypassed.
 *   1. connect4 (agent, pod cgroups): for a TCP Service that needs L7,
 *      rewrite the destination to zh_l7cap_cfg[0] and write
 *      zh_l7cap_sock[socket cookie] = original ClusterIP:port. No address
 *      there yet (no proxy ever started on the node): ECONNREFUSED.
 *   2. sock_ops (l7cap, node cgroup) at ACTIVE_ESTABLISHED of a socket whose
 *      remote is the proxy: move the entry to zh_l7cap_orig[{client ip,
 *      client port}] and delete the cookie entry. This runs before the
 *      client's final ACK is sent, so before the proxy can accept().
 *   3. The proxy, at accept(): look up zh_l7cap_orig by the peer address,
 *      delete it, and route as if connected to that ClusterIP:port.
 * IPv6 (docs/ipv6.md "L7 over IPv6"): a proxy with an IPv6 address also
 * writes it into zh_l7cap_cfg6[0] and listens there; connect6 then sends
 * a native IPv6 client to it (the cookie entry as in step 1), sock_ops
 * moves the entry to zh_l7cap_orig6[{client ip6, port}], and the proxy
 * looks it up there for a connection accepted on its IPv6 listener.
 * Without an IPv6 address (zh_l7cap_cfg6[0] zero) connect6 sends the
 * native client to the IPv4 address v4-mapped. The IPv4 maps and their
 * layout are unchanged: pins of an older agent or proxy stay valid. An
 * IPv6 single-stack Service (no IPv4 ClusterIP) is recorded by the last
 * 32 bits of its IPv6 ClusterIP with ZH_L7CAP_DST_V6LOW in flags.
 * Invariant: the proxy's own upstream sockets are never redirected: the
 * agent attaches connect4 to the node cgroup (so it applies to the pod
 * cgroups below it) and the proxy runs in the node's network namespace but
 * in a cgroup outside the node's (the lab: CGROOT/zerohop-LAB/system/
 * proxy-NODE), so none of its sockets meets connect4 or these maps.
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
#define ZH_L7CAP_CFG_MAP	"zh_l7cap_cfg"
#define ZH_L7CAP_ORIG6_MAP	"zh_l7cap_orig6"
#define ZH_L7CAP_CFG6_MAP	"zh_l7cap_cfg6"

struct zh_l7cap_dst {		/* original destination (ClusterIP:port) */
	__be32 ip;
	__be16 port;
	__u16 flags;		/* ZH_L7CAP_DST_*; was padding, always zero */
};
/* ip is the last 32 bits of an IPv6 ClusterIP, not an IPv4 one: connect6
 * to an IPv6 single-stack L7 Service (bpf/lb.bpf.c invariant 9), which has
 * no IPv4 ClusterIP to route by. The cluster's one IPv6 service CIDR is
 * /108 or longer (docs/ipv6.md "The Cluster object"), so those bits name
 * the ClusterIP, and the record keeps its 8 bytes: the pinned maps' layout
 * is unchanged, no migration (the proxy: px_table_find_ip6low). */
#define ZH_L7CAP_DST_V6LOW	1
/* ip:port is a pod's own address on another node, not a ClusterIP, and
 * that pod's port is under STRICT mutual TLS (docs/mtls.md "Client side"):
 * connect4 sent the connection to the proxy so that it carries it in an
 * HBONE tunnel to the pod's node; the proxy does not route it as an L7
 * Service. */
#define ZH_L7CAP_DST_HBONE	2
_Static_assert(sizeof(struct zh_l7cap_dst) == 8, "zh_l7cap_dst size");

struct zh_l7cap_client {	/* client socket address as the proxy sees the peer */
	__be32 ip;
	__be16 port;
	__u16 pad;		/* zero */
};
_Static_assert(sizeof(struct zh_l7cap_client) == 8, "zh_l7cap_client size");

/* The proxy's capture address: rodata of bpf/l7cap.bpf.c (set by the
 * loader) and the value of zh_l7cap_cfg[0] (read by the agent's connect4).
 * proxy_ip == 0: no proxy has started on this node yet. */
struct zh_l7cap_cfg {
	__be32 proxy_ip;	/* node fabric IP */
	__be16 proxy_port;	/* htons(ZH_L7CAP_PORT) */
	__u16 flags;		/* ZH_L7CAP_CFG_*; was padding, zero from older proxies */
};
_Static_assert(sizeof(struct zh_l7cap_cfg) == 8, "zh_l7cap_cfg size");
/* The proxy serves HBONE both ways (`--hbone`): connect4 may send it
 * connections to STRICT pods of other nodes (ZH_L7CAP_DST_HBONE), and the
 * node's policy programs refuse plain text from other nodes to its own
 * STRICT pods (bpf/policy.bpf.c invariant 11). Without it STRICT is
 * recorded, not enforced, as before the tunnel existed. */
#define ZH_L7CAP_CFG_HBONE	1

/* An IPv6 client as the proxy's IPv6 listener sees the peer. */
struct zh_l7cap_client6 {
	__u8 ip[16];
	__be16 port;
	__u16 pad;		/* zero */
};
_Static_assert(sizeof(struct zh_l7cap_client6) == 20, "zh_l7cap_client6 size");

/* The proxy's IPv6 capture address: zh_l7cap_cfg6[0] and the rodata of
 * bpf/l7cap.bpf.c. All-zero proxy_ip6: the proxy has no IPv6 listener. */
struct zh_l7cap_cfg6 {
	__u8 proxy_ip6[16];	/* node IPv6 address */
	__be16 proxy_port;	/* htons(ZH_L7CAP_PORT) */
	__u16 pad;
};
_Static_assert(sizeof(struct zh_l7cap_cfg6) == 20, "zh_l7cap_cfg6 size");

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

/* zh_l7cap_cfg: [0] = the node proxy's capture address; written by the
 * proxy at start (src/proxy/capture.c), read by connect4. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct zh_l7cap_cfg);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} zh_l7cap_cfg SEC(".maps");

/* zh_l7cap_orig6: IPv6 client {ip6, port} -> original destination (the
 * name the proxy routes by: an IPv4 ClusterIP, or ZH_L7CAP_DST_V6LOW);
 * as zh_l7cap_orig. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ZH_L7CAP_MAX);
	__type(key, struct zh_l7cap_client6);
	__type(value, struct zh_l7cap_dst);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} zh_l7cap_orig6 SEC(".maps");

/* zh_l7cap_cfg6: [0] = the node proxy's IPv6 capture address, or zero. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct zh_l7cap_cfg6);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} zh_l7cap_cfg6 SEC(".maps");
#endif

#endif
