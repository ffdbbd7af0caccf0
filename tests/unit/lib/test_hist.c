/* test_hist.c — the histogram against a sorted-array oracle (hist.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tap.h"
#include "zerohop/hist.h"

#define N 200000

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)	/* xorshift64*: reproducible across runs */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* Log-uniform over [1 µs, 60 s]: every bucket of the range gets samples. */
static uint64_t rnd_latency(void)
{
	double u = (double)(rnd() >> 11) / (double)(1ULL << 53);

	return (uint64_t)exp(log(1e3) + u * (log(6e10) - log(1e3)));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t oracle(const uint64_t *sorted, size_t n, double p)
{
	uint64_t rank = (uint64_t)(p / 100.0 * (double)n + 0.5);

	if (p <= 0)
		return sorted[0];
	if (p >= 100)
		return sorted[n - 1];
	if (rank < 1)
		rank = 1;
	return sorted[rank - 1];
}

static double relerr(uint64_t got, uint64_t want)
{
	return fabs((double)got - (double)want) / (double)want;
}

static void test_oracle(void)
{
	static const double ps[] = { 0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 99.999, 100 };
	uint64_t *v = malloc(N * sizeof(*v)), sum = 0;
	struct hist *h = hist_new();
	double worst = 0, mean = 0, var = 0;
	int bad = 0;

	for (size_t i = 0; i < N; i++) {
		v[i] = rnd_latency();
		sum += v[i];
		hist_record(h, v[i]);
	}
	qsort(v, N, sizeof(*v), cmp_u64);
	is_int(hist_count(h), N, "count");
	is_int(hist_min(h), v[0], "min exact");
	is_int(hist_max(h), v[N - 1], "max exact");
	is_int(hist_sum(h), sum, "sum exact");
	mean = (double)sum / N;
	ok(fabs(hist_mean(h) - mean) < 1e-6 * mean, "mean exact (%.0f)", hist_mean(h));
	for (size_t i = 0; i < N; i++)
		var += ((double)v[i] - mean) * ((double)v[i] - mean);
	var = sqrt(var / N);
	ok(fabs(hist_stddev(h) - var) / var < 0.001, "stddev within 0.1%% (%.0f vs %.0f)",
	   hist_stddev(h), var);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t got = hist_percentile(h, ps[i]), want = oracle(v, N, ps[i]);
		double e = relerr(got, want);

		if (e > worst)
			worst = e;
		if (e > 0.001 || got < want) {
			bad++;
			diag("p%g: got %llu want %llu", ps[i], (unsigned long long)got,
			     (unsigned long long)want);
		}
	}
	ok(!bad, "13 percentiles within 0.1%% of the oracle and never below it (worst %.5f%%)",
	   worst * 100);
	/* every percentile on a fine grid, not just the usual ones */
	bad = 0;
	for (int k = 1; k < 10000; k++) {
		double p = k / 100.0;
		uint64_t got = hist_percentile(h, p), want = oracle(v, N, p);

		if (relerr(got, want) > 0.001 || got < want)
			bad++;
	}
	is_int(bad, 0, "p0.01..p99.99 in steps of 0.01: all within 0.1%% of the oracle");
	free(v);
	hist_free(h);
}

static void test_equiv(void)
{
	int bad = 0;

	for (int i = 0; i < 100000; i++) {
		uint64_t x = rnd() % (HIST_MAX_NS + 1);
		uint64_t lo = hist_lowest_equiv(x), hi = hist_highest_equiv(x);

		if (lo > x || hi < x || (x >= 2048 && (double)(hi - lo + 1) / lo > 1.0 / 1024))
			bad++;
		if (hist_lowest_equiv(hi) != lo || hist_lowest_equiv(hi + 1) != hi + 1)
			bad++;
	}
	is_int(bad, 0, "equivalence ranges contain the value, are within 1/1024, and tile");
	is_int(hist_highest_equiv(1000), 1000, "1 us is exact");
	is_int(hist_highest_equiv(2047), 2047, "2047 ns is exact");
}

