/* sidecar_cfg.c — model -> one pod's HAProxy sidecar configuration and the
 * capture rules (contract: include/zerohop/sidecar.h). Pure: no I/O.
 *
 * Invariants (cited as SC1.. in src/lab/lab_sidecar.c and the docs):
 * SC1. The text is a function of (state, pod) only, in state order, so an
 *      unchanged state renders byte-identical text and causes no reload.
 * SC2. Only what Istio's sidecar does for a Service call is configured:
 *      ClusterIP:port -> the Endpoints' pod IPs (what EDS gives Envoy); no
 *      health checks, no retries, no outlier ejection (Istio's defaults
 *      retry twice on connect failures: retries are off here on purpose,
 *      as in every zerohop measurement).
 * SC3. The proxy's own connections never re-enter it: the capture exempts
 *      uid/gid SC_UID (the workers), and the inbound leg leaves from
 *      SC_INBOUND_SRC, which the output chain returns first; a pod calling
 *      its own pod IP through its sidecar is sent to the inbound listener,
 *      as istio-init does ("-o lo ! -d 127.0.0.1 --uid-owner 1337"). A
 *      connection made to a listener's own port directly (not redirected)
 *      is refused, as Istio's virtualOutbound/virtualInbound "blackhole"
 *      filter chains do: passed through, it would reconnect to the same
 *      listener for ever.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "zerohop/sidecar.h"

bool sc_wanted(const char *ns, const struct md_labels *annotations)
{
	const char *v = annotations ? md_labels_get(annotations, SC_INJECT_ANNOTATION) : NULL;

	if (ns && !strcmp(ns, "kube-system"))
		return false;
	return !(v && !strcmp(v, "false"));
}

/* Istio's protocol selection by port name: "http", "http-x", "http2",
 * "grpc", "grpc-web", "h2c" are HTTP; "tcp*", "tls*", "mongo*", "mysql*",
 * "redis*" are TCP; no name or anything else is sniffed. */
enum sc_proto { SC_SNIFF, SC_HTTP, SC_TCP };

static bool prefix(const char *s, const char *p)
{
	size_t n = strlen(p);

	return !strncmp(s, p, n) && (s[n] == '\0' || s[n] == '-');
}

static enum sc_proto port_proto(const char *name)
{
	static const char *const http[] = { "http", "http2", "grpc", "grpc-web", "h2c" };
	static const char *const tcp[] = { "tcp", "tls", "https", "mongo", "mysql", "redis" };

	if (!name)
		return SC_SNIFF;
	for (size_t i = 0; i < sizeof(http) / sizeof(http[0]); i++)
		if (prefix(name, http[i]))
			return SC_HTTP;
	for (size_t i = 0; i < sizeof(tcp) / sizeof(tcp[0]); i++)
		if (prefix(name, tcp[i]))
			return SC_TCP;
	return SC_SNIFF;
}

/* The backend service's port for a split of root port rp (the agent's
 * compile.c rule: same number, else same name, else the only one). */
static int match_port(const struct md_service *bs, const struct md_service_port *rp)
{
	int only = -1, n = 0;

	for (int i = 0; i < bs->n_ports; i++)
		if (bs->ports[i].proto == rp->proto && bs->ports[i].port == rp->port)
			return i;
	for (int i = 0; i < bs->n_ports; i++) {
		if (bs->ports[i].proto != rp->proto)
			continue;
		if (rp->name && bs->ports[i].name && !strcmp(rp->name, bs->ports[i].name))
			return i;
		only = i;
		n++;
	}
	return n == 1 ? only : -1;
}

static const struct md_trafficsplit *split_of(const struct md_state *st,
					      const struct md_service *svc)
{
	for (int i = 0; i < st->n_splits; i++) {
		const struct md_trafficsplit *ts = &st->splits[i];

		/* A split with matches is per request on a subset: not
		 * rendered (docs/sidecar-baseline.md, "Not done"). */
		if (ts->root_svc == svc && !ts->n_matches)
			return ts;
	}
	return NULL;
}

/* Servers of one Service port: its Endpoints, or a split's weighted union.
 * HAProxy weights are 1..256 per server: a backend Service's share is
 * divided evenly among its endpoints (as compile.c does), then scaled so
 * the largest server weight is 256. */
