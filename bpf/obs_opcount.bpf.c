// SPDX-License-Identifier: GPL-2.0
/* obs_opcount.bpf.c — a measuring aid, never loaded by the agent: counts
 * the sock_ops callbacks a node's cgroup sees, per op and per state
 * transition, so scripts/bench-obs-bpfcost.sh can say how many times every
 * sock_ops program on that cgroup runs per connection and why
 * (docs/observability.md, "Cost"). The script loads it with bpftool and
 * attaches it beside the agent's programs (multi); it asks for no callback
 * flag itself, so it sees exactly what the others asked for.
 *
 * zh_obs_nop, attached the same way, returns at once: its run time under
 * BPF_ENABLE_STATS is what the accounting itself adds to every run (two
 * clock reads), the floor to take off the other programs' figures.
 *
 * obs_opcount[op]                        op < 32 (BPF_SOCK_OPS_*)
 * obs_opcount[32 + old * 16 + new]       each BPF_SOCK_OPS_STATE_CB transition
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lib/v4mapped.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32 + 16 * 16);
	__type(key, __u32);
	__type(value, __u64);
} obs_opcount SEC(".maps");

SEC("sockops")
int zh_obs_opcount(struct bpf_sock_ops *skops)
{
	__u32 k = skops->op;
	__u64 *v;

	if (k == BPF_SOCK_OPS_STATE_CB)
		k = 32 + (skops->args[0] & 15) * 16 + (skops->args[1] & 15);
	else if (k >= 32)
		return 1;
	v = bpf_map_lookup_elem(&obs_opcount, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 1;
}

SEC("sockops")
int zh_obs_nop(struct bpf_sock_ops *skops)
{
	return 1;
}

/* zh_obs_stateflag: only asks for the state callbacks obs asks for, on
 * the same sockets (IPv4 ones at connect and at ESTABLISHED), and does
 * nothing at them: attached to a lab without the signals
 * (scripts/bench-obs-flagcost.sh), what it adds is the cost of the 8 more
 * callbacks per connection themselves, every program on the cgroup
 * running at each, outside obs's own work. */
SEC("sockops")
int zh_obs_stateflag(struct bpf_sock_ops *skops)
{
	__u32 lip, rip;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		if (zh_sockops_v4(skops, &lip, &rip))
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
							 BPF_SOCK_OPS_STATE_CB_FLAG);
		break;
	}
	return 1;
}
