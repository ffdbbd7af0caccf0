/* abi/policy.h — types shared by the NetworkPolicy datapath (bpf/policy.bpf.c)
 * and its compiler/loader (src/policy/). Types only: fixed-width fields,
 * explicit padding, sizes asserted. Compiled by clang -target bpf and gcc.
 *
 * Pinned objects, under the node's pin dir (e.g. /sys/fs/bpf/zerohop/LAB/NODE/):
 *	pol_cfg		ARRAY[1] of struct pol_cfg: generation and active slot
 *	pol_ipc		ARRAY_OF_MAPS[2]: slot -> HASH be32 ip -> struct pol_ipc_val
 *	pol_cidr	ARRAY_OF_MAPS[2]: slot -> LPM struct pol_cidr_key -> u32 class
 *	pol_rules	ARRAY_OF_MAPS[2]: slot -> LPM struct pol_rule_key -> struct pol_rule_val
 *	pol_sk		SK_STORAGE struct pol_sk: per-socket verdict + generation
 *	pol_ct		LRU_HASH struct pol_ct_key -> struct pol_ct_val (UDP flows,
 *			TCP SYNs seen on listeners)
 *	pol_drops	PERCPU_ARRAY[POL_DROP__MAX] u64 packets per reason (a pin
 *			of another size is replaced: counters restart at 0)
 *	pol_pdrops	LRU_HASH struct pol_pdrop_key -> u64 packets per policy+reason
 *	pol_names	LRU_HASH u32 policy id -> struct pol_name
 *	pol_cgpod	HASH u64 cgroup id -> u32 pod IP (connect4: who connects)
 *	pol_ipc6	ARRAY_OF_MAPS[2]: slot -> HASH 16-byte IPv6 -> struct pol_ipc_val
 *	pol_cidr6	ARRAY_OF_MAPS[2]: slot -> LPM struct pol_cidr6_key -> u32 class
 *	pol_sk6		SK_STORAGE struct pol_sk6: pol_sk for native IPv6 tuples
 *	pol_ct6		LRU_HASH struct pol_ct6_key -> struct pol_ct_val
 *
 * IPv6 (docs/ipv6.md "NetworkPolicy"): the identities, rules and verdict
 * logic are shared with IPv4; only the address-keyed tables have an IPv6
 * twin (a pod's IPv6 maps to the same identity and flags as its IPv4; IPv6
 * ipBlock prefixes get classes numbered after the IPv4 ones).
 *	pol_link_connect4, pol_link_sockops	bpf_links on the node cgroup
 *	pol_link_ingress, pol_link_egress	bpf_links on the node cgroup while
 *			some pod of the node is isolated (pol_load.c invariant 6)
 *
 * For the same-node short-circuit (sk_msg, bpf/accel.bpf.c): a socket's
 * policy verdict lives in pol_sk (struct pol_sk, BPF_MAP_TYPE_SK_STORAGE,
 * key int, BPF_F_NO_PREALLOC). A redirected message bypasses cgroup_skb, so
 * sk_msg must not redirect when the socket's pol_sk entry is missing, or its
 * gen differs from pol_cfg.gen, or its verdict is not POL_V_ALLOW: then the
 * message takes the normal path, where cgroup_skb re-evaluates and drops it
 * if the connection is now denied. (zerohop's accel uses its own copy of the
 * generation: ag_accel_set_policy_gen(pol_generation()), same effect.)
 */
#ifndef ZH_ABI_POLICY_H
#define ZH_ABI_POLICY_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 pol_u8;
typedef __u16 pol_u16;
typedef __u32 pol_u32;
typedef __u64 pol_u64;
#else
#include <stdint.h>
typedef uint8_t pol_u8;
typedef uint16_t pol_u16;
typedef uint32_t pol_u32;
typedef uint64_t pol_u64;
#endif

/* Map sizes: the limits a sync must fit in (pol_compile -E2BIG beyond). */
#define POL_MAX_IPCACHE		65536	/* pod IPs + Service VIPs + node IPs + node proxy IPs */
#define POL_MAX_CIDRS		16384	/* distinct ipBlock prefixes */
#define POL_MAX_RULES		1048576	/* rule LPM entries per sync */
#define POL_MAX_POLICIES	65536	/* NetworkPolicy objects */
#define POL_MAX_CT		65536	/* tracked UDP flows / listener SYNs (LRU) */
#define POL_NAME_MAX		192	/* "ns/name" incl. NUL */
#define POL_MAX_CGPODS		16384	/* pod cgroups of this node */

