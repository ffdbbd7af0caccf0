/* agent.c — `zerohop agent`: the node agent's main loop.
 *
 * Design note: the sync loop
 * --------------------------
 *        ┌──────────────────────────────────────────────┐
 *        ▼                                              │
 *     IDLE ── inotify readable ──► DEBOUNCE ── quiet for debounce_ms ──► SYNC
 *      │                            (or max 20 ms)                         │
 *      └─ SIGTERM/SIGINT ─► EXIT (pins stay: the datapath keeps running)   │
 *                                                                          │
 *   SYNC: ss_watch_drain(); gen = ss_generation(); ss_load_delta();
 *         ag_pol_sync() (NetworkPolicy, policy_glue.c; A7);
 *         ag_compile_update() when the load was an in-place pod patch,
 *         else ag_compile();
 *         ag_lb_sync() (or ag_nft_apply() in --mode nft);
 *         ag_accel_set_local(this node's pod IPs);
 *         set_proxy_eps() (the node proxy's endpoints, when --proxy-cgroup);
 *         back to IDLE. While the proxy has not published its capture
 *         address yet (zh_l7cap_cfg[0] empty), IDLE also wakes every
 *         PROXY_POLL_MS to look again (A8).
 *
 * Invariants:
 *  A1. The watch is drained *before* the state is read, so a change that
 *      lands during SYNC makes the fd readable again and is never lost.
 *  A2. The generation written to lb_meta is read before ss_load(), so it
 *      never claims a state newer than the one in the maps.
 *  A3. A failed load or compile leaves the maps exactly as they were (the
 *      last good state stays in force); the agent logs and waits for the
 *      next change.
 *  A4. Startup = adopt pinned objects (lb.c) + one SYNC, so a restarted or
 *      upgraded agent reconciles whatever changed while it was down.
 *  A5. Incremental path: the agent keeps the last loaded state (a->st) and
 *      its compiled result (a->c), and a->c == ag_compile(a->st) after
 *      every successful sync. When the state source could patch a->st in
 *      place (pods or Services updated in place: ss_load_delta), only the
 *      entries of the affected Services are recompiled (ag_compile_update);
 *      any other change is a full load + compile. Whenever a->st and a->c
 *      may disagree (a load, compile or update error) both are dropped and
 *      the next sync is full. The map sync always gets the whole a->c and
 *      diffs it against its mirror (lb.c), so A3 holds on both paths.
 *  A6. Every AG_FULL_EVERY incremental syncs the next one is full (bounds
 *      the memory a patched state keeps: each patch holds its pod file).
 *  A7. The policy sync is skipped only on an incremental sync where no
 *      patched pod changed IP, node or container ports (only phase and
 *      fields policy does not read; a Service patched in place keeps its
 *      ClusterIP, the one Service field policy reads): its input did not
 *      change. A new pod (also a Pending one, which must be isolated before
 *      its command starts), a deleted pod or a label change is never
 *      incremental.
 *  A8. Node proxy legs (docs/accel.md): with --accel on and --proxy-cgroup,
 *      accel's programs are attached to the proxy's cgroup too, and
 *      accel_proxy holds exactly the proxy's capture address (read from the
 *      zh_l7cap_cfg pin the proxy writes) and its upstream source address
 *      (pol_node_proxy_ip of this node in the state's Cluster). Without
 *      --proxy-cgroup accel_proxy is emptied: no pod socket is inserted for
 *      a peer that could never be in the sockhash.
 *  A9. With --health-file, every sync ends by publishing the generation in
 *      force (written after the maps, like lb_meta, so a reader never
 *      sees a generation the kernel does not have yet), and "degraded"
 *      with the error when the sync failed (A3: the previous generation is
 *      still the one in force). The lab waits on this file, not on maps.
 * A11. Identity (identity.h I6): every successful sync ends with
 *      id_renew_sync() for this node, and the loop calls id_renew_tick()
 *      at least every ID_RENEW_POLL_MS (half-life renewal, CA changes)
 *      with the state of the last successful sync only (a->id_st is NULL
 *      from the start of a sync until it succeeds: a load may free or
 *      patch a->st).
 * A10. With an etcd state source (docs/state-etcd.md) the watch fd is the
 *      source's eventfd, which also wakes on every change of reachability:
 *      the sync that follows republishes the health file, "degraded" with
 *      the reason while etcd is out of reach (the maps keep the last
 *      state, A3). An agent started while etcd is down adopts its pins
 *      (A4), fails its first load and waits for the watcher to list.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>

#include "zerohop/etcd.h"
#include "zerohop/abi/accel.h"
#include "zerohop/abi/obs.h"
#include "zerohop/abi/l7cap.h"
#include "zerohop/agent.h"
#include "zerohop/accel.h"
#include "zerohop/cli.h"
#include "zerohop/health.h"
#include "zerohop/identity.h"
#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/mounts.h"
#include "zerohop/obs.h"
#include "zerohop/paths.h"
#include "zerohop/policy.h"
#include "zerohop/state.h"
#include "policy_glue.h"

enum ag_mode { AG_MODE_BPF, AG_MODE_NFT };

struct agent {
	const char *node;
	const char *lab;
	bool lab_given;		/* --lab: the lab's state, not ZEROHOP_STATE */
	char cgroup[256];
	char state_dir[512];
	char pin_dir[256];
	char proxy_cg[256];	/* --proxy-cgroup: the node proxy's cgroup ("": none) */
	enum ag_mode mode;
	int accel;		/* 1 on, 0 off */
	/* --accel-skip-ports: never short-circuited (host order); applied
	 * after every ag_accel_open, also when adopting, so the flags of the
	 * running agent are the whole truth (an empty list clears the map) */
	uint16_t skip_ports[ZH_ACCEL_MAX_SKIP_PORTS];
	int n_skip;
	int debounce_ms;
	int destroy_stale;	/* 1: destroy sockets to removed backends */
	bool once;
	struct ss *ss;
	struct ag_lb *lb;
	struct ag_accel *acc;
	struct pol *pol;		/* NULL: no policy datapath (nft mode, load failure) */
	/* A5: the state and compiled result of the last sync, kept for the
	 * incremental path; token is ss_load_delta's */
	struct md_state *st;
	struct ag_compiled *c;
	uint64_t token;
	int n_incr;		/* incremental syncs since the last full one */
	/* A8: the endpoints last written to accel_proxy; pending while the
	 * proxy's capture address is not known yet */
	struct zh_accel_proxy_ep proxy_eps[2];
	int n_proxy_eps;
	struct zh_accel_proxy_ep6 proxy_eps6[2];	/* A8: its IPv6 listener and source */
	int n_proxy_eps6;
	bool proxy_pending;
	/* A9: --health-file, rewritten after every sync (health.h) */
	const char *health_file;
	struct zh_health health;
	/* L4 signals + /metrics (obs.c); NULL: off (nft mode, load failure) */
	struct ag_obs *obs;
	const char *metrics_addr;
	double last_sync_ts;	/* unix time of the last successful sync (metrics) */
	int max_series;
	int metrics;		/* --metrics on|off: L4 signals (default on) */
	/* A11: this node's SVIDs; id_st is a->st after a good sync, else NULL */
	int identity;		/* --identity on|off (default on) */
	struct id_renew idr;
	const struct md_state *id_st;
};

