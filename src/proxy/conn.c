/* conn.c — the proxy's client connection layer (px_): the listener, the
 * capture lookup of a connection's original destination, HTTP/1.1 client
 * connections (reads, request heads, pipelining, flushes, close) and the
 * client idle sweep. Invariants 1-3 and 8 of docs/proxy.md ("Design note").
 *
 * Above it: server.c. Below it: h1req.c (HTTP/1.1 requests over the
 * connection's buffers) or, after the HTTP/2 preface, h2conn.c; the
 * stream layer drives it back through px_conn_ops.progress only.
 */
#include <errno.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <bpf/bpf.h>

#include "zerohop/abi/l7cap.h"
#include "zerohop/net.h"
#include "px_int.h"

#define CONN_OF(w) ((struct px_conn *)(void *)((char *)(w) - offsetof(struct px_conn, wr)))

static void px_conn_progress(struct px_conn *c);

/* Whether the client socket should be read now. The same test arms
 * EV_READ and gates the read, so a level-triggered event we would not serve
 * never stays armed (no spinning). Reading stays armed across requests (no
 * epoll_ctl per request); pipelined bytes simply wait in c->in. */
static bool px_conn_want_read(const struct px_conn *c)
{
	const struct px_stream *st = c->st;
	size_t lim = c->srv->lim.max_head + c->srv->lim.max_line;

	if (c->rd_eof || c->closing || c->out.data >= PX_HIGH)
		return false;	/* (a client not reading our answers) */
	if (st && st->rq == RQ_BODY && st->discard)	/* answered: dropped (invariant 23) */
		return c->in.data < PX_HIGH;
	if (st && st->rq == RQ_BODY)	/* backpressure from the upstream */
		return st->up && st->up->out.data < PX_HIGH && c->in.data < PX_HIGH;
	return c->in.data < (lim > PX_HIGH ? lim : PX_HIGH);
}

static void px_conn_event(struct px_wr *w, int events)
{
	struct px_conn *c = CONN_OF(w);
	ssize_t n;

	if (events & EV_WRITE)
		c->wr.blocked = false;	/* room again: queue the rest (batch.c) */
	if ((events & (EV_READ | EV_ERROR)) && c->rd_iter != ev_iteration(c->srv->loop) &&
	    px_conn_want_read(c)) {	/* (px_rd_batch did not read it) */
		px_buf_get(c->srv, &c->in);
		n = buf_read_fd(&c->in, c->fd, 0);
		if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR))
			c->rd_eof = true;
		else if (n > 0)
			c->last_active = ev_now_ns();
	}
	px_conn_progress(c);
}

static bool px_conn_io_want_read(const struct px_wr *w)
{
	return px_conn_want_read(CONN_OF(w));
}

/* The batch's send result (batch.c). The client is gone (reset, or closed
 * its read side): nothing more can be delivered, close. */
static void px_conn_sent(struct px_wr *w)
{
	struct px_conn *c = CONN_OF(w);
	ssize_t res = c->wr.res;

	if (res < 0 && res != -EAGAIN) {
		px_conn_close(c);
		return;
	}
	if (res > 0)
		buf_consume(&c->out, (size_t)res);
	if (c->out.data)
		c->wr.blocked = true;
	px_conn_progress(c);
}

static const struct px_io_ops px_conn_io = {
	.event = px_conn_event,
	.want_read = px_conn_io_want_read,
	.sent = px_conn_sent,
};

static const struct px_conn_ops px_h1_conn_ops = {
	.progress = px_conn_progress,
};

static void px_conn_update(struct px_conn *c)
{
	struct px_server *s = c->srv;
	int mask = 0;

	if (c->out.data && c->wr.slot < 0)	/* batch.c invariant 3 */
		mask |= EV_WRITE;
	if (px_conn_want_read(c))
		mask |= EV_READ;
	if (mask == c->mask)
		return;
	if (!mask)
		ev_del(s->loop, c->fd);
	else
		ev_add(s->loop, c->fd, mask, px_io_cb, &c->wr);
	c->mask = mask;
}

/* Drive a connection as far as the buffered bytes allow: its protocol
 * (h1req.c's request sequence, or h2conn.c's session once the client sent
 * the HTTP/2 preface), then flush, close, or re-arm its events. */
static void px_conn_progress(struct px_conn *c)
{
	struct px_server *s = c->srv;

	if (!c->h2 && !c->h1_seen && !c->st) {
		int p = px_h2_preface(&c->in);

		if (p > 0)
			px_h2_start(c);	/* from now on an HTTP/2 connection */
		else if (p == 0 && !c->rd_eof)
			goto io;	/* a preface so far: wait for the rest */
	}
	if (c->h2)
		px_h2_run(c);
	else
		px_h1_run(c);
io:
	if (c->out.data)	/* the bytes go out before the loop next waits */
		px_wq_add(s, &c->wr);
	if (c->closing && !c->out.data) {
		px_conn_close(c);
		return;
	}
	if (!c->st) {
		/* idle: hand the buffers back */
		px_buf_put(s, &c->in);
		px_buf_put(s, &c->out);
	}
	px_conn_update(c);
}