/* Reserved identities; pod identities start at POL_ID_FIRST_POD, ipBlock
 * classes at POL_ID_FIRST_CIDR. */
enum pol_reserved_id {
	POL_ID_NONE = 0,		/* no identity */
	POL_ID_ANY = 1,			/* rule peer key: any source/destination */
	POL_ID_WORLD = 2,		/* address that is not a pod */
	POL_ID_HOST = 3,		/* an address of this node */
	POL_ID_PROXY = 4,		/* a node L7 proxy's upstream source address */
	POL_ID_MTLS = 5,		/* rule peer key of a pod's mTLS mode entries
					 * (value: enum pol_mtls_mode; invariant 11 of
					 * bpf/policy.bpf.c) */
	POL_ID_FIRST_POD = 256,
	POL_ID_FIRST_CIDR = 0x01000000,
};

enum pol_dir {
	POL_DIR_INGRESS = 0,
	POL_DIR_EGRESS = 1,
};

/* struct pol_ipc_val.flags */
enum pol_ipc_flags {
	POL_F_LOCAL = 1 << 0,		/* a pod of this node (policy enforced here) */
	POL_F_ISO_INGRESS = 1 << 1,	/* some policy isolates it for ingress */
	POL_F_ISO_EGRESS = 1 << 2,	/* ... for egress */
	POL_F_NODE = 1 << 3,		/* an address of this node (ingress exemption) */
	POL_F_VIP = 1 << 4,		/* a Service ClusterIP (judged after translation) */
	POL_F_PROXY = 1 << 5,		/* a node proxy's source address (ingress
					 * admits it: the proxy judged the request,
					 * docs/policy.md "L7 Services") */
	POL_F_MTLS = 1 << 6,		/* a local pod with a port under STRICT mutual
					 * TLS: plain text from other nodes is refused
					 * (rules {id, POL_ID_MTLS, ingress, TCP, port}) */
};

/* pol_rule_val.pol of a {local, POL_ID_MTLS, ingress, TCP, port} entry: the
 * /80 one is the pod's own mode, a /96 one a port's exception. */
enum pol_mtls_mode {
	POL_MTLS_STRICT = 1,
	POL_MTLS_PLAIN = 2,
};

/* Drop reasons: one enum, doubles as metric label (pol_drop_reason_name). */
enum pol_drop_reason {
	POL_DROP_NONE = 0,
	POL_DROP_INGRESS_DENIED,	/* new connection/flow not allowed by ingress policy */
	POL_DROP_EGRESS_DENIED,		/* ... by egress policy */
	POL_DROP_REVOKED,		/* established connection denied after a policy change */
	POL_DROP_MTLS_PLAINTEXT,	/* plain text from another node to a STRICT port */
	POL_DROP__MAX,
};

/* Verdicts cached per connection. */
enum pol_verdict {
	POL_V_NONE = 0,
	POL_V_ALLOW = 1,
	POL_V_DENY = 2,
};

/* Runtime settings, index 0 of pol_cfg. state = gen << 1 | slot, written by
 * one 4-byte store so a reader never sees a generation with the wrong slot. */
struct pol_cfg {
	pol_u32 state;		/* 0 = never synced: the datapath admits everything */
	pol_u32 pad;
};

struct pol_ipc_val {
	pol_u32 id;		/* identity (POL_ID_*) */
	pol_u32 flags;		/* enum pol_ipc_flags */
	pol_u32 pol[2];		/* per direction: id of the policy drops are charged to */
};

struct pol_cidr_key {
	pol_u32 prefixlen;	/* 0..32 */
	pol_u32 ip;		/* network order */
};

/* LPM key. data = local(4) peer(4) dir(1) proto(1) port(2) = 96 bits;
 * prefixlen POL_PLEN_ANY_PORT matches every port, POL_PLEN_ANY_PORT + k the
 * top k bits of port. Identities and port in network order. */
#define POL_PLEN_ANY_PORT	80
#define POL_PLEN_FULL		96
struct pol_rule_key {
	pol_u32 prefixlen;
	pol_u32 local;		/* local identity, network order */
	pol_u32 peer;		/* peer identity / class / POL_ID_ANY, network order */
	pol_u8 dir;		/* enum pol_dir */
	pol_u8 proto;		/* IPPROTO_TCP/UDP/SCTP */
	pol_u16 port;		/* destination port, network order */
};

