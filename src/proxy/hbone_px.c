/* hbone_px.c — the node proxy's HBONE side (docs/mtls.md), on with
 * --hbone: the listener (hbone.h) with its decision for each CONNECT, and
 * the client (hbone_out.h) with who a captured connection's pods are.
 *
 * Server: the destination must be a pod of this node whose SVID the server
 * presented (SNI), not under DISABLE, allowed by NetworkPolicy (below) and
 * by AuthorizationPolicy for the peer's principal (md_authz_check). Each
 * denial is logged by hbone.c with the reason returned here, and put in
 * the flow log (px_hbone_flows).
 *
 * Client (px_hbone_out): the source is the pod of this node with the
 * client's IPv4, the destination the pod with the original destination's
 * IPv4 (any node), the tunnel goes to that pod's node's proxy address
 * (pol_node_proxy_ip: the first address of its pod /24, where that node's
 * server listens too) port 15008, leaving from this node's (s->src_ip).
 * NetworkPolicy is judged here, where both pods are known, as for an L7
 * request (netpol.c): the client's egress and the destination's ingress;
 * each stream names its client (HB_HDR_SOURCE) for the server.
 *
 * Server, NetworkPolicy: the connect to the destination comes from this
 * node, which ingress admits, so the kernel cannot judge it; it is judged
 * here.
 *  - The stream names its client (HB_HDR_SOURCE, as the client above
 *    sends it): that pod must run as the peer's verified identity
 *    (namespace and ServiceAccount of its SPIFFE ID), else the stream is
 *    refused; then the pair {client pod, destination} is judged with the
 *    proxy's policy tables, as the kernel would judge it without a tunnel.
 *    A peer can only speak for pods of its own identity.
 *  - No client named (a hand-made HBONE client): fail-closed, a
 *    destination that a NetworkPolicy isolates for ingress is reached only
 *    through a rule open to every source on that port. */
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "zerohop/hbone.h"
#include "zerohop/hbone_out.h"
#include "zerohop/policy.h"
#include "px_int.h"

static const struct md_pod *local_pod(const struct md_state *st, const char *node, uint32_t ip)
{
	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		if (p->ip == ip && p->spec.node_name && !strcmp(p->spec.node_name, node))
			return p;
	}
	return NULL;
}

/* Denials by reason, for the proxy's metrics (one server per process). */
enum { HB_NO_STATE, HB_NOT_LOCAL, HB_IDENTITY, HB_MTLS_DISABLE, HB_NETPOL, HB_AUTHZ,
       HB_SOURCE, HB_N };
static const char *const hb_reason_label[HB_N] = {
	"no_state", "not_local_pod", "identity_mismatch", "mtls_disable", "network_policy",
	"authorization_policy", "source_identity",
};
static uint64_t hb_denied[HB_N];
static int hb_last_reason;	/* of the last deny(), for the flow log */

static const char *deny(int reason, const char *why)
{
	hb_denied[reason]++;
	hb_last_reason = reason;
	return why;
}

/* The last HB_FLOW_RING denials, for `zerohop observe` (GET /flows, merged
 * with the request log): type "drop", verdict DROPPED, reporter
 * "destination", reason the metric's label; the source is the client pod
 * the stream named, else the peer's namespace and ServiceAccount. */
#define HB_FLOW_RING 256
struct hb_flow {
	double t;
	int reason;
	uint32_t sip, dip;		/* network order; sip 0: not named */
	uint16_t dport;
	char sns[64], sname[128];	/* client pod, or "sa/SA" of the peer */
	char dns[64], dpod[128];	/* "" when the destination is no local pod */
};
static struct hb_flow hb_flows[HB_FLOW_RING];
static uint64_t hb_flows_n;

static void hb_flow_line(struct buf *b, const struct hb_flow *f)
{
	char s[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &f->sip, s, sizeof(s));
	inet_ntop(AF_INET, &f->dip, d, sizeof(d));
	buf_printf(b, "{\"time\":%.6f,\"type\":\"drop\",\"verdict\":\"DROPPED\","
		   "\"reason\":\"%s\",\"reporter\":\"destination\",\"source\":{\"ip\":\"%s\","
		   "\"port\":0,\"namespace\":\"%s\",\"pod\":\"%s\"},\"destination\":{"
		   "\"ip\":\"%s\",\"port\":%u,\"namespace\":\"%s\",\"pod\":\"%s\"},"
		   "\"tunnel\":\"hbone\"}\n",
		   f->t, hb_reason_label[f->reason], s, f->sns, f->sname, d, f->dport, f->dns, f->dpod);
}

