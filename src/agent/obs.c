/* obs.c — the agent's L4 observability: load and attach bpf/obs.bpf.c,
 * consume its connection events, aggregate them into Istio-named series,
 * keep a flow log, serve /metrics and /flows (include/zerohop/obs.h,
 * docs/observability.md).
 *
 * Design note
 * -----------
 *   obs_events (ringbuf) ──ring_buffer__consume──► on_event
 *        │ labels: pods by IP (ob->pods), Services by VIP:port (ob->svcs),
 *        │         the drop's cgroup id -> pod IP (pinned pol_cgpod)
 *        ├──► series table (open addressing, at most max_series label sets)
 *        ├──► drop table (reason x source x destination Service)
 *        └──► flow ring (last ZH_OBS_FLOW_RING JSON lines) + followers
 *   GET /metrics renders both tables; GET /flows the ring (and follows).
 *
 * Invariants:
 *  O1. Memory is bounded whatever the traffic: the series and drop tables
 *      are allocated once with 2 x max_series slots each (832 + 528 bytes
 *      a slot), a rendering of /metrics is ~2.3 KB per set, the flow ring
 *      at most 1 MB: ~5 KB per set of the cap plus 1 MB in all
 *      (tests/e2e/73-obs-cardinality.t measures it); a new label set beyond the cap
 *      goes into one "overflow" set per table, counted in
 *      zerohop_obs_series_overflow_total, so totals stay right.
 *  O2. Counters only grow for the agent's lifetime (Prometheus counters);
 *      a restart starts them at 0 (Prometheus handles the reset).
 *  O3. Labels are resolved when the event arrives, against the state of the
 *      last sync: a pod that left keeps the labels it had in series already
 *      counted; an unknown address is "unknown" (as Istio does).
 *  O5. The flow ring keeps the kernel's events raw (fixed size, no
 *      allocation per event) and formats a line only when /flows is read or
 *      a follower waits: labels of a line are those of the state at read
 *      time (a pod gone since shows as its address).
 *  O6. The label tables are rebuilt only when pods or Services may have
 *      changed (agent.c: a full sync, or an incremental one that touched
 *      a pod's IP), in one string arena: ~80 bytes a pod.
 *  O7. A connection the client made to a pod IP:port itself (no ClusterIP
 *      rewrite: every server-side socket, and a client that dialled a pod)
 *      is labelled with the one Service whose compiled endpoints hold that
 *      IP:port (ob->eps, from each compiled entry's own backends, not
 *      those a TrafficSplit/HTTPRoute root sends to another Service's
 *      endpoints); "unknown" when no Service or
 *      more than one Service has it (never a guess between two). The
 *      client side of a ClusterIP connection keeps the Service it dialled.
 *  O8. The node proxies' source addresses (every node's, from the cluster
 *      state) label as workload "zerohop-proxy", namespace "zerohop-system":
 *      the proxy -> backend leg of an L7 Service shows the proxy as its
 *      source, as the client -> proxy leg shows it as its destination.
 *  O9. An event's wall-clock time is its kernel timestamp plus the offset
 *      of the wall clock from the monotonic one read at the start of the
 *      drain that took it (not per event: the clock reads were a third of
 *      the agent's cost per event); a step of the wall clock during one
 *      drain (100 ms) shows from the next drain on.
 *  O10. An open/close event whose far end is a Service or a pod (its labels
 *      are strings of the label tables, not an address) finds its series
 *      through a 256-slot cache keyed by the table entries' pointers before
 *      hashing six strings; the cache is emptied whenever the tables are
 *      rebuilt (set_state, set_endpoints), so a pointer never outlives
 *      what it named, and a series never moves (O1), so a cached one
 *      stays right.
 *  O11. A CLOSE from the kernel comes without role, open time or Service
 *      (bpf/obs.bpf.c invariant 9): the OPEN drained before it left them
 *      in ob->opens under the socket cookie (the ring keeps the order
 *      events were written in, so an OPEN is always fed before its
 *      CLOSE). The table is bounded (O1): OBS_OPEN_SLOTS x 24 bytes, 1.5
 *      MB; an OPEN that finds its 8 probe slots taken evicts the oldest
 *      open in them, whose CLOSE is then not counted (as one whose OPEN
 *      the ring lost), counted in zerohop_obs_unpaired_closes_total.
 *      Connections open when the agent (re)started are not counted at
 *      close either (their OPEN went to the agent before).
 *  O12. A native IPv6 event (ZH_OBS_F_V6, bpf/obs.bpf.c invariant 4) is
 *      labelled as the same pods and Services over IPv4 would be: a pod
 *      by its IPv6 (ob->pods6, its IPv4 pod entry), a Service by its
 *      IPv6 ClusterIP (an entry of ob->svcs with v6 set, the same names),
 *      an endpoint as the pod's IPv4 one (O7); so a dual-stack Service's
 *      connections of both families count in one series. Only the flow
 *      log shows the IPv6 addresses. A pod with no IPv4 (an IPv6-only
 *      cluster) is keyed in ob->pods by a stand-in from 0.0.0.0/8
 *      (pod_key: never a pod's address), and its Service's IPv6 entry
 *      indexes its endpoints under that key (O7), so it is labelled the
 *      same way.
 *  O4. HTTP never blocks the sync loop for long: one request per accept,
 *      read and answer with 1 s timeouts; followers are written
 *      non-blocking and dropped when they cannot keep up.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/abi/accel.h"
#include "zerohop/abi/obs.h"
#include "zerohop/log.h"
#include "zerohop/obs.h"
#include "zerohop/paths.h"
#include "zerohop/policy.h"
#include "obs.skel.h"

#define LBL 128	/* one label value (names are DNS labels, <= 63) */

static const char *const link_pins[] = { "obs_link_connect4", "obs_link_connect6",
					 "obs_link_sockops", "obs_link_release" };
#define OBS_NLINKS 4
static const char *const map_pins[] = { "obs_events", "obs_stats", "obs_scrx", "obs_scrx6" };
#define OBS_NMAPS 4

struct series {
	uint8_t used;
	uint8_t reporter;	/* enum zh_obs_role: client = "source" */
	char src_wl[LBL], src_ns[LBL], dst_svc[LBL], dst_svc_ns[LBL], dst_wl[LBL], dst_ns[LBL];
	uint64_t opened, closed, failed, sent, recv, rtt_sum_us, rtt_n;
};

struct drop {
	uint8_t used;
	uint8_t reason;		/* enum zh_obs_reason */
	char src_wl[LBL], src_ns[LBL], dst_svc[LBL], dst_svc_ns[LBL];
	uint64_t count;
};

/* Label tables (O3): strings point into ob->strs, one allocation per
 * sync (O6: ~80 bytes a pod, not a fixed-size copy of every name). */
struct pod_ent {
	uint32_t ip;
	const char *name, *ns, *wl;
};

struct svc_ent {
	uint32_t vip;
	uint16_t port;		/* host order */
	uint8_t l7;
	uint8_t v6;		/* O12: an IPv6 ClusterIP, in vip6 (vip 0) */
	uint8_t vip6[16];
	const char *name, *ns;
	const char *fqdn;	/* NAME.NS.svc.cluster.local: the metric label */
};

/* An endpoint IP:port and its one Service (O7); svc < 0: several. */
struct ep_ent {
	uint32_t ip;
	uint16_t port;		/* host order */
	int svc;		/* index in ob->svcs, -1 when ambiguous */
};

/* O12: a pod's IPv6 -> its entry in ob->pods (sorted by ip6). */
struct pod6_ent {
	uint8_t ip6[16];
	const struct pod_ent *p;
};

/* One flow-log entry: the event as the kernel gave it, formatted only when
 * someone reads it (O5). */
struct flow {
	struct zh_obs_event6 e;	/* an IPv4 event: its IPv6 fields zero */
	uint32_t sip;		/* a drop's source, resolved from its cgroup */
	double t;		/* wall-clock time of the event */
};

/* O11: what a CLOSE needs of its OPEN, by socket cookie (0: free). */
#define OBS_OPEN_SLOTS 65536	/* a power of 2 */
#define OBS_OPEN_PROBE 8
struct open_ent {
	uint64_t cookie, ts_ns;
	uint32_t vip;
	uint16_t vport;
	uint8_t role, flags;
};

