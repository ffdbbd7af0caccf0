/* lb.c — the kernel side of the service load balancer: load lb.bpf.o,
 * adopt or create the pinned maps and links, keep them in sync with the
 * compiled state (make-before-break), read counters.
 *
 * Design note: pins and adoption
 * ------------------------------
 * Under the pin dir (e.g. /sys/fs/bpf/zerohop/LAB/NODE):
 *   lb_svc lb_alias lb_sock lb_udprev lb_meta lb_stats  maps
 *   lb_mtls (STRICT pods of other nodes: ag_lb_set_mtls, src/agent/mtls.c)
 *   zh_l7cap_sock zh_l7cap_orig zh_l7cap_cfg   capture maps shared by name with
 *   zh_l7cap_orig6 zh_l7cap_cfg6               the node proxy (abi/l7cap.h)
 *   lb_link_connect4 .._sendmsg4 .._recvmsg4 .._getpeername4           links
 *   lb_link_connect6 .._sendmsg6 .._recvmsg6 .._getpeername6           (AF_INET6
 *                         sockets: v4-mapped VIPs, bpf/lb.bpf.c invariant 7)
 * (The acceleration engineer pins its own objects in the same dir with an
 * accel prefix; nothing here touches them.)
 *
 *   start ──► maps pinned? ── yes ─► libbpf reuses them (reuse_fd on load)
 *                │ no                       │
 *                ▼                          ▼
 *          created + pinned        links pinned? ─ yes ─► bpf_link_update to the
 *                                      │ no               new program (no gap)
 *                                      ▼
 *                              attach to cgroup, pin link
 *   then read the maps back into the mirror (struct mirror; batch lookups,
 *   mirror_load) and delete
 *   alias entries no live service points at (left by a crash mid-sync).
 *
 *   (pins of an older layout are renamed first: src/agent/pin_upgrade.c)
 *   exit     : close fds, pins keep maps and links (datapath keeps running)
 *   --cleanup: detach links, unlink every pin, rmdir the pin dir if empty
 *
 * Design note: make-before-break sync (ag_lb_sync)
 * ----------------------------------------------
 * Invariants:
 *  S1. The mirror equals the maps' live content after every successful call
 *      (reloaded from the maps after a failed one).
 *  S2. A live service value (svc_id, slot s, count n) always has alias
 *      entries {svc_id, s, 0..n-1} present: phase 1 writes every new/changed
 *      service's entries into slot 1-s (never touched by the kernel), phase 2
 *      flips each service value in one update, phase 3 deletes removed
 *      services' values, phase 4 deletes the old slots' entries and those of
 *      removed services. A failure in phase 1 removes what it wrote and
 *      leaves every service as it was.
 *  S3. lb_meta[GENERATION] is written after phase 4: a reader that sees
 *      generation G sees every map entry of G.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/abi/l7cap.h"
#include "zerohop/agent.h"
#include "zerohop/bpfmap.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "zerohop/vec.h"
#include "lb.skel.h"

/* One link per hook and socket family; a pin dir of an agent from before
 * the IPv6 hooks has only the first four: the others are attached then. */
#define LB_N_LINKS 8

struct mirror_ent {
	struct zh_lb_svc_key key;
	struct zh_lb_svc_val val;
	struct zh_lb_alias_val *alias;	/* val.count entries, owned */
};

struct ag_lb {
	struct zh_lb *skel;
	struct bpf_link *links[LB_N_LINKS];
	char pin_dir[256];
	int fd_svc, fd_alias, fd_meta;
	struct mirror_ent *m;		/* sorted by key */
	int n_m;
	uint32_t next_id;
	bool track_gone;		/* compute gone backends on sync */
	struct zh_lb_backend *gone;	/* backends the last sync removed everywhere */
	int n_gone;
};

static const char *const link_names[LB_N_LINKS] = {
	"lb_link_connect4", "lb_link_sendmsg4", "lb_link_recvmsg4",
	"lb_link_getpeername4",
	"lb_link_connect6", "lb_link_sendmsg6", "lb_link_recvmsg6",
	"lb_link_getpeername6",
};
static const char *const map_names[] = {
	"lb_svc", "lb_alias", "lb_sock", "lb_udprev", "lb_meta", "lb_stats",
	ZH_L7CAP_SOCK_MAP, ZH_L7CAP_ORIG_MAP, ZH_L7CAP_CFG_MAP,
	ZH_L7CAP_ORIG6_MAP, ZH_L7CAP_CFG6_MAP, "lb_mtls",
};	/* in the order of ag_lb_open's maps[] */
#define N_MAPS ((int)(sizeof(map_names) / sizeof(map_names[0])))

