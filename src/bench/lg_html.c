/* lg_html.c — reports over one or more runs: a text table and a
 * self-contained HTML page (inline SVG, no scripts, no network) with the
 * percentile spectrum (HdrHistogram plotter style: x = 1/(1-p) on a log
 * scale, 0 .. 99.999 %) and the latency histogram (log-scaled latency
 * axis) of every run, overlaid (contract in bench.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/bench.h"
#include "zerohop/log.h"

static const char *const palette[] = {
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
};
#define NCOLORS (sizeof(palette) / sizeof(palette[0]))

/* chart geometry */
#define W	860
#define H	380
#define ML	70	/* margins: left, right, top, bottom */
#define MR	40
#define MT	20
#define MB	50
#define PW	(W - ML - MR)
#define PH	(H - MT - MB)

#define SPECTRUM_MAX_X 5.0	/* log10(1 / (1 - 0.99999)) */

int lg_report_text(FILE *f, const struct lg_series *s, size_t n)
{
	static const char *const cols[] = { "p50", "p75", "p90", "p99", "p99.9", "p99.99", "max" };

	fprintf(f, "%-28s %10s %11s", "run (latency in ms)", "count", "req/s");
	for (int i = 0; i < 7; i++)
		fprintf(f, " %9s", cols[i]);
	fprintf(f, " %8s\n", "errors");
	for (size_t k = 0; k < n; k++) {
		for (int u = 0; u < 2; u++) {
			const struct lg_series *x = u ? s[k].uncorrected : &s[k];

			if (!x)
				continue;
			fprintf(f, "%-28.28s %10llu %11.1f", x->label, (unsigned long long)x->count,
				s[k].actual_qps);
			for (int i = 0; i < 7; i++)
				fprintf(f, " %9.3f", x->p[i] * 1e3);
			fprintf(f, " %8llu\n", (unsigned long long)s[k].errors);
		}
		if (s[k].mode[0])
			fprintf(f, "  %s: %s\n", s[k].label, s[k].mode);
	}
	if (n >= 2 && s[0].has_p) {
		fprintf(f, "\nratio to %s (p50, p99, p99.9, req/s):\n", s[0].label);
		for (size_t k = 1; k < n; k++)
			fprintf(f, "  %-26.26s %7.3fx %7.3fx %7.3fx %7.3fx\n", s[k].label,
				s[0].p[0] > 0 ? s[k].p[0] / s[0].p[0] : 0,
				s[0].p[3] > 0 ? s[k].p[3] / s[0].p[3] : 0,
				s[0].p[4] > 0 ? s[k].p[4] / s[0].p[4] : 0,
				s[0].actual_qps > 0 ? s[k].actual_qps / s[0].actual_qps : 0);
	}
	return ferror(f) ? -EIO : 0;
}

static void html_text(FILE *f, const char *t)
{
	for (; *t; t++) {
		switch (*t) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*t, f);
		}
	}
}

