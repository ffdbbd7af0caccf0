/* test_h2mem.c — src/proxy/h2mem.c: big blocks get pages of their own
 * (K1), trimming drops only all-zero pages and, when the output is idle,
 * the outbound frame buffer (K2), measured with mincore; and a real
 * libnghttp2 server session runs on the allocator: one request, then the
 * idle session gives its frame buffer and its empty stream map back and
 * serves a second request as well. */
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <nghttp2/nghttp2.h>
#include <sanitizer/asan_interface.h>

#include "tap.h"
#include "../../../src/proxy/px_int.h"

static size_t resident(const void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = 0;
	unsigned char vec[64];

	if (mincore((void *)p, len, vec))
		return (size_t)-1;
	for (size_t i = 0; i < (len + pg - 1) / pg; i++)
		n += vec[i] & 1;
	return n;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	nghttp2_nv nv[] = { { (uint8_t *)":status", (uint8_t *)"200", 7, 3, 0 },
			    { (uint8_t *)"server", (uint8_t *)"t", 6, 1, 0 } };

	(void)ud;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
		nghttp2_submit_response(s, f->hd.stream_id, nv, 2, NULL);
	return 0;
}

static int n_closed;

static int on_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
	(void)s, (void)id, (void)err, (void)ud;
	n_closed++;
	return 0;
}

/* Bytes both ways until neither session has anything to send. */
static void pump(nghttp2_session *cli, nghttp2_session *srv)
{
	for (int r = 0; r < 8; r++) {
		const uint8_t *p;
		ssize_t n;

		while ((n = nghttp2_session_mem_send(cli, &p)) > 0)
			nghttp2_session_mem_recv(srv, p, (size_t)n);
		while ((n = nghttp2_session_mem_send(srv, &p)) > 0)
			nghttp2_session_mem_recv(cli, p, (size_t)n);
	}
}