/* IPv6 ipBlock prefix (LPM key: prefixlen 0..128, address network order). */
struct pol_cidr6_key {
	pol_u32 prefixlen;
	pol_u8 ip[16];
};

struct pol_rule_val {
	pol_u32 pol;		/* id of the (first) policy that allows */
	pol_u32 pad;
};

/* struct pol_sk.flags */
enum pol_sk_flags {
	/* The service load balancer redirected this socket's connect() to the
	 * node's L7 proxy (a zh_l7cap_sock entry for its cookie, destination =
	 * zh_l7cap_cfg[0], seen on its SYN; abi/l7cap.h). The client's egress
	 * policy is judged by the proxy per request against the real backend
	 * (docs/policy.md "L7 Services"), so the kernel admits this one tuple,
	 * both ways, across generations. */
	POL_SKF_L7CAP = 1 << 0,
};

/* Per-socket state (pol_sk). */
struct pol_sk {
	pol_u32 gen;		/* generation the verdict was taken under */
	pol_u8 verdict;		/* enum pol_verdict */
	pol_u8 orient;		/* enum pol_dir: who opened the connection */
	pol_u8 reason;		/* enum pol_drop_reason of a deny (REVOKED sticks) */
	pol_u8 flags;		/* enum pol_sk_flags */
	pol_u32 peer_ip;	/* network order: the tuple the verdict is for */
	pol_u16 lport;		/* network order */
	pol_u16 pport;		/* network order */
};

/* Flow table key, from the local pod's point of view. */
struct pol_ct_key {
	pol_u32 local_ip;
	pol_u32 peer_ip;
	pol_u16 lport;
	pol_u16 pport;
	pol_u8 proto;
	pol_u8 pad[3];
};

struct pol_ct_val {
	pol_u32 gen;
	pol_u8 verdict;		/* enum pol_verdict */
	pol_u8 orient;		/* enum pol_dir: who opened the flow */
	pol_u8 reason;		/* enum pol_drop_reason of a deny */
	pol_u8 pad;
};

/* Per-socket state of a native IPv6 connection (pol_sk6): pol_sk with the
 * whole peer address, in a map of its own so that an AF_INET6 socket that
 * talks IPv4 (v4-mapped, pol_sk) and then native IPv6 never has one
 * family's verdict read for the other's tuple. */
struct pol_sk6 {
	pol_u32 gen;
	pol_u8 verdict;		/* enum pol_verdict */
	pol_u8 orient;		/* enum pol_dir */
	pol_u8 reason;		/* enum pol_drop_reason */
	pol_u8 flags;		/* enum pol_sk_flags (was padding: same layout) */
	pol_u32 peer[4];	/* network order */
	pol_u16 lport;		/* network order */
	pol_u16 pport;
};

/* Flow table key for native IPv6 (pol_ct6), as struct pol_ct_key. */
struct pol_ct6_key {
	pol_u32 local[4];
	pol_u32 peer[4];
	pol_u16 lport;
	pol_u16 pport;
	pol_u8 proto;
	pol_u8 pad[3];
};

struct pol_pdrop_key {
	pol_u32 pol;		/* policy id */
	pol_u32 reason;		/* enum pol_drop_reason */
};

struct pol_name {
	char name[POL_NAME_MAX];
};

_Static_assert(sizeof(struct pol_cfg) == 8, "pol_cfg");
_Static_assert(sizeof(struct pol_ipc_val) == 16, "pol_ipc_val");
_Static_assert(sizeof(struct pol_cidr_key) == 8, "pol_cidr_key");
_Static_assert(sizeof(struct pol_rule_key) == 16, "pol_rule_key");
_Static_assert(sizeof(struct pol_rule_val) == 8, "pol_rule_val");
_Static_assert(sizeof(struct pol_sk) == 16, "pol_sk");
_Static_assert(sizeof(struct pol_ct_key) == 16, "pol_ct_key");
_Static_assert(sizeof(struct pol_ct_val) == 8, "pol_ct_val");
_Static_assert(sizeof(struct pol_pdrop_key) == 8, "pol_pdrop_key");
_Static_assert(sizeof(struct pol_cidr6_key) == 20, "pol_cidr6_key");
_Static_assert(sizeof(struct pol_sk6) == 28, "pol_sk6");
_Static_assert(sizeof(struct pol_ct6_key) == 40, "pol_ct6_key");

#endif
