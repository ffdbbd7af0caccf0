/* stats.c — the proxy's Prometheus text endpoint (--stats-addr) and the
 * per route/backend counters behind it (docs/proxy.md "Observability"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "zerohop/abi/policy.h"
#include "zerohop/log.h"
#include "zerohop/model.h"
#include "zerohop/net.h"
#include "zerohop/proxy.h"
#include "px_int.h"

/* ---- stats --------------------------------------------------------------- */

struct px_stat *px_stat_get(struct px_server *s, const char *route, const char *backend)
{
	int i;

	route = route ? route : "-";
	backend = backend ? backend : "-";
	for (i = 0; i < s->n_stats; i++)
		if (!strcmp(s->stats[i].route, route) && !strcmp(s->stats[i].backend, backend))
			return &s->stats[i];
	s->stats = zh_realloc(s->stats, (s->n_stats + 1) * sizeof(*s->stats));
	memset(&s->stats[s->n_stats], 0, sizeof(*s->stats));
	s->stats[s->n_stats].route = zh_strdup(route);
	s->stats[s->n_stats].backend = zh_strdup(backend);
	s->stats[s->n_stats].lat = hist_new();
	return &s->stats[s->n_stats++];
}

/* ---- Istio standard metrics (docs/observability.md) -----------------------
 * One label set per (source workload, destination Service, destination
 * workload, response code), reporter="source": the node proxy sits on the
 * client's node, as a client sidecar would. Labels come from the route
 * table's md_state (pods by IP, owner Deployment = workload), re-indexed
 * when the table changes. At most PX_ISTIO_MAX_SERIES label sets; beyond,
 * one "overflow" set and zerohop_proxy_istio_series_overflow_total.
 *
 * gRPC (Istio's rule): a request with content-type application/grpc* has
 * request_protocol="grpc" and grpc_response_status = the answer's
 * grpc-status (trailers, or the head of a trailers-only answer; the
 * proxy's own local answers set it too), as a decimal code; a gRPC answer
 * without grpc-status gets the code its HTTP status maps to (as Envoy's
 * response.grpc_status does), and "" when nothing answered (status 0).
 * Non-gRPC requests: request_protocol="http", grpc_response_status="". */

#define PX_ISTIO_MAX_SERIES 2000
#define PX_ISTIO_NOT_GRPC (-2)	/* request_protocol="http", grpc_response_status="" */
#define PX_ISTIO_GRPC_NONE (-1)	/* a gRPC request nothing answered: "grpc", "" */
#define PX_ISTIO_LBL 96

static const double px_istio_ms_buckets[] = { 0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000,
					      2500, 5000, 10000, 30000, 60000, 300000 };
#define PX_NB_MS (int)(sizeof(px_istio_ms_buckets) / sizeof(px_istio_ms_buckets[0]))
static const double px_istio_byte_buckets[] = { 1, 10, 100, 1000, 10000, 100000, 1000000,
						10000000, 100000000 };
#define PX_NB_BYTES (int)(sizeof(px_istio_byte_buckets) / sizeof(px_istio_byte_buckets[0]))

struct px_istio_series {
	char sw[PX_ISTIO_LBL], sns[PX_ISTIO_LBL], ds[2 * PX_ISTIO_LBL], dsn[PX_ISTIO_LBL],
		dsns[PX_ISTIO_LBL], dw[PX_ISTIO_LBL], dwns[PX_ISTIO_LBL];
	int code;
	int grpc;	/* grpc_response_status: PX_ISTIO_NOT_GRPC, PX_ISTIO_GRPC_NONE or the code */
	uint64_t n;
	uint64_t ms_b[PX_NB_MS], bq_b[PX_NB_BYTES], bs_b[PX_NB_BYTES];	/* per bucket, not cumulative */
	double ms_sum, bq_sum, bs_sum;
};

struct px_istio_pod {		/* one address of a pod (a dual-stack pod has two) */
	struct px_ip ip;
	const char *ns, *wl;	/* owned by the table's md_state */
};

/* Requests of one keep-alive connection share their labels: a small
 * direct-mapped memo of the inputs (table generation, client, endpoint,
 * backend name as the table holds it, status) -> series skips building
 * and comparing the label strings on the hot path. */
#define PX_ISTIO_MEMO 64
struct px_istio_memo {
	uint64_t gen;
	struct px_ip peer, ep;
	const char *be;
	int code, grpc;
	struct px_istio_series *x;
};

static struct {
	struct px_istio_memo memo[PX_ISTIO_MEMO];
	struct px_istio_series *ser;
	int n;
	struct px_istio_series over;
	uint64_t overflow;
	uint64_t idx_gen;	/* table generation the pod index is for */
	struct px_istio_pod *pods;
	int n_pods;
} px_istio;

/* The last PX_FLOW_RING requests, for `zerohop observe` (GET /flows on
 * the stats address): one JSON object a line, the agent's flow format
 * with type "request". Labels point at their series (never freed). */