/* O10: a series by the label tables' pointers that named it. */
#define OBS_SCACHE 256
struct ser_cache {
	const struct pod_ent *sp, *dp;
	const struct svc_ent *svc;
	uint8_t client;
	struct series *s;	/* NULL: empty slot */
};

struct ag_obs {
	char node[64];
	char pin_dir[256];
	char sock_path[108];
	struct zh_obs *skel;
	struct bpf_link *links[OBS_NLINKS];
	struct ring_buffer *rb;
	int fd_stats, fd_cgpod;
	int lfd_tcp, lfd_unix;
	/* O1 */
	struct series *ser;	/* hash table, 2 * max entries, at most max used */
	struct drop *drops;
	int max, n_ser, n_drop, slots;
	struct series ser_over;
	struct drop drop_over;
	uint64_t overflow;
	/* labels (O3) */
	struct pod_ent *pods;
	int n_pods;
	struct pod6_ent *pods6;	/* O12 */
	int n_pods6;
	struct svc_ent *svcs;
	int n_svcs;
	struct ep_ent *eps;	/* O7, sorted by (ip, port), unique */
	int n_eps;
	char *strs;		/* the label tables' strings */
	struct ag_obs_agent_stats ag;
	double wall_off;	/* O9: wall clock - monotonic, at the last drain */
	struct ser_cache scache[OBS_SCACHE];	/* O10 */
	struct open_ent *opens;	/* O11 */
	uint64_t unpaired;
	/* flow log */
	struct flow ring[ZH_OBS_FLOW_RING];
	uint64_t ring_n;
	int followers[ZH_OBS_MAX_FOLLOWERS];
	int n_follow;
};

char *ag_obs_sock_path(char *buf, size_t len, const char *lab, const char *node)
{
	snprintf(buf, len, "%s/%s/nodes/%s/agent.sock", ZH_RUN_ROOT, lab, node);
	return buf;
}

static const char *reason_name(int r)
{
	switch (r) {
	case ZH_OBS_R_POLICY: return "policy";
	case ZH_OBS_R_NO_BACKEND: return "no_backend";
	case ZH_OBS_R_REFUSED: return "refused";
	case ZH_OBS_R_OTHER: return "other";
	}
	return "none";
}

/* ---- labels ------------------------------------------------------------------- */

static int pod_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct pod_ent *)a)->ip, y = ((const struct pod_ent *)b)->ip;

	return x < y ? -1 : x > y;
}

static int ep_cmp(const void *a, const void *b)
{
	const struct ep_ent *x = a, *y = b;

	if (x->ip != y->ip)
		return x->ip < y->ip ? -1 : 1;
	return (int)x->port - (int)y->port;
}

static int svc_cmp(const void *a, const void *b)
{
	const struct svc_ent *x = a, *y = b;
	int c;

	if (x->v6 != y->v6)
		return (int)x->v6 - (int)y->v6;
	if (x->v6 && (c = memcmp(x->vip6, y->vip6, 16)))
		return c;
	if (x->vip != y->vip)
		return x->vip < y->vip ? -1 : 1;
	return (int)x->port - (int)y->port;
}

static int pod6_cmp(const void *a, const void *b)
{
	return memcmp(((const struct pod6_ent *)a)->ip6, ((const struct pod6_ent *)b)->ip6, 16);
}

static bool is_v4mapped(const uint8_t a[16])
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(a, pre, sizeof(pre));
}

/* Append s to the arena at *at (sized by the caller's first pass); a
 * string equal to *prev is not copied again (pods of one Deployment are
 * listed together: their namespace and workload are shared). */
static const char *arena_put(char **at, const char *s, const char **prev)
{
	size_t n = strlen(s) + 1;
	const char *r;

	if (prev && *prev && !strcmp(*prev, s))
		return *prev;
	memcpy(*at, s, n);
	r = *at;
	*at += n;
	if (prev)
		*prev = r;
	return r;
}

static int svc_idx(const struct ag_obs *ob, uint32_t vip, uint16_t port);
static const struct pod_ent *pod_of6(const struct ag_obs *ob, const uint8_t ip6[16]);
static const struct svc_ent *svc_of6(const struct ag_obs *ob, const uint8_t vip6[16], uint16_t port);

/* O12: the key of pod i of the state in ob->pods: its IPv4, or, for a pod
 * with only an IPv6, a stand-in in 0.0.0.0/8 (no pod has such an
 * address); 0: no address. */
static uint32_t pod_key(const struct md_pod *p, int i)
{
	if (p->ip)
		return p->ip;
	return IN6_IS_ADDR_UNSPECIFIED(&p->ip6) ? 0 : htonl((uint32_t)i + 1);
}

static bool is_stand_in(uint32_t ip)
{
	return ip && (ntohl(ip) >> 24) == 0;
}


/* Is this backend the entry's own Service's endpoint (not one reached
 * through it: a TrafficSplit or HTTPRoute to another Service)? */
static bool own_backend(const struct ag_svc *s, const struct ag_wbackend *b)
{
	size_t l = strlen(s->ns);

	return b->via && !strncmp(b->via, s->ns, l) && b->via[l] == '/' &&
	       !strcmp(b->via + l + 1, s->name);
}

/* O7: endpoint IP:port -> its Service, from each entry's own backends (a
 * TrafficSplit or HTTPRoute root's backends of another Service are that
 * one's). Two Services with one endpoint: -1. */
static void ep_index(struct ag_obs *ob, const struct ag_compiled *c)
{
	int i, k, n = 0, tot = 0;

	free(ob->eps);
	ob->eps = NULL;
	ob->n_eps = 0;
	for (i = 0; i < c->n_svcs; i++)
		if (c->svcs[i].key.proto == ZH_LB_TCP)
			tot += c->svcs[i].n_be;
	ob->eps = zh_calloc((size_t)tot + 1, sizeof(*ob->eps));
	for (i = 0; i < c->n_svcs; i++) {
		const struct ag_svc *s = &c->svcs[i];
		uint32_t vip;
		int si;

		/* an IPv6 entry's endpoints are its pods' IPv6 addresses: an
		 * IPv6 connection finds them as the pod's IPv4 ones (O12);
		 * a pod without IPv4 only through this entry, by its
		 * stand-in key */
		if (s->key.proto != ZH_LB_TCP)
			continue;
		if (is_v4mapped(s->key.vip)) {
			memcpy(&vip, &s->key.vip[12], 4);
			si = svc_idx(ob, vip, ntohs(s->key.port));
		} else {
			const struct svc_ent *se = svc_of6(ob, s->key.vip, ntohs(s->key.port));

			si = se ? (int)(se - ob->svcs) : -1;
		}
		for (k = 0; si >= 0 && k < s->n_be; k++) {
			const struct pod_ent *pe = NULL;
			struct ep_ent *e;

			if (!own_backend(s, &s->be[k]))
				continue;
			if (!is_v4mapped(s->key.vip) &&
			    (!(pe = pod_of6(ob, s->be[k].be.addr)) || !is_stand_in(pe->ip)))
				continue;
			e = &ob->eps[n++];
			if (pe)
				e->ip = pe->ip;
			else
				memcpy(&e->ip, &s->be[k].be.addr[12], 4);
			e->port = ntohs(s->be[k].be.port);
			e->svc = si;
		}
	}
	qsort(ob->eps, (size_t)n, sizeof(*ob->eps), ep_cmp);
	for (i = 0, k = 0; i < n; i++) {	/* unique keys; a second Service: -1 */
		const struct svc_ent *a, *b;

		if (k && !ep_cmp(&ob->eps[k - 1], &ob->eps[i])) {
			a = ob->eps[k - 1].svc >= 0 ? &ob->svcs[ob->eps[k - 1].svc] : NULL;
			b = &ob->svcs[ob->eps[i].svc];
			/* two ports of one Service on one target port: the same label */
			if (!a || strcmp(a->name, b->name) || strcmp(a->ns, b->ns))
				ob->eps[k - 1].svc = -1;
			continue;
		}
		ob->eps[k++] = ob->eps[i];
	}
	ob->n_eps = k;
}

