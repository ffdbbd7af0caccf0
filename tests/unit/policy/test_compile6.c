/* test_compile6.c — the compiler's IPv6 tables (src/policy/pol_compile.c
 * invariant 7): a pod's IPv6 carries its IPv4's ipcache value, an
 * IPv6-only pod gets an identity, IPv6 ipBlock classes are their own set
 * numbered after the IPv4 ones and never match the other family, named
 * egress ports resolve through an IPv6 block, output is deterministic. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "tap.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"
#include "pol_model.h"

#define POD(name, ip4, ip6, labels, ports) \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: " name ", namespace: x, labels: " labels "}\n" \
	"spec: {nodeName: node-a, containers: [{name: c, ports: " ports "}]}\n" \
	"status: {phase: Running, podIP: " ip4 ", podIPs: [{ip: " ip4 "}, {ip: \"" ip6 "\"}]}\n---\n"

static const char *base =
	POD("a", "10.244.0.1", "fd00::1", "{app: a}", "[]")
	POD("b1", "10.244.0.2", "fd00::2", "{app: b}", "[{name: http, containerPort: 8080}]")
	POD("b2", "10.244.0.3", "fd00::3", "{app: b}", "[{name: http, containerPort: 9090}]")
	"apiVersion: v1\nkind: Pod\nmetadata: {name: v6only, namespace: x, labels: {app: six}}\n"
	"spec: {nodeName: node-a, containers: [{name: c}]}\n"
	"status: {phase: Running, podIP: \"fd00::9\"}\n---\n";

#define NP(name, spec) "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n" \
		       "metadata: {name: " name ", namespace: x}\nspec:\n" spec "---\n"

static const char *policies =
	/* b: ingress from any IPv4 address only, port 8080 */
	NP("b-v4", "  podSelector: {matchLabels: {app: b}}\n"
		   "  ingress: [{from: [{ipBlock: {cidr: 0.0.0.0/0}}], ports: [{port: 8080}]}]\n")
	/* a: egress to fd00::/64 except fd00::3, on the named port http */
	NP("a-v6", "  podSelector: {matchLabels: {app: a}}\n  policyTypes: [Egress]\n"
		   "  egress: [{to: [{ipBlock: {cidr: \"fd00::/64\", except: [\"fd00::3/128\"]}}],"
		   " ports: [{port: http}]}]\n")
	/* the IPv6-only pod: ingress from app=b only */
	NP("six", "  podSelector: {matchLabels: {app: six}}\n"
		  "  ingress: [{from: [{podSelector: {matchLabels: {app: b}}}]}]\n");

static const uint8_t *a6(const char *s)
{
	static uint8_t v[4][16];
	static int i;

	i = (i + 1) % 4;
	inet_pton(AF_INET6, s, v[i]);
	return v[i];
}

static uint32_t a4(const char *s)
{
	uint32_t v;

	inet_pton(AF_INET, s, &v);
	return v;
}

static bool ok6(const struct pol_compiled *c, const char *src, const char *dst, int port)
{
	uint32_t reason, pid;

	return pol_eval6(c, a6(src), a6(dst), (uint16_t)port, MD_PROTO_TCP, &reason, &pid);
}

static bool ok4(const struct pol_compiled *c, const char *src, const char *dst, int port)
{
	uint32_t reason, pid;

	return pol_eval(c, a4(src), a4(dst), (uint16_t)port, MD_PROTO_TCP, &reason, &pid);
}

/* One direction only: may local talk with peer in dir on port? */
static bool dir6(const struct pol_compiled *c, int dir, const char *local, const char *peer,
		 int port)
{
	return pol_eval_dir6(c, dir, a6(local), a6(peer), (uint16_t)port, MD_PROTO_TCP);
}

static const struct pol_ipc_val *find6(const struct pol_compiled *c, const char *s)
{
	const uint8_t *k = a6(s);

	for (int i = 0; i < c->n_ipc6; i++)
		if (!memcmp(c->ipc6[i].ip, k, 16))
			return &c->ipc6[i].val;
	return NULL;
}

static const struct pol_ipc_val *find4(const struct pol_compiled *c, const char *s)
{
	for (int i = 0; i < c->n_ipc; i++)
		if (c->ipc[i].ip == a4(s))
			return &c->ipc[i].val;
	return NULL;
}