#define PX_FLOW_RING 1024
struct px_flow {
	double t;			/* wall clock at the request's end */
	const struct px_istio_series *x;
	struct px_ip cip, eip;		/* client, endpoint */
	uint16_t cport, eport;
	int status;
	double ms;
	uint64_t bin, bout;
	char method[16];
	char path[96];
};

static struct px_flow px_flows[PX_FLOW_RING];
static uint64_t px_flows_n;

/* Followers of the request log (GET /flows?follow=1, `zerohop observe
 * --follow`): each new request's line is sent to them as it ends, with a
 * non-blocking send; a follower that cannot take a whole line at once
 * (its buffer full: it does not keep up) or has gone is dropped, so the
 * request path never waits on a reader. Costs nothing without followers. */
#define PX_FLOW_FOLLOWERS 16
static struct {
	int fd[PX_FLOW_FOLLOWERS];
	int n;
	struct ev_loop *loop;
} px_follow;

static void px_flow_line(struct buf *b, const struct px_flow *f);

static void px_follow_drop(int i)
{
	ev_del(px_follow.loop, px_follow.fd[i]);
	close(px_follow.fd[i]);
	px_follow.fd[i] = px_follow.fd[--px_follow.n];
}

/* A follower's socket is readable: it closed (or sent what we ignore). */
static void px_follow_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	char junk[256];
	ssize_t r = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);

	(void)loop;
	(void)events;
	(void)arg;
	if (r > 0 || (r < 0 && errno == EAGAIN))
		return;
	for (int i = 0; i < px_follow.n; i++)
		if (px_follow.fd[i] == fd) {
			px_follow_drop(i);
			return;
		}
}

void px_flows_follow(const struct buf *b)
{
	for (int i = 0; i < px_follow.n;) {
		ssize_t w = send(px_follow.fd[i], buf_head(b), b->data, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w != (ssize_t)b->data)
			px_follow_drop(i);	/* slow or gone; a partial line ends it too */
		else
			i++;
	}
}

bool px_flows_followed(void)
{
	return px_follow.n > 0;
}

static void px_follow_send(const struct px_flow *f)
{
	struct buf b;

	buf_init(&b, 0);
	px_flow_line(&b, f);
	px_flows_follow(&b);
	buf_free(&b);
}

/* Bounded copy without snprintf's parsing (per request: it showed in the
 * cost benchmark). n includes the NUL. */
static void px_flow_copy(char *dst, size_t n, const char *src, size_t len)
{
	if (len >= n)
		len = n - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

static void px_flow_note(const struct px_stream *st, const struct px_istio_series *x, double ms)
{
	struct px_flow *f = &px_flows[px_flows_n++ % PX_FLOW_RING];
	static double wall_off;	/* CLOCK_REALTIME - the loop's clock, taken once */

	if (!wall_off) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		wall_off = (double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)ev_now_ns() / 1e9;
	}
	/* the loop's cached time: no clock read per request (a wall clock
	 * step after start shifts these times; the durations are not affected) */
	f->t = wall_off + (double)ev_turn_ns() / 1e9;
	f->x = x;
	f->cip = px_conn_peer(st->c);
	f->cport = st->c->peer_port;
	f->eip = st->d.ip;
	f->eport = st->d.port;
	f->status = st->status;
	f->ms = ms;
	f->bin = st->bytes_in;
	f->bout = st->bytes_out;
	px_flow_copy(f->method, sizeof(f->method), st->method, strlen(st->method));
	/* the path only: no query string (it may carry secrets) */
	px_flow_copy(f->path, sizeof(f->path), st->target, strcspn(st->target, "?"));
	if (px_follow.n)
		px_follow_send(f);
}

static void px_flows_render(struct buf *b)
{
	uint64_t first = px_flows_n > PX_FLOW_RING ? px_flows_n - PX_FLOW_RING : 0;

	for (uint64_t i = first; i < px_flows_n; i++)
		px_flow_line(b, &px_flows[i % PX_FLOW_RING]);
	px_hbone_flows(b);	/* the HBONE server's denials (observe sorts by time) */
}

