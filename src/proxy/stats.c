/* stats.c — the proxy's Prometheus text endpoint (--stats-addr) and the
 * per route/backend counters behind it (docs/proxy.md "Observability"). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "zerohop/abi/policy.h"
#include "zerohop/log.h"
#include "zerohop/net.h"
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
		   "# TYPE zerohop_proxy_requests_total counter\n",
		   (unsigned long long)s->active, (unsigned long long)s->accepted,
		   (unsigned long long)s->reloads, (unsigned long long)s->reload_errors,
		   s->n_idle, (unsigned long long)s->n_timeouts,
		   (unsigned long long)s->n_connect_timeouts, (unsigned long long)s->n_client_idle,
		   (unsigned long long)s->n_up_idle);
	for (i = 0; i < s->n_stats; i++)
		for (k = 0; k < 6; k++)
			if (s->stats[i].by_class[k])
				buf_printf(b, "zerohop_proxy_requests_total{route=\"%s\",backend=\"%s\","
					   "class=\"%s\"} %llu\n", s->stats[i].route,
					   s->stats[i].backend, cls[k],
					   (unsigned long long)s->stats[i].by_class[k]);
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
		   "zerohop_proxy_pool_max_requests_closed_total %llu\n",
		   (unsigned long long)s->n_retries, (unsigned long long)s->n_budget_denied,
		   (unsigned long long)s->n_ejections, s->n_ejected, s->draining,
		   (unsigned long long)s->n_drain_closed, (unsigned long long)s->n_up_gone,
		   (unsigned long long)s->n_overflow, (unsigned long long)s->n_pending_timeouts,
		   s->n_pending, (unsigned long long)s->n_pending_total,
		   (unsigned long long)s->n_max_reqs_closed);
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
		   "# TYPE zerohop_proxy_h2_client_resets_total counter\n"
		   "zerohop_proxy_h2_client_resets_total %llu\n",
		   (unsigned long long)s->n_h2_conns, (unsigned long long)s->n_h2_up_conns,
		   (unsigned long long)s->n_h2_errors, (unsigned long long)s->n_h2_refused,
		   (unsigned long long)s->n_h2_hdr_big, (unsigned long long)s->n_h2_resets_rx);
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
		char ip[INET_ADDRSTRLEN];

		if (!s->hosts[i].ip && !s->hosts[i].port)
			continue;	/* a pruned record */
		inet_ntop(AF_INET, &s->hosts[i].ip, ip, sizeof(ip));
		buf_printf(b, "zerohop_proxy_endpoint_inflight{endpoint=\"%s:%u\"} %u\n"
			   "zerohop_proxy_endpoint_latency_ewma_seconds{endpoint=\"%s:%u\"} %.6f\n"
			   "zerohop_proxy_endpoint_connections{endpoint=\"%s:%u\"} %u\n"
			   "zerohop_proxy_endpoint_pending{endpoint=\"%s:%u\"} %u\n",
			   ip, s->hosts[i].port, s->hosts[i].inflight, ip, s->hosts[i].port,
			   s->hosts[i].ewma_ns / 1e9, ip, s->hosts[i].port, s->hosts[i].n_conns, ip,
			   s->hosts[i].port, s->hosts[i].n_pending);
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
	buf_init(&b, 0);
	buf_printf(&b, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
		   "Connection: close\r\nContent-Length:           \r\n\r\n");
	{
		size_t hl = b.data;
		char num[24];

		px_stats_render(s, &b);
		snprintf(num, sizeof(num), "%-10zu", b.data - hl);
		memcpy(strstr(b.area, "Content-Length: ") + 16, num, 10);
	}
	/* small enough for the socket buffer; a slow reader just gets cut */
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