void px_hbone_flows(struct buf *b)
{
	uint64_t first = hb_flows_n > HB_FLOW_RING ? hb_flows_n - HB_FLOW_RING : 0;

	for (uint64_t i = first; i < hb_flows_n; i++)
		hb_flow_line(b, &hb_flows[i % HB_FLOW_RING]);
}

/* Copy the "/ns/NS/sa/SA" parts of a SPIFFE ID into ns and "sa/SA" into name. */
static void peer_names(const char *peer, char *ns, size_t nl, char *name, size_t ml)
{
	const char *p = strstr(peer, "/ns/"), *sa = p ? strstr(p + 4, "/sa/") : NULL;

	snprintf(ns, nl, "%.*s", sa ? (int)(sa - p - 4) : 0, sa ? p + 4 : "");
	snprintf(name, ml, "sa/%s", sa ? sa + 4 : "?");
}

static void hb_flow_note(const struct md_state *st, const char *node, const char *peer,
			 uint32_t sip, uint32_t dip, uint16_t dport)
{
	struct hb_flow *f = &hb_flows[hb_flows_n++ % HB_FLOW_RING];
	const struct md_pod *sp = NULL, *dp = st ? local_pod(st, node, dip) : NULL;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	memset(f, 0, sizeof(*f));
	f->t = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	f->reason = hb_last_reason;
	f->sip = sip;
	f->dip = dip;
	f->dport = dport;
	for (int i = 0; st && sip && !sp && i < st->n_pods; i++)
		if (st->pods[i].ip == sip)
			sp = &st->pods[i];
	if (sp) {
		snprintf(f->sns, sizeof(f->sns), "%s", sp->meta.ns);
		snprintf(f->sname, sizeof(f->sname), "%s", sp->meta.name);
	} else {
		peer_names(peer, f->sns, sizeof(f->sns), f->sname, sizeof(f->sname));
	}
	if (dp) {
		snprintf(f->dns, sizeof(f->dns), "%s", dp->meta.ns);
		snprintf(f->dpod, sizeof(f->dpod), "%s", dp->meta.name);
	}
	if (px_flows_followed()) {
		struct buf b;

		buf_init(&b, 0);
		hb_flow_line(&b, f);
		px_flows_follow(&b);
		buf_free(&b);
	}
}

/* A rule of an ingress policy that admits any source on TCP port. */
static bool np_rule_open(const struct md_np_rule *r, uint16_t port)
{
	if (r->n_peers)
		return false;
	if (!r->n_ports)
		return true;
	for (int i = 0; i < r->n_ports; i++) {
		const struct md_np_port *p = &r->ports[i];

		if (p->proto != MD_PROTO_TCP)
			continue;
		if (!p->port.present)
			return true;
		if (!p->port.name && (p->port.num == port ||
				      (p->end_port && p->port.num <= port && port <= p->end_port)))
			return true;	/* a named port is not resolved here: closed */
	}
	return false;
}

/* NULL when no NetworkPolicy isolates pod p for ingress, or one of those
 * that do has a rule open to all on port; else the first isolating one. */
static const struct md_netpol *np_isolates(const struct md_state *st, const struct md_pod *p,
					   uint16_t port)
{
	const struct md_netpol *first = NULL;

	for (int i = 0; i < st->n_netpols; i++) {
		const struct md_netpol *np = &st->netpols[i];

		if (!np->type_ingress || strcmp(np->meta.ns, p->meta.ns) ||
		    !md_selector_matches(&np->pod_sel, &p->meta.labels))
			continue;
		for (int j = 0; j < np->n_ingress; j++)
			if (np_rule_open(&np->ingress[j], port))
				return NULL;
		if (!first)
			first = np;
	}
	return first;
}

static const struct md_pod *pod_by_ip(const struct md_state *st, uint32_t ip)
{
	for (int i = 0; i < st->n_pods; i++)
		if (st->pods[i].ip == ip)
			return &st->pods[i];
	return NULL;
}