void ag_obs_set_endpoints(struct ag_obs *ob, const struct ag_compiled *c)
{
	if (ob && c) {
		ep_index(ob, c);
		memset(ob->scache, 0, sizeof(ob->scache));	/* O10 */
	}
}

static const struct pod_ent *pod_of(const struct ag_obs *ob, uint32_t ip);
void ag_obs_set_state(struct ag_obs *ob, const struct md_state *st, const struct ag_compiled *c)
{
	const char *pns = NULL, *pwl = NULL;
	size_t total = 1;
	char *at;
	int i, n = 0;

	if (!ob || !st)
		return;
	memset(ob->scache, 0, sizeof(ob->scache));	/* O10: the tables move */
	/* pass 1: the arena's size (an upper bound: no sharing assumed) */
	for (i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		if (pod_key(p, i))
			total += strlen(p->meta.name) + strlen(p->meta.ns ? p->meta.ns : "default") +
				 strlen(p->owner ? p->owner : p->meta.name) + 3;
	}
	for (i = 0; c && i < c->n_svcs; i++)
		total += 2 * (strlen(c->svcs[i].name) + strlen(c->svcs[i].ns)) +
			 sizeof(".svc.cluster.local") + 3;
	for (i = 0; i < st->cluster.n_nodes; i++)
		total += sizeof("zerohop-proxy-") + strlen(st->cluster.nodes[i].name ?: "");
	free(ob->strs);
	ob->strs = at = zh_malloc(total);
	free(ob->pods);
	ob->pods = zh_calloc((size_t)st->n_pods + (size_t)st->cluster.n_nodes + 1,
			     sizeof(*ob->pods));
	for (i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];
		struct pod_ent *e = &ob->pods[n];

		if (!(e->ip = pod_key(p, i)))
			continue;
		e->name = arena_put(&at, p->meta.name, NULL);
		e->ns = arena_put(&at, p->meta.ns ? p->meta.ns : "default", &pns);
		e->wl = arena_put(&at, p->owner ? p->owner : p->meta.name, &pwl);
		n++;
	}
	ob->n_pods = n;
	qsort(ob->pods, (size_t)n, sizeof(*ob->pods), pod_cmp);
	/* O8: each node proxy's source address (pol_node_proxy_ip, as the
	 * policy ipcache has it) is the workload "zerohop-proxy" in
	 * "zerohop-system", as the client side names the proxy; a pod
	 * holding that address wins */
	for (i = 0; i < st->cluster.n_nodes; i++) {
		uint32_t pip = pol_node_proxy_ip(&st->cluster, i);
		char nm[128];

		if (!pip || pod_of(ob, pip))
			continue;
		snprintf(nm, sizeof(nm), "zerohop-proxy-%s", st->cluster.nodes[i].name ?: "");
		ob->pods[n++] = (struct pod_ent){ .ip = pip, .name = arena_put(&at, nm, NULL),
						  .ns = "zerohop-system", .wl = "zerohop-proxy" };
	}
	if (n != ob->n_pods) {
		ob->n_pods = n;
		qsort(ob->pods, (size_t)n, sizeof(*ob->pods), pod_cmp);
	}
	/* O12: pods by IPv6, pointing at their (now sorted) IPv4 entries */
	free(ob->pods6);
	ob->pods6 = zh_calloc((size_t)st->n_pods + 1, sizeof(*ob->pods6));
	ob->n_pods6 = 0;
	for (i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];
		const struct pod_ent *pe;

		if (IN6_IS_ADDR_UNSPECIFIED(&p->ip6) || !(pe = pod_of(ob, pod_key(p, i))))
			continue;
		memcpy(ob->pods6[ob->n_pods6].ip6, &p->ip6, 16);
		ob->pods6[ob->n_pods6++].p = pe;
	}
	qsort(ob->pods6, (size_t)ob->n_pods6, sizeof(*ob->pods6), pod6_cmp);
	free(ob->svcs);
	ob->svcs = NULL;
	ob->n_svcs = 0;
	free(ob->eps);
	ob->eps = NULL;
	ob->n_eps = 0;
	if (!c)
		return;
	ob->svcs = zh_calloc((size_t)c->n_svcs + 1, sizeof(*ob->svcs));
	for (i = 0; i < c->n_svcs; i++) {
		const struct ag_svc *s = &c->svcs[i];
		struct svc_ent *e = &ob->svcs[ob->n_svcs];

		if (s->key.proto != ZH_LB_TCP)
			continue;
		if (is_v4mapped(s->key.vip)) {
			memcpy(&e->vip, &s->key.vip[12], 4);
		} else {	/* O12 */
			e->v6 = 1;
			memcpy(e->vip6, s->key.vip, 16);
		}
		e->port = ntohs(s->key.port);
		e->l7 = !!(s->flags & ZH_LB_F_L7);
		e->name = arena_put(&at, s->name, NULL);
		e->ns = arena_put(&at, s->ns, NULL);
		e->fqdn = at;
		at += sprintf(at, "%s.%s.svc.cluster.local", s->name, s->ns) + 1;
		ob->n_svcs++;
	}
	qsort(ob->svcs, (size_t)ob->n_svcs, sizeof(*ob->svcs), svc_cmp);
	ep_index(ob, c);
}

void ag_obs_set_agent_stats(struct ag_obs *ob, const struct ag_obs_agent_stats *s)
{
	if (ob)
		ob->ag = *s;
}

static const struct pod_ent *pod_of(const struct ag_obs *ob, uint32_t ip)
{
	struct pod_ent k = { .ip = ip };

	if (!ip || !ob->n_pods)
		return NULL;
	return bsearch(&k, ob->pods, (size_t)ob->n_pods, sizeof(k), pod_cmp);
}

static int svc_idx(const struct ag_obs *ob, uint32_t vip, uint16_t port)
{
	struct svc_ent k = { .vip = vip, .port = port };
	const struct svc_ent *e;

	if (!ob->n_svcs)
		return -1;
	e = bsearch(&k, ob->svcs, (size_t)ob->n_svcs, sizeof(k), svc_cmp);
	return e ? (int)(e - ob->svcs) : -1;
}

static const struct svc_ent *svc_of(const struct ag_obs *ob, uint32_t vip, uint16_t port)
{
	int i = svc_idx(ob, vip, port);

	return i >= 0 ? &ob->svcs[i] : NULL;
}

/* O12: the Service of an IPv6 ClusterIP:port, and the pod of an IPv6. */
static const struct svc_ent *svc_of6(const struct ag_obs *ob, const uint8_t vip6[16], uint16_t port)
{
	struct svc_ent k = { .v6 = 1, .port = port };

	if (!ob->n_svcs)
		return NULL;
	memcpy(k.vip6, vip6, 16);
	return bsearch(&k, ob->svcs, (size_t)ob->n_svcs, sizeof(k), svc_cmp);
}

static const struct pod_ent *pod_of6(const struct ag_obs *ob, const uint8_t ip6[16])
{
	struct pod6_ent k;
	const struct pod6_ent *e;

	if (!ob->n_pods6)
		return NULL;
	memcpy(k.ip6, ip6, 16);
	e = bsearch(&k, ob->pods6, (size_t)ob->n_pods6, sizeof(k), pod6_cmp);
	return e ? e->p : NULL;
}

/* O7: the one Service whose endpoint ip:port is, or NULL. */
static const struct svc_ent *svc_of_ep(const struct ag_obs *ob, uint32_t ip, uint16_t port)
{
	struct ep_ent k = { .ip = ip, .port = port };
	const struct ep_ent *e;

	if (!ob->n_eps)
		return NULL;
	e = bsearch(&k, ob->eps, (size_t)ob->n_eps, sizeof(k), ep_cmp);
	return e && e->svc >= 0 ? &ob->svcs[e->svc] : NULL;
}

