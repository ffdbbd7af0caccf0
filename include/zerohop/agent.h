/* agent.h — the node agent (prefix ag_): compile cluster state into the
 * service load-balancing maps, keep the kernel in sync with it, and the
 * nftables baseline fed from the same compiled state.
 *
 * Stages (each with its own tests):
 *   md_state --ag_compile()--> struct ag_compiled      pure, no I/O, no BPF
 *   struct ag_compiled --ag_lb_sync()--> pinned maps   make-before-break
 *   struct ag_compiled --ag_nft_render()--> nft script kube-proxy-style DNAT
 *
 * Ownership: ag_compile() returns a struct ag_compiled the caller frees with
 * ag_compiled_free(); it copies every string it keeps, so the md_state may
 * be freed first. struct ag_lb is owned by its opener (ag_lb_close()).
 */
#ifndef ZH_AGENT_H
#define ZH_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "zerohop/abi/lb.h"
#include "zerohop/model.h"

/* ---- compiler ------------------------------------------------------- */

/* One weighted backend of a service port (before the alias table). */
struct ag_wbackend {
	struct zh_lb_backend be;	/* v4-mapped address, port network order */
	double weight;			/* relative, > 0 */
	const char *pod;		/* "ns/name", owned by the ag_compiled */
	const char *via;		/* backend service "ns/name", owned */
};

/* One entry of the service map: VIP:port/proto and its backends. */
struct ag_svc {
	struct zh_lb_svc_key key;
	uint8_t flags;			/* enum zh_lb_svc_flags */
	char *ns, *name;		/* the Service, owned */
	char *port_name;		/* may be NULL */
	char *source;			/* "service", "TrafficSplit NS/NAME", "HTTPRoute NS/NAME" */
	struct ag_wbackend *be;		/* n_be weighted backends (weight > 0) */
	int n_be;
	struct zh_lb_alias_val *alias;	/* n_be alias entries (Walker), index = idx */
};

struct ag_compiled {
	struct ag_svc *svcs;		/* sorted by key (memcmp), unique keys */
	int n_svcs;
	char **notes;			/* human-readable notes: L7 not enforced, conflicts */
	int n_notes;
};

/* State -> map contents. 0, -EINVAL with a message in err (e.g. more than
 * ZH_LB_MAX_BACKENDS backends) or -E2BIG beyond the map limits. */
int ag_compile(const struct md_state *st, struct ag_compiled **out, char *err, size_t errlen);
void ag_compiled_free(struct ag_compiled *c);

/* Incremental compile: c is ag_compile()'s result for a state that differs
 * from st only in the endpoints of the Services st->services[svcs[i]]
 * (ss_load_delta's d->svcs). Recomputes the entries of those Services and
 * of every root whose TrafficSplit or L4 HTTPRoute uses one of them, and
 * replaces them in c, which then equals ag_compile(st) (entries and notes:
 * notes depend on manifests only). All or nothing: on error c is
 * unchanged (-ESTALE: c does not match st; recompile in full).
 * *n_entries gets the number of entries replaced. */
int ag_compile_update(const struct md_state *st, struct ag_compiled *c, const int *svcs, int n,
		      int *n_entries, char *err, size_t errlen);

/* Walker/Vose alias table for n weights (n <= ZH_LB_MAX_BACKENDS):
 * fills thr[i] (P(choose i | slot i) * 2^32, 0xffffffff = always) and
 * alias[i] (the other index). Deterministic for given weights. 0/-EINVAL. */
int ag_alias_build(const double *w, int n, uint32_t *thr, uint32_t *alias);

/* Exact probability of backend j implied by a built table (for tests). */
double ag_alias_prob(const uint32_t *thr, const uint32_t *alias, int n, int j);

/* ---- kernel side (BPF maps, links) --------------------------------------- */

struct ag_lb;

struct ag_lb_opts {
	const char *cgroup;		/* node cgroup path (attach target) */
	const char *pin_dir;		/* e.g. /sys/fs/bpf/zerohop/LAB/NODE */
};