#define PROXY_POLL_MS 500	/* A8: look for the proxy's capture address */

/* A6: a full load and compile after this many incremental syncs. */
#define AG_FULL_EVERY 64

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* This node's pods with an IP: the local endpoints for acceleration. */
static void set_local_pods(struct agent *a, const struct md_state *st)
{
	struct in6_addr *ip6s;
	uint32_t *ips;
	int i, n = 0, ret;

	if (!a->acc)
		return;
	ips = zh_calloc(st->n_pods ? st->n_pods : 1, sizeof(*ips));
	for (i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		if (p->ip && p->spec.node_name && !strcmp(p->spec.node_name, a->node))
			ips[n++] = p->ip;
	}
	ret = ag_accel_set_local(a->acc, ips, n);
	if (ret)
		zh_warn("agent: accel local endpoints: %s", strerror(-ret));
	free(ips);
	/* and their IPv6 addresses (a dual-stack cluster) */
	ip6s = zh_calloc(st->n_pods ? st->n_pods : 1, sizeof(*ip6s));
	for (i = n = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		if (!IN6_IS_ADDR_UNSPECIFIED(&p->ip6) && p->spec.node_name &&
		    !strcmp(p->spec.node_name, a->node))
			ip6s[n++] = p->ip6;
	}
	ret = ag_accel_set_local6(a->acc, ip6s, n);
	if (ret)
		zh_warn("agent: accel local IPv6 endpoints: %s", strerror(-ret));
	free(ip6s);
}

/* A8: the node proxy's IPv6 endpoints into accel_proxy6: its capture
 * listener (zh_l7cap_cfg6[0], written by the proxy on a dual-stack node)
 * and its IPv6 upstream source (pol_node_proxy_ip6 of this node). */
static void set_proxy_ep6(struct agent *a)
{
	struct zh_accel_proxy_ep6 eps[2] = {};
	struct zh_l7cap_cfg6 cfg = {};
	char p[320], ip[INET6_ADDRSTRLEN];
	uint32_t zero = 0;
	int fd, ret, n = 0;

	if (a->proxy_cg[0]) {
		snprintf(p, sizeof(p), "%s/%s", a->pin_dir, ZH_L7CAP_CFG6_MAP);
		fd = bpf_obj_get(p);
		if (fd >= 0) {
			if (bpf_map_lookup_elem(fd, &zero, &cfg))
				memset(&cfg, 0, sizeof(cfg));
			close(fd);
		}
		if (cfg.proxy_port && memcmp(cfg.proxy_ip6, &in6addr_any, 16)) {
			memcpy(eps[n].ip6, cfg.proxy_ip6, 16);
			eps[n++].port = ntohs(cfg.proxy_port);
		}
		for (int i = 0; a->st && i < a->st->cluster.n_nodes; i++) {
			const char *name = a->st->cluster.nodes[i].name;
			struct in6_addr pip;

			if (!name || strcmp(name, a->node))
				continue;
			if (pol_node_proxy_ip6(&a->st->cluster, i, &pip))
				memcpy(eps[n++].ip6, pip.s6_addr, 16);	/* port 0: any */
			break;
		}
	}
	if (n == a->n_proxy_eps6 && !memcmp(eps, a->proxy_eps6, sizeof(eps[0]) * n))
		return;
	ret = ag_accel_set_proxy6(a->acc, eps, n);
	if (ret) {
		zh_warn("agent: accel proxy IPv6 endpoints: %s", strerror(-ret));
		return;
	}
	memcpy(a->proxy_eps6, eps, sizeof(eps));
	a->n_proxy_eps6 = n;
	for (int i = 0; i < n; i++)
		zh_info("agent: accel proxy endpoint [%s]%s%.0u",
			inet_ntop(AF_INET6, eps[i].ip6, ip, sizeof(ip)), eps[i].port ? ":" : " (any port)",
			eps[i].port);
}

