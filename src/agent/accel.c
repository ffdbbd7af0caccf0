/* accel.c — load, adopt, attach and read the same-node short-circuit
 * (bpf/accel.bpf.c). Contract: include/zerohop/accel.h.
 *
 * Design note
 * -----------
 * The pins under pin_dir own the datapath; a struct ag_accel only holds fds to
 * them, so any process (agent, restarted agent, `zerohop get stats`) works on
 * the same objects and closing fds never changes traffic.
 *
 * Invariants
 *  1. Either all of PIN_MAPS + PIN_PROGS are pinned, or none: a partial set
 *     (a crash between pins) is removed and loaded afresh by ag_accel_open.
 *  2. At most one link per program (sock_ops, setsockopt) and slot (node,
 *     proxy) per pin_dir, on the cgroup given last for that slot;
 *     re-opening with the same cgroup keeps it (no double attach, no gap).
 *  3. Never attach to a cgroup root (it would cover every process on the
 *     machine, not the node's pods): the path must be a
 *     non-root cgroup2 directory (it has cgroup.events).
 *  4. Turning acceleration off never frees the sockhash under live sockets
 *     (that would drop bytes queued in their short-circuit queues): it removes
 *     the link and sets accel_cfg[DISABLED]; only ag_accel_close(a, 1) unpins.
 *  5. The proxy slot (ag_accel_attach_proxy) is the node L7 proxy's own
 *     cgroup, given by whoever runs the proxy (the lab: --proxy-cgroup): a
 *     non-root cgroup2 directory (invariant 3) that is neither the node
 *     cgroup nor one of its ancestors (it would cover more than the proxy).
 *     Turning acceleration off removes both slots' links.
 *
 * States of a pin_dir
 *
 *   EMPTY ──open(enable=1)──► ON (objects pinned, links pinned, msg attached)
 *     ▲                        │  ▲
 *     │                open(0) │  │ open(1)
 *     │                        ▼  │
 *     └──close(unpin=1)─── OFF (objects pinned, no link, DISABLED=1)
 *   (close(unpin=1) from ON also goes to EMPTY; close(unpin=0) changes nothing)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/accel.h"
#include "zerohop/abi/accel.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "accel.skel.h"

/* Pinned names, index = enum accel_obj. */
enum accel_obj {
	AO_SOCKHASH,
	AO_LOCAL,
	AO_STATS,
	AO_CFG,
	AO_SKIP,
	AO_PROXY,
	AO_SOCKOPS,
	AO_MSG,
	AO_SOCKOPT,
	AO_FIN,
	AO_SOCKHASH6,
	AO_LOCAL6,
	AO_PROXY6,
	AO__MAX,
};
static const char *const accel_pin_names[AO__MAX] = {
	[AO_SOCKHASH] = "accel_sockhash",
	[AO_LOCAL] = "accel_local",
	[AO_STATS] = "accel_stats",
	[AO_CFG] = "accel_cfg",
	[AO_SKIP] = "accel_skip",
	[AO_PROXY] = "accel_proxy",
	[AO_SOCKOPS] = "accel_sockops",
	[AO_MSG] = "accel_msg",
	[AO_SOCKOPT] = "accel_setsockopt",
	[AO_FIN] = "accel_fin",
	[AO_SOCKHASH6] = "accel_sockhash6",
	[AO_LOCAL6] = "accel_local6",
	[AO_PROXY6] = "accel_proxy6",
};

/* Which cgroup a link is on: the node's (pods below it) or the node
 * proxy's (invariant 5). */
enum accel_slot { AS_NODE, AS_PROXY };