/* Does pod p run as the SPIFFE ID peer ("spiffe://TD/ns/NS/sa/SA")? */
static bool runs_as(const struct md_state *st, const struct md_pod *p, const char *peer)
{
	char tail[400];
	size_t lp = strlen(peer), lt;

	snprintf(tail, sizeof(tail), "/ns/%s/sa/%s", p->meta.ns, md_pod_service_account(st, p));
	lt = strlen(tail);
	return lp > lt && !strcmp(peer + lp - lt, tail);
}

static const char *decide(struct px_server *s, const struct md_state *st, const char *peer,
			  const char *sni, uint32_t ip, uint16_t port, uint32_t src_ip)
{
	static char why[400];	/* one loop, one call at a time */
	const struct md_authzpol *pol = NULL;
	const struct md_netpol *np;
	const struct md_pod *p;
	const char *r;
	char want[600];

	if (!st)
		return deny(HB_NO_STATE, "no state loaded yet");
	p = local_pod(st, s->cfg->node, ip);
	if (!p)
		return deny(HB_NOT_LOCAL, "destination is not a pod of this node");
	snprintf(want, sizeof(want), "%s.%s", p->meta.name, p->meta.ns);
	if (!sni || strcmp(sni, want))
		return deny(HB_IDENTITY, "destination is not the workload whose identity was presented");
	if (md_mtls_mode_of(st, p, port) == MD_MTLS_DISABLE)
		return deny(HB_MTLS_DISABLE, "destination's PeerAuthentication mode is DISABLE");
	if (src_ip) {	/* the client the stream carries, vouched for by the peer */
		const struct md_pod *cp = pod_by_ip(st, src_ip);
		const char *np_why;
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &src_ip, a, sizeof(a));
		if (!cp || !runs_as(st, cp, peer)) {
			snprintf(why, sizeof(why), "client %s is %s, not a workload of the peer's identity",
				 a, cp ? "another workload" : "no pod");
			return deny(HB_SOURCE, why);
		}
		if (!px_netpol_pair(s, src_ip, ip, port, &np_why)) {
			snprintf(why, sizeof(why), "NetworkPolicy denies client %s/%s (%s)",
				 cp->meta.ns, cp->meta.name, np_why);
			return deny(HB_NETPOL, why);
		}
	} else if ((np = np_isolates(st, p, port))) {
		snprintf(why, sizeof(why), "NetworkPolicy %s/%s isolates the destination and the "
			 "stream names no client", np->meta.ns, np->meta.name);
		return deny(HB_NETPOL, why);
	}
	if (!strncmp(peer, "spiffe://", 9))
		peer += 9;	/* Istio's principals have no scheme */
	r = md_authz_check(st, p, port, peer, &pol);
	if (!r)
		return NULL;
	snprintf(why, sizeof(why), "%s (AuthorizationPolicy %s/%s)", r,
		 pol ? pol->meta.ns : "-", pol ? pol->meta.name : "-");
	return deny(HB_AUTHZ, why);
}

/* hb_authorize_fn: decide, and put each denial in the flow log. */
static const char *authorize(void *arg, const char *peer, const char *sni, uint32_t ip,
			     uint16_t port, uint32_t src_ip)
{
	struct px_server *s = arg;
	const struct md_state *st = s->tbl ? px_table_state(s->tbl) : NULL;
	const char *why = decide(s, st, peer, sni, ip, port, src_ip);

	if (why)
		hb_flow_note(st, s->cfg->node, peer, src_ip, ip, port);
	return why;
}


/* The server listens on the node's address (cfg->hbone_listen) and on the
 * node proxy's (s->src_ip, pol_node_proxy_ip: what a client on another
 * node computes from the model alone); the client is on with it. */
int px_hbone_open(struct px_server *s)
{
	struct hb_opts o = { .loop = s->loop, .listen = s->cfg->hbone_listen,
			     .svid_dir = s->cfg->svid_dir, .authorize = authorize, .arg = s };
	struct hbo_opts co = { .loop = s->loop, .svid_dir = s->cfg->svid_dir };
	char err[300], l2[64] = "";
	int rc;

	if (s->src_ip) {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &s->src_ip, ip, sizeof(ip));
		snprintf(l2, sizeof(l2), "%s:%d", ip, HB_PORT);
		if (strcmp(l2, s->cfg->hbone_listen))
			o.listen2 = l2;
	}
	rc = hb_server_open(&o, &s->hbone, err, sizeof(err));
	if (rc) {
		zh_err("proxy: %s", err);
		return rc;
	}
	rc = hbo_client_new(&co, &s->hbo);
	if (rc) {
		zh_err("proxy: hbone client: %s", strerror(-rc));
		return rc;
	}
	zh_info("proxy: HBONE on %s%s%s (SVIDs in %s); client on%s", s->cfg->hbone_listen,
		o.listen2 ? " and " : "", o.listen2 ? o.listen2 : "", s->cfg->svid_dir,
		s->src_ip ? "" : " (no node proxy address here: tunnels from any address)");
	return 0;
}