/* A8: the node proxy's endpoints into accel_proxy: its capture address
 * (zh_l7cap_cfg[0], written by the proxy when it starts) and its upstream
 * source address (.1 of this node's pod range). */
static void set_proxy_eps(struct agent *a)
{
	struct zh_accel_proxy_ep eps[2] = {};
	struct zh_l7cap_cfg cfg = {};
	char p[320];
	uint32_t zero = 0;
	int n = 0, fd, ret;

	if (!a->acc)
		return;
	a->proxy_pending = false;
	if (a->proxy_cg[0]) {
		snprintf(p, sizeof(p), "%s/%s", a->pin_dir, ZH_L7CAP_CFG_MAP);
		fd = bpf_obj_get(p);
		if (fd >= 0) {
			if (bpf_map_lookup_elem(fd, &zero, &cfg))
				memset(&cfg, 0, sizeof(cfg));
			close(fd);
		}
		if (cfg.proxy_ip && cfg.proxy_port)
			eps[n++] = (struct zh_accel_proxy_ep){ .ip4 = cfg.proxy_ip,
							       .port = ntohs(cfg.proxy_port) };
		else
			a->proxy_pending = true;
		for (int i = 0; a->st && i < a->st->cluster.n_nodes; i++) {
			const char *name = a->st->cluster.nodes[i].name;
			uint32_t pip;

			if (!name || strcmp(name, a->node))
				continue;
			pip = pol_node_proxy_ip(&a->st->cluster, i);
			if (pip)
				eps[n++] = (struct zh_accel_proxy_ep){ .ip4 = pip, .port = 0 };
			break;
		}
	}
	set_proxy_ep6(a);
	if (n == a->n_proxy_eps && !memcmp(eps, a->proxy_eps, sizeof(eps[0]) * n))
		return;
	ret = ag_accel_set_proxy(a->acc, eps, n);
	if (ret) {
		zh_warn("agent: accel proxy endpoints: %s", strerror(-ret));
		return;
	}
	memcpy(a->proxy_eps, eps, sizeof(eps[0]) * n);
	a->n_proxy_eps = n;
	for (int i = 0; i < n; i++) {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &eps[i].ip4, ip, sizeof(ip));
		if (eps[i].port)
			zh_info("agent: accel proxy endpoint %s:%u", ip, eps[i].port);
		else
			zh_info("agent: accel proxy endpoint %s (any port)", ip);
	}
}

/* Merge delta b (a second load in the same sync) into a. */
static void delta_merge(struct ss_delta *a, struct ss_delta *b)
{
	if (!b->patched) {
		ss_delta_free(a);
		*a = *b;
		return;
	}
	if (a->patched) {
		a->svcs = zh_realloc(a->svcs, (size_t)(a->n_svcs + b->n_svcs + 1) * sizeof(int));
		memcpy(a->svcs + a->n_svcs, b->svcs, (size_t)b->n_svcs * sizeof(int));
		a->n_svcs += b->n_svcs;
		a->n_pods += b->n_pods;
		a->n_svc_objs += b->n_svc_objs;
		a->pol_relevant |= b->pol_relevant;
	}
	/* a full load followed by a patch is a full load */
	ss_delta_free(b);
}

/* Forget the kept state and compiled result: the next sync is a full one
 * (A5: whenever they may no longer match each other). */
static void drop_kept(struct agent *a)
{
	ag_compiled_free(a->c);
	a->c = NULL;
	a->token = 0;
}

/* A9: after every sync; a failed write is logged, never fatal. */
static void health_publish(struct agent *a, int sync_ret, uint64_t gen)
{
	struct zh_health *h = &a->health;
	int ret;

	h->pid = (int)getpid();
	h->syncs++;
	if (!sync_ret) {
		h->generation = gen;
		h->error[0] = '\0';
	} else if (!h->error[0]) {
		snprintf(h->error, sizeof(h->error), "%s", strerror(-sync_ret));
	}
	snprintf(h->state, sizeof(h->state), "%s", sync_ret ? "degraded" : "ready");
	/* A10: the kernel has gen, but the store is out of reach */
	if (!sync_ret && ss_health(a->ss, h->error, sizeof(h->error)))
		snprintf(h->state, sizeof(h->state), "degraded");
	if (!a->health_file)
		return;
	ret = zh_health_write(a->health_file, h);
	if (ret)
		zh_warn("agent: health file %s: %s", a->health_file, strerror(-ret));
}

