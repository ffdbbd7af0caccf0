/* hist.c — HDR-style log-linear histogram (see hist.h).
 *
 * Layout (HdrHistogram's, with unit = 1 ns and 3 significant digits):
 *   SUB_COUNT = 2048 sub-buckets per bucket, HALF = 1024.
 *   bucket b covers [1024 << b, 2048 << b) with steps of 1 << b, except
 *   bucket 0, which covers [0, 2048) with steps of 1.
 *   counts[] is flat: bucket 0 uses indexes 0..2047, bucket b >= 1 uses only
 *   its upper half (its lower half overlaps bucket b-1), at
 *   ((b + 1) << 10) + (sub - 1024).
 * Invariants:
 *   1. step / lowest value of any bucket b >= 1 is 1/1024, so the highest
 *      equivalent value of v is within 0.1 % of v.
 *   2. total == sum of counts[]; min/max/sum describe exactly the recorded
 *      (clamped) values; total == 0 implies min == max == sum == 0.
 *   3. Every recorded value is <= HIST_MAX_NS, so its index < COUNTS_LEN.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/hist.h"
#include "zerohop/log.h"

#define HALF_MAG	10
#define HALF		(1 << HALF_MAG)		/* 1024 */
#define SUB_COUNT	(2 * HALF)		/* 2048 */
#define SUB_MASK	((uint64_t)SUB_COUNT - 1)
#define BUCKETS		26	/* smallest b with (2048 << (b-1)) > 60e9 */
#define COUNTS_LEN	((BUCKETS + 1) * HALF)

_Static_assert((2048ULL << (BUCKETS - 1)) > HIST_MAX_NS, "buckets cover HIST_MAX_NS");
_Static_assert((2048ULL << (BUCKETS - 2)) <= HIST_MAX_NS, "no spare bucket");

struct hist {
	uint64_t total;
	uint64_t clamped;
	uint64_t min;
	uint64_t max;
	uint64_t sum;
	uint64_t counts[COUNTS_LEN];
};

static inline int bucket_of(uint64_t v)
{
	return (64 - __builtin_clzll(v | SUB_MASK)) - (HALF_MAG + 1);
}

static inline int index_of(uint64_t v)
{
	int b = bucket_of(v);
	int sub = (int)(v >> b);

	return ((b + 1) << HALF_MAG) + (sub - HALF);
}

/* Lowest value stored at counts[idx]. */
static inline uint64_t value_of_index(int idx)
{
	int b = (idx >> HALF_MAG) - 1;
	int sub = (idx & (HALF - 1)) + HALF;

	if (b < 0) {	/* bucket 0, lower half */
		b = 0;
		sub -= HALF;
	}
	return (uint64_t)sub << b;
}

static inline uint64_t step_of_index(int idx)
{
	int b = (idx >> HALF_MAG) - 1;

	return 1ULL << (b < 0 ? 0 : b);
}

uint64_t hist_lowest_equiv(uint64_t v)
{
	int b = bucket_of(v);

	return (v >> b) << b;
}

uint64_t hist_highest_equiv(uint64_t v)
{
	int b = bucket_of(v);

	return hist_lowest_equiv(v) + (1ULL << b) - 1;
}

struct hist *hist_new(void)
{
	return zh_calloc(1, sizeof(struct hist));
}

void hist_free(struct hist *h)
{
	free(h);
}

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_record_n(struct hist *h, uint64_t ns, uint64_t n)
{
	if (!n)
		return;
	if (ns > HIST_MAX_NS) {
		ns = HIST_MAX_NS;
		h->clamped += n;
	}
	h->counts[index_of(ns)] += n;
	if (!h->total || ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
	h->total += n;
	h->sum += ns * n;
}

void hist_record(struct hist *h, uint64_t ns)
{
	hist_record_n(h, ns, 1);
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	if (!src->total)
		return;
	for (int i = 0; i < COUNTS_LEN; i++)
		dst->counts[i] += src->counts[i];
	if (!dst->total || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->total += src->total;
	dst->clamped += src->clamped;
	dst->sum += src->sum;
}

uint64_t hist_count(const struct hist *h) { return h->total; }
uint64_t hist_clamped(const struct hist *h) { return h->clamped; }
uint64_t hist_min(const struct hist *h) { return h->min; }
uint64_t hist_max(const struct hist *h) { return h->max; }
uint64_t hist_sum(const struct hist *h) { return h->sum; }

double hist_mean(const struct hist *h)
{
	return h->total ? (double)h->sum / (double)h->total : 0.0;
}

double hist_stddev(const struct hist *h)
{
	double mean = hist_mean(h), acc = 0;
	struct hist_iter it = { 0 };

	if (!h->total)
		return 0.0;
	while (hist_iter_next(h, &it)) {
		/* midpoint of the bucket, kept inside the exact [min, max] */
		double mid = it.lo + (double)(it.hi - it.lo) / 2;
		double d;

		if (mid < h->min)
			mid = h->min;
		if (mid > h->max)
			mid = h->max;
		d = mid - mean;
		acc += d * d * (double)it.count;
	}
	return sqrt(acc / (double)h->total);
}

uint64_t hist_percentile(const struct hist *h, double p)
{
	uint64_t want, cum = 0, v;

	if (!h->total)
		return 0;
	if (p <= 0)
		return h->min;
	if (p >= 100)
		return h->max;
	want = (uint64_t)(p / 100.0 * (double)h->total + 0.5);
	if (want < 1)
		want = 1;
	for (int i = 0; i < COUNTS_LEN; i++) {
		cum += h->counts[i];
		if (cum >= want) {
			v = value_of_index(i) + step_of_index(i) - 1;
			if (v > h->max)
				v = h->max;
			if (v < h->min)
				v = h->min;
			return v;
		}
	}
	return h->max;	/* unreachable by invariant 2 */
}

int hist_iter_next(const struct hist *h, struct hist_iter *it)
{
	if (!it->idx)
		it->cum = 0;
	for (int i = it->idx; i < COUNTS_LEN; i++) {
		if (!h->counts[i])
			continue;
		it->lo = value_of_index(i);
		it->hi = it->lo + step_of_index(i) - 1;
		it->count = h->counts[i];
		it->cum += it->count;
		it->idx = i + 1;
		return 1;
	}
	it->idx = COUNTS_LEN;
	return 0;
}
