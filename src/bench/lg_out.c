/* lg_out.c — results of one run: wrk2-like text, fortio-compatible JSON,
 * HdrHistogram .hgrm (contract in bench.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zerohop/bench.h"
#include "zerohop/json.h"
#include "zerohop/log.h"

const double lg_report_pcts[6] = { 50, 75, 90, 99, 99.9, 99.99 };

/* "1.23ms" style, like wrk. */
static const char *fmt_dur(char *b, size_t n, double ns)
{
	if (ns < 1e3)
		snprintf(b, n, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(b, n, "%.2fus", ns / 1e3);
	else if (ns < 1e9)
		snprintf(b, n, "%.2fms", ns / 1e6);
	else
		snprintf(b, n, "%.2fs", ns / 1e9);
	return b;
}

static const char *fmt_bytes(char *b, size_t n, double v)
{
	if (v < 1024)
		snprintf(b, n, "%.0fB", v);
	else if (v < 1024 * 1024)
		snprintf(b, n, "%.2fKB", v / 1024);
	else if (v < 1024.0 * 1024 * 1024)
		snprintf(b, n, "%.2fMB", v / 1024 / 1024);
	else
		snprintf(b, n, "%.2fGB", v / 1024 / 1024 / 1024);
	return b;
}

static uint64_t total_errors(const struct lg_result *r)
{
	uint64_t e = 0;

	for (int i = 0; i < LG_ERR__COUNT; i++)
		e += r->errors[i];
	return e;
}

int lg_print_text(FILE *f, const struct lg_config *cfg, const struct lg_result *r)
{
	static const char *const rows[] = { "p50", "p75", "p90", "p99", "p99.9", "p99.99" };
	double secs = (double)r->duration_ns / 1e9;
	int open = cfg->qps > 0;
	char a[32], b[32], c[32], d[32];

	fprintf(f, "Running %s @ %s\n", cfg->tcp ? "tcp echo" : "http", cfg->url);
	if (cfg->label)
		fprintf(f, "  label: %s\n", cfg->label);
	fprintf(f, "  %s\n", lg_mode_str(cfg));
	fprintf(f, "  %d thread%s, %d connection%s, keep-alive %s", cfg->threads,
		cfg->threads > 1 ? "s" : "", cfg->conns, cfg->conns > 1 ? "s" : "",
		cfg->keepalive ? "on" : "off (new connection per request)");
	if (cfg->warmup_ns)
		fprintf(f, ", warm-up %s (not recorded)", fmt_dur(a, sizeof(a), (double)cfg->warmup_ns));
	fprintf(f, "\n\n");
	if (open)
		fprintf(f, "  Latency      %12s %12s %12s %12s\n", "corrected", "uncorrected",
			"send lag", "timer lag");
	else
		fprintf(f, "  Latency      %12s\n", "(saturation)");
	for (size_t i = 0; i <= sizeof(rows) / sizeof(rows[0]) + 2; i++) {
		const char *name;
		double x, y = 0, z = 0, w = 0;

		if (i < 6) {
			name = rows[i];
			x = (double)hist_percentile(r->lat, lg_report_pcts[i]);
			y = (double)hist_percentile(r->ulat, lg_report_pcts[i]);
			z = (double)hist_percentile(r->lag, lg_report_pcts[i]);
			w = (double)hist_percentile(r->tlag, lg_report_pcts[i]);
		} else if (i == 6) {
			name = "max";
			x = (double)hist_max(r->lat);
			y = (double)hist_max(r->ulat);
			z = (double)hist_max(r->lag);
			w = (double)hist_max(r->tlag);
		} else if (i == 7) {
			name = "mean";
			x = hist_mean(r->lat);
			y = hist_mean(r->ulat);
			z = hist_mean(r->lag);
			w = hist_mean(r->tlag);
		} else {
			name = "stdev";
			x = hist_stddev(r->lat);
			y = hist_stddev(r->ulat);
			z = hist_stddev(r->lag);
			w = hist_stddev(r->tlag);
		}
		if (open)
			fprintf(f, "   %-10s  %12s %12s %12s %12s\n", name, fmt_dur(a, sizeof(a), x),
				fmt_dur(b, sizeof(b), y), fmt_dur(c, sizeof(c), z),
				fmt_dur(d, sizeof(d), w));
		else
			fprintf(f, "   %-10s  %12s\n", name, fmt_dur(a, sizeof(a), x));
	}
	fprintf(f, "\n  %" PRIu64 " responses in %.2fs, %s read\n", r->responses, secs,
		fmt_bytes(a, sizeof(a), (double)r->bytes_read));
	fprintf(f, "Requests/sec: %10.2f\n", secs > 0 ? (double)r->responses / secs : 0.0);
	fprintf(f, "Transfer/sec: %10s\n",
		fmt_bytes(a, sizeof(a), secs > 0 ? (double)r->bytes_read / secs : 0.0));
	fprintf(f, "Errors: %" PRIu64, total_errors(r));
	for (int i = 0; i < LG_ERR__COUNT; i++)
		fprintf(f, "%s%s %" PRIu64, i ? ", " : " (", lg_err_names[i], r->errors[i]);
	fprintf(f, ")\n");
	if (!cfg->tcp) {
		fprintf(f, "Status codes:");
		for (int i = 0; i < LG_MAX_STATUS; i++)
			if (r->status[i])
				fprintf(f, " %d: %" PRIu64, i, r->status[i]);
		fprintf(f, "\n");
	}
	if (open && r->backlogged)
		fprintf(f, "Backlog: %" PRIu64 " requests (%.2f%%) were due while their connection was "
			"still busy;\n  their send lag is queueing (timer lag leaves them out; more -c helps)\n",
			r->backlogged, r->sent ? 100.0 * (double)r->backlogged / (double)r->sent : 0.0);
	if (hist_clamped(r->lat))
		fprintf(f, "Note: %" PRIu64 " latencies above 60 s were recorded as 60 s\n",
			hist_clamped(r->lat));
	return ferror(f) ? -EIO : 0;
}

/* ---- the series (bins, percentiles) shared by JSON, report and HTML ---- */

void lg_series_free(struct lg_series *s)
{
	free(s->bins);
	s->bins = NULL;
	s->nbins = 0;
	if (s->uncorrected) {
		lg_series_free(s->uncorrected);
		free(s->uncorrected);
		s->uncorrected = NULL;
	}
}

/* Bins for charts and fortio's Data: the histogram's buckets joined while
 * they stay within 1 % of the bin start (so a few hundred bins at most). */
static void bins_from_hist(struct lg_series *s, const struct hist *h, double scale)
{
	struct hist_iter it = { 0 };
	uint64_t total = hist_count(h), lo = 0, hi = 0, cnt = 0, cum = 0;
	size_t cap = 64;

	s->bins = zh_calloc(cap, sizeof(*s->bins));
	s->nbins = 0;
	for (;;) {
		int more = hist_iter_next(h, &it);

		if (cnt && (!more || it.lo > lo + lo / 100 + 1)) {
			struct lg_bin *b;

			if (s->nbins == cap) {
				cap *= 2;
				s->bins = zh_realloc(s->bins, cap * sizeof(*s->bins));
			}
			b = &s->bins[s->nbins++];
			b->start = (double)(lo < hist_min(h) ? hist_min(h) : lo) / scale;
			b->end = (double)(hi > hist_max(h) ? hist_max(h) : hi) / scale;
			b->count = cnt;
			b->percent = 100.0 * (double)cum / (double)total;
			cnt = 0;
		}
		if (!more)
			break;
		if (!cnt)
			lo = it.lo;
		hi = it.hi;
		cnt += it.count;
		cum = it.cum;
	}
}

void lg_series_from_hist(struct lg_series *s, const struct hist *h)
{
	s->count = hist_count(h);
	s->min = (double)hist_min(h) / 1e9;
	s->max = (double)hist_max(h) / 1e9;
	s->avg = hist_mean(h) / 1e9;
	s->stddev = hist_stddev(h) / 1e9;
	for (int i = 0; i < 6; i++)
		s->p[i] = (double)hist_percentile(h, lg_report_pcts[i]) / 1e9;
	s->p[6] = s->max;
	s->has_p = 1;
	bins_from_hist(s, h, 1e9);
}

/* ---- JSON ---- */

/* fortio HistogramData; scale converts ns (or bytes, scale 1) to output units */
static void json_hist(FILE *f, const char *indent, const struct hist *h, double scale,
		      int percentiles)
{
	struct lg_series s = { 0 };

	s.count = hist_count(h);
	bins_from_hist(&s, h, scale);
	fprintf(f, "{\n%s  \"Count\": %" PRIu64 ",\n", indent, hist_count(h));
	fprintf(f, "%s  \"Min\": %.9g,\n%s  \"Max\": %.9g,\n", indent, hist_min(h) / scale,
		indent, hist_max(h) / scale);
	fprintf(f, "%s  \"Sum\": %.12g,\n%s  \"Avg\": %.9g,\n%s  \"StdDev\": %.9g,\n", indent,
		(double)hist_sum(h) / scale, indent, hist_mean(h) / scale, indent,
		hist_stddev(h) / scale);
	fprintf(f, "%s  \"Data\": [", indent);
	for (size_t i = 0; i < s.nbins; i++)
		fprintf(f, "%s\n%s    {\"Start\": %.9g, \"End\": %.9g, \"Percent\": %.6g, \"Count\": %"
			PRIu64 "}", i ? "," : "", indent, s.bins[i].start, s.bins[i].end,
			s.bins[i].percent, s.bins[i].count);
	fprintf(f, "\n%s  ]", indent);
	if (percentiles && hist_count(h)) {
		fprintf(f, ",\n%s  \"Percentiles\": [", indent);
		for (int i = 0; i < 6; i++)
			fprintf(f, "%s\n%s    {\"Percentile\": %g, \"Value\": %.9g}", i ? "," : "",
				indent, lg_report_pcts[i],
				(double)hist_percentile(h, lg_report_pcts[i]) / scale);
		fprintf(f, "\n%s  ]", indent);
	}
	fprintf(f, "\n%s}", indent);
	lg_series_free(&s);
}

int lg_write_json(FILE *f, const struct lg_config *cfg, const struct lg_result *r)
{
	char when[64], dur[64];
	time_t sec = (time_t)(r->start_realtime_ns / 1000000000ULL);
	struct tm tm;
	double secs = (double)r->duration_ns / 1e9;
	uint64_t sock_err = 0;
	int first = 1;

	gmtime_r(&sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (cfg->duration_ns)
		snprintf(dur, sizeof(dur), "%gs", (double)cfg->duration_ns / 1e9);
	else
		snprintf(dur, sizeof(dur), "exactly %" PRIu64 " calls", cfg->requests);
	fprintf(f, "{\n  \"RunType\": \"%s\",\n  \"Labels\": ", cfg->tcp ? "TCP" : "HTTP");
	json_put_str(f, cfg->label ? cfg->label : "");
	fprintf(f, ",\n  \"StartTime\": \"%s.%09" PRIu64 "Z\",\n", when,
		(uint64_t)(r->start_realtime_ns % 1000000000ULL));
	if (cfg->qps > 0)
		fprintf(f, "  \"RequestedQPS\": \"%g\",\n", cfg->qps);
	else
		fprintf(f, "  \"RequestedQPS\": \"max\",\n");
	fprintf(f, "  \"RequestedDuration\": \"%s\",\n", dur);
	fprintf(f, "  \"ActualQPS\": %.6f,\n", secs > 0 ? (double)r->responses / secs : 0.0);
	fprintf(f, "  \"ActualDuration\": %" PRIu64 ",\n", r->duration_ns);
	fprintf(f, "  \"NumThreads\": %d,\n  \"NumConnections\": %d,\n", cfg->threads, cfg->conns);
	fprintf(f, "  \"Version\": \"zerohop-bench 0.1\",\n  \"URL\": ");
	json_put_str(f, cfg->url);
	fprintf(f, ",\n  \"Destination\": ");
	json_put_str(f, cfg->url);
	fprintf(f, ",\n  \"DisableKeepAlive\": %s,\n", cfg->keepalive ? "false" : "true");
	fprintf(f, "  \"HTTPReqTimeOut\": %" PRIu64 ",\n", cfg->timeout_ns);
	fprintf(f, "  \"Loop\": \"%s\",\n  \"Mode\": ", cfg->qps > 0 ? "open" : "closed");
	json_put_str(f, lg_mode_str(cfg));
	fprintf(f, ",\n  \"DurationHistogram\": ");
	json_hist(f, "  ", r->lat, 1e9, 1);
	fprintf(f, ",\n  \"UncorrectedDurationHistogram\": ");
	json_hist(f, "  ", r->ulat, 1e9, 1);
	fprintf(f, ",\n  \"SendLagHistogram\": ");
	json_hist(f, "  ", r->lag, 1e9, 1);
	fprintf(f, ",\n  \"TimerLagHistogram\": ");
	json_hist(f, "  ", r->tlag, 1e9, 1);
	fprintf(f, ",\n  \"Sizes\": ");
	json_hist(f, "  ", r->sizes, 1, 0);
	fprintf(f, ",\n  \"RetCodes\": {");
	for (int i = 0; i < LG_ERR__COUNT; i++)
		if (i != LG_ERR_STATUS)
			sock_err += r->errors[i];
	if (cfg->tcp) {
		fprintf(f, "\n    \"OK\": %" PRIu64, r->responses);
		first = 0;
	}
	for (int i = 0; i < LG_MAX_STATUS && !cfg->tcp; i++) {
		if (!r->status[i])
			continue;
		fprintf(f, "%s\n    \"%d\": %" PRIu64, first ? "" : ",", i, r->status[i]);
		first = 0;
	}
	if (sock_err)
		fprintf(f, "%s\n    \"-1\": %" PRIu64, first ? "" : ",", sock_err);
	fprintf(f, "\n  },\n  \"Errors\": {");
	for (int i = 0; i < LG_ERR__COUNT; i++)
		fprintf(f, "%s\n    \"%s\": %" PRIu64, i ? "," : "", lg_err_names[i], r->errors[i]);
	fprintf(f, "\n  },\n  \"Requests\": %" PRIu64 ",\n  \"Responses\": %" PRIu64
		",\n  \"BytesRead\": %" PRIu64 ",\n  \"SocketCount\": %" PRIu64 ",\n"
		"  \"Backlogged\": %" PRIu64 ",\n"
		"  \"ClampedAbove60s\": %" PRIu64 "\n}\n", r->sent, r->responses, r->bytes_read,
		r->connects, r->backlogged, hist_clamped(r->lat));
	return ferror(f) ? -EIO : 0;
}

/* ---- .hgrm: HdrHistogram's hdr_percentiles_print(CLASSIC), ticks 5, ms ---- */

int lg_write_hgrm(FILE *f, const struct hist *h)
{
	const double scale = 1e6;	/* ns → ms */
	const int ticks_per_half = 5;
	uint64_t total = hist_count(h);
	struct hist_iter it = { 0 };
	double next = 0;
	int have;

	fprintf(f, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount",
		"1/(1-Percentile)");
	have = total ? hist_iter_next(h, &it) : 0;
	while (have) {
		double cur = 100.0 * (double)it.cum / (double)total;

		if (next <= cur) {
			uint64_t v = it.hi > hist_max(h) ? hist_max(h) : it.hi;
			double half;

			fprintf(f, "%12.3f %14.12f %10" PRIu64 " %14.2f\n", (double)v / scale,
				next / 100, it.cum, 1 / (1 - next / 100));
			half = pow(2, (double)(int64_t)(log(100 / (100 - next)) / log(2)) + 1);
			next += 100 / (ticks_per_half * half);
			if (it.cum == total)
				break;
			continue;
		}
		have = hist_iter_next(h, &it);
	}
	if (total)
		fprintf(f, "%12.3f %14.12f %10" PRIu64 " %14s\n", (double)hist_max(h) / scale,
			1.0, total, "inf");
	fprintf(f, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", hist_mean(h) / scale,
		hist_stddev(h) / scale);
	fprintf(f, "#[Max     = %12.3f, Total count    = %12" PRIu64 "]\n",
		(double)hist_max(h) / scale, total);
	fprintf(f, "#[Buckets = %12d, SubBuckets     = %12d]\n", 26, 2048);
	return ferror(f) ? -EIO : 0;
}
