/* test_lg_json.c — bench outputs read back: our JSON round-trips through
 * lg_series_read_json (percentiles, counts, bins), fortio files without
 * Percentiles get them from Data, malformed files fail cleanly with the
 * byte offset, and the .hgrm ladder is well-formed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/bench.h"
#include "zerohop/cli.h"

static char path[64];

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

static int close_rel(double a, double b, double rel)
{
	return fabs(a - b) <= rel * fabs(b) + 1e-12;
}

static void test_roundtrip(void)
{
	struct lg_config cfg = { 0 };
	struct lg_result r = { 0 };
	struct lg_series s;
	uint64_t x = 12345;
	FILE *f;
	int good = 1;

	cfg.conns = 8;
	cfg.threads = 2;
	cfg.qps = 1000;
	cfg.duration_ns = 5000000000ULL;
	cfg.keepalive = 1;
	cfg.label = "round \"trip\"";
	snprintf(cfg.url, sizeof(cfg.url), "http://127.0.0.1:1/x");
	r.lat = hist_new();
	r.ulat = hist_new();
	r.lag = hist_new();
	r.tlag = hist_new();
	r.sizes = hist_new();
	for (int i = 0; i < 100000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		hist_record(r.lat, 20000 + (x >> 33) % 5000000);	/* 20 us .. 5 ms */
		hist_record(r.ulat, 20000 + (x >> 40) % 100000);
		hist_record(r.sizes, 1100);
	}
	r.responses = 100000;
	r.sent = 100003;
	r.errors[LG_ERR_RESET] = 3;
	r.status[200] = 99990;
	r.status[503] = 10;
	r.errors[LG_ERR_STATUS] = 10;
	r.duration_ns = 5000000000ULL;
	f = fopen(path, "w");
	is_int(lg_write_json(f, &cfg, &r), 0, "lg_write_json");
	fclose(f);
	is_int(lg_series_read_json(path, &s), 0, "read back");
	is_str(s.label, "round \"trip\"", "label with quotes survives escaping");
	is_int(s.count, 100000, "count");
	ok(s.requested_qps == 1000, "requested qps");
	ok(close_rel(s.actual_qps, 20000, 1e-6), "actual qps (%.1f)", s.actual_qps);
	ok(close_rel(s.min, hist_min(r.lat) / 1e9, 1e-6), "min in seconds");
	ok(close_rel(s.max, hist_max(r.lat) / 1e9, 1e-6), "max in seconds");
	for (int i = 0; i < 6; i++)
		if (!close_rel(s.p[i], hist_percentile(r.lat, lg_report_pcts[i]) / 1e9, 1e-6))
			good = 0;
	ok(good, "six percentiles equal the histogram's");
	ok(s.nbins > 50 && s.nbins < 1000, "bins coalesced to a chartable number (%zu)", s.nbins);
	ok(close_rel(s.bins[s.nbins - 1].percent, 100, 1e-9), "last bin at 100 %%");
	is_int(s.errors, 13, "errors: 503s and socket errors (RetCodes -1)");
	ok(s.uncorrected != NULL, "open loop: uncorrected histogram read too");
	if (s.uncorrected)
		ok(close_rel(s.uncorrected->p[3], hist_percentile(r.ulat, 99) / 1e9, 1e-6),
		   "uncorrected p99");
	lg_series_free(&s);
	lg_result_free(&r);
}

static void test_fortio_without_percentiles(void)
{
	struct lg_series s;

	write_file("{\"Labels\":\"\",\"RequestedQPS\":\"max\",\"ActualQPS\":10,"
		   "\"DurationHistogram\":{\"Count\":10,\"Min\":0.001,\"Max\":0.004,"
		   "\"Data\":[{\"Start\":0.001,\"End\":0.002,\"Percent\":50,\"Count\":5},"
		   "{\"Start\":0.002,\"End\":0.003,\"Percent\":90,\"Count\":4},"
		   "{\"Start\":0.003,\"End\":0.004,\"Percent\":100,\"Count\":1}]},"
		   "\"RetCodes\":{\"200\":9,\"-1\":1}}");
	is_int(lg_series_read_json(path, &s), 0, "fortio file without Percentiles");
	ok(s.p[0] == 0.002, "p50 from Data: end of the bin reaching 50 %%");
	ok(s.p[2] == 0.003, "p90 from Data");
	ok(s.p[3] == 0.004, "p99 from Data");
	is_str(s.label, path, "empty Labels: the file name");
	is_int(s.errors, 1, "RetCodes -1 counted as errors");
	ok(s.uncorrected == NULL, "no uncorrected histogram in a fortio file");
	lg_series_free(&s);
}

