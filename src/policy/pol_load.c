/* pol_load.c — load, adopt and sync the NetworkPolicy datapath.
 *
 * Design note: pins, adoption, make-before-break
 * ----------------------------------------------
 * Under the pin dir (e.g. /sys/fs/bpf/zerohop/LAB/NODE), next to the service
 * load balancer's and the accelerator's objects, everything is named pol_*
 * (plus the capture maps zh_l7cap_sock and zh_l7cap_cfg, shared by name with
 * the load balancer and the node proxy: abi/l7cap.h, docs/policy.md "L7
 * Services"):
 *
 *   pol_open:  maps pinned? -- yes --> libbpf reuses them (cached verdicts,
 *                   |                  counters and the live tables survive);
 *                   |                  both slots are read back (invariant 5)
 *                   no --> created, pinned
 *              links pinned? -- yes, same cgroup --> bpf_link_update to the
 *                   |                                 new programs (no gap)
 *                   no / other cgroup --> attach, pin
 *              (connect4 always; the cgroup_skb pair as invariant 6 says)
 *
 *   pol_sync:  compile (+ this node's addresses) --> identical to the
 *                 |                   tables in force? --> done (no bump)
 *                 v
 *              inactive slot: its content known (p->prev)?
 *                 yes --> bring its maps from prev to new by a diff
 *                 no  --> create fresh inner maps (5 tables), fill them
 *                 |           --error--> forget prev (rebuild next time);
 *                 v                      the active slot is untouched
 *              outer[inactive slot] = the maps (if fresh)
 *                 |
 *                 v
 *              pol_cfg.state = (gen+1) << 1 | slot  (one 4-byte write: the flip)
 *              prev = last, last = new
 *
 * Invariants:
 *  1. The active slot's inner maps are never written: a reader that loaded
 *     the state word before a flip keeps a consistent table set. (A program
 *     run that read the state word two flips ago could see the inactive slot
 *     being rewritten; runs last microseconds, syncs are milliseconds apart,
 *     and the worst case is one packet judged by the newer tables.)
 *  2. The generation only moves when the tables changed, so established
 *     connections are re-judged only when their verdict may have changed.
 *  3. Every failure before the flip leaves pol_cfg, the active slot and so
 *     the enforced policy untouched.
 *  4. p->last / p->prev describe the active / inactive slot exactly, or are
 *     NULL (unknown: a failed write, or a slot that could not be read back),
 *     which forces a full rebuild of that slot. The diff makes a one-policy
 *     change cost the compile plus a few map writes, whatever the number of
 *     policies.
 *  5. Adoption (pol_open with pins from an earlier opener) reads both slots
 *     back from the kernel into p->last / p->prev, and keeps the pinned
 *     generation. So an agent restart does not move the generation unless
 *     the state it syncs compiles to different tables: short-circuited
 *     sockets (accel, which compares generations) stay short-circuited and
 *     cached verdicts stay valid. Reading costs two syscalls per entry,
 *     once per start (test_scale: 0.17 s with 10,000 policies, 0.7 s with
 *     50,000, both slots, ASan build on a busy machine); the pinned
 *     datapath keeps enforcing meanwhile.
 *  6. The per-packet programs (cgroup_skb ingress + egress) are attached to
 *     the node's cgroup exactly while the tables in force isolate some pod
 *     of this node: attached before the flip that first isolates one,
 *     detached after the flip that leaves none (pol_sync; pol_open adopts
 *     pinned ones and applies the same rule). A node without policy then
 *     pays nothing per packet (docs/policy.md "Cost"). Connections that
 *     began while they were detached carry no per-socket state; the
 *     programs judge them on their next packet like connections older
 *     than the agent (either opener for TCP; the packet's direction for
 *     UDP), and treat one to this node's proxy as captured.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/bpfmap.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "zerohop/policy.h"
#include "pol_int.h"
#include "policy.skel.h"

struct pol {
	struct zh_policy *skel;
	struct bpf_link *link[POL_N_LINKS];	/* ingress, egress, connect4, sockops, connect6 */
	char cg_path[PATH_MAX];		/* node cgroup ("" when not attached) */
	char pin_dir[PATH_MAX];
	uint32_t state;			/* pol_cfg.state in force */
	struct pol_compiled *last;	/* tables in the active slot (NULL: unknown) */
	struct pol_compiled *prev;	/* tables in the inactive slot (NULL: unknown) */
	struct pol_limits lim;		/* what pol_sync compiles against */
	uint32_t *named;		/* policy ids already in pol_names (open addressing) */
	uint32_t named_cap, n_named;
};

static struct pol_compiled *read_slot(struct pol *p, uint32_t slot);

/* Remember id in p->named; true when it was new (so pol_names needs it). */
static bool named_add(struct pol *p, uint32_t id)
{
	uint32_t slot;

	if (p->n_named * 2 >= p->named_cap) {
		uint32_t *old = p->named, cap = p->named_cap;

		p->named_cap = cap ? cap * 2 : 1024;
		p->named = zh_calloc(p->named_cap, sizeof(*p->named));
		p->n_named = 0;
		for (uint32_t i = 0; i < cap; i++)
			if (old[i])
				named_add(p, old[i]);
		free(old);
	}
	for (slot = id & (p->named_cap - 1); p->named[slot]; slot = (slot + 1) & (p->named_cap - 1))
		if (p->named[slot] == id)
			return false;
	p->named[slot] = id;
	p->n_named++;
	return true;
}

static double pol_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

const char *const pol_link_names[POL_N_LINKS] = { "pol_link_ingress", "pol_link_egress",
						   "pol_link_connect4", "pol_link_sockops",
						   "pol_link_connect6" };