/* ---- aggregation (O1) ----------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (h ^ 0xff) * 1099511628211ULL;
}

static struct series *series_get(struct ag_obs *ob, int reporter, const char *sw, const char *sn,
				 const char *ds, const char *dsn, const char *dw, const char *dn)
{
	uint64_t h = fnv(fnv(fnv(fnv(fnv(fnv(14695981039346656037ULL + (uint64_t)reporter, sw), sn),
				     ds), dsn), dw), dn);
	int i = (int)(h % (uint64_t)ob->slots);
	struct series *s;

	for (;; i = (i + 1) % ob->slots) {
		s = &ob->ser[i];
		if (!s->used)
			break;
		if (s->reporter == reporter && !strcmp(s->src_wl, sw) && !strcmp(s->src_ns, sn) &&
		    !strcmp(s->dst_svc, ds) && !strcmp(s->dst_svc_ns, dsn) &&
		    !strcmp(s->dst_wl, dw) && !strcmp(s->dst_ns, dn))
			return s;
	}
	if (ob->n_ser >= ob->max) {
		ob->overflow++;
		ob->ser_over.used = 1;	/* exported from now on */
		return &ob->ser_over;
	}
	s->used = 1;
	s->reporter = (uint8_t)reporter;
	snprintf(s->src_wl, LBL, "%s", sw);
	snprintf(s->src_ns, LBL, "%s", sn);
	snprintf(s->dst_svc, LBL, "%s", ds);
	snprintf(s->dst_svc_ns, LBL, "%s", dsn);
	snprintf(s->dst_wl, LBL, "%s", dw);
	snprintf(s->dst_ns, LBL, "%s", dn);
	ob->n_ser++;
	return s;
}

static struct drop *drop_get(struct ag_obs *ob, int reason, const char *sw, const char *sn,
			     const char *ds, const char *dsn)
{
	uint64_t h = fnv(fnv(fnv(fnv(14695981039346656037ULL + (uint64_t)reason, sw), sn), ds), dsn);
	int i = (int)(h % (uint64_t)ob->slots);
	struct drop *d;

	for (;; i = (i + 1) % ob->slots) {
		d = &ob->drops[i];
		if (!d->used)
			break;
		if (d->reason == reason && !strcmp(d->src_wl, sw) && !strcmp(d->src_ns, sn) &&
		    !strcmp(d->dst_svc, ds) && !strcmp(d->dst_svc_ns, dsn))
			return d;
	}
	if (ob->n_drop >= ob->max) {
		ob->overflow++;
		ob->drop_over.used = 1;
		return &ob->drop_over;
	}
	d->used = 1;
	d->reason = (uint8_t)reason;
	snprintf(d->src_wl, LBL, "%s", sw);
	snprintf(d->src_ns, LBL, "%s", sn);
	snprintf(d->dst_svc, LBL, "%s", ds);
	snprintf(d->dst_svc_ns, LBL, "%s", dsn);
	ob->n_drop++;
	return d;
}

/* ---- events --------------------------------------------------------------------- */

static const char *ev_type_name(int t)
{
	switch (t) {
	case ZH_OBS_EV_OPEN: return "open";
	case ZH_OBS_EV_CLOSE: return "close";
	case ZH_OBS_EV_FAIL: return "fail";
	case ZH_OBS_EV_DROP: return "drop";
	}
	return "?";
}

static void follow_send(struct ag_obs *ob, const char *line, size_t len)
{
	for (int i = 0; i < ob->n_follow;) {
		ssize_t w = send(ob->followers[i], line, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w == (ssize_t)len) {
			i++;
			continue;
		}
		close(ob->followers[i]);	/* O4: gone or too slow */
		ob->followers[i] = ob->followers[--ob->n_follow];
	}
}

/* ip6: the end's IPv6 address (O12), else NULL and ip. */
static void put_end(char *b, size_t n, size_t *o, const char *key, uint32_t ip,
		    const uint8_t *ip6, int port, const struct pod_ent *p, const struct svc_ent *svc)
{
	char a[INET6_ADDRSTRLEN];

	if (ip6)
		inet_ntop(AF_INET6, ip6, a, sizeof(a));
	else
		inet_ntop(AF_INET, &ip, a, sizeof(a));
	*o += (size_t)snprintf(b + *o, n - *o, "\"%s\":{\"ip\":\"%s\",\"port\":%d", key, a, port);
	if (p)
		*o += (size_t)snprintf(b + *o, n - *o,
				       ",\"pod\":\"%s\",\"namespace\":\"%s\",\"workload\":\"%s\"",
				       p->name, p->ns, p->wl);
	if (svc)
		*o += (size_t)snprintf(b + *o, n - *o, ",\"service\":\"%s/%s\"", svc->ns, svc->name);
	*o += (size_t)snprintf(b + *o, n - *o, "}");
}

/* Who the event is between, as Istio sees it (the client is the source). */
struct ends {
	uint32_t sip, dip;	/* IPv4, or (O12) the IPv6 ends' pods' IPv4 */
	const uint8_t *sip6, *dip6;	/* O12: the IPv6 addresses, else NULL */
	int sport, dport, client;
	const struct pod_ent *sp, *dp;
	const struct svc_ent *svc;
};

static void resolve(const struct ag_obs *ob, const struct zh_obs_event6 *w, uint32_t drop_sip,
		    struct ends *x)
{
	const struct zh_obs_event *e = &w->e;
	bool v6 = e->flags & ZH_OBS_F_V6;

	x->client = e->role != ZH_OBS_ROLE_SERVER;
	x->sip = x->client ? e->saddr : e->daddr;
	x->sport = x->client ? e->sport : e->dport;
	x->dip = x->client ? e->daddr : e->saddr;
	x->dport = x->client ? e->dport : e->sport;
	x->sip6 = x->dip6 = NULL;
	if (v6) {	/* O12 */
		x->sip6 = x->client ? w->saddr6 : w->daddr6;
		x->dip6 = x->client ? w->daddr6 : w->saddr6;
		x->sp = pod_of6(ob, x->sip6);
		x->dp = pod_of6(ob, x->dip6);
		x->sip = x->sp ? x->sp->ip : 0;
		x->dip = x->dp ? x->dp->ip : 0;
	}
	if (e->type == ZH_OBS_EV_DROP && !x->sip) {
		x->sip = drop_sip;
		x->sip6 = NULL;
	}
	if (!v6 || (e->type == ZH_OBS_EV_DROP && !x->sip6)) {
		x->sp = pod_of(ob, x->sip);
		if (!v6)
			x->dp = pod_of(ob, x->dip);
	}
	x->svc = NULL;
	if (e->flags & ZH_OBS_F_SVC)
		x->svc = v6 ? svc_of6(ob, w->vip6, e->vport) : svc_of(ob, e->vip, e->vport);
	else if (e->type == ZH_OBS_EV_DROP)	/* refused: never rewritten */
		x->svc = v6 ? svc_of6(ob, w->daddr6, e->dport) : svc_of(ob, e->daddr, e->dport);
	else
		x->svc = svc_of_ep(ob, x->dip, (uint16_t)x->dport);	/* O7 */
}

/* The flow-log line of f (labels from the current state, O5) into line;
 * its length, or 0 when it does not fit. */
static size_t flow_line(const struct ag_obs *ob, const struct flow *f, char *line, size_t n)
{
	const struct zh_obs_event *e = &f->e.e;
	struct ends x;
	size_t o = 0;

	resolve(ob, &f->e, f->sip, &x);
	o += (size_t)snprintf(line + o, n - o,
			      "{\"time\":%.6f,\"node\":\"%s\",\"type\":\"%s\",\"verdict\":\"%s\","
			      "\"reason\":\"%s\",\"reporter\":\"%s\",",
			      f->t, ob->node, ev_type_name(e->type),
			      e->type == ZH_OBS_EV_DROP ? "DROPPED" :
			      e->type == ZH_OBS_EV_FAIL ? "ERROR" : "FORWARDED",
			      reason_name(e->reason), x.client ? "source" : "destination");
	put_end(line, n, &o, "source", x.sip, x.sip6, x.sport, x.sp, NULL);
	o += (size_t)snprintf(line + o, n - o, ",");
	put_end(line, n, &o, "destination", x.dip, x.dip6, x.dport, x.dp, x.svc);
	if (e->type == ZH_OBS_EV_CLOSE)
		o += (size_t)snprintf(line + o, n - o,
				      ",\"bytes_sent\":%llu,\"bytes_received\":%llu,\"srtt_us\":%u,"
				      "\"duration_ms\":%u,\"short_circuit\":%s",
				      (unsigned long long)e->bytes_sent,
				      (unsigned long long)e->bytes_recv, e->srtt_us, e->dur_ms,
				      (e->flags & ZH_OBS_F_SC) ? "true" : "false");
	o += (size_t)snprintf(line + o, n - o, "}\n");
	return o < n ? o : 0;
}