static void servers(FILE *f, const struct md_state *st, const struct md_service *svc, int p)
{
	const struct md_trafficsplit *ts = split_of(st, svc);
	char a[INET_ADDRSTRLEN];
	int k = 0;

	if (!ts) {
		const struct md_endpoint_set *es = svc->endpoints ? &svc->endpoints[p] : NULL;

		for (int i = 0; es && i < es->n; i++)
			fprintf(f, "    server e%d %s:%u\n", k++,
				inet_ntop(AF_INET, &es->v[i].ip, a, sizeof(a)), es->v[i].port);
		return;
	}
	double per[64] = { 0 }, max = 0;
	int bp[64];

	fprintf(f, "    # TrafficSplit %s/%s\n", ts->meta.ns, ts->meta.name);
	for (int b = 0; b < ts->n_backends && b < 64; b++) {
		const struct md_split_backend *sb = &ts->backends[b];

		bp[b] = -1;
		if (!sb->svc || !sb->weight_milli || !sb->svc->endpoints)
			continue;
		bp[b] = match_port(sb->svc, &svc->ports[p]);
		if (bp[b] < 0 || !sb->svc->endpoints[bp[b]].n)
			continue;
		per[b] = (double)sb->weight_milli / sb->svc->endpoints[bp[b]].n;
		if (per[b] > max)
			max = per[b];
	}
	for (int b = 0; b < ts->n_backends && b < 64; b++) {
		const struct md_split_backend *sb = &ts->backends[b];
		const struct md_endpoint_set *es;
		int w;

		if (per[b] <= 0)
			continue;
		es = &sb->svc->endpoints[bp[b]];
		w = (int)(256.0 * per[b] / max + 0.5);
		if (w < 1)
			w = 1;
		for (int i = 0; i < es->n; i++)
			fprintf(f, "    server e%d %s:%u weight %d  # %s\n", k++,
				inet_ntop(AF_INET, &es->v[i].ip, a, sizeof(a)), es->v[i].port, w,
				sb->service);
	}
}

int sc_render_cfg(const struct md_state *st, const struct sc_pod *pod, char **out)
{
	char *text = NULL, a[INET_ADDRSTRLEN];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int n = 0;

	if (!f)
		return -ENOMEM;
	fprintf(f,
		"# zerohop lab --mesh sidecar: pod %s/%s (%s); generated, do not edit\n"
		"global\n"
		"    nbthread 1\n"
		"    uid %d\n"
		"    gid %d\n"
		"    hard-stop-after 10s\n",
		pod->ns, pod->name, inet_ntop(AF_INET, &pod->ip, a, sizeof(a)), SC_UID, SC_UID);
	if (pod->stats_sock)
		fprintf(f, "    stats socket %s mode 600 level admin\n", pod->stats_sock);
	fprintf(f,
		"defaults\n"
		"    timeout connect 5s\n"
		"    timeout client 1h\n"
		"    timeout server 1h\n"
		"    retries 0\n"
		"frontend stats\n"
		"    mode http\n"
		"    bind 0.0.0.0:%d\n"
		"    stats enable\n"
		"    stats uri /stats\n"
		"    http-request use-service prometheus-exporter if { path /stats/prometheus }\n",
		SC_STATS_PORT);

	/* Outbound: the original destination picks the Service (SC2). */
	fprintf(f,
		"frontend outbound\n"
		"    mode tcp\n"
		"    bind 0.0.0.0:%d\n"
		"    tcp-request connection reject if { dst_port %d }\n"
		"    tcp-request inspect-delay %dms\n"
		"    tcp-request content accept if HTTP\n"
		"    tcp-request content accept if { req.len gt 0 }\n",
		SC_OUTBOUND_PORT, SC_OUTBOUND_PORT, SC_SNIFF_MS);
	for (int i = 0; i < st->n_services; i++) {
		const struct md_service *svc = &st->services[i];

		if (svc->headless || !svc->cluster_ip)
			continue;
		inet_ntop(AF_INET, &svc->cluster_ip, a, sizeof(a));
		for (int p = 0; p < svc->n_ports; p++) {
			enum sc_proto pr = port_proto(svc->ports[p].name);

			if (svc->ports[p].proto != MD_PROTO_TCP)
				continue;
			if (pr != SC_TCP)
				fprintf(f, "    use_backend o%d_%d_h if %s{ dst %s } { dst_port %u }\n", i,
					p, pr == SC_SNIFF ? "HTTP " : "", a, svc->ports[p].port);
			if (pr != SC_HTTP)
				fprintf(f, "    use_backend o%d_%d_t if { dst %s } { dst_port %u }\n", i,
					p, a, svc->ports[p].port);
		}
	}
	fprintf(f, "    default_backend passthrough\n");
	for (int i = 0; i < st->n_services; i++) {
		const struct md_service *svc = &st->services[i];

		if (svc->headless || !svc->cluster_ip)
			continue;
		for (int p = 0; p < svc->n_ports; p++) {
			enum sc_proto pr = port_proto(svc->ports[p].name);

			if (svc->ports[p].proto != MD_PROTO_TCP)
				continue;
			if (pr != SC_TCP) {
				fprintf(f,
					"backend o%d_%d_h  # Service %s/%s port %u, HTTP\n"
					"    mode http\n"
					"    balance roundrobin\n"
					"    http-reuse always\n",
					i, p, svc->meta.ns, svc->meta.name, svc->ports[p].port);
				servers(f, st, svc, p);
			}
			if (pr != SC_HTTP) {
				fprintf(f,
					"backend o%d_%d_t  # Service %s/%s port %u, TCP\n"
					"    mode tcp\n"
					"    balance roundrobin\n",
					i, p, svc->meta.ns, svc->meta.name, svc->ports[p].port);
				servers(f, st, svc, p);
			}
			n++;
		}
	}
	/* Istio's PassthroughCluster: 0.0.0.0 = the original destination. */
	fprintf(f,
		"backend passthrough\n"
		"    mode tcp\n"
		"    server orig 0.0.0.0\n");

	/* Inbound: to the app on lo from SC_INBOUND_SRC (SC3). A keep-alive
	 * pool per declared port (a port-less server would pool connections
	 * to different ports together). */
	fprintf(f,
		"frontend inbound\n"
		"    mode tcp\n"
		"    bind 0.0.0.0:%d\n"
		"    tcp-request connection reject if { dst_port %d }\n"
		"    tcp-request inspect-delay %dms\n"
		"    tcp-request content accept if HTTP\n"
		"    tcp-request content accept if { req.len gt 0 }\n",
		SC_INBOUND_PORT, SC_INBOUND_PORT, SC_SNIFF_MS);
	for (int i = 0; i < pod->n_tcp_ports; i++)
		fprintf(f, "    use_backend in_%u if HTTP { dst_port %u }\n", pod->tcp_ports[i],
			pod->tcp_ports[i]);
	fprintf(f,
		"    default_backend in_tcp\n"
		"backend in_tcp\n"
		"    mode tcp\n"
		"    server app 127.0.0.1 source %s\n",
		SC_INBOUND_SRC);
	for (int i = 0; i < pod->n_tcp_ports; i++)
		fprintf(f,
			"backend in_%u\n"
			"    mode http\n"
			"    http-reuse always\n"
			"    server app 127.0.0.1:%u source %s\n",
			pod->tcp_ports[i], pod->tcp_ports[i], SC_INBOUND_SRC);
	fprintf(f, "# %d service ports\n", n);
	if (fclose(f)) {
		free(text);
		return -ENOMEM;
	}
	*out = text;
	return 0;
}