/* A "nice" step for an axis spanning max: 1, 2 or 5 × 10^k, ~5 ticks. */
static double nice_step(double max)
{
	double raw = max / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;

	return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

static double spectrum_x(double pct)
{
	double q;

	if (pct > 99.999)
		pct = 99.999;
	if (pct < 0)
		pct = 0;
	q = log10(1 / (1 - pct / 100));
	return ML + q / SPECTRUM_MAX_X * PW;
}

static void list_items(FILE *f, const struct lg_series **v, size_t nv)
{
	fputs("<g font-size=\"12\">\n", f);
	for (size_t i = 0; i < nv; i++) {
		fprintf(f, "<rect x=\"%d\" y=\"%zu\" width=\"14\" height=\"4\" fill=\"%s\"/>", ML + 10,
			(size_t)MT + 8 + 16 * i, palette[i % NCOLORS]);
		fprintf(f, "<text x=\"%d\" y=\"%zu\">", ML + 30, (size_t)MT + 14 + 16 * i);
		html_text(f, v[i]->label);
		fputs("</text>\n", f);
	}
	fputs("</g>\n", f);
}

static void spectrum_svg(FILE *f, const struct lg_series **v, size_t nv)
{
	static const double ticks[] = { 0, 90, 99, 99.9, 99.99, 99.999 };
	double ymax = 0, step;

	for (size_t i = 0; i < nv; i++)
		if (v[i]->max > ymax)
			ymax = v[i]->max;
	ymax *= 1e3;	/* ms */
	if (ymax <= 0)
		ymax = 1;
	step = nice_step(ymax);
	ymax = ceil(ymax / step) * step;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"latency by percentile\">\n",
		W, H, W, H);
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
		"stroke=\"#999\"/>\n", ML, MT, PW, PH);
	fputs("<g font-size=\"11\" fill=\"#333\">\n", f);
	for (size_t i = 0; i < sizeof(ticks) / sizeof(ticks[0]); i++) {
		double x = spectrum_x(ticks[i]);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g%%</text>\n",
			x, MT, x, MT + PH, x, MT + PH + 16, ticks[i]);
	}
	for (double y = 0; y <= ymax + step / 2; y += step) {
		double py = MT + PH - y / ymax * PH;

		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>"
			"<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
			ML, py, ML + PW, py, ML - 6, py + 4, y);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">percentile</text>\n",
		ML + PW / 2, H - 8);
	fprintf(f, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
		"text-anchor=\"middle\">latency (ms)</text>\n</g>\n", MT + PH / 2, MT + PH / 2);
	for (size_t i = 0; i < nv; i++) {
		double prev = 0;

		fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"%s\" points=\"",
			palette[i % NCOLORS]);
		for (size_t b = 0; b < v[i]->nbins; b++) {
			double y = MT + PH - v[i]->bins[b].end * 1e3 / ymax * PH;

			fprintf(f, "%.1f,%.1f %.1f,%.1f ", spectrum_x(prev), y,
				spectrum_x(v[i]->bins[b].percent), y);
			prev = v[i]->bins[b].percent;
		}
		fputs("\"/>\n", f);
	}
	list_items(f, v, nv);
	fputs("</svg>\n", f);
}

#define HBINS_PER_DECADE 20

static void histogram_svg(FILE *f, const struct lg_series **v, size_t nv)
{
	double lo = INFINITY, hi = 0, ymax = 0, step;
	double *share;
	int nb;

	for (size_t i = 0; i < nv; i++) {
		for (size_t b = 0; b < v[i]->nbins; b++) {
			double s = v[i]->bins[b].start > 1e-9 ? v[i]->bins[b].start : 1e-9;

			if (s < lo)
				lo = s;
			if (v[i]->bins[b].end > hi)
				hi = v[i]->bins[b].end;
		}
	}
	if (!(hi > 0)) {
		lo = 1e-6;
		hi = 1e-3;
	}
	lo = pow(10, floor(log10(lo)));
	hi = pow(10, ceil(log10(hi * 1.0001)));
	nb = (int)lround(log10(hi / lo) * HBINS_PER_DECADE);
	if (nb < 1)
		nb = 1;
	share = zh_calloc(nv * (size_t)nb, sizeof(*share));
	for (size_t i = 0; i < nv; i++) {
		uint64_t total = 0;

		for (size_t b = 0; b < v[i]->nbins; b++)
			total += v[i]->bins[b].count;
		for (size_t b = 0; b < v[i]->nbins && total; b++) {
			double mid = (v[i]->bins[b].start + v[i]->bins[b].end) / 2;
			int k = (int)floor(log10((mid > lo ? mid : lo) / lo) * HBINS_PER_DECADE);

			k = k < 0 ? 0 : k >= nb ? nb - 1 : k;
			share[i * (size_t)nb + (size_t)k] += 100.0 * (double)v[i]->bins[b].count /
							     (double)total;
		}
		for (int k = 0; k < nb; k++)
			if (share[i * (size_t)nb + (size_t)k] > ymax)
				ymax = share[i * (size_t)nb + (size_t)k];
	}
	if (ymax <= 0)
		ymax = 1;
	step = nice_step(ymax);
	ymax = ceil(ymax / step) * step;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"latency histogram\">\n",
		W, H, W, H);
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
		"stroke=\"#999\"/>\n<g font-size=\"11\" fill=\"#333\">\n", ML, MT, PW, PH);
	for (double d = lo; d <= hi * 1.0001; d *= 10) {
		double x = ML + log10(d / lo) / log10(hi / lo) * PW;
		char lab[32];

		if (d < 1e-6)
			snprintf(lab, sizeof(lab), "%gns", d * 1e9);
		else if (d < 1e-3)
			snprintf(lab, sizeof(lab), "%gus", d * 1e6);
		else if (d < 1)
			snprintf(lab, sizeof(lab), "%gms", d * 1e3);
		else
			snprintf(lab, sizeof(lab), "%gs", d);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
			x, MT, x, MT + PH, x, MT + PH + 16, lab);
	}
	for (double y = 0; y <= ymax + step / 2; y += step) {
		double py = MT + PH - y / ymax * PH;

		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>"
			"<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
			ML, py, ML + PW, py, ML - 6, py + 4, y);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">latency (log scale)</text>\n",
		ML + PW / 2, H - 8);
	fprintf(f, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
		"text-anchor=\"middle\">%% of requests per bin (%d bins/decade)</text>\n</g>\n",
		MT + PH / 2, MT + PH / 2, HBINS_PER_DECADE);
	for (size_t i = 0; i < nv; i++) {
		fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"%s\" points=\"",
			palette[i % NCOLORS]);
		for (int k = 0; k < nb; k++) {
			double x0 = ML + (double)k / nb * PW, x1 = ML + (double)(k + 1) / nb * PW;
			double y = MT + PH - share[i * (size_t)nb + (size_t)k] / ymax * PH;

			fprintf(f, "%.1f,%.1f %.1f,%.1f ", x0, y, x1, y);
		}
		fputs("\"/>\n", f);
	}
	list_items(f, v, nv);
	fputs("</svg>\n", f);
	free(share);
}

