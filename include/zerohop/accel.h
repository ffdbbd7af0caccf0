/* accel.h — same-node socket short-circuit: sock_ops + sk_msg (prefix ag_accel_).
 *
 * Two sockets whose both ends are on this node (pod <-> pod, or loopback inside
 * one pod) skip the TCP/IP stack: a sock_ops program on the node's cgroup puts
 * every such established TCP socket in a sockhash (IPv4, including v4-mapped
 * ends of an AF_INET6 socket, or native IPv6: one sockhash each), and an sk_msg program
 * moves each sendmsg() straight into the peer socket's receive queue. Anything
 * else takes the normal path untouched. Design and invariants: bpf/accel.bpf.c;
 * user-facing behaviour: docs/accel.md.
 *
 * Programs attach to the node's cgroup, and to the node L7 proxy's own
 * cgroup when given (ag_accel_attach_proxy); never to a cgroup root.
 * Pinned objects (all under pin_dir, e.g. /sys/fs/bpf/zerohop/LAB/NODE/):
 *	accel_sockops_link	bpf_link of the sock_ops program on the node cgroup
 *	accel_setsockopt_link	bpf_link of the cgroup/setsockopt program (SO_RCVLOWAT)
 *	accel_sockops_proxy_link, accel_setsockopt_proxy_link
 *				the same two on the node L7 proxy's cgroup
 *				(ag_accel_attach_proxy), when given
 *	accel_sockops		sock_ops program
 *	accel_setsockopt	cgroup/setsockopt program
 *	accel_fin		cgroup_skb ingress program (holds a FIN, inv. 11)
 *	accel_msg		sk_msg program (attached to both sockhashes)
 *	accel_sockhash		the sockhash of short-circuited IPv4 sockets
 *	accel_sockhash6		the same for native IPv6 sockets
 *	accel_local		local endpoints (this node's pod IPv4s)
 *	accel_local6		the same, this node's pod IPv6s
 *	accel_skip		ports never short-circuited (ag_accel_set_skip_ports)
 *	accel_proxy		the node proxy's endpoints (ag_accel_set_proxy)
 *	accel_proxy6		its IPv6 endpoints (ag_accel_set_proxy6)
 *	accel_stats		per-CPU counters (struct zh_accel_stats_v in abi/accel.h)
 *	accel_cfg		runtime settings (enum zh_accel_cfg), e.g. policy generation
 * Ownership: the pins own the datapath; struct ag_accel only holds fds.
 */
#ifndef ZH_ACCEL_H
#define ZH_ACCEL_H

#include <stdint.h>

struct ag_accel;	/* opaque: fds of the loaded or adopted objects */

/* Node-wide counters, summed over CPUs. */
struct ag_accel_stats {
	uint64_t sockets;	/* sockets ever inserted in the sockhash */
	uint64_t active;	/* sockets in the sockhash now */
	uint64_t msgs;		/* messages redirected to the peer socket */
	uint64_t bytes;		/* bytes redirected */
	uint64_t fallbacks;	/* messages that took the normal path (no peer, or socket pinned to it) */
	uint64_t removed;	/* sockets removed from the sockhash on close */
	uint64_t skipped;	/* established sockets not inserted although both ends local (e.g. map full) */
	uint64_t demoted;	/* sockets moved to the normal path by a policy generation change */
	uint64_t released;	/* sockets taken out early, queue empty (half-close, SO_RCVLOWAT) */
	uint64_t proxy;		/* of sockets: inserted as a node proxy leg (pod <-> proxy) */
	uint64_t fin_held;	/* FINs (or ACKs of ours) held back until a half-closed reader drained its queue */
	uint64_t backpressure;	/* a sender moved to TCP: its peer's short-circuit queue was too deep */
	uint64_t bp_resumed;	/* such a sender back on the short-circuit (the reader caught up) */
};

struct zh_accel_proxy_ep;	/* abi/accel.h */

