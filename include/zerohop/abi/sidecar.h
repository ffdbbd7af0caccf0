/* abi/sidecar.h — the contract between bpf/sidecar.bpf.c (the Merbridge /
 * ASM capture of `lab up --mesh sidecar --accel on`) and the lab's
 * supervisor that loads it (src/lab/lab_sidecar_bpf.c). Byte order: ips and
 * ports in network order unless a field says otherwise.
 *
 * Flow (docs/sidecar-baseline.md "--mesh sidecar --accel on"):
 *   1. connect4, app in a pod with a sidecar (its cgroup is in sc_cgpods,
 *      its uid and gid are not ZH_SC_UID), to anything but loopback and its
 *      own pod IP: the destination becomes 127.0.0.1:ZH_SC_OUTBOUND_PORT and
 *      the original one is kept on the socket (sc_sk).
 *   2. connect4, the sidecar itself (uid or gid ZH_SC_UID), to a pod of the
 *      same node that has a sidecar (sc_pods: its node), on a port that is
 *      not the sidecar's own: the port becomes ZH_SC_INBOUND_PORT of that
 *      pod, the original kept the same way. Pods of other nodes keep the
 *      plain path (istio-init's REDIRECT there): their node could not
 *      answer step 4 (one instance of the maps per node in a real cluster;
 *      the lab shares one set between its nodes and keys it by node).
 *   3. sock_ops ACTIVE_ESTABLISHED of such a socket: the original
 *      destination goes to sc_orig under the connection as its *server*
 *      sees it (struct zh_sc_conn), before the server can accept().
 *   4. getsockopt(SOL_IP, SO_ORIGINAL_DST) by the accepting sidecar: answered
 *      from sc_orig (HAProxy asks for it to route); with no entry the
 *      kernel's own answer (conntrack, istio-init's REDIRECT) stands.
 *   5. getpeername4 of a rewritten socket: the original destination, as
 *      under NAT (the app never sees 127.0.0.1:15001).
 * Every leg then has the same 4-tuple at both ends, so accel.bpf.c pairs
 * all three (app <-> own sidecar, sidecar <-> peer sidecar, sidecar <->
 * app), where istio-init's REDIRECT leaves only the last one pairable.
 */
#ifndef ZH_ABI_SIDECAR_H
#define ZH_ABI_SIDECAR_H

#include <linux/types.h>

#define ZH_SC_UID		1337	/* Istio's istio-proxy uid and gid */
#define ZH_SC_OUTBOUND_PORT	15001
#define ZH_SC_INBOUND_PORT	15006
#define ZH_SC_MAX		65536	/* sc_orig entries (LRU) */
#define ZH_SC_MAX_PODS		4096

/* sc_cgpods value: the pod a cgroup belongs to */
struct zh_sc_pod {
	__be32 ip4;
	__u32 node;		/* the lab's node index */
};

struct zh_sc_addr {
	__be32 ip4;
	__be16 port;
	__u16 pad;
};

/* A connection as its accepting side sees it; netns is the netns cookie
 * when either end is loopback (every pod has its own 127.0.0.1), else 0. */
struct zh_sc_conn {
	__u64 netns;
	__be32 local_ip4;
	__be32 remote_ip4;
	__u32 local_port;	/* host order */
	__u32 remote_port;	/* host order */
};

enum zh_sc_stat {
	ZH_SC_ST_OUTBOUND,	/* app connects sent to its own sidecar (1) */
	ZH_SC_ST_INBOUND,	/* sidecar connects sent to a peer's inbound port (2) */
	ZH_SC_ST_ORIGDST,	/* SO_ORIGINAL_DST answered from sc_orig (4) */
	ZH_SC_ST_ORIGDST_MISS,	/* SO_ORIGINAL_DST left to the kernel */
	ZH_SC_ST_MAX
};

#endif
