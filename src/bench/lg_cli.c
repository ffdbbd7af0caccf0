/* lg_cli.c — `zerohop bench` and `zerohop bench report`: flags, URL,
 * outputs (the engine is lg_run.c, the formats lg_out.c / lg_html.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zerohop/bench.h"
#include "zerohop/cli.h"
#include "zerohop/log.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: zerohop bench [flags] http://HOST:PORT/PATH | tcp://HOST:PORT\n"
"       zerohop bench report A.json B.json ... [--html OUT] [--labels L1,L2,...] [--title T]\n"
"\n"
"load:\n"
"  -c N              connections (default 16)\n"
"  -t DURATION       measured duration (default 5s; 0 with -n: until N requests)\n"
"  -n N              stop after N measured requests\n"
"  -qps N            total requests/s, open loop (latency corrected for coordinated\n"
"                    omission); 0 = closed loop at maximum rate (default 0)\n"
"  --threads N       threads, each with its own loop and connections (default 1)\n"
"  --warmup DURATION load before the measured phase, not recorded (default 0)\n"
"  --keepalive=false new TCP connection per request (default true)\n"
"  --timeout DURATION per request, from its actual start (default 10s)\n"
"  --spin DURATION   busy-wait sends due sooner than this, open loop (default 50us)\n"
"  --nice N          nice value of the load threads (-20..19; root for < 0)\n"
"request:\n"
"  -X METHOD         (default GET)    -H 'Name: value'  (repeatable)\n"
"  --body STRING     --body-file FILE --payload-size N  (tcp echo, default 1024)\n"
"output:\n"
"  --json FILE|-     fortio-compatible JSON   --hgrm FILE|-  HdrHistogram percentiles\n"
"  --html FILE       self-contained report     --label TEXT   --quiet\n"
"DURATION: 1500ms, 2s, 100us, 1m; a bare number is seconds.\n");
}

/* Parse "1.5s", "200ms", "100us", "10ns", "1m", "3" (s). 0 or -EINVAL. */
static int parse_dur(const char *s, uint64_t *ns)
{
	char *end;
	double v = strtod(s, &end), mul;

	if (end == s || v < 0)
		return -EINVAL;
	if (!*end || !strcmp(end, "s"))
		mul = 1e9;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "us") || !strcmp(end, "µs"))
		mul = 1e3;
	else if (!strcmp(end, "ns"))
		mul = 1;
	else if (!strcmp(end, "m"))
		mul = 60e9;
	else if (!strcmp(end, "h"))
		mul = 3600e9;
	else
		return -EINVAL;
	*ns = (uint64_t)(v * mul + 0.5);
	return 0;
}