/* Load lb.bpf.o adopting pinned maps (reuse), then attach to the cgroup or
 * adopt the pinned links and switch them to the new programs in place
 * (bpf_link_update): the datapath never has a gap. Reads the adopted maps
 * back so the next ag_lb_sync() writes only differences. 0/-errno. */
int ag_lb_open(const struct ag_lb_opts *o, struct ag_lb **out);

struct ag_sync_stats {
	int svc_added, svc_changed, svc_removed, svc_same;
	int alias_written, alias_deleted;
};

/* Make the maps equal to c, make-before-break (see src/agent/lb.c), then
 * write generation into lb_meta. On error the maps keep a consistent
 * mix of old and new services (never a half-written one). 0/-errno. */
int ag_lb_sync(struct ag_lb *lb, const struct ag_compiled *c, uint64_t generation,
	       struct ag_sync_stats *st);

/* mTLS (src/agent/mtls.c, M1-M2): make the pinned lb_mtls map (fd) hold
 * the STRICT {pod, port} of the pods of other nodes than node. ag_lb_mtls_fd
 * gives the loaded map's fd. 0/-errno (previous entries kept). */
int ag_mtls_sync(int fd, const struct md_state *st, const char *node);
int ag_lb_mtls_fd(const struct ag_lb *lb);

/* Remember, on each sync, which backends were removed from every service
 * (for --destroy-stale); ag_lb_gone() returns them (valid until the next
 * sync or close). */
void ag_lb_track_gone(struct ag_lb *lb, bool on);
int ag_lb_gone(const struct ag_lb *lb, const struct zh_lb_backend **out);

/* Destroy established TCP sockets of this node's pods whose peer is one of
 * gone[0..n): the pods are found as the child cgroups of node_cgroup (their
 * processes' network namespaces), each entered in a child process to run an
 * iter/tcp program calling bpf_sock_destroy. *destroyed gets the count.
 * 0/-errno. */
int ag_destroy_stale(const char *node_cgroup, const struct zh_lb_backend *gone, int n,
		     int *destroyed);

/* Leave everything pinned (unpin=false: restart/upgrade) or detach the links
 * and remove every pin (unpin=true: --cleanup). */
void ag_lb_close(struct ag_lb *lb, bool unpin);

/* Move the pins an agent of an older layout left in pin_dir to today's
 * names (rename(2) in bpffs; table and invariants P1-P3 in
 * src/agent/pin_upgrade.c). Called by ag_lb_open and ag_lb_cleanup before
 * they touch a pin. *moved (may be NULL) gets the count. 0/-errno. */
int ag_pin_upgrade(const char *pin_dir, int *moved);

/* Remove the pins of a pin dir without loading anything (agent --cleanup
 * with no agent running). 0/-errno. */
int ag_lb_cleanup(const char *pin_dir);

/* Read pinned counters of a node (sum over CPUs) and markers. 0/-errno. */
int ag_lb_read_stats(const char *pin_dir, uint64_t stats[ZH_LB_STAT_MAX],
		     uint64_t meta[ZH_LB_META_MAX]);
const char *ag_lb_stat_name(int stat);

/* ---- nftables baseline ----------------------------------------------------- */

/* Write an `nft -f` script replacing table ip zerohop with DNAT rules for c
 * (kube-proxy style: a verdict map VIP . port . proto -> per-service chain,
 * numgen random mod TOTAL weighted ranges -> dnat). 0/-errno. */
int ag_nft_render(const struct ag_compiled *c, FILE *f);
/* Run the script through nft in the current network namespace. */
int ag_nft_apply(const struct ag_compiled *c);
int ag_nft_cleanup(void);

/* ---- measurement ------------------------------------------------------- */

/* Apply files[i % n_files] rounds times to the state source at state_dir and
 * time each until the agent of pin_dir has written that generation into its
 * maps; prints min/median/p90/p99/max. 0, -ETIMEDOUT (> 2 s), -errno. */
int ag_bench_latency(const char *state_dir, const char *pin_dir, char *const *files, int n_files,
		     int rounds);

/* ---- helpers ---------------------------------------------------------- */

void ag_v4_mapped(uint8_t addr[16], uint32_t ip4_net);
uint32_t ag_v4_of(const uint8_t addr[16]);

#endif
