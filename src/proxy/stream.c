/* stream.c — the proxy's stream layer (px_): a parsed request head routed
 * into a stream (px_stream_open, by phase: read the head, route, forward),
 * header rewriting, local replies, body pumps both ways, tries, retries
 * with the budget and backoff, the stream's timer, and its end.
 * Invariants 1-4, 6-12, 20, 23 and 24 of docs/proxy.md ("Design note").
 *
 * Above it: conn.c (the client connection, driven back through
 * px_conn_ops.progress). Below it: upstream.c (pools), which reports
 * through px_stream_up_ops (the end of this file); balance.c, netpol.c,
 * mirror.c and batch.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "zerohop/buf.h"
#include "zerohop/ev.h"
#include "zerohop/hist.h"
#include "zerohop/log.h"
#include "zerohop/proxy.h"
#include "px_int.h"

static void px_stream_arm(struct px_stream *st);
static int px_stream_try(struct px_stream *st);
static bool px_stream_retry(struct px_stream *st, bool eligible);
static void px_budget_request(struct px_server *s);
static void px_replay_add(struct px_stream *st, const void *p, size_t n);

/* Drive st's client connection (it may end streams, pipeline the next). */
static inline void px_client_wake(struct px_conn *c)
{
	c->ops->progress(c);
}

/* Header emission without printf: on every request (profile: vfprintf was
 * ~2.5 % of the proxy's CPU time with printf here). */