static const char *const drop_names[POL_DROP__MAX] = {
	[POL_DROP_NONE] = "none",
	[POL_DROP_INGRESS_DENIED] = "ingress_denied",
	[POL_DROP_EGRESS_DENIED] = "egress_denied",
	[POL_DROP_REVOKED] = "revoked",
	[POL_DROP_MTLS_PLAINTEXT] = "mtls_plaintext",
};

const char *pol_drop_reason_name(uint32_t reason)
{
	return reason < POL_DROP__MAX ? drop_names[reason] : "unknown";
}

/* Attach prog to the cgroup through the pinned link, adopting it when it
 * exists on the same cgroup. */
static int attach_one(struct pol *p, int i, struct bpf_program *prog, const char *cg_path)
{
	char path[PATH_MAX + 64];
	struct bpf_link_info info = {};
	uint32_t ilen = sizeof(info);
	struct bpf_link *link;
	struct stat cst;
	int cg_fd, ret;

	snprintf(path, sizeof(path), "%s/%s", p->pin_dir, pol_link_names[i]);
	if (stat(cg_path, &cst))
		return -errno;
	link = access(path, F_OK) == 0 ? bpf_link__open(path) : NULL;
	if (link) {
		if (!bpf_obj_get_info_by_fd(bpf_link__fd(link), &info, &ilen) &&
		    info.type == BPF_LINK_TYPE_CGROUP && info.cgroup.cgroup_id == cst.st_ino &&
		    bpf_link__update_program(link, prog) == 0) {
			p->link[i] = link;
			return 0;
		}
		zh_warn("policy: replacing stale link %s", path);
		bpf_link__unpin(link);
		bpf_link__detach(link);
		bpf_link__destroy(link);
	}
	cg_fd = open(cg_path, O_RDONLY | O_DIRECTORY);
	if (cg_fd < 0)
		return -errno;
	link = bpf_program__attach_cgroup(prog, cg_fd);
	ret = libbpf_get_error(link);
	close(cg_fd);
	if (ret) {
		zh_err("policy: attach %s to %s: %s", bpf_program__name(prog), cg_path,
		       strerror(-ret));
		return ret;
	}
	ret = bpf_link__pin(link, path);
	if (ret) {
		zh_err("policy: pin %s: %s", path, strerror(-ret));
		bpf_link__destroy(link);
		return ret;
	}
	p->link[i] = link;
	return 0;
}

/* Drop link i: unpinned and detached, so the hook is gone from the cgroup. */
static void detach_one(struct pol *p, int i)
{
	char path[PATH_MAX + 64];

	if (p->link[i]) {
		bpf_link__unpin(p->link[i]);
		bpf_link__detach(p->link[i]);
		bpf_link__destroy(p->link[i]);
		p->link[i] = NULL;
	}
	snprintf(path, sizeof(path), "%s/%s", p->pin_dir, pol_link_names[i]);
	unlink(path);	/* an earlier opener's pin we did not adopt */
}

/* Invariant 6: does any pod of this node need the per-packet programs?
 * (isolated, or STRICT: policy.bpf.c invariant 11) */
static bool any_isolated(const struct pol_compiled *c)
{
	const uint32_t iso = POL_F_ISO_INGRESS | POL_F_ISO_EGRESS | POL_F_MTLS;

	for (int i = 0; i < c->n_ipc; i++)
		if ((c->ipc[i].val.flags & POL_F_LOCAL) && (c->ipc[i].val.flags & iso))
			return true;
	for (int i = 0; i < c->n_ipc6; i++)	/* an IPv6-only pod */
		if ((c->ipc6[i].val.flags & POL_F_LOCAL) && (c->ipc6[i].val.flags & iso))
			return true;
	return false;
}

/* Attach (want) or detach (!want) the cgroup_skb pair (invariant 6). */
static int skb_links(struct pol *p, bool want)
{
	int ret;

	if (!p->cg_path[0] || want == (p->link[POL_DIR_INGRESS] != NULL))
		return 0;
	if (!want) {
		detach_one(p, POL_DIR_INGRESS);
		detach_one(p, POL_DIR_EGRESS);
		zh_dbg("policy: no isolated pod on this node: per-packet programs detached");
		return 0;
	}
	ret = attach_one(p, POL_DIR_INGRESS, p->skel->progs.pol_ingress, p->cg_path);
	if (!ret)
		ret = attach_one(p, POL_DIR_EGRESS, p->skel->progs.pol_egress, p->cg_path);
	if (ret) {
		detach_one(p, POL_DIR_INGRESS);
		return ret;
	}
	zh_dbg("policy: a pod of this node is isolated: per-packet programs attached");
	return 0;
}

/* pol_drops is sized by the number of drop reasons (zh_map_pin_drop_resized;
 * per-policy drops in pol_pdrops are kept). */
static void drops_pin_check(const char *pin_dir)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/pol_drops", pin_dir);
	zh_map_pin_drop_resized(path, POL_DROP__MAX, "policy");
}