/* The cgroup links: program, attach type, slot, pin name. */
static const struct {
	enum accel_obj prog;
	enum bpf_attach_type type;
	enum accel_slot slot;
	const char *pin;
} accel_links[] = {
	{ AO_SOCKOPS, BPF_CGROUP_SOCK_OPS, AS_NODE, "accel_sockops_link" },
	{ AO_SOCKOPT, BPF_CGROUP_SETSOCKOPT, AS_NODE, "accel_setsockopt_link" },
	{ AO_FIN, BPF_CGROUP_INET_INGRESS, AS_NODE, "accel_fin_link" },
	{ AO_SOCKOPS, BPF_CGROUP_SOCK_OPS, AS_PROXY, "accel_sockops_proxy_link" },
	{ AO_SOCKOPT, BPF_CGROUP_SETSOCKOPT, AS_PROXY, "accel_setsockopt_proxy_link" },
	{ AO_FIN, BPF_CGROUP_INET_INGRESS, AS_PROXY, "accel_fin_proxy_link" },
};
#define ACCEL_NLINKS (int)(sizeof(accel_links) / sizeof(accel_links[0]))

struct ag_accel {
	char pin_dir[256];
	char node_cg[256];	/* the node cgroup attached to ("": off) */
	int fd[AO__MAX];	/* -1 when absent (disabled and never loaded) */
};

static int accel_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void accel_close_fds(struct ag_accel *a)
{
	int i;

	for (i = 0; i < AO__MAX; i++) {
		if (a->fd[i] >= 0)
			close(a->fd[i]);
		a->fd[i] = -1;
	}
}

/* Unlink every pin of ours (not the dir: the agent shares it). */
static void accel_unpin_all(const char *dir)
{
	char p[300];
	int i;

	for (i = 0; i < AO__MAX; i++)
		if (!accel_path(p, sizeof(p), dir, accel_pin_names[i]))
			unlink(p);
	for (i = 0; i < ACCEL_NLINKS; i++)
		if (!accel_path(p, sizeof(p), dir, accel_links[i].pin))
			unlink(p);
}

/* Open every pinned object. 0: all there; -ENOENT: none; -EUCLEAN: some. */
static int accel_adopt(struct ag_accel *a)
{
	char p[300];
	int i, found = 0, err;

	for (i = 0; i < AO__MAX; i++) {
		err = accel_path(p, sizeof(p), a->pin_dir, accel_pin_names[i]);
		if (err)
			return err;
		a->fd[i] = bpf_obj_get(p);
		if (a->fd[i] >= 0)
			found++;
	}
	if (found == AO__MAX)
		return 0;
	accel_close_fds(a);
	return found ? -EUCLEAN : -ENOENT;
}

