/* fuzz_h2_upstream.c — libFuzzer target: the HTTP/2 upstream input path of
 * the node proxy (src/proxy/h2up.c with libnghttp2): whatever a backend
 * sends after the proxy's own client preface and SETTINGS, fed to one
 * multiplexed connection in two pieces. The stream layer above is a
 * stand-in, as in fuzz_h2_client.c: it opens tries with typical requests
 * (GET; POST with a length; a chunked gRPC call; a 100 KB upload that
 * outgrows the 64 KiB windows, topped up as the stream layer's pump would),
 * reads whatever each try's u->in receives, releases a try at its end or
 * reset (and, if the first input byte says so, at its first report: the
 * RST_STREAM(CANCEL) path), and between the pieces opens more tries, so a
 * small SETTINGS_MAX_CONCURRENT_STREAMS opens a second connection, which
 * gets the second piece. The event loop, the send queue and the socket
 * are stood in too: the harness puts the backend's bytes in the socket's
 * buffer and reports whole sends. Besides no crash and no sanitizer
 * report, LeakSanitizer checks that every try and connection is freed.
 *
 * h2up.c is included, not linked: the harness walks the endpoint's
 * connection list and drives each connection's px_io_ops itself.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude \
 *     tests/fuzz/fuzz_h2_upstream.c src/lib/buf.c src/lib/h1.c src/lib/log.c \
 *     -lnghttp2 -o fuzz_h2_upstream
 *   ./fuzz_h2_upstream -max_total_time=20 tests/fuzz/corpus/h2_upstream
 * Input: byte 0 = control (bits 0-1: tries opened first, minus one; bits
 * 2-3: tries opened between the pieces; bit 4: a second connection is
 * allowed; bit 5: the stand-in releases each try at its first report;
 * bit 6: the harness does not send between the pieces; bit 7: the backend
 * closes at the end, failing its connection), byte 1 = where to
 * cut, the rest = the backend's bytes (seeds: tests/fuzz/h2_upstream_seeds.py).
 * (`make fuzz` adds what this line names:)
 * fuzz-link: src/lib/buf.c -lnghttp2
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/proxy/h2up.c"

/* ---- stand-ins for the loop, the send queue and the network ---------------- */

#define FZ_ITER 7	/* the loop iteration: sockets are marked read in it */

uint64_t ev_now_ns(void)
{
	return 1;
}

uint64_t ev_turn_ns(void)
{
	return ev_now_ns();
}

uint64_t ev_iteration(const struct ev_loop *loop)
{
	(void)loop;
	return FZ_ITER;
}

int ev_add(struct ev_loop *loop, int fd, int mask, ev_file_cb *cb, void *arg)
{
	(void)loop, (void)fd, (void)mask, (void)cb, (void)arg;
	return 0;
}

void ev_del(struct ev_loop *loop, int fd)
{
	(void)loop, (void)fd;
}

uint64_t ev_timer_add(struct ev_loop *loop, uint64_t deadline_ns, ev_timer_cb *cb, void *arg)
{
	(void)loop, (void)deadline_ns, (void)cb, (void)arg;
	return 1;
}

void ev_timer_del(struct ev_loop *loop, uint64_t id)
{
	(void)loop, (void)id;
}

int net_connect_result(int fd)
{
	(void)fd;
	return 0;
}

void px_io_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	(void)loop, (void)fd, (void)events, (void)arg;
}

void px_wq_add(struct px_server *s, struct px_wr *w)
{
	(void)s, (void)w;	/* the harness sends (fz_send) */
}

void px_wq_del(struct px_server *s, struct px_wr *w)
{
	(void)s, (void)w;
}

void px_pool_wake(struct px_server *s, int host)
{
	(void)s;
	(void)host;
}

int px_netpol_connect(struct px_server *s, struct px_ip ip, uint16_t port)
{
	(void)s, (void)ip, (void)port;
	return open("/dev/null", O_RDONLY);	/* something px_h2c_free may close */
}

bool px_table_has_ep(const struct px_table *t, struct px_ip ip, uint16_t port)
{
	(void)t, (void)ip, (void)port;
	return true;
}

/* ---- the stream layer's stand-in ---------------------------------------- */