int pol_open(const char *cgroup_path, const char *pin_dir, struct pol **out)
{
	struct pol *p = zh_calloc(1, sizeof(*p));
	struct bpf_map *map;
	struct pol_cfg cfg;
	uint32_t zero = 0;
	int ret;

	*out = NULL;
	p->lim = pol_default_limits;
	snprintf(p->pin_dir, sizeof(p->pin_dir), "%s", pin_dir);
	ret = zh_mkdir_p(pin_dir, 0700);
	if (ret) {
		zh_err("policy: mkdir %s: %s", pin_dir, strerror(-ret));
		goto fail;
	}
	p->skel = zh_policy__open();
	if (!p->skel) {
		ret = -errno;
		zh_err("policy: open BPF object: %s", strerror(-ret));
		goto fail;
	}
	drops_pin_check(pin_dir);
	bpf_object__for_each_map(map, p->skel->obj) {
		char path[PATH_MAX + 64];

		/* ours, and the capture maps shared by name with the service
		 * load balancer and the node proxy (abi/l7cap.h: whoever loads
		 * first creates them); not the .inner templates */
		if (strncmp(bpf_map__name(map), "pol_", 4) != 0 &&
		    strncmp(bpf_map__name(map), "zh_l7cap_", 9) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_dir, bpf_map__name(map));
		ret = bpf_map__set_pin_path(map, path);
		if (ret)
			goto fail;
	}
	ret = zh_policy__load(p->skel);
	if (ret) {
		zh_err("policy: load BPF programs (or adopt pins in %s): %s", pin_dir,
		       strerror(-ret));
		goto fail;
	}
	if (bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.pol_cfg), &zero, &cfg) == 0)
		p->state = cfg.state;
	if (p->state) {
		/* adopted: learn what both slots hold (invariant 5), so that a
		 * restarted agent's first sync of unchanged state is a no-op */
		p->last = read_slot(p, p->state & 1);
		p->prev = read_slot(p, (p->state & 1) ^ 1);
	}
	if (cgroup_path) {
		/* connect4 always; the per-packet pair only while some pod of
		 * the node is isolated (invariant 6): adopted when pinned, else
		 * pol_sync attaches it when the tables need it */
		ret = attach_one(p, 2, p->skel->progs.pol_connect4, cgroup_path);
		if (!ret)
			ret = attach_one(p, 3, p->skel->progs.pol_sockops, cgroup_path);
		if (!ret)	/* AF_INET6 sockets to v4-mapped addresses */
			ret = attach_one(p, 4, p->skel->progs.pol_connect6, cgroup_path);
		for (int i = POL_DIR_INGRESS; !ret && i <= POL_DIR_EGRESS; i++) {
			char path[PATH_MAX + 64];

			snprintf(path, sizeof(path), "%s/%s", pin_dir, pol_link_names[i]);
			if (access(path, F_OK) == 0)
				ret = attach_one(p, i, i == POL_DIR_INGRESS ? p->skel->progs.pol_ingress
									    : p->skel->progs.pol_egress,
						 cgroup_path);
		}
		if (ret)
			goto fail;
		snprintf(p->cg_path, sizeof(p->cg_path), "%s", cgroup_path);
		if (!p->link[POL_DIR_INGRESS] != !p->link[POL_DIR_EGRESS] ||
		    (p->link[POL_DIR_INGRESS] && !p->state)) {
			detach_one(p, POL_DIR_INGRESS);	/* half a pair: start over */
			detach_one(p, POL_DIR_EGRESS);
		}
		if (p->last && skb_links(p, any_isolated(p->last)))
			goto fail;
	}
	*out = p;
	return 0;
fail:
	pol_close(p, 0);
	return ret < 0 ? ret : -EINVAL;
}

void pol_set_limits(struct pol *p, const struct pol_limits *lim)
{
	p->lim = lim ? *lim : pol_default_limits;
}

int pol_prog_fd(const struct pol *p, int dir)
{
	return bpf_program__fd(dir == POL_DIR_INGRESS ? p->skel->progs.pol_ingress :
							  p->skel->progs.pol_egress);
}

uint32_t pol_generation(const struct pol *p)
{
	return p ? p->state >> 1 : 0;
}

/* This node's own addresses (ingress exemption), from the agent's netns. */
static int node_ips(uint32_t **out)
{
	struct ifaddrs *ifa, *i;
	uint32_t *v = NULL;
	int n = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i; i = i->ifa_next) {
		uint32_t ip;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		if ((ntohl(ip) >> 24) == 127)
			continue;
		v = zh_realloc(v, (size_t)(n + 1) * sizeof(*v));
		v[n++] = ip;
	}
	freeifaddrs(ifa);
	*out = v;
	return n;
}

static int fail_err(struct md_err *err, int ret, const char *field, const char *what);

/* This node's own global IPv6 addresses (link-local ones only serve
 * neighbour discovery, which is ICMPv6 and always passes). */
static int node_ips6(struct in6_addr **out)
{
	struct ifaddrs *ifa, *i;
	struct in6_addr *v = NULL;
	int n = 0;

	*out = NULL;
	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i; i = i->ifa_next) {
		const struct in6_addr *a;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6)
			continue;
		a = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_LINKLOCAL(a))
			continue;
		v = zh_realloc(v, (size_t)(n + 1) * sizeof(*v));
		v[n++] = *a;
	}
	freeifaddrs(ifa);
	*out = v;
	return n;
}

/* The same for IPv6 (merge_node_ips): into ipc6, a pod address is never
 * the node's; this node's proxy address is. */
static int merge_node_ips6(struct pol_compiled *c, const struct in6_addr *nips, int n,
			   struct md_err *err)
{
	int added = 0;