static int sync_once(struct agent *a)
{
	struct ag_sync_stats s = {};
	struct ss_delta d = {}, d2 = {};
	struct md_err err = {};
	char ebuf[600];
	double t0 = now_ms(), tl, tp, t1, t2;
	uint64_t gen;
	int ret, n_upd = 0;
	bool incr;

	if (!a->c || a->n_incr >= AG_FULL_EVERY) {
		a->token = 0;	/* A6: a full load now and then */
		a->n_incr = 0;
	}
	a->id_st = NULL;	/* A11: a load may free or patch a->st; set again on success */
	ss_watch_drain(a->ss);	/* A1 */
	gen = ss_generation(a->ss);	/* A2 */
	ret = ss_load_delta(a->ss, &a->st, &a->token, &d, &err);
	if (!ret && ss_generation(a->ss) != gen) {
		/* A writer finished while we waited for the state lock: the
		 * state we hold is at least that new, but A2 only lets us claim
		 * what we read before loading. Load once more (cheap) so the
		 * marker can name the generation that is really in the maps. */
		gen = ss_generation(a->ss);
		ret = ss_load_delta(a->ss, &a->st, &a->token, &d2, &err);
		delta_merge(&d, &d2);
	}
	if (ret) {
		zh_err("agent: state %s: %s (previous state stays in force)", a->state_dir,
		       md_err_str(&err, ebuf, sizeof(ebuf)));
		snprintf(a->health.error, sizeof(a->health.error), "state: %.240s", ebuf);
		drop_kept(a);	/* a first load may have patched a->st */
		goto out;
	}
	incr = d.patched && a->c;
	tl = now_ms();
	/* Policy before the LB: once lb_meta names gen, the policy of gen is
	 * in force too (the lab waits on that before starting a pod). A policy
	 * error is logged and never stops the LB sync (policy_glue.c P2).
	 * A7: skipped when only pods' phases changed (policy never reads it). */
	if (!incr || d.pol_relevant)
		ag_pol_sync(a->pol, a->acc, a->st, a->node);
	tp = now_ms();
	if (incr) {
		ret = ag_compile_update(a->st, a->c, d.svcs, d.n_svcs, &n_upd, ebuf, sizeof(ebuf));
		if (ret) {
			zh_warn("agent: %s: compiling in full", ebuf);
			incr = false;
		}
	}
	if (!incr) {
		struct ag_compiled *c = NULL;

		ret = ag_compile(a->st, &c, ebuf, sizeof(ebuf));
		if (ret) {
			zh_err("agent: compile: %s (previous state stays in force)", ebuf);
			snprintf(a->health.error, sizeof(a->health.error), "compile: %.240s", ebuf);
			drop_kept(a);
			goto out;
		}
		ag_compiled_free(a->c);
		a->c = c;
		a->n_incr = 0;
	} else {
		a->n_incr++;
	}
	t1 = now_ms();
	if (a->mode == AG_MODE_NFT)
		ret = ag_nft_apply(a->c);
	else
		ret = ag_lb_sync(a->lb, a->c, gen, &s);
	t2 = now_ms();
	if (ret) {
		zh_err("agent: sync generation %llu: %s", (unsigned long long)gen, strerror(-ret));
		snprintf(a->health.error, sizeof(a->health.error), "sync generation %llu: %s",
			 (unsigned long long)gen, strerror(-ret));
		goto out;
	}
	if (!incr || d.pol_relevant)
		set_local_pods(a, a->st);
	if (a->lb)	/* mtls.c M1: rewritten at every sync (entries of STRICT pods only) */
		ag_mtls_sync(ag_lb_mtls_fd(a->lb), a->st, a->node);
	set_proxy_eps(a);
	if (a->destroy_stale && a->lb) {
		const struct zh_lb_backend *gone;
		int n_gone = ag_lb_gone(a->lb, &gone), killed = 0;

		if (n_gone > 0 && ag_destroy_stale(a->cgroup, gone, n_gone, &killed) == 0)
			zh_info("agent: destroy-stale: %d backends removed, %d sockets destroyed",
				n_gone, killed);
	}
	if (!incr || d.pol_relevant || d.n_svc_objs)	/* obs.c O6: labels may have changed */
		ag_obs_set_state(a->obs, a->st, a->c);
	else if (d.n_svcs)	/* obs.c O7: endpoints changed */
		ag_obs_set_endpoints(a->obs, a->c);
	a->id_st = a->identity ? a->st : NULL;	/* A11 */
	if (a->id_st)
		id_renew_sync(&a->idr, a->id_st);
	if (incr)
		snprintf(ebuf, sizeof(ebuf),
			 "incremental (%d pods, %d services changed, %d services recomputed, %d entries)",
			 d.n_pods, d.n_svc_objs, d.n_svcs, n_upd);
	else
		snprintf(ebuf, sizeof(ebuf), "full");
	zh_info("agent: generation %llu: %d services (+%d ~%d -%d =%d), alias +%d -%d; %s; load %.2f ms, policy %.2f ms, compile %.2f ms, sync %.2f ms",
		(unsigned long long)gen, a->c->n_svcs, s.svc_added, s.svc_changed, s.svc_removed,
		s.svc_same, s.alias_written, s.alias_deleted, ebuf, tl - t0, tp - tl, t1 - tp,
		t2 - t1);
out:
	ss_delta_free(&d);
	health_publish(a, ret, gen);
	if (!ret && strcmp(a->health.state, "degraded"))	/* in sync with the store */
		a->last_sync_ts = (double)time(NULL);
	if (a->obs) {
		struct ag_obs_agent_stats os = { .generation = a->health.generation,
						 .syncs = a->health.syncs,
						 .last_sync_ms = now_ms() - t0,
						 .degraded = ret != 0,
						 .state_degraded = !strcmp(a->health.state, "degraded"),
						 .last_sync_ts = a->last_sync_ts,
						 .n_svcs = a->c ? a->c->n_svcs : 0 };

		ag_obs_set_agent_stats(a->obs, &os);
	}
	return ret;
}