static void request(nghttp2_session *cli)
{
	nghttp2_nv rq[] = { { (uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0 },
			    { (uint8_t *)":path", (uint8_t *)"/", 5, 1, 0 },
			    { (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
			    { (uint8_t *)":authority", (uint8_t *)"a", 10, 1, 0 } };

	nghttp2_submit_request(cli, NULL, rq, 4, NULL, NULL);
}

int main(void)
{
	struct px_h2mem m;
	nghttp2_mem mem;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *a, *b, *fb, *small;

	/* ---- the allocator alone ---- */
	px_h2mem_init(&m, &mem);
	small = mem.malloc(100, mem.mem_user_data);
	is_int(m.n, 0, "a small block is malloc's (no slot)");
	a = mem.calloc(1, 2 * pg, mem.mem_user_data);
	ok(a && ((uintptr_t)a % pg) == 0 && m.n == 1, "a big block: its own pages (K1)");
	fb = mem.realloc(NULL, PX_H2MEM_FRAMEBUF, mem.mem_user_data);
	ok(fb && m.n == 2 && m.b[1].fb, "realloc(NULL, frame buffer size): mapped, marked (K2 b)");
	b = mem.malloc(PX_H2MEM_FRAMEBUF, mem.mem_user_data);
	ok(b && m.n == 3 && !m.b[2].fb, "... only the first block of that size is the frame buffer");
	memset(a + pg, 7, 10);	/* page 0 zero (touched), page 1 not */
	a[0] = 0;
	memset(fb, 9, PX_H2MEM_FRAMEBUF);
	memset(b, 5, pg);
	is_int(resident(a, 2 * pg) + resident(fb, 5 * pg), 2 + 5, "7 pages resident before");
	is_int(px_h2mem_trim(&m, false), pg, "output busy: only the all-zero page is dropped");
	is_int(resident(a, 2 * pg), 1, "... the page with data stays");
	is_int(a[pg], 7, "... and keeps its bytes");
	is_int(resident(fb, 5 * pg), 5, "... the frame buffer stays while output is busy");
	is_int(px_h2mem_trim(&m, true), 5 * pg, "output idle: the frame buffer's 5 pages go too");
	is_int(resident(fb, 5 * pg) + resident(b, pg), 1, "... the other block of that size stays");
	a = mem.realloc(a, 3 * pg, mem.mem_user_data);
	ok(a && a[pg] == 7 && m.n == 3, "realloc of a big block moves it with its bytes");
	mem.free(a, mem.mem_user_data);
	mem.free(fb, mem.mem_user_data);
	mem.free(b, mem.mem_user_data);
	mem.free(small, mem.mem_user_data);
	is_int(m.n, 0, "all freed (unmapped)");

	/* ---- small blocks: size classes and this thread's lists (K4) ---- */
	{
		void *p[60], *was[60], *q, *r;
		char *g;
		int same = 0, n_bad = 0;

		px_h2mem_init(&m, &mem);
		q = mem.malloc(40, mem.mem_user_data);
		ok(q && ((uintptr_t)q % 16) == 0, "a small block keeps 16-byte alignment");
		mem.free(q, mem.mem_user_data);
#ifdef __SANITIZE_ADDRESS__
		ok(__asan_address_is_poisoned(q), "a listed block is poisoned (a use after free is caught)");
#endif
		r = mem.malloc(48, mem.mem_user_data);
		ok(r == q, "a freed block is reused for a request of its class");
		memset(r, 0x5a, 48);
		mem.free(r, mem.mem_user_data);
		g = mem.calloc(6, 8, mem.mem_user_data);
		for (int i = 0; i < 48; i++)
			n_bad += g[i] != 0;
		ok(g == r && !n_bad, "calloc of a reused block zeroes it");
		g = mem.realloc(g, 40, mem.mem_user_data);
		ok(g == r, "realloc within its class keeps the block");
		memcpy(g, "0123456789", 10);
		g = mem.realloc(g, 1000, mem.mem_user_data);
		ok(g && !memcmp(g, "0123456789", 10), "realloc to a larger class moves the bytes");
		mem.free(g, mem.mem_user_data);
		g = mem.malloc(PX_H2MEM_BIG - 8, mem.mem_user_data);	/* above the last class (1 KiB) */
		ok(g && m.n == 0, "a block above the last class and below big: malloc's, no slot");
		memset(g, 1, PX_H2MEM_BIG - 8);
		g = mem.realloc(g, PX_H2MEM_BIG - 4, mem.mem_user_data);
		ok(g && g[PX_H2MEM_BIG - 9] == 1, "... it grows with its bytes");
		mem.free(g, mem.mem_user_data);
		/* the list of a class holds at most PX_H2MEM_CACHE bytes: of 60
		 * blocks of 1024 (1008 usable), 32 come back from it */
		for (int i = 0; i < 60; i++)
			p[i] = mem.malloc(1000, mem.mem_user_data);
		for (int i = 0; i < 60; i++)
			mem.free(was[i] = p[i], mem.mem_user_data);
		for (int i = 0; i < 32; i++) {	/* last in, first out */
			p[i] = mem.malloc(1000, mem.mem_user_data);
			same += p[i] == was[31 - i];
		}
		for (int i = 32; i < 60; i++)
			p[i] = mem.malloc(1000, mem.mem_user_data);
		ok(same == 32768 / 1024,
		   "a class's list is bounded: the 32 blocks it kept (32 KiB) come back first, last in first out (%d)",
		   same);
		for (int i = 0; i < 60; i++)
			mem.free(p[i], mem.mem_user_data);
		is_int(m.n, 0, "no small block took a slot");
	}

	/* ---- a libnghttp2 server session on it ---- */
	{
		nghttp2_session_callbacks *cb, *cc;
		nghttp2_option *opt;
		nghttp2_session *srv, *cli;
		size_t d;

		px_h2mem_init(&m, &mem);
		nghttp2_session_callbacks_new(&cb);
		nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
		nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
		nghttp2_option_new(&opt);
		nghttp2_option_set_no_closed_streams(opt, 1);	/* as h2conn.c */
		ok(!nghttp2_session_server_new3(&srv, cb, NULL, opt, &mem), "server session on px_h2mem");
		nghttp2_session_callbacks_new(&cc);
		nghttp2_session_client_new(&cli, cc, NULL);
		nghttp2_submit_settings(srv, NGHTTP2_FLAG_NONE, NULL, 0);
		nghttp2_submit_settings(cli, NGHTTP2_FLAG_NONE, NULL, 0);
		request(cli);
		pump(cli, srv);
		is_int(n_closed, 1, "one request answered and closed");
		ok(m.fb_seen, "libnghttp2's frame buffer is one of our big blocks (%d)", m.n);
		d = px_h2mem_trim(&m, !nghttp2_session_want_write(srv));
		ok(d >= 2 * pg, "idle: %zu bytes given back (frame buffer and empty stream map)", d);
		request(cli);
		pump(cli, srv);
		is_int(n_closed, 2, "... and a second request is served after the trim");
		nghttp2_session_del(cli);
		nghttp2_session_del(srv);
		is_int(m.n, 0, "session deleted: every big block unmapped");
		nghttp2_option_del(opt);
		nghttp2_session_callbacks_del(cb);
		nghttp2_session_callbacks_del(cc);
	}
	done_testing();
}
