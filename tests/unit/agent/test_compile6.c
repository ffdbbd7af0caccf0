/* test_compile6.c — compile.c rule 5 (docs/ipv6.md): a Service's IPv6
 * ClusterIP becomes entries keyed by it with the IPv6 addresses of its
 * endpoints' pods; a TrafficSplit splits the IPv6 entry with the
 * backends' IPv6 addresses; an L7 port and an L7 route's parent go to
 * the node proxy over IPv6 too (ZH_LB_F_L7, one backend: the IPv4
 * ClusterIP the proxy routes by), an IPv6 single-stack L7 Service too (one
 * backend: its IPv6 ClusterIP itself, the name the proxy routes it by,
 * and a note); the
 * incremental compile builds the same entries. States come from manifests
 * through the model, with the IPv6 switch on. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/agent.h"
#include "zerohop/model.h"

static const char *yaml =
	"apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nspec:\n"
	"  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n"
	"  serviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {app: w}}\n"
	"spec: {nodeName: node-a, containers: [{name: c}]}\nstatus: {phase: Running, "
	"podIP: 10.244.0.5, podIPs: [{ip: 10.244.0.5}, {ip: \"fd00:10:244::5\"}]}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: b, labels: {app: w}}\n"
	"spec: {nodeName: node-b, containers: [{name: c}]}\nstatus: {phase: Running, "
	"podIP: 10.244.1.6, podIPs: [{ip: 10.244.1.6}, {ip: \"fd00:10:244:1::6\"}]}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: c, labels: {app: w}}\n"
	"spec: {nodeName: node-b, containers: [{name: c}]}\nstatus: {phase: Running, "
	"podIP: 10.244.1.7}\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ipFamilyPolicy: "
	"PreferDualStack, clusterIPs: [10.96.0.20, \"fd00:10:96::20\"], selector: {app: w}, "
	"ports: [{name: h, port: 80, targetPort: 8080}, {name: u, port: 53, protocol: UDP}]}\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: six}\nspec: {ipFamilies: [IPv6], "
	"clusterIP: \"fd00:10:96::30\", selector: {app: w}, ports: [{port: 80, targetPort: 8080}]}\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: l7, annotations: {zerohop.io/l7: \"true\"}}\n"
	"spec: {ipFamilyPolicy: PreferDualStack, clusterIPs: [10.96.0.40, \"fd00:10:96::40\"], "
	"selector: {app: w}, ports: [{port: 80, targetPort: 8080}]}\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: l7six, annotations: {zerohop.io/l7: \"true\"}}\n"
	"spec: {ipFamilies: [IPv6], clusterIP: \"fd00:10:96::70\", selector: {app: w}, "
	"ports: [{port: 80, targetPort: 8080}]}\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: root}\nspec: {ipFamilyPolicy: "
	"PreferDualStack, clusterIPs: [10.96.0.50, \"fd00:10:96::50\"], selector: {app: w}, "
	"ports: [{port: 80, targetPort: 8080}]}\n---\n"
	"apiVersion: split.smi-spec.io/v1alpha4\nkind: TrafficSplit\nmetadata: {name: s}\n"
	"spec: {service: root, backends: [{service: web, weight: 1}, {service: six, weight: 3}]}\n---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: rt}\nspec: {ipFamilyPolicy: "
	"PreferDualStack, clusterIPs: [10.96.0.60, \"fd00:10:96::60\"], selector: {app: w}, "
	"ports: [{port: 80, targetPort: 8080}]}\n---\n"
	"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: rt}\n"
	"spec: {parentRefs: [{group: \"\", kind: Service, name: rt, port: 80}], rules: "
	"[{matches: [{path: {type: PathPrefix, value: /a}}], backendRefs: [{name: web, port: 80}]}]}\n";

static const struct ag_svc *entry(const struct ag_compiled *c, const char *ip6, int port, int proto)
{
	struct ag_svc k = {};

	inet_pton(AF_INET6, ip6, k.key.vip);
	k.key.port = htons(port);
	k.key.proto = proto;
	for (int i = 0; i < c->n_svcs; i++)
		if (!memcmp(&c->svcs[i].key, &k.key, sizeof(k.key)))
			return &c->svcs[i];
	return NULL;
}

static const char *addrs(const struct ag_svc *e)
{
	static char out[256];
	char a[INET6_ADDRSTRLEN];

	out[0] = 0;
	for (int i = 0; e && i < e->n_be; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s:%u", i ? " " : "",
			 inet_ntop(AF_INET6, e->be[i].be.addr, a, sizeof(a)), ntohs(e->be[i].be.port));
	return out;
}

int main(void)
{
	struct md_state *st = md_state_new();
	struct ag_compiled *c = NULL;
	const struct ag_svc *e;
	struct md_err merr;
	char err[256], ebuf[512];
	bool note = false;

	if (md_state_add_buf(st, "t.yaml", yaml, strlen(yaml), &merr) || md_state_finish(st, &merr)) {
		ok(0, "state: %s", md_err_str(&merr, ebuf, sizeof(ebuf)));
		md_state_free(st);
		return done_testing();
	}
	is_int(ag_compile(st, &c, err, sizeof(err)), 0, "compiles");
	e = entry(c, "fd00:10:96::20", 80, ZH_LB_TCP);
	ok(e != NULL, "an entry for the IPv6 ClusterIP, TCP port");
	is_str(addrs(e), "fd00:10:244::5:8080 fd00:10:244:1::6:8080",
	       "its backends: the pods' IPv6 addresses (the pod without one left out)");
	ok(e && e->n_be == 2 && e->be[0].weight == e->be[1].weight, "equal weights");
	e = entry(c, "::ffff:10.96.0.20", 80, ZH_LB_TCP);
	ok(e && e->n_be == 3, "the IPv4 entry keeps all three endpoints");
	e = entry(c, "fd00:10:96::20", 53, ZH_LB_UDP);
	ok(e && e->n_be == 2, "UDP port too");
	e = entry(c, "fd00:10:96::30", 80, ZH_LB_TCP);
	ok(e && e->n_be == 2, "an IPv6 single-stack Service has its entry");
	e = entry(c, "fd00:10:96::40", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_L7), "an L7 Service's IPv6 entry goes to the proxy");
	is_str(addrs(e), "::ffff:10.96.0.40:80", "... its one backend: the IPv4 ClusterIP the proxy routes by");
	e = entry(c, "::ffff:10.96.0.40", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_L7), "... as its IPv4 entry does");
	e = entry(c, "fd00:10:96::70", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_L7), "an IPv6 single-stack L7 Service goes to the proxy");
	is_str(addrs(e), "fd00:10:96::70:80",
	       "... its one backend: its own IPv6 ClusterIP, the name the proxy routes it by");
	for (int i = 0; i < c->n_notes; i++)
		note |= strstr(c->notes[i], "default/l7six port 80: IPv6 single-stack, the zerohop.io/l7 "
				"annotation: the node L7 proxy routes it by its IPv6 ClusterIP") != NULL;
	ok(note, "and a note says how");
	note = false;
	for (int i = 0; i < c->n_notes; i++)
		note |= strstr(c->notes[i], "refuses") != NULL;
	ok(!note, "no note says a ClusterIP refuses");
	e = entry(c, "fd00:10:96::50", 80, ZH_LB_TCP);
	is_str(addrs(e), "fd00:10:244::5:8080 fd00:10:244:1::6:8080 fd00:10:244::5:8080 fd00:10:244:1::6:8080",
	       "a TrafficSplit root's IPv6 entry: the backend Services' pods' IPv6 addresses");
	ok(e && (e->flags & ZH_LB_F_SPLIT) && e->n_be == 4 && e->be[0].weight == 500 &&
	   e->be[2].weight == 1500, "... weighted 1:3 as the split says (500, 500, 1500, 1500)");
	e = entry(c, "::ffff:10.96.0.50", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_SPLIT) && e->n_be == 6, "... as its IPv4 entry is split (3 + 3 IPv4 endpoints: %d)", e ? e->n_be : -1);
	e = entry(c, "fd00:10:96::60", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_L7), "an L7 HTTPRoute's parent goes to the proxy over IPv6");
	is_str(addrs(e), "::ffff:10.96.0.60:80", "... by its IPv4 ClusterIP");
	e = entry(c, "::ffff:10.96.0.60", 80, ZH_LB_TCP);
	ok(e && (e->flags & ZH_LB_F_L7), "... while its IPv4 entry goes to the proxy");
	{	/* nft mode: IPv4 entries in the `ip` table, IPv6 ones in `ip6` */
		char *txt = NULL, *t6;
		size_t len = 0;
		FILE *f = open_memstream(&txt, &len);

		is_int(ag_nft_render(c, f), 0, "nft rendering");
		fclose(f);
		t6 = txt ? strstr(txt, "table ip6 zerohop {") : NULL;
		ok(t6 != NULL, "nft: an ip6 table for the IPv6 entries");
		if (t6)
			*t6 = 0;	/* txt: the ip table alone */
		ok(txt && strstr(txt, "10.96.0.20 . 80 . tcp") && !strstr(txt, "fd00:"),
		   "nft: the ip table has the IPv4 entries, no IPv6 one");
		ok(t6 && strstr(t6 + 1, "fd00:10:96::20 . 80 . tcp : goto svc_") &&
		   strstr(t6 + 1, "dnat to [fd00:10:244::5]:8080") &&
		   strstr(t6 + 1, "ip6 daddr . th dport . meta l4proto vmap @svc") &&
		   !strstr(t6 + 1, "10.96.0.20"),
		   "nft: the ip6 table has the IPv6 entries, bracketed backends, ip6 matches");
		ok(t6 && !strstr(t6 + 1, "::ffff:") && !strstr(t6 + 1, "fd00:10:96::40 . 80 . tcp : goto") &&
		   strstr(t6 + 1, "fd00:10:96::40 . 80 . tcp"),
		   "nft: an IPv6 L7 entry rejects (no capture in nft mode), never DNATs to an IPv4 address");
		free(txt);
	}
	{
		int idx = (int)(md_find_service(st, NULL, "web") - st->services), n = 0;

		is_int(ag_compile_update(st, c, &idx, 1, &n, err, sizeof(err)), 0,
		       "incremental compile of the dual-stack Service: %s", err);
		ok(n >= 2, "it rebuilt both families' entries (%d)", n);
		is_str(addrs(entry(c, "fd00:10:96::20", 80, ZH_LB_TCP)),
		       "fd00:10:244::5:8080 fd00:10:244:1::6:8080", "... the same IPv6 backends");
	}
	ag_compiled_free(c);
	md_state_free(st);
	return done_testing();
}