void px_conn_close(struct px_conn *c)
{
	struct px_server *s = c->srv;

	if (c->st)
		px_stream_free(c->st);
	if (c->h2)
		px_h2_free(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	ev_del(s->loop, c->fd);
	close(c->fd);
	px_wq_del(s, &c->wr);
	px_buf_drop(s, &c->in);
	px_buf_drop(s, &c->out);
	s->active--;
	free(c);
}

uint64_t px_conn_close_idle(struct px_server *s, uint64_t min_idle)
{
	uint64_t now = ev_now_ns(), n = 0;
	struct px_conn *c, *cn;

	for (c = s->conns; c; c = cn) {
		cn = c->next;
		/* a stream that only drops the rest of an answered body
		 * (invariant 23) does not keep a silent client */
		if ((!c->st || c->st->discard) && !c->n_sub && !c->out.data &&
		    now - c->last_active >= min_idle) {
			n++;
			px_conn_close(c);
		} else if (c->h2 && !c->n_sub && now - c->last_active >= s->sweep_ns) {
			/* idle for a sweep period: its idle pages go back
			 * (h2mem.c K3; not between two requests of a busy one) */
			px_h2_idle(c);
		}
	}
	return n;
}

void px_conn_drain(struct px_server *s)
{
	struct px_conn *c, *cn;

	for (c = s->conns; c; c = cn) {
		cn = c->next;
		if (c->h2) {
			px_h2_goaway(c);
			px_conn_progress(c);	/* sends it (may close c) */
		}
	}
}

/* ---- listener -------------------------------------------------------------- */

/* A native IPv6 client accepted on the IPv6 listener: its original
 * destination from zh_l7cap_orig6 (an IPv4 ClusterIP, or the last 32 bits
 * of an IPv6 single-stack Service's IPv6 ClusterIP: ZH_L7CAP_DST_V6LOW);
 * the client known by its pod's IPv4 (identity) and its own IPv6 address
 * (policy towards IPv6 endpoints, logs when it has no IPv4). */
static int px_capture_lookup6(struct px_server *s, struct px_conn *c,
			      const struct sockaddr_in6 *sin6)
{
	struct zh_l7cap_client6 k = { .port = sin6->sin6_port };
	struct zh_l7cap_dst v;

	if (s->cap6_fd < 0)
		return -ENOENT;
	memcpy(k.ip, &sin6->sin6_addr, 16);
	if (bpf_map_lookup_elem(s->cap6_fd, &k, &v))
		return -errno;
	bpf_map_delete_elem(s->cap6_fd, &k);
	c->dst_ip = v.ip;
	c->dst_port = ntohs(v.port);
	c->dst_v6low = v.flags & ZH_L7CAP_DST_V6LOW;
	c->dst_hbone = v.flags & ZH_L7CAP_DST_HBONE;	/* refused: IPv6 (hbone_px.c) */
	memcpy(c->peer_ip6, &sin6->sin6_addr, 16);
	c->peer_ip = px_table_ip4_of6(s->tbl, (const uint8_t *)&sin6->sin6_addr);
	c->peer_port = ntohs(sin6->sin6_port);
	return 0;
}

static int px_capture_lookup(struct px_server *s, struct px_conn *c)
{
	struct zh_l7cap_client k = { .ip = c->peer_ip, .port = htons(c->peer_port) };
	struct zh_l7cap_dst v;

	if (s->cap_fd < 0)
		return -ENOENT;
	if (bpf_map_lookup_elem(s->cap_fd, &k, &v))
		return -errno;
	bpf_map_delete_elem(s->cap_fd, &k);
	c->dst_ip = v.ip;
	c->dst_port = ntohs(v.port);
	/* an IPv6 socket sent to the IPv4 listener v4-mapped (no IPv6 listener) */
	c->dst_v6low = v.flags & ZH_L7CAP_DST_V6LOW;
	c->dst_hbone = v.flags & ZH_L7CAP_DST_HBONE;
	return 0;
}

void px_accept_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct px_server *s = arg;
	struct net_addr peer;
	int cfd, i;

	(void)loop;
	(void)events;
	for (i = 0; i < PX_ACCEPT_BATCH; i++) {
		struct px_conn *c;

		cfd = net_accept(fd, &peer);
		if (cfd < 0)
			break;
		net_set_nodelay(cfd);
		c = zh_calloc(1, sizeof(*c));
		c->srv = s;
		c->ops = &px_h1_conn_ops;
		c->fd = cfd;
		c->mask = -1;
		px_wr_init(&c->wr, PX_WR_CONN, &px_conn_io);
		if (peer.ss.ss_family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&peer.ss;

			c->peer_ip = sin->sin_addr.s_addr;
			c->peer_port = ntohs(sin->sin_port);
		}
		if (!s->explicit_mode &&
		    (peer.ss.ss_family == AF_INET6 ?
		     px_capture_lookup6(s, c, (const struct sockaddr_in6 *)&peer.ss) :
		     px_capture_lookup(s, c))) {
			zh_warn("proxy: no original destination for a client connection; closed");
			close(cfd);
			free(c);
			continue;
		}
		if (c->dst_hbone) {	/* not an L7 client: a tunnel's (docs/mtls.md) */
			px_hbone_out(s, cfd, c);
			free(c);
			continue;
		}
		s->active++;
		s->accepted++;
		c->last_active = ev_now_ns();
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		px_conn_update(c);
	}
}
