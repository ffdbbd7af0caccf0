/* obs.h — the agent's L4 observability (prefix ag_obs_): connection events
 * from bpf/obs.bpf.c, aggregated into Istio-named Prometheus series with a
 * bounded label-set table, a flow log, and the HTTP endpoint that serves
 * both (docs/observability.md).
 *
 * Ownership: ag_obs_open() returns a struct ag_obs the agent frees with
 * ag_obs_close(); it copies what it keeps from md_state / ag_compiled
 * (ag_obs_set_state), so the caller may free those afterwards.
 *
 * HTTP endpoint (one listener on --metrics-addr IP:PORT, another on a unix
 * socket for the CLI; both served from the agent's poll loop):
 *   GET /metrics         Prometheus text 0.0.4
 *   GET /flows           the last ZH_OBS_FLOW_RING events, one JSON object a line
 *   GET /flows?follow=1  the same, then every new event as it comes (kept open)
 */
#ifndef ZH_OBS_H
#define ZH_OBS_H

#include <poll.h>
#include <stdint.h>
#include <stdio.h>

#include "zerohop/agent.h"
#include "zerohop/model.h"

#define ZH_OBS_DEFAULT_MAX_SERIES 2000	/* label sets per agent (--metrics-max-series) */
#define ZH_OBS_FLOW_RING 1024		/* recent events kept for /flows */
#define ZH_OBS_MAX_FOLLOWERS 16		/* /flows?follow=1 clients at once */
#define ZH_OBS_NPOLL 3			/* fds ag_obs_pollfds may fill */

struct ag_obs;
struct zh_obs_event;	/* zerohop/abi/obs.h */

struct ag_obs_opts {
	const char *node;
	const char *cgroup;		/* node cgroup (attach target; NULL: adopt pinned links only) */
	const char *pin_dir;
	const char *metrics_addr;	/* "IP:PORT" or NULL: no TCP listener */
	const char *sock_path;		/* unix socket path or NULL */
	int max_series;			/* label-set cap, > 0 */
};

/* The agent's own numbers, published with the metrics. */
struct ag_obs_agent_stats {
	uint64_t generation, syncs;
	double last_sync_ms;		/* load+policy+compile+map sync of the last sync */
	int degraded;			/* 1 when the last sync failed */
	int state_degraded;		/* 1 when the last sync failed or the store is out of reach */
	double last_sync_ts;		/* unix time of the last successful sync (0: none) */
	int n_svcs;			/* entries in lb_svc (map occupancy) */
};

/* Load obs.bpf.o reusing the pinned lb_sock (and the accel programs'
 * accel_sk), attach or adopt its links after the LB and policy hooks, open
 * the listeners. 0/-errno; on error nothing is left attached by this call. */
int ag_obs_open(const struct ag_obs_opts *o, struct ag_obs **out);

/* New labels: pods by IP (workload = owner Deployment or pod name), Services
 * by VIP:port, endpoints IP:port -> their one Service (obs.c O7). Copies
 * everything. */
void ag_obs_set_state(struct ag_obs *ob, const struct md_state *st, const struct ag_compiled *c);
/* Only the endpoint -> Service index (obs.c O7) from c, for a sync that
 * changed endpoints and nothing else set_state reads. */
void ag_obs_set_endpoints(struct ag_obs *ob, const struct ag_compiled *c);
void ag_obs_set_agent_stats(struct ag_obs *ob, const struct ag_obs_agent_stats *s);

/* Without the kernel (tests/unit/agent/test_obs_labels.c): an ag_obs with
 * its label and series tables only (no BPF, no listener; free with
 * ag_obs_close(ob, 0)); ag_obs_feed() takes one event as the ring buffer
 * would give it (labels resolved then, obs.c O3; a ZH_OBS_F_V6 event is
 * the e of a struct zh_obs_event6), ag_obs_write_metrics() writes what
 * GET /metrics answers. */
struct ag_obs *ag_obs_new_detached(const char *node, int max_series);
void ag_obs_feed(struct ag_obs *ob, const struct zh_obs_event *e);
void ag_obs_write_metrics(struct ag_obs *ob, FILE *f);

/* Poll integration: fill up to ZH_OBS_NPOLL entries; returns how many.
 * ag_obs_handle() gets the same entries back after poll(). */
int ag_obs_pollfds(struct ag_obs *ob, struct pollfd *p);
void ag_obs_handle(struct ag_obs *ob, const struct pollfd *p, int n);

/* The pinned obs_stats of a node (zerohop get stats; no agent needed):
 * events written and lost (ring buffer full). 0/-errno (-ENOENT: none). */
int ag_obs_read_pinned_stats(const char *pin_dir, uint64_t *events, uint64_t *lost);

/* Detach + unpin (unpin=1: --cleanup) or leave the pins (restart). */
void ag_obs_close(struct ag_obs *ob, int unpin);
int ag_obs_cleanup(const char *pin_dir);

/* The unix socket of a lab node's agent: RUN_ROOT/LAB/nodes/NODE/agent.sock. */
char *ag_obs_sock_path(char *buf, size_t len, const char *lab, const char *node);

/* GET target from an agent's unix socket: the fd positioned at the body
 * (read it to EOF, then close), or -errno. */
int ag_obs_sock_get(const char *path, const char *target);

/* CLI: zerohop observe (src/agent/obs_cli.c), top (top_cli.c), dashboard. */
int cli_observe(int argc, char **argv);
int cli_top(int argc, char **argv);
int cli_dashboard(int argc, char **argv);	/* dash_cli.c */

#endif