/* Load, or adopt when already pinned, the programs and maps under pin_dir
 * (created when missing). enable=1: attach sock_ops to cgroup_path through a
 * pinned bpf_link and the sk_msg program to the sockhash (both idempotent;
 * an adopted attachment is kept, never doubled; a link found on another
 * cgroup is replaced). enable=0: remove the sock_ops link so no new socket is
 * short-circuited, and demote the sockets already short-circuited to the
 * normal path (accel_cfg DISABLED) — maps stay pinned so no queued byte is
 * dropped and stats stay readable; ag_accel_close(a, 1) removes them. With
 * nothing pinned, enable=0 loads nothing: the handle's setters are no-ops
 * returning 0 and its stats are all zero.
 * cgroup_path may be NULL when enable=0.
 * Returns 0 and *out (caller frees with ag_accel_close), or -errno with a
 * message logged that names the failing object. */
int ag_accel_open(const char *cgroup_path, const char *pin_dir, int enable,
		  struct ag_accel **out);

/* Replace the local endpoint set with ips[0..n) (IPv4, network byte order):
 * this node's pod addresses. Entries not in ips are removed after the new ones
 * are added (make-before-break). Sockets already established keep their state.
 * Returns 0 or -errno (-E2BIG if n exceeds the map size). */
int ag_accel_set_local(struct ag_accel *a, const uint32_t *ips, int n);

/* The same for this node's pod IPv6 addresses (accel_local6): native IPv6
 * connections between two of them, or over ::1, are short-circuited too. */
struct in6_addr;
int ag_accel_set_local6(struct ag_accel *a, const struct in6_addr *ips, int n);

/* Replace the set of ports (host order) never short-circuited, on either end
 * of a connection: the opt-out for applications that read with splice(2),
 * which the kernel does not serve from the short-circuit queue. Applies to
 * connections established afterwards. 0 / -errno (-E2BIG above 256). */
int ag_accel_set_skip_ports(struct ag_accel *a, const uint16_t *ports, int n);

/* The node L7 proxy (docs/accel.md "Node proxy legs"): also attach the
 * sock_ops and setsockopt programs to the proxy's own cgroup, a non-root
 * cgroup2 directory that is neither the node cgroup given to ag_accel_open
 * nor one of its ancestors (-EPERM). Idempotent like the node links (a link
 * on another cgroup is replaced). NULL or "" detaches the proxy links. A
 * handle opened with enable=0 has no node link: nothing is attached.
 * 0 / -errno (the proxy links are then removed). */
int ag_accel_attach_proxy(struct ag_accel *a, const char *cgroup_path);

/* Replace the set of node proxy endpoints: a connection between a local pod
 * and one of them is short-circuited (port 0: any port of that address).
 * The agent lists the capture listener (zh_l7cap_cfg[0]) and the proxy's
 * upstream source address. 0 / -errno (-E2BIG above ZH_ACCEL_MAX_PROXY). */
int ag_accel_set_proxy(struct ag_accel *a, const struct zh_accel_proxy_ep *eps, int n);

/* The same for the proxy's IPv6 endpoints (accel_proxy6): its IPv6 capture
 * listener, so a native IPv6 client's leg to it is short-circuited too. */
struct zh_accel_proxy_ep6;	/* abi/accel.h */
int ag_accel_set_proxy6(struct ag_accel *a, const struct zh_accel_proxy_ep6 *eps, int n);

/* Counters summed over CPUs; active is the current sockhash size. 0 / -errno. */
int ag_accel_stats(struct ag_accel *a, struct ag_accel_stats *out);

/* Same, from a fresh process that only knows the pin dir (`zerohop get stats`).
 * -ENOENT when acceleration is not pinned there. */
int ag_accel_read_pinned_stats(const char *pin_dir, struct ag_accel_stats *out);

/* Policy hook: set the node's policy generation. Each short-circuited socket
 * records the generation current when it was inserted; when the generation
 * moves past it, sk_msg sends its messages through the normal path (where the
 * policy datapath judges them) instead of redirecting. 0 / -errno. */
int ag_accel_set_policy_gen(struct ag_accel *a, uint32_t gen);

/* unpin=0: close fds only, everything stays pinned and running (an agent
 * restart keeps short-circuited connections working). unpin=1: detach and
 * remove all pins (agent --cleanup). a may be NULL. */
void ag_accel_close(struct ag_accel *a, int unpin);

#endif