/* ---- O11: OPEN -> CLOSE pairing ------------------------------------------------ */

static size_t open_home(uint64_t cookie)
{
	return (size_t)((cookie * 0x9E3779B97F4A7C15ull) >> 48) & (OBS_OPEN_SLOTS - 1);
}

static void open_put(struct ag_obs *ob, const struct zh_obs_event *e)
{
	struct open_ent *o = NULL;
	size_t h = open_home(e->cookie);

	for (int i = 0; i < OBS_OPEN_PROBE; i++) {
		struct open_ent *c = &ob->opens[(h + (size_t)i) & (OBS_OPEN_SLOTS - 1)];

		if (!c->cookie || c->cookie == e->cookie) {
			o = c;
			break;
		}
		if (!o || c->ts_ns < o->ts_ns)
			o = c;	/* the oldest, if all are taken */
	}
	/* o may be the oldest open of the window: evicted, its CLOSE will
	 * count as unpaired (close_finish) */
	*o = (struct open_ent){ .cookie = e->cookie, .ts_ns = e->ts_ns, .vip = e->vip,
				.vport = e->vport, .role = e->role, .flags = e->flags };
}

/* Finish a kernel CLOSE (ZH_OBS_F_RAW) into *out from its OPEN; 0 when
 * the OPEN was not seen (the CLOSE is then not counted). */
static int close_finish(struct ag_obs *ob, const struct zh_obs_event6 *w, struct zh_obs_event6 *out6)
{
	const struct zh_obs_event *e = &w->e;
	struct zh_obs_event *out = &out6->e;

	size_t h = open_home(e->cookie);

	for (int i = 0; i < OBS_OPEN_PROBE; i++) {
		struct open_ent *o = &ob->opens[(h + (size_t)i) & (OBS_OPEN_SLOTS - 1)];

		if (!e->cookie || o->cookie != e->cookie)
			continue;
		*out6 = *w;
		out->role = o->role;
		out->dur_ms = e->ts_ns > o->ts_ns ? (uint32_t)((e->ts_ns - o->ts_ns) / 1000000) : 0;
		out->flags = (uint8_t)(e->flags & ~ZH_OBS_F_RAW);
		if (!(e->flags & ZH_OBS_F_V6)) {	/* IPv6: the CLOSE has its Service */
			out->flags |= o->flags & ZH_OBS_F_SVC;
			out->vip = o->vip;
			out->vport = o->vport;
		}
		/* the active opener's SYN (bpf/obs.bpf.c invariant 6) */
		if (o->role == ZH_OBS_ROLE_CLIENT && out->bytes_sent)
			out->bytes_sent--;
		out->bytes_sent += e->sc_sent;
		o->cookie = 0;
		return 1;
	}
	ob->unpaired++;
	return 0;
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct ag_obs *ob = ctx;
	struct zh_obs_event6 w, fin;	/* an IPv4 record: IPv6 fields zero */
	const struct zh_obs_event6 *we = &w;
	const struct zh_obs_event *e = &w.e;
	struct flow *f;
	struct ends x;
	const char *ds, *dsn;
	char a[INET6_ADDRSTRLEN];
	uint32_t drop_sip = 0;

	if (len < sizeof(w.e))
		return 0;
	memcpy(&w, data, len < sizeof(w) ? len : sizeof(w));
	if (len < sizeof(w))
		memset((char *)&w + len, 0, sizeof(w) - len);
	if ((w.e.flags & ZH_OBS_F_V6) && len < sizeof(w))
		return 0;
	if (e->type == ZH_OBS_EV_OPEN)
		open_put(ob, e);
	else if (e->type == ZH_OBS_EV_CLOSE && (e->flags & ZH_OBS_F_RAW)) {
		if (!close_finish(ob, &w, &fin))
			return 0;	/* not seen open (O11) */
		we = &fin;
		e = &fin.e;
	}
	if (e->type == ZH_OBS_EV_DROP && !e->saddr && ob->fd_cgpod >= 0) {
		uint64_t cg = e->cgid;

		bpf_map_lookup_elem(ob->fd_cgpod, &cg, &drop_sip);
	}
	resolve(ob, we, drop_sip, &x);
	if (x.svc) {
		ds = x.svc->fqdn;
		dsn = x.svc->ns;
	} else if (e->type != ZH_OBS_EV_DROP && x.dp) {
		ds = "unknown";
		dsn = "unknown";
	} else {
		if (x.dip6)
			inet_ntop(AF_INET6, x.dip6, a, sizeof(a));
		else
			inet_ntop(AF_INET, &x.dip, a, sizeof(a));
		ds = a;
		dsn = "unknown";
	}

	if (e->type == ZH_OBS_EV_DROP) {
		struct drop *d = drop_get(ob, e->reason, x.sp ? x.sp->wl : "unknown",
					  x.sp ? x.sp->ns : "unknown", ds, dsn);

		d->count++;
	} else {
		/* L7 Service: the client's leg ends at the node proxy; the
		 * proxy reports the requests (reporter="source" there too). */
		const char *dw = x.dp ? x.dp->wl : (x.svc && x.svc->l7 ? "zerohop-proxy" : "unknown");
		const char *dn = x.dp ? x.dp->ns : x.svc && x.svc->l7 ? "zerohop-system" : "unknown";
		struct ser_cache *c = NULL;
		struct series *s = NULL;

		/* O10: labels that are the tables' own strings (a Service or
		 * a pod at the far end, not an address) are looked up by
		 * their pointers first */
		if (x.svc || x.dp) {
			uintptr_t h = ((uintptr_t)x.sp * 31 + (uintptr_t)x.dp) * 31 + (uintptr_t)x.svc;

			c = &ob->scache[(h ^ h >> 13 ^ (uintptr_t)x.client) % OBS_SCACHE];
			if (c->s && c->sp == x.sp && c->dp == x.dp && c->svc == x.svc &&
			    c->client == x.client)
				s = c->s;
		}
		if (!s) {
			s = series_get(ob, x.client ? ZH_OBS_ROLE_CLIENT : ZH_OBS_ROLE_SERVER,
				       x.sp ? x.sp->wl : "unknown", x.sp ? x.sp->ns : "unknown", ds,
				       dsn, dw, dn);
			if (c && s != &ob->ser_over)	/* its events are counted in series_get */
				*c = (struct ser_cache){ .sp = x.sp, .dp = x.dp, .svc = x.svc,
							 .client = (uint8_t)x.client, .s = s };
		}

		switch (e->type) {
		case ZH_OBS_EV_OPEN:
			s->opened++;
			break;
		case ZH_OBS_EV_CLOSE:
			s->closed++;
			/* Istio's directions, the same for both reporters:
			 * "sent" = the response direction (destination ->
			 * source), "received" = the request direction */
			s->sent += x.client ? e->bytes_recv : e->bytes_sent;
			s->recv += x.client ? e->bytes_sent : e->bytes_recv;
			if (e->srtt_us) {
				s->rtt_sum_us += e->srtt_us;
				s->rtt_n++;
			}
			break;
		case ZH_OBS_EV_FAIL:
			s->failed++;
			break;
		}
	}

	/* flow log: kept raw, formatted when read (O5) */
	f = &ob->ring[ob->ring_n++ % ZH_OBS_FLOW_RING];
	f->e = *we;
	f->sip = drop_sip;
	f->t = ob->wall_off + (double)e->ts_ns / 1e9;	/* O9 */
	if (ob->n_follow) {
		char line[1024];
		size_t n = flow_line(ob, f, line, sizeof(line));

		if (n)
			follow_send(ob, line, n);
	}
	return 0;
}

/* ---- /metrics --------------------------------------------------------------------- */

static void series_labels(FILE *f, const struct series *s)
{
	fprintf(f,
		"{reporter=\"%s\",source_workload=\"%s\",source_workload_namespace=\"%s\","
		"destination_service=\"%s\",destination_service_namespace=\"%s\","
		"destination_workload=\"%s\",destination_workload_namespace=\"%s\","
		"connection_security_policy=\"none\"}",
		s->reporter == ZH_OBS_ROLE_SERVER ? "destination" : "source", s->src_wl, s->src_ns,
		s->dst_svc, s->dst_svc_ns, s->dst_wl, s->dst_ns);
}

