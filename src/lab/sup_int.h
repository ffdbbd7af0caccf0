/* sup_int.h — internals of the lab supervisor, shared by its files (not a
 * contract for other components):
 *   lab_sup.c   the daemon: pod life cycle (design note there), readiness,
 *               termination, agents and proxies, the main loop
 *   sup_proc.c  processes: start in a cgroup and namespaces, exit, restart
 *               backoff; cgroup signalling
 *   sup_ctrl.c  the controllers: desired state (manifests) -> pods, bare
 *               Pods and Deployments (rollouts, scaling)
 */
#ifndef ZH_SUP_INT_H
#define ZH_SUP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "zerohop/lab.h"
#include "zerohop/model.h"
#include "zerohop/state.h"
#include "lab_int.h"
#include "lab_plan.h"

#define READY_MS 5000		/* max wait for declared ports to listen */
#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 5000
#define BACKOFF_RESET_MS 10000
#define STOP_GRACE_MS 1000	/* SIGTERM to cgroup.kill */
#define KILL_WAIT_MS 2000	/* cgroup.kill until we stop waiting for the cgroup */
#define DEBOUNCE_MS 20
#define INITIAL_TIMEOUT_MS 120000
#define DAEMON_READY_MS 30000	/* max wait for an agent's first sync / a proxy's listen */
#define ISOLATE_MS 2000	/* max hold of a new pod's containers for the agents (invariant 6) */
#define TERM_SYNC_MS 2000	/* max wait for the agents to apply a removal (invariant 8) */
#define PROXY_STATS_PORT 15090	/* node proxy's Prometheus text on NODE_IP (Istio's port) */
#define AGENT_METRICS_PORT 15020	/* node agent's Prometheus text on NODE_IP (docs/observability.md) */

struct sup_proc {
	char **argv;		/* owned, NULL-terminated */
	char name[64];		/* container name or "agent" */
	char log[LAB_PATH];
	char cgroup[LAB_PATH];
	char netns[LAB_PATH];
	char uts[LAB_PATH];	/* "" for agents (node namespaces have none) */
	char mnt[LAB_PATH];
	pid_t pid;
	int restarts;
	int backoff_ms;
	uint64_t started_ms;
	uint64_t next_ms;	/* when pid == 0: start at this time */
	bool ever_execd;	/* exec succeeded at least once */
	bool exited_once;
	int exec_errno;		/* last exec failure, 0 if none */
	/* Node daemons (agents, proxies) only: */
	bool ready;		/* this run became ready (agent synced, proxy listens) */
	char health[LAB_PATH];	/* the agent's --health-file ("" for proxies) */
	char last_error[256];	/* the last line it logged before exiting, or its
				 * published sync error; "" if none */
};

enum pod_state { POD_STARTING, POD_RUNNING, POD_TERMINATING };
/* Steps of POD_TERMINATING, in order (design note). */
enum pod_term { TERM_SYNC, TERM_DRAIN, TERM_STOP, TERM_KILL };

struct sup_pod {
	char ns[64], name[128], owner[128], hash[16];
	int node;
	uint32_t ip;
	char addr[46];		/* what POD_IP says: the IPv6 in an IPv6-only lab
				 * (where ip is only an index), else ip */
	enum pod_state state;
	uint64_t created_ms;
	uint64_t seq;		/* creation order */
	char *yaml_meta;	/* labels + owner, for the runtime object */
	char *yaml_spec;	/* containers (name, image, ports) */
	struct lab_plan plan;	/* processes, ports, mounts (owned) */
	struct sup_proc *procs;
	int n_procs;
	bool published;		/* a runtime Pod is in the state source */
	uint64_t isolate_gen;	/* != 0: containers held until every agent synced this */
	uint64_t isolate_until;	/* ... or until this time (agent down or slow) */
	int drain_ms;		/* invariant 8: lab default or zerohop.io/drain-delay */
	enum pod_term term;	/* when TERMINATING: the current step */
	uint64_t term_gen;	/* generation of the ss_del_pod (TERM_SYNC) */
	uint64_t term_start;	/* when pod_terminate() ran */
	uint64_t term_until;	/* end of the current step */
	bool sc_pending;	/* sidecar config rewritten, reload not sent yet */
	struct sup_pod *next;
};