static int run(struct agent *a)
{
	struct pollfd pfd[2 + ZH_OBS_NPOLL];
	sigset_t mask;
	int sfd, ret;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0)
		return -errno;
	ret = sync_once(a);	/* A4 */
	if (a->once)
		goto out;
	pfd[0].fd = ss_watch_fd(a->ss);
	pfd[0].events = POLLIN;
	pfd[1].fd = sfd;
	pfd[1].events = POLLIN;
	for (;;) {
		double start;

		int n_obs = ag_obs_pollfds(a->obs, pfd + 2);
		int tmo = a->proxy_pending ? PROXY_POLL_MS : n_obs ? ZH_OBS_DRAIN_MS : -1;
		int np;

		if (a->id_st && (tmo < 0 || id_renew_timeout_ms(&a->idr) < tmo))	/* A11 */
			tmo = id_renew_timeout_ms(&a->idr);
		np = poll(pfd, 2 + (nfds_t)n_obs, tmo);
		id_renew_tick(&a->idr, a->id_st);

		if (np < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		if (np == 0) {
			if (a->proxy_pending)
				set_proxy_eps(a);	/* A8 */
			ag_obs_handle(a->obs, pfd + 2, n_obs);	/* drain (obs.bpf.c inv. 7) */
			continue;
		}
		if (pfd[1].revents)
			break;
		ag_obs_handle(a->obs, pfd + 2, n_obs);
		if (!(pfd[0].revents & POLLIN))
			continue;
		/* DEBOUNCE: wait until the writer is quiet, bounded. */
		start = now_ms();
		while (now_ms() - start < 20) {
			ss_watch_drain(a->ss);
			if (poll(pfd, 1, a->debounce_ms) == 0)
				break;
		}
		sync_once(a);	/* A3: errors are logged, the loop goes on */
	}
	ret = 0;
out:
	close(sfd);
	return ret;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: zerohop agent --node NODE [--lab LAB] [--cgroup PATH] [--state DIR|etcd://...]\n"
		"                     [--etcd-cacert F] [--etcd-cert F] [--etcd-key F]\n"
		"                     [--pin-dir DIR] [--accel on|off] [--accel-skip-ports PORT[,PORT...]]\n"
		"                     [--proxy-cgroup PATH]\n"
		"                     [--mode bpf|nft]\n"
		"                     [--debounce-ms N] [--destroy-stale on|off] [--once]\n"
		"                     [--health-file PATH] [--metrics on|off] [--metrics-addr IP:PORT]\n"
		"                     [--metrics-max-series N] [--identity on|off] [--svid-ttl DUR]\n"
		"                     [--ca-dir DIR] [--svid-dir DIR]\n"
		"       zerohop agent --cleanup --node NODE [--lab LAB] [--pin-dir DIR] [--mode bpf|nft]\n"
		"       zerohop agent --bench-latency N --node NODE [--lab LAB] -f A.yaml [-f B.yaml ...]\n");
}

static int on_off(const char *opt, const char *v, int *out)
{
	if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "true"))
		*out = 1;
	else if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "false"))
		*out = 0;
	else {
		fprintf(stderr, "zerohop agent: %s: expected on or off, got '%s'\n", opt, v);
		return -EINVAL;
	}
	return 0;
}

/* Parse "PORT[,PORT...]" (decimal 1..65535, at most ZH_ACCEL_MAX_SKIP_PORTS,
 * duplicates folded) into out[]; "" is the empty list. 0, or -EINVAL with a
 * message naming the bad item. */