/* One request's JSON line (the agents' flow format, type "request"). */
static void px_flow_line(struct buf *b, const struct px_flow *f)
{
	const struct px_istio_series *x = f->x;
	char c[PX_IP_STRLEN], e[PX_IP_STRLEN];
	int bad = f->status == 0 || f->status >= 500;

	/* the address alone (port 0), 0.0.0.0 for none as before */
	px_ip_fmt(f->cip.family ? f->cip : px_ip4(0), 0, c, sizeof(c));
	px_ip_fmt(f->eip.family ? f->eip : px_ip4(0), 0, e, sizeof(e));
	buf_printf(b, "{\"time\":%.6f,\"type\":\"request\",\"verdict\":\"%s\","
		   "\"reason\":\"%s\",\"reporter\":\"source\",\"source\":{\"ip\":\"%s\","
		   "\"port\":%u,\"namespace\":\"%s\",\"workload\":\"%s\"},"
		   "\"destination\":{\"ip\":\"%s\",\"port\":%u,\"namespace\":\"%s\","
		   "\"workload\":\"%s\",\"service\":\"%s/%s\"},\"method\":\"%s\","
		   "\"path\":\"",
		   f->t, bad ? "ERROR" : "FORWARDED",
		   f->status == 0 ? "no_response" : f->status >= 500 ? "http_5xx" : "none", c,
		   f->cport, x->sns, x->sw, e, f->eport, x->dwns, x->dw, x->dsns, x->dsn,
		   f->method);
	for (const char *p = f->path; *p; p++)	/* JSON-safe path */
		buf_printf(b, "%c", (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? '_' : *p);
	buf_printf(b, "\"");
	if (x->grpc >= 0)	/* gRPC: grpc_response_status's value */
		buf_printf(b, ",\"grpc_status\":%d", x->grpc);
	buf_printf(b, ",\"status\":%d,\"duration_ms\":%.3f,\"bytes_received\":%llu,"
		   "\"bytes_sent\":%llu}\n",
		   f->status, f->ms, (unsigned long long)f->bin, (unsigned long long)f->bout);
}

static int px_istio_pod_cmp(const void *a, const void *b)
{
	const struct px_ip *x = &((const struct px_istio_pod *)a)->ip,
			   *y = &((const struct px_istio_pod *)b)->ip;

	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return x->family == AF_INET6 ? memcmp(x->v6, y->v6, 16) : memcmp(&x->v4, &y->v4, 4);
}

static void px_istio_index(const struct px_table *t)
{
	const struct md_state *ms = px_table_state(t);
	int i;

	if (px_istio.pods && px_istio.idx_gen == px_table_generation(t))
		return;
	free(px_istio.pods);
	px_istio.pods = zh_calloc(2 * (size_t)ms->n_pods + 1, sizeof(*px_istio.pods));
	px_istio.n_pods = 0;
	for (i = 0; i < ms->n_pods; i++) {
		const struct md_pod *p = &ms->pods[i];
		struct px_istio_pod e = { .ns = p->meta.ns ? p->meta.ns : "default",
					  .wl = p->owner ? p->owner : p->meta.name };

		if (p->ip) {
			e.ip = px_ip4(p->ip);
			px_istio.pods[px_istio.n_pods++] = e;
		}
		if (!IN6_IS_ADDR_UNSPECIFIED(&p->ip6)) {	/* an IPv6 endpoint or client */
			e.ip = px_ip6(p->ip6.s6_addr);
			px_istio.pods[px_istio.n_pods++] = e;
		}
	}
	qsort(px_istio.pods, (size_t)px_istio.n_pods, sizeof(*px_istio.pods), px_istio_pod_cmp);
	px_istio.idx_gen = px_table_generation(t);
}

static const struct px_istio_pod *px_istio_pod(struct px_ip ip)
{
	struct px_istio_pod k = { .ip = ip };

	if (!px_istio.n_pods)
		return NULL;
	return bsearch(&k, px_istio.pods, (size_t)px_istio.n_pods, sizeof(k), px_istio_pod_cmp);
}

/* The request's grpc_response_status (see the block comment above). */
int px_grpc_result(const struct px_stream *st)
{
	int s = st->status;

	if (!st->grpc)
		return PX_ISTIO_NOT_GRPC;
	if (st->grpc_status >= 0)
		return st->grpc_status;
	if (!s)
		return PX_ISTIO_GRPC_NONE;
	/* the gRPC spec's HTTP -> status mapping (doc/http-grpc-status-mapping) */
	return s == 200 ? 2 : s == 400 ? 13 : s == 401 ? 16 : s == 403 ? 7 : s == 404 ? 12 :
	       s == 429 || (s >= 502 && s <= 504) ? 14 : 2;
}

/* gRPC status codes (grpc/doc/statuscodes.md), by number */
static const char *const px_grpc_names[PX_GRPC_OTHER + 1] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED", "OTHER"
};

void px_stat_grpc(struct px_stat *ps, const struct px_stream *st)
{
	int g = px_grpc_result(st);

	if (g >= 0)
		ps->grpc[g <= 16 ? g : PX_GRPC_OTHER]++;
}

static void px_istio_bucket(uint64_t *b, const double *bounds, int nb, double v)
{
	for (int i = 0; i < nb; i++)
		if (v <= bounds[i]) {
			b[i]++;
			return;
		}
	/* above the last bound: only +Inf (= count) has it */
}

