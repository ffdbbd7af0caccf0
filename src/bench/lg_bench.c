/* lg_bench.c — one `zerohop bench` run: the engine (lg_run.c), then the
 * text summary and every requested output (formats in lg_out.c and
 * lg_html.c). The command line is parsed in lg_cli.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "zerohop/bench.h"

FILE *lg_out_open(const char *path, const char *flag)
{
	FILE *f;

	if (!strcmp(path, "-"))
		return stdout;
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "zerohop bench: %s %s: %s\n", flag, path, strerror(errno));
	return f;
}

int lg_out_close(FILE *f, const char *path)
{
	int bad = ferror(f);

	if (f == stdout)
		return fflush(f) || bad ? -EIO : 0;
	if (fclose(f) || bad) {
		fprintf(stderr, "zerohop bench: writing %s failed\n", path);
		return -EIO;
	}
	return 0;
}

/* The run as a one-series report (plus its uncorrected twin in open loop). */
static int write_html(const char *path, const struct lg_config *cfg,
		      const struct lg_result *res)
{
	struct lg_series s = { 0 }, u = { 0 };
	FILE *f = lg_out_open(path, "--html");
	uint64_t e = 0;
	int err;

	if (!f)
		return -EIO;
	for (int i = 0; i < LG_ERR__COUNT; i++)
		e += res->errors[i];
	lg_series_from_hist(&s, res->lat);
	snprintf(s.label, sizeof(s.label), "%.200s", cfg->label ? cfg->label : cfg->url);
	snprintf(s.mode, sizeof(s.mode), "%s", lg_mode_str(cfg));
	s.requested_qps = cfg->qps;
	s.duration_s = (double)res->duration_ns / 1e9;
	s.actual_qps = s.duration_s > 0 ? (double)res->responses / s.duration_s : 0;
	s.errors = e;
	if (cfg->qps > 0) {
		u = s;
		lg_series_from_hist(&u, res->ulat);
		snprintf(u.label, sizeof(u.label), "%.200s (uncorrected)", s.label);
		snprintf(u.mode, sizeof(u.mode), "uncorrected: from the actual send");
		s.uncorrected = &u;
	}
	err = lg_report_html(f, cfg->label ? cfg->label : cfg->url, &s, 1);
	s.uncorrected = NULL;
	lg_series_free(&s);
	lg_series_free(&u);
	if (lg_out_close(f, path) || err)
		return -EIO;
	return 0;
}

int lg_bench(const struct lg_config *cfg, const struct lg_outputs *out)
{
	struct lg_result res = { 0 };
	FILE *txt, *f;
	int rc = 1, err;

	err = lg_run(cfg, &res);
	if (err) {
		fprintf(stderr, "zerohop bench: run failed: %s\n", strerror(-err));
		goto out;
	}
	/* text goes to stdout unless a machine format took stdout */
	txt = (out->json && !strcmp(out->json, "-")) || (out->hgrm && !strcmp(out->hgrm, "-")) ?
	      stderr : stdout;
	if (!out->quiet)
		lg_print_text(txt, cfg, &res);
	if (out->json) {
		f = lg_out_open(out->json, "--json");
		if (!f || lg_write_json(f, cfg, &res) || lg_out_close(f, out->json))
			goto out;
	}
	if (out->hgrm) {
		f = lg_out_open(out->hgrm, "--hgrm");
		if (!f || lg_write_hgrm(f, res.lat) || lg_out_close(f, out->hgrm))
			goto out;
	}
	if (out->html && write_html(out->html, cfg, &res))
		goto out;
	rc = 0;
out:
	if (res.lat)
		lg_result_free(&res);
	return rc;
}
