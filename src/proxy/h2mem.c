/* h2mem.c — libnghttp2's memory for one HTTP/2 connection
 * (px_h2mem, h2conn.c): an nghttp2_mem allocator that lets an idle
 * connection give pages back (issue 18: an idle HTTP/2 connection should
 * cost at most 8 KiB more than an HTTP/1.1 one).
 *
 * Design note. A server session of libnghttp2 (1.52 here) allocates about
 * 26 KB at once and keeps it for the connection's life: the session
 * struct (~2.9 KB), two HPACK ring buffers (1 KB each), the stream map's
 * table (4 KB) and the outbound frame buffer (16 KiB + 10: one whole
 * frame with its header). The frame buffer holds bytes only while a frame
 * is being sent, yet every page a big answer once touched stays resident;
 * the map's table is all zeros while no stream is open. So blocks of at
 * least PX_H2MEM_BIG bytes get pages of their own (private anonymous
 * mmap), and px_h2mem_trim hands pages back to the kernel
 * (MADV_DONTNEED: the next touch maps a zeroed page) when an idle
 * connection cannot tell the difference. Everything smaller is malloc's.
 *
 * Invariants:
 *  K1. A big block is a mapping of whole pages recorded in m->b (at most
 *      PX_H2MEM_SLOTS; beyond that, or if mmap fails, malloc serves it);
 *      free and realloc find it there, anything not recorded is malloc's.
 *  K2. Trimming never changes a byte libnghttp2 will read:
 *      (a) a page whose bytes are all zero is dropped (it reads back as
 *          zeros), whatever the block is;
 *      (b) the outbound frame buffer (the first block of exactly
 *          PX_H2MEM_FRAMEBUF bytes, NGHTTP2_FRAMEBUF_CHUNKLEN) is dropped
 *          whole only when the caller says the session's output is
 *          drained (out_idle: nghttp2_session_mem_send returned 0, nothing
 *          queued, no stream open): nghttp2 has then reset the buffer
 *          (nghttp2_bufs_reset after the last frame) and writes the next
 *          frame before reading any of it. Another libnghttp2 whose
 *          buffer has another size is simply not trimmed by (b).
 *  K3. Trimming is the caller's choice of moment (h2conn.c: the idle
 *      sweep, at most once per idle period), never inside a libnghttp2
 *      call: a dropped page costs a page fault when touched again.
 *  K4. A small block (below PX_H2MEM_BIG) has a header of PX_H2MEM_HDR
 *      bytes before it naming its size class (px_h2mem_cls, up to 1 KiB;
 *      PX_H2MEM_ODD and its size for a larger one, malloc's at its size:
 *      those are a connection's, not a request's). A freed one
 *      goes onto this thread's list of its class while that list holds
 *      less than PX_H2MEM_CACHE bytes, else back to malloc; an allocation
 *      takes from the list first. libnghttp2 allocates and frees about 16
 *      small blocks per request (streams, outbound items, header buffers),
 *      and at 64 streams in flight they come in bursts that outrun
 *      glibc's per-size cache of 7 (its slower paths were 8 % of the
 *      proxy's instructions on the HTTP/2 -> HTTP/2 path). The lists are
 *      per thread, so a block freed by another thread's session (never
 *      done: a session lives on one loop) would still be correct. Under
 *      AddressSanitizer (fuzz targets, unit tests) a listed block's bytes
 *      are poisoned, so a use after free is still reported. A big
 *      block is page aligned and recorded (K1), a small one is never
 *      recorded: free tells them apart by the record, looked up only for
 *      a page-aligned pointer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sanitizer/asan_interface.h>

#include <nghttp2/nghttp2.h>

#include "px_int.h"

static size_t px_h2mem_page(void)
{
	static size_t pg;

	if (!pg)
		pg = (size_t)sysconf(_SC_PAGESIZE);
	return pg;
}

static int px_h2mem_find(const struct px_h2mem *m, const void *p)
{
	for (int i = 0; i < m->n; i++)
		if (m->b[i].p == p)
			return i;
	return -1;
}

/* p's slot if it is a big block, else -1. Big blocks are page aligned
 * (K1): only a page-aligned pointer is looked up in the record. */
