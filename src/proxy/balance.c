/* balance.c — the proxy's per-endpoint state: passive outlier detection
 * and load balancing (invariants 13-16 of docs/proxy.md, "Design note"). */
#include <math.h>
#include <string.h>
#include <arpa/inet.h>

#include "zerohop/log.h"
#include "px_int.h"

/* ---- outlier detection (invariants 13-14) -------------------------------------- */

struct px_host *px_host_find(struct px_server *s, struct px_ip ip, uint16_t port, bool add)
{
	int i;

	int free_slot = -1;
	struct px_host *h;

	for (i = 0; i < s->n_hosts; i++) {
		if (px_ip_eq(s->hosts[i].ip, ip) && s->hosts[i].port == port)
			return &s->hosts[i];
		if (free_slot < 0 && !s->hosts[i].ip.family && !s->hosts[i].port)
			free_slot = i;
	}
	if (!add)
		return NULL;
	if (free_slot < 0) {
		s->hosts = zh_realloc(s->hosts, (s->n_hosts + 1) * sizeof(*s->hosts));
		free_slot = s->n_hosts++;
	}
	h = &s->hosts[free_slot];
	memset(h, 0, sizeof(*h));
	h->ip = ip;
	h->port = port;
	return h;
}

/* Route reload: forget endpoints that left (invariant 16: a record with a
 * try in flight stays until a later reload; a freed record is all zero and
 * is reused by px_host_find, so indices held by streams never move). */
void px_hosts_prune(struct px_server *s)
{
	int i, n = 0;

	for (i = 0; i < s->n_hosts; i++) {
		struct px_host *h = &s->hosts[i];

		if ((!h->ip.family && !h->port) || h->inflight || h->n_conns || h->n_pending ||
		    px_table_has_ep(s->tbl, h->ip, h->port))
			continue;
		if (h->until)
			s->n_ejected--;
		memset(h, 0, sizeof(*h));
		n++;
	}
	s->n_hosts_pruned += n;
}

bool px_host_out(struct px_server *s, struct px_host *h, uint64_t now)
{
	char ip[PX_IP_STRLEN];

	if (!h || !h->until)
		return false;
	if (now < h->until)
		return true;
	h->until = 0;	/* ejection over: back in service */
	s->n_ejected--;
	zh_info("proxy: outlier %s back in service", px_ip_fmt(h->ip, h->port, ip, sizeof(ip)));
	return false;
}

bool px_ep_out(struct px_server *s, struct px_ip ip, uint16_t port, uint64_t now)
{
	return s->n_ejected && px_host_out(s, px_host_find(s, ip, port, false), now);
}

/* Report one try's end for the endpoint it used. */
void px_outlier_note(struct px_stream *st, bool failed)
{
	struct px_server *s = st->c->srv;
	struct px_host *h = px_host_find(s, st->d.ip, st->d.port, true);
	uint64_t now = ev_turn_ns();
	const struct px_ep *eps;
	int i, n, out = 0;
	char ip[PX_IP_STRLEN];

	if (!failed) {
		h->consec = 0;
		return;
	}
	if (++h->consec < s->consec_max || px_host_out(s, h, now))
		return;
	n = px_route_eps(&st->d, &eps);
	for (i = 0; i < n; i++)
		out += px_ep_out(s, eps[i].ip, eps[i].port, now);
	if ((out + 1) * 2 > n)
		return;	/* never more than half of a backend's endpoints */
	h = px_host_find(s, st->d.ip, st->d.port, false);
	h->consec = 0;
	h->n_ejections++;
	h->until = now + s->eject_base_ns * h->n_ejections;
	s->n_ejected++;
	s->n_ejections++;
	zh_info("proxy: outlier %s of %s ejected for %llu ms (ejection %u)",
		px_ip_fmt(h->ip, h->port, ip, sizeof(ip)),
		st->d.backend_name ? st->d.backend_name : "-",
		(unsigned long long)(s->eject_base_ns * h->n_ejections / PX_MS), h->n_ejections);
}

static double px_host_cost(const struct px_host *h, uint64_t now)
{
	double e;

	if (!h)
		return 0;	/* never measured: try it */
	/* an endpoint not used for a while looks cheaper and cheaper, so a
	 * once-slow endpoint is probed again after some tens of seconds */
	e = h->ewma_ns * exp(-(double)(now - h->ewma_t) / PX_IDLE_TAU_NS);
	return (e + 1) * (h->inflight + 1);
}