	for (int i = 0; i < n; i++) {
		struct pol_ipc_val *e = (struct pol_ipc_val *)pol_ipc6_find(c, nips[i].s6_addr);

		if (e) {
			if (e->flags & POL_F_PROXY)
				e->flags |= POL_F_NODE;
			continue;
		}
		if ((uint32_t)(c->n_ipc6 + n) > POL_MAX_IPCACHE)
			return fail_err(err, -E2BIG, "pods", "IPv6 ipcache full with the node's addresses");
		c->ipc6 = zh_realloc(c->ipc6, (size_t)(c->n_ipc6 + 1) * sizeof(*c->ipc6));
		memcpy(c->ipc6[c->n_ipc6].ip, nips[i].s6_addr, 16);
		c->ipc6[c->n_ipc6].val = (struct pol_ipc_val){ .id = POL_ID_HOST, .flags = POL_F_NODE };
		c->n_ipc6++;
		added++;
	}
	if (added)
		qsort(c->ipc6, (size_t)c->n_ipc6, sizeof(*c->ipc6), pol_cmp_ipc6);
	return 0;
}

/* memcmp that accepts empty (NULL) arrays */
static bool same_bytes(const void *a, const void *b, size_t n)
{
	return n == 0 || memcmp(a, b, n) == 0;
}

/* struct pol_cidr has padding after len that the compiler does not clear:
 * compare field by field. */
static bool same_cidrs(const struct pol_compiled *a, const struct pol_compiled *b)
{
	for (int i = 0; i < a->n_cidrs; i++)
		if (a->cidrs[i].net != b->cidrs[i].net || a->cidrs[i].len != b->cidrs[i].len ||
		    a->cidrs[i].class_id != b->cidrs[i].class_id)
			return false;
	return true;
}

/* struct pol_cidr6 has padding too */
static bool same_cidrs6(const struct pol_compiled *a, const struct pol_compiled *b)
{
	for (int i = 0; i < a->n_cidrs6; i++)
		if (memcmp(a->cidrs6[i].net, b->cidrs6[i].net, 16) ||
		    a->cidrs6[i].len != b->cidrs6[i].len ||
		    a->cidrs6[i].class_id != b->cidrs6[i].class_id)
			return false;
	return true;
}

static bool same_tables(const struct pol_compiled *a, const struct pol_compiled *b)
{
	return a && b && a->n_ipc == b->n_ipc && a->n_cidrs == b->n_cidrs &&
	       a->n_rules == b->n_rules && a->n_ipc6 == b->n_ipc6 &&
	       a->n_cidrs6 == b->n_cidrs6 &&
	       same_bytes(a->ipc6, b->ipc6, (size_t)a->n_ipc6 * sizeof(*a->ipc6)) &&
	       same_cidrs6(a, b) &&
	       same_bytes(a->ipc, b->ipc, (size_t)a->n_ipc * sizeof(*a->ipc)) &&
	       same_cidrs(a, b) &&
	       same_bytes(a->rules, b->rules, (size_t)a->n_rules * sizeof(*a->rules));
}

/* Fill err with "WHAT: strerror" and return ret (a -errno). */
static int fail_err(struct md_err *err, int ret, const char *field, const char *what)
{
	snprintf(err->file, sizeof(err->file), "<policy>");
	snprintf(err->field, sizeof(err->field), "%s", field);
	snprintf(err->msg, sizeof(err->msg), "%s: %s", what, strerror(-ret));
	return ret;
}

/* Add this node's own addresses to the compiled ipcache (ingress
 * exemption), so that the tables in force are exactly c. */
static int merge_node_ips(struct pol_compiled *c, const uint32_t *nips, int n, struct md_err *err)
{
	int added = 0;

	for (int i = 0; i < n; i++) {
		/* c is ours to change: the entry lives in c->ipc */
		struct pol_ipc_val *e = (struct pol_ipc_val *)pol_ipc_find(c, nips[i]);

		if (e) {	/* a pod address is never the node's; this node's
				 * proxy address is (policy.bpf.c invariant 11) */
			if (e->flags & POL_F_PROXY)
				e->flags |= POL_F_NODE;
			continue;
		}
		if ((uint32_t)(c->n_ipc + n) > POL_MAX_IPCACHE)
			return fail_err(err, -E2BIG, "pods", "ipcache full with the node's addresses");
		c->ipc = zh_realloc(c->ipc, (size_t)(c->n_ipc + 1) * sizeof(*c->ipc));
		c->ipc[c->n_ipc].ip = nips[i];
		c->ipc[c->n_ipc].val = (struct pol_ipc_val){ .id = POL_ID_HOST, .flags = POL_F_NODE };
		c->n_ipc++;
		added++;
	}
	if (added)
		qsort(c->ipc, (size_t)c->n_ipc, sizeof(*c->ipc), pol_cmp_ipc);
	return 0;
}

/* The compiled tables, one inner map each per slot: ipcache, cidr classes,
 * rules, and the IPv6 twins of the first two (abi/policy.h). */
#define POL_N_TABS 5
enum { T_IPC, T_CIDR, T_RULES, T_IPC6, T_CIDR6 };

static const struct tabdef {
	const char *name, *what, *field;
	enum bpf_map_type type;
	uint32_t ksz, vsz, max;
} tabdefs[POL_N_TABS] = {
	{ "pol_ipc_t", "write ipcache", "pods", BPF_MAP_TYPE_HASH, sizeof(uint32_t),
	  sizeof(struct pol_ipc_val), POL_MAX_IPCACHE },
	{ "pol_cidr_t", "write cidr table", "ipBlock", BPF_MAP_TYPE_LPM_TRIE,
	  sizeof(struct pol_cidr_key), sizeof(uint32_t), POL_MAX_CIDRS },
	{ "pol_rules_t", "write rule table", "NetworkPolicy", BPF_MAP_TYPE_LPM_TRIE,
	  sizeof(struct pol_rule_key), sizeof(struct pol_rule_val), POL_MAX_RULES },
	{ "pol_ipc6_t", "write IPv6 ipcache", "pods", BPF_MAP_TYPE_HASH, 16,
	  sizeof(struct pol_ipc_val), POL_MAX_IPCACHE },
	{ "pol_cidr6_t", "write IPv6 cidr table", "ipBlock", BPF_MAP_TYPE_LPM_TRIE,
	  sizeof(struct pol_cidr6_key), sizeof(uint32_t), POL_MAX_CIDRS },
};

