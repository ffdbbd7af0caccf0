/* policy.h — Kubernetes NetworkPolicy: compiler and datapath loader (prefix pol_).
 *
 * Stages (each with its own tests):
 *   md_state --pol_compile()--> struct pol_compiled     pure: no BPF, no I/O
 *   struct pol_compiled --pol_eval()-->  verdict        user-space evaluation of
 *                                                        the compiled maps (tests)
 *   md_state --pol_sync()--> pinned maps                make-before-break
 *
 * What the compiler produces (map layouts: include/zerohop/abi/policy.h):
 * - identities: one number per distinct (namespace, pod label set, named
 *   container ports) of the cluster. Named ports are part of the identity so
 *   that a named port resolves to one number per (identity, protocol).
 * - ipcache: pod IP -> {identity, flags (local, isolated per direction)}, for
 *   every pod of the cluster that has an IP.
 * - cidr classes: every distinct prefix named by an ipBlock cidr or except
 *   (plus the /32 of pods that an ipBlock+named-port rule can reach) gets a
 *   class number; the longest-prefix match of an address decides its
 *   membership in every ipBlock (see docs/policy.md).
 * - rules: LPM entries {local identity, peer identity or class or ANY,
 *   direction, protocol, port prefix}; port ranges become at most 2*16
 *   prefixes, named ports are resolved per destination identity.
 * - a generation number, bumped by every successful pol_sync().
 *
 * Ownership: pol_compile() returns a struct pol_compiled the caller frees with
 * pol_compiled_free(); it copies every string it keeps, so the md_state may
 * be freed first. struct pol is owned by its opener (pol_close()).
 */
#ifndef ZH_POLICY_H
#define ZH_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "zerohop/abi/policy.h"
#include "zerohop/model.h"

/* ---- compiler (pure) -------------------------------------------------- */

/* Map limits. pol_compile() fails with -E2BIG and a message naming the limit
 * when the compiled state would not fit; nothing is loaded then. */
struct pol_limits {
	uint32_t ipcache;	/* pod IPs */
	uint32_t cidrs;		/* ipBlock prefixes (classes) */
	uint32_t rules;		/* LPM rule entries */
	uint32_t policies;	/* NetworkPolicy objects */
};
/* The limits the datapath is built with (POL_MAX_* in abi/policy.h). */
extern const struct pol_limits pol_default_limits;

struct pol_identity {
	uint32_t id;		/* >= POL_ID_FIRST_POD */
	char *ns;		/* owned */
	int first_pod;		/* index into md_state.pods of one member (debug) */
	int n_pods;
};

struct pol_ipc {		/* one ipcache entry */
	uint32_t ip;		/* network order */
	struct pol_ipc_val val;
};

struct pol_cidr {		/* one cidr class */
	uint32_t net;		/* network order */
	uint8_t len;
	uint32_t class_id;	/* >= POL_ID_FIRST_CIDR */
};

struct pol_ipc6 {		/* one IPv6 ipcache entry */
	uint8_t ip[16];		/* network order */
	struct pol_ipc_val val;
};

struct pol_cidr6 {		/* one IPv6 cidr class */
	uint8_t net[16];	/* network order */
	uint8_t len;
	uint32_t class_id;	/* >= POL_ID_FIRST_CIDR, after the IPv4 classes */
};

struct pol_rule {		/* one LPM rule entry */
	struct pol_rule_key key;	/* prefixlen + data, as in the map */
	struct pol_rule_val val;
};

struct pol_compiled {
	struct pol_identity *ids;	/* sorted by id */
	int n_ids;
	struct pol_ipc *ipc;		/* sorted by ip */
	int n_ipc;
	struct pol_cidr *cidrs;		/* sorted by (len, net) */
	int n_cidrs;
	struct pol_rule *rules;		/* sorted by key bytes, unique */
	int n_rules;
	char **policy_names;		/* "ns/name", index = policy index */
	uint32_t *policy_ids;		/* stable id (hash of "ns/name"), same index */
	int n_policies;
	int n_local_pods;		/* pods of `node` with an IP */
	/* IPv6 twins (docs/ipv6.md "NetworkPolicy"): a pod's IPv6 has its
	 * IPv4's value; IPv6 ipBlock prefixes are classes of their own */
	struct pol_ipc6 *ipc6;		/* sorted by ip (bytes) */
	int n_ipc6;
	struct pol_cidr6 *cidrs6;	/* sorted by (len, net) */
	int n_cidrs6;
};

/* State -> map contents for node (NULL: every pod counts as local, used by
 * tests and by `zerohop validate`). The state must be finished
 * (md_state_finish). Returns 0, or -E2BIG (a limit, message in err), or
 * -EINVAL (message in err). lim NULL means pol_default_limits. */
int pol_compile(const struct md_state *st, const char *node, const struct pol_limits *lim,
		struct pol_compiled **out, struct md_err *err);
void pol_compiled_free(struct pol_compiled *c);

/* The upstream source address of node i's L7 proxy (network order), i being
 * the node's index in cl->nodes: the first host address (.1) of the node's
 * pod range, the i-th /24 of the cluster pod CIDR (the lab's address plan,
 * docs/lab.md; its pod allocator never hands out .1). Every node's ipcache
 * maps it to POL_ID_PROXY, which ingress admits (docs/policy.md "L7
 * Services"). 0 when the plan has no such address (pod CIDR longer than /24
 * or i beyond it). */
uint32_t pol_node_proxy_ip(const struct md_cluster *cl, int i);
/* The same for IPv6: ::1 of node i's /64 of the IPv6 pod CIDR (the lab's
 * plan: node i's /64 is the CIDR with i added to its 8th byte, a pod's
 * IPv6 carries its IPv4 host part, so this is the IPv6 of .1). false when
 * the cluster has no IPv6 pod CIDR of /56 or shorter, or i is beyond it. */