void px_istio_record(struct px_server *s, const struct px_stream *st)
{
	const struct px_istio_pod *sp = NULL, *dp = NULL;
	struct px_istio_series k = {}, *x = NULL;
	const char *be = st->d.backend_name, *sl;
	uint64_t gen = st->tbl ? px_table_generation(st->tbl) : 0;
	struct px_ip peer = px_conn_peer(st->c);
	struct px_istio_memo *m;
	int grpc;
	double ms;
	static int on = -1;	/* ZH_PROXY_ISTIO_METRICS=off: none (benchmarks, opt-out) */

	(void)s;
	if (on < 0) {
		const char *v = getenv("ZH_PROXY_ISTIO_METRICS");

		on = !v || strcmp(v, "off");
	}
	if (!on)
		return;
	grpc = px_grpc_result(st);
	m = &px_istio.memo[(gen * 31 + px_ip_bits(peer) * 17 + px_ip_bits(st->d.ip) + (uintptr_t)be +
			    (unsigned)st->status + (unsigned)grpc * 7) % PX_ISTIO_MEMO];
	if (m->x && m->gen == gen && px_ip_eq(m->peer, peer) && px_ip_eq(m->ep, st->d.ip) && m->be == be &&
	    m->code == st->status && m->grpc == grpc) {
		x = m->x;
		goto count;
	}
	if (st->tbl) {
		px_istio_index(st->tbl);
		sp = peer.family ? px_istio_pod(peer) : NULL;
		dp = st->d.ip.family ? px_istio_pod(st->d.ip) : NULL;
	}
	snprintf(k.sw, sizeof(k.sw), "%s", sp ? sp->wl : "unknown");
	snprintf(k.sns, sizeof(k.sns), "%s", sp ? sp->ns : "unknown");
	sl = be ? strchr(be, '/') : NULL;
	if (sl) {	/* backend_name is "ns/name" of the Service routed to */
		snprintf(k.dsn, sizeof(k.dsn), "%s", sl + 1);
		snprintf(k.dsns, sizeof(k.dsns), "%.*s", (int)(sl - be), be);
		snprintf(k.ds, sizeof(k.ds), "%.63s.%.63s.svc.cluster.local", k.dsn, k.dsns);
	} else {
		strcpy(k.ds, "unknown");
		strcpy(k.dsn, "unknown");
		strcpy(k.dsns, "unknown");
	}
	snprintf(k.dw, sizeof(k.dw), "%s", dp ? dp->wl : "unknown");
	snprintf(k.dwns, sizeof(k.dwns), "%s", dp ? dp->ns : "unknown");
	k.code = st->status;	/* 0: no response (the client left) */
	k.grpc = grpc;
	for (int i = 0; i < px_istio.n && !x; i++) {
		struct px_istio_series *c = &px_istio.ser[i];

		if (c->code == k.code && c->grpc == k.grpc && !strcmp(c->sw, k.sw) && !strcmp(c->sns, k.sns) &&
		    !strcmp(c->ds, k.ds) && !strcmp(c->dw, k.dw) && !strcmp(c->dwns, k.dwns))
			x = c;
	}
	if (!x && px_istio.n < PX_ISTIO_MAX_SERIES) {
		if (!px_istio.ser)
			px_istio.ser = zh_calloc(PX_ISTIO_MAX_SERIES, sizeof(*px_istio.ser));
		x = &px_istio.ser[px_istio.n++];
		*x = k;
	}
	if (!x) {
		x = &px_istio.over;
		if (!x->n) {
			struct px_istio_series o = { .code = 0, .grpc = PX_ISTIO_NOT_GRPC };

			strcpy(o.sw, "overflow");
			strcpy(o.sns, "overflow");
			strcpy(o.ds, "overflow");
			strcpy(o.dsn, "overflow");
			strcpy(o.dsns, "overflow");
			strcpy(o.dw, "overflow");
			strcpy(o.dwns, "overflow");
			*x = o;
		}
		px_istio.overflow++;
	} else {
		/* backend_name lives as long as its table (gen): a new table
		 * never matches an old entry */
		*m = (struct px_istio_memo){ .gen = gen, .peer = peer, .ep = st->d.ip,
					    .be = be, .code = st->status, .grpc = grpc, .x = x };
	}
count:
	ms = (double)(ev_turn_ns() - st->t0) / 1e6;
	x->n++;
	x->ms_sum += ms;
	x->bq_sum += (double)st->bytes_in;
	x->bs_sum += (double)st->bytes_out;
	px_istio_bucket(x->ms_b, px_istio_ms_buckets, PX_NB_MS, ms);
	px_istio_bucket(x->bq_b, px_istio_byte_buckets, PX_NB_BYTES, (double)st->bytes_in);
	px_istio_bucket(x->bs_b, px_istio_byte_buckets, PX_NB_BYTES, (double)st->bytes_out);
	px_flow_note(st, x, ms);
}

static void px_istio_labels(struct buf *b, const struct px_istio_series *x)
{
	char gs[12] = "";

	if (x->grpc >= 0)
		snprintf(gs, sizeof(gs), "%d", x->grpc);
	buf_printf(b, "reporter=\"source\",source_workload=\"%s\",source_workload_namespace=\"%s\","
		   "destination_service=\"%s\",destination_service_name=\"%s\","
		   "destination_service_namespace=\"%s\",destination_workload=\"%s\","
		   "destination_workload_namespace=\"%s\",request_protocol=\"%s\","
		   "response_code=\"%d\",grpc_response_status=\"%s\",response_flags=\"-\","
		   "connection_security_policy=\"none\"",
		   x->sw, x->sns, x->ds, x->dsn, x->dsns, x->dw, x->dwns,
		   x->grpc == PX_ISTIO_NOT_GRPC ? "http" : "grpc", x->code, gs);
}

