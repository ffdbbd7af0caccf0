/* policy_glue.c — NetworkPolicy in the node agent: open, sync, cleanup.
 *
 * Invariants:
 *  P1. The policy datapath is attached after the socket LB (agent.c calls
 *      ag_pol_open after ag_lb_open), so connect4 of policy sees the backend
 *      the LB chose, never a Service VIP it would have to guess about.
 *  P2. pol_sync is all or nothing: a failed sync leaves the previous tables
 *      (and generation) in force; the agent logs file:line:field and goes on
 *      with the LB sync of the same state.
 *  P3. After every sync the accelerator learns pol_generation(), so sockets
 *      short-circuited under an older generation go back to the normal path
 *      where cgroup_skb re-judges them (revocation, docs/policy.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "zerohop/log.h"
#include "policy_glue.h"

void ag_pol_open(const char *cgroup, const char *pin_dir, struct pol **out)
{
	int ret;

	*out = NULL;
	ret = pol_open(cgroup, pin_dir, out);
	if (ret) {
		zh_warn("agent: policy datapath unavailable on %s (pins %s): %s; NetworkPolicy NOT enforced",
			cgroup, pin_dir, strerror(-ret));
		*out = NULL;
	}
}

int ag_pol_sync(struct pol *p, struct ag_accel *acc, const struct md_state *st,
		const char *node)
{
	struct md_err err = {};
	struct timespec t0, t1;
	char ebuf[900];
	uint32_t before;
	int ret, r2;

	if (!p)
		return 0;
	before = pol_generation(p);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = pol_sync(p, st, node, &err);	/* P2 */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (ret)
		zh_err("agent: policy: %s (previous policy stays in force)",
		       md_err_str(&err, ebuf, sizeof(ebuf)));
	else if (pol_generation(p) != before)
		zh_info("agent: policy generation %u: %d policies, sync %.2f ms", pol_generation(p),
			st->n_netpols, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	if (acc) {
		r2 = ag_accel_set_policy_gen(acc, pol_generation(p));	/* P3 */
		if (r2)
			zh_warn("agent: accel policy generation: %s", strerror(-r2));
	}
	return ret;
}

int ag_pol_cleanup(const char *pin_dir)
{
	struct pol *p = NULL;
	char probe[600];
	int ret;

	/* Nothing pinned: nothing to do (pol_open would create the maps). */
	snprintf(probe, sizeof(probe), "%s/pol_cfg", pin_dir);
	if (access(probe, F_OK))
		return 0;
	/* Detach the pinned links first: a running agent still holds them, so
	 * only unlinking the pins would leave the hooks on the cgroup. */
	for (int i = 0; i < POL_N_LINKS; i++) {
		struct bpf_link *l;

		snprintf(probe, sizeof(probe), "%s/%s", pin_dir, pol_link_names[i]);
		if (access(probe, F_OK))
			continue;	/* e.g. the per-packet pair while nothing was isolated */
		l = bpf_link__open(probe);
		if (l) {
			bpf_link__detach(l);
			bpf_link__destroy(l);
		}
	}
	/* Adopt the maps without attaching anything, then unpin everything. */
	ret = pol_open(NULL, pin_dir, &p);
	if (ret)
		return ret == -ENOENT ? 0 : ret;
	pol_close(p, 1);
	return 0;
}
