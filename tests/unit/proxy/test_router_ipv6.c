/* test_router_ipv6.c — the route table for IPv6 single-stack Services
 * (docs/ipv6.md "L7 over IPv6"), from real manifests: a Service found by
 * the last 32 bits of its IPv6 ClusterIP (what connect6 records,
 * ZH_L7CAP_DST_V6LOW), its HTTPRoute applied, its endpoints the pods'
 * IPv6 addresses (a pod without one left out), while a dual-stack
 * Service's endpoints stay IPv4; px_table_has_ep, px_route_repick and the
 * pod address indexes over both families; px_ip_fmt and px_ip_eq. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/proxy.h"

#define POD(NAME, VER, IPS) \
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: " NAME ", labels: {app: w, version: " VER "}}\n" \
	"spec: {nodeName: n, containers: [{name: c}]}\nstatus: {phase: Running, " IPS "}\n"
#define SIX(NAME, IP, SEL) \
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: " NAME "}\nspec: {ipFamilies: [IPv6], " \
	"clusterIP: \"" IP "\", selector: {" SEL "}, ports: [{port: 80, targetPort: 8080}]}\n"

static const char *yaml =
	"apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nspec:\n"
	"  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n"
	"  serviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]\n"
	POD("a", "v1", "podIP: 10.244.0.5, podIPs: [{ip: 10.244.0.5}, {ip: \"fd00:10:244::5\"}]")
	POD("b", "v2", "podIP: 10.244.1.6, podIPs: [{ip: 10.244.1.6}, {ip: \"fd00:10:244:1::6\"}]")
	POD("c", "v1", "podIP: 10.244.1.7")
	POD("d", "v2", "podIP: 10.244.1.8, podIPs: [{ip: 10.244.1.8}, {ip: \"fd00:10:244:1::8\"}]")
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ipFamilyPolicy: "
	"PreferDualStack, clusterIPs: [10.96.0.20, \"fd00:10:96::20\"], selector: {app: w}, "
	"ports: [{port: 80, targetPort: 8080}]}\n"
	SIX("six", "fd00:10:96::30", "app: w")
	SIX("six-v1", "fd00:10:96::31", "version: v1")
	SIX("six-v2", "fd00:10:96::32", "version: v2")
	"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: six}\n"
	"spec:\n  parentRefs: [{group: \"\", kind: Service, name: six, port: 80}]\n  rules:\n"
	"  - matches: [{path: {type: PathPrefix, value: /v2}}]\n"
	"    backendRefs: [{name: six-v2, port: 80}]\n"
	"  - backendRefs: [{name: six-v1, port: 80}]\n";

static uint32_t low32(const char *ip6)
{
	uint8_t a[16];
	uint32_t low;

	inet_pton(AF_INET6, ip6, a);
	memcpy(&low, a + 12, 4);
	return low;
}

static struct px_ip v6(const char *s)
{
	uint8_t a[16];

	inet_pton(AF_INET6, s, a);
	return px_ip6(a);
}

static struct px_ip v4(const char *s)
{
	uint32_t a;

	inet_pton(AF_INET, s, &a);
	return px_ip4(a);
}

/* Route target on svc; "backend [ip]:port" of the decision. */
static const char *route(struct px_table *t, const struct px_svc *svc, const char *target,
			 uint64_t rnd, struct px_decision *d)
{
	static char out[128];
	struct px_req_view v = { .method = "GET", .method_len = 3 };
	char ep[PX_IP_STRLEN];

	px_req_view_target(&v, target, strlen(target));
	if (!svc || px_route(t, svc, &v, NULL, 0, rnd, d) || d->action != PX_FORWARD)
		return "no forward";
	snprintf(out, sizeof(out), "%s %s", d->backend_name, px_ip_fmt(d->ip, d->port, ep, sizeof(ep)));
	return out;
}