static void metric_family(FILE *f, const struct ag_obs *ob, const char *name, const char *help,
			  size_t off)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (int i = 0; i < ob->slots; i++) {
		const struct series *s = &ob->ser[i];

		if (!s->used)
			continue;
		fputs(name, f);
		series_labels(f, s);
		fprintf(f, " %llu\n", (unsigned long long)*(const uint64_t *)((const char *)s + off));
	}
	if (ob->ser_over.used) {
		fputs(name, f);
		series_labels(f, &ob->ser_over);
		fprintf(f, " %llu\n",
			(unsigned long long)*(const uint64_t *)((const char *)&ob->ser_over + off));
	}
}

static uint64_t percpu_sum(int fd, uint32_t key)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v, sum = 0;

	if (fd < 0 || ncpu <= 0)
		return 0;
	v = zh_calloc((size_t)ncpu, sizeof(*v));
	if (!bpf_map_lookup_elem(fd, &key, v))
		for (int i = 0; i < ncpu; i++)
			sum += v[i];
	free(v);
	return sum;
}

static void render_metrics(struct ag_obs *ob, FILE *f)
{
	uint64_t lbs[ZH_LB_STAT_MAX] = {}, meta[ZH_LB_META_MAX] = {};
	char path[320];
	int i, fd;

	metric_family(f, ob, "istio_tcp_connections_opened_total",
		      "TCP connections opened (kernel, at ESTABLISHED).",
		      offsetof(struct series, opened));
	metric_family(f, ob, "istio_tcp_connections_closed_total",
		      "TCP connections closed (kernel, at TCP_CLOSE).", offsetof(struct series, closed));
	metric_family(f, ob, "istio_tcp_sent_bytes_total",
		      "Bytes of the response direction (destination to source; TCP + same-node short-circuit), at close.",
		      offsetof(struct series, sent));
	metric_family(f, ob, "istio_tcp_received_bytes_total",
		      "Bytes of the request direction (source to destination), at close.",
		      offsetof(struct series, recv));
	metric_family(f, ob, "zerohop_tcp_connections_failed_total",
		      "Active opens that died in SYN_SENT (reset or timed out).",
		      offsetof(struct series, failed));
	metric_family(f, ob, "zerohop_tcp_srtt_microseconds_sum",
		      "Sum of the kernel's smoothed RTT at close (with _count: the mean).",
		      offsetof(struct series, rtt_sum_us));
	metric_family(f, ob, "zerohop_tcp_srtt_microseconds_count",
		      "Closed connections with an RTT estimate.", offsetof(struct series, rtt_n));

	fprintf(f, "# HELP zerohop_drops_total Connections refused before any packet, by reason.\n"
		   "# TYPE zerohop_drops_total counter\n");
	for (i = 0; i <= ob->slots; i++) {
		const struct drop *d = i < ob->slots ? &ob->drops[i] : &ob->drop_over;

		if (!d->used)
			continue;
		fprintf(f,
			"zerohop_drops_total{reason=\"%s\",source_workload=\"%s\","
			"source_workload_namespace=\"%s\",destination_service=\"%s\","
			"destination_service_namespace=\"%s\"} %llu\n",
			reason_name(d->reason), d->src_wl, d->src_ns, d->dst_svc, d->dst_svc_ns,
			(unsigned long long)d->count);
	}
	/* policy's per-packet drops (cgroup_skb), from its pinned counters */
	snprintf(path, sizeof(path), "%s/pol_drops", ob->pin_dir);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		static const char *const pr[] = { "none", "ingress_denied", "egress_denied", "revoked" };

		fprintf(f, "# HELP zerohop_policy_packet_drops_total Packets dropped by NetworkPolicy, by reason.\n"
			   "# TYPE zerohop_policy_packet_drops_total counter\n");
		for (uint32_t r = 1; r < 4; r++)
			fprintf(f, "zerohop_policy_packet_drops_total{reason=\"%s\"} %llu\n", pr[r],
				(unsigned long long)percpu_sum(fd, r));
		close(fd);
	}
	if (!ag_lb_read_stats(ob->pin_dir, lbs, meta)) {
		fprintf(f, "# HELP zerohop_lb_events_total Socket load balancer counters (docs/maps.md).\n"
			   "# TYPE zerohop_lb_events_total counter\n");
		for (i = 0; i < ZH_LB_STAT_MAX; i++)
			fprintf(f, "zerohop_lb_events_total{event=\"%s\"} %llu\n", ag_lb_stat_name(i),
				(unsigned long long)lbs[i]);
	}
	fprintf(f,
		"# HELP zerohop_obs_series Label sets in use (bounded by zerohop_obs_series_limit).\n"
		"# TYPE zerohop_obs_series gauge\nzerohop_obs_series{table=\"tcp\"} %d\n"
		"zerohop_obs_series{table=\"drops\"} %d\n"
		"# TYPE zerohop_obs_series_limit gauge\nzerohop_obs_series_limit %d\n"
		"# HELP zerohop_obs_series_overflow_total Events counted in the overflow label set.\n"
		"# TYPE zerohop_obs_series_overflow_total counter\nzerohop_obs_series_overflow_total %llu\n"
		"# HELP zerohop_obs_unpaired_closes_total Closes not counted: their open was not seen.\n"
		"# TYPE zerohop_obs_unpaired_closes_total counter\nzerohop_obs_unpaired_closes_total %llu\n"
		"# TYPE zerohop_obs_events_total counter\nzerohop_obs_events_total %llu\n"
		"# HELP zerohop_obs_events_lost_total Events lost (ring buffer full): L4 metrics undercount.\n"
		"# TYPE zerohop_obs_events_lost_total counter\nzerohop_obs_events_lost_total %llu\n"
		"# HELP zerohop_obs_release_rereads_total Closes read twice: a segment overlapped the first read.\n"
		"# TYPE zerohop_obs_release_rereads_total counter\nzerohop_obs_release_rereads_total %llu\n"
		"# HELP zerohop_obs_release_torn_total Closes whose second read overlapped a segment too: bytes may be off.\n"
		"# TYPE zerohop_obs_release_torn_total counter\nzerohop_obs_release_torn_total %llu\n",
		ob->n_ser, ob->n_drop, ob->max, (unsigned long long)ob->overflow,
		(unsigned long long)ob->unpaired,
		(unsigned long long)percpu_sum(ob->fd_stats, ZH_OBS_ST_EVENTS),
		(unsigned long long)percpu_sum(ob->fd_stats, ZH_OBS_ST_LOST),
		(unsigned long long)percpu_sum(ob->fd_stats, ZH_OBS_ST_REREAD),
		(unsigned long long)percpu_sum(ob->fd_stats, ZH_OBS_ST_TORN));
	fprintf(f,
		"# TYPE zerohop_agent_generation gauge\nzerohop_agent_generation %llu\n"
		"# TYPE zerohop_agent_syncs_total counter\nzerohop_agent_syncs_total %llu\n"
		"# HELP zerohop_agent_sync_duration_milliseconds The last sync (load, policy, compile, maps).\n"
		"# TYPE zerohop_agent_sync_duration_milliseconds gauge\n"
		"zerohop_agent_sync_duration_milliseconds %.3f\n"
		"# TYPE zerohop_agent_degraded gauge\nzerohop_agent_degraded %d\n"
		"# HELP zerohop_state_degraded 1 when the last sync failed or the state store is out of reach (the maps keep the last state).\n"
		"# TYPE zerohop_state_degraded gauge\nzerohop_state_degraded %d\n"
		"# HELP zerohop_state_last_sync_timestamp_seconds When the kernel last got the store's state.\n"
		"# TYPE zerohop_state_last_sync_timestamp_seconds gauge\n"
		"zerohop_state_last_sync_timestamp_seconds %.3f\n"
		"# HELP zerohop_map_entries BPF map occupancy.\n# TYPE zerohop_map_entries gauge\n"
		"zerohop_map_entries{map=\"lb_svc\"} %d\n"
		"# TYPE zerohop_map_max_entries gauge\nzerohop_map_max_entries{map=\"lb_svc\"} %d\n",
		(unsigned long long)ob->ag.generation, (unsigned long long)ob->ag.syncs,
		ob->ag.last_sync_ms, ob->ag.degraded, ob->ag.state_degraded, ob->ag.last_sync_ts,
		ob->ag.n_svcs, ZH_LB_MAX_SVC);
}