static void px_istio_hist(struct buf *b, const char *name, const struct px_istio_series *x,
			  const uint64_t *bk, const double *bounds, int nb, double sum)
{
	uint64_t cum = 0;

	for (int i = 0; i < nb; i++) {
		cum += bk[i];
		buf_printf(b, "%s_bucket{", name);
		px_istio_labels(b, x);
		buf_printf(b, ",le=\"%g\"} %llu\n", bounds[i], (unsigned long long)cum);
	}
	buf_printf(b, "%s_bucket{", name);
	px_istio_labels(b, x);
	buf_printf(b, ",le=\"+Inf\"} %llu\n%s_sum{", (unsigned long long)x->n, name);
	px_istio_labels(b, x);
	buf_printf(b, "} %.3f\n%s_count{", sum, name);
	px_istio_labels(b, x);
	buf_printf(b, "} %llu\n", (unsigned long long)x->n);
}

static void px_istio_render(struct buf *b)
{
	int i, last = px_istio.n + (px_istio.over.n ? 1 : 0);

	buf_printf(b, "# TYPE istio_requests_total counter\n");
	for (i = 0; i < last; i++) {
		const struct px_istio_series *x = i < px_istio.n ? &px_istio.ser[i] : &px_istio.over;

		buf_printf(b, "istio_requests_total{");
		px_istio_labels(b, x);
		buf_printf(b, "} %llu\n", (unsigned long long)x->n);
	}
	buf_printf(b, "# TYPE istio_request_duration_milliseconds histogram\n");
	for (i = 0; i < last; i++) {
		const struct px_istio_series *x = i < px_istio.n ? &px_istio.ser[i] : &px_istio.over;

		px_istio_hist(b, "istio_request_duration_milliseconds", x, x->ms_b,
			      px_istio_ms_buckets, PX_NB_MS, x->ms_sum);
	}
	buf_printf(b, "# TYPE istio_request_bytes histogram\n");
	for (i = 0; i < last; i++) {
		const struct px_istio_series *x = i < px_istio.n ? &px_istio.ser[i] : &px_istio.over;

		px_istio_hist(b, "istio_request_bytes", x, x->bq_b, px_istio_byte_buckets,
			      PX_NB_BYTES, x->bq_sum);
	}
	buf_printf(b, "# TYPE istio_response_bytes histogram\n");
	for (i = 0; i < last; i++) {
		const struct px_istio_series *x = i < px_istio.n ? &px_istio.ser[i] : &px_istio.over;

		px_istio_hist(b, "istio_response_bytes", x, x->bs_b, px_istio_byte_buckets,
			      PX_NB_BYTES, x->bs_sum);
	}
	buf_printf(b, "# TYPE zerohop_proxy_istio_series gauge\nzerohop_proxy_istio_series %d\n"
		   "# TYPE zerohop_proxy_istio_series_limit gauge\n"
		   "zerohop_proxy_istio_series_limit %d\n"
		   "# TYPE zerohop_proxy_istio_series_overflow_total counter\n"
		   "zerohop_proxy_istio_series_overflow_total %llu\n",
		   px_istio.n, PX_ISTIO_MAX_SERIES, (unsigned long long)px_istio.overflow);
}