static void test_malformed(void)
{
	static const char *const bad[] = {
		"", "{", "[1,2]", "{\"DurationHistogram\": }", "{\"a\":1}",
		"{\"DurationHistogram\":{\"Count\":1}} x", "{\"DurationHistogram\":{\"Data\":[{]}}",
		"{\"a\":\"\\q\"}", "{\"a\":\"unterminated}", "{\"a\":-}", "{\"a\":tru}",
		"{\"DurationHistogram\":5}",
	};
	char deep[400];
	struct lg_series s;
	int all = 1;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(bad[i]);
		if (lg_series_read_json(path, &s) != -EINVAL) {
			all = 0;
			diag("accepted: %s", bad[i]);
		}
	}
	ok(all, "%zu malformed or incomplete files rejected with -EINVAL",
	   sizeof(bad) / sizeof(bad[0]));
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = 0;
	write_file(deep);
	is_int(lg_series_read_json(path, &s), -EINVAL, "399 nested arrays: rejected, no stack blow-up");
	is_int(lg_series_read_json("/nonexistent/zh.json", &s), -ENOENT, "missing file: -ENOENT");
}

static void test_hgrm(void)
{
	struct hist *h = hist_new();
	char line[256];
	double pv = -1, pp = -1;
	int rows = 0, mono = 1, footer = 0;
	FILE *f;

	for (int i = 1; i <= 10000; i++)
		hist_record(h, (uint64_t)i * 1000);	/* 1 us .. 10 ms */
	f = fopen(path, "w");
	is_int(lg_write_hgrm(f, h), 0, "lg_write_hgrm");
	fclose(f);
	f = fopen(path, "r");
	while (fgets(line, sizeof(line), f)) {
		double v, p, inv;
		unsigned long long n;

		if (sscanf(line, "%lf %lf %llu %lf", &v, &p, &n, &inv) >= 3) {
			if (v < pv || p < pp)
				mono = 0;
			pv = v;
			pp = p;
			rows++;
		}
		if (!strncmp(line, "#[Max     =       10.000, Total count    =        10000]", 55))
			footer = 1;
	}
	fclose(f);
	ok(rows > 50, "hgrm: a percentile ladder (%d rows)", rows);
	ok(mono, "hgrm: values and percentiles never decrease");
	ok(pp == 1.0 && pv == 10.0, "hgrm: ends at percentile 1.0 with the max (10 ms)");
	ok(footer, "hgrm: footer with max in ms and total count");
	hist_free(h);
}

static void test_cli_errors(void)
{
	char *a1[] = { "bench", "-c", "0", "http://127.0.0.1:1/", NULL };
	char *a2[] = { "bench", "http://127.0.0.1:99999/", NULL };
	char *a3[] = { "bench", "--nope", "http://127.0.0.1:1/", NULL };
	char *a4[] = { "bench", "-t", "5parsecs", "http://127.0.0.1:1/", NULL };
	char *a5[] = { "bench", "report", NULL };
	char *a6[] = { "bench", "--threads", "4", "-c", "2", "http://127.0.0.1:1/", NULL };
	char *a7[] = { "bench", "--nice", "50", "http://127.0.0.1:1/", NULL };

	is_int(cli_bench(4, a1), 2, "-c 0 refused");
	is_int(cli_bench(2, a2), 2, "port out of range refused");
	is_int(cli_bench(3, a3), 2, "unknown flag refused");
	is_int(cli_bench(4, a4), 2, "bad duration refused");
	is_int(cli_bench(2, a5), 1, "report without files fails");
	is_int(cli_bench(6, a6), 2, "more threads than connections refused");
	is_int(cli_bench(4, a7), 2, "--nice out of -20..19 refused");
}

int main(void)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/zh-bench-unit.XXXXXX");
	fd = mkstemp(path);
	close(fd);
	test_roundtrip();
	test_fortio_without_percentiles();
	test_malformed();
	test_hgrm();
	test_cli_errors();
	unlink(path);
	return done_testing();
}
