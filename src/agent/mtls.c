/* mtls.c — which connections the node's connect hook sends into the HBONE
 * tunnel: lb_mtls, the {pod, port} of OTHER nodes under STRICT mutual TLS
 * (bpf/lb.bpf.c invariant 10, docs/mtls.md "Client side").
 *
 * Invariants:
 *  M1 After a successful ag_lb_set_mtls the map holds exactly the entries
 *     of the state: for every pod with an IPv4, scheduled on another node,
 *     with some STRICT port, {ip, 0} = its own mode and {ip, port} for each
 *     port whose mode differs (md_mtls_strict_ports). This node's pods are
 *     never in it: same-node connections stay in the kernel (the
 *     short-circuit), and the node's policy programs refuse what is not
 *     local (bpf/policy.bpf.c invariant 11).
 *  M2 New entries are written before stale ones are deleted, so a pod that
 *     stays STRICT across a sync is never briefly plain text; a failed
 *     write leaves the previous entries and is retried at the next sync.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>

#include "zerohop/agent.h"
#include "zerohop/log.h"
#include "zerohop/model.h"
#include "zerohop/vec.h"

struct ent {
	struct zh_lb_mtls_key k;
	uint8_t mode;
};

struct collect {
	struct ent *v;
	int n, cap;
	uint32_t ip;
};

static void add(void *arg, uint16_t port, bool strict)
{
	struct collect *c = arg;

	zh_reserve((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v));
	c->v[c->n++] = (struct ent){ .k = { .ip = c->ip, .port = htons(port) },
				     .mode = strict ? ZH_LB_MTLS_STRICT : ZH_LB_MTLS_PLAIN };
}

static int cmp_ent(const void *a, const void *b)
{
	return memcmp(&((const struct ent *)a)->k, &((const struct ent *)b)->k,
		      sizeof(struct zh_lb_mtls_key));
}

static bool wanted(const struct collect *c, const struct zh_lb_mtls_key *k)
{
	struct ent e = { .k = *k };

	return c->n && bsearch(&e, c->v, (size_t)c->n, sizeof(*c->v), cmp_ent);
}

int ag_mtls_sync(int fd, const struct md_state *st, const char *node)
{
	struct collect c = { 0 };
	struct zh_lb_mtls_key k, next, *prev = NULL, *gone = NULL;
	int n_gone = 0, cap_gone = 0, ret = 0;

	for (int i = 0; st && i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		if (!p->ip || !p->spec.node_name || !strcmp(p->spec.node_name, node))
			continue;	/* M1: pods of other nodes, with an IPv4 */
		c.ip = p->ip;
		md_mtls_strict_ports(st, p, add, &c);
	}
	if (c.n)
		qsort(c.v, (size_t)c.n, sizeof(*c.v), cmp_ent);
	for (int i = 0; i < c.n; i++) {	/* M2: write first (duplicates agree) */
		if (bpf_map_update_elem(fd, &c.v[i].k, &c.v[i].mode, BPF_ANY)) {
			ret = -errno;
			zh_err("agent: lb_mtls: write: %s", strerror(errno));
			goto out;
		}
	}
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		k = next;
		prev = &k;
		if (wanted(&c, &k))
			continue;
		zh_reserve((void **)&gone, &cap_gone, n_gone + 1, sizeof(*gone));
		gone[n_gone++] = k;
	}
	for (int i = 0; i < n_gone; i++)
		bpf_map_delete_elem(fd, &gone[i]);
out:
	free(c.v);
	free(gone);
	return ret;
}