static void outer_fds(const struct pol *p, int fd[POL_N_TABS])
{
	fd[T_IPC] = bpf_map__fd(p->skel->maps.pol_ipc);
	fd[T_CIDR] = bpf_map__fd(p->skel->maps.pol_cidr);
	fd[T_RULES] = bpf_map__fd(p->skel->maps.pol_rules);
	fd[T_IPC6] = bpf_map__fd(p->skel->maps.pol_ipc6);
	fd[T_CIDR6] = bpf_map__fd(p->skel->maps.pol_cidr6);
}

/* One compiled table as the loader sees it: sorted elements and how an
 * element maps to a map key and value. */
struct tab {
	const void *v;
	int n;
	size_t size;
	int (*cmp)(const void *, const void *);
	size_t koff, klen, voff;	/* key and value inside the element (klen 0:
					 * a cidr class, keyed by an LPM key) */
	int i;				/* T_* */
};

static struct tab tab_of(const struct pol_compiled *c, int i)
{
	switch (i) {
	case T_IPC:
		return (struct tab){ c ? c->ipc : NULL, c ? c->n_ipc : 0, sizeof(struct pol_ipc),
				     pol_cmp_ipc, offsetof(struct pol_ipc, ip), sizeof(uint32_t),
				     offsetof(struct pol_ipc, val), i };
	case T_CIDR:
		return (struct tab){ c ? c->cidrs : NULL, c ? c->n_cidrs : 0, sizeof(struct pol_cidr),
				     pol_cmp_cidr, 0, 0, offsetof(struct pol_cidr, class_id), i };
	case T_IPC6:
		return (struct tab){ c ? c->ipc6 : NULL, c ? c->n_ipc6 : 0, sizeof(struct pol_ipc6),
				     pol_cmp_ipc6, offsetof(struct pol_ipc6, ip), 16,
				     offsetof(struct pol_ipc6, val), i };
	case T_CIDR6:
		return (struct tab){ c ? c->cidrs6 : NULL, c ? c->n_cidrs6 : 0,
				     sizeof(struct pol_cidr6), pol_cmp_cidr6, 0, 0,
				     offsetof(struct pol_cidr6, class_id), i };
	default:
		return (struct tab){ c ? c->rules : NULL, c ? c->n_rules : 0, sizeof(struct pol_rule),
				     pol_cmp_rule, offsetof(struct pol_rule, key),
				     sizeof(struct pol_rule_key), offsetof(struct pol_rule, val), i };
	}
}

union lpm_key {
	struct pol_cidr_key v4;
	struct pol_cidr6_key v6;
};

/* The map key of element e (cidr entries are stored as net/len, the map
 * wants an LPM key). */
static const void *tab_key(const struct tab *t, const void *e, union lpm_key *ck)
{
	if (!t->klen && t->i == T_CIDR6) {
		const struct pol_cidr6 *cl = e;

		ck->v6.prefixlen = cl->len;
		memcpy(ck->v6.ip, cl->net, 16);
		return ck;
	}
	if (!t->klen) {
		const struct pol_cidr *cl = e;

		ck->v4.prefixlen = cl->len;
		ck->v4.ip = cl->net;
		return ck;
	}
	return (const char *)e + t->koff;
}

/* The tables installed in slot, read back from the kernel into a struct
 * pol_compiled (ipc, cidrs and rules only; sorted like the compiler's), so
 * that an opener adopting the pins knows exactly what is in force
 * (invariant 5). NULL when the slot holds no tables or cannot be read: the
 * caller then treats its content as unknown. */
static struct pol_compiled *read_slot(struct pol *p, uint32_t slot)
{
	struct pol_compiled *c = zh_calloc(1, sizeof(*c));
	char *keys = NULL, *vals = NULL;
	int outer[POL_N_TABS];
	size_t n = 0;
	int fd = -1, ret = 0;