static uint64_t hbo_off;	/* flagged connections while the client is off */

/* A captured connection flagged ZH_L7CAP_DST_HBONE (abi/l7cap.h): its
 * client pod (this node's, by address), the destination pod (any node,
 * by address) and that pod's node's proxy address, then the tunnel
 * (hbone_out.h). Takes fd. */
void px_hbone_out(struct px_server *s, int fd, const struct px_conn *c)
{
	const struct md_state *st = s->tbl ? px_table_state(s->tbl) : NULL;
	const struct md_pod *src, *dst = NULL;
	struct hbo_target t = { 0 };
	static const uint8_t zero[16];
	bool v6 = memcmp(c->peer_ip6, zero, 16) != 0;
	char client[64], d[32];
	int node = -1;

	if (!v6) {
		struct in_addr a = { c->peer_ip };

		snprintf(client, sizeof(client), "%s:%u", inet_ntoa(a), c->peer_port);
	} else {
		char a[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, c->peer_ip6, a, sizeof(a));
		snprintf(client, sizeof(client), "[%s]:%u", a, c->peer_port);
	}
	snprintf(d, sizeof(d), "%s:%u", inet_ntoa((struct in_addr){ c->dst_ip }), c->dst_port);
	if (!s->hbo) {
		struct linger l = { .l_onoff = 1, .l_linger = 0 };

		hbo_off++;
		zh_warn("hbone-out: %s -> %s: the HBONE client is off (--hbone): reset", client, d);
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		close(fd);
		return;
	}
	if (v6 || !c->peer_ip) {
		hbo_refuse(s->hbo, fd, HBO_F_IPV6, client, d, "IPv6 clients are not tunneled yet");
		return;
	}
	if (!st) {
		hbo_refuse(s->hbo, fd, HBO_F_NO_STATE, client, d, "no state loaded yet");
		return;
	}
	src = local_pod(st, s->cfg->node, c->peer_ip);
	if (!src) {
		hbo_refuse(s->hbo, fd, HBO_F_NO_SOURCE_POD, client, d, "the client is not a pod of this node");
		return;
	}
	for (int i = 0; i < st->n_pods && !dst; i++)
		if (st->pods[i].ip == c->dst_ip && st->pods[i].spec.node_name)
			dst = &st->pods[i];
	for (int i = 0; dst && i < st->cluster.n_nodes; i++)
		if (!strcmp(st->cluster.nodes[i].name, dst->spec.node_name))
			node = i;
	if (!dst || node < 0 || !(t.node_ip = pol_node_proxy_ip(&st->cluster, node))) {
		hbo_refuse(s->hbo, fd, HBO_F_NO_DESTINATION, client, d,
			   !dst ? "no pod has that address" : "the pod's node has no proxy address");
		return;
	}
	{	/* NetworkPolicy, as for an L7 request (netpol.c): both pods known here */
		uint32_t reason, pol_id;
		char why[300];

		if (!px_netpol_allows(s, c, px_ip4(c->dst_ip), c->dst_port, &reason, &pol_id)) {
			snprintf(why, sizeof(why), "%s (%s)", reason == POL_DROP_EGRESS_DENIED ?
				 px_err_policy_egress : px_err_policy_ingress,
				 px_netpol_name(s->pol, pol_id));
			hbo_refuse(s->hbo, fd, HBO_F_NETWORK_POLICY, client, d, why);
			return;
		}
	}
	t.src_ns = src->meta.ns;
	t.src_pod = src->meta.name;
	t.dst_ns = dst->meta.ns;
	t.dst_pod = dst->meta.name;
	t.dst_sa = md_pod_service_account(st, dst);
	t.bind_ip = s->src_ip;
	t.dst_ip = c->dst_ip;
	t.dst_port = c->dst_port;
	t.client_ip = c->peer_ip;
	t.client_port = c->peer_port;
	hbo_connect(s->hbo, fd, &t);
}

