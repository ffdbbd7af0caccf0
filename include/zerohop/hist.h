/* hist.h — an HDR-style log-linear latency histogram (prefix hist_).
 *
 * Values are nanoseconds (uint64_t). The layout is HdrHistogram's with a
 * fixed configuration: 3 significant decimal digits, 1 ns unit, values
 * 0 .. HIST_MAX_NS (60 s). Every value is kept with a relative error below
 * 1/1024 (< 0.1 %): exact below 2048 ns, steps of 1 ns at 1-2 µs, about
 * 0.5 µs around 1 ms, about 0.5 ms around 1 s. Values above HIST_MAX_NS are
 * recorded as HIST_MAX_NS and counted in hist_clamped() — never dropped.
 *
 * Contract:
 * - A histogram is owned by one thread; there is no locking. Threads record
 *   into their own and hist_merge() them at the end (merge is exact).
 * - hist_record() is O(1) bit operations, no floating point, no allocation.
 * - min/max/sum are exact (raw values); percentiles are HdrHistogram's:
 *   the highest value equivalent to the bucket holding the sample of rank
 *   round(p/100 * count) (at least 1), clamped into [min, max]. No
 *   interpolation: a percentile is an upper bound within 0.1 %.
 * - Memory: one allocation of about 221 KiB; hist_new() aborts on OOM.
 */
#ifndef ZH_HIST_H
#define ZH_HIST_H

#include <stdint.h>

#define HIST_MAX_NS 60000000000ULL	/* 60 s: highest trackable value */

struct hist;

struct hist *hist_new(void);
void hist_free(struct hist *h);
void hist_reset(struct hist *h);

/* Record one value / n equal values (ns). Above HIST_MAX_NS → clamped. */
void hist_record(struct hist *h, uint64_t ns);
void hist_record_n(struct hist *h, uint64_t ns, uint64_t n);

/* dst += src (counts, min, max, sum, clamped). */
void hist_merge(struct hist *dst, const struct hist *src);

uint64_t hist_count(const struct hist *h);
uint64_t hist_clamped(const struct hist *h);	/* values recorded above HIST_MAX_NS */
uint64_t hist_min(const struct hist *h);	/* 0 when empty */
uint64_t hist_max(const struct hist *h);	/* 0 when empty */
uint64_t hist_sum(const struct hist *h);	/* exact sum of recorded (clamped) values */
double hist_mean(const struct hist *h);		/* exact: sum / count */
double hist_stddev(const struct hist *h);	/* population stddev, from bucket midpoints */
/* p in [0, 100]; 0 when empty. p = 0 gives min, p = 100 gives max. */
uint64_t hist_percentile(const struct hist *h, double p);

/* Equivalence range of a value: every value in [lowest, highest] shares v's
 * bucket. */
uint64_t hist_lowest_equiv(uint64_t v);
uint64_t hist_highest_equiv(uint64_t v);

/* Iterate non-empty buckets in increasing value order:
 *	struct hist_iter it = { 0 };
 *	while (hist_iter_next(h, &it)) use(it.lo, it.hi, it.count, it.cum);
 */
struct hist_iter {
	int32_t idx;		/* private: next index to look at */
	uint64_t lo;		/* lowest value of the bucket (ns) */
	uint64_t hi;		/* highest value of the bucket (ns), inclusive */
	uint64_t count;		/* samples in the bucket */
	uint64_t cum;		/* samples in this and all lower buckets */
};
int hist_iter_next(const struct hist *h, struct hist_iter *it);

#endif