	outer_fds(p, outer);
	for (int i = 0; i < POL_N_TABS && !ret; i++) {
		const size_t ksz[1] = { tabdefs[i].ksz }, vsz[1] = { tabdefs[i].vsz };
		uint32_t id;

		if (bpf_map_lookup_elem(outer[i], &slot, &id)) {
			ret = -ENOENT;
			break;
		}
		fd = bpf_map_get_fd_by_id(id);
		if (fd < 0) {
			ret = -errno;
			break;
		}
		/* the maps read here are not written while we read them (invariant
		 * 1 for the active slot; only pol_sync writes the inactive one) */
		ret = zh_map_dump(fd, ksz[0], vsz[0], &keys, &vals, &n);
		close(fd);
		fd = -1;
		if (ret)
			break;
		for (size_t j = 0; j < n; j++) {
			const char *k = keys + j * ksz[0], *v = vals + j * vsz[0];

			if (i == T_IPC6) {
				if (!j)
					c->ipc6 = zh_calloc((size_t)n, sizeof(*c->ipc6));
				memcpy(c->ipc6[j].ip, k, 16);
				memcpy(&c->ipc6[j].val, v, vsz[0]);
			} else if (i == T_CIDR6) {
				const struct pol_cidr6_key *ck = (const void *)k;

				if (!j)
					c->cidrs6 = zh_calloc((size_t)n, sizeof(*c->cidrs6));
				memcpy(c->cidrs6[j].net, ck->ip, 16);
				c->cidrs6[j].len = (uint8_t)ck->prefixlen;
				memcpy(&c->cidrs6[j].class_id, v, vsz[0]);
			} else if (i == T_IPC) {
				if (!j)
					c->ipc = zh_calloc((size_t)n, sizeof(*c->ipc));
				memcpy(&c->ipc[j].ip, k, ksz[0]);
				memcpy(&c->ipc[j].val, v, vsz[0]);
			} else if (i == T_CIDR) {
				const struct pol_cidr_key *ck = (const void *)k;

				if (!j)
					c->cidrs = zh_calloc((size_t)n, sizeof(*c->cidrs));
				c->cidrs[j].net = ck->ip;
				c->cidrs[j].len = (uint8_t)ck->prefixlen;
				memcpy(&c->cidrs[j].class_id, v, vsz[0]);
			} else {
				if (!j)
					c->rules = zh_calloc((size_t)n, sizeof(*c->rules));
				memcpy(&c->rules[j].key, k, ksz[0]);
				memcpy(&c->rules[j].val, v, vsz[0]);
			}
		}
		if (i == T_IPC)
			c->n_ipc = (int)n;
		else if (i == T_CIDR)
			c->n_cidrs = (int)n;
		else if (i == T_IPC6)
			c->n_ipc6 = (int)n;
		else if (i == T_CIDR6)
			c->n_cidrs6 = (int)n;
		else
			c->n_rules = (int)n;
		free(keys);
		free(vals);
		keys = vals = NULL;
	}
	if (ret) {
		pol_compiled_free(c);
		return NULL;
	}
	if (c->n_ipc > 1)
		qsort(c->ipc, (size_t)c->n_ipc, sizeof(*c->ipc), pol_cmp_ipc);
	if (c->n_cidrs > 1)
		qsort(c->cidrs, (size_t)c->n_cidrs, sizeof(*c->cidrs), pol_cmp_cidr);
	if (c->n_rules > 1)
		qsort(c->rules, (size_t)c->n_rules, sizeof(*c->rules), pol_cmp_rule);
	if (c->n_ipc6 > 1)
		qsort(c->ipc6, (size_t)c->n_ipc6, sizeof(*c->ipc6), pol_cmp_ipc6);
	if (c->n_cidrs6 > 1)
		qsort(c->cidrs6, (size_t)c->n_cidrs6, sizeof(*c->cidrs6), pol_cmp_cidr6);
	return c;
}

/* Make map fd hold exactly new, given that it holds exactly old: a merge
 * walk over the two sorted arrays (delete, insert, update changed). */
static int apply_diff(int fd, const struct tab *old, const struct tab *new)
{
	int i = 0, j = 0;

	while (i < old->n || j < new->n) {
		const char *o = i < old->n ? (const char *)old->v + (size_t)i * old->size : NULL;
		const char *n = j < new->n ? (const char *)new->v + (size_t)j * new->size : NULL;
		union lpm_key ck;
		int c = !o ? 1 : !n ? -1 : new->cmp(o, n);

		if (c < 0) {
			if (bpf_map_delete_elem(fd, tab_key(old, o, &ck)) && errno != ENOENT)
				return -errno;
			i++;
		} else if (c > 0 || memcmp(o, n, new->size) != 0) {
			if (bpf_map_update_elem(fd, tab_key(new, n, &ck), n + new->voff, BPF_ANY))
				return -errno;
			i += c == 0;
			j++;
		} else {
			i++;
			j++;
		}
	}
	return 0;
}

/* fds[] get the inner maps of slot to write: the existing ones brought from
 * prev to c by a diff when prev is known, else fresh maps filled from c.
 * The caller closes fds. */
static int build_slot(struct pol *p, uint32_t slot, const struct pol_compiled *c,
		      int fds[POL_N_TABS], struct md_err *err)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_NO_PREALLOC);
	int outer[POL_N_TABS], ret;

	outer_fds(p, outer);
	for (int i = 0; i < POL_N_TABS; i++) {
		const struct tabdef *d = &tabdefs[i];
		struct tab old = tab_of(p->prev, i), new = tab_of(c, i);
		uint32_t id;

		fds[i] = -1;
		if (p->prev && bpf_map_lookup_elem(outer[i], &slot, &id) == 0)
			fds[i] = bpf_map_get_fd_by_id(id);
		if (fds[i] < 0) {
			old = tab_of(NULL, i);	/* a fresh, empty map */
			fds[i] = bpf_map_create(d->type, d->name, d->ksz, d->vsz, d->max, &o);
			if (fds[i] < 0)
				return fail_err(err, -errno, "maps", "create policy table");
		}
		ret = apply_diff(fds[i], &old, &new);
		if (ret)
			return fail_err(err, ret, d->field, d->what);
	}
	return 0;
}

/* Remove every key of the cgroup-id map FD that is not one of KEEP[N]. */
static void prune_cgpods(int fd, const uint64_t *keep, int n)
{
	uint64_t k, next, *pk = NULL;

	while (bpf_map_get_next_key(fd, pk, &next) == 0) {
		bool found = false;

		for (int i = 0; i < n && !found; i++)
			found = keep[i] == next;
		if (!found && bpf_map_delete_elem(fd, &next) == 0) {
			pk = NULL;	/* restart: the walk order changed */
			continue;
		}
		k = next;
		pk = &k;
	}
}