/* The HBONE server's counters in the proxy's Prometheus text (stats.c);
 * nothing when it is off. Denials by reason (docs/mtls.md). */
static void hbo_render(const struct px_server *s, struct buf *b)
{
	const struct hbo_stats *o = hbo_client_stats(s->hbo);

	buf_printf(b, "# TYPE zerohop_proxy_hbone_out_tunnels_total counter\n"
		   "zerohop_proxy_hbone_out_tunnels_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_tunnels_open gauge\n"
		   "zerohop_proxy_hbone_out_tunnels_open %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_idle_closed_total counter\n"
		   "zerohop_proxy_hbone_out_idle_closed_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_streams_total counter\n"
		   "zerohop_proxy_hbone_out_streams_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_established_total counter\n"
		   "zerohop_proxy_hbone_out_established_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_retried_total counter\n"
		   "zerohop_proxy_hbone_out_retried_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_tls_contexts_total counter\n"
		   "zerohop_proxy_hbone_out_tls_contexts_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_bytes_total counter\n"
		   "zerohop_proxy_hbone_out_bytes_total{direction=\"to_tunnel\"} %llu\n"
		   "zerohop_proxy_hbone_out_bytes_total{direction=\"from_tunnel\"} %llu\n"
		   "# TYPE zerohop_proxy_hbone_out_failed_total counter\n",
		   (unsigned long long)o->tunnels, (unsigned long long)o->tunnels_open,
		   (unsigned long long)o->idle_closed, (unsigned long long)o->streams,
		   (unsigned long long)o->established, (unsigned long long)o->retried,
		   (unsigned long long)o->ctx_loads, (unsigned long long)o->bytes_out,
		   (unsigned long long)o->bytes_in);
	for (int i = 0; i < HBO_F__N; i++)
		buf_printf(b, "zerohop_proxy_hbone_out_failed_total{reason=\"%s\"} %llu\n",
			   hbo_fail_name(i), (unsigned long long)o->failed[i]);
}

void px_hbone_render(const struct px_server *s, struct buf *b)
{
	const struct hb_stats *st;

	if (hbo_off)	/* flagged connections while off: worth a line */
		buf_printf(b, "# TYPE zerohop_proxy_hbone_out_off_total counter\n"
			   "zerohop_proxy_hbone_out_off_total %llu\n", (unsigned long long)hbo_off);
	if (s->hbo)
		hbo_render(s, b);
	if (!s->hbone)
		return;
	st = hb_server_stats(s->hbone);
	buf_printf(b, "# TYPE zerohop_proxy_hbone_connections_total counter\n"
		   "zerohop_proxy_hbone_connections_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_tls_refused_total counter\n"
		   "zerohop_proxy_hbone_tls_refused_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_streams_total counter\n"
		   "zerohop_proxy_hbone_streams_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_connect_failed_total counter\n"
		   "zerohop_proxy_hbone_connect_failed_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_bytes_total counter\n"
		   "zerohop_proxy_hbone_bytes_total{direction=\"to_pod\"} %llu\n"
		   "zerohop_proxy_hbone_bytes_total{direction=\"from_pod\"} %llu\n"
		   "# TYPE zerohop_proxy_hbone_denied_total counter\n",
		   (unsigned long long)st->conns, (unsigned long long)st->tls_refused,
		   (unsigned long long)st->streams, (unsigned long long)st->connect_failed,
		   (unsigned long long)st->bytes_up, (unsigned long long)st->bytes_down);
	for (int i = 0; i < HB_N; i++)
		buf_printf(b, "zerohop_proxy_hbone_denied_total{reason=\"%s\"} %llu\n",
			   hb_reason_label[i], (unsigned long long)hb_denied[i]);
	buf_printf(b, "# TYPE zerohop_proxy_hbone_connections_open gauge\n"
		   "zerohop_proxy_hbone_connections_open %llu\n"
		   "# TYPE zerohop_proxy_hbone_idle_closed_total counter\n"
		   "zerohop_proxy_hbone_idle_closed_total %llu\n"
		   "# TYPE zerohop_proxy_hbone_cap_refused_total counter\n"
		   "zerohop_proxy_hbone_cap_refused_total %llu\n",
		   (unsigned long long)st->open, (unsigned long long)st->idle_closed,
		   (unsigned long long)st->cap_refused);
}