static void px_stats_render(struct px_server *s, struct buf *b)
{
	static const char *cls[] = { "none", "1xx", "2xx", "3xx", "4xx", "5xx" };
	static const double q[] = { 50, 90, 99, 99.9 };
	int i, k;

	buf_printf(b, "# TYPE zerohop_proxy_active_connections gauge\n"
		   "zerohop_proxy_active_connections %llu\n"
		   "# TYPE zerohop_proxy_connections_total counter\n"
		   "zerohop_proxy_connections_total %llu\n"
		   "# TYPE zerohop_proxy_route_reloads_total counter\n"
		   "zerohop_proxy_route_reloads_total %llu\n"
		   "zerohop_proxy_route_reload_errors_total %llu\n"
		   "# TYPE zerohop_proxy_upstream_idle_connections gauge\n"
		   "zerohop_proxy_upstream_idle_connections %d\n"
		   "# TYPE zerohop_proxy_timeouts_total counter\n"
		   "zerohop_proxy_timeouts_total{kind=\"request\"} %llu\n"
		   "zerohop_proxy_timeouts_total{kind=\"connect\"} %llu\n"
		   "zerohop_proxy_timeouts_total{kind=\"client_idle\"} %llu\n"
		   "zerohop_proxy_timeouts_total{kind=\"upstream_idle\"} %llu\n"
		   "zerohop_proxy_timeouts_total{kind=\"stream_idle\"} %llu\n"
		   "# TYPE zerohop_proxy_requests_total counter\n",
		   (unsigned long long)s->active, (unsigned long long)s->accepted,
		   (unsigned long long)s->reloads, (unsigned long long)s->reload_errors,
		   s->n_idle, (unsigned long long)s->n_timeouts,
		   (unsigned long long)s->n_connect_timeouts, (unsigned long long)s->n_client_idle,
		   (unsigned long long)s->n_up_idle, (unsigned long long)s->n_stream_idle);
	for (i = 0; i < s->n_stats; i++)
		for (k = 0; k < 6; k++)
			if (s->stats[i].by_class[k])
				buf_printf(b, "zerohop_proxy_requests_total{route=\"%s\",backend=\"%s\","
					   "class=\"%s\"} %llu\n", s->stats[i].route,
					   s->stats[i].backend, cls[k],
					   (unsigned long long)s->stats[i].by_class[k]);
	/* gRPC calls by result (px_stat_grpc): the codes' names, as Envoy's
	 * and the gRPC spec's, so a dashboard needs no table */
	buf_printf(b, "# TYPE zerohop_proxy_grpc_requests_total counter\n");
	for (i = 0; i < s->n_stats; i++)
		for (k = 0; k <= PX_GRPC_OTHER; k++)
			if (s->stats[i].grpc[k])
				buf_printf(b, "zerohop_proxy_grpc_requests_total{route=\"%s\","
					   "backend=\"%s\",grpc_status=\"%s\"} %llu\n",
					   s->stats[i].route, s->stats[i].backend, px_grpc_names[k],
					   (unsigned long long)s->stats[i].grpc[k]);
	buf_printf(b, "# TYPE zerohop_proxy_retries_total counter\n"
		   "zerohop_proxy_retries_total %llu\n"
		   "# TYPE zerohop_proxy_retries_budget_exhausted_total counter\n"
		   "zerohop_proxy_retries_budget_exhausted_total %llu\n"
		   "# TYPE zerohop_proxy_outlier_ejections_total counter\n"
		   "zerohop_proxy_outlier_ejections_total %llu\n"
		   "# TYPE zerohop_proxy_outlier_ejected gauge\n"
		   "zerohop_proxy_outlier_ejected %d\n"
		   "# TYPE zerohop_proxy_draining gauge\n"
		   "zerohop_proxy_draining %d\n"
		   "# TYPE zerohop_proxy_drain_closed_connections_total counter\n"
		   "zerohop_proxy_drain_closed_connections_total %llu\n"
		   "# TYPE zerohop_proxy_upstream_gone_total counter\n"
		   "zerohop_proxy_upstream_gone_total %llu\n"
		   "# TYPE zerohop_proxy_pool_overflow_total counter\n"
		   "zerohop_proxy_pool_overflow_total{reason=\"pending_full\"} %llu\n"
		   "zerohop_proxy_pool_overflow_total{reason=\"pending_timeout\"} %llu\n"
		   "# TYPE zerohop_proxy_pool_pending gauge\n"
		   "zerohop_proxy_pool_pending %u\n"
		   "# TYPE zerohop_proxy_pool_pending_total counter\n"
		   "zerohop_proxy_pool_pending_total %llu\n"
		   "# TYPE zerohop_proxy_pool_max_requests_closed_total counter\n"
		   "zerohop_proxy_pool_max_requests_closed_total %llu\n"
		   "# TYPE zerohop_proxy_early_answers_total counter\n"
		   "zerohop_proxy_early_answers_total %llu\n"
		   "# TYPE zerohop_proxy_discard_closed_total counter\n"
		   "zerohop_proxy_discard_closed_total %llu\n",
		   (unsigned long long)s->n_retries, (unsigned long long)s->n_budget_denied,
		   (unsigned long long)s->n_ejections, s->n_ejected, s->draining,
		   (unsigned long long)s->n_drain_closed, (unsigned long long)s->n_up_gone,
		   (unsigned long long)s->n_overflow, (unsigned long long)s->n_pending_timeouts,
		   s->n_pending, (unsigned long long)s->n_pending_total,
		   (unsigned long long)s->n_max_reqs_closed,
		   (unsigned long long)s->n_early_answers,
		   (unsigned long long)s->n_discard_closed);
	/* batched socket I/O (batch.c): 1 with io_uring, 0 on send/recv */
	buf_printf(b, "# TYPE zerohop_proxy_io_uring gauge\n"
		   "zerohop_proxy_io_uring %d\n"
		   "# TYPE zerohop_proxy_send_batches_total counter\n"
		   "zerohop_proxy_send_batches_total %llu\n"
		   "# TYPE zerohop_proxy_batched_sends_total counter\n"
		   "zerohop_proxy_batched_sends_total %llu\n"
		   "# TYPE zerohop_proxy_recv_batches_total counter\n"
		   "zerohop_proxy_recv_batches_total %llu\n"
		   "# TYPE zerohop_proxy_batched_recvs_total counter\n"
		   "zerohop_proxy_batched_recvs_total %llu\n"
		   "# TYPE zerohop_proxy_busy_poll_microseconds gauge\n"
		   "zerohop_proxy_busy_poll_microseconds %llu\n",
		   ioq_uring(&s->sq), (unsigned long long)s->n_wq_flushes,
		   (unsigned long long)s->n_wq_sends, (unsigned long long)s->n_rd_batches,
		   (unsigned long long)s->n_rd_recvs, (unsigned long long)s->busy_poll_us);
	/* RequestMirror copies (mirror.c invariant 4) */
	buf_printf(b, "# TYPE zerohop_proxy_mirrors_total counter\n"
		   "zerohop_proxy_mirrors_total{result=\"sent\"} %llu\n"
		   "zerohop_proxy_mirrors_total{result=\"failed\"} %llu\n"
		   "# TYPE zerohop_proxy_mirrors_inflight gauge\n"
		   "zerohop_proxy_mirrors_inflight %u\n"
		   "# TYPE zerohop_proxy_mirror_dropped_total counter\n"
		   "zerohop_proxy_mirror_dropped_total{reason=\"limit\"} %llu\n"
		   "zerohop_proxy_mirror_dropped_total{reason=\"too_large\"} %llu\n"
		   "zerohop_proxy_mirror_dropped_total{reason=\"policy\"} %llu\n",
		   (unsigned long long)s->n_mirror_sent, (unsigned long long)s->n_mirror_failed,
		   s->n_mirrors_inflight,
		   (unsigned long long)s->n_mirror_dropped[PX_MIRROR_LIMIT],
		   (unsigned long long)s->n_mirror_dropped[PX_MIRROR_TOO_LARGE],
		   (unsigned long long)s->n_mirror_dropped[PX_MIRROR_POLICY]);
	/* HTTP/2 (h2conn.c, h2up.c): connections and what the defences did */
	buf_printf(b, "# TYPE zerohop_proxy_h2_connections_total counter\n"
		   "zerohop_proxy_h2_connections_total{side=\"client\"} %llu\n"
		   "zerohop_proxy_h2_connections_total{side=\"upstream\"} %llu\n"
		   "# TYPE zerohop_proxy_h2_defence_total counter\n"
		   "zerohop_proxy_h2_defence_total{action=\"goaway_error\"} %llu\n"
		   "zerohop_proxy_h2_defence_total{action=\"refused_stream\"} %llu\n"
		   "zerohop_proxy_h2_defence_total{action=\"header_list_too_large\"} %llu\n"
		   "zerohop_proxy_h2_defence_total{action=\"settings_flood\"} %llu\n"
		   "zerohop_proxy_h2_defence_total{action=\"ping_flood\"} %llu\n"
		   "zerohop_proxy_h2_defence_total{action=\"window_update_flood\"} %llu\n"
		   "zerohop_proxy_h2_defence_total{action=\"priority_flood\"} %llu\n"
		   "# TYPE zerohop_proxy_h2_client_resets_total counter\n"
		   "zerohop_proxy_h2_client_resets_total %llu\n"
		   "# TYPE zerohop_proxy_h2_idle_trimmed_bytes_total counter\n"
		   "zerohop_proxy_h2_idle_trimmed_bytes_total %llu\n"
		   "# TYPE zerohop_proxy_h2_too_many_fields_total counter\n"
		   "zerohop_proxy_h2_too_many_fields_total{part=\"headers\"} %llu\n"
		   "zerohop_proxy_h2_too_many_fields_total{part=\"trailers\"} %llu\n",
		   (unsigned long long)s->n_h2_conns, (unsigned long long)s->n_h2_up_conns,
		   (unsigned long long)s->n_h2_errors, (unsigned long long)s->n_h2_refused,
		   (unsigned long long)s->n_h2_hdr_big,
		   (unsigned long long)s->n_h2_flood[PX_H2_FLOOD_SETTINGS],
		   (unsigned long long)s->n_h2_flood[PX_H2_FLOOD_PING],
		   (unsigned long long)s->n_h2_flood[PX_H2_FLOOD_WINDOW_UPDATE],
		   (unsigned long long)s->n_h2_flood[PX_H2_FLOOD_PRIORITY],
		   (unsigned long long)s->n_h2_resets_rx, (unsigned long long)s->n_h2_trimmed,
		   (unsigned long long)s->n_h2_fields_reset[0],
		   (unsigned long long)s->n_h2_fields_reset[1]);
	px_hbone_render(s, b);	/* the HBONE server's, when on */
	/* requests answered 403 by NetworkPolicy (netpol.c), per direction */
	buf_printf(b, "# TYPE zerohop_proxy_policy_denied_total counter\n"
		   "zerohop_proxy_policy_denied_total{direction=\"egress\"} %llu\n"
		   "zerohop_proxy_policy_denied_total{direction=\"ingress\"} %llu\n"
		   "# TYPE zerohop_proxy_upstream_attempts_total counter\n",
		   (unsigned long long)s->n_pol_denied[POL_DIR_EGRESS],
		   (unsigned long long)s->n_pol_denied[POL_DIR_INGRESS]);
	for (i = 0; i < s->n_stats; i++) {
		const struct px_stat *st = &s->stats[i];

		if (!st->attempts)
			continue;
		buf_printf(b, "zerohop_proxy_upstream_attempts_total{route=\"%s\",backend=\"%s\","
			   "result=\"success\"} %llu\n"
			   "zerohop_proxy_upstream_attempts_total{route=\"%s\",backend=\"%s\","
			   "result=\"failure\"} %llu\n", st->route, st->backend,
			   (unsigned long long)st->attempts_ok, st->route, st->backend,
			   (unsigned long long)(st->attempts - st->attempts_ok));
	}
	buf_printf(b, "# TYPE zerohop_proxy_endpoint_inflight gauge\n");
	for (i = 0; i < s->n_hosts; i++) {
		char ep[PX_IP_STRLEN];

		if (!s->hosts[i].ip.family && !s->hosts[i].port)
			continue;	/* a pruned record */
		/* a.b.c.d:port, [IPv6]:port */
		px_ip_fmt(s->hosts[i].ip, s->hosts[i].port, ep, sizeof(ep));
		buf_printf(b, "zerohop_proxy_endpoint_inflight{endpoint=\"%s\"} %u\n"
			   "zerohop_proxy_endpoint_latency_ewma_seconds{endpoint=\"%s\"} %.6f\n"
			   "zerohop_proxy_endpoint_connections{endpoint=\"%s\"} %u\n"
			   "zerohop_proxy_endpoint_pending{endpoint=\"%s\"} %u\n",
			   ep, s->hosts[i].inflight, ep, s->hosts[i].ewma_ns / 1e9, ep,
			   s->hosts[i].n_conns, ep, s->hosts[i].n_pending);
	}
	buf_printf(b, "# TYPE zerohop_proxy_request_duration_seconds summary\n");
	for (i = 0; i < s->n_stats; i++) {
		const struct px_stat *st = &s->stats[i];

		for (k = 0; k < 4; k++)
			buf_printf(b, "zerohop_proxy_request_duration_seconds{route=\"%s\","
				   "backend=\"%s\",quantile=\"%g\"} %.6f\n", st->route, st->backend,
				   q[k] / 100, hist_percentile(st->lat, q[k]) / 1e9);
		buf_printf(b, "zerohop_proxy_request_duration_seconds_sum{route=\"%s\",backend=\"%s\"}"
			   " %.6f\nzerohop_proxy_request_duration_seconds_count{route=\"%s\","
			   "backend=\"%s\"} %llu\n", st->route, st->backend, hist_sum(st->lat) / 1e9,
			   st->route, st->backend, (unsigned long long)hist_count(st->lat));
	}
	px_istio_render(b);
}