static bool ip6_set(const struct in6_addr *a)
{
	static const struct in6_addr zero;

	return memcmp(a, &zero, sizeof(zero)) != 0;
}

/* pol_cgpod: the cgroup id of each local pod -> its IP, for connect4 and
 * connect6; pol_cgpod6 the same for pods without IPv4 -> their IPv6. Pod
 * cgroups are the node cgroup's children named NS_POD (the kubelet layout of
 * lab.h); a pod whose cgroup is not there is simply not judged at connect
 * (its SYN still is). Stale entries are removed after the new ones are in. */
static void sync_cgpods(struct pol *p, const struct md_state *st, const char *node)
{
	int fd4 = bpf_map__fd(p->skel->maps.pol_cgpod), fd6 = bpf_map__fd(p->skel->maps.pol_cgpod6);
	uint64_t *keep[2] = { NULL, NULL }, k;
	int n_keep[2] = { 0, 0 };

	if (!p->cg_path[0])
		return;
	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *pod = &st->pods[i];
		char path[PATH_MAX + 600];
		struct stat sb;
		int v6 = !pod->ip;

		if ((v6 && !ip6_set(&pod->ip6)) ||
		    (node && (!pod->spec.node_name || strcmp(pod->spec.node_name, node))))
			continue;
		snprintf(path, sizeof(path), "%s/%s_%s", p->cg_path, pod->meta.ns, pod->meta.name);
		if (stat(path, &sb))
			continue;
		k = (uint64_t)sb.st_ino;	/* cgroup2: the inode number is the cgroup id */
		if (bpf_map_update_elem(v6 ? fd6 : fd4, &k, v6 ? (const void *)&pod->ip6 : &pod->ip,
					BPF_ANY))
			continue;
		keep[v6] = zh_realloc(keep[v6], (size_t)(n_keep[v6] + 1) * sizeof(*keep[v6]));
		keep[v6][n_keep[v6]++] = k;
	}
	prune_cgpods(fd4, keep[0], n_keep[0]);
	prune_cgpods(fd6, keep[1], n_keep[1]);
	free(keep[0]);
	free(keep[1]);
}