static int accel_load_and_pin(struct ag_accel *a)
{
	struct zh_accel *skel;
	int fds[AO__MAX], i, err;
	char p[300];

	struct bpf_map *m;

	skel = zh_accel__open();
	if (!skel) {
		err = -errno;
		zh_err("accel: opening bpf/accel.bpf.c failed: %s", strerror(-err));
		return err;
	}
	/* the capture maps: the load balancer's and the proxy's, shared by
	 * name in the node's pin dir (abi/l7cap.h; accel.bpf.c inv. 12). Used
	 * when pinned, never created here: without them (accel alone) a
	 * private empty copy, so that nothing of theirs is left pinned */
	bpf_object__for_each_map(m, skel->obj) {
		if (strncmp(bpf_map__name(m), "zh_l7cap_", 9))
			continue;
		err = accel_path(p, sizeof(p), a->pin_dir, bpf_map__name(m));
		if (!err)
			err = bpf_map__set_pin_path(m, access(p, F_OK) ? NULL : p);
		if (err) {
			zh_accel__destroy(skel);
			return err;
		}
	}
	err = zh_accel__load(skel);
	if (err) {
		zh_err("accel: loading bpf/accel.bpf.c failed: %s", strerror(-err));
		zh_accel__destroy(skel);
		return err;
	}
	fds[AO_SOCKHASH] = bpf_map__fd(skel->maps.accel_sockhash);
	fds[AO_LOCAL] = bpf_map__fd(skel->maps.accel_local);
	fds[AO_STATS] = bpf_map__fd(skel->maps.accel_stats);
	fds[AO_CFG] = bpf_map__fd(skel->maps.accel_cfg);
	fds[AO_SKIP] = bpf_map__fd(skel->maps.accel_skip);
	fds[AO_PROXY] = bpf_map__fd(skel->maps.accel_proxy);
	fds[AO_SOCKOPS] = bpf_program__fd(skel->progs.zh_accel_sockops);
	fds[AO_MSG] = bpf_program__fd(skel->progs.zh_accel_msg);
	fds[AO_SOCKOPT] = bpf_program__fd(skel->progs.zh_accel_setsockopt);
	fds[AO_FIN] = bpf_program__fd(skel->progs.zh_accel_fin);
	fds[AO_SOCKHASH6] = bpf_map__fd(skel->maps.accel_sockhash6);
	fds[AO_LOCAL6] = bpf_map__fd(skel->maps.accel_local6);
	fds[AO_PROXY6] = bpf_map__fd(skel->maps.accel_proxy6);
	for (i = 0; i < AO__MAX; i++) {
		err = accel_path(p, sizeof(p), a->pin_dir, accel_pin_names[i]);
		if (!err && bpf_obj_pin(fds[i], p))
			err = -errno;
		if (err) {
			zh_err("accel: pinning %s: %s", p, strerror(-err));
			goto err_unpin;
		}
		a->fd[i] = dup(fds[i]);
		if (a->fd[i] < 0) {
			err = -errno;
			goto err_unpin;
		}
	}
	zh_accel__destroy(skel);
	return 0;

err_unpin:
	accel_close_fds(a);
	accel_unpin_all(a->pin_dir);
	zh_accel__destroy(skel);
	return err;
}

static int accel_cfg_set(struct ag_accel *a, __u32 idx, __u32 val)
{
	if (a->fd[AO_CFG] < 0)
		return -ENOENT;
	return bpf_map_update_elem(a->fd[AO_CFG], &idx, &val, BPF_ANY) ? -errno : 0;
}

static int accel_check_cgroup(const char *cg, struct stat *st)
{
	char p[300];

	if (!cg || !*cg) {
		zh_err("accel: no cgroup path given to attach to");
		return -EINVAL;
	}
	if (stat(cg, st)) {
		zh_err("accel: cgroup %s: %s", cg, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st->st_mode)) {
		zh_err("accel: cgroup %s: not a directory", cg);
		return -ENOTDIR;
	}
	/* Invariant 3: a cgroup root has no cgroup.events. */
	if (accel_path(p, sizeof(p), cg, "cgroup.events") || access(p, F_OK)) {
		zh_err("accel: %s is not a non-root cgroup2 directory; refusing to attach", cg);
		return -EPERM;
	}
	return 0;
}

/* Keep pinned link `l` if it is on this cgroup running our program, else
 * make one (invariant 2). */
static int accel_link_one(struct ag_accel *a, const char *cg, int l)
{
	struct bpf_link_info li = {};
	struct bpf_prog_info pi = {};
	__u32 li_len = sizeof(li), pi_len = sizeof(pi);
	int lfd = -1, cgfd = -1, err;
	struct stat st;
	char p[300];

	int prog_fd = a->fd[accel_links[l].prog];

	err = accel_check_cgroup(cg, &st);
	if (err)
		return err;
	err = accel_path(p, sizeof(p), a->pin_dir, accel_links[l].pin);
	if (err)
		return err;
	if (bpf_obj_get_info_by_fd(prog_fd, &pi, &pi_len))
		return -errno;
	lfd = bpf_obj_get(p);
	if (lfd >= 0) {
		if (!bpf_obj_get_info_by_fd(lfd, &li, &li_len) && li.prog_id == pi.id &&
		    li.type == BPF_LINK_TYPE_CGROUP && li.cgroup.cgroup_id == (__u64)st.st_ino) {
			err = 0;	/* invariant 2: adopted as is */
			goto out;
		}
		bpf_link_detach(lfd);
		unlink(p);
		close(lfd);
		lfd = -1;
	}
	cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cgfd < 0) {
		err = -errno;
		zh_err("accel: opening cgroup %s: %s", cg, strerror(-err));
		goto out;
	}
	lfd = bpf_link_create(prog_fd, cgfd, accel_links[l].type, NULL);
	if (lfd < 0) {
		err = -errno;
		zh_err("accel: attaching %s to %s: %s", accel_pin_names[accel_links[l].prog], cg,
		       strerror(-err));
		goto out;
	}
	if (bpf_obj_pin(lfd, p)) {
		err = -errno;
		zh_err("accel: pinning %s: %s", p, strerror(-err));
		bpf_link_detach(lfd);
		goto out;
	}
	err = 0;