static void test_merge(void)
{
	struct hist *a = hist_new(), *b = hist_new(), *all = hist_new();
	struct hist_iter ia = { 0 }, ib = { 0 };
	int same = 1;

	for (int i = 0; i < 50000; i++) {
		uint64_t x = rnd_latency();

		hist_record(i % 3 ? a : b, x);
		hist_record(all, x);
	}
	hist_merge(a, b);
	is_int(hist_count(a), hist_count(all), "merge: count");
	is_int(hist_min(a), hist_min(all), "merge: min");
	is_int(hist_max(a), hist_max(all), "merge: max");
	is_int(hist_sum(a), hist_sum(all), "merge: sum");
	while (hist_iter_next(a, &ia)) {
		if (!hist_iter_next(all, &ib) || ia.lo != ib.lo || ia.count != ib.count ||
		    ia.cum != ib.cum)
			same = 0;
	}
	ok(same && !hist_iter_next(all, &ib), "merge: identical buckets to recording all in one");
	is_int(hist_percentile(a, 99.9), hist_percentile(all, 99.9), "merge: p99.9 equal");
	/* merging an empty histogram changes nothing, into an empty one copies */
	hist_reset(b);
	hist_merge(a, b);
	is_int(hist_count(a), 50000, "merging empty: count unchanged");
	hist_merge(b, all);
	is_int(hist_min(b), hist_min(all), "merging into empty: min copied");
	hist_free(a);
	hist_free(b);
	hist_free(all);
}

static void test_edges(void)
{
	struct hist *h = hist_new();
	struct hist_iter it = { 0 };
	uint64_t n = 0;

	is_int(hist_percentile(h, 50), 0, "empty: p50 is 0");
	is_int(hist_min(h), 0, "empty: min 0");
	ok(hist_mean(h) == 0 && hist_stddev(h) == 0, "empty: mean and stddev 0");
	ok(!hist_iter_next(h, &it), "empty: no buckets");

	hist_record(h, 0);
	is_int(hist_min(h), 0, "0 recorded: min 0");
	is_int(hist_percentile(h, 50), 0, "0 recorded: p50 0");
	hist_record(h, 1000);
	is_int(hist_percentile(h, 100), 1000, "1 us: max 1000 exactly");
	hist_record(h, HIST_MAX_NS);
	is_int(hist_max(h), HIST_MAX_NS, "60 s recorded as is");
	is_int(hist_clamped(h), 0, "60 s is not clamped");
	hist_record(h, HIST_MAX_NS + 1);
	hist_record(h, UINT64_MAX);
	is_int(hist_clamped(h), 2, "two values above 60 s counted as clamped");
	is_int(hist_count(h), 5, "clamped values are still counted");
	is_int(hist_max(h), HIST_MAX_NS, "clamped to 60 s");
	is_int(hist_percentile(h, 99), HIST_MAX_NS, "p99 = 60 s (clamped, not beyond)");
	it = (struct hist_iter){ 0 };
	while (hist_iter_next(h, &it))
		n += it.count;
	is_int(n, 5, "iteration sees every sample");
	is_int(it.cum, 5, "iteration: cumulative count ends at total");
	hist_record_n(h, 5000, 95);
	is_int(hist_count(h), 100, "record_n adds n samples");
	is_int(hist_percentile(h, 50), hist_highest_equiv(5000),
	       "p50 after record_n: highest value equivalent to 5000 ns");
	ok(hist_highest_equiv(5000) - 5000 <= 5, "which is within 0.1%%");
	hist_reset(h);
	is_int(hist_count(h), 0, "reset: empty");
	is_int(hist_max(h), 0, "reset: max 0");
	hist_free(h);
}

int main(void)
{
	test_oracle();
	test_equiv();
	test_merge();
	test_edges();
	return done_testing();
}