static int parse_skip_ports(const char *list, uint16_t *out, int *n)
{
	const char *p = list;
	int item = 0;

	*n = 0;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		unsigned long v = 0;
		bool dup = false;

		item++;
		if (len == 0 || len > 5 || strspn(p, "0123456789") < len) {
			fprintf(stderr, "zerohop agent: --accel-skip-ports: item %d '%.*s' is not a port number (1..65535)\n",
				item, (int)(len > 32 ? 32 : len), p);
			return -EINVAL;
		}
		for (size_t i = 0; i < len; i++)
			v = v * 10 + (unsigned long)(p[i] - '0');
		if (v < 1 || v > 65535) {
			fprintf(stderr, "zerohop agent: --accel-skip-ports: item %d '%.*s' is out of range (1..65535)\n",
				item, (int)len, p);
			return -EINVAL;
		}
		for (int i = 0; i < *n; i++)
			dup |= out[i] == v;
		if (!dup) {
			if (*n == ZH_ACCEL_MAX_SKIP_PORTS) {
				fprintf(stderr, "zerohop agent: --accel-skip-ports: more than %d ports (item %d)\n",
					ZH_ACCEL_MAX_SKIP_PORTS, item);
				return -EINVAL;
			}
			out[(*n)++] = (uint16_t)v;
		}
		p += len;
		if (*p == ',' && !*++p) {
			fprintf(stderr, "zerohop agent: --accel-skip-ports: empty item after the last ','\n");
			return -EINVAL;
		}
	}
	return 0;
}

/* --cleanup: detach and unpin everything of this node (or drop the nft
 * table); what a node that leaves the mesh runs. Exit status. */
static int agent_cleanup(struct agent *a)
{
	int ret;

	if (a->mode != AG_MODE_NFT && access(a->pin_dir, F_OK)) {
		/* say so: `ip netns exec` mounts a fresh /sys, which hides
		 * /sys/fs/bpf, and a silent success would mislead */
		fprintf(stderr, "zerohop agent --cleanup: nothing pinned under %s (under `ip netns exec`, /sys/fs/bpf is hidden: run it outside)\n",
			a->pin_dir);
		return 0;
	}
	if (a->mode == AG_MODE_NFT) {
		ret = ag_nft_cleanup();
	} else {
		struct ag_accel *acc = NULL;
		char probe[300];

		ret = ag_lb_cleanup(a->pin_dir);
		/* accel: adopt what is pinned (enable=0 attaches nothing), then remove. */
		snprintf(probe, sizeof(probe), "%s/accel_sockhash", a->pin_dir);
		if (access(probe, F_OK) == 0 && ag_accel_open(NULL, a->pin_dir, 0, &acc) == 0)
			ag_accel_close(acc, 1);
		{
			int rp = ag_pol_cleanup(a->pin_dir);

			if (!ret)
				ret = rp;
		}
		ag_obs_cleanup(a->pin_dir);
		rmdir(a->pin_dir);
	}
	if (ret)
		fprintf(stderr, "zerohop agent --cleanup: %s: %s\n", a->pin_dir, strerror(-ret));
	return ret ? 1 : 0;
}

/* The node agent proper: open the state source, load or adopt the
 * datapath, then the sync loop (run). cg and sd are the --cgroup and
 * --state flags (NULL: the lab's naming). Exit status. */