int main(void)
{
	struct md_state *st = md_state_new();
	struct px_table *t = NULL;
	const struct px_svc *six, *web;
	const struct px_ep *eps;
	struct px_decision d;
	struct md_err e;
	char err[256], b[PX_IP_STRLEN];
	uint8_t a6[16];
	int n;

	if (md_state_add_buf(st, "t.yaml", yaml, strlen(yaml), &e) || md_state_finish(st, &e) ||
	    px_table_build(st, &t, err, sizeof(err))) {
		ok(0, "state: %s", md_err_str(&e, err, sizeof(err)));
		return done_testing();
	}

	six = px_table_find_ip6low(t, low32("fd00:10:96::30"), 80);
	is_str(six ? px_svc_name(six) : "-", "default/six:80",
	       "an IPv6 single-stack Service found by the last 32 bits of its IPv6 ClusterIP");
	web = px_table_find_ip6low(t, low32("fd00:10:96::20"), 80);
	is_str(web ? px_svc_name(web) : "-", "default/web:80", "... a dual-stack one too");
	ok(!px_table_find_ip6low(t, low32("fd00:10:96::30"), 81), "... not on another port");
	ok(!px_table_find_ip6low(t, low32("fd00:10:96::99"), 80), "... nor an address no Service has");
	ok(!px_table_find_ip6low(t, htonl(0x0a600014), 80),
	   "the IPv4 ClusterIP's bits do not name the Service by IPv6");
	ok(px_table_find_ip(t, htonl(0x0a600014), 80) == web, "the dual-stack one by IPv4 as before");

	is_str(route(t, six, "/", 1, &d), "default/six-v1 [fd00:10:244::5]:8080",
	       "/ -> six-v1, to its pod's IPv6 address (pod c has none: left out)");
	{
		const char *r = route(t, six, "/v2/x", 0, &d);
		bool p6 = !strcmp(r, "default/six-v2 [fd00:10:244:1::6]:8080"),
		     p8 = !strcmp(r, "default/six-v2 [fd00:10:244:1::8]:8080");

		ok(p6 || p8, "/v2/x -> six-v2 over IPv6 (%s)", r);
		n = px_route_eps(&d, &eps);
		is_int(n, 2, "six-v2 has its two pods' IPv6 endpoints");
		ok(n == 2 && eps[0].ip.family == AF_INET6 && eps[1].ip.family == AF_INET6,
		   "... both IPv6");
		px_route_repick(&d, 7);
		is_str(px_ip_fmt(d.ip, d.port, b, sizeof(b)),
		       p6 ? "[fd00:10:244:1::8]:8080" : "[fd00:10:244:1::6]:8080",
		       "a retry re-picks the other IPv6 endpoint");
	}

	route(t, web, "/", 0, &d);
	ok(d.action == PX_FORWARD && d.ip.family == AF_INET && d.port == 8080,
	   "a dual-stack Service keeps IPv4 endpoints (%s)", px_ip_fmt(d.ip, d.port, b, sizeof(b)));
	is_int(px_route_eps(&d, &eps), 4, "... all four pods (c has IPv4 only)");
	is_str(route(t, six, "/", 1, &d), "default/six-v1 [fd00:10:244::5]:8080",
	       "(six again)");
	is_int(px_route_eps(&d, &eps), 1, "six-v1: only pod a has an IPv6 address");

	ok(px_table_has_ep(t, v6("fd00:10:244::5"), 8080), "px_table_has_ep: [fd00:10:244::5]:8080");
	ok(px_table_has_ep(t, v4("10.244.0.5"), 8080), "... and 10.244.0.5:8080 (web)");
	ok(!px_table_has_ep(t, v6("fd00:10:244::5"), 8081), "... not another port");
	ok(!px_table_has_ep(t, v6("::ffff:10.244.0.5"), 8080), "... a v4-mapped address is no IPv4 one");
	ok(!px_table_has_ep(t, v6("fd00:10:244:1::7"), 8080), "... an address no pod has");

	ok(px_table_ip6_of4(t, htonl(0x0af40005), a6) && !memcmp(a6, v6("fd00:10:244::5").v6, 16),
	   "px_table_ip6_of4: 10.244.0.5 -> fd00:10:244::5");
	ok(!px_table_ip6_of4(t, htonl(0x0af40107), a6), "... 10.244.1.7 has none");
	is_int((int)ntohl(px_table_ip4_of6(t, v6("fd00:10:244:1::6").v6)), 0x0af40106,
	       "px_table_ip4_of6 the other way");

	is_str(px_ip_fmt(v6("fd00::1"), 80, b, sizeof(b)), "[fd00::1]:80", "px_ip_fmt: [IPv6]:port");
	is_str(px_ip_fmt(v4("10.0.0.1"), 80, b, sizeof(b)), "10.0.0.1:80", "... IPv4:port");
	is_str(px_ip_fmt(v6("fd00::1"), 0, b, sizeof(b)), "fd00::1", "... port 0: the address alone");
	is_str(px_ip_fmt((struct px_ip){ .family = 0 }, 80, b, sizeof(b)), "-", "... no address: -");
	ok(!px_ip_eq(v4("0.0.0.1"), v6("::1")), "px_ip_eq: families differ");
	ok(px_ip_eq(v6("fd00::1"), v6("fd00::1")) && !px_ip_eq(v6("fd00::1"), v6("fd00::2")),
	   "... IPv6 by its 16 bytes");
	ok(px_ip_bits(v4("10.0.0.1")) == htonl(0x0a000001),
	   "px_ip_bits of IPv4: the address itself (ring-hash keys as before)");
	ok(px_ip_bits(v6("fd00::1")) != px_ip_bits(v6("fd00::2")), "... of IPv6: its bytes folded");

	px_table_unref(t);
	return done_testing();
}