#define FZ_MAX_TRIES 8
#define FZ_BIG 100000	/* the upload that outgrows the windows */

struct fz_try {
	struct px_stream st;
	struct px_conn c;	/* st.c: trailers of an HTTP/2 client's view */
	uint64_t body_left;	/* of the big upload, not yet in u->out */
};

static struct fz_try fz_tries[FZ_MAX_TRIES];
static int fz_n;
static bool fz_cancel;	/* release each try at its first report */
static volatile size_t fz_sink;	/* keeps the reads of the fields */

static void fz_release(struct px_stream *st)
{
	struct px_up *u = st->up;

	if (!u)
		return;
	st->up = NULL;
	u->st = NULL;
	px_h2up_release(u);	/* what upstream.c's px_up_release does for u->h2 */
}

static void fz_connected(struct px_stream *st)
{
	(void)st;
}

static void fz_progress(struct px_stream *st)
{
	struct px_up *u = st->up;

	if (!u)
		return;
	if (fz_cancel) {
		fz_release(st);
		return;
	}
	/* the client took what arrived: the head's fields (h2up.c invariant
	 * 7), the raw body */
	{
		struct h1_response r;
		struct h1_header h[PX_MAX_HDRS];
		size_t n = PX_MAX_HDRS;

		if (!px_h2up_resp_head(u, &r, h, &n))
			for (size_t i = 0; i < n; i++)	/* (ASan: every field readable) */
				fz_sink += h[i].name_len + h[i].value_len +
					   (unsigned char)h[i].name[0] +
					   (h[i].value_len ? (unsigned char)h[i].value[0] : 0);
	}
	u->in.data = u->in.head = 0;
	if (u->eof || u->h2->resp_done) {
		fz_release(st);
		return;
	}
	px_h2up_update(u);	/* (drained: acknowledge it) */
}

static void fz_slot(struct px_stream *st, struct px_up *u, int host, int rc)
{
	(void)st, (void)u, (void)host, (void)rc;	/* h2c tries never wait in a pool */
}

static const struct px_up_ops fz_ops = {
	.connected = fz_connected,
	.connect_failed = fz_release,
	.reset = fz_release,
	.progress = fz_progress,
	.slot = fz_slot,
};

/* Top up the big upload to PX_HIGH in u->out, as px_pump_req would. */
static void fz_pump(void)
{
	for (int i = 0; i < fz_n; i++) {
		struct fz_try *t = &fz_tries[i];
		struct px_up *u = t->st.up;
		char piece[4096];

		if (!u || !t->body_left || u->out.data >= PX_HIGH)
			continue;
		memset(piece, 'b', sizeof(piece));
		while (t->body_left && u->out.data < PX_HIGH) {
			size_t k = t->body_left < sizeof(piece) ? t->body_left : sizeof(piece);

			buf_append(&u->out, piece, k);
			t->body_left -= k;
		}
		px_h2up_update(u);
	}
}

static void fz_open(struct px_server *s, uint32_t max_conns)
{
	static const char *const req[] = {
		"GET /a HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
		("POST /pkg.Svc/M HTTP/1.1\r\nHost: h\r\nContent-Type: application/grpc\r\n"
		 "grpc-timeout: 1S\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\n\r\n"),
		"PUT /big HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n",
	};
	struct fz_try *t = &fz_tries[fz_n];
	struct px_up *u;
	int k = fz_n % 4;

	if (fz_n == FZ_MAX_TRIES || px_h2up_get(s, 0, max_conns, &u))
		return;
	fz_n++;
	memset(t, 0, sizeof(*t));
	t->c.srv = s;
	t->c.one_req = k != 1;	/* an HTTP/2 client's view: takes trailers */
	t->st.c = &t->c;
	t->st.grpc_status = -1;
	t->st.up = u;
	u->st = &t->st;
	px_buf_get(s, &u->out);
	buf_append(&u->out, req[k], strlen(req[k]));
	t->body_left = k == 3 ? FZ_BIG : 0;
	px_h2up_update(u);
}

/* ---- the harness: connect, sends, the backend's bytes ------------------------ */

