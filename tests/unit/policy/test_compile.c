/* test_compile.c — the pure policy compiler (src/policy/pol_compile.c):
 * port ranges as prefixes, protocols never mixed, named ports per pod,
 * ipBlock classes, isolation flags, node filter, limits, determinism. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "tap.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"
#include "pol_model.h"

#define POD(name, ip, node, labels, ports) \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: " name ", namespace: x, labels: " labels "}\n" \
	"spec: {nodeName: " node ", containers: [{name: c, ports: " ports "}]}\n" \
	"status: {phase: Running, podIP: " ip "}\n---\n"

static const char *base =
	POD("a", "10.244.0.1", "node-a", "{app: a}", "[]")
	POD("b1", "10.244.0.2", "node-a", "{app: b}", "[{name: http, containerPort: 8080}]")
	POD("b2", "10.244.0.3", "node-a", "{app: b}", "[{name: http, containerPort: 9090}]")
	POD("r", "10.244.1.1", "node-b", "{app: b}", "[{name: http, containerPort: 8080}]");

static bool allowed(const struct pol_compiled *c, const char *src, const char *dst, int port,
		    enum md_proto proto)
{
	uint32_t reason, pid;

	return pol_eval(c, pm_ip(src), pm_ip(dst), (uint16_t)port, proto, &reason, &pid);
}

#define NP(spec) "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n" \
		 "metadata: {name: p, namespace: x}\nspec:\n" spec

int main(void)
{
	struct pol_compiled *c = NULL, *c2 = NULL;
	struct md_state *st;
	struct md_err err;
	int ret;

	/* ranges */
	st = pm_load(base, NP("  podSelector: {matchLabels: {app: b}}\n"
		     "  ingress: [{ports: [{port: 80, endPort: 90}, {port: 1, endPort: 65535, protocol: UDP}]}]\n"));
	ok(st && pol_compile(st, "node-a", NULL, &c, &err) == 0, "range policy compiles");
	if (c) {
		bool in = true, out = false;

		for (int p = 80; p <= 90; p++)
			in &= allowed(c, "10.244.0.1", "10.244.0.2", p, MD_PROTO_TCP);
		out |= allowed(c, "10.244.0.1", "10.244.0.2", 79, MD_PROTO_TCP);
		out |= allowed(c, "10.244.0.1", "10.244.0.2", 91, MD_PROTO_TCP);
		ok(in && !out, "TCP 80-90 allowed exactly (79 and 91 denied)");
		ok(allowed(c, "10.244.0.1", "10.244.0.2", 1, MD_PROTO_UDP) &&
		   allowed(c, "10.244.0.1", "10.244.0.2", 65535, MD_PROTO_UDP),
		   "UDP 1-65535 allowed at both ends");
		ok(!allowed(c, "10.244.0.1", "10.244.0.2", 80, MD_PROTO_SCTP),
		   "SCTP 80 not opened by TCP/UDP rules");
		/* 80-90: 80-87, 88-89, 90 = 3 prefixes; 1-65535: 16 prefixes; x2 identities?
		 * b1 and b2 differ by named port, so 2 local identities */
		is_int(c->n_rules, 2 * (3 + 16), "ranges compile to aligned prefixes (3 + 16 per identity)");
		ok(pol_compile(st, "node-a", NULL, &c2, &err) == 0 && c2->n_rules == c->n_rules &&
		   !memcmp(c->rules, c2->rules, (size_t)c->n_rules * sizeof(*c->rules)) &&
		   !memcmp(c->ipc, c2->ipc, (size_t)c->n_ipc * sizeof(*c->ipc)),
		   "compiling twice gives byte-identical tables");
		pol_compiled_free(c2);
		c2 = NULL;
	}
	pol_compiled_free(c);
	c = NULL;
	md_state_free(st);

	/* protocols and named ports */
	st = pm_load(base, NP("  podSelector: {matchLabels: {app: b}}\n"
		     "  ingress: [{ports: [{port: http}, {port: 81, protocol: SCTP}]}]\n"));
	ok(st && pol_compile(st, "node-a", NULL, &c, &err) == 0, "named-port policy compiles");
	if (c) {
		ok(allowed(c, "10.244.0.1", "10.244.0.2", 8080, MD_PROTO_TCP) &&
		   !allowed(c, "10.244.0.1", "10.244.0.2", 9090, MD_PROTO_TCP),
		   "http resolves to 8080 on b1");
		ok(allowed(c, "10.244.0.1", "10.244.0.3", 9090, MD_PROTO_TCP) &&
		   !allowed(c, "10.244.0.1", "10.244.0.3", 8080, MD_PROTO_TCP),
		   "and to 9090 on b2 (same labels, other identity)");
		ok(!allowed(c, "10.244.0.1", "10.244.0.2", 8080, MD_PROTO_UDP),
		   "a TCP named port does not open UDP");
		ok(!allowed(c, "10.244.0.1", "10.244.0.2", 81, MD_PROTO_TCP) &&
		   allowed(c, "10.244.0.1", "10.244.0.2", 81, MD_PROTO_SCTP),
		   "SCTP 81 opens SCTP only, never TCP");
		ok(allowed(c, "10.244.0.2", "10.244.0.1", 5, MD_PROTO_TCP), "a is not isolated");
		ok(allowed(c, "10.244.0.1", "10.244.1.1", 1, MD_PROTO_TCP),
		   "the pod on node-b is not enforced on node-a");
		ok(allowed(c, "10.244.0.2", "10.244.0.2", 1, MD_PROTO_TCP), "a pod may reach itself");
	}
	pol_compiled_free(c);
	c = NULL;

	/* limits: all or nothing, with a message */
	{
		struct pol_limits lim = pol_default_limits;

		lim.rules = 1;
		ret = pol_compile(st, "node-a", &lim, &c, &err);
		ok(ret == -E2BIG && c == NULL && strstr(err.msg, "rule map limit"),
		   "rule limit: -E2BIG, %s", err.msg);
		lim = pol_default_limits;
		lim.ipcache = 2;
		ret = pol_compile(st, "node-a", &lim, &c, &err);
		ok(ret == -E2BIG && strstr(err.msg, "ipcache"), "ipcache limit: %s", err.msg);
		lim = pol_default_limits;
		lim.policies = 0;
		ret = pol_compile(st, "node-a", &lim, &c, &err);
		ok(ret == -E2BIG && strstr(err.msg, "policies"), "policy limit: %s", err.msg);
	}
	md_state_free(st);

	/* ipBlock with except, pod addresses included */
	st = pm_load(base, NP("  podSelector: {matchLabels: {app: a}}\n  policyTypes: [Egress]\n"
		     "  egress: [{to: [{ipBlock: {cidr: 10.244.0.0/16, except: [10.244.0.2/32]}}]}]\n"));
	ok(st && pol_compile(st, "node-a", NULL, &c, &err) == 0, "ipBlock policy compiles");
	if (c) {
		ok(allowed(c, "10.244.0.1", "10.244.0.3", 80, MD_PROTO_TCP), "pod IP inside cidr allowed");
		ok(!allowed(c, "10.244.0.1", "10.244.0.2", 80, MD_PROTO_TCP), "pod IP in except denied");
		ok(allowed(c, "10.244.0.1", "10.244.9.9", 80, MD_PROTO_TCP), "non-pod IP in cidr allowed");
		ok(!allowed(c, "10.244.0.1", "10.245.0.1", 80, MD_PROTO_TCP), "IP outside cidr denied");
		is_int(c->n_cidrs, 2, "two classes (cidr, except)");
	}
	pol_compiled_free(c);
	md_state_free(st);
	return done_testing();
}