static int px_h2mem_big(const struct px_h2mem *m, const void *p)
{
	return ((uintptr_t)p & (px_h2mem_page() - 1)) ? -1 : px_h2mem_find(m, p);
}

/* A big block of n bytes (K1), or NULL: the caller uses malloc. */
static void *px_h2mem_map(struct px_h2mem *m, size_t n)
{
	size_t pg = px_h2mem_page(), len = (n + pg - 1) / pg * pg;
	void *p;

	if (m->n == PX_H2MEM_SLOTS)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	m->b[m->n].p = p;
	m->b[m->n].len = len;
	m->b[m->n].fb = n == PX_H2MEM_FRAMEBUF && !m->fb_seen;
	m->fb_seen |= m->b[m->n].fb;
	m->n++;
	return p;
}

/* K4: small blocks, their header and this thread's lists. */
#define PX_H2MEM_HDR	16	/* keeps malloc's 16-byte alignment */
#define PX_H2MEM_NCLS	5
#define PX_H2MEM_ODD	PX_H2MEM_NCLS	/* no class: malloc's, size in the header */
#define PX_H2MEM_CACHE	32768	/* bytes kept per class and thread */
/* Up to 1 KiB: what a request allocates and frees (streams, outbound
 * items, header buffers). A larger block is a connection's (the session,
 * the HPACK tables) and lives as long as it: malloc's, at its size, since
 * rounding it up to a class cost an idle connection 3.9 KB more. */
static const size_t px_h2mem_cls[PX_H2MEM_NCLS] = { 64, 128, 256, 512, 1024 };

struct px_h2mem_hdr {
	union {
		struct px_h2mem_hdr *next;	/* on a list */
		size_t size;			/* PX_H2MEM_ODD: usable bytes */
	};
	uint32_t cls;
	uint32_t pad;
};
_Static_assert(sizeof(struct px_h2mem_hdr) == PX_H2MEM_HDR, "header size");

static _Thread_local struct {
	struct px_h2mem_hdr *head;
	size_t bytes;
} px_h2mem_free_list[PX_H2MEM_NCLS];

static void *px_h2mem_small(size_t n)
{
	struct px_h2mem_hdr *h;
	uint32_t c = 0;

	while (c < PX_H2MEM_NCLS && px_h2mem_cls[c] - PX_H2MEM_HDR < n)
		c++;
	if (c < PX_H2MEM_NCLS && (h = px_h2mem_free_list[c].head)) {
		ASAN_UNPOISON_MEMORY_REGION(h + 1, px_h2mem_cls[c] - PX_H2MEM_HDR);
		px_h2mem_free_list[c].head = h->next;
		px_h2mem_free_list[c].bytes -= px_h2mem_cls[c];
	} else {
		h = malloc(c < PX_H2MEM_NCLS ? px_h2mem_cls[c] : PX_H2MEM_HDR + n);
		if (!h)
			return NULL;
		if (c == PX_H2MEM_ODD)
			h->size = n;
	}
	h->cls = c;
	return h + 1;
}

static size_t px_h2mem_small_size(const void *p)
{
	const struct px_h2mem_hdr *h = (const struct px_h2mem_hdr *)p - 1;

	return h->cls < PX_H2MEM_NCLS ? px_h2mem_cls[h->cls] - PX_H2MEM_HDR : h->size;
}