/* Every connection still connecting completes (its EV_WRITE). */
static void fz_connect(struct px_server *s)
{
	struct px_h2c *h, *next;

	for (h = s->hosts[0].h2c; h; h = next) {
		next = h->next;
		if (h->sock.connecting)
			h->sock.wr.io->event(&h->sock.wr, EV_WRITE);	/* (may free h) */
	}
}

/* The backend reads everything each connection sent (one whole send). */
static void fz_send(struct px_server *s)
{
	struct px_h2c *h, *next;

	for (h = s->hosts[0].h2c; h; h = next) {
		next = h->next;
		if (!h->sock.out.data || h->sock.connecting)
			continue;
		h->sock.wr.res = (ssize_t)h->sock.out.data;
		h->sock.wr.io->sent(&h->sock.wr);	/* (may free h) */
	}
}

/* What batch.c does per loop turn, a few turns. */
static void fz_turns(struct px_server *s, bool send)
{
	for (int i = 0; i < 4; i++) {
		fz_pump();
		px_h2up_run_kicked(s);
		if (send)
			fz_send(s);
	}
}

/* The backend's bytes arrive on h (read by the batch: no recv of its own). */
static void fz_feed(struct px_server *s, struct px_h2c *h, const uint8_t *p, size_t n)
{
	if (!h || h->sock.connecting || !n)
		return;
	px_buf_get(s, &h->sock.in);
	buf_append(&h->sock.in, p, n);
	h->sock.rd_iter = FZ_ITER;
	h->sock.wr.io->event(&h->sock.wr, EV_READ);	/* (may free h) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct px_server s;
	static struct px_host host;
	uint8_t ctl;
	size_t cut;
	struct px_h2c *h;
	int i;

	if (size < 2)
		return 0;
	if (!s.lim.max_head) {
		h1_limits_default(&s.lim);
		zh_log_init("fuzz_h2_upstream", ZH_ERR);
	}
	ctl = data[0];
	cut = data[1] % (size - 1);
	data += 2;
	size -= 2;
	memset(&host, 0, sizeof(host));
	host.ip = px_ip4(0x0100007f);
	host.port = 8080;
	s.hosts = &host;
	s.n_hosts = 1;
	s.up_ops = &fz_ops;
	fz_n = 0;
	fz_cancel = ctl & 0x20;
	for (i = 0; i <= (ctl & 3); i++)
		fz_open(&s, 1);
	px_h2up_run_kicked(&s);
	fz_connect(&s);
	fz_turns(&s, true);	/* the preface, SETTINGS and requests: read */
	fz_feed(&s, s.hosts[0].h2c, data, cut);
	fz_turns(&s, !(ctl & 0x40));
	for (i = 0; i < ((ctl >> 2) & 3); i++)	/* the SETTINGS may have lowered the limit */
		fz_open(&s, 1 + ((ctl >> 4) & 1));
	px_h2up_run_kicked(&s);
	fz_connect(&s);
	fz_turns(&s, true);
	for (h = s.hosts[0].h2c; h && h->next; h = h->next)
		;	/* the newest connection gets the rest */
	fz_feed(&s, h, data + cut, size - cut);
	fz_turns(&s, true);
	if (ctl & 0x80) {	/* the backend closes: every try on it ends */
		for (h = s.hosts[0].h2c; h && h->next; h = h->next)
			;
		if (h && !h->sock.connecting) {
			h->sock.eof = true;
			h->sock.rd_iter = FZ_ITER;
			h->sock.wr.io->event(&h->sock.wr, EV_READ);	/* (frees h) */
		}
		fz_turns(&s, true);
	}
	/* the streams end: every try released, then the connections closed */
	for (i = 0; i < fz_n; i++) {
		fz_release(&fz_tries[i].st);
		px_buf_drop(&s, &fz_tries[i].c.trailers);	/* (h2conn.c's, at the view's end) */
	}
	px_h2up_run_kicked(&s);
	px_h2up_close_all(&s);
	free(s.h2q);
	s.h2q = NULL;
	s.n_h2q = s.cap_h2q = 0;
	while (s.n_bufs)
		free(s.bufs[--s.n_bufs]);
	px_obj_pools_free(&s);
	return 0;
}