static int parse_num(const char *s, double min, double max, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* http://HOST[:PORT][/PATH] or tcp://HOST[:PORT]; HOST may be [v6]. */
static int parse_url(const char *url, struct lg_config *cfg)
{
	const char *p, *hs, *he, *path;
	char host[256], port[16];
	struct addrinfo hints = { 0 }, *ai = NULL;
	int err;

	snprintf(cfg->url, sizeof(cfg->url), "%s", url);
	if (!strncmp(url, "http://", 7)) {
		p = url + 7;
		snprintf(port, sizeof(port), "80");
	} else if (!strncmp(url, "tcp://", 6)) {
		p = url + 6;
		cfg->tcp = 1;
		snprintf(port, sizeof(port), "8078");
	} else {
		fprintf(stderr, "zerohop bench: URL '%s': scheme must be http:// or tcp:// "
			"(https is not supported)\n", url);
		return -EINVAL;
	}
	hs = p;
	if (*p == '[') {
		he = strchr(p, ']');
		if (!he) {
			fprintf(stderr, "zerohop bench: URL '%s': missing ']'\n", url);
			return -EINVAL;
		}
		hs = p + 1;
		p = he + 1;
	} else {
		he = p + strcspn(p, ":/?");
		p = he;
	}
	if (he == hs || (size_t)(he - hs) >= sizeof(host)) {
		fprintf(stderr, "zerohop bench: URL '%s': bad host\n", url);
		return -EINVAL;
	}
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = 0;
	if (*p == ':') {
		size_t n = strspn(p + 1, "0123456789");

		if (!n || n >= sizeof(port) || (p[1 + n] && !strchr("/?", p[1 + n]))) {
			fprintf(stderr, "zerohop bench: URL '%s': bad port\n", url);
			return -EINVAL;
		}
		memcpy(port, p + 1, n);
		port[n] = 0;
		if (atoi(port) < 1 || atoi(port) > 65535) {
			fprintf(stderr, "zerohop bench: URL '%s': port %s out of range\n", url, port);
			return -EINVAL;
		}
		p += 1 + n;
	}
	path = *p ? p : "/";
	if (cfg->tcp && *p && strcmp(p, "/")) {
		fprintf(stderr, "zerohop bench: URL '%s': tcp:// takes no path\n", url);
		return -EINVAL;
	}
	if (*path == '?')
		snprintf(cfg->target, sizeof(cfg->target), "/%s", path);
	else
		snprintf(cfg->target, sizeof(cfg->target), "%s", path);
	/* Host header: as written in the URL */
	snprintf(cfg->host, sizeof(cfg->host), "%.*s", (int)(p - (url + (cfg->tcp ? 6 : 7))),
		 url + (cfg->tcp ? 6 : 7));
	hints.ai_socktype = SOCK_STREAM;
	err = getaddrinfo(host, port, &hints, &ai);
	if (err) {
		fprintf(stderr, "zerohop bench: URL '%s': %s\n", url, gai_strerror(err));
		return -EINVAL;
	}
	memcpy(&cfg->addr, ai->ai_addr, ai->ai_addrlen);
	cfg->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	size_t cap = 0, n = 0, r;

	if (!f)
		return NULL;
	do {
		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 8192;
			b = zh_realloc(b, cap);
		}
		r = fread(b + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	*len = n;
	return b;
}

static FILE *open_out(const char *path, const char *flag)
{
	FILE *f;

	if (!strcmp(path, "-"))
		return stdout;
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "zerohop bench: %s %s: %s\n", flag, path, strerror(errno));
	return f;
}

static int close_out(FILE *f, const char *path)
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

static int cmd_report(int argc, char **argv)
{
	struct lg_series *s = zh_calloc((size_t)argc, sizeof(*s));
	const char *html = NULL, *labels = NULL, *title = "zerohop bench report";
	size_t n = 0;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if ((!strcmp(argv[i], "--html") || !strcmp(argv[i], "--labels") ||
		     !strcmp(argv[i], "--title")) && i + 1 >= argc) {
			fprintf(stderr, "zerohop bench report: %s needs a value\n", argv[i]);
			goto out;
		}
		if (!strcmp(argv[i], "--html")) {
			html = argv[++i];
		} else if (!strcmp(argv[i], "--labels")) {
			labels = argv[++i];
		} else if (!strcmp(argv[i], "--title")) {
			title = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "zerohop bench report: unknown flag '%s'\n", argv[i]);
			goto out;
		} else {
			if (lg_series_read_json(argv[i], &s[n]))
				goto out;
			n++;
		}
	}
	if (!n) {
		fprintf(stderr, "zerohop bench report: no JSON files given\n");
		goto out;
	}
	for (size_t i = 0; labels && *labels && i < n; i++) {
		size_t l = strcspn(labels, ",");

		snprintf(s[i].label, sizeof(s[i].label), "%.*s", (int)l, labels);
		if (s[i].uncorrected)
			snprintf(s[i].uncorrected->label, sizeof(s[i].uncorrected->label),
				 "%.*s (uncorrected)", (int)l, labels);
		labels += l + (labels[l] == ',');
	}
	lg_report_text(stdout, s, n);
	if (html) {
		FILE *f = open_out(html, "--html");

		if (!f || lg_report_html(f, title, s, n) || close_out(f, html))
			goto out;
	}
	rc = 0;
out:
	for (size_t i = 0; i < n; i++)
		lg_series_free(&s[i]);
	free(s);
	return rc;
}

#define NEED_ARG() do {								\
	if (i + 1 >= argc) {							\
		fprintf(stderr, "zerohop bench: %s needs a value\n", a);	\
		goto out;							\
	}									\
	v = argv[++i];								\
} while (0)

