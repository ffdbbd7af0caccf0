/* lab.h — the lab cluster: nodes and pods as namespaces on one machine
 * (prefix lab_). The lab plays kubelet, Deployment controller and CNI; the
 * agent, bench/demo code and tests use this header to find a node's or pod's
 * network namespace and cgroup and to step into them.
 *
 * Naming (see also paths.h), for lab LAB, node NODE, pod NS/POD:
 *   network namespaces   LAB-fabric, LAB-NODE, LAB-p-NS-POD   (/run/netns/...)
 *   UTS / mount ns       RUNDIR/ns/NS_POD.uts, RUNDIR/ns/NS_POD.mnt (bind mounts)
 *   cgroups              CGROOT/zerohop-LAB/NODE            node (agent attaches here)
 *                        CGROOT/zerohop-LAB/NODE/NS_POD     one per pod
 *                        CGROOT/zerohop-LAB/system/...      supervisor and agents
 *   run dir              RUNDIR = /run/zerohop/LAB: lab.conf (topology),
 *                        supervisor.pid, ready, pods/NS_POD/{info,log,...},
 *                        nodes/NODE/agent.log
 * CGROOT is an existing cgroup2 mount, else /run/zerohop/cgroup2 (mounted on
 * first use).
 *
 * Addresses: node i (0-based, in Cluster order) has fabric IP 10.250.0.(i+1)/24
 * on its eth0 and pod CIDR = i-th /24 of the cluster pod CIDR; a pod has a /32
 * on eth0 and a default route via 169.254.1.1 (LAB_GW), a permanent neighbour
 * for it with MAC ee:ee:ee:ee:ee:ee (every node-side pod veth has that MAC).
 * Dual-stack (a Cluster with an IPv6 pod CIDR, docs/ipv6.md): node i also
 * has fabric IP LAB_FABRIC_NET6 + (i+1) /64 and the i-th /64 of the IPv6
 * pod CIDR; a pod's IPv6 is that /64 + the host byte of its IPv4 (a /128),
 * default route via LAB_GW6 with the same permanent neighbour MAC.
 *
 * Results are 0 or -errno; messages go to stderr (or the daemon log) and name
 * the object at fault.
 */
#ifndef ZH_LAB_H
#define ZH_LAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#define LAB_MAX_NODES 64
#define LAB_FABRIC_NET "10.250.0.0"	/* /24; node i = .(i+1) */
#define LAB_GW "169.254.1.1"		/* pods' default gateway (link-local) */
#define LAB_GW_MAC "ee:ee:ee:ee:ee:ee"	/* MAC of every node-side pod veth */
#define LAB_FABRIC_NET6 "fd7a:fab::"	/* /64; node i = ::(i+1) (dual-stack) */
#define LAB_GW6 "fe80::1"		/* pods' IPv6 default gateway (link-local) */
#define LAB_VXLAN_ID 42
#define LAB_VXLAN_PORT 4789

/* ---- paths and names (write into buf, return buf) ---------------------- */

/* The cgroup2 mount to use: an existing cgroup2 mount, else ZH_RUN_ROOT
 * "/cgroup2", mounted here when mount=true (else NULL when none is mounted). */
const char *lab_cgroup_root(bool mount);

char *lab_lab_cgroup_path(char *buf, size_t len, const char *lab);
char *lab_node_cgroup_path(char *buf, size_t len, const char *lab, const char *node);
char *lab_pod_cgroup_path(char *buf, size_t len, const char *lab, const char *node,
			  const char *ns, const char *pod);
char *lab_node_netns_name(char *buf, size_t len, const char *lab, const char *node);
char *lab_fabric_netns_name(char *buf, size_t len, const char *lab);
char *lab_pod_netns_name(char *buf, size_t len, const char *lab, const char *ns,
			 const char *pod);
/* /run/netns/NAME of the above. */
char *lab_node_netns_path(char *buf, size_t len, const char *lab, const char *node);
char *lab_pod_netns_path(char *buf, size_t len, const char *lab, const char *ns,
			 const char *pod);
/* RUNDIR/pods/NS_POD */
char *lab_pod_dir(char *buf, size_t len, const char *lab, const char *ns, const char *pod);

/* ---- topology (RUNDIR/lab.conf, written by `lab up`) ------------------- */

struct lab_node {
	char name[64];
	uint32_t ip;		/* fabric IP, network order */
	uint32_t pod_net;	/* pod CIDR (/24), network order */
	int pod_len;
	struct in6_addr ip6;	/* fabric IPv6 (dual-stack only) */
	struct in6_addr pod_net6;	/* IPv6 pod CIDR (/64) (dual-stack only) */
};

