/* test_obs_labels.c — the labels the agent's L4 signals give a connection
 * (src/agent/obs.c O3, O7, O8), from manifests through the real model and
 * compiler, events fed as bpf/obs.bpf.c writes them, read back from the
 * /metrics text:
 *  - a server-side socket (and a client that dialled a pod IP) is labelled
 *    with the one Service whose endpoints hold its IP:port (O7), including
 *    a Service with two ports on one target port (still that Service);
 *  - an endpoint of two Services is "unknown", never a guess (O7), while
 *    the client side keeps the Service it dialled (F_SVC);
 *  - a TrafficSplit root's backends belong to the backend Service, not to
 *    the root (O7: each entry's own backends);
 *  - the node proxies' source addresses are workload "zerohop-proxy" in
 *    "zerohop-system", unless a pod holds that address (O8);
 *  - an address nobody has is "unknown"; a connection to an address that
 *    is a pod but no Service's endpoint has destination_service "unknown".
 * The index is rebuilt from a new compile (ag_obs_set_endpoints) when the
 * second Service goes away: the shared endpoint gets its one Service back.
 * O10: the agent's series cache never serves a label set of tables since
 * rebuilt, and never hides an overflowing event from the overflow count.
 * O12: a native IPv6 event (struct zh_obs_event6) is labelled as the same
 * pods and Service over IPv4: a dual-stack Service's two families count in
 * one series, client side by its IPv6 ClusterIP, server side through the
 * pod's endpoint; an IPv6 address nobody has is "unknown". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/abi/obs.h"
#include "zerohop/agent.h"
#include "zerohop/model.h"
#include "zerohop/obs.h"

#define POD(name, owner, app, ip, port)                                                         \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: " name ", labels: {app: " app "}, "         \
	"ownerReferences: [{kind: Deployment, name: " owner "}]}\n"                               \
	"spec: {nodeName: node-a, containers: [{name: c, image: x, ports: [{name: http, "         \
	"containerPort: " port "}]}]}\nstatus: {phase: Running, podIP: " ip "}\n---\n"
#define SVC(name, vip, app, ports)                                                              \
	"apiVersion: v1\nkind: Service\nmetadata: {name: " name "}\n"                             \
	"spec: {clusterIP: " vip ", selector: {app: " app "}, ports: " ports "}\n---\n"

static const char *base_yaml =
	POD("web-1", "web", "web", "10.244.0.10", "8080")
	POD("shared-1", "shared", "shared", "10.244.1.20", "9090")
	POD("v1-1", "v1", "v1", "10.244.1.30", "8080")
	POD("client-1", "client", "client", "10.244.0.5", "1")
	POD("lonely-1", "lonely", "lonely", "10.244.0.40", "8080")
	SVC("web", "10.96.0.30", "web", "[{name: http, port: 80, targetPort: 8080}, {name: alt, port: 81, targetPort: 8080}]")
	SVC("s1", "10.96.0.31", "shared", "[{port: 80, targetPort: 9090}]")
	SVC("root", "10.96.0.33", "nobody", "[{port: 80, targetPort: 8080}]")
	SVC("v1", "10.96.0.34", "v1", "[{port: 80, targetPort: 8080}]")
	"apiVersion: split.smi-spec.io/v1alpha2\nkind: TrafficSplit\nmetadata: {name: sp}\n"
	"spec: {service: root, backends: [{service: v1, weight: 100}]}\n---\n";
static const char *base;	/* base_yaml, or a variant of it */
/* the second Service of the shared endpoint */
static const char *second = SVC("s2", "10.96.0.32", "shared", "[{port: 80, targetPort: 9090}]");