static void px_h2mem_small_free(void *p)
{
	struct px_h2mem_hdr *h = (struct px_h2mem_hdr *)p - 1;
	uint32_t c = h->cls;

	if (c < PX_H2MEM_NCLS && px_h2mem_free_list[c].bytes + px_h2mem_cls[c] <= PX_H2MEM_CACHE) {
		h->next = px_h2mem_free_list[c].head;
		px_h2mem_free_list[c].head = h;
		px_h2mem_free_list[c].bytes += px_h2mem_cls[c];
		/* K4: a use after free is still caught; the header stays
		 * readable, so the leak checker follows the list */
		ASAN_POISON_MEMORY_REGION(h + 1, px_h2mem_cls[c] - PX_H2MEM_HDR);
		return;
	}
	free(h);
}

static void *px_h2mem_malloc(size_t n, void *ud)
{
	struct px_h2mem *m = ud;
	void *p = n >= PX_H2MEM_BIG ? px_h2mem_map(m, n) : NULL;

	return p ? p : px_h2mem_small(n);
}

static void px_h2mem_free(void *p, void *ud)
{
	struct px_h2mem *m = ud;
	int i;

	if (!p)
		return;
	i = px_h2mem_big(m, p);
	if (i < 0) {
		px_h2mem_small_free(p);
		return;
	}
	munmap(p, m->b[i].len);
	m->b[i] = m->b[--m->n];
}

static void *px_h2mem_calloc(size_t k, size_t n, void *ud)
{
	struct px_h2mem *m = ud;
	void *p;

	if (n && k > SIZE_MAX / n)
		return NULL;
	if (k * n >= PX_H2MEM_BIG && (p = px_h2mem_map(m, k * n)))
		return p;	/* (fresh anonymous pages are zeros) */
	p = px_h2mem_small(k * n);
	if (p)
		memset(p, 0, k * n);
	return p;
}

static void *px_h2mem_realloc(void *p, size_t n, void *ud)
{
	struct px_h2mem *m = ud;
	int i = p ? px_h2mem_big(m, p) : -1;
	size_t old;
	void *q;

	if (!p)	/* (how nghttp2_buf_init2 allocates the frame buffer) */
		return px_h2mem_malloc(n, ud);
	old = i < 0 ? px_h2mem_small_size(p) : m->b[i].len;
	if (i < 0 && n <= old)
		return p;	/* (its class has the room) */
	q = px_h2mem_malloc(n, ud);
	if (!q)
		return NULL;
	memcpy(q, p, n < old ? n : old);
	px_h2mem_free(p, ud);	/* (finds p again: the slots may have moved) */
	return q;
}

void px_h2mem_init(struct px_h2mem *m, void *nmem)
{
	nghttp2_mem *mem = nmem;

	memset(m, 0, sizeof(*m));
	mem->mem_user_data = m;
	mem->malloc = px_h2mem_malloc;
	mem->free = px_h2mem_free;
	mem->calloc = px_h2mem_calloc;
	mem->realloc = px_h2mem_realloc;
}

static bool px_h2mem_zero(const unsigned char *p, size_t n)
{
	static const unsigned char z[64];

	for (size_t i = 0; i < n; i += sizeof(z))
		if (memcmp(p + i, z, sizeof(z)))
			return false;
	return true;
}

size_t px_h2mem_trim(struct px_h2mem *m, bool out_idle)
{
	size_t pg = px_h2mem_page(), dropped = 0;
	unsigned char vec[PX_H2MEM_MAXPAGES];

	for (int i = 0; i < m->n; i++) {
		unsigned char *p = m->b[i].p;
		size_t np = m->b[i].len / pg;
		bool fb = m->b[i].fb && out_idle;	/* K2 (b) */

		/* only resident pages (reading one never touched would map
		 * the zero page for nothing); one call per block */
		if (np > PX_H2MEM_MAXPAGES || mincore(p, m->b[i].len, vec))
			continue;
		for (size_t k = 0; k < np; k++) {
			if (!(vec[k] & 1))
				continue;
			if (!fb && !px_h2mem_zero(p + k * pg, pg))	/* K2 (a) */
				continue;
			if (!madvise(p + k * pg, pg, MADV_DONTNEED))
				dropped += pg;
		}
	}
	return dropped;
}
