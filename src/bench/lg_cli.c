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
		FILE *f = lg_out_open(html, "--html");

		if (!f || lg_report_html(f, title, s, n) || lg_out_close(f, html))
			goto out;
	}
	rc = 0;
out:
	for (size_t i = 0; i < n; i++)
		lg_series_free(&s[i]);
	free(s);
	return rc;
}

/* ---- the option table of `zerohop bench` ---- */

/* Everything the flags set: the run's config and where its results go. */
struct bench_args {
	struct lg_config cfg;
	struct lg_outputs out;
	const char *url;
	char **headers;		/* -H values, argv strings; array owned */
	char *body_file;	/* --body-file contents, owned */
	int t_set;		/* -t given (else -n alone runs until N requests) */
};

/* A setter stores one flag's value (v NULL for a flag without one):
 * 0, or -EINVAL for a bad value ("bad value" message), or -EIO when it
 * already said why. */
typedef int (*opt_set_fn)(struct bench_args *a, const char *v);

static int set_conns(struct bench_args *a, const char *v)
{
	double d;

	if (parse_num(v, 1, 100000, &d))
		return -EINVAL;
	a->cfg.conns = (int)d;
	return 0;
}

static int set_duration(struct bench_args *a, const char *v)
{
	a->t_set = 1;
	return parse_dur(v, &a->cfg.duration_ns);
}

static int set_requests(struct bench_args *a, const char *v)
{
	double d;

	if (parse_num(v, 1, 1e15, &d))
		return -EINVAL;
	a->cfg.requests = (uint64_t)d;
	return 0;
}

static int set_qps(struct bench_args *a, const char *v)
{
	return parse_num(v, 0, 1e8, &a->cfg.qps);
}

static int set_threads(struct bench_args *a, const char *v)
{
	double d;

	if (parse_num(v, 1, 256, &d))
		return -EINVAL;
	a->cfg.threads = (int)d;
	return 0;
}

static int set_warmup(struct bench_args *a, const char *v)
{
	return parse_dur(v, &a->cfg.warmup_ns);
}

static int set_timeout(struct bench_args *a, const char *v)
{
	return parse_dur(v, &a->cfg.timeout_ns) || !a->cfg.timeout_ns ? -EINVAL : 0;
}

static int set_spin(struct bench_args *a, const char *v)
{
	return parse_dur(v, &a->cfg.spin_ns);
}

static int set_nice(struct bench_args *a, const char *v)
{
	double d;

	if (parse_num(v, -20, 19, &d))
		return -EINVAL;
	a->cfg.nice = (int)d;
	return 0;
}

static int set_keepalive_off(struct bench_args *a, const char *v)
{
	a->cfg.keepalive = 0;
	return 0;
}

static int set_keepalive_on(struct bench_args *a, const char *v)
{
	a->cfg.keepalive = 1;
	return 0;
}

static int set_method(struct bench_args *a, const char *v)
{
	if (!*v || strpbrk(v, " \t\r\n"))
		return -EINVAL;
	a->cfg.method = v;
	return 0;
}

static int set_header(struct bench_args *a, const char *v)
{
	if (!strchr(v, ':') || strpbrk(v, "\r\n") || *v == ':')
		return -EINVAL;
	a->headers[a->cfg.nheaders++] = (char *)v;
	return 0;
}

static int set_body(struct bench_args *a, const char *v)
{
	a->cfg.body = v;
	a->cfg.body_len = strlen(v);
	return 0;
}

static int set_body_file(struct bench_args *a, const char *v)
{
	free(a->body_file);
	a->body_file = read_file(v, &a->cfg.body_len);
	if (!a->body_file) {
		fprintf(stderr, "zerohop bench: --body-file %s: %s\n", v, strerror(errno));
		return -EIO;
	}
	a->cfg.body = a->body_file;
	return 0;
}

static int set_payload(struct bench_args *a, const char *v)
{
	double d;

	if (parse_num(v, 1, 64 << 20, &d))
		return -EINVAL;
	a->cfg.payload_size = (size_t)d;
	return 0;
}

static int set_json(struct bench_args *a, const char *v)
{
	a->out.json = v;
	return 0;
}

static int set_hgrm(struct bench_args *a, const char *v)
{
	a->out.hgrm = v;
	return 0;
}

static int set_html(struct bench_args *a, const char *v)
{
	a->out.html = v;
	return 0;
}

static int set_label(struct bench_args *a, const char *v)
{
	a->cfg.label = v;
	return 0;
}

static int set_quiet(struct bench_args *a, const char *v)
{
	a->out.quiet = 1;
	return 0;
}