/* O10's invalidation is only visible when rebuilt tables land where the
 * old ones were: without ASan's quarantine, freed blocks are reused
 * at once (with the invalidation removed from ag_obs_set_state, the O10
 * checks below fail: tried when they were written). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "quarantine_size_mb=0:thread_local_quarantine_size_kb=0";
}

static uint32_t ip(const char *s)
{
	uint32_t v = 0;

	inet_pton(AF_INET, s, &v);
	return v;
}

/* A state from yaml (+ extra), compiled; 0 or -1 (diagnosed). */
static int load(const char *extra, struct md_state **st, struct ag_compiled **c)
{
	struct md_err err = {};
	char *buf, e[256] = "";
	size_t n = strlen(base) + strlen(extra) + 1;
	int r;

	buf = malloc(n);
	snprintf(buf, n, "%s%s", base, extra);
	*st = md_state_new();
	*c = NULL;
	r = md_state_add_buf(*st, "obs.yaml", buf, strlen(buf), &err);
	if (!r)
		r = md_state_finish(*st, &err);
	free(buf);
	if (r) {
		diag("model: %s:%d: %s", err.file, err.line, err.msg);
		return -1;
	}
	if (ag_compile(*st, c, e, sizeof(e))) {
		diag("compile: %s", e);
		return -1;
	}
	return 0;
}

/* A CLOSE event of the socket local:lport <-> remote:rport as obs.bpf.c
 * writes it; vip != NULL: a client socket that dialled that Service. */
static struct zh_obs_event ev(int role, const char *local, int lport, const char *remote,
			      int rport, const char *vip, int vport, uint64_t sent)
{
	struct zh_obs_event e = { .type = ZH_OBS_EV_CLOSE, .role = (uint8_t)role };

	e.saddr = ip(local);
	e.sport = (uint16_t)lport;
	e.daddr = ip(remote);
	e.dport = (uint16_t)rport;
	if (vip) {
		e.vip = ip(vip);
		e.vport = (uint16_t)vport;
		e.flags |= ZH_OBS_F_SVC;
	}
	e.bytes_sent = sent;
	return e;
}

static char *metrics(struct ag_obs *ob)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ag_obs_write_metrics(ob, f);
	fclose(f);
	return buf;
}

/* The value of metric NAME for the series with exactly these labels
 * (series_labels' order), -1 when there is none. */
static long metric_val(const char *text, const char *name, const char *rep, const char *sw,
		       const char *sn, const char *ds, const char *dsn, const char *dw, const char *dn)
{
	char want[1024];
	const char *p;

	snprintf(want, sizeof(want),
		 "\n%s{reporter=\"%s\",source_workload=\"%s\","
		 "source_workload_namespace=\"%s\",destination_service=\"%s\","
		 "destination_service_namespace=\"%s\",destination_workload=\"%s\","
		 "destination_workload_namespace=\"%s\",connection_security_policy=\"none\"} ",
		 name, rep, sw, sn, ds, dsn, dw, dn);
	p = strstr(text, want);
	return p ? strtol(p + strlen(want), NULL, 10) : -1;
}

static long closed(const char *text, const char *rep, const char *sw, const char *sn,
		   const char *ds, const char *dsn, const char *dw, const char *dn)
{
	return metric_val(text, "istio_tcp_connections_closed_total", rep, sw, sn, ds, dsn, dw, dn);
}

#define FQDN(n) n ".default.svc.cluster.local"

/* O12: a dual-stack cluster (pods with both addresses) */
#define POD6(name, app, ip, ip6)                                                                \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: " name ", labels: {app: " app "}, "        \
	"ownerReferences: [{kind: Deployment, name: " app "}]}\n"                                \
	"spec: {nodeName: node-a, containers: [{name: c, image: x}]}\n"                         \
	"status: {phase: Running, podIP: " ip ", podIPs: [{ip: " ip "}, {ip: \"" ip6 "\"}]}\n---\n"
static const char *dual_yaml =
	"apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nspec:\n"
	"  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n"
	"  serviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]\n---\n"
	POD6("web-1", "web", "10.244.0.10", "fd00:10:244::10")
	POD6("client-1", "client", "10.244.0.5", "fd00:10:244::5")
	"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ipFamilyPolicy: "
	"PreferDualStack, clusterIPs: [10.96.0.30, \"fd00:10:96::30\"], selector: {app: web}, "
	"ports: [{port: 80, targetPort: 8080}]}\n---\n";