/* End of a try on st->host: in-flight down, latency into the peak EWMA. */
void px_try_end(struct px_stream *st)
{
	struct px_server *s = st->c->srv;
	uint64_t now = ev_turn_ns();
	struct px_host *h;
	double lat, w;

	if (st->host < 0)
		return;
	h = &s->hosts[st->host];
	st->host = -1;
	h->inflight--;
	lat = (double)(now - st->try_t0);
	/* peak EWMA (Linkerd/Finagle): a slower sample counts at once, faster
	 * ones pull it down with a 100 ms time constant, so a noise spike on a
	 * fast endpoint is forgotten within a few hundred ms */
	if (lat > h->ewma_ns) {
		h->ewma_ns = lat;
	} else {
		w = exp(-(double)(now - h->ewma_t) / PX_EWMA_TAU_NS);
		h->ewma_ns = h->ewma_ns * w + lat * (1 - w);
	}
	h->ewma_t = now;
}

static uint64_t px_hash(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */

	while (n--)
		h = (h ^ *c++) * 1099511628211ULL;
	return h;
}

static uint64_t px_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

/* The ring-hash key of a request (before the head is consumed). A missing
 * header or cookie hashes as empty: all such requests share an endpoint. */
uint64_t px_hash_key(struct px_stream *st, const struct h1_header *h, size_t n)
{
	const struct px_lb_policy *p = st->d.lb;
	size_t i, nl = strlen(p->hash_name);

	if (p->hash_on == PX_HASH_SOURCE_IP)
		return px_hash(&st->c->peer_ip, sizeof(st->c->peer_ip));
	if (p->hash_on == PX_HASH_HEADER) {
		int k = h1_find_header(h, n, p->hash_name);

		return k >= 0 ? px_hash(h[k].value, h[k].value_len) : px_hash("", 0);
	}
	for (i = 0; i < n; i++) {
		const char *v = h[i].value, *e = v + h[i].value_len;

		if (!px_name_is(&h[i], "cookie"))
			continue;
		while (v < e) {
			const char *sc = memchr(v, ';', e - v), *te = sc ? sc : e;

			while (v < te && *v == ' ')
				v++;
			if ((size_t)(te - v) > nl && !memcmp(v, p->hash_name, nl) && v[nl] == '=')
				return px_hash(v + nl + 1, te - v - nl - 1);
			v = sc ? sc + 1 : e;
		}
	}
	return px_hash("", 0);
}

/* Pick an endpoint of the chosen backend by the rule's policy, among those
 * in service (and, on a retry, not the one that just failed, when there is
 * a choice). Invariants 14-15. */
void px_stream_pick(struct px_stream *st, bool retry)
{
	struct px_server *s = st->c->srv;
	uint64_t now = ev_turn_ns(), best = 0;
	const struct px_ep *eps;
	int cand[PX_PICK_MAX];
	int i, n, nc = 0, k = -1;

	n = px_route_eps(&st->d, &eps);
	if (n < 2)
		return;
	for (i = 0; i < n && nc < PX_PICK_MAX; i++)
		if (!px_ep_out(s, eps[i].ip, eps[i].port, now) &&
		    !(retry && px_ip_eq(eps[i].ip, st->d.ip) && eps[i].port == st->d.port))
			cand[nc++] = i;
	if (!nc)
		return;	/* keep the router's choice */
	switch (st->d.lb->kind) {
	case PX_LB_ROUND_ROBIN:
		k = cand[px_route_rr_next(&st->d) % nc];
		break;
	case PX_LB_RING_HASH:
		for (i = 0; i < nc; i++) {
			const struct px_ep *e = &eps[cand[i]];
			uint64_t sc = px_mix64(st->hash_key ^
					       px_mix64(px_ip_bits(e->ip) << 16 ^ e->port));

			if (k < 0 || sc > best) {
				best = sc;
				k = cand[i];
			}
		}
		break;
	case PX_LB_P2C_EWMA: {
		int a, b;

		if (nc == 1) {
			k = cand[0];
			break;
		}
		a = px_rand(s) % nc;
		b = px_rand(s) % (nc - 1);
		b += b >= a;
		a = cand[a];
		b = cand[b];
		k = px_host_cost(px_host_find(s, eps[a].ip, eps[a].port, false), now) <=
		    px_host_cost(px_host_find(s, eps[b].ip, eps[b].port, false), now) ? a : b;
		break;
	}
	}
	st->d.ip = eps[k].ip;
	st->d.port = eps[k].port;
}