int cli_bench(int argc, char **argv)
{
	struct lg_config cfg = { 0 };
	struct lg_result res = { 0 };
	const char *json = NULL, *hgrm = NULL, *html = NULL, *url = NULL, *v;
	char **headers = zh_calloc((size_t)argc + 1, sizeof(char *));
	char *body_file = NULL;
	int quiet = 0, rc = 2, err, t_set = 0;
	double d;
	FILE *txt;

	if (argc >= 2 && !strcmp(argv[1], "report")) {
		free(headers);
		return cmd_report(argc - 1, argv + 1);
	}
	cfg.conns = 16;
	cfg.threads = 1;
	cfg.duration_ns = 5000000000ULL;
	cfg.timeout_ns = 10000000000ULL;
	cfg.spin_ns = 50000;
	cfg.keepalive = 1;
	cfg.method = "GET";
	cfg.payload_size = 1024;
	cfg.headers = headers;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			rc = 0;
			goto out;
		} else if (!strcmp(a, "-c")) {
			NEED_ARG();
			if (parse_num(v, 1, 100000, &d))
				goto bad;
			cfg.conns = (int)d;
		} else if (!strcmp(a, "-t")) {
			NEED_ARG();
			if (parse_dur(v, &cfg.duration_ns))
				goto bad;
			t_set = 1;
		} else if (!strcmp(a, "-n")) {
			NEED_ARG();
			if (parse_num(v, 1, 1e15, &d))
				goto bad;
			cfg.requests = (uint64_t)d;
		} else if (!strcmp(a, "-qps") || !strcmp(a, "--qps")) {
			NEED_ARG();
			if (parse_num(v, 0, 1e8, &cfg.qps))
				goto bad;
		} else if (!strcmp(a, "--threads")) {
			NEED_ARG();
			if (parse_num(v, 1, 256, &d))
				goto bad;
			cfg.threads = (int)d;
		} else if (!strcmp(a, "--warmup")) {
			NEED_ARG();
			if (parse_dur(v, &cfg.warmup_ns))
				goto bad;
		} else if (!strcmp(a, "--timeout")) {
			NEED_ARG();
			if (parse_dur(v, &cfg.timeout_ns) || !cfg.timeout_ns)
				goto bad;
		} else if (!strcmp(a, "--spin")) {
			NEED_ARG();
			if (parse_dur(v, &cfg.spin_ns))
				goto bad;
		} else if (!strcmp(a, "--nice")) {
			NEED_ARG();
			if (parse_num(v, -20, 19, &d))
				goto bad;
			cfg.nice = (int)d;
		} else if (!strcmp(a, "--keepalive=false") || !strcmp(a, "--keepalive=0")) {
			cfg.keepalive = 0;
		} else if (!strcmp(a, "--keepalive=true") || !strcmp(a, "--keepalive") ||
			   !strcmp(a, "--keepalive=1")) {
			cfg.keepalive = 1;
		} else if (!strcmp(a, "-X")) {
			NEED_ARG();
			if (!*v || strpbrk(v, " \t\r\n"))
				goto bad;
			cfg.method = v;
		} else if (!strcmp(a, "-H")) {
			NEED_ARG();
			if (!strchr(v, ':') || strpbrk(v, "\r\n") || *v == ':')
				goto bad;
			headers[cfg.nheaders++] = (char *)v;
		} else if (!strcmp(a, "--body")) {
			NEED_ARG();
			cfg.body = v;
			cfg.body_len = strlen(v);
		} else if (!strcmp(a, "--body-file")) {
			NEED_ARG();
			free(body_file);
			body_file = read_file(v, &cfg.body_len);
			if (!body_file) {
				fprintf(stderr, "zerohop bench: --body-file %s: %s\n", v,
					strerror(errno));
				goto out;
			}
			cfg.body = body_file;
		} else if (!strcmp(a, "--payload-size")) {
			NEED_ARG();
			if (parse_num(v, 1, 64 << 20, &d))
				goto bad;
			cfg.payload_size = (size_t)d;
		} else if (!strcmp(a, "--json")) {
			NEED_ARG();
			json = v;
		} else if (!strcmp(a, "--hgrm")) {
			NEED_ARG();
			hgrm = v;
		} else if (!strcmp(a, "--html")) {
			NEED_ARG();
			html = v;
		} else if (!strcmp(a, "--label")) {
			NEED_ARG();
			cfg.label = v;
		} else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			quiet = 1;
		} else if (a[0] == '-') {
			fprintf(stderr, "zerohop bench: unknown flag '%s' (see zerohop bench --help)\n",
				a);
			goto out;
		} else if (url) {
			fprintf(stderr, "zerohop bench: more than one URL ('%s', '%s')\n", url, a);
			goto out;
		} else {
			url = a;
		}
		continue;