struct lab_topo {
	char lab[64];
	int n_nodes;
	struct lab_node nodes[LAB_MAX_NODES];
	uint32_t pod_cidr;	/* cluster pod CIDR, network order */
	int pod_cidr_len;
	uint32_t svc_cidr;	/* service CIDR, network order */
	int svc_cidr_len;
	struct in6_addr pod_cidr6;	/* IPv6 pod CIDR; len 0 = IPv4-only lab */
	int pod_cidr6_len;
	/* An IPv6-only lab (a Cluster with IPv6 CIDRs only, docs/ipv6.md):
	 * pods get no IPv4 address (pod_cidr and each pod's ip still number
	 * them inside the lab: the IPv6 is derived from that host part, the
	 * veth and MAC are named after it), the cluster DNS is reached at
	 * svc_cidr6 + 10. Nodes keep their IPv4 fabric: the lab's own
	 * underlay, which no pod or Service address is taken from. */
	bool v6only;
	struct in6_addr svc_cidr6;	/* v6only: the IPv6 service CIDR */
	int svc_cidr6_len;
	bool overlay;		/* VXLAN between nodes */
	bool mesh;		/* agents + cluster DNS */
	int accel;		/* -1 agent default, 0 off, 1 on */
	bool nft;		/* --service-proxy nft: agents run --mode nft */
	bool sidecar;		/* --mesh sidecar: HAProxy per pod (sidecar.h); implies nft */
	char zerohop[512];	/* absolute path of the zerohop binary */
	/* The two below reach the supervisor in memory (it is forked by
	 * `lab up`); they are not in lab.conf. */
	int drain_ms;		/* --drain-delay: unpublished pod keeps running this long */
	char accel_skip_ports[1024];	/* --accel-skip-ports, passed to every agent; "" none */
	bool podman;		/* --runtime podman: pods are podman containers
				 * (lab_podman.c, docs/cni.md); in memory only */
	bool keep_going;	/* --keep-going: a node daemon that cannot start leaves
				 * the lab up, degraded, instead of failing `lab up` */
};

/* Pod termination (docs/lab.md "Pod termination"): a removed pod is
 * unpublished, stays up until every agent applied that and the drain delay
 * passed, then gets SIGTERM. Per pod: this annotation (a duration such as
 * "500ms", "2s", or "0") overrides the lab's --drain-delay. */
#define LAB_DRAIN_DEFAULT_MS 1000
#define LAB_DRAIN_MAX_MS 60000
#define LAB_DRAIN_ANNOTATION "zerohop.io/drain-delay"
/* Parse a drain delay: "0" or a duration (md_duration_ms) up to
 * LAB_DRAIN_MAX_MS. 0 or -EINVAL. */
int lab_parse_drain(const char *s, int *ms);

int lab_topo_write(const struct lab_topo *t);	/* RUNDIR/lab.conf, atomic */
int lab_topo_read(const char *lab, struct lab_topo *t);	/* -ENOENT when the lab is not up */
const struct lab_node *lab_topo_node(const struct lab_topo *t, const char *name);
/* A pod's IPv6 on node n of a dual-stack lab: n's /64 + the host part of
 * its IPv4 ip (its bits outside n's pod CIDR) in the low 32 bits, as
 * zerohop-cni derives it from podCIDR6. */
void lab_pod_ip6(const struct lab_node *n, uint32_t ip, struct in6_addr *out);
/* DNS server address of the cluster: service CIDR base + 10, network order. */
uint32_t lab_dns_ip(const struct lab_topo *t);
/* The cluster DNS address as text (INET6_ADDRSTRLEN buf): the IPv6 service
 * CIDR base + 10 on an IPv6-only lab, else lab_dns_ip(). */
const char *lab_dns_str(const struct lab_topo *t, char *buf);
/* A pod's primary address as text (INET6_ADDRSTRLEN buf): its IPv6 on an
 * IPv6-only lab (n is its node), else its IPv4 ip. */
const char *lab_pod_addr_str(const struct lab_topo *t, const struct lab_node *n, uint32_t ip,
			     char *buf);

/* ---- pods as the supervisor records them (RUNDIR/pods/NS_POD/info) ----- */

struct lab_pod_info {
	char ns[64];
	char name[128];
	char node[64];
	char owner[128];	/* Deployment name, or "" */
	uint32_t ip;		/* network order */
	struct in6_addr ip6;	/* all zero on an IPv4-only lab */
	char phase[16];		/* Pending, Running, Terminating */
	int pid;		/* pid of the first container's process, 0 when down */
	int restarts;
};

/* Find a pod of a running lab: "[NS/]NAME" or "deploy/NAME" (any Running pod
 * of that Deployment in NS default, or "deploy/NS/NAME"). 0, -ENOENT. */
int lab_pod_find(const char *lab, const char *ref, struct lab_pod_info *out);
/* Every pod of the lab, sorted by namespace/name; *out freed by the caller. */
int lab_pod_list(const char *lab, struct lab_pod_info **out, int *n);

/* ---- node daemons as the supervisor records them (RUNDIR/nodes/NODE/info) */

struct lab_daemon_info {
	int pid;		/* 0 when not running */
	int restarts;
	char state[24];		/* None, Starting, Running, CrashLoopBackOff, Waiting */
	char log[256];		/* its log file, "" when there is none */
	char error[256];	/* its last error line, "" when none */
};

struct lab_node_daemons {
	struct lab_daemon_info agent, proxy;
};

/* Read NODE's daemons; a node never written yet reads as all zero, with
 * state "Unknown". 0, or -errno of reading the file. */
int lab_node_daemons_read(const char *lab, const char *node, struct lab_node_daemons *out);

/* ---- stepping into namespaces ----------------------------------------- */

/* Move the calling process into the pod's cgroup and its network, UTS and
 * mount namespaces (in that order). The caller must be single-threaded. */
int lab_join_pod(const char *lab, const struct lab_pod_info *pod);
/* Move the calling process into a node's network namespace. */
int lab_join_node(const char *lab, const char *node);
/* setns() into the network namespace file at path. */
int lab_join_netns_path(const char *path);

/* ---- the CLI ----------------------------------------------------------- */

/* `zerohop lab up|down|status|exec`; see docs/lab.md. */
int lab_down(const char *lab, bool verbose);

#endif