int main(void)
{
	struct md_state *st = pm_load(base, policies);
	struct pol_compiled *c = NULL, *c2 = NULL;
	struct md_err err;
	uint32_t max4 = 0, min6 = UINT32_MAX;
	bool same = true;

	if (!st || pol_compile(st, "node-a", NULL, &c, &err) ||
	    pol_compile(st, "node-a", NULL, &c2, &err)) {
		ok(0, "compile: %s", st ? err.msg : "model");
		return done_testing();
	}
	if (getenv("DUMP"))
		pol_compiled_dump(c, stderr);
	ok(c->n_ipc6 == 4, "IPv6 ipcache: the 4 pods (one IPv6-only)");
	for (int i = 0; i < 3; i++) {
		static const char *const v4[3] = { "10.244.0.1", "10.244.0.2", "10.244.0.3" };
		static const char *const v6[3] = { "fd00::1", "fd00::2", "fd00::3" };
		const struct pol_ipc_val *x = find4(c, v4[i]), *y = find6(c, v6[i]);

		same = same && x && y && !memcmp(x, y, sizeof(*x));
	}
	ok(same, "each dual-stack pod's IPv6 entry is its IPv4 entry (identity, flags, policies)");
	const struct pol_ipc_val *six = find6(c, "fd00::9");

	ok(six && six->id >= POL_ID_FIRST_POD && (six->flags & POL_F_LOCAL) &&
	   (six->flags & POL_F_ISO_INGRESS), "the IPv6-only pod has an identity, local, isolated");
	ok(ok6(c, "fd00::2", "fd00::9", 80) && !dir6(c, POL_DIR_INGRESS, "fd00::9", "fd00::1", 80),
	   "IPv6-only pod: b1 (by label) in, a out");

	for (int i = 0; i < c->n_cidrs; i++)
		max4 = c->cidrs[i].class_id > max4 ? c->cidrs[i].class_id : max4;
	for (int i = 0; i < c->n_cidrs6; i++)
		min6 = c->cidrs6[i].class_id < min6 ? c->cidrs6[i].class_id : min6;
	ok(c->n_cidrs == 1 && c->n_cidrs6 >= 2 && min6 > max4,
	   "IPv6 classes (%d) numbered after the IPv4 ones (%d)", c->n_cidrs6, c->n_cidrs);

	/* b admits 0.0.0.0/0: every IPv4 peer, no IPv6 one */
	ok(ok4(c, "10.244.0.3", "10.244.0.2", 8080), "IPv4 block 0.0.0.0/0 admits b2 -> b1 over IPv4");
	ok(!ok6(c, "fd00::9", "fd00::2", 8080), "... and no IPv6 peer (an IPv4 block has no IPv6 address)");
	/* a's egress: the IPv6 block with a named port, except b2 */
	ok(dir6(c, POL_DIR_EGRESS, "fd00::1", "fd00::2", 8080),
	   "a's egress: b1 over IPv6 on http (8080 on b1)");
	ok(!dir6(c, POL_DIR_EGRESS, "fd00::1", "fd00::2", 9090),
	   "a's egress: b1:9090 denied (http is 8080 there)");
	ok(!dir6(c, POL_DIR_EGRESS, "fd00::1", "fd00::3", 9090),
	   "a's egress: b2 denied (its /128 is the block's except)");
	ok(!ok6(c, "fd00::1", "fd00::2", 8080), "a -> b1 over IPv6 denied as a whole (b1 admits IPv4 only)");
	ok(!pol_eval_dir(c, POL_DIR_EGRESS, a4("10.244.0.1"), a4("10.244.0.2"), 8080, MD_PROTO_TCP),
	   "a's egress over IPv4 denied: an IPv6 block opens no IPv4 address");
	ok(c->n_ipc6 == c2->n_ipc6 && c->n_cidrs6 == c2->n_cidrs6 &&
	   !memcmp(c->ipc6, c2->ipc6, (size_t)c->n_ipc6 * sizeof(*c->ipc6)),
	   "two compiles give the same IPv6 tables (invariant 5)");
	pol_compiled_free(c);
	pol_compiled_free(c2);
	md_state_free(st);
	{	/* invariant 6: each node proxy's IPv6 source, ::1 of its /64 */
		static const char *cl =
			"apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nmetadata: {name: c}\n"
			"spec:\n  nodes: [node-a, node-b]\n"
			"  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n"
			"  serviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]\n---\n";
		struct in6_addr p6;
		int found = 0;

		st = pm_load(cl, "");
		if (!st || pol_compile(st, "node-a", NULL, &c, &err)) {
			ok(0, "compile with a Cluster: %s", st ? err.msg : "model");
			return done_testing();
		}
		ok(pol_node_proxy_ip6(&st->cluster, 1, &p6) &&
		   !memcmp(p6.s6_addr, a6("fd00:10:244:1::1"), 16),
		   "pol_node_proxy_ip6: node 1's is fd00:10:244:1::1 (::1 of its /64)");
		for (int i = 0; i < c->n_ipc6; i++)
			found += (c->ipc6[i].val.flags & POL_F_PROXY) &&
				 (!memcmp(c->ipc6[i].ip, a6("fd00:10:244::1"), 16) ||
				  !memcmp(c->ipc6[i].ip, a6("fd00:10:244:1::1"), 16));
		is_int(found, 2, "both nodes' proxy IPv6 sources are in the IPv6 ipcache as POL_F_PROXY");
		pol_compiled_free(c);
		md_state_free(st);
	}
	return done_testing();
}