bad:
		fprintf(stderr, "zerohop bench: %s: bad value '%s'\n", a, v);
		goto out;
	}
	if (!url) {
		usage(stderr);
		goto out;
	}
	if (parse_url(url, &cfg))
		goto out;
	if (cfg.requests && !t_set)
		cfg.duration_ns = 0;	/* -n alone: run until N requests */
	if (!cfg.duration_ns && !cfg.requests) {
		fprintf(stderr, "zerohop bench: -t 0 needs -n N\n");
		goto out;
	}
	if (cfg.threads > cfg.conns) {
		fprintf(stderr, "zerohop bench: --threads %d is more than -c %d connections\n",
			cfg.threads, cfg.conns);
		goto out;
	}
	if (cfg.tcp && (cfg.body || cfg.nheaders || strcmp(cfg.method, "GET"))) {
		fprintf(stderr, "zerohop bench: -X/-H/--body are for http://; tcp:// sends "
			"--payload-size bytes\n");
		goto out;
	}
	if (!cfg.keepalive && cfg.tcp) {
		fprintf(stderr, "zerohop bench: --keepalive=false is for http:// only\n");
		goto out;
	}
	cfg.progress = !quiet && isatty(2);
	rc = 1;
	err = lg_run(&cfg, &res);
	if (err) {
		fprintf(stderr, "zerohop bench: run failed: %s\n", strerror(-err));
		goto out;
	}
	/* text goes to stdout unless a machine format took stdout */
	txt = (json && !strcmp(json, "-")) || (hgrm && !strcmp(hgrm, "-")) ? stderr : stdout;
	if (!quiet)
		lg_print_text(txt, &cfg, &res);
	if (json) {
		FILE *f = open_out(json, "--json");

		if (!f || lg_write_json(f, &cfg, &res) || close_out(f, json))
			goto out;
	}
	if (hgrm) {
		FILE *f = open_out(hgrm, "--hgrm");

		if (!f || lg_write_hgrm(f, res.lat) || close_out(f, hgrm))
			goto out;
	}
	if (html) {
		struct lg_series s = { 0 }, u = { 0 };
		FILE *f = open_out(html, "--html");
		uint64_t e = 0;

		if (!f)
			goto out;
		for (int i = 0; i < LG_ERR__COUNT; i++)
			e += res.errors[i];
		lg_series_from_hist(&s, res.lat);
		snprintf(s.label, sizeof(s.label), "%.200s", cfg.label ? cfg.label : cfg.url);
		snprintf(s.mode, sizeof(s.mode), "%s", lg_mode_str(&cfg));
		s.requested_qps = cfg.qps;
		s.duration_s = (double)res.duration_ns / 1e9;
		s.actual_qps = s.duration_s > 0 ? (double)res.responses / s.duration_s : 0;
		s.errors = e;
		if (cfg.qps > 0) {
			u = s;
			lg_series_from_hist(&u, res.ulat);
			snprintf(u.label, sizeof(u.label), "%.200s (uncorrected)", s.label);
			snprintf(u.mode, sizeof(u.mode), "uncorrected: from the actual send");
			s.uncorrected = &u;
		}
		err = lg_report_html(f, cfg.label ? cfg.label : cfg.url, &s, 1);
		s.uncorrected = NULL;
		lg_series_free(&s);
		lg_series_free(&u);
		if (err || close_out(f, html))
			goto out;
	}
	rc = 0;
out:
	if (res.lat)
		lg_result_free(&res);
	free(body_file);
	free(headers);
	return rc;
}