struct sup {
	struct lab_topo t;
	struct ss *ss;
	struct md_state *want;	/* latest valid desired state, or NULL */
	struct sup_pod *pods;
	int n_pods;
	uint64_t seq;
	uint8_t ipmap[LAB_MAX_NODES][256];
	int ipcur[LAB_MAX_NODES];
	int rr;
	struct sup_proc agents[LAB_MAX_NODES];
	struct sup_proc proxies[LAB_MAX_NODES];	/* argv NULL: no proxy (no mesh, nft) */
	char failed[64][300];	/* "ns/name/hash" that failed to plan: no retry */
	int n_failed;
	char last_err[1024];	/* why the last pod could not be created */
	char degraded[600];	/* --keep-going: the node daemon that could not start */
	uint64_t refresh_ms;	/* last daemons_refresh() */
	bool initial_done;
};

/* ---- sup_proc.c ---- */
uint64_t sup_now_ms(void);	/* CLOCK_MONOTONIC, ms */
/* Start p (fork, cgroup, namespaces of pod or node, exec). 0 or -errno;
 * an exec failure is recorded in p and counts as an exit. */
int sup_proc_start(struct sup_proc *p, const struct sup_pod *pod);
/* Record p's exit (status from waitpid) and schedule its restart with
 * backoff; who names it in the log. p->last_error gets the last line of
 * p's log (its own error line, as `kubectl describe` shows it). */
void sup_proc_exited(struct sup_proc *p, int status, const char *who);
void sup_log_last_line(const char *path, char *buf, size_t len);
void sup_proc_free(struct sup_proc *p);
bool sup_cgroup_populated(const char *cg);
void sup_cgroup_signal(const char *cg, int sig);	/* every process in cg */
/* SIGTERM, STOP_GRACE_MS, SIGKILL, wait: blocking (set-up failures only). */
void sup_cgroup_stop(const char *cg);

/* ---- sup_ctrl.c ---- */
/* Converge the pods towards s->want (bare Pods, then Deployments). */
void sup_reconcile(struct sup *s);
/* Reload s->want from the manifests; keeps the previous one on error. */
void sup_load_want(struct sup *s);

/* ---- lab_sup.c, for the controllers ---- */
struct sup_pod *sup_pod_create(struct sup *s, const char *ns, const char *name,
			       const char *owner, const char *hash,
			       const struct md_labels *labels, const struct md_labels *annotations,
			       const struct md_pod_spec *spec, const char *file, int line);
void sup_pod_terminate(struct sup *s, struct sup_pod *pod);	/* graceful (invariant 8) */
bool sup_failed_has(struct sup *s, const char *key);	/* "ns/name/hash" failed to plan */
/* Does node i's agent serve its pods (synced; always true without a mesh)?
 * A pod becomes Running (an endpoint) only on a serving node. */
bool sup_node_serving(const struct sup *s, int i);

/* ---- lab_sidecar.c (--mesh sidecar; a no-op in other labs) ---- */
int lab_sc_pod_plan(struct sup *s, struct sup_pod *pod, const struct md_labels *annotations);
int lab_sc_pod_capture(struct sup *s, struct sup_pod *pod);
void lab_sc_proc_fix(struct sup_proc *p);
void lab_sc_sync(struct sup *s);	/* re-render, reload what changed */
void lab_sc_tick(struct sup *s);	/* send reloads held back (main loop) */
bool lab_sc_planned(const struct lab_plan *p);	/* the plan has the sidecar container */
/* ---- lab_sidecar_bpf.c (--mesh sidecar --accel on) ---- */
void lab_sc_bpf_pod_add(struct sup *s, struct sup_pod *pod, const char *cg);
void lab_sc_bpf_pod_del(struct sup *s, struct sup_pod *pod, const char *cg);

#endif