static int agent_serve(struct agent *a, const char *cg, const char *sd)
{
	int ret;

	if (cg)
		snprintf(a->cgroup, sizeof(a->cgroup), "%s", cg);
	else
		lab_node_cgroup_path(a->cgroup, sizeof(a->cgroup), a->lab, a->node);
	if (!sd && !a->lab_given)
		sd = getenv("ZEROHOP_STATE");	/* docs/state-etcd.md */
	if (sd)
		snprintf(a->state_dir, sizeof(a->state_dir), "%s", sd);
	else
		zh_state_dir(a->state_dir, sizeof(a->state_dir), a->lab);

	ret = ss_open(a->state_dir, &a->ss);
	if (ret) {
		fprintf(stderr, "zerohop agent: state %s: %s\n", a->state_dir, strerror(-ret));
		return 1;
	}
	/* A fresh machine has no BPF filesystem: mount it, as Cilium does
	 * (never unmounted: pins must outlive the agent). */
	ret = zh_bpffs_for(a->pin_dir);
	if (ret == 1) {
		zh_info("agent: no BPF filesystem was mounted at %s: mounted one", ZH_BPFFS);
	} else if (ret < 0) {
		fprintf(stderr, "zerohop agent: cannot mount a BPF filesystem at %s: %s\n", ZH_BPFFS,
			strerror(-ret));
		goto out;
	}
	if (a->mode == AG_MODE_BPF) {
		struct ag_lb_opts o = { .cgroup = a->cgroup, .pin_dir = a->pin_dir };

		ret = ag_lb_open(&o, &a->lb);
		if (ret) {
			fprintf(stderr, "zerohop agent: load/adopt in %s on %s: %s\n", a->pin_dir,
				a->cgroup, strerror(-ret));
			goto out;
		}
		ag_lb_track_gone(a->lb, a->destroy_stale);
		/* After the LB (policy_glue.c P1); a failure leaves the LB running. */
		ag_pol_open(a->cgroup, a->pin_dir, &a->pol);
	}
	/* Acceleration shares the node cgroup; a failure there must not take
	 * service load balancing down with it. */
	ret = ag_accel_open(a->accel ? a->cgroup : NULL, a->pin_dir, a->accel, &a->acc);
	if (ret) {
		zh_warn("agent: acceleration %s unavailable: %s", a->accel ? "on" : "off",
			strerror(-ret));
		a->acc = NULL;
	} else {
		/* Fresh load or adoption alike: the opt-out is in force before
		 * the first sync (new connections only; docs/accel.md). */
		ret = ag_accel_set_skip_ports(a->acc, a->skip_ports, a->n_skip);
		if (ret)
			zh_err("agent: accel skip ports (%d): %s", a->n_skip, strerror(-ret));
		else if (a->n_skip)
			zh_info("agent: accel skips %d port(s), first %u", a->n_skip,
				(unsigned)a->skip_ports[0]);
		/* A8: the node proxy's legs; without the flag (or with accel
		 * off) any proxy link of an earlier run is removed. A failure
		 * leaves pod-to-pod acceleration running. */
		ret = ag_accel_attach_proxy(a->acc, a->accel ? a->proxy_cg : NULL);
		if (ret) {
			zh_warn("agent: accel on the proxy cgroup %s: %s (proxy legs take the normal path)",
				a->proxy_cg, strerror(-ret));
			a->proxy_cg[0] = '\0';
		} else if (a->accel && a->proxy_cg[0]) {
			zh_info("agent: accel also on the node proxy cgroup %s", a->proxy_cg);
		}
	}
	if (!a->acc || !a->accel)
		a->proxy_cg[0] = '\0';	/* accel_proxy emptied at the first sync */
	if (a->mode == AG_MODE_BPF && !a->metrics) {
		ag_obs_cleanup(a->pin_dir);	/* off: no obs program stays attached */
	} else if (a->mode == AG_MODE_BPF) {
		/* After LB, policy and accel: its connect hooks run last and
		 * see their verdicts (bpf/obs.bpf.c); a failure leaves the
		 * datapath running without L4 signals. */
		char sock[300];
		struct ag_obs_opts oo = { .node = a->node, .cgroup = a->cgroup,
					  .pin_dir = a->pin_dir, .metrics_addr = a->metrics_addr,
					  .sock_path = ag_obs_sock_path(sock, sizeof(sock), a->lab, a->node),
					  .max_series = a->max_series };

		ret = ag_obs_open(&oo, &a->obs);
		if (ret) {
			zh_warn("agent: L4 signals unavailable: %s", strerror(-ret));
			a->obs = NULL;
		}
	}
	zh_info("agent: node %s lab %s mode %s accel %s destroy-stale %s cgroup %s pins %s state %s",
		a->node, a->lab, a->mode == AG_MODE_NFT ? "nft" : "bpf", a->accel ? "on" : "off",
		a->destroy_stale ? "on" : "off", a->cgroup, a->pin_dir, a->state_dir);
	ret = run(a);
out:
	ag_obs_close(a->obs, 0);
	ag_compiled_free(a->c);
	md_state_free(a->st);
	pol_close(a->pol, 0);
	ag_accel_close(a->acc, 0);
	ag_lb_close(a->lb, false);
	ss_close(a->ss);
	return ret ? 1 : 0;
}

