/* bench.h — the load generator behind `zerohop bench` (prefix lg_).
 *
 * Two load models, named in every output:
 *  - open loop (qps > 0): each connection is a metronome; request k of
 *    connection i is intended at start_i + k * interval (start_i staggered
 *    over one interval). Latency is completion − intended send time
 *    (coordinated omission corrected); the uncorrected latency (completion −
 *    actual start) and the send lag (actual start − intended) are kept in
 *    their own histograms.
 *  - closed loop (qps == 0): each connection sends the next request as soon
 *    as the previous one is complete; intended == actual, latency is
 *    saturation latency.
 * "Actual start" of a request is its first write, or its connect() when the
 * request needs a new connection (keep-alive off, or after an error).
 *
 * Threads: each owns an event loop, its connections and its histograms;
 * lg_run() merges them into one lg_result at the end.
 *
 * Errors are counted per request, once, by kind (enum lg_err). Only requests
 * that got a complete response (any status) are in the latency histograms.
 */
#ifndef ZH_BENCH_H
#define ZH_BENCH_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>

#include "zerohop/hist.h"

enum lg_err {
	LG_ERR_CONNECT,		/* connect() failed (refused, unreachable, ...) */
	LG_ERR_TIMEOUT,		/* no complete response within --timeout */
	LG_ERR_STATUS,		/* response with status >= 400 (also in status[]) */
	LG_ERR_SHORT_READ,	/* EOF before the response was complete */
	LG_ERR_RESET,		/* ECONNRESET / EPIPE */
	LG_ERR_OTHER,		/* malformed response, echo mismatch, other errno */
	LG_ERR__COUNT,
};

/* Constant names ("connect", "timeout", "status", "short_read", "reset",
 * "other"), used in text and JSON output. */
extern const char *const lg_err_names[LG_ERR__COUNT];

#define LG_MAX_STATUS 1000	/* status codes 0..999 are counted one by one */

struct lg_config {
	/* target */
	int tcp;			/* 1: tcp:// echo mode, 0: http:// */
	char url[1024];			/* as given, for reports */
	char host[256];			/* for the Host header */
	char target[1024];		/* request-target ("/path?query") */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	/* load */
	int conns;			/* connections in total (>= threads) */
	int threads;
	double qps;			/* total requests/s; 0 = closed loop */
	uint64_t duration_ns;		/* measured phase; 0 = until requests */
	uint64_t requests;		/* total measured requests; 0 = until duration */
	uint64_t warmup_ns;		/* load before the measured phase, not recorded */
	uint64_t timeout_ns;		/* per request, from its actual start */
	uint64_t spin_ns;		/* busy-wait sends closer than this (open loop) */
	int nice;			/* worker thread nice value (0: unchanged) */
	int keepalive;
	/* request (http) */
	const char *method;
	char **headers;			/* "Name: value" */
	int nheaders;
	const char *body;
	size_t body_len;
	/* request (tcp) */
	size_t payload_size;
	/* presentation */
	const char *label;
	int progress;			/* live line on stderr */
};

struct lg_result {
	struct hist *lat;		/* corrected latency, ns */
	struct hist *ulat;		/* uncorrected latency, ns */
	struct hist *lag;		/* send lag, ns (open loop) */
	struct hist *tlag;		/* send lag of requests whose connection was
					 * idle at the tick: the generator's own
					 * timing error, without queueing */
	struct hist *sizes;		/* response bytes per response */
	uint64_t responses;		/* complete responses (any status) */
	uint64_t sent;			/* measured requests started */
	uint64_t bytes_read;		/* response bytes, measured requests */
	uint64_t errors[LG_ERR__COUNT];
	uint64_t status[LG_MAX_STATUS];
	uint64_t connects;		/* successful connects (all phases) */
	uint64_t backlogged;		/* open loop: measured requests whose tick
					 * passed while their connection was still
					 * busy (too few connections for the rate) */
	uint64_t start_realtime_ns;	/* wall clock at the measured phase start */
	uint64_t duration_ns;		/* measured phase, to the last completion */
};

/* Run the load described by cfg. Fills res (allocating its histograms;
 * release with lg_result_free). Returns 0, or -errno when the run could not
 * start (threads, sockets); request errors are counted, not returned. */
int lg_run(const struct lg_config *cfg, struct lg_result *res);
void lg_result_free(struct lg_result *res);

/* "open loop at 1000 req/s (latency corrected for coordinated omission)" or
 * "closed loop, maximum rate"; static storage, not thread-safe. */
const char *lg_mode_str(const struct lg_config *cfg);

/* Outputs (lg_out.c). Each returns 0 or -errno. */
int lg_print_text(FILE *f, const struct lg_config *cfg, const struct lg_result *res);
int lg_write_json(FILE *f, const struct lg_config *cfg, const struct lg_result *res);
/* HdrHistogram percentile distribution (.hgrm), values in milliseconds. */
int lg_write_hgrm(FILE *f, const struct hist *h);

/* A run as the reports see it: from a live result or read back from JSON
 * (ours or plain fortio). Latencies in seconds, as fortio writes them. */
struct lg_bin {
	double start, end;	/* seconds */
	double percent;		/* cumulative, 0..100 */
	uint64_t count;
};

struct lg_series {
	char label[256];
	char mode[128];		/* "open loop at N req/s" / "closed loop" / "" */
	double requested_qps;	/* 0 = max */
	double actual_qps;
	double duration_s;
	uint64_t count;
	double min, max, avg, stddev;	/* seconds */
	double p[7];		/* p50 p75 p90 p99 p99.9 p99.99 max, seconds */
	int has_p;		/* p[] known (from Percentiles or computed) */
	struct lg_bin *bins;	/* owned */
	size_t nbins;
	uint64_t errors;	/* non-2xx/3xx responses plus socket errors */
	struct lg_series *uncorrected;	/* optional, owned */
};

extern const double lg_report_pcts[6];	/* 50 75 90 99 99.9 99.99 */

void lg_series_from_hist(struct lg_series *s, const struct hist *h);
void lg_series_free(struct lg_series *s);
/* Read a JSON run file. Returns 0 or -errno/-EINVAL with a message on
 * stderr naming the file and the byte offset of the problem. */
int lg_series_read_json(const char *path, struct lg_series *s);

/* Report table over several runs (text), and the self-contained HTML page
 * (inline SVG, no scripts from the network) with the latency histogram and
 * the percentile spectrum of each run. */
int lg_report_text(FILE *f, const struct lg_series *s, size_t n);
int lg_report_html(FILE *f, const char *title, const struct lg_series *s, size_t n);

/* ---- one `zerohop bench` run (lg_bench.c) ---- */

/* Where a run's results go: each path NULL (not written), "-" (stdout) or
 * a file; the text summary goes to stdout, or to stderr when a machine
 * format took stdout, unless quiet. */
struct lg_outputs {
	const char *json;	/* fortio-compatible JSON (lg_write_json) */
	const char *hgrm;	/* HdrHistogram percentiles (lg_write_hgrm) */
	const char *html;	/* self-contained report (lg_report_html) */
	int quiet;		/* no text summary */
};

/* Run cfg (lg_run) and write every output. 0; 1 when the run or an output
 * failed (said on stderr). cfg is the caller's; nothing is kept. */
int lg_bench(const struct lg_config *cfg, const struct lg_outputs *out);

/* An output file for flag (for messages): stdout for "-"; NULL with a
 * message on stderr when it cannot be created. lg_out_close flushes or
 * closes it: 0 or -EIO (said on stderr). */
FILE *lg_out_open(const char *path, const char *flag);
int lg_out_close(FILE *f, const char *path);

#endif