out:
	if (cgfd >= 0)
		close(cgfd);
	if (lfd >= 0)
		close(lfd);
	return err;
}

static int accel_link(struct ag_accel *a, const char *cg, enum accel_slot slot)
{
	int l, err = 0;

	for (l = 0; l < ACCEL_NLINKS && !err; l++)
		if (accel_links[l].slot == slot)
			err = accel_link_one(a, cg, l);
	return err;
}

/* Detach and unpin the links of one slot, or of all (slot < 0). */
static void accel_unlink_slot(const char *dir, int slot)
{
	char p[300];
	int l, lfd;

	for (l = 0; l < ACCEL_NLINKS; l++) {
		if (slot >= 0 && (int)accel_links[l].slot != slot)
			continue;
		if (accel_path(p, sizeof(p), dir, accel_links[l].pin))
			continue;
		lfd = bpf_obj_get(p);
		if (lfd >= 0) {
			bpf_link_detach(lfd);
			close(lfd);
		}
		unlink(p);
	}
}

static void accel_unlink(const char *dir)
{
	accel_unlink_slot(dir, -1);
}

int ag_accel_open(const char *cgroup_path, const char *pin_dir, int enable,
		  struct ag_accel **out)
{
	struct ag_accel *a;
	int i, err;

	*out = NULL;
	a = zh_calloc(1, sizeof(*a));
	for (i = 0; i < AO__MAX; i++)
		a->fd[i] = -1;
	if (!pin_dir || snprintf(a->pin_dir, sizeof(a->pin_dir), "%s", pin_dir) >=
				(int)sizeof(a->pin_dir)) {
		err = -ENAMETOOLONG;
		zh_err("accel: bad pin dir");
		goto err_free;
	}
	err = accel_adopt(a);
	if (err == -EUCLEAN) {
		zh_warn("accel: %s holds a partial set of pins; reloading", pin_dir);
		accel_unlink(pin_dir);
		accel_unpin_all(pin_dir);
		err = -ENOENT;
	}
	if (err == -ENOENT && !enable) {
		*out = a;	/* nothing pinned, nothing to turn off */
		return 0;
	}
	if (err == -ENOENT) {
		err = zh_mkdir_p(pin_dir, 0700);
		if (err) {
			zh_err("accel: creating %s: %s (is bpffs mounted at %s?)", pin_dir,
			       strerror(-err), "/sys/fs/bpf");
			goto err_free;
		}
		err = accel_load_and_pin(a);
	}
	if (err)
		goto err_free;