/* A CLOSE of a native IPv6 socket, as obs.bpf.c writes it (invariant 4). */
static struct zh_obs_event6 ev6(int role, const char *local, int lport, const char *remote,
				int rport, const char *vip6, uint64_t sent)
{
	struct zh_obs_event6 w = { .e = { .type = ZH_OBS_EV_CLOSE, .role = (uint8_t)role,
					  .flags = ZH_OBS_F_V6 } };

	inet_pton(AF_INET6, local, w.saddr6);
	inet_pton(AF_INET6, remote, w.daddr6);
	w.e.sport = (uint16_t)lport;
	w.e.dport = (uint16_t)rport;
	if (vip6) {
		inet_pton(AF_INET6, vip6, w.vip6);
		w.e.vport = 80;
		w.e.flags |= ZH_OBS_F_SVC;
	}
	w.e.bytes_sent = sent;
	return w;
}

int main(void)
{
	base = base_yaml;
	struct md_state *st, *st2;
	struct ag_compiled *c, *c2;
	struct ag_obs *ob;
	struct zh_obs_event e;
	char *m;

	if (load(second, &st, &c)) {
		ok(0, "manifests load and compile");
		return done_testing();
	}
	ob = ag_obs_new_detached("node-a", 100);
	ag_obs_set_state(ob, st, c);

	/* server side of web (O7): the endpoint 10.244.0.10:8080, reached
	 * through either port of the Service: one label, never "unknown" */
	e = ev(ZH_OBS_ROLE_SERVER, "10.244.0.10", 8080, "10.244.0.5", 40001, NULL, 0, 10);
	ag_obs_feed(ob, &e);
	/* server side of the endpoint of s1 and s2 (O7): unknown, twice */
	e = ev(ZH_OBS_ROLE_SERVER, "10.244.1.20", 9090, "10.244.0.5", 40002, NULL, 0, 10);
	ag_obs_feed(ob, &e);
	ag_obs_feed(ob, &e);
	/* the client side of the same connection keeps what it dialled */
	e = ev(ZH_OBS_ROLE_CLIENT, "10.244.0.5", 40002, "10.244.1.20", 9090, "10.96.0.32", 80, 10);
	ag_obs_feed(ob, &e);
	/* a client that dialled the pod IP of web itself (no ClusterIP) */
	e = ev(ZH_OBS_ROLE_CLIENT, "10.244.0.5", 40003, "10.244.0.10", 8080, NULL, 0, 10);
	ag_obs_feed(ob, &e);
	/* the split's backend, server side: v1's, not root's */
	e = ev(ZH_OBS_ROLE_SERVER, "10.244.1.30", 8080, "10.244.0.5", 40004, NULL, 0, 10);
	ag_obs_feed(ob, &e);
	/* O8: node-b's proxy (10.244.1.1, the second node's first address)
	 * opening to web's endpoint: the proxy leg of an L7 Service */
	e = ev(ZH_OBS_ROLE_SERVER, "10.244.0.10", 8080, "10.244.1.1", 40005, NULL, 0, 10);
	ag_obs_feed(ob, &e);
	/* a pod that is no Service's endpoint, and an address nobody has */
	e = ev(ZH_OBS_ROLE_CLIENT, "10.244.0.5", 40006, "10.244.0.40", 8080, NULL, 0, 10);
	ag_obs_feed(ob, &e);
	e = ev(ZH_OBS_ROLE_SERVER, "10.244.0.10", 8080, "10.244.200.9", 40007, NULL, 0, 10);
	ag_obs_feed(ob, &e);

	m = metrics(ob);
	is_int(closed(m, "destination", "client", "default", FQDN("web"), "default", "web", "default"),
	       1, "O7: the server side of a Service's endpoint names that Service");
	is_int(closed(m, "destination", "client", "default", "unknown", "unknown", "shared", "default"),
	       2, "O7: an endpoint of two Services is \"unknown\" (both events)");
	is_int(closed(m, "destination", "client", "default", FQDN("s1"), "default", "shared", "default"),
	       -1, "O7: ... never one of the two");
	is_int(closed(m, "destination", "client", "default", FQDN("s2"), "default", "shared", "default"),
	       -1, "O7: ... nor the other");
	is_int(closed(m, "source", "client", "default", FQDN("s2"), "default", "shared", "default"), 1,
	       "the client side keeps the Service it dialled (s2)");
	is_int(closed(m, "source", "client", "default", FQDN("web"), "default", "web", "default"), 1,
	       "O7: a client that dialled a pod IP gets the pod's one Service");
	is_int(closed(m, "destination", "client", "default", FQDN("v1"), "default", "v1", "default"), 1,
	       "O7: a TrafficSplit backend's endpoint is the backend Service's");
	is_int(closed(m, "destination", "client", "default", FQDN("root"), "default", "v1", "default"),
	       -1, "O7: ... not the split root's");
	is_int(closed(m, "destination", "zerohop-proxy", "zerohop-system", FQDN("web"), "default", "web",
		      "default"),
	       1, "O8: a node proxy's source address is zerohop-proxy/zerohop-system");
	is_int(closed(m, "source", "client", "default", "unknown", "unknown", "lonely", "default"), 1,
	       "a pod that is no Service's endpoint: destination_service unknown");
	is_int(closed(m, "destination", "unknown", "unknown", FQDN("web"), "default", "web", "default"), 1,
	       "an address nobody has is workload unknown");
	free(m);

	/* s2 goes away: a new compile's index gives the endpoint back to s1
	 * (ag_obs_set_endpoints: the endpoint-only sync) */
	if (load("", &st2, &c2) == 0) {
		ag_obs_set_endpoints(ob, c2);
		e = ev(ZH_OBS_ROLE_SERVER, "10.244.1.20", 9090, "10.244.0.5", 40008, NULL, 0, 10);
		ag_obs_feed(ob, &e);
		m = metrics(ob);
		is_int(closed(m, "destination", "client", "default", FQDN("s1"), "default", "shared",
			      "default"),
		       1, "O7: one Service left: its label again (index rebuilt)");
		is_int(closed(m, "destination", "client", "default", "unknown", "unknown", "shared",
			      "default"),
		       2, "O7: the earlier unknowns stay counted (O3)");
		free(m);
		ag_compiled_free(c2);
		md_state_free(st2);
	} else {
		ok(0, "second state loads");
	}
	ag_obs_close(ob, 0);

	/* O11: a kernel CLOSE (ZH_OBS_F_RAW) takes role, Service and open
	 * time from the OPEN with its cookie; the client's SYN comes off its
	 * bytes, the short-circuit's are added; one never opened is dropped */
	ob = ag_obs_new_detached("node-a", 100);
	ag_obs_set_state(ob, st, c);
	e = ev(ZH_OBS_ROLE_CLIENT, "10.244.0.5", 40010, "10.244.1.20", 9090, "10.96.0.32", 80, 0);
	e.type = ZH_OBS_EV_OPEN;
	e.cookie = 7;
	e.ts_ns = 1000000000;
	ag_obs_feed(ob, &e);
	e = ev(ZH_OBS_ROLE_SERVER, "10.244.0.10", 8080, "10.244.0.5", 40011, NULL, 0, 0);
	e.type = ZH_OBS_EV_OPEN;
	e.cookie = 9;
	ag_obs_feed(ob, &e);
	e = ev(0, "10.244.0.5", 40010, "10.244.1.20", 9090, NULL, 0, 11);	/* 10 + the SYN */
	e.flags = ZH_OBS_F_RAW | ZH_OBS_F_SC;
	e.sc_sent = 5;
	e.bytes_recv = 20;
	e.cookie = 7;
	e.ts_ns = 1250000000;
	ag_obs_feed(ob, &e);
	e.cookie = 8;	/* never opened */
	ag_obs_feed(ob, &e);
	e = ev(0, "10.244.0.10", 8080, "10.244.0.5", 40011, NULL, 0, 10);
	e.flags = ZH_OBS_F_RAW;
	e.cookie = 9;
	ag_obs_feed(ob, &e);
	e.cookie = 7;	/* its OPEN was taken by the first CLOSE */
	ag_obs_feed(ob, &e);
	m = metrics(ob);
	is_int(closed(m, "source", "client", "default", FQDN("s2"), "default", "shared", "default"), 1,
	       "O11: the client's CLOSE has the role and Service of its OPEN");
	is_int(metric_val(m, "istio_tcp_received_bytes_total", "source", "client", "default",
			  FQDN("s2"), "default", "shared", "default"),
	       15, "O11: the client's bytes sent: SYN off, short-circuit bytes on");
	is_int(metric_val(m, "istio_tcp_sent_bytes_total", "source", "client", "default", FQDN("s2"),
			  "default", "shared", "default"),
	       20, "O11: its bytes received as the kernel gave them");
	is_int(metric_val(m, "istio_tcp_sent_bytes_total", "destination", "client", "default",
			  FQDN("web"), "default", "web", "default"),
	       10, "O11: a server's bytes keep their first byte (no SYN to take off)");
	ok(strstr(m, "zerohop_obs_unpaired_closes_total 2\n") != NULL,
	   "O11: closes without their OPEN are not counted, but counted as unpaired");
	free(m);
	/* O11 bound: 9 opens whose cookies share a home slot (the table's
	 * hash, found by search) fill the 8 probe slots; the 9th evicts the
	 * oldest, whose CLOSE is then unpaired, the others' are counted */
	{
		uint64_t ck[9];
		int k = 0;

		for (uint64_t cc = 100; k < 9; cc++)
			if ((((cc * 0x9E3779B97F4A7C15ull) >> 48) & 65535) == 12345)
				ck[k++] = cc;
		for (k = 0; k < 9; k++) {
			e = ev(ZH_OBS_ROLE_SERVER, "10.244.0.10", 8080, "10.244.0.5", 41000 + k, NULL, 0, 0);
			e.type = ZH_OBS_EV_OPEN;
			e.cookie = ck[k];
			e.ts_ns = 2000000000ull + (uint64_t)k;
			ag_obs_feed(ob, &e);
		}
		for (k = 0; k < 9; k++) {
			e = ev(0, "10.244.0.10", 8080, "10.244.0.5", 41000 + k, NULL, 0, 1);
			e.flags = ZH_OBS_F_RAW;
			e.cookie = ck[k];
			ag_obs_feed(ob, &e);
		}
		m = metrics(ob);
		is_int(closed(m, "destination", "client", "default", FQDN("web"), "default", "web", "default"),
		       1 + 8, "O11: 8 of 9 opens sharing a slot run paired (the table is bounded)");
		ok(strstr(m, "zerohop_obs_unpaired_closes_total 3\n") != NULL,
		   "O11: the evicted one's close is counted unpaired (once)");
	}
	free(m);
	ag_obs_close(ob, 0);
	ag_compiled_free(c);
	md_state_free(st);

	/* O8: a pod holding a proxy's address is that pod, not the proxy */
	{
		static const char *taker = POD("taker-1", "taker", "taker", "10.244.1.1", "1");

		if (load(taker, &st, &c) == 0) {
			ob = ag_obs_new_detached("node-a", 100);
			ag_obs_set_state(ob, st, c);
			e = ev(ZH_OBS_ROLE_SERVER, "10.244.0.10", 8080, "10.244.1.1", 40009, NULL, 0, 1);
			ag_obs_feed(ob, &e);
			m = metrics(ob);
			is_int(closed(m, "destination", "taker", "default", FQDN("web"), "default", "web",
				      "default"),
			       1, "O8: a pod holding the proxy's address wins");
			free(m);
			ag_obs_close(ob, 0);
			ag_compiled_free(c);
			md_state_free(st);
		} else {
			ok(0, "taker state loads");
		}
	}
	/* O10: the series cache. Tables rebuilt with the same pod at the same
	 * address under another owner: the new label, never a stale series;
	 * and a table capped at one label set: every overflowing event
	 * counted, the cached or not. */
	{
		struct md_state *sa, *sb;
		struct ag_compiled *ca, *cb;
		char *web2;

		/* state B: web-1 owned by "wex" instead of "web" */
		web2 = strdup(base);
		{
			char *p = strstr(web2, "name: web}");

			if (p)
				memcpy(p, "name: wex}", 10);	/* same length: owner "wex" */
		}
		if (load("", &sa, &ca) == 0) {
			const char *saved = base;

			base = web2;
			if (load("", &sb, &cb) == 0) {
				ob = ag_obs_new_detached("node-a", 1);
				ag_obs_set_state(ob, sa, ca);
				e = ev(ZH_OBS_ROLE_CLIENT, "10.244.0.5", 40010, "10.244.0.10", 8080, NULL, 0, 1);
				ag_obs_feed(ob, &e);
				ag_obs_set_state(ob, sb, cb);
				ag_obs_feed(ob, &e);
				ag_obs_feed(ob, &e);
				m = metrics(ob);
				is_int(closed(m, "source", "client", "default", FQDN("web"), "default", "web",
					      "default"),
				       1, "O10: one event under the first tables' labels");
				is_int(closed(m, "source", "overflow", "overflow", "overflow", "overflow",
					      "overflow", "overflow"),
				       2, "O10: after a rebuild, the new label set (over the cap of 1): overflow, both events");
				ok(strstr(m, "zerohop_obs_series_overflow_total 2\n") != NULL,
				   "O10: overflow_total counts every overflowing event (cache or not)");
				free(m);
				ag_obs_close(ob, 0);
				ag_compiled_free(cb);
				md_state_free(sb);
			} else {
				ok(0, "renamed state loads");
			}
			base = saved;
			ag_compiled_free(ca);
			md_state_free(sa);
		} else {
			ok(0, "state loads");
		}
		free(web2);
	}

	/* O12 */
	base = dual_yaml;
	if (load("", &st, &c) == 0) {
		struct zh_obs_event6 w;

		ob = ag_obs_new_detached("node-a", 100);
		ag_obs_set_state(ob, st, c);
		w = ev6(ZH_OBS_ROLE_CLIENT, "fd00:10:244::5", 40030, "fd00:10:244::10", 8080,
			"fd00:10:96::30", 7);
		ag_obs_feed(ob, &w.e);
		e = ev(ZH_OBS_ROLE_CLIENT, "10.244.0.5", 40031, "10.244.0.10", 8080, "10.96.0.30", 80, 3);
		ag_obs_feed(ob, &e);
		w = ev6(ZH_OBS_ROLE_SERVER, "fd00:10:244::10", 8080, "fd00:10:244::5", 40030, NULL, 5);
		ag_obs_feed(ob, &w.e);
		w = ev6(ZH_OBS_ROLE_SERVER, "fd00:10:244::10", 8080, "fd00:99::1", 40032, NULL, 1);
		ag_obs_feed(ob, &w.e);
		m = metrics(ob);
		is_int(closed(m, "source", "client", "default", FQDN("web"), "default", "web", "default"),
		       2, "O12: the IPv6 and the IPv4 close of one dual-stack Service: one series");
		is_int(metric_val(m, "istio_tcp_received_bytes_total", "source", "client", "default",
				  FQDN("web"), "default", "web", "default"),
		       10, "O12: ... their bytes added up (7 over IPv6, 3 over IPv4)");
		is_int(closed(m, "destination", "client", "default", FQDN("web"), "default", "web",
			      "default"),
		       1, "O12: the server side of an IPv6 connection: the pod's endpoint's Service");
		is_int(closed(m, "destination", "unknown", "unknown", FQDN("web"), "default", "web",
			      "default"),
		       1, "O12: an IPv6 address nobody has is workload unknown");
		free(m);
		ag_obs_close(ob, 0);
		ag_compiled_free(c);
		md_state_free(st);
	} else {
		ok(0, "the dual-stack state loads");
	}
	return done_testing();
}
