/* policy_glue.h — the node agent's side of NetworkPolicy (prefix ag_pol_).
 *
 * Private to src/agent/: agent.c calls these around the policy datapath
 * (include/zerohop/policy.h) so that its sync loop stays a few lines longer.
 * Errors are logged here; none of them stops the service load balancer.
 */
#ifndef ZH_AGENT_POLICY_GLUE_H
#define ZH_AGENT_POLICY_GLUE_H

#include "zerohop/accel.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"

/* Load or adopt the policy datapath on the node cgroup. Call AFTER the
 * socket LB is attached (its connect4 must run first so policy judges the
 * chosen backend). On failure logs a warning and sets *out = NULL: the node
 * then runs without policy enforcement (the LB keeps working). */
void ag_pol_open(const char *cgroup, const char *pin_dir, struct pol **out);

/* One policy sync of st for node, all or nothing: on error it logs
 * "agent: policy: FILE:LINE: FIELD: MSG (previous policy stays in force)"
 * and returns -errno; the previous tables stay. Then (also after an error,
 * harmless: the generation did not move) tells the accelerator the
 * generation in force. p NULL: no-op. */
int ag_pol_sync(struct pol *p, struct ag_accel *acc, const struct md_state *st,
		const char *node);

/* `agent --cleanup`: detach and unpin the policy datapath under pin_dir,
 * if any. 0 / -errno. */
int ag_pol_cleanup(const char *pin_dir);

#endif