	if (!enable) {
		accel_unlink(pin_dir);
		err = accel_cfg_set(a, ZH_ACCEL_CFG_DISABLED, 1);
		if (err)
			goto err_close;
		*out = a;
		return 0;
	}
	err = accel_cfg_set(a, ZH_ACCEL_CFG_DISABLED, 0);
	if (err)
		goto err_close;
	/* Re-attaching the same program is harmless; bpftool's attach is not
	 * used (on this kernel it reported success and the program never ran). */
	if (bpf_prog_attach(a->fd[AO_MSG], a->fd[AO_SOCKHASH], BPF_SK_MSG_VERDICT, 0) ||
	    bpf_prog_attach(a->fd[AO_MSG], a->fd[AO_SOCKHASH6], BPF_SK_MSG_VERDICT, 0)) {
		err = -errno;
		zh_err("accel: attaching sk_msg to the sockhashes: %s", strerror(-err));
		goto err_close;
	}
	err = accel_link(a, cgroup_path, AS_NODE);
	if (err)
		goto err_close;
	snprintf(a->node_cg, sizeof(a->node_cg), "%s", cgroup_path);
	*out = a;
	return 0;

err_close:
	accel_close_fds(a);
err_free:
	free(a);
	return err;
}

static size_t cmp_len;	/* accel_set_keys: the key size qsort/bsearch compare */

static int cmp_addr(const void *x, const void *y)
{
	return memcmp(x, y, cmp_len);
}

/* The key set of the hash map fd (value 1) becomes exactly keys[0..n),
 * keys of ksz bytes (at most 32, no padding: compared as bytes), at most
 * max of them: make before break, every new key is added before any
 * stale one is deleted. The local addresses and the proxy endpoints. */
static int accel_set_keys(int fd, const void *keys, int n, size_t ksz, int max)
{
	unsigned char *sorted = NULL, *stale = NULL, key[32], next[32];
	int i, nstale = 0, err = 0;
	__u8 one = 1;

	if (fd < 0)
		return 0;	/* never loaded here (off from the start): nothing to update */
	if (n < 0 || n > max || ksz > sizeof(key))
		return -E2BIG;
	sorted = zh_malloc(ksz * (n ? n : 1));
	memcpy(sorted, keys, ksz * n);
	cmp_len = ksz;
	qsort(sorted, n, ksz, cmp_addr);
	for (i = 0; i < n; i++) {
		if (bpf_map_update_elem(fd, sorted + i * ksz, &one, BPF_ANY)) {
			err = -errno;
			zh_err("accel: adding a local or proxy endpoint: %s", strerror(-err));
			goto out;
		}
	}
	stale = zh_malloc(ksz * (size_t)max);
	for (err = bpf_map_get_next_key(fd, NULL, next); !err;
	     err = bpf_map_get_next_key(fd, key, next)) {
		memcpy(key, next, ksz);
		if (!bsearch(key, sorted, n, ksz, cmp_addr) && nstale < max)
			memcpy(stale + ksz * nstale++, key, ksz);
	}
	err = 0;
	for (i = 0; i < nstale; i++)
		bpf_map_delete_elem(fd, stale + i * ksz);
out:
	free(stale);
	free(sorted);
	return err;
}

int ag_accel_set_local(struct ag_accel *a, const uint32_t *ips, int n)
{
	return accel_set_keys(a->fd[AO_LOCAL], ips, n, sizeof(*ips), ZH_ACCEL_MAX_LOCAL);
}

int ag_accel_set_local6(struct ag_accel *a, const struct in6_addr *ips, int n)
{
	return accel_set_keys(a->fd[AO_LOCAL6], ips, n, sizeof(*ips), ZH_ACCEL_MAX_LOCAL);
}

int ag_accel_set_skip_ports(struct ag_accel *a, const uint16_t *ports, int n)
{
	int fd = a->fd[AO_SKIP], i, err;
	__u32 key, next, *old;
	int nold = 0;
	__u8 one = 1;

	if (fd < 0)
		return 0;	/* never loaded here */
	if (n < 0 || n > ZH_ACCEL_MAX_SKIP_PORTS)
		return -E2BIG;
	old = zh_malloc(sizeof(*old) * ZH_ACCEL_MAX_SKIP_PORTS);
	for (err = bpf_map_get_next_key(fd, NULL, &next); !err && nold < ZH_ACCEL_MAX_SKIP_PORTS;
	     err = bpf_map_get_next_key(fd, &key, &next)) {
		key = next;
		old[nold++] = key;
	}
	err = 0;
	for (i = 0; i < n; i++) {
		key = ports[i];
		if (bpf_map_update_elem(fd, &key, &one, BPF_ANY)) {
			err = -errno;
			goto out;
		}
	}
	for (i = 0; i < nold; i++) {
		int j, keep = 0;

		for (j = 0; j < n && !keep; j++)
			keep = ports[j] == old[i];
		if (!keep)
			bpf_map_delete_elem(fd, &old[i]);
	}
out:
	free(old);
	return err;
}