/* ---- HTTP (O4) ---------------------------------------------------------------------- */

static void http_reply(int fd, const char *status, const char *ctype, const char *body,
		       size_t len)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, ctype, len);

	if (send(fd, hdr, (size_t)n, MSG_NOSIGNAL) != n)
		return;
	while (len) {
		ssize_t w = send(fd, body, len, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		body += w;
		len -= (size_t)w;
	}
}

static void serve_one(struct ag_obs *ob, int lfd)
{
	struct timeval tv = { .tv_sec = 1 };
	char req[1024], path[256] = "";
	char *body = NULL;
	size_t blen = 0;
	ssize_t n;
	FILE *f;
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = recv(fd, req, sizeof(req) - 1, 0);
	if (n <= 0)
		goto out;
	req[n] = '\0';
	if (sscanf(req, "GET %255s", path) != 1) {
		http_reply(fd, "405 Method Not Allowed", "text/plain", "GET only\n", 9);
		goto out;
	}
	if (!strcmp(path, "/metrics")) {
		f = open_memstream(&body, &blen);
		render_metrics(ob, f);
		fclose(f);
		http_reply(fd, "200 OK", "text/plain; version=0.0.4", body, blen);
	} else if (!strncmp(path, "/flows", 6)) {
		int follow = strstr(path, "follow=1") != NULL;
		uint64_t first = ob->ring_n > ZH_OBS_FLOW_RING ? ob->ring_n - ZH_OBS_FLOW_RING : 0;

		f = open_memstream(&body, &blen);
		for (uint64_t i = first; i < ob->ring_n; i++) {
			char line[1024];
			size_t ln = flow_line(ob, &ob->ring[i % ZH_OBS_FLOW_RING], line, sizeof(line));

			if (ln)
				fwrite(line, 1, ln, f);
		}
		fclose(f);
		if (!follow) {
			http_reply(fd, "200 OK", "application/x-ndjson", body, blen);
			goto out;
		}
		if (ob->n_follow == ZH_OBS_MAX_FOLLOWERS) {
			http_reply(fd, "503 Service Unavailable", "text/plain", "too many followers\n", 19);
			goto out;
		}
		dprintf(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n");
		if (blen && send(fd, body, blen, MSG_NOSIGNAL) != (ssize_t)blen)
			goto out;
		ob->followers[ob->n_follow++] = fd;
		free(body);
		return;
	} else {
		http_reply(fd, "404 Not Found", "text/plain", "try /metrics or /flows\n", 23);
	}
out:
	free(body);
	close(fd);
}

static int listen_tcp(const char *addr)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(addr, ':');
	int fd, one = 1;

	if (!colon || colon - addr >= (long)sizeof(host))
		return -EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || atoi(colon + 1) <= 0 ||
	    atoi(colon + 1) > 65535)
		return -EINVAL;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 16)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int ag_obs_pollfds(struct ag_obs *ob, struct pollfd *p)
{
	int n = 0;

	if (!ob)
		return 0;
	p[n++] = (struct pollfd){ .fd = ring_buffer__epoll_fd(ob->rb), .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = ob->lfd_tcp, .events = POLLIN };	/* -1: ignored */
	p[n++] = (struct pollfd){ .fd = ob->lfd_unix, .events = POLLIN };
	return n;
}

/* O9: wall clock minus the kernel's monotonic clock (bpf_ktime_get_ns),
 * read once per drain, not per event: two clock reads cost ~320 ns on this
 * VM (kvm-clock), more than a third of what an event costs the agent. */
static void wall_off_update(struct ag_obs *ob)
{
	struct timespec rt, mt;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	ob->wall_off = (double)rt.tv_sec + rt.tv_nsec / 1e9 - ((double)mt.tv_sec + mt.tv_nsec / 1e9);
}

static void obs_consume(struct ag_obs *ob)
{
	wall_off_update(ob);
	ring_buffer__consume(ob->rb);
}

void ag_obs_handle(struct ag_obs *ob, const struct pollfd *p, int n)
{
	if (!ob || n < 3)
		return;
	obs_consume(ob);	/* readable, or the drain tick */
	if (p[1].fd >= 0 && (p[1].revents & POLLIN))
		serve_one(ob, p[1].fd);
	if (p[2].fd >= 0 && (p[2].revents & POLLIN)) {
		obs_consume(ob);	/* the CLI sees what happened so far */
		serve_one(ob, p[2].fd);
	}
}

/* ---- load / attach ------------------------------------------------------------------ */

/* The accel_sk map the pinned accel sock_ops program holds (it is not
 * pinned itself): found by name among that program's maps. -1: none. */
static int accel_sk_fd(const char *pin_dir)
{
	struct bpf_prog_info info = {};
	uint32_t ids[16], len = sizeof(info);
	char path[320];
	int pfd, fd = -1;

	snprintf(path, sizeof(path), "%s/accel_sockops", pin_dir);
	pfd = bpf_obj_get(path);
	if (pfd < 0)
		return -1;
	info.nr_map_ids = 16;
	info.map_ids = (uintptr_t)ids;
	if (bpf_obj_get_info_by_fd(pfd, &info, &len))
		goto out;
	for (uint32_t i = 0; i < info.nr_map_ids && i < 16 && fd < 0; i++) {
		struct bpf_map_info mi = {};
		uint32_t ml = sizeof(mi);
		int mfd = bpf_map_get_fd_by_id(ids[i]);

		if (mfd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(mfd, &mi, &ml) && !strcmp(mi.name, "accel_sk") &&
		    mi.value_size == sizeof(struct zh_accel_sk))
			fd = mfd;
		else
			close(mfd);
	}
out:
	close(pfd);
	return fd;
}

/* The tables of an ag_obs, no kernel object or listener yet (O1). */
static struct ag_obs *obs_alloc(const char *node, const char *pin_dir, int max_series)
{
	struct ag_obs *ob = zh_calloc(1, sizeof(*ob));

	ob->lfd_tcp = ob->lfd_unix = ob->fd_cgpod = ob->fd_stats = -1;
	snprintf(ob->node, sizeof(ob->node), "%s", node);
	snprintf(ob->pin_dir, sizeof(ob->pin_dir), "%s", pin_dir);
	ob->max = max_series > 0 ? max_series : ZH_OBS_DEFAULT_MAX_SERIES;
	ob->slots = 2 * ob->max;
	ob->ser = zh_calloc((size_t)ob->slots, sizeof(*ob->ser));
	ob->drops = zh_calloc((size_t)ob->slots, sizeof(*ob->drops));
	ob->opens = zh_calloc(OBS_OPEN_SLOTS, sizeof(*ob->opens));
	for (struct series *s = &ob->ser_over; s; s = NULL) {
		s->used = 1;
		s->reporter = ZH_OBS_ROLE_CLIENT;
		strcpy(s->src_wl, "overflow");
		strcpy(s->src_ns, "overflow");
		strcpy(s->dst_svc, "overflow");
		strcpy(s->dst_svc_ns, "overflow");
		strcpy(s->dst_wl, "overflow");
		strcpy(s->dst_ns, "overflow");
	}
	ob->ser_over.used = 0;	/* shown once something overflowed */
	ob->drop_over.reason = ZH_OBS_R_OTHER;
	strcpy(ob->drop_over.src_wl, "overflow");
	strcpy(ob->drop_over.src_ns, "overflow");
	strcpy(ob->drop_over.dst_svc, "overflow");
	strcpy(ob->drop_over.dst_svc_ns, "overflow");
	return ob;
}

struct ag_obs *ag_obs_new_detached(const char *node, int max_series)
{
	/* an empty pin dir: render_metrics finds no policy or LB counters */
	return obs_alloc(node ? node : "", "", max_series);
}

static void wall_off_update(struct ag_obs *ob);