static inline void px_put(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

static inline void px_put_hdr(struct buf *b, const char *n, size_t nl, const char *v, size_t vl)
{
	buf_append(b, n, nl);
	buf_append(b, ": ", 2);
	buf_append(b, v, vl);
	buf_append(b, "\r\n", 2);
}

/* A decimal number (Content-Length, status code). */
static void px_put_u64(struct buf *b, unsigned long long v)
{
	char d[24];
	int i = sizeof(d);

	do
		d[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i > 0);
	buf_append(b, d + i, sizeof(d) - (size_t)i);
}

/* Copy len bytes of src into dst (dstsz >= 1), cut to fit, NUL-terminated:
 * the "%.*s" of snprintf without the format machinery. */
static void px_copy(char *dst, size_t dstsz, const char *src, size_t len)
{
	if (len >= dstsz)
		len = dstsz - 1;
	memcpy(dst, src, len);
	dst[len] = 0;
}

/* 32 hex digits of a and b into dst (>= 33 bytes): a generated x-request-id. */
static void px_hex128(char *dst, uint64_t a, uint64_t b)
{
	static const char hx[] = "0123456789abcdef";

	for (int i = 15; i >= 0; i--, a >>= 4)
		dst[i] = hx[a & 15];
	for (int i = 31; i >= 16; i--, b >>= 4)
		dst[i] = hx[b & 15];
	dst[32] = 0;
}

/* ---- header helpers ------------------------------------------------------ */

/* Hop-by-hop (RFC 9110 7.6.1) plus the framing headers we regenerate. hs
 * is the whole list when it has a Connection header (its names are hop-
 * by-hop too), else NULL: the caller looks once, not once per header. */
static bool px_hop_by_hop(const struct h1_header *h, const struct h1_header *hs, size_t n)
{
	size_t i;

	switch (h->name_len) {	/* (by length first: one compare at most) */
	case 2:
		if (px_name_is(h, "te"))
			return true;
		break;
	case 7:
		if (px_name_is(h, "trailer") || px_name_is(h, "upgrade"))
			return true;
		break;
	case 10:
		if (px_name_is(h, "connection") || px_name_is(h, "keep-alive"))
			return true;
		break;
	case 14:
		if (px_name_is(h, "content-length"))
			return true;
		break;
	case 16:
		if (px_name_is(h, "proxy-connection"))
			return true;
		break;
	case 17:
		if (px_name_is(h, "transfer-encoding"))
			return true;
		break;
	}
	if (!hs)
		return false;
	/* names listed in Connection */
	for (i = 0; i < n; i++) {
		const char *p, *e;

		if (!px_name_is(&hs[i], "connection"))
			continue;
		p = hs[i].value;
		e = p + hs[i].value_len;
		while (p < e) {
			const char *c = memchr(p, ',', e - p), *te = c ? c : e, *ts = p;

			while (ts < te && (*ts == ' ' || *ts == '\t'))
				ts++;
			while (te > ts && (te[-1] == ' ' || te[-1] == '\t'))
				te--;
			if ((size_t)(te - ts) == h->name_len && !strncasecmp(ts, h->name, h->name_len))
				return true;
			p = c ? c + 1 : e;
		}
	}
	return false;
}

/* True when a modifier list replaces or removes this header. */
static bool px_mods_drop(const struct md_header_mod *const *mods, int n, const struct h1_header *h)
{
	int i, k;

	for (i = 0; i < n; i++) {
		for (k = 0; k < mods[i]->set.n; k++)
			if (px_name_is(h, mods[i]->set.v[k].key))
				return true;
		for (k = 0; k < mods[i]->n_remove; k++)
			if (px_name_is(h, mods[i]->remove[k]))
				return true;
	}
	return false;
}

static void px_mods_emit(struct buf *b, const struct md_header_mod *const *mods, int n)
{
	int i, k;

	for (i = 0; i < n; i++) {
		for (k = 0; k < mods[i]->set.n; k++)
			buf_printf(b, "%s: %s\r\n", mods[i]->set.v[k].key, mods[i]->set.v[k].value);
		for (k = 0; k < mods[i]->add.n; k++)
			buf_printf(b, "%s: %s\r\n", mods[i]->add.v[k].key, mods[i]->add.v[k].value);
	}
}

/* ---- client side: replies, stream end ------------------------------------- */

static void px_log_access(struct px_server *s, struct px_stream *st)
{
	char ip[PX_IP_STRLEN], up[PX_IP_STRLEN];
	struct px_ip peer = px_conn_peer(st->c);
	struct timespec ts;
	struct tm tm;
	char tbuf[40];

	if (!s->alog)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	/* IPv4 as a.b.c.d:port, IPv6 as [addr]:port, no endpoint as -:0 */
	px_ip_fmt(peer.family ? peer : px_ip4(0), st->c->peer_port, ip, sizeof(ip));
	if (st->d.ip.family)
		px_ip_fmt(st->d.ip, st->d.port, up, sizeof(up));
	else
		snprintf(up, sizeof(up), "-:%u", st->d.port);
	fprintf(s->alog, "%s.%03ldZ %s \"%s %s HTTP/1.%d\" %d %llu %llu %llu %s %s %s %s \"%s\"\n",
		tbuf, ts.tv_nsec / 1000000, ip, st->method, st->target,
		st->client_minor, st->status, (unsigned long long)st->bytes_in,
		(unsigned long long)st->bytes_out,
		(unsigned long long)((ev_turn_ns() - st->t0) / 1000),
		st->d.route_name ? st->d.route_name : "-",
		st->d.backend_name ? st->d.backend_name : "-", up,
		st->reqid[0] ? st->reqid : "-", st->err ? st->err : "-");
}

void px_stream_free(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	struct px_stat *ps;
	int cls = st->status / 100;
	bool failed = cls >= 5 || px_grpc_failed(st->grpc_status);

	ps = px_stat_get(s, st->d.route_name, st->d.backend_name);
	ps->by_class[cls >= 1 && cls <= 5 ? cls : 0]++;
	px_stat_grpc(ps, st);	/* by gRPC result, when a gRPC call */
	if (st->tries) {
		px_try_end(st);
		if (st->status)	/* 0: the client left; not the endpoint's fault */
			px_outlier_note(st, failed);
		ps->attempts += st->tries;
		ps->attempts_ok += st->tries - st->failed_tries - (cls < 1 || failed);
	}
	px_pend_remove(st);
	px_buf_drop(s, &st->rb);
	px_mirror_drop_stream(st);
	hist_record(ps->lat, ev_turn_ns() - st->t0);
	px_istio_record(s, st);
	px_log_access(s, st);
	if (st->timer)
		ev_timer_del(s->loop, st->timer);
	if (st->up)
		px_up_release(st->up, false);
	px_decision_free(&st->d);	/* a rewrite's path, a redirect's location */
	px_table_unref(st->tbl);
	st->c->last_active = ev_turn_ns();
	st->c->st = NULL;
	px_obj_put(&s->free_st, &s->n_free_st, st);
}

void px_stream_end(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	struct px_up *u = st->up;
	bool keep = st->up_keep;

	st->up = NULL;
	/* invariant 20: routed with an older table, its endpoint may be gone */
	if (u && keep && st->tbl != s->tbl && !px_table_has_ep(s->tbl, u->ip, u->port)) {
		keep = false;
		s->n_up_gone++;
	}
	if (u)
		px_up_release(u, keep);
	if (!st->client_keep)
		st->c->closing = true;
	px_stream_free(st);
}

/* A local error answer to a gRPC request: trailers-only (HTTP 200,
 * grpc-status from the HTTP status as the gRPC spec maps it; a proxy
 * timeout is DEADLINE_EXCEEDED), as Envoy answers gRPC clients. The
 * stream keeps the HTTP status for the access log and metrics. */
static void px_reply_grpc(struct px_stream *st, int status, const char *reason, bool close_conn)
{
	struct px_conn *c = st->c;
	int code = status == 504 && st->err == px_err_timeout ? 4 :
		   status == 400 ? 13 : status == 401 ? 16 : status == 403 ? 7 :
		   status == 404 ? 12 : status == 429 || (status >= 502 && status <= 504) ? 14 : 2;

	px_buf_get(c->srv, &c->out);
	buf_printf(&c->out, "HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\n"
		   "grpc-status: %d\r\ngrpc-message: %s\r\nContent-Length: 0\r\n%s\r\n", code,
		   st->err ? st->err : reason, close_conn ? "Connection: close\r\n" : "");
	if (close_conn)
		c->closing = true;
	st->status = status;
	st->grpc_status = code;
	st->rs = RS_DONE;
	if (close_conn || st->rq != RQ_DONE) {
		st->rq = RQ_DONE;	/* body not read: nothing after it is parsed */
		st->client_keep = false;
		c->closing = true;
	}
}

/* Answer locally; the stream (if any) is complete on the response side. A
 * reply to a request whose body was not read closes the connection. */
void px_reply(struct px_conn *c, int status, const char *reason, const char *extra,
		     bool close_conn)
{
	struct px_stream *st = c->st;
	char body[128];
	int bl;

	if (c->srv->draining)
		close_conn = true;	/* invariant 18 */
	if (st && st->grpc && status >= 400) {
		px_reply_grpc(st, status, reason, close_conn);
		return;
	}
	bl = snprintf(body, sizeof(body), "%d %s\n", status, reason);
	px_buf_get(c->srv, &c->out);
	buf_printf(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
		   "%s%s\r\n%s", status, reason, bl, extra ? extra : "",
		   close_conn ? "Connection: close\r\n" : "", body);
	if (close_conn) {
		c->closing = true;
		if (st)
			st->client_keep = false;
	}
	if (st) {
		st->status = status;
		st->bytes_out += bl;
		st->rs = RS_DONE;
		if (st->rq != RQ_DONE) {
			/* body not read: we cannot find the next request */
			st->rq = RQ_DONE;
			st->client_keep = false;
			c->closing = true;
		}
	}
}

const char *px_reason(int status)
{
	return h1_reason(status, "Error");
}

/* An error in the middle of a stream: answer if nothing was sent yet, else
 * cut the client connection (the only honest signal left). */
void px_stream_fail(struct px_stream *st, int status, const char *err)
{
	struct px_conn *c = st->c;

	st->err = err;
	st->up_keep = false;
	if (st->up) {
		px_up_release(st->up, false);
		st->up = NULL;
	}
	if (st->rs == RS_CONNECT || st->rs == RS_HEAD) {
		px_reply(c, status, px_reason(status), NULL, true);
		st->rq = RQ_DONE;
		px_stream_end(st);
		return;
	}
	st->status = st->status ? st->status : status;
	st->rq = RQ_DONE;
	st->rs = RS_DONE;
	st->client_keep = false;
	c->closing = true;
	c->out.data = 0;	/* a half response must not look complete */
	c->out.head = 0;
	px_stream_end(st);
}

/* ---- request head → stream ---------------------------------------------- */

static const struct px_svc *px_dest_svc(struct px_server *s, struct px_conn *c)
{
	if (s->explicit_mode)
		return px_table_find_name(s->tbl, s->svc_ns, s->svc_name, s->svc_port);
	if (c->dst_v6low)	/* an IPv6 single-stack Service (conn.c) */
		return px_table_find_ip6low(s->tbl, c->dst_ip, c->dst_port);
	return px_table_find_ip(s->tbl, c->dst_ip, c->dst_port);
}

static void px_build_up_head(struct px_stream *st, const struct h1_request *rq,
			     const struct h1_header *h, size_t n, struct buf *b, bool gen_id)
{
	const struct px_decision *d = &st->d;
	int hi = h1_find_header(h, n, "host");
	const struct h1_header *conn = h1_find_header(h, n, "connection") >= 0 ? h : NULL;
	size_t i;

	buf_append(b, rq->method, rq->method_len);
	buf_append(b, " ", 1);
	if (d->path)
		px_put(b, d->path);
	else
		buf_append(b, rq->target, rq->target_len);
	px_put(b, " HTTP/1.1\r\n");
	if (d->host)
		buf_printf(b, "Host: %s\r\n", d->host);
	else if (hi >= 0)
		px_put_hdr(b, "Host", 4, h[hi].value, h[hi].value_len);
	else {
		char ip[PX_IP_STRLEN];

		buf_printf(b, "Host: %s\r\n", px_ip_fmt(d->ip, d->port, ip, sizeof(ip)));
	}
	for (i = 0; i < n; i++) {
		if (px_name_is(&h[i], "host") || px_name_is(&h[i], "expect") ||
		    px_hop_by_hop(&h[i], conn, n) ||
		    px_mods_drop(d->req_mods, d->n_req_mods, &h[i]))
			continue;
		px_put_hdr(b, h[i].name, h[i].name_len, h[i].value, h[i].value_len);
	}
	px_mods_emit(b, d->req_mods, d->n_req_mods);
	if (gen_id)
		px_put_hdr(b, "x-request-id", 12, st->reqid, strlen(st->reqid));
	if (st->req_framing == H1_BODY_LENGTH) {
		px_put(b, "Content-Length: ");
		px_put_u64(b, (unsigned long long)st->req_left);
		px_put(b, "\r\n");
	}
	else if (st->req_framing == H1_BODY_CHUNKED)
		px_put(b, "Transfer-Encoding: chunked\r\n");
	px_put(b, "\r\n");
}

/* An idle HTTP/2 stream costs its objects (docs/proxy.md "Idle streams"):
 * no text arrays inside px_stream (the decision's strings are allocated
 * when used, proxy.h); 976 bytes on x86-64 when this was written. */
_Static_assert(sizeof(struct px_stream) <= 2048, "px_stream grew: idle streams cost it");

struct px_stream *px_stream_new(struct px_conn *c)
{
	struct px_server *s = c->srv;
	struct px_stream *st = px_obj_get(&s->free_st, &s->n_free_st, sizeof(*st));

	memset(st, 0, sizeof(*st));	/* (its decision holds nothing: proxy.h) */

	st->mb_off = true;	/* until px_mirror_begin */
	st->c = c;
	c->st = st;
	st->host = -1;
	st->grpc_status = -1;
	st->t0 = ev_turn_ns();
	st->tbl = px_table_ref(c->srv->tbl);
	st->rq = RQ_DONE;
	st->rs = RS_CONNECT;
	return st;
}

void px_stream_bad_head(struct px_stream *st, int e)
{
	snprintf(st->method, sizeof(st->method), "-");
	snprintf(st->target, sizeof(st->target), "-");
	st->err = h1_err_str(e);
	px_reply(st->c, h1_err_status(e), px_reason(h1_err_status(e)), NULL, true);
	px_stream_end(st);
}

/* Phase 1: what the head says about the stream (method, target, keep-alive,
 * body framing, request id) and the checks a head must pass (invariant 3).
 * 0, or -EPROTO when answered and ended. */
static int px_stream_read_head(struct px_stream *st, const struct h1_request *rq,
			       const struct h1_header *h, size_t n, size_t head_len)
{
	struct px_conn *c = st->c;
	uint64_t cl = 0;
	int rc = 0, fr, hi;

	px_copy(st->method, sizeof(st->method), rq->method, rq->method_len);
	px_copy(st->target, sizeof(st->target), rq->target, rq->target_len);
	st->client_minor = rq->minor_version;
	st->bytes_in = head_len;
	st->head_req = rq->method_len == 4 && !memcmp(rq->method, "HEAD", 4);
	st->client_keep = rq->minor_version == 1 ? !h1_header_has_token(h, n, "connection", "close")
			  : h1_header_has_token(h, n, "connection", "keep-alive");
	fr = h1_body_framing(h, n, 1, 0, 0, &cl);
	if (fr < 0 || (rc = h1_check_host(rq, h, n)) < 0 ||
	    (rq->target[0] != '/' && (rc = H1_E_BAD_TARGET))) {
		int e = fr < 0 ? fr : rc;

		st->err = h1_err_str(e);
		c->in.data = c->in.head = 0;
		px_reply(c, h1_err_status(e), px_reason(h1_err_status(e)), NULL, true);
		px_stream_end(st);
		return -EPROTO;
	}
	st->req_framing = fr;
	st->req_left = cl;
	if (fr == H1_BODY_CHUNKED || (fr == H1_BODY_LENGTH && cl > 0))
		st->rq = RQ_BODY;
	hi = h1_find_header(h, n, "x-request-id");
	if (hi >= 0)
		px_copy(st->reqid, sizeof(st->reqid), h[hi].value, h[hi].value_len);
	hi = h1_find_header(h, n, "content-type");
	st->grpc = hi >= 0 && h[hi].value_len >= 16 &&
		   !strncasecmp(h[hi].value, "application/grpc", 16);
	return 0;
}

/* grpc-timeout ("1-8 digits" then H, M, S, m, u or n) in ms, 0 = none. */
static uint64_t px_grpc_timeout_ms(const struct h1_header *h, size_t n)
{
	int i = h1_find_header(h, n, "grpc-timeout");
	uint64_t v = 0;
	size_t k;

	if (i < 0 || h[i].value_len < 2 || h[i].value_len > 9)
		return 0;
	for (k = 0; k + 1 < h[i].value_len; k++) {
		if (h[i].value[k] < '0' || h[i].value[k] > '9')
			return 0;
		v = v * 10 + (uint64_t)(h[i].value[k] - '0');
	}
	switch (h[i].value[k]) {
	case 'H': return v * 3600000;
	case 'M': return v * 60000;
	case 'S': return v * 1000;
	case 'm': return v ? v : 1;
	case 'u': return v / 1000 ? v / 1000 : 1;
	case 'n': return v / 1000000 ? v / 1000000 : 1;
	}
	return 0;
}

/* Phase 2: the destination Service and its route (px_route) decide; local
 * answers (no Service, redirect, no route, no backend) end the stream here.
 * The head leaves c->in either way. 0 to forward, or -EPROTO when answered. */
static int px_stream_route(struct px_stream *st, const struct h1_request *rq,
			   const struct h1_header *h, size_t n)
{
	struct px_conn *c = st->c;
	struct px_server *s = c->srv;
	const struct px_svc *svc = px_dest_svc(s, c);
	int hh = h1_find_header(h, n, "host"), rc;
	struct px_req_view v;

	if (!svc) {
		st->err = px_err_no_service;
		buf_consume(&c->in, st->bytes_in);
		px_reply(c, 502, px_reason(502), NULL, false);
		px_stream_end(st);
		return -EPROTO;
	}
	v.method = rq->method;
	v.method_len = rq->method_len;
	v.headers = h;
	v.n_headers = n;
	v.client_ns = px_table_client_ns(st->tbl, c->peer_ip);
	px_req_view_target(&v, rq->target, rq->target_len);
	px_decision_free(&st->d);	/* (routed once; holds nothing yet) */
	rc = px_route(st->tbl, svc, &v, hh >= 0 ? h[hh].value : NULL,
		      hh >= 0 ? h[hh].value_len : 0, px_rand(s), &st->d);
	buf_consume(&c->in, st->bytes_in);
	if (rc) {
		st->err = "rewritten path too long";
		px_reply(c, 500, px_reason(500), NULL, false);
		px_stream_end(st);
		return -EPROTO;
	}
	switch (st->d.action) {
	case PX_REDIRECT: {
		char loc[PX_LOCATION_MAX + 16];

		snprintf(loc, sizeof(loc), "Location: %s\r\n", st->d.location);
		px_reply(c, st->d.status, px_reason(st->d.status), loc, false);
		px_stream_end(st);
		return -EPROTO;
	}
	case PX_NOT_FOUND:
		st->err = px_err_no_route;
		px_reply(c, 404, px_reason(404), NULL, false);
		px_stream_end(st);
		return -EPROTO;
	case PX_NO_BACKEND:
		st->err = px_err_no_backend;
		px_reply(c, st->d.status, px_reason(st->d.status), NULL, false);
		px_stream_end(st);
		return -EPROTO;
	case PX_FORWARD:
		break;
	}
	return 0;
}

/* NetworkPolicy on st's chosen endpoint (netpol.c invariants 2-3): true to
 * go on; false when denied, answered 403 and ended. */
static bool px_stream_policy_ok(struct px_stream *st)
{
	if (px_netpol_check(st))
		return true;
	px_reply(st->c, 403, "Forbidden", NULL, false);
	px_stream_end(st);
	return false;
}

/* Phase 3: request id, endpoint, policy, the upstream head into the replay
 * copy, mirrors, the first try. 0, or -EPROTO when answered and ended. */
static int px_stream_forward(struct px_stream *st, const struct h1_request *rq,
			     const struct h1_header *h, size_t n)
{
	struct px_server *s = st->c->srv;
	bool gen_id = !st->reqid[0];
	int rc;

	if (gen_id) {
		uint64_t a = px_rand(s), b = px_rand(s);

		px_hex128(st->reqid, a, b);
	}
	/* the head goes to the replay copy first, then to the upstream
	 * (px_stream_try) */
	if (st->d.lb->kind == PX_LB_RING_HASH)
		st->hash_key = px_hash_key(st, h, n);
	px_stream_pick(st, false);
	/* NetworkPolicy: judged per request on the chosen endpoint, before
	 * any upstream is taken (netpol.c invariants 2-3) */
	if (!px_stream_policy_ok(st))
		return -EPROTO;
	px_buf_get(s, &st->rb);
	px_build_up_head(st, rq, h, n, &st->rb, gen_id);
	px_mirror_begin(st);	/* RequestMirror: copy the head (mirror.c) */
	if (st->rq == RQ_DONE)
		px_mirror_done(st);
	px_budget_request(s);
	rc = px_stream_try(st);	/* (trims the replay copy, invariant 9) */
	px_buf_fit(s, &st->rb, PX_BUFSZ / 4);	/* h2conn.c invariant 7 */
	if (rc == -EBUSY) {
		px_stream_fail(st, 503, px_err_overflow);
		return -EPROTO;
	}
	if (rc && !px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT)) {
		px_stream_fail(st, 503, px_err_connect);
		return -EPROTO;
	}
	return 0;
}