/* Each flag once, with its other spellings; usage() describes them. */
static const struct bench_opt {
	const char *names[3];	/* spellings, NULL-padded */
	int has_value;
	opt_set_fn set;
} bench_opts[] = {
	{ { "-c" }, 1, set_conns },
	{ { "-t" }, 1, set_duration },
	{ { "-n" }, 1, set_requests },
	{ { "-qps", "--qps" }, 1, set_qps },
	{ { "--threads" }, 1, set_threads },
	{ { "--warmup" }, 1, set_warmup },
	{ { "--timeout" }, 1, set_timeout },
	{ { "--spin" }, 1, set_spin },
	{ { "--nice" }, 1, set_nice },
	{ { "--keepalive=false", "--keepalive=0" }, 0, set_keepalive_off },
	{ { "--keepalive=true", "--keepalive", "--keepalive=1" }, 0, set_keepalive_on },
	{ { "-X" }, 1, set_method },
	{ { "-H" }, 1, set_header },
	{ { "--body" }, 1, set_body },
	{ { "--body-file" }, 1, set_body_file },
	{ { "--payload-size" }, 1, set_payload },
	{ { "--json" }, 1, set_json },
	{ { "--hgrm" }, 1, set_hgrm },
	{ { "--html" }, 1, set_html },
	{ { "--label" }, 1, set_label },
	{ { "--quiet", "-q" }, 0, set_quiet },
};

static const struct bench_opt *find_opt(const char *flag)
{
	for (size_t i = 0; i < sizeof(bench_opts) / sizeof(bench_opts[0]); i++)
		for (int k = 0; k < 3 && bench_opts[i].names[k]; k++)
			if (!strcmp(flag, bench_opts[i].names[k]))
				return &bench_opts[i];
	return NULL;
}

/* The defaults of usage(). */
static void bench_defaults(struct bench_args *a, char **headers)
{
	a->cfg.conns = 16;
	a->cfg.threads = 1;
	a->cfg.duration_ns = 5000000000ULL;
	a->cfg.timeout_ns = 10000000000ULL;
	a->cfg.spin_ns = 50000;
	a->cfg.keepalive = 1;
	a->cfg.method = "GET";
	a->cfg.payload_size = 1024;
	a->cfg.headers = a->headers = headers;
}

/* argv into a through the table. 0; 1 after --help; -1 on an error (said). */
static int parse_args(int argc, char **argv, struct bench_args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = NULL;
		const struct bench_opt *o;
		int err;

		if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
			usage(stdout);
			return 1;
		}
		if (f[0] != '-') {
			if (a->url) {
				fprintf(stderr, "zerohop bench: more than one URL ('%s', '%s')\n",
					a->url, f);
				return -1;
			}
			a->url = f;
			continue;
		}
		o = find_opt(f);
		if (!o) {
			fprintf(stderr, "zerohop bench: unknown flag '%s' (see zerohop bench --help)\n",
				f);
			return -1;
		}
		if (o->has_value) {
			if (i + 1 >= argc) {
				fprintf(stderr, "zerohop bench: %s needs a value\n", f);
				return -1;
			}
			v = argv[++i];
		}
		err = o->set(a, v);
		if (err == -EINVAL)
			fprintf(stderr, "zerohop bench: %s: bad value '%s'\n", f, v);
		if (err)
			return -1;
	}
	return 0;
}

/* The combinations no single flag can judge. 0 or -1 (said). */
static int check_args(struct bench_args *a)
{
	struct lg_config *cfg = &a->cfg;

	if (!a->url) {
		usage(stderr);
		return -1;
	}
	if (parse_url(a->url, cfg))
		return -1;
	if (cfg->requests && !a->t_set)
		cfg->duration_ns = 0;	/* -n alone: run until N requests */
	if (!cfg->duration_ns && !cfg->requests) {
		fprintf(stderr, "zerohop bench: -t 0 needs -n N\n");
		return -1;
	}
	if (cfg->threads > cfg->conns) {
		fprintf(stderr, "zerohop bench: --threads %d is more than -c %d connections\n",
			cfg->threads, cfg->conns);
		return -1;
	}
	if (cfg->tcp && (cfg->body || cfg->nheaders || strcmp(cfg->method, "GET"))) {
		fprintf(stderr, "zerohop bench: -X/-H/--body are for http://; tcp:// sends "
			"--payload-size bytes\n");
		return -1;
	}
	if (!cfg->keepalive && cfg->tcp) {
		fprintf(stderr, "zerohop bench: --keepalive=false is for http:// only\n");
		return -1;
	}
	return 0;
}

int cli_bench(int argc, char **argv)
{
	struct bench_args a = { 0 };
	int rc;

	if (argc >= 2 && !strcmp(argv[1], "report"))
		return cmd_report(argc - 1, argv + 1);
	bench_defaults(&a, zh_calloc((size_t)argc + 1, sizeof(char *)));
	rc = parse_args(argc, argv, &a);
	if (rc)
		rc = rc > 0 ? 0 : 2;
	else if (check_args(&a))
		rc = 2;
	else {
		a.cfg.progress = !a.out.quiet && isatty(2);
		rc = lg_bench(&a.cfg, &a.out);
	}
	free(a.body_file);
	free(a.headers);
	return rc;
}