/* GET /flows?follow=1: the ring now, then each new request (px_follow):
 * no Content-Length, the body ends when either side closes. */
static void px_follow_start(struct ev_loop *loop, int fd)
{
	struct buf b;
	int sz = (PX_FLOW_RING + 64) * 512;	/* the whole ring fits: no wait */

	ev_del(loop, fd);
	if (px_follow.n == PX_FLOW_FOLLOWERS) {
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
					   "Connection: close\r\nContent-Length: 0\r\n\r\n";

		if (write(fd, busy, sizeof(busy) - 1) < 0)
			zh_dbg("proxy: /flows follower refused: %s", strerror(errno));
		close(fd);
		return;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	buf_init(&b, 0);
	buf_printf(&b, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
		   "Connection: close\r\n\r\n");
	px_flows_render(&b);
	while (b.data && buf_write_fd(&b, fd) > 0)
		;
	if (b.data || ev_add(loop, fd, EV_READ, px_follow_cb, NULL)) {
		buf_free(&b);	/* could not take the backlog: cut */
		close(fd);
		return;
	}
	buf_free(&b);
	px_follow.loop = loop;
	px_follow.fd[px_follow.n++] = fd;
}

static void px_stats_conn_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_server *s = arg;
	char req[4096];
	struct buf b;
	ssize_t n;

	(void)events;
	n = read(fd, req, sizeof(req));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n > 19 && !memcmp(req, "GET /flows?follow=1", 19)) {
		px_follow_start(loop, fd);
		return;
	}
	buf_init(&b, 0);
	buf_printf(&b, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
		   "Connection: close\r\nContent-Length:           \r\n\r\n");
	{
		size_t hl = b.data;
		char num[24];

		if (n > 10 && !memcmp(req, "GET /flows", 10))
			px_flows_render(&b);	/* the request log (zerohop observe) */
		else
			px_stats_render(s, &b);
		snprintf(num, sizeof(num), "%-10zu", b.data - hl);
		memcpy(strstr(b.area, "Content-Length: ") + 16, num, 10);
	}
	/* The Istio histograms make the page large (~16 KB a label set): size
	 * the send buffer to the page (root may force it) so the loop never
	 * waits on the scraper; a reader slower than that just gets cut. */
	{
		int sz = b.data > (16 << 20) ? (16 << 20) : (int)b.data + 65536;

		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
			setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	}
	while (b.data && buf_write_fd(&b, fd) > 0)
		;
	buf_free(&b);
	ev_del(loop, fd);
	shutdown(fd, SHUT_WR);
	close(fd);
}

void px_stats_accept_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	int cfd;

	(void)events;
	while ((cfd = net_accept(fd, NULL)) >= 0)
		if (ev_add(loop, cfd, EV_READ, px_stats_conn_cb, arg))
			close(cfd);
}