int lg_report_html(FILE *f, const char *title, const struct lg_series *s, size_t n)
{
	static const char *const cols[] = { "p50", "p75", "p90", "p99", "p99.9", "p99.99", "max" };
	const struct lg_series **v = zh_calloc(2 * n + 1, sizeof(*v));
	size_t nv = 0;

	for (size_t i = 0; i < n; i++) {
		v[nv++] = &s[i];
		if (s[i].uncorrected)
			v[nv++] = s[i].uncorrected;
	}
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>", f);
	html_text(f, title);
	fputs("</title>\n<style>\nbody{font-family:sans-serif;margin:2em;color:#222}\n"
	      "table{border-collapse:collapse;margin:1em 0}\n"
	      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\n"
	      "td:first-child,th:first-child{text-align:left}\nsvg{display:block;margin:1em 0}\n"
	      "td.mode{text-align:left;font-size:smaller;max-width:16em}\nth{font-size:smaller}\n"
	      "</style>\n</head>\n<body>\n<h1>", f);
	html_text(f, title);
	fputs("</h1>\n<table>\n<tr><th>run</th><th>mode</th><th>count</th><th>req/s</th>", f);
	for (int i = 0; i < 7; i++)
		fprintf(f, "<th>%s (ms)</th>", cols[i]);
	fputs("<th>errors</th></tr>\n", f);
	for (size_t i = 0; i < nv; i++) {
		const struct lg_series *x = v[i];

		fprintf(f, "<tr><td><span style=\"color:%s\">&#9632;</span> ", palette[i % NCOLORS]);
		html_text(f, x->label);
		fputs("</td><td class=\"mode\">", f);
		html_text(f, x->mode);
		fprintf(f, "</td><td>%llu</td><td>%.1f</td>", (unsigned long long)x->count,
			x->actual_qps);
		for (int k = 0; k < 7; k++)
			fprintf(f, "<td>%.3f</td>", x->p[k] * 1e3);
		fprintf(f, "<td>%llu</td></tr>\n", (unsigned long long)x->errors);
	}
	fputs("</table>\n<h2>Latency by percentile</h2>\n", f);
	spectrum_svg(f, v, nv);
	fputs("<h2>Latency distribution</h2>\n", f);
	histogram_svg(f, v, nv);
	fputs("<p>Percentiles are upper bounds within 0.1 % (HDR histogram, 3 significant "
	      "digits). Open-loop runs are corrected for coordinated omission: latency counts "
	      "from the intended send time.</p>\n</body>\n</html>\n", f);
	free(v);
	return ferror(f) ? -EIO : 0;
}
