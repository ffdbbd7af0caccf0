/* arena.c — the model's memory: one bump arena per state, and a small
 * string-keyed open-addressing index (see md_int.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/log.h"
#include "md_int.h"

#define AR_BLOCK (64 * 1024)
#define AR_ALIGN 16

struct ar_blk {
	struct ar_blk *next;
	size_t used, cap;
	_Alignas(AR_ALIGN) char data[];
};

/* Freed standard blocks are kept (per thread, up to AR_POOL_MAX) and reused:
 * an agent re-loads the whole state on every change, and fresh memory costs
 * a page fault per 4 KiB, which was the largest single cost of a load. */
#define AR_POOL_MAX 1024	/* 64 MiB */
static _Thread_local struct ar_blk *ar_pool;
static _Thread_local int ar_pool_n;

static struct ar_blk *blk_get(size_t cap)
{
	struct ar_blk *b;

	if (cap == AR_BLOCK && ar_pool) {
		b = ar_pool;
		ar_pool = b->next;
		ar_pool_n--;
	} else {
		b = zh_malloc(sizeof(*b) + cap);
	}
	b->used = 0;
	b->cap = cap;
	return b;
}

static void blk_put(struct ar_blk *b)
{
	if (b->cap == AR_BLOCK && ar_pool_n < AR_POOL_MAX) {
		b->next = ar_pool;
		ar_pool = b;
		ar_pool_n++;
		return;
	}
	free(b);
}

/* Bump-allocate n bytes aligned to align (a power of two <= AR_ALIGN). */
static void *ar_raw(struct md_arena *a, size_t n, size_t align)
{
	struct ar_blk *b = a->head;
	void *p;

	if (b)
		b->used = (b->used + align - 1) & ~(align - 1);
	if (!b || b->cap < b->used || b->cap - b->used < n) {
		size_t blk = a->blk ? a->blk : AR_BLOCK;
		size_t cap = n > blk / 4 ? n : blk;

		/* always the new head, so ar_reset() can pop back to a mark */
		b = blk_get(cap);
		b->next = a->head;
		a->head = b;
	}
	p = b->data + b->used;
	b->used += n;
	return p;
}

void *ar_alloc(struct md_arena *a, size_t n)
{
	void *p = ar_raw(a, n, sizeof(void *));

	memset(p, 0, n);
	return p;
}

char *ar_strndup(struct md_arena *a, const char *s, size_t n)
{
	char *p = ar_raw(a, n + 1, 1);	/* strings need no alignment */

	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *ar_strdup(struct md_arena *a, const char *s)
{
	return ar_strndup(a, s, strlen(s));
}

char *ar_printf(struct md_arena *a, const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	p = ar_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

struct md_arena_mark ar_mark(const struct md_arena *a)
{
	struct md_arena_mark m = { a->head, a->head ? a->head->used : 0 };

	return m;
}

void ar_reset(struct md_arena *a, struct md_arena_mark m)
{
	while (a->head && a->head != m.head) {
		struct ar_blk *next = a->head->next;

		blk_put(a->head);
		a->head = next;
	}
	if (a->head)
		a->head->used = m.used;
}

void ar_splice(struct md_arena *dst, struct md_arena *src)
{
	struct ar_blk *last = src->head;

	if (!last)
		return;
	while (last->next)
		last = last->next;
	/* src's blocks go behind dst's current block: dst keeps allocating
	 * from its own head */
	if (dst->head) {
		last->next = dst->head->next;
		dst->head->next = src->head;
	} else {
		dst->head = src->head;
	}
	src->head = NULL;
}

void ar_free(struct md_arena *a)
{
	struct ar_blk *b = a->head, *next;

	for (; b; b = next) {
		next = b->next;
		blk_put(b);
	}
	a->head = NULL;
}

/* ---- index ---------------------------------------------------------------- */

uint64_t md_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static void idx_grow(struct md_idx *ix)
{
	size_t cap = ix->cap ? ix->cap * 2 : 64;
	struct md_idx_ent *v = zh_calloc(cap, sizeof(*v));

	for (size_t i = 0; i < ix->cap; i++) {
		struct md_idx_ent *e = &ix->v[i];
		size_t j;

		if (!e->key)
			continue;
		for (j = e->hash & (cap - 1); v[j].key; j = (j + 1) & (cap - 1))
			;
		v[j] = *e;
	}
	free(ix->v);
	ix->v = v;
	ix->cap = cap;
}

int md_idx_put(struct md_idx *ix, const char *key, int val)
{
	uint64_t h = md_hash(key, strlen(key));
	size_t j;

	if ((ix->n + 1) * 2 > ix->cap)
		idx_grow(ix);
	for (j = h & (ix->cap - 1); ix->v[j].key; j = (j + 1) & (ix->cap - 1))
		if (ix->v[j].hash == h && !strcmp(ix->v[j].key, key))
			return ix->v[j].val;
	ix->v[j].hash = h;
	ix->v[j].key = key;
	ix->v[j].val = val;
	ix->n++;
	return -1;
}

void md_idx_set(struct md_idx *ix, const char *key, int val)
{
	uint64_t h = md_hash(key, strlen(key));
	size_t j;

	if (!ix->cap) {
		md_idx_put(ix, key, val);
		return;
	}
	for (j = h & (ix->cap - 1); ix->v[j].key; j = (j + 1) & (ix->cap - 1))
		if (ix->v[j].hash == h && !strcmp(ix->v[j].key, key)) {
			ix->v[j].val = val;
			return;
		}
	md_idx_put(ix, key, val);
}

int md_idx_get(const struct md_idx *ix, const char *key)
{
	uint64_t h;
	size_t j;

	if (!ix->cap)
		return -1;
	h = md_hash(key, strlen(key));
	for (j = h & (ix->cap - 1); ix->v[j].key; j = (j + 1) & (ix->cap - 1))
		if (ix->v[j].hash == h && !strcmp(ix->v[j].key, key))
			return ix->v[j].val;
	return -1;
}

void md_idx_free(struct md_idx *ix)
{
	free(ix->v);
	memset(ix, 0, sizeof(*ix));
}