static const char *const stat_names[ZH_LB_STAT_MAX] = {
	[ZH_LB_STAT_CONNECT_XLATE] = "connect_translated",
	[ZH_LB_STAT_CONNECT_NOBACKEND] = "connect_refused_no_backend",
	[ZH_LB_STAT_SENDMSG_XLATE] = "sendmsg_translated",
	[ZH_LB_STAT_SENDMSG_NOBACKEND] = "sendmsg_refused_no_backend",
	[ZH_LB_STAT_RECVMSG_REVNAT] = "recvmsg_reverse_translated",
	[ZH_LB_STAT_GETPEERNAME_REVNAT] = "getpeername_reverse_translated",
	[ZH_LB_STAT_ALIAS_MISS] = "alias_miss",
	[ZH_LB_STAT_L7_REDIRECT] = "connect_l7_redirect",
	[ZH_LB_STAT_L7_NOPROXY] = "connect_l7_refused_no_proxy",
	[ZH_LB_STAT_V6_MAPPED] = "v6_socket_v4mapped_service",
	[ZH_LB_STAT_V6_NATIVE] = "v6_native_passed",
	[ZH_LB_STAT_HBONE_REDIRECT] = "connect_hbone_redirect",
};

const char *ag_lb_stat_name(int stat)
{
	return stat >= 0 && stat < ZH_LB_STAT_MAX ? stat_names[stat] : "?";
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct zh_lb_svc_key));
}

static void mirror_free(struct ag_lb *lb)
{
	int i;

	for (i = 0; i < lb->n_m; i++)
		free(lb->m[i].alias);
	free(lb->m);
	lb->m = NULL;
	lb->n_m = 0;
}

struct alias_kv {
	struct zh_lb_alias_key k;
	struct zh_lb_alias_val v;
};