/* istio-init's nat table (tools/istio-iptables), chain by chain:
 * ISTIO_INBOUND (PREROUTING), ISTIO_IN_REDIRECT, ISTIO_OUTPUT, ISTIO_REDIRECT.
 * Excluded inbound ports as Istio's: 15008 (HBONE), 15090 (stats),
 * 15021 (health), 15020 (merged metrics). */
const char *sc_capture_rules(void)
{
#define S_(x) #x
#define S(x) S_(x)
	return
	"table ip " SC_NFT_TABLE " {\n"
	"  chain istio_in_redirect {\n"
	"    meta l4proto tcp redirect to :" S(SC_INBOUND_PORT) "\n"
	"  }\n"
	"  chain istio_redirect {\n"
	"    meta l4proto tcp redirect to :" S(SC_OUTBOUND_PORT) "\n"
	"  }\n"
	"  chain istio_inbound {\n"
	"    tcp dport { 15008, " S(SC_STATS_PORT) ", 15021, 15020 } return\n"
	"    jump istio_in_redirect\n"
	"  }\n"
	"  chain prerouting {\n"
	"    type nat hook prerouting priority dstnat; policy accept;\n"
	"    meta l4proto tcp jump istio_inbound\n"
	"  }\n"
	"  chain istio_output {\n"
	"    oifname \"lo\" ip saddr " SC_INBOUND_SRC " return\n"
	"    oifname \"lo\" ip daddr != 127.0.0.1 meta skuid " S(SC_UID) " jump istio_in_redirect\n"
	"    oifname \"lo\" meta skuid != " S(SC_UID) " return\n"
	"    meta skuid " S(SC_UID) " return\n"
	"    oifname \"lo\" ip daddr != 127.0.0.1 meta skgid " S(SC_UID) " jump istio_in_redirect\n"
	"    oifname \"lo\" meta skgid != " S(SC_UID) " return\n"
	"    meta skgid " S(SC_UID) " return\n"
	"    ip daddr 127.0.0.1 return\n"
	"    jump istio_redirect\n"
	"  }\n"
	"  chain output {\n"
	"    type nat hook output priority -100; policy accept;\n"
	"    meta l4proto tcp jump istio_output\n"
	"  }\n"
	"}\n";
#undef S
#undef S_
}