bool pol_node_proxy_ip6(const struct md_cluster *cl, int i, struct in6_addr *out);

/* Verdict for one new connection (or UDP flow) src -> dst:dport/proto as the
 * compiled maps decide it, with the same algorithm as the BPF slow path:
 * egress of src when src is a local pod, AND ingress of dst when dst is a
 * local pod. *reason gets POL_DROP_* (POL_DROP_NONE when allowed) and
 * *pol_id the stable id of the policy a drop is charged to (0 if none).
 * Returns true when allowed. */
bool pol_eval(const struct pol_compiled *c, uint32_t src_ip, uint32_t dst_ip,
	      uint16_t dport, enum md_proto proto, uint32_t *reason, uint32_t *pol_id);

/* One direction only (used by pol_eval and the tests): may the local pod at
 * local_ip talk to peer_ip in direction dir (POL_DIR_*), port being the
 * destination port of the connection? */
bool pol_eval_dir(const struct pol_compiled *c, int dir, uint32_t local_ip, uint32_t peer_ip,
		  uint16_t port, enum md_proto proto);

/* The same two for native IPv6 addresses (16 bytes, network order): the
 * IPv6 ipcache and cidr classes, the same identities and rules. */
bool pol_eval6(const struct pol_compiled *c, const uint8_t src[16], const uint8_t dst[16],
	       uint16_t dport, enum md_proto proto, uint32_t *reason, uint32_t *pol_id);
bool pol_eval_dir6(const struct pol_compiled *c, int dir, const uint8_t local[16],
		   const uint8_t peer[16], uint16_t port, enum md_proto proto);

/* Human-readable dump of the compiled state (identities, ipcache, classes,
 * rules) for `zerohop get policy-maps` and debugging. */
void pol_compiled_dump(const struct pol_compiled *c, FILE *f);

/* ---- datapath (BPF) -------------------------------------------------- */

struct pol;	/* opaque: fds of the loaded or adopted objects */

/* Load, or adopt when already pinned under pin_dir, the policy programs and
 * maps, and attach them (pinned bpf_links) to cgroup_path: cgroup_skb ingress
 * and egress (enforcement + connection fast path) and cgroup/connect4 and
 * connect6 (a TCP connect the pod's egress policy denies fails at once with
 * EPERM, also from an AF_INET6 socket to a v4-mapped address; a denied UDP
 * send gets EPERM from cgroup_skb). Attach the policy AFTER the
 * service load balancer so its connect4 sees the chosen backend (a Service
 * VIP seen there is left to cgroup_skb). Pod cgroups are looked up as
 * CGROUP_PATH/NS_POD (lab.h layout) to know who connects.
 * Until the first pol_sync() the datapath admits everything.
 * Returns 0 and *out, or -errno with a message logged naming the object. */
int pol_open(const char *cgroup_path, const char *pin_dir, struct pol **out);

/* Compile st for node and load it make-before-break: new tables are built in
 * the inactive slot, then one write flips slot and generation. All or
 * nothing: on any error (limit, invalid state, kernel refusal) err says why,
 * the previous state stays in force, and -errno is returned. Established
 * connections whose verdict changes are re-evaluated on their next packet
 * (revocation, see docs/policy.md). */
int pol_sync(struct pol *p, const struct md_state *st, const char *node, struct md_err *err);

/* Tests only: lower the limits pol_sync compiles against (NULL: defaults),
 * to exercise the "limit exceeded, previous state stays" path cheaply. */
void pol_set_limits(struct pol *p, const struct pol_limits *lim);

/* Pin names of the policy's bpf_links under the pin dir, indexed ingress
 * (POL_DIR_INGRESS), egress (POL_DIR_EGRESS), connect4, sockops, connect6
 * (AF_INET6 sockets to v4-mapped addresses). The first
 * two are pinned only while a pod of the node is isolated (pol_load.c
 * invariant 6); the others whenever the datapath is attached. */
#define POL_N_LINKS 5
extern const char *const pol_link_names[POL_N_LINKS];

/* Tests only: fd of the ingress (POL_DIR_INGRESS) or egress program, for
 * BPF_PROG_TEST_RUN. Owned by p. */
int pol_prog_fd(const struct pol *p, int dir);

/* Generation now in force (0 before the first sync). The agent passes it to
 * ag_accel_set_policy_gen() after each pol_sync(). */
uint32_t pol_generation(const struct pol *p);

/* Drop counters, read from the pins of a running node (no struct pol needed).
 * by_reason[r] is summed over CPUs. by_policy lists the policies that have
 * drops charged to them. Caller frees with pol_drops_free(). 0 / -ENOENT
 * (nothing pinned) / -errno. */
struct pol_drop_row {
	char name[POL_NAME_MAX];	/* "ns/name", or "#<id>" if unknown */
	uint32_t reason;		/* POL_DROP_* */
	uint64_t packets;
};
struct pol_drops {
	uint64_t by_reason[POL_DROP__MAX];
	struct pol_drop_row *by_policy;
	int n_by_policy;
	uint32_t generation;
};
int pol_read_drops(const char *pin_dir, struct pol_drops *out);
void pol_drops_free(struct pol_drops *d);
/* Text table for `zerohop get policy-drops`. */
void pol_drops_print(const struct pol_drops *d, FILE *f);

/* Name of a drop reason (metric label, e.g. "ingress_denied"). */
const char *pol_drop_reason_name(uint32_t reason);

/* unpin=0: close fds only, programs stay attached and maps pinned (agent
 * restart). unpin=1: detach and remove every pin. p may be NULL. */
void pol_close(struct pol *p, int unpin);

#endif