/* Invariant 5: `proxy` must not be the node cgroup or one of its
 * ancestors (it would cover pods, or more). */
static int accel_check_proxy_cgroup(const char *node, const char *proxy)
{
	char rn[PATH_MAX], rp[PATH_MAX];
	size_t lp;

	if (!realpath(proxy, rp)) {
		zh_err("accel: proxy cgroup %s: %s", proxy, strerror(errno));
		return -errno;
	}
	if (!*node || !realpath(node, rn))
		return 0;	/* no node slot to compare with */
	lp = strlen(rp);
	if (!strcmp(rn, rp) || (!strncmp(rn, rp, lp) && rn[lp] == '/')) {
		zh_err("accel: proxy cgroup %s is the node cgroup %s or above it; refusing to attach",
		       proxy, node);
		return -EPERM;
	}
	return 0;
}

int ag_accel_attach_proxy(struct ag_accel *a, const char *cgroup_path)
{
	int err;

	if (a->fd[AO_SOCKOPS] < 0)
		return 0;	/* never loaded here (off from the start) */
	if (!cgroup_path || !*cgroup_path || !*a->node_cg) {
		accel_unlink_slot(a->pin_dir, AS_PROXY);
		return 0;
	}
	err = accel_check_proxy_cgroup(a->node_cg, cgroup_path);
	if (!err)
		err = accel_link(a, cgroup_path, AS_PROXY);
	if (err)
		accel_unlink_slot(a->pin_dir, AS_PROXY);
	return err;
}

int ag_accel_set_proxy(struct ag_accel *a, const struct zh_accel_proxy_ep *eps, int n)
{
	return accel_set_keys(a->fd[AO_PROXY], eps, n, sizeof(*eps), ZH_ACCEL_MAX_PROXY);
}

int ag_accel_set_proxy6(struct ag_accel *a, const struct zh_accel_proxy_ep6 *eps, int n)
{
	return accel_set_keys(a->fd[AO_PROXY6], eps, n, sizeof(*eps), ZH_ACCEL_MAX_PROXY);
}

int ag_accel_set_policy_gen(struct ag_accel *a, uint32_t gen)
{
	if (a->fd[AO_CFG] < 0)
		return 0;	/* never loaded here: no short-circuited socket to demote */
	return accel_cfg_set(a, ZH_ACCEL_CFG_POLICY_GEN, gen);
}

/* Entries of a sockhash with keys of ksz bytes (the ground truth for
 * "active"); 0 when fd < 0. */
static __u64 accel_count_keys(int fd, size_t ksz)
{
	unsigned char key[sizeof(struct zh_accel_key6)], next[sizeof(struct zh_accel_key6)];
	__u64 n = 0;
	int err;

	if (fd < 0)
		return 0;
	for (err = bpf_map_get_next_key(fd, NULL, next); !err;
	     err = bpf_map_get_next_key(fd, key, next)) {
		memcpy(key, next, ksz);
		n++;
	}
	return n;
}