void ag_obs_feed(struct ag_obs *ob, const struct zh_obs_event *e)
{
	if (!ob || !e)
		return;
	if (!ob->wall_off)
		wall_off_update(ob);
	on_event(ob, (void *)e, (e->flags & ZH_OBS_F_V6) ? sizeof(struct zh_obs_event6) : sizeof(*e));
}

void ag_obs_write_metrics(struct ag_obs *ob, FILE *f)
{
	if (ob && f)
		render_metrics(ob, f);
}

/* An obs_stats pinned by an agent with fewer counters (ZH_OBS_ST_MAX
 * grew) would fail the load: it holds statistics only, so it is dropped
 * and made anew. 0, or -errno from unlink(2). */
static int obs_stats_pin_check(const char *path)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	int fd = bpf_obj_get(path), stale;

	if (fd < 0)
		return 0;	/* none pinned: made at load */
	stale = !bpf_obj_get_info_by_fd(fd, &info, &len) && info.max_entries != ZH_OBS_ST_MAX;
	close(fd);
	if (!stale)
		return 0;
	zh_info("obs: %s has %u counters, this agent %d: made anew", path, info.max_entries,
		ZH_OBS_ST_MAX);
	return unlink(path) ? -errno : 0;
}

int ag_obs_open(const struct ag_obs_opts *o, struct ag_obs **out)
{
	struct bpf_map *maps[OBS_NMAPS];
	struct bpf_program *progs[OBS_NLINKS];
	struct ag_obs *ob;
	char path[320];
	int ret, i, cgfd = -1, afd;

	ob = obs_alloc(o->node, o->pin_dir, o->max_series);
	ob->skel = zh_obs__open();
	if (!ob->skel) {
		ret = -errno;
		goto fail;
	}
	maps[0] = ob->skel->maps.obs_events;
	maps[1] = ob->skel->maps.obs_stats;
	maps[2] = ob->skel->maps.obs_scrx;
	maps[3] = ob->skel->maps.obs_scrx6;
	for (i = 0; i < OBS_NMAPS; i++) {
		snprintf(path, sizeof(path), "%s/%s", o->pin_dir, map_pins[i]);
		ret = maps[i] == ob->skel->maps.obs_stats ? obs_stats_pin_check(path) : 0;
		if (!ret)
			ret = bpf_map__set_pin_path(maps[i], path);
		if (ret)
			goto fail;
	}
	snprintf(path, sizeof(path), "%s/lb_sock", o->pin_dir);
	ret = bpf_map__set_pin_path(ob->skel->maps.lb_sock, path);
	if (ret)
		goto fail;
	afd = accel_sk_fd(o->pin_dir);
	if (afd >= 0) {
		ret = bpf_map__reuse_fd(ob->skel->maps.accel_sk, afd);
		close(afd);
		if (ret)
			goto fail;
	}	/* else: accel not loaded, a private (always empty) accel_sk */
	ret = zh_obs__load(ob->skel);
	if (ret) {
		zh_err("obs: load BPF programs: %s", strerror(-ret));
		goto fail;
	}
	progs[0] = ob->skel->progs.zh_obs_connect4;
	progs[1] = ob->skel->progs.zh_obs_connect6;
	progs[2] = ob->skel->progs.zh_obs_sockops;
	progs[3] = ob->skel->progs.zh_obs_release;
	for (i = 0; i < OBS_NLINKS; i++) {
		snprintf(path, sizeof(path), "%s/%s", o->pin_dir, link_pins[i]);
		if (access(path, F_OK) == 0) {
			ob->links[i] = bpf_link__open(path);
			if (!ob->links[i] || bpf_link__update_program(ob->links[i], progs[i])) {
				ret = -errno;
				zh_err("obs: adopt pinned link %s: %s", path, strerror(-ret));
				goto fail;
			}
			continue;
		}
		if (cgfd < 0) {
			cgfd = o->cgroup ? open(o->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
			if (cgfd < 0) {
				ret = o->cgroup ? -errno : -EINVAL;
				goto fail;
			}
		}
		ob->links[i] = bpf_program__attach_cgroup(progs[i], cgfd);
		if (!ob->links[i]) {
			ret = -errno;
			zh_err("obs: attach %s to %s: %s", bpf_program__name(progs[i]), o->cgroup,
			       strerror(-ret));
			goto fail;
		}
		ret = bpf_link__pin(ob->links[i], path);
		if (ret)
			goto fail;
	}
	if (cgfd >= 0)
		close(cgfd);
	cgfd = -1;
	ob->fd_stats = bpf_map__fd(ob->skel->maps.obs_stats);
	snprintf(path, sizeof(path), "%s/pol_cgpod", o->pin_dir);
	ob->fd_cgpod = bpf_obj_get(path);	/* -1 without policy: drops lack a source */
	ob->rb = ring_buffer__new(bpf_map__fd(ob->skel->maps.obs_events), on_event, ob, NULL);
	if (!ob->rb) {
		ret = -errno;
		goto fail;
	}
	if (o->metrics_addr) {
		ob->lfd_tcp = listen_tcp(o->metrics_addr);
		if (ob->lfd_tcp < 0) {
			ret = ob->lfd_tcp;
			zh_err("obs: --metrics-addr %s: %s", o->metrics_addr, strerror(-ret));
			goto fail;
		}
	}
	if (o->sock_path) {
		snprintf(ob->sock_path, sizeof(ob->sock_path), "%s", o->sock_path);
		ob->lfd_unix = listen_unix(o->sock_path);
		if (ob->lfd_unix < 0)
			zh_warn("obs: unix socket %s: %s (observe/top cannot reach this agent)",
				o->sock_path, strerror(-ob->lfd_unix));
	}
	*out = ob;
	return 0;
fail:
	if (cgfd >= 0)
		close(cgfd);
	ag_obs_close(ob, 0);
	return ret ? ret : -EINVAL;
}

void ag_obs_close(struct ag_obs *ob, int unpin)
{
	if (!ob)
		return;
	for (int i = 0; i < OBS_NLINKS; i++) {
		if (!ob->links[i])
			continue;
		if (unpin) {
			bpf_link__unpin(ob->links[i]);
			bpf_link__detach(ob->links[i]);
		}
		bpf_link__destroy(ob->links[i]);
	}
	if (unpin)
		ag_obs_cleanup(ob->pin_dir);
	ring_buffer__free(ob->rb);
	zh_obs__destroy(ob->skel);
	if (ob->lfd_tcp >= 0)
		close(ob->lfd_tcp);
	if (ob->lfd_unix >= 0) {
		close(ob->lfd_unix);
		unlink(ob->sock_path);
	}
	if (ob->fd_cgpod >= 0)
		close(ob->fd_cgpod);
	for (int i = 0; i < ob->n_follow; i++)
		close(ob->followers[i]);
	free(ob->ser);
	free(ob->drops);
	free(ob->opens);
	free(ob->pods);
	free(ob->pods6);
	free(ob->svcs);
	free(ob->eps);
	free(ob->strs);
	free(ob);
}

int ag_obs_read_pinned_stats(const char *pin_dir, uint64_t *events, uint64_t *lost)
{
	char path[320];
	int fd;

	snprintf(path, sizeof(path), "%s/obs_stats", pin_dir);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	*events = percpu_sum(fd, ZH_OBS_ST_EVENTS);
	*lost = percpu_sum(fd, ZH_OBS_ST_LOST);
	close(fd);
	return 0;
}

/* Detach the pinned links (a detached link stops the program) and unlink
 * every obs pin. 0. */
int ag_obs_cleanup(const char *pin_dir)
{
	char path[320];

	for (int i = 0; i < OBS_NLINKS; i++) {
		struct bpf_link *l;

		snprintf(path, sizeof(path), "%s/%s", pin_dir, link_pins[i]);
		l = bpf_link__open(path);
		if (l) {
			bpf_link__detach(l);
			bpf_link__destroy(l);
		}
		unlink(path);
	}
	for (int i = 0; i < OBS_NMAPS; i++) {
		snprintf(path, sizeof(path), "%s/%s", pin_dir, map_pins[i]);
		unlink(path);
	}
	/* pinned by agents before the per-socket record went (O11) */
	snprintf(path, sizeof(path), "%s/obs_sk", pin_dir);
	unlink(path);
	return 0;
}