int px_stream_open(struct px_stream *st, const struct h1_request *rq,
		   const struct h1_header *h, size_t n, size_t head_len)
{
	struct px_conn *c = st->c;

	uint64_t gt;

	if (px_stream_read_head(st, rq, h, n, head_len) || px_stream_route(st, rq, h, n))
		return 0;
	/* the client's gRPC deadline bounds the request like timeouts.request
	 * (and is passed on: the backend sees it too) */
	gt = st->grpc ? px_grpc_timeout_ms(h, n) : 0;
	if (gt && (!st->d.timeout_request_ms || gt < st->d.timeout_request_ms))
		st->d.timeout_request_ms = gt;
	if (px_stream_forward(st, rq, h, n))
		return 0;
	if (st->rq == RQ_BODY && h1_header_has_token(h, n, "expect", "100-continue") &&
	    st->client_minor == 1) {
		/* we answer the expectation ourselves (Expect is not forwarded) */
		px_buf_get(c->srv, &c->out);
		buf_printf(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	/* the client connection writes the head and then sets the
	 * upstream's events once: no epoll_ctl churn per request */
	return 0;
}

/* ---- body pumps -------------------------------------------------------------- */

/* Read and drop the rest of an answered request's body (invariant 23),
 * as far as c->in goes. A bad chunk ends the body: the answer stands, and
 * the connection closes after it (nothing after it can be parsed). */
static void px_discard_req(struct px_stream *st)
{
	struct px_conn *c = st->c;

	while (st->rq == RQ_BODY && c->in.data) {
		if (st->req_framing == H1_BODY_LENGTH) {
			size_t k = c->in.data < st->req_left ? c->in.data : st->req_left;

			buf_consume(&c->in, k);
			st->req_left -= k;
			st->bytes_in += k;
			if (!st->req_left)
				st->rq = RQ_DONE;
		} else {
			size_t in = c->in.data, len = in;
			ssize_t left = h1_decode_chunked(&st->req_ck, buf_head(&c->in), &len);

			if (left < 0) {
				st->err = h1_err_str((int)left);
				st->rq = RQ_DONE;
				st->client_keep = false;
				c->in.data = c->in.head = 0;
				return;
			}
			st->bytes_in += in - left;
			if (left > 0 || h1_chunked_done(&st->req_ck)) {
				/* leftover (pipelined) bytes sit at len..len+left */
				memmove(buf_head(&c->in) + in - left, buf_head(&c->in) + len, left);
				st->rq = RQ_DONE;
			}
			buf_consume(&c->in, in - left);
		}
	}
}

void px_stream_early_answer(struct px_stream *st)
{
	struct px_server *s = st->c->srv;

	if (st->discard)
		return;
	st->discard = true;
	s->n_early_answers++;
	/* the try is over (its latency ends here, not when the client stops
	 * sending); its upstream got an incomplete request: never pooled
	 * (invariant 4), an HTTP/2 try's stream is reset if still open */
	px_try_end(st);
	st->up_keep = false;
	if (st->up) {
		px_up_release(st->up, false);
		st->up = NULL;
	}
	st->rb_off = true;	/* no retry after an answer */
	px_buf_drop(s, &st->rb);
	px_mirror_drop_stream(st);	/* a mirror would get half a request */
	/* invariant 24: the drop is bounded in time (an HTTP/2 client's
	 * stream is reset instead: h2conn.c invariant 6) */
	if (!st->c->one_req) {
		st->discard_until = ev_now_ns() + s->discard_ns;
		px_stream_arm(st);
	}
}

/* The discard bound passed (invariant 24): stop reading, close the client
 * connection once its answer is out. */
static void px_discard_expired(struct px_stream *st)
{
	struct px_conn *c = st->c;

	c->srv->n_discard_closed++;
	st->rq = RQ_DONE;
	st->client_keep = false;
	c->in.data = c->in.head = 0;	/* nothing after it can be parsed */
	px_stream_end(st);
	px_client_wake(c);
}

/* Move request body bytes c->in → up->out (RQ_BODY), or drop them once the
 * stream was answered (invariant 23). 0, or -EPROTO on a bad chunk (the
 * stream was failed). */
int px_pump_req(struct px_stream *st)
{
	struct px_conn *c = st->c;
	struct px_up *u = st->up;
	size_t before = u ? u->out.data : 0;

	if (st->discard) {
		px_discard_req(st);
		return 0;
	}
	/* (a failed send: nothing more goes, the answer decides, px_up_sent) */
	while (st->rq == RQ_BODY && c->in.data && u && !u->wr_dead && u->out.data < PX_HIGH) {
		if (st->req_framing == H1_BODY_LENGTH) {
			size_t k = c->in.data;

			if (k > st->req_left)
				k = st->req_left;
			if (k > PX_HIGH - u->out.data)
				k = PX_HIGH - u->out.data;
			buf_append(&u->out, buf_head(&c->in), k);
			buf_consume(&c->in, k);
			st->req_left -= k;
			st->bytes_in += k;
			if (!st->req_left)
				st->rq = RQ_DONE;
		} else {
			size_t in = c->in.data, len = in;
			ssize_t left = h1_decode_chunked(&st->req_ck, buf_head(&c->in), &len);

			if (left < 0) {
				st->err = h1_err_str((int)left);
				px_stream_fail(st, 400, st->err);
				return -EPROTO;
			}
			if (len)
				buf_printf(&u->out, "%zx\r\n", len);
			buf_append(&u->out, buf_head(&c->in), len);
			if (len)
				buf_append(&u->out, "\r\n", 2);
			st->bytes_in += in - left;
			if (left > 0 || h1_chunked_done(&st->req_ck)) {
				/* leftover (pipelined) bytes sit at len..len+left */
				memmove(buf_head(&c->in) + in - left, buf_head(&c->in) + len, left);
				buf_append(&u->out, "0\r\n\r\n", 5);
				st->rq = RQ_DONE;
			}
			buf_consume(&c->in, in - left);
		}
	}
	/* mirror what was appended (only appends happened above) */
	if (u && !st->rb_off && u->out.data > before)
		px_replay_add(st, buf_head(&u->out) + before, u->out.data - before);
	if (u && !st->mb_off && u->out.data > before) {
		px_mirror_add(st, buf_head(&u->out) + before, u->out.data - before);
		if (st->rq == RQ_DONE)
			px_mirror_done(st);
	}
	return 0;
}

static void px_resp_emit_body(struct px_stream *st, const char *p, size_t len)
{
	struct buf *o = &st->c->out;

	if (!len)
		return;
	px_buf_get(st->c->srv, o);	/* (a view's head went to c->rfields) */
	st->bytes_out += len;	/* payload bytes, as the access log documents */
	if (st->out_chunked)
		buf_printf(o, "%zx\r\n", len);
	buf_append(o, p, len);
	if (st->out_chunked)
		buf_append(o, "\r\n", 2);
}

static void px_resp_finish(struct px_stream *st)
{
	if (st->out_chunked)
		buf_append(&st->c->out, "0\r\n\r\n", 5);
	if (st->c->one_req)
		st->c->out_end = true;	/* an HTTP/2 view's raw body ends (h2conn.c 7) */
	st->rs = RS_DONE;
}

/* grpc-status in a response head (a gRPC trailers-only answer), or -1. */
static int px_grpc_status(const struct h1_header *h, size_t n)
{
	int i = h1_find_header(h, n, "grpc-status"), v = 0;

	if (i < 0 || !h[i].value_len || h[i].value_len > 2)
		return -1;
	for (size_t k = 0; k < h[i].value_len; k++) {
		if (h[i].value[k] < '0' || h[i].value[k] > '9')
			return -1;
		v = v * 10 + (h[i].value[k] - '0');
	}
	return v;
}

/* The response head: an HTTP/2 try's fields as they are (h2up.c invariant
 * 7), else parsed from up->in. Its length in up->in (0 for fields),
 * -EAGAIN, or another h1 error. 1xx heads are dropped here. */
static int px_resp_parse(struct px_stream *st, struct px_up *u, struct h1_response *r,
			 struct h1_header *h, size_t *n)
{
	int rc;

	if (u->h2) {
		*n = PX_MAX_HDRS;
		return px_h2up_resp_head(u, r, h, n);
	}
	for (;;) {
		*n = PX_MAX_HDRS;
		rc = h1_parse_response(buf_head(&u->in), u->in.data, st->up_last_len,
				       &u->srv->lim, r, h, n);
		if (rc < 0 || r->status >= 200 || r->status == 101)
			return rc;
		st->up_last_len = 0;
		buf_consume(&u->in, rc);	/* other 1xx: ours to drop (Expect is not forwarded) */
	}
}

/* Parse the response head in up->in and write the client's head: HTTP/1.1
 * text in c->out, or, for an HTTP/2 client's view, fields in c->rfields
 * and the status in c->rstatus (h2conn.c invariant 8). 0 when parsed (or
 * more bytes needed), -EPROTO when the stream was failed. */
static int px_resp_head(struct px_stream *st)
{
	struct px_conn *c = st->c;
	struct px_up *u = st->up;
	struct h1_header h[PX_MAX_HDRS];
	size_t n = PX_MAX_HDRS, i;
	struct h1_response r;
	uint64_t cl = 0;
	int rc, fr;
	bool close_client, view = c->one_req;
	struct buf *o = view ? &c->rfields : &c->out;
	const struct h1_header *conn;

	for (;;) {
		rc = px_resp_parse(st, u, &r, h, &n);
		if (rc == -EAGAIN) {
			st->up_last_len = u->in.data;
			if (u->eof) {
				if (!u->in.data &&
				    px_stream_retry(st, st->d.retry->on & PX_RETRY_RESET))
					return 1;	/* restarted */
				px_stream_fail(st, 502, u->in.data ? px_err_bad_upstream :
					       px_err_upstream_closed);
				return -EPROTO;
			}
			return 0;
		}
		st->up_last_len = 0;
		if (rc < 0) {
			px_stream_fail(st, 502, px_err_bad_upstream);
			return -EPROTO;
		}
		if (r.status >= 200)
			break;
		/* we never forward Upgrade: a 101 is a protocol error */
		px_stream_fail(st, 502, px_err_bad_upstream);
		return -EPROTO;
	}
	/* a trailers-only answer's; an HTTP/2 upstream's trailers may already
	 * have set it (h2up.c parses them as they come, before this head is
	 * read from u->in): a head without grpc-status keeps theirs */
	if (px_grpc_status(h, n) >= 0 || st->grpc_status < 0)
		st->grpc_status = px_grpc_status(h, n);
	if ((px_retry_status(st->d.retry, r.status) ||
	     px_retry_grpc(st->d.retry, st->grpc_status)) && px_stream_retry(st, true))
		return 1;	/* restarted; nothing reached the client */
	fr = h1_body_framing(h, n, 0, r.status, st->head_req, &cl);
	if (fr < 0) {
		px_stream_fail(st, 502, px_err_bad_upstream);
		return -EPROTO;
	}
	st->status = r.status;
	st->resp_framing = fr;
	st->resp_left = cl;
	st->up_keep = r.minor_version == 1 && fr != H1_BODY_EOF &&
		      !h1_header_has_token(h, n, "connection", "close");
	/* a 1.0 client cannot read chunked; EOF-delimited bodies need a close
	 * unless we can re-chunk them */
	st->out_chunked = !view && st->client_minor == 1 &&
			  (fr == H1_BODY_CHUNKED || fr == H1_BODY_EOF);
	if ((fr == H1_BODY_CHUNKED || fr == H1_BODY_EOF) && st->client_minor == 0)
		st->client_keep = false;
	if (c->srv->draining)
		st->client_keep = false;	/* invariant 18: Connection: close */
	close_client = !st->client_keep || c->rd_eof;
	px_buf_get(c->srv, o);
	if (view) {
		c->rstatus = r.status;
	} else {
		px_put(o, "HTTP/1.1 ");
		px_put_u64(o, (unsigned long long)r.status);
		buf_append(o, " ", 1);
		buf_append(o, r.reason, r.reason_len);
		buf_append(o, "\r\n", 2);
	}
	conn = h1_find_header(h, n, "connection") >= 0 ? h : NULL;
	for (i = 0; i < n; i++) {
		if (st->head_req && px_name_is(&h[i], "content-length"))
			goto keep;	/* HEAD: the length of the body not sent */
		if (px_hop_by_hop(&h[i], conn, n) ||
		    px_mods_drop(st->d.resp_mods, st->d.n_resp_mods, &h[i]))
			continue;
keep:
		px_put_hdr(o, h[i].name, h[i].name_len, h[i].value, h[i].value_len);
	}
	px_mods_emit(o, st->d.resp_mods, st->d.n_resp_mods);
	if (fr == H1_BODY_LENGTH) {
		px_put(o, "Content-Length: ");
		px_put_u64(o, (unsigned long long)cl);
		px_put(o, "\r\n");
	}
	else if (st->out_chunked)
		px_put(o, "Transfer-Encoding: chunked\r\n");
	if (view)
		;	/* framing and connection are HTTP/2's (h2conn.c) */
	else if (close_client)
		px_put(o, "Connection: close\r\n");
	else if (st->client_minor == 0)
		px_put(o, "Connection: keep-alive\r\n");
	if (!view)
		px_put(o, "\r\n");
	buf_consume(&u->in, rc);
	st->rs = RS_BODY;
	if (fr == H1_BODY_NONE || (fr == H1_BODY_LENGTH && !cl))
		px_resp_finish(st);
	return 0;
}

/* Move response bytes up->in → c->out. */
int px_pump_resp(struct px_stream *st)
{
	struct px_conn *c = st->c;
	struct px_up *u = st->up;

	if (st->rs == RS_HEAD && (u->in.data || u->eof || u->h2))
		if (px_resp_head(st))
			return -EPROTO;
	while (st->rs == RS_BODY && u->in.data && c->out.data < PX_HIGH) {
		if (st->resp_framing == H1_BODY_LENGTH) {
			size_t k = u->in.data < st->resp_left ? u->in.data : st->resp_left;

			px_resp_emit_body(st, buf_head(&u->in), k);
			buf_consume(&u->in, k);
			st->resp_left -= k;
			if (!st->resp_left)
				px_resp_finish(st);
		} else if (st->resp_framing == H1_BODY_CHUNKED) {
			size_t in = u->in.data, len = in;
			ssize_t left = h1_decode_chunked(&st->resp_ck, buf_head(&u->in), &len);

			if (left < 0) {
				px_stream_fail(st, 502, px_err_bad_upstream);
				return -EPROTO;
			}
			px_resp_emit_body(st, buf_head(&u->in), len);
			buf_consume(&u->in, in);
			if (left > 0 || h1_chunked_done(&st->resp_ck)) {
				if (left > 0)
					st->up_keep = false;	/* junk after the body */
				px_resp_finish(st);
			}
		} else {
			px_resp_emit_body(st, buf_head(&u->in), u->in.data);
			buf_consume(&u->in, u->in.data);
		}
	}
	if (st->rs == RS_BODY && (u->eof || u->in_end) && !u->in.data) {
		/* an HTTP/2 try's body without a length ends with END_STREAM
		 * (in_end); its eof is a reset, never an end (h2up.c 7) */
		if (st->resp_framing != H1_BODY_EOF || (u->h2 && !u->in_end)) {
			px_stream_fail(st, 502, px_err_upstream_closed);
			return -EPROTO;
		}
		px_resp_finish(st);
	}
	return 0;
}

/* ---- timeouts (invariants 6-7) -------------------------------------------- */

static uint64_t px_dl_request(const struct px_stream *st)
{
	return st->d.timeout_request_ms ? st->t0 + st->d.timeout_request_ms * PX_MS : 0;
}

/* Per try: timeouts.backendRequest and the per-try timeout, the shorter. */
static uint64_t px_dl_backend(const struct px_stream *st)
{
	uint64_t ms = px_min_dl(st->d.timeout_backend_ms, st->d.retry->per_try_ms);

	return ms ? st->try_t0 + ms * PX_MS : 0;
}

/* ---- retries (invariants 9-12) ----------------------------------------------- */

static int px_budget_slot(struct px_server *s, uint64_t sec)
{
	int i = sec % PX_BUDGET_SECS;

	if (s->bud_sec[i] != sec) {
		s->bud_sec[i] = sec;
		s->bud_req[i] = s->bud_retry[i] = 0;
	}
	return i;
}

static void px_budget_request(struct px_server *s)
{
	s->bud_req[px_budget_slot(s, ev_turn_ns() / 1000000000ULL)]++;
}

/* Take one retry from the budget: retries <= PCT % of requests + MIN_RPS/s. */
static bool px_budget_take(struct px_server *s)
{
	uint64_t sec = ev_now_ns() / 1000000000ULL, req = 0, ret = 0;
	int i, cur = px_budget_slot(s, sec);

	for (i = 0; i < PX_BUDGET_SECS; i++)
		if (sec - s->bud_sec[i] < PX_BUDGET_SECS) {
			req += s->bud_req[i];
			ret += s->bud_retry[i];
		}
	if (100 * (ret + 1) > PX_BUDGET_PCT * req + 100ULL * PX_BUDGET_MIN_RPS * PX_BUDGET_SECS) {
		s->n_budget_denied++;
		return false;
	}
	s->bud_retry[cur]++;
	return true;
}

/* Keep request bytes for a replay; past PX_REPLAY_MAX replay is off. */
static void px_replay_add(struct px_stream *st, const void *p, size_t n)
{
	struct px_server *s = st->c->srv;

	if (st->rb_off)
		return;
	if (st->rb.data + n > PX_REPLAY_MAX) {
		st->rb_off = true;
		px_buf_drop(s, &st->rb);
		return;
	}
	px_buf_get(s, &st->rb);
	buf_append(&st->rb, p, n);
}

/* Attach upstream u to st and start sending the replay copy. */
static void px_stream_attach(struct px_stream *st, struct px_up *u, int host)
{
	struct px_server *s = st->c->srv;

	st->up = u;
	px_up_attach(u, st);
	st->host = host;
	s->hosts[host].inflight++;
	st->rs = u->connecting ? RS_CONNECT : RS_HEAD;
	st->try_t0 = ev_turn_ns();
	st->up_last_len = 0;
	px_buf_get(s, &u->out);
	buf_append(&u->out, buf_head(&st->rb), st->rb.data);
	if (!st->d.retry->retries || st->rb.data > PX_REPLAY_MAX) {
		st->rb_off = true;	/* no retry possible: keep no copy */
		px_buf_drop(s, &st->rb);
	}
	px_stream_arm(st);
}

/* Start one try on st->d's endpoint (upstream.c's px_pool_get: pooled,
 * new, or pending, invariants 21-22). 0 (under way or pending), -EBUSY
 * when the pool overflows (answer 503, never retried: that would only add
 * load), or -errno when the connect failed at once. */
static int px_stream_try(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	struct px_up *u = NULL;
	int host, rc;

	st->tries++;
	host = px_host_find(s, st->d.ip, st->d.port, true) - s->hosts;
	rc = px_pool_get(s, host, st, &u);
	if (rc == -EAGAIN) {	/* pending */
		st->rs = RS_CONNECT;
		st->try_t0 = ev_now_ns();	/* the wait is bounded by the connect timeout */
		px_stream_arm(st);
		return 0;
	}
	if (rc)
		return rc;
	px_stream_attach(st, u, host);
	return 0;
}

/* Retry the stream when eligible (the caller's retry-on test), within the
 * policy's count, replayable, and within the budget. True when a new try
 * is under way (st->up replaced or connecting: invariant 10); false leaves
 * the stream to the caller's failure path (st->up may be NULL). */
static bool px_stream_retry(struct px_stream *st, bool eligible)
{
	struct px_server *s = st->c->srv;
	uint64_t cap;

	if (!eligible || st->rb_off || st->tries > st->d.retry->retries ||
	    !(st->rs == RS_CONNECT || st->rs == RS_HEAD) || !px_budget_take(s))
		return false;
	s->n_retries++;
	st->failed_tries++;
	px_try_end(st);
	px_outlier_note(st, true);
	if (st->up) {
		px_up_release(st->up, false);
		st->up = NULL;
	}
	px_stream_pick(st, true);
	/* backoff (Envoy): uniform in [0, min(250 ms, 25 ms x 2^(retry-1))]
	 * ("full jitter"); the try starts from the stream timer (invariant 10) */
	cap = PX_BACKOFF_BASE_NS << (st->failed_tries - 1 < 4 ? st->failed_tries - 1 : 4);
	cap = cap < PX_BACKOFF_MAX_NS ? cap : PX_BACKOFF_MAX_NS;
	st->rs = RS_CONNECT;
	if (st->d.retry->backoff_ms) {
		/* HTTPRoute retry.backoff: at least that long, up to 1.25x */
		uint64_t b = st->d.retry->backoff_ms * 1000000ULL;

		st->retry_at = ev_now_ns() + b + px_rand(s) % (b / 4 + 1);
	} else {
		st->retry_at = ev_now_ns() + px_rand(s) % (cap + 1);
	}
	px_stream_arm(st);
	return true;
}

static void px_stream_timeout_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct px_stream *st = arg;
	struct px_conn *c = st->c;
	struct px_server *s = c->srv;
	uint64_t now = ev_now_ns(), rq = px_dl_request(st), be = px_dl_backend(st);

	(void)loop;
	(void)id;
	st->timer = 0;
	st->deadline = 0;
	if (st->discard && st->discard_until && st->rq == RQ_BODY) {
		px_discard_expired(st);	/* (freed st) */
		return;
	}
	if (st->rs == RS_DONE)
		return;	/* response complete; only the request body is pending */
	if (st->pending) {
		/* waited the connect timeout for a pool slot (invariant 22) */
		px_pend_remove(st);
		if (!(rq && now >= rq)) {
			s->n_pending_timeouts++;
			px_stream_fail(st, 503, px_err_overflow);
			goto out;
		}
	}
	if (st->retry_at && !(rq && now >= rq)) {
		/* the backoff is over: the retry's try starts now */
		int rc;

		if (now < st->retry_at) {
			px_stream_arm(st);
			return;
		}
		st->retry_at = 0;
		/* the retry's endpoint was re-picked: judge it (netpol.c 2) */
		if (!px_stream_policy_ok(st))
			goto out;
		rc = px_stream_try(st);
		if (rc == -EBUSY)
			px_stream_fail(st, 503, px_err_overflow);
		else if (rc && !px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
			px_stream_fail(st, 503, px_err_connect);
		goto out;
	}
	st->retry_at = 0;
	if (rq && now >= rq) {
		/* the whole request's time is up: no retry */
	} else if (st->rs == RS_CONNECT && !(be && now >= be)) {
		s->n_connect_timeouts++;
		if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
			px_stream_fail(st, 503, px_err_connect_timeout);
		goto out;
	} else if (px_stream_retry(st, (st->d.retry->on & PX_RETRY_RESET) ||
				    px_retry_status(st->d.retry, 504))) {
		/* per-try timeout: retried as Envoy's "reset" (no response) */
		s->n_timeouts++;
		goto out;
	}
	if ((st->rs == RS_CONNECT || st->rs == RS_HEAD) && st->rq == RQ_DONE) {
		/* nothing sent to the client yet and its request is read: a
		 * 504 that keeps the client connection */
		s->n_timeouts++;
		st->err = px_err_timeout;
		st->up_keep = false;
		if (st->up) {
			px_up_release(st->up, false);
			st->up = NULL;
		}
		px_reply(c, 504, px_reason(504), NULL, false);
		px_stream_end(st);
	} else {
		s->n_timeouts++;
		px_stream_fail(st, 504, px_err_timeout);
	}
out:
	px_client_wake(c);
}

/* (Re)arm the stream's single timer for its earliest deadline. */
static void px_stream_arm(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	uint64_t dl;

	if (st->discard) {	/* answered: only the drop's bound (invariant 24) */
		dl = st->discard_until;
	} else if (st->retry_at) {	/* backing off: no try in flight */
		dl = px_min_dl(px_dl_request(st), st->retry_at);
	} else {
		dl = px_min_dl(px_dl_request(st), px_dl_backend(st));
		if (st->rs == RS_CONNECT)
			dl = px_min_dl(dl, st->try_t0 + s->connect_ns);
	}
	if (dl == st->deadline)
		return;
	if (st->timer)
		ev_timer_del(s->loop, st->timer);
	st->timer = dl ? ev_timer_add(s->loop, dl, px_stream_timeout_cb, st) : 0;
	st->deadline = dl;
}

/* ---- what the upstream layer reports (px_up_ops) --------------------------- */

static void px_up_connected(struct px_stream *st)
{
	st->rs = RS_HEAD;
	px_stream_arm(st);	/* the connect deadline no longer applies */
}

static void px_up_connect_failed(struct px_stream *st)
{
	struct px_conn *c = st->c;

	if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
		px_stream_fail(st, 503, px_err_connect);
	px_client_wake(c);
}

/* The upstream is gone: retry or fail the stream as a reset (the error
 * path the response parser takes on an EOF). */
static void px_up_reset(struct px_stream *st)
{
	struct px_conn *c = st->c;

	if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_RESET))
		px_stream_fail(st, 502, px_err_upstream_closed);
	px_client_wake(c);
}

static void px_up_progress(struct px_stream *st)
{
	px_client_wake(st->c);
}

static void px_up_slot(struct px_stream *st, struct px_up *u, int host, int rc)
{
	struct px_conn *c = st->c;

	if (!rc)
		px_stream_attach(st, u, host);
	else if (!px_stream_retry(st, st->d.retry->on & PX_RETRY_CONNECT))
		px_stream_fail(st, 503, px_err_connect);
	px_client_wake(c);
}

const struct px_up_ops px_stream_up_ops = {
	.connected = px_up_connected,
	.connect_failed = px_up_connect_failed,
	.reset = px_up_reset,
	.progress = px_up_progress,
	.slot = px_up_slot,
};