static int accel_read_stats(int stats_fd, int hash_fd, int hash6_fd, struct ag_accel_stats *out)
{
	__u64 sum[ZH_ACCEL_ST__MAX] = {}, *vals;
	int ncpu, i, c, err = 0;
	__u32 idx;

	memset(out, 0, sizeof(*out));
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	vals = zh_calloc(ncpu, sizeof(*vals));
	for (i = 0; i < ZH_ACCEL_ST__MAX; i++) {
		idx = i;
		if (bpf_map_lookup_elem(stats_fd, &idx, vals)) {
			/* pinned by a version with fewer counters: 0 */
			if (errno == ENOENT && i >= ZH_ACCEL_ST_BACKPRESSURE)
				continue;
			err = -errno;
			goto out;
		}
		for (c = 0; c < ncpu; c++)
			sum[i] += vals[c];
	}
	out->sockets = sum[ZH_ACCEL_ST_SOCKETS];
	out->msgs = sum[ZH_ACCEL_ST_MSGS];
	out->bytes = sum[ZH_ACCEL_ST_BYTES];
	out->fallbacks = sum[ZH_ACCEL_ST_FALLBACKS];
	out->removed = sum[ZH_ACCEL_ST_REMOVED];
	out->skipped = sum[ZH_ACCEL_ST_SKIPPED];
	out->demoted = sum[ZH_ACCEL_ST_DEMOTED];
	out->released = sum[ZH_ACCEL_ST_RELEASED];
	out->proxy = sum[ZH_ACCEL_ST_PROXY];
	out->fin_held = sum[ZH_ACCEL_ST_FIN_HELD];
	out->backpressure = sum[ZH_ACCEL_ST_BACKPRESSURE];
	out->bp_resumed = sum[ZH_ACCEL_ST_BP_RESUMED];
	/* The ground truth for "active": walk the sockhashes themselves. */
	out->active = accel_count_keys(hash_fd, sizeof(struct zh_accel_key)) +
		      accel_count_keys(hash6_fd, sizeof(struct zh_accel_key6));
out:
	free(vals);
	return err;
}

int ag_accel_stats(struct ag_accel *a, struct ag_accel_stats *out)
{
	if (a->fd[AO_STATS] < 0) {
		memset(out, 0, sizeof(*out));
		return 0;	/* never loaded: all zero */
	}
	return accel_read_stats(a->fd[AO_STATS], a->fd[AO_SOCKHASH], a->fd[AO_SOCKHASH6], out);
}

int ag_accel_read_pinned_stats(const char *pin_dir, struct ag_accel_stats *out)
{
	char p[300];
	int sfd = -1, hfd = -1, h6fd = -1, err;

	err = accel_path(p, sizeof(p), pin_dir, accel_pin_names[AO_STATS]);
	if (err)
		return err;
	sfd = bpf_obj_get(p);
	if (sfd < 0)
		return -errno;
	err = accel_path(p, sizeof(p), pin_dir, accel_pin_names[AO_SOCKHASH]);
	if (!err) {
		hfd = bpf_obj_get(p);
		err = hfd < 0 ? -errno : 0;
	}
	/* an older layout has no accel_sockhash6: its sockets are all IPv4 */
	if (!err && !accel_path(p, sizeof(p), pin_dir, accel_pin_names[AO_SOCKHASH6]))
		h6fd = bpf_obj_get(p);
	if (!err)
		err = accel_read_stats(sfd, hfd, h6fd, out);
	if (h6fd >= 0)
		close(h6fd);
	if (hfd >= 0)
		close(hfd);
	close(sfd);
	return err;
}

void ag_accel_close(struct ag_accel *a, int unpin)
{
	if (!a)
		return;
	if (unpin) {
		accel_unlink(a->pin_dir);
		if (a->fd[AO_MSG] >= 0 && a->fd[AO_SOCKHASH] >= 0)
			bpf_prog_detach2(a->fd[AO_MSG], a->fd[AO_SOCKHASH], BPF_SK_MSG_VERDICT);
		if (a->fd[AO_MSG] >= 0 && a->fd[AO_SOCKHASH6] >= 0)
			bpf_prog_detach2(a->fd[AO_MSG], a->fd[AO_SOCKHASH6], BPF_SK_MSG_VERDICT);
		accel_unpin_all(a->pin_dir);
	}
	accel_close_fds(a);
	free(a);
}