int pol_sync(struct pol *p, const struct md_state *st, const char *node, struct md_err *err)
{
	struct pol_compiled *c = NULL;
	struct pol_cfg cfg = {};
	uint32_t *nips = NULL, zero = 0, slot, gen;
	int fds[POL_N_TABS] = { -1, -1, -1, -1, -1 }, n_nips, ret;
	bool need_skb;
	int outer[POL_N_TABS];
	double t0 = pol_now_ms(), t1, t2, t3;

	outer_fds(p, outer);
	ret = pol_compile(st, node, &p->lim, &c, err);
	if (ret)
		return ret;
	n_nips = node_ips(&nips);
	ret = merge_node_ips(c, nips, n_nips, err);
	free(nips);
	if (!ret) {
		struct in6_addr *nips6;

		n_nips = node_ips6(&nips6);
		ret = merge_node_ips6(c, nips6, n_nips, err);
		free(nips6);
	}
	if (ret)
		goto out;
	t1 = pol_now_ms();
	sync_cgpods(p, st, node);
	need_skb = any_isolated(c);
	if (need_skb) {
		/* before the flip: the new tables isolate someone from their
		 * first packet (a new pod's command starts after this sync) */
		ret = skb_links(p, true);
		if (ret) {
			ret = fail_err(err, ret, "links", "attach the per-packet programs");
			goto out;
		}
	}
	if (p->state && same_tables(c, p->last)) {
		ret = skb_links(p, need_skb);	/* invariant 2 */
		goto out;
	}
	slot = p->state ? (p->state & 1) ^ 1 : 0;
	ret = build_slot(p, slot, c, fds, err);
	if (ret) {
		/* the inactive slot may be half-written: rebuild it next time */
		pol_compiled_free(p->prev);
		p->prev = NULL;
		goto out;
	}
	t2 = pol_now_ms();
	for (int i = 0; i < POL_N_TABS; i++) {
		uint32_t id;
		struct bpf_map_info info = {};
		uint32_t ilen = sizeof(info);

		/* the diff path wrote the installed maps in place: nothing to swap */
		if (bpf_map_lookup_elem(outer[i], &slot, &id) == 0 &&
		    bpf_obj_get_info_by_fd(fds[i], &info, &ilen) == 0 && info.id == id)
			continue;
		if (bpf_map_update_elem(outer[i], &slot, &fds[i], BPF_ANY)) {
			ret = fail_err(err, -errno, "maps", "install table");
			pol_compiled_free(p->prev);
			p->prev = NULL;
			goto out;
		}
	}
	for (int i = 0; i < c->n_policies; i++) {
		struct pol_name nm = {};

		/* ids are hashes of "ns/name": a known id already has its name */
		if (!named_add(p, c->policy_ids[i]))
			continue;
		snprintf(nm.name, sizeof(nm.name), "%s", c->policy_names[i]);
		bpf_map_update_elem(bpf_map__fd(p->skel->maps.pol_names), &c->policy_ids[i], &nm,
				    BPF_ANY);
	}
	t3 = pol_now_ms();
	zh_dbg("policy: sync: compile %.1f ms, %s %.1f ms, names %.1f ms", t1 - t0,
	       p->prev ? "diff" : "fill", t2 - t1, t3 - t2);
	gen = (p->state >> 1) + 1;
	if (gen >= 0x7fffffffu)
		gen = 1;
	cfg.state = gen << 1 | slot;
	ret = bpf_map_update_elem(bpf_map__fd(p->skel->maps.pol_cfg), &zero, &cfg, BPF_ANY);
	if (ret) {
		ret = fail_err(err, -errno, "maps", "flip generation");
		pol_compiled_free(p->prev);
		p->prev = NULL;
		goto out;
	}
	p->state = cfg.state;
	pol_compiled_free(p->prev);
	p->prev = p->last;	/* now the inactive slot's content */
	p->last = c;
	c = NULL;
	if (!need_skb)
		skb_links(p, false);	/* after the flip: nobody isolated any more */
out:
	for (int i = 0; i < POL_N_TABS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pol_compiled_free(c);
	return ret;
}

void pol_close(struct pol *p, int unpin)
{
	if (!p)
		return;
	for (int i = 0; i < POL_N_LINKS; i++) {
		if (unpin)
			detach_one(p, i);	/* also an earlier opener's pin we did not adopt */
		else if (p->link[i])
			bpf_link__destroy(p->link[i]);	/* the pinned link stays attached */
	}
	if (unpin && p->skel) {
		struct bpf_map *map;

		bpf_object__for_each_map(map, p->skel->obj)
			if (bpf_map__is_pinned(map))
				bpf_map__unpin(map, NULL);
		rmdir(p->pin_dir);	/* fails while others' pins remain: fine */
	}
	zh_policy__destroy(p->skel);
	pol_compiled_free(p->last);
	pol_compiled_free(p->prev);
	free(p->named);
	free(p);
}

/* ---- drops, from the pins ------------------------------------------------ */

int pol_read_drops(const char *pin_dir, struct pol_drops *out)
{
	char path[PATH_MAX + 64];
	int fd_drops = -1, fd_p = -1, fd_names = -1, fd_cfg = -1, ncpu, ret = 0;
	struct pol_pdrop_key k, next, *pk = NULL;
	uint64_t *vals = NULL;
	struct pol_cfg cfg;
	uint32_t zero = 0;

	memset(out, 0, sizeof(*out));
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
#define OPEN_PIN(fd, name) do {						\
		snprintf(path, sizeof(path), "%s/%s", pin_dir, name);	\
		fd = bpf_obj_get(path);					\
		if (fd < 0) {						\
			ret = -errno;					\
			goto out;					\
		}							\
	} while (0)
	OPEN_PIN(fd_drops, "pol_drops");
	OPEN_PIN(fd_p, "pol_pdrops");
	OPEN_PIN(fd_names, "pol_names");
	OPEN_PIN(fd_cfg, "pol_cfg");
#undef OPEN_PIN
	if (bpf_map_lookup_elem(fd_cfg, &zero, &cfg) == 0)
		out->generation = cfg.state >> 1;
	vals = zh_calloc((size_t)ncpu, sizeof(*vals));
	for (uint32_t r = 0; r < POL_DROP__MAX; r++) {
		if (bpf_map_lookup_elem(fd_drops, &r, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			out->by_reason[r] += vals[c];
	}
	while (bpf_map_get_next_key(fd_p, pk, &next) == 0) {
		struct pol_drop_row *row;
		struct pol_name nm;
		uint64_t n;

		k = next;
		pk = &k;
		if (bpf_map_lookup_elem(fd_p, &k, &n))
			continue;
		out->by_policy = zh_realloc(out->by_policy,
					    (size_t)(out->n_by_policy + 1) * sizeof(*out->by_policy));
		row = &out->by_policy[out->n_by_policy++];
		if (bpf_map_lookup_elem(fd_names, &k.pol, &nm) == 0)
			snprintf(row->name, sizeof(row->name), "%s", nm.name);
		else if (k.reason == POL_DROP_MTLS_PLAINTEXT && !k.pol)	/* no NetworkPolicy */
			snprintf(row->name, sizeof(row->name), "(PeerAuthentication STRICT)");
		else
			snprintf(row->name, sizeof(row->name), "#%u", k.pol);
		row->reason = k.reason;
		row->packets = n;
	}
out:
	free(vals);
	if (fd_drops >= 0)
		close(fd_drops);
	if (fd_p >= 0)
		close(fd_p);
	if (fd_names >= 0)
		close(fd_names);
	if (fd_cfg >= 0)
		close(fd_cfg);
	return ret;
}

void pol_drops_free(struct pol_drops *d)
{
	free(d->by_policy);
	d->by_policy = NULL;
	d->n_by_policy = 0;
}

static int cmp_row(const void *a, const void *b)
{
	const struct pol_drop_row *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (int)x->reason - (int)y->reason;
}

void pol_drops_print(const struct pol_drops *d, FILE *f)
{
	fprintf(f, "policy generation %u\n", d->generation);
	fprintf(f, "%-16s %12s\n", "REASON", "PACKETS");
	for (uint32_t r = 1; r < POL_DROP__MAX; r++)
		fprintf(f, "%-16s %12llu\n", pol_drop_reason_name(r),
			(unsigned long long)d->by_reason[r]);
	struct pol_drop_row *rows = zh_calloc((size_t)d->n_by_policy + 1, sizeof(*rows));

	if (d->n_by_policy)
		memcpy(rows, d->by_policy, (size_t)d->n_by_policy * sizeof(*rows));
	if (d->n_by_policy > 1)
		qsort(rows, (size_t)d->n_by_policy, sizeof(*rows), cmp_row);
	fprintf(f, "\n%-40s %-16s %12s\n", "POLICY", "REASON", "PACKETS");
	for (int i = 0; i < d->n_by_policy; i++)
		fprintf(f, "%-40s %-16s %12llu\n", rows[i].name,
			pol_drop_reason_name(rows[i].reason), (unsigned long long)rows[i].packets);
	free(rows);
}
