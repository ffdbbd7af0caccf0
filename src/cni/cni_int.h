/* cni_int.h — what the CNI plugin's files share (src/cni). The protocol is
 * in cni.c, addresses and attachment records in cni_ipam.c, the veth and
 * routes in cni_net.c, the published pod in cni_pod.c. */
#ifndef ZH_CNI_INT_H
#define ZH_CNI_INT_H

#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "zerohop/cni.h"
#include "zerohop/jsonv.h"

/* One failure, as the error JSON will carry it. */
struct cni_err {
	int code;		/* enum cni_code */
	char msg[256];
	char details[1024];
};

int cni_fail(struct cni_err *e, int code, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* One invocation: the environment and the parsed configuration. */
struct cni_req {
	const char *cmd, *id, *netns, *ifname, *args;
	struct jv *conf;	/* owned */
	const char *version;	/* cniVersion of the config */
	const char *name;	/* network name */
	const char *node, *state_dir, *labels_dir;
	char data_dir[PATH_MAX];
	uint32_t net;		/* podCIDR, network order */
	int plen;
	struct in6_addr net6;	/* podCIDR6 (dual-stack); plen6 0: IPv4 only */
	int plen6;
	bool v6only;		/* "ipv6Only": the pod gets its IPv6 alone; podCIDR
				 * stays the index space its IPv6 is derived
				 * from, never configured (docs/cni.md) */
	uint32_t range_lo, range_hi;	/* rangeStart, rangeEnd (network order; 0: podCIDR's) */
	int mtu;		/* 0: kernel default */
	uint32_t want_ip;	/* runtimeConfig.ips[0] (network order; 0: none) */
	bool publish;		/* "publish" (default true): write the pod to stateDir */
	char pod_ns[64];	/* K8S_POD_NAMESPACE, else "default" */
	char pod_name[254];	/* K8S_POD_NAME, else the container id */
	bool k8s_names;		/* the two above came from CNI_ARGS */
	char veth[16];		/* host end: CNI_HOST_VETH_PREFIX + hash */
};

/* An attachment record: DATADIR/att/ID:IFNAME ("key value" lines). */
struct cni_rec {
	char id[256], ifname[16], veth[16], netns[PATH_MAX];
	char ns[64], name[254];
	uint32_t ip;		/* network order; 0: none yet */
	bool ready;		/* ADD finished (else "adding": a crash or failure mid-way) */
	bool published;		/* the pod was written to the state source */
	bool chained;		/* after another plugin: its interface, only published */
};

/* The pod's IPv6 on a dual-stack network: podCIDR6 with the IPv4's host
 * part (its bits outside podCIDR) in the low 32 bits, so it needs no
 * allocation or record of its own (the lab's rule too, lab_pod_ip6). */
void cni_ip6_of(const struct cni_req *r, uint32_t ip, struct in6_addr *out);

/* The whole of fd, NUL-terminated (zh_malloc); NULL on a read error. */
char *cni_read_all(int fd, size_t *len);

/* ---- cni_ipam.c: records under DATADIR, all under one flock ---------- */
int cni_lock(const struct cni_req *r, int *fd, struct cni_err *e);	/* fd to close */
int cni_rec_load(const struct cni_req *r, const char *id, const char *ifname,
		 struct cni_rec *out);	/* 0, -ENOENT */
int cni_rec_save(const struct cni_req *r, const struct cni_rec *rec);
void cni_rec_remove(const struct cni_req *r, const char *id, const char *ifname);
/* The first free address after the last one handed out (next-fit, as the
 * lab, invariant 4 of lab_sup.c), written as DATADIR/ips/A.B.C.D. */
int cni_ip_alloc(const struct cni_req *r, const char *id, const char *ifname, uint32_t *ip,
		 struct cni_err *e);
/* Take the runtime's requested address (runtimeConfig.ips); 0 also when
 * (id, ifname) holds it already. */
int cni_ip_claim(const struct cni_req *r, const char *id, const char *ifname, uint32_t ip,
		 struct cni_err *e);
/* Free every address held by (id, ifname); 0 or the number freed. */
int cni_ip_release(const struct cni_req *r, const char *id, const char *ifname);
bool cni_ip_held(const struct cni_req *r, uint32_t ip, const char *id, const char *ifname);
/* Call fn for every attachment record (GC). */
int cni_rec_each(const struct cni_req *r, int (*fn)(void *arg, const char *id, const char *ifname),
		 void *arg);

/* ---- cni_net.c: the veth, addresses and routes ---------------------- */
void cni_veth_name(const char *id, const char *ifname, char out[16]);
int cni_net_add(const struct cni_req *r, uint32_t ip, struct cni_err *e);	/* + IPv6 if plen6 */
void cni_net_del(const char *veth);	/* idempotent: a missing veth is fine */
/* What CHECK finds wrong, as a human-readable list into buf ("" = none). */
void cni_net_check(const struct cni_req *r, const struct cni_rec *rec, char *buf, size_t len);
void cni_pod_mac(uint32_t ip, char out[18]);

/* ---- cni_pod.c: the pod in the state source ------------------------- */
int cni_pod_publish(const struct cni_req *r, uint32_t ip, struct cni_err *e);
/* Remove pod ns/name when it still names container id (0 also when absent). */
int cni_pod_unpublish(const char *state_dir, const char *ns, const char *name, const char *id);
/* Is the record's pod published with this container id and its address
 * (cni_pod_ip: the IPv6 on an ipv6Only network, else the IPv4)? */
bool cni_pod_matches(const struct cni_req *r, const struct cni_rec *rec);
/* The address a pod of index ip is known by: podIP, the result's ips[0]. */
const char *cni_pod_ip(const struct cni_req *r, uint32_t ip, char out[INET6_ADDRSTRLEN]);

#endif
