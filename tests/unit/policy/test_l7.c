/* test_l7.c — the compiler's part of policy for traffic through the node L7
 * proxies (docs/policy.md "L7 Services"): every node's proxy source address
 * (pol_node_proxy_ip) is in the ipcache as the reserved proxy identity,
 * ingress admits it and nothing else changes: egress towards it, other node
 * addresses and outside addresses are judged as before; a pod holding that
 * address wins over it. */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "tap.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"
#include "pol_model.h"

#define POD(name, ip, node, labels) \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: " name ", namespace: x, labels: " labels "}\n" \
	"spec: {nodeName: " node ", containers: [{name: c, ports: [{containerPort: 8080}]}]}\n" \
	"status: {phase: Running, podIP: " ip "}\n---\n"

/* web admits app=good only; client may only talk to app=web:8080 */
static const char *policies =
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: web, namespace: x}\nspec:\n"
	"  podSelector: {matchLabels: {app: web}}\n"
	"  ingress: [{from: [{podSelector: {matchLabels: {app: good}}}]}]\n---\n"
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: client, namespace: x}\nspec:\n"
	"  podSelector: {matchLabels: {app: good}}\n  policyTypes: [Egress]\n"
	"  egress: [{to: [{podSelector: {matchLabels: {app: web}}}], ports: [{port: 8080}]}]\n---\n";

static const char *ipstr(uint32_t v, char *buf)
{
	return inet_ntop(AF_INET, &v, buf, INET_ADDRSTRLEN);
}

static bool allowed(const struct pol_compiled *c, const char *src, const char *dst)
{
	uint32_t reason, pid;

	return pol_eval(c, pm_ip(src), pm_ip(dst), 8080, MD_PROTO_TCP, &reason, &pid);
}

int main(void)
{
	struct pol_compiled *c = NULL;
	struct md_state *st;
	struct md_err err;
	char a[INET_ADDRSTRLEN], dump[8192];
	FILE *f;

	/* ---- the address plan ---- */
	st = pm_load(POD("web", "10.244.1.7", "node-b", "{app: web}")
		     POD("good", "10.244.0.5", "node-a", "{app: good}")
		     POD("bad", "10.244.0.6", "node-a", "{app: bad}"), policies);
	ok(st != NULL, "default cluster loads");
	if (!st)
		return done_testing();
	is_str(ipstr(pol_node_proxy_ip(&st->cluster, 0), a), "10.244.0.1",
	       "default plan: node-a's proxy address is .1 of its pod range");
	is_str(ipstr(pol_node_proxy_ip(&st->cluster, 1), a), "10.244.1.1", "node-b's: 10.244.1.1");
	ok(pol_node_proxy_ip(&st->cluster, -1) == 0, "a negative node index has none");
	{
		struct md_cluster cl = st->cluster;

		cl.pod_cidr = pm_ip("10.10.0.0");
		cl.pod_cidr_len = 23;
		is_str(ipstr(pol_node_proxy_ip(&cl, 1), a), "10.10.1.1", "/23: node 1 -> 10.10.1.1");
		ok(pol_node_proxy_ip(&cl, 2) == 0, "/23: no third /24 range, no address");
		cl.pod_cidr_len = 25;
		ok(pol_node_proxy_ip(&cl, 0) == 0, "a pod CIDR longer than /24: no address");
	}

	/* ---- compiled: ingress admits the proxy address, nothing else opens ---- */
	is_int(pol_compile(st, "node-b", NULL, &c, &err), 0, "compile for node-b");
	if (!c)
		return done_testing();
	ok(allowed(c, "10.244.0.5", "10.244.1.7"), "good -> web allowed (the rule)");
	ok(!allowed(c, "10.244.0.6", "10.244.1.7"), "bad -> web denied");
	ok(allowed(c, "10.244.0.1", "10.244.1.7"),
	   "node-a's proxy address -> web on node-b: admitted on ingress (the proxy judged it)");
	ok(allowed(c, "10.244.1.1", "10.244.1.7"), "node-b's own proxy address: admitted");
	ok(!allowed(c, "10.250.0.1", "10.244.1.7"), "node-a's fabric IP is still an outside address");
	ok(!allowed(c, "10.244.0.9", "10.244.1.7"), "another unused address of node-a's range: denied");
	ok(!allowed(c, "10.244.2.1", "10.244.1.7"), ".1 of a range beyond the nodes: denied");
	pol_compiled_free(c);
	c = NULL;

	is_int(pol_compile(st, NULL, NULL, &c, &err), 0, "compile with every pod local (the proxy's view)");
	if (!c)
		return done_testing();
	ok(!allowed(c, "10.244.0.5", "10.244.0.1"),
	   "egress of an isolated pod to a proxy address: judged, denied (no egress exemption)");
	ok(allowed(c, "10.244.0.5", "10.244.1.7"), "good -> web still allowed");
	f = fmemopen(dump, sizeof(dump), "w");
	pol_compiled_dump(c, f);
	fclose(f);
	ok(strstr(dump, "ip 10.244.0.1") && strstr(dump, "node-proxy"),
	   "dump lists the proxy addresses as node-proxy");
	pol_compiled_free(c);
	c = NULL;
	md_state_free(st);

	/* ---- a pod on .1 (a plan without proxy addresses) wins ---- */
	st = pm_load(POD("web", "10.244.1.7", "node-b", "{app: web}")
		     POD("dot1", "10.244.0.1", "node-a", "{app: bad}"), policies);
	ok(st != NULL, "state with a pod on 10.244.0.1 loads");
	if (!st)
		return done_testing();
	is_int(pol_compile(st, NULL, NULL, &c, &err), 0, "compile");
	ok(c && !allowed(c, "10.244.0.1", "10.244.1.7"),
	   "the pod on .1 is judged as that pod (app=bad: denied), not as a proxy");
	pol_compiled_free(c);
	md_state_free(st);
	return done_testing();
}