int cli_agent(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "lab", required_argument, NULL, 'l' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "state", required_argument, NULL, 's' },
		{ "pin-dir", required_argument, NULL, 'p' },
		{ "accel", required_argument, NULL, 'a' },
		{ "accel-skip-ports", required_argument, NULL, 'S' },
		{ "proxy-cgroup", required_argument, NULL, 'P' },
		{ "mode", required_argument, NULL, 'm' },
		{ "debounce-ms", required_argument, NULL, 'd' },
		{ "once", no_argument, NULL, 'o' },
		{ "cleanup", no_argument, NULL, 'C' },
		{ "bench-latency", required_argument, NULL, 'B' },
		{ "destroy-stale", required_argument, NULL, 'D' },
		{ "filename", required_argument, NULL, 'f' },
		{ "health-file", required_argument, NULL, 'H' },
		{ "metrics-addr", required_argument, NULL, 'M' },
		{ "metrics-max-series", required_argument, NULL, 'X' },
		{ "metrics", required_argument, NULL, 'E' },
		{ "identity", required_argument, NULL, 'I' },
		{ "svid-ttl", required_argument, NULL, 'T' },
		{ "ca-dir", required_argument, NULL, 'K' },
		{ "svid-dir", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		EG_TLS_OPTIONS,	/* etcd over TLS: docs/state-etcd.md */
		{ 0 },
	};
	struct agent a = { .accel = 1, .metrics = 1, .identity = 1, .debounce_ms = 1, .n_proxy_eps = -1 /* A8: first sync writes */ };
	const char *ds_env = getenv("ZH_AGENT_DESTROY_STALE");
	const char *lab_opt = NULL, *cg = NULL, *sd = NULL, *pd = NULL;
	const char *svid_ttl = getenv("ZH_AGENT_SVID_TTL");	/* the flag wins */
	const char *ca_dir = NULL, *svid_dir = NULL;	/* NULL: the lab's naming */
	long ttl_s = 0;
	bool cleanup = false;
	char *files[16];
	int c, bench_rounds = 0, n_files = 0;

	zh_log_init("agent", ZH_INFO);
	/* The environment sets the default (the lab passes its environment to
	 * the agents it starts); the flag wins. */
	if (ds_env && on_off("ZH_AGENT_DESTROY_STALE", ds_env, &a.destroy_stale))
		return 2;
	if (getenv("ZH_AGENT_METRICS_MAX_SERIES"))	/* same rule: the flag wins */
		a.max_series = atoi(getenv("ZH_AGENT_METRICS_MAX_SERIES"));
	if (getenv("ZH_AGENT_METRICS") && on_off("ZH_AGENT_METRICS", getenv("ZH_AGENT_METRICS"), &a.metrics))
		return 2;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hf:", opts, NULL)) != -1) {
		switch (c) {
		case 'n': a.node = optarg; break;
		case 'l': lab_opt = optarg; break;
		case 'c': cg = optarg; break;
		case 's': sd = optarg; break;
		case EG_TLS_FLAG ... EG_TLS_FLAG + 2: eg_tls_flag(c, optarg); break;
		case 'p': pd = optarg; break;
		case 'a':
			if (on_off("--accel", optarg, &a.accel))
				return 2;
			break;
		case 'P':
			if (snprintf(a.proxy_cg, sizeof(a.proxy_cg), "%s", optarg) >=
			    (int)sizeof(a.proxy_cg)) {
				fprintf(stderr, "zerohop agent: --proxy-cgroup: path too long\n");
				return 2;
			}
			break;
		case 'S':
			if (parse_skip_ports(optarg, a.skip_ports, &a.n_skip))
				return 2;
			break;
		case 'm':
			if (!strcmp(optarg, "bpf"))
				a.mode = AG_MODE_BPF;
			else if (!strcmp(optarg, "nft"))
				a.mode = AG_MODE_NFT;
			else {
				fprintf(stderr, "zerohop agent: --mode: expected bpf or nft, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'd':
			a.debounce_ms = atoi(optarg);
			if (a.debounce_ms < 0 || a.debounce_ms > 1000) {
				fprintf(stderr, "zerohop agent: --debounce-ms: 0..1000, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'o': a.once = true; break;
		case 'C': cleanup = true; break;
		case 'D':
			if (on_off("--destroy-stale", optarg, &a.destroy_stale))
				return 2;
			break;
		case 'B': bench_rounds = atoi(optarg); break;
		case 'H': a.health_file = optarg; break;
		case 'M': a.metrics_addr = optarg; break;
		case 'E':
			if (on_off("--metrics", optarg, &a.metrics))
				return 2;
			break;
		case 'I':
			if (on_off("--identity", optarg, &a.identity))
				return 2;
			break;
		case 'T': svid_ttl = optarg; break;
		case 'K': ca_dir = optarg; break;
		case 'V': svid_dir = optarg; break;
		case 'X':
			a.max_series = atoi(optarg);
			if (a.max_series < 1 || a.max_series > 1000000) {
				fprintf(stderr, "zerohop agent: --metrics-max-series: 1..1000000, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'f':
			if (n_files == 16) {
				fprintf(stderr, "zerohop agent: at most 16 -f files\n");
				return 2;
			}
			files[n_files++] = optarg;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (!a.node) {
		fprintf(stderr, "zerohop agent: --node is required\n");
		usage();
		return 2;
	}
	a.lab = zh_lab_name(lab_opt);
	a.lab_given = lab_opt != NULL;
	if (svid_ttl) {
		uint64_t ms;

		if (md_duration_ms(svid_ttl, &ms) || ms < ID_MIN_AGENT_TTL * 1000ULL) {
			fprintf(stderr, "zerohop agent: --svid-ttl %s: expected a duration of at least %ds (\"24h\", \"2m\")\n",
				svid_ttl, ID_MIN_AGENT_TTL);
			return 2;
		}
		ttl_s = (long)(ms / 1000);
	}
	{	/* A11: the lab's CA and this node's SVID directory (docs/identity.md) */
		char ca[256], out[256];

		if (ca_dir)
			snprintf(ca, sizeof(ca), "%s", ca_dir);
		else
			id_ca_dir(ca, sizeof(ca), a.lab);
		if (svid_dir)
			snprintf(out, sizeof(out), "%s", svid_dir);
		else
			id_svid_dir(out, sizeof(out), a.lab, a.node);
		id_renew_init(&a.idr, ca, out, a.node, ttl_s);
	}
	if (pd)
		snprintf(a.pin_dir, sizeof(a.pin_dir), "%s", pd);
	else
		zh_pin_dir(a.pin_dir, sizeof(a.pin_dir), a.lab, a.node);

	if (bench_rounds > 0) {
		if (sd)
			snprintf(a.state_dir, sizeof(a.state_dir), "%s", sd);
		else
			zh_state_dir(a.state_dir, sizeof(a.state_dir), a.lab);
		return ag_bench_latency(a.state_dir, a.pin_dir, files, n_files, bench_rounds) ? 1 : 0;
	}
	if (cleanup)
		return agent_cleanup(&a);
	return agent_serve(&a, cg, sd);
}