static int cmp_alias_kv(const void *a, const void *b)
{
	const struct zh_lb_alias_key *x = &((const struct alias_kv *)a)->k;
	const struct zh_lb_alias_key *y = &((const struct alias_kv *)b)->k;

	if (x->svc_id != y->svc_id)
		return x->svc_id < y->svc_id ? -1 : 1;
	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Rebuild the mirror from the maps, drop stray alias entries (S1): both
 * maps read whole (zh_map_dump: batch lookups where the kernel has them),
 * aliases matched to services by sorting. */
static int mirror_load(struct ag_lb *lb)
{
	char *sk = NULL, *sv = NULL, *ak = NULL, *av = NULL;
	size_t n_s = 0, n_a = 0, lo, j;
	struct alias_kv *al = NULL;
	int n_del = 0, ret;

	ret = zh_map_dump(lb->fd_svc, sizeof(struct zh_lb_svc_key), sizeof(struct zh_lb_svc_val),
			  &sk, &sv, &n_s);
	if (!ret)
		ret = zh_map_dump(lb->fd_alias, sizeof(struct zh_lb_alias_key),
				  sizeof(struct zh_lb_alias_val), &ak, &av, &n_a);
	if (ret) {
		free(sk);
		free(sv);
		return ret;
	}
	al = zh_calloc(n_a + 1, sizeof(*al));
	for (j = 0; j < n_a; j++) {
		memcpy(&al[j].k, ak + j * sizeof(al[j].k), sizeof(al[j].k));
		memcpy(&al[j].v, av + j * sizeof(al[j].v), sizeof(al[j].v));
	}
	if (n_a)
		qsort(al, n_a, sizeof(*al), cmp_alias_kv);
	mirror_free(lb);
	lb->next_id = 1;
	lb->m = zh_calloc(n_s + 1, sizeof(*lb->m));
	for (j = 0; j < n_s; j++) {
		struct mirror_ent *e = &lb->m[lb->n_m++];
		struct alias_kv want = { 0 };
		size_t hi = n_a;

		memcpy(&e->key, sk + j * sizeof(e->key), sizeof(e->key));
		memcpy(&e->val, sv + j * sizeof(e->val), sizeof(e->val));
		/* missing entries stay zero: they differ from any desired value,
		 * so the next sync rewrites the service */
		e->alias = zh_calloc(e->val.count ? e->val.count : 1, sizeof(*e->alias));
		want.k.svc_id = e->val.svc_id;
		want.k.slot = e->val.slot;
		for (lo = 0; lo < hi;) {	/* first entry >= {svc_id, slot, 0} */
			size_t mid = lo + (hi - lo) / 2;

			if (cmp_alias_kv(&al[mid], &want) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < n_a && al[lo].k.svc_id == e->val.svc_id &&
		       al[lo].k.slot == e->val.slot; lo++)
			if (al[lo].k.idx < e->val.count)
				e->alias[al[lo].k.idx] = al[lo].v;
		if (e->val.svc_id >= lb->next_id)
			lb->next_id = e->val.svc_id + 1;
	}
	if (lb->n_m)
		qsort(lb->m, lb->n_m, sizeof(*lb->m), cmp_key);

	/* Stray entries (crash between phases): not live -> delete. */
	{
		uint32_t live_max = 0, *live;	/* live[id] = (slot + 1) << 24 | count */
		int i;

		for (i = 0; i < lb->n_m; i++)
			if (lb->m[i].val.svc_id > live_max)
				live_max = lb->m[i].val.svc_id;
		live = zh_calloc(live_max + 1, sizeof(*live));
		for (i = 0; i < lb->n_m; i++)
			live[lb->m[i].val.svc_id] = (uint32_t)(lb->m[i].val.slot + 1) << 24 |
						     (lb->m[i].val.count & 0xffffff);
		for (j = 0; j < n_a; j++) {
			uint32_t l = al[j].k.svc_id <= live_max ? live[al[j].k.svc_id] : 0;

			if ((l >> 24) == (uint32_t)al[j].k.slot + 1 && al[j].k.idx < (l & 0xffffff))
				continue;
			bpf_map_delete_elem(lb->fd_alias, &al[j].k);
			n_del++;
		}
		if (n_del)
			zh_info("lb: removed %d stray alias entries", n_del);
		free(live);
	}
	free(al);
	free(sk);
	free(sv);
	free(ak);
	free(av);
	return 0;
}

static int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	if (snprintf(buf, len, "%s/%s", dir, name) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* An upgrade may add counters (enum zh_lb_stat): zh_map_pin_drop_resized. */
static void stats_pin_check(const char *pin_dir)
{
	char path[320];

	if (!pin_path(path, sizeof(path), pin_dir, "lb_stats"))
		zh_map_pin_drop_resized(path, ZH_LB_STAT_MAX, "lb");
}

int ag_lb_mtls_fd(const struct ag_lb *lb)
{
	return bpf_map__fd(lb->skel->maps.lb_mtls);
}

int ag_lb_open(const struct ag_lb_opts *o, struct ag_lb **out)
{
	struct bpf_program *progs[LB_N_LINKS];
	struct bpf_map *maps[N_MAPS];
	struct ag_lb *lb;
	char path[320];
	int cgfd = -1, ret, i;

	lb = zh_calloc(1, sizeof(*lb));
	snprintf(lb->pin_dir, sizeof(lb->pin_dir), "%s", o->pin_dir);
	ret = zh_mkdir_p(o->pin_dir, 0700);
	if (ret) {
		zh_err("lb: cannot create pin dir %s: %s", o->pin_dir, strerror(-ret));
		goto fail;
	}
	ret = ag_pin_upgrade(o->pin_dir, NULL);	/* old pin names first (P3) */
	if (ret)
		goto fail;
	lb->skel = zh_lb__open();
	if (!lb->skel) {
		ret = -errno;
		zh_err("lb: open BPF object: %s", strerror(-ret));
		goto fail;
	}
	maps[0] = lb->skel->maps.lb_svc;
	maps[1] = lb->skel->maps.lb_alias;
	maps[2] = lb->skel->maps.lb_sock;
	maps[3] = lb->skel->maps.lb_udprev;
	maps[4] = lb->skel->maps.lb_meta;
	maps[5] = lb->skel->maps.lb_stats;
	/* Pinned by name in the node pin dir whichever of agent and proxy
	 * loads first; the path set here overrides libbpf's default root. */
	maps[6] = lb->skel->maps.zh_l7cap_sock;
	maps[7] = lb->skel->maps.zh_l7cap_orig;
	maps[8] = lb->skel->maps.zh_l7cap_cfg;
	maps[9] = lb->skel->maps.zh_l7cap_orig6;
	maps[10] = lb->skel->maps.zh_l7cap_cfg6;
	maps[11] = lb->skel->maps.lb_mtls;
	for (i = 0; i < N_MAPS; i++) {
		ret = pin_path(path, sizeof(path), o->pin_dir, map_names[i]);
		if (!ret)
			ret = bpf_map__set_pin_path(maps[i], path);
		if (ret)
			goto fail;
	}
	stats_pin_check(o->pin_dir);
	ret = zh_lb__load(lb->skel);
	if (ret) {
		zh_err("lb: load BPF programs (pinned maps of an incompatible version? run agent --cleanup): %s",
		       strerror(-ret));
		goto fail;
	}
	lb->fd_svc = bpf_map__fd(lb->skel->maps.lb_svc);
	lb->fd_alias = bpf_map__fd(lb->skel->maps.lb_alias);
	lb->fd_meta = bpf_map__fd(lb->skel->maps.lb_meta);

	progs[0] = lb->skel->progs.zh_lb_connect4;
	progs[1] = lb->skel->progs.zh_lb_sendmsg4;
	progs[2] = lb->skel->progs.zh_lb_recvmsg4;
	progs[3] = lb->skel->progs.zh_lb_getpeername4;
	progs[4] = lb->skel->progs.zh_lb_connect6;
	progs[5] = lb->skel->progs.zh_lb_sendmsg6;
	progs[6] = lb->skel->progs.zh_lb_recvmsg6;
	progs[7] = lb->skel->progs.zh_lb_getpeername6;
	for (i = 0; i < LB_N_LINKS; i++) {
		ret = pin_path(path, sizeof(path), o->pin_dir, link_names[i]);
		if (ret)
			goto fail;
		if (access(path, F_OK) == 0) {
			/* Adopt: switch the running link to the new program. */
			lb->links[i] = bpf_link__open(path);
			if (!lb->links[i]) {
				ret = -errno;
				zh_err("lb: open pinned link %s: %s", path, strerror(-ret));
				goto fail;
			}
			ret = bpf_link__update_program(lb->links[i], progs[i]);
			if (ret) {
				zh_err("lb: update pinned link %s: %s", path, strerror(-ret));
				goto fail;
			}
			continue;
		}
		if (cgfd < 0) {
			if (!o->cgroup) {
				ret = -EINVAL;
				zh_err("lb: no pinned links in %s and no --cgroup to attach to", o->pin_dir);
				goto fail;
			}
			cgfd = open(o->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (cgfd < 0) {
				ret = -errno;
				zh_err("lb: open cgroup %s: %s", o->cgroup, strerror(-ret));
				goto fail;
			}
		}
		lb->links[i] = bpf_program__attach_cgroup(progs[i], cgfd);
		if (!lb->links[i]) {
			ret = -errno;
			zh_err("lb: attach %s to %s: %s", bpf_program__name(progs[i]), o->cgroup,
			       strerror(-ret));
			goto fail;
		}
		ret = bpf_link__pin(lb->links[i], path);
		if (ret) {
			zh_err("lb: pin link %s: %s", path, strerror(-ret));
			goto fail;
		}
	}
	if (cgfd >= 0)
		close(cgfd);
	cgfd = -1;
	{
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = mirror_load(lb);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (!ret && lb->n_m)
			zh_info("lb: adopted %d pinned services in %.2f ms", lb->n_m,
				(double)(t1.tv_sec - t0.tv_sec) * 1e3 +
					(double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	}
	if (ret)
		goto fail;
	*out = lb;
	return 0;
fail:
	if (cgfd >= 0)
		close(cgfd);
	ag_lb_close(lb, false);
	return ret;
}

void ag_lb_close(struct ag_lb *lb, bool unpin)
{
	int i;

	if (!lb)
		return;
	for (i = 0; i < LB_N_LINKS; i++) {
		if (!lb->links[i])
			continue;
		if (unpin) {
			bpf_link__unpin(lb->links[i]);
			bpf_link__detach(lb->links[i]);
		}
		bpf_link__destroy(lb->links[i]);	/* pinned: stays attached */
	}
	if (lb->skel && unpin) {
		struct bpf_map *m;

		bpf_object__for_each_map(m, lb->skel->obj)	/* every pin ag_lb_open set */
			if (bpf_map__pin_path(m))
				bpf_map__unpin(m, NULL);
		rmdir(lb->pin_dir);	/* fails while accel pins remain: fine */
	}
	zh_lb__destroy(lb->skel);
	mirror_free(lb);
	free(lb->gone);
	free(lb);
}

int ag_lb_cleanup(const char *pin_dir)
{
	char path[320];
	int i, ret = 0;

	ag_pin_upgrade(pin_dir, NULL);	/* so pins of an older layout go too */
	for (i = 0; i < LB_N_LINKS; i++) {
		struct bpf_link *l;

		pin_path(path, sizeof(path), pin_dir, link_names[i]);
		if (access(path, F_OK))
			continue;
		l = bpf_link__open(path);
		if (l) {
			bpf_link__detach(l);
			bpf_link__destroy(l);
		}
		if (unlink(path) && errno != ENOENT)
			ret = -errno;
	}
	for (i = 0; i < N_MAPS; i++) {
		pin_path(path, sizeof(path), pin_dir, map_names[i]);
		if (unlink(path) && errno != ENOENT)
			ret = -errno;
	}
	rmdir(pin_dir);
	return ret;
}

/* ---- sync ----------------------------------------------------------------- */

/* A batch of map keys or values of one size, grown through vec.h. */
struct vec {
	void *v;
	size_t n, size;
	int cap;
};

static void *vec_push(struct vec *x)
{
	zh_reserve(&x->v, &x->cap, (int)x->n + 1, x->size);
	return (char *)x->v + x->size * x->n++;
}

static int batch_update(int fd, struct vec *k, struct vec *v)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
	uint32_t n = k->n, done = 0;
	int ret;

	while (done < k->n) {
		n = k->n - done;
		ret = bpf_map_update_batch(fd, (char *)k->v + done * k->size,
					   (char *)v->v + done * v->size, &n, &opts);
		if (ret)
			return ret;
		done += n;
	}
	return 0;
}

static int batch_delete(int fd, struct vec *k)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	uint32_t n, done = 0;
	size_t i;
	int ret;

	while (done < k->n) {
		n = k->n - done;
		ret = bpf_map_delete_batch(fd, (char *)k->v + done * k->size, &n, &opts);
		if (ret == -ENOENT || (ret && n < k->n - done)) {
			/* Batch stops at the first missing key: finish one by one. */
			for (i = done + n; i < k->n; i++)
				bpf_map_delete_elem(fd, (char *)k->v + i * k->size);
			return 0;
		}
		if (ret)
			return ret;
		done += n;
	}
	return 0;
}

static void push_alias(struct vec *ak, struct vec *av, uint32_t id, int slot,
		       const struct zh_lb_alias_val *vals, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct zh_lb_alias_key *k = vec_push(ak);

		k->svc_id = id;
		k->slot = slot;
		k->idx = i;
		if (av)
			*(struct zh_lb_alias_val *)vec_push(av) = vals[i];
	}
}

static void push_backends(struct vec *v, const struct mirror_ent *m)
{
	uint32_t i;

	for (i = 0; i < m->val.count; i++) {
		*(struct zh_lb_backend *)vec_push(v) = m->alias[i].a;
		*(struct zh_lb_backend *)vec_push(v) = m->alias[i].b;
	}
}

static int cmp_be(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct zh_lb_backend));
}

/* gone = candidates (old backends of changed/removed services) that are a
 * backend of no service in c. */
static void compute_gone(struct ag_lb *lb, const struct ag_compiled *c, struct vec *cand)
{
	struct vec all = { .size = sizeof(struct zh_lb_backend) };
	struct zh_lb_backend *cv = cand->v;
	size_t i;
	int j, k;

	free(lb->gone);
	lb->gone = NULL;
	lb->n_gone = 0;
	if (!cand->n)
		return;
	for (j = 0; j < c->n_svcs; j++)
		for (k = 0; k < c->svcs[j].n_be; k++)
			*(struct zh_lb_backend *)vec_push(&all) = c->svcs[j].be[k].be;
	qsort(cv, cand->n, sizeof(*cv), cmp_be);
	if (all.n)
		qsort(all.v, all.n, all.size, cmp_be);
	lb->gone = zh_calloc(cand->n, sizeof(*lb->gone));
	for (i = 0; i < cand->n; i++) {
		if (i && !cmp_be(&cv[i], &cv[i - 1]))
			continue;
		if (all.n && bsearch(&cv[i], all.v, all.n, all.size, cmp_be))
			continue;
		lb->gone[lb->n_gone++] = cv[i];
	}
	free(all.v);
}

void ag_lb_track_gone(struct ag_lb *lb, bool on)
{
	lb->track_gone = on;
}

int ag_lb_gone(const struct ag_lb *lb, const struct zh_lb_backend **out)
{
	*out = lb->gone;
	return lb->n_gone;
}

int ag_lb_sync(struct ag_lb *lb, const struct ag_compiled *c, uint64_t generation,
	       struct ag_sync_stats *st)
{
	struct vec ak = { .size = sizeof(struct zh_lb_alias_key) };
	struct vec av = { .size = sizeof(struct zh_lb_alias_val) };
	struct vec sk = { .size = sizeof(struct zh_lb_svc_key) };
	struct vec sv = { .size = sizeof(struct zh_lb_svc_val) };
	struct vec sdel = { .size = sizeof(struct zh_lb_svc_key) };
	struct vec adel = { .size = sizeof(struct zh_lb_alias_key) };
	struct vec cand = { .size = sizeof(struct zh_lb_backend) };
	struct mirror_ent *nm;
	struct ag_sync_stats s = {};
	uint32_t next_id = lb->next_id;
	int i = 0, j = 0, n_nm = 0, ret;
	uint64_t v;
	uint32_t mk;

	nm = zh_calloc(c->n_svcs ? c->n_svcs : 1, sizeof(*nm));
	while (i < c->n_svcs || j < lb->n_m) {
		const struct ag_svc *d = i < c->n_svcs ? &c->svcs[i] : NULL;
		struct mirror_ent *m = j < lb->n_m ? &lb->m[j] : NULL;
		int cmp = !d ? 1 : !m ? -1 : memcmp(&d->key, &m->key, sizeof(d->key));
		struct mirror_ent *e;

		if (cmp > 0) {	/* in the maps, not desired: remove */
			if (lb->track_gone)
				push_backends(&cand, m);
			*(struct zh_lb_svc_key *)vec_push(&sdel) = m->key;
			push_alias(&adel, NULL, m->val.svc_id, m->val.slot, NULL, m->val.count);
			s.svc_removed++;
			j++;
			continue;
		}
		e = &nm[n_nm++];
		e->key = d->key;
		if (cmp == 0 && m->val.flags == d->flags && m->val.count == (uint32_t)d->n_be &&
		    !memcmp(m->alias, d->alias, d->n_be * sizeof(*d->alias))) {
			/* unchanged: the new mirror takes the old entry's copy
			 * (at 10,000 Services this loop runs on every sync; the
			 * old mirror frees NULL for it, also on the reload path) */
			e->val = m->val;
			e->alias = m->alias;
			m->alias = NULL;
			s.svc_same++;
			i++;
			j++;
			continue;
		}
		e->alias = zh_calloc(d->n_be ? d->n_be : 1, sizeof(*e->alias));
		memcpy(e->alias, d->alias, d->n_be * sizeof(*e->alias));
		if (cmp == 0) {	/* changed: other slot, flip, drop old slot */
			if (lb->track_gone)
				push_backends(&cand, m);
			e->val = m->val;
			e->val.slot = !m->val.slot;
			e->val.revision++;
			push_alias(&adel, NULL, m->val.svc_id, m->val.slot, NULL, m->val.count);
			s.svc_changed++;
			j++;
		} else {	/* new */
			e->val.svc_id = next_id++;
			e->val.slot = 0;
			e->val.revision = 1;
			s.svc_added++;
		}
		e->val.count = d->n_be;
		e->val.flags = d->flags;
		push_alias(&ak, &av, e->val.svc_id, e->val.slot, d->alias, d->n_be);
		*(struct zh_lb_svc_key *)vec_push(&sk) = e->key;
		*(struct zh_lb_svc_val *)vec_push(&sv) = e->val;
		i++;
	}
	s.alias_written = ak.n;
	s.alias_deleted = adel.n;

	/* Phase 1: new slots (invisible to the kernel until flipped). */
	ret = batch_update(lb->fd_alias, &ak, &av);
	if (ret) {
		zh_err("lb: write %zu alias entries: %s", ak.n, strerror(-ret));
		batch_delete(lb->fd_alias, &ak);
		goto reload;
	}
	/* Phase 2: flip / add services, each one atomic map update. */
	ret = batch_update(lb->fd_svc, &sk, &sv);
	if (ret) {
		zh_err("lb: write %zu services: %s", sk.n, strerror(-ret));
		goto reload;
	}
	/* Phase 3 and 4: removed services, then unreferenced alias entries. */
	ret = batch_delete(lb->fd_svc, &sdel);
	if (!ret)
		ret = batch_delete(lb->fd_alias, &adel);
	if (ret) {
		zh_err("lb: delete old entries: %s", strerror(-ret));
		goto reload;
	}
	mirror_free(lb);
	lb->m = nm;
	lb->n_m = n_nm;
	nm = NULL;
	lb->next_id = next_id;
	if (lb->track_gone)
		compute_gone(lb, c, &cand);

	mk = ZH_LB_META_SYNCS;
	if (bpf_map_lookup_elem(lb->fd_meta, &mk, &v) == 0) {
		v++;
		bpf_map_update_elem(lb->fd_meta, &mk, &v, BPF_ANY);
	}
	mk = ZH_LB_META_AGENT_PID;
	v = getpid();
	bpf_map_update_elem(lb->fd_meta, &mk, &v, BPF_ANY);
	mk = ZH_LB_META_GENERATION;	/* S3: last */
	v = generation;
	ret = bpf_map_update_elem(lb->fd_meta, &mk, &v, BPF_ANY);
	if (ret)
		ret = -errno;
	goto out;
reload:
	mirror_load(lb);	/* S1 */
out:
	if (nm) {
		for (i = 0; i < n_nm; i++)
			free(nm[i].alias);
		free(nm);
	}
	free(ak.v);
	free(av.v);
	free(sk.v);
	free(sv.v);
	free(sdel.v);
	free(adel.v);
	free(cand.v);
	if (st)
		*st = s;
	return ret;
}

/* ---- reading pinned counters ------------------------------------------------ */

int ag_lb_read_stats(const char *pin_dir, uint64_t stats[ZH_LB_STAT_MAX],
		     uint64_t meta[ZH_LB_META_MAX])
{
	char path[320];
	int fd_s = -1, fd_m = -1, ncpu, ret = 0;
	uint64_t *pc = NULL;
	uint32_t k;
	int c;

	memset(stats, 0, ZH_LB_STAT_MAX * sizeof(*stats));
	memset(meta, 0, ZH_LB_META_MAX * sizeof(*meta));
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return -EINVAL;
	pin_path(path, sizeof(path), pin_dir, "lb_stats");
	fd_s = bpf_obj_get(path);
	if (fd_s < 0) {
		ret = -errno;
		goto out;
	}
	pin_path(path, sizeof(path), pin_dir, "lb_meta");
	fd_m = bpf_obj_get(path);
	if (fd_m < 0) {
		ret = -errno;
		goto out;
	}
	pc = zh_calloc(ncpu, sizeof(*pc));
	for (k = 0; k < ZH_LB_STAT_MAX; k++) {
		if (bpf_map_lookup_elem(fd_s, &k, pc))
			continue;
		for (c = 0; c < ncpu; c++)
			stats[k] += pc[c];
	}
	for (k = 0; k < ZH_LB_META_MAX; k++)
		bpf_map_lookup_elem(fd_m, &k, &meta[k]);
out:
	free(pc);
	if (fd_m >= 0)
		close(fd_m);
	if (fd_s >= 0)
		close(fd_s);
	return ret;
}
