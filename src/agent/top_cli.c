/* top_cli.c — `zerohop top`: golden signals per Service (or destination
 * workload) of a lab, like `linkerd viz stat` + `top` (docs/observability.md).
 *
 * Each sample reads every node's agent (/metrics on its unix socket: the
 * L4 series, reporter="source") and node proxy (/metrics on NODE_IP:15090,
 * fetched by a child process in the node's netns: the Istio request
 * series). Rates are the counter differences between two samples over
 * their distance in time; percentiles come from the difference of the
 * request-duration histograms (interpolated inside a bucket, as PromQL's
 * histogram_quantile does). On a terminal the table is redrawn in place
 * every --interval until q, Ctrl-C or --iterations; on a pipe (or with
 * -o json) one table after two samples.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/obs.h"
#include "zerohop/paths.h"
#include "obs_view.h"

#define TOP_PROXY_PORT 15090
#define TOP_MAX_ROWS 512
#define TOP_NB 17	/* duration buckets incl. +Inf (stats.c) */

struct row {
	char key[200];		/* Service FQDN or "ns/workload" */
	char ns[96];
	/* counters summed over nodes */
	double reqs, ok, conns, closed, bytes, drops;
	double le[TOP_NB];	/* bucket upper bounds */
	double cum[TOP_NB];	/* cumulative counts */
	int nb;
};

struct sample {
	struct row rows[TOP_MAX_ROWS];
	int n;
	double t;
};

struct top_opts {
	const char *lab, *ns;
	int by;			/* enum obs_view_by */
	int json;
	const char *sort;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The value of label `name` in a Prometheus label block "{a="x",...}". */
static int label(const char *blk, const char *name, char *out, size_t n)
{
	char pat[64];
	const char *p, *q;

	snprintf(pat, sizeof(pat), "%s=\"", name);
	for (p = blk; (p = strstr(p, pat)); p++)
		if (p == blk || p[-1] == '{' || p[-1] == ',')
			break;
	if (!p)
		return -ENOENT;
	p += strlen(pat);
	q = strchr(p, '"');
	if (!q || (size_t)(q - p) >= n)
		return -ENOENT;
	memcpy(out, p, (size_t)(q - p));
	out[q - p] = '\0';
	return 0;
}

static struct row *row_get(struct sample *s, const char *key, const char *ns)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->rows[i].key, key))
			return &s->rows[i];
	if (s->n == TOP_MAX_ROWS)
		return NULL;
	memset(&s->rows[s->n], 0, sizeof(s->rows[0]));
	snprintf(s->rows[s->n].key, sizeof(s->rows[0].key), "%s", key);
	snprintf(s->rows[s->n].ns, sizeof(s->rows[0].ns), "%s", ns);
	return &s->rows[s->n++];
}

/* Add one /metrics page into s. */
static void parse_page(struct sample *s, const struct top_opts *o, char *page)
{
	char *line, *save = NULL;

	for (line = strtok_r(page, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[96], key[200], ns[96], rep[32] = "", code[8] = "", le[32] = "";
		char svc[200] = "", dwl[96] = "", dwns[96] = "";
		const char *blk = strchr(line, '{'), *end;
		double v;
		struct row *r;
		size_t nl;

		if (line[0] == '#' || !blk)
			continue;
		nl = (size_t)(blk - line);
		if (nl >= sizeof(name))
			continue;
		memcpy(name, line, nl);
		name[nl] = '\0';
		end = strrchr(line, '}');
		if (!end)
			continue;
		v = atof(end + 1);
		if (strncmp(name, "istio_", 6) && strcmp(name, "zerohop_drops_total"))
			continue;
		label(blk, "reporter", rep, sizeof(rep));
		if (rep[0] && strcmp(rep, "source"))
			continue;	/* one side of each connection (no double count) */
		label(blk, "destination_service", svc, sizeof(svc));
		label(blk, "destination_workload", dwl, sizeof(dwl));
		label(blk, "destination_workload_namespace", dwns, sizeof(dwns));
		if (o->by == OBS_BY_EDGE) {
			char sw[96] = "unknown", sns[96] = "unknown";

			label(blk, "source_workload", sw, sizeof(sw));
			label(blk, "source_workload_namespace", sns, sizeof(sns));
			/* to the destination workload when known, else to the
			 * Service (drops, connections still to be resolved) */
			if (dwl[0] && strcmp(dwl, "unknown"))
				snprintf(key, sizeof(key), "%s/%s>%s/%s", sns, sw, dwns, dwl);
			else
				snprintf(key, sizeof(key), "%s/%s>%s", sns, sw, svc);
			snprintf(ns, sizeof(ns), "%s", sns);
		} else if (o->by == OBS_BY_WORKLOAD) {
			if (!dwl[0])
				continue;	/* drops carry no destination workload */
			snprintf(key, sizeof(key), "%s/%s", dwns, dwl);
			snprintf(ns, sizeof(ns), "%s", dwns);
		} else {
			snprintf(key, sizeof(key), "%s", svc);
			if (label(blk, "destination_service_namespace", ns, sizeof(ns)))
				snprintf(ns, sizeof(ns), "unknown");
		}
		if (o->ns && strcmp(ns, o->ns))
			continue;
		r = row_get(s, key, ns);
		if (!r)
			continue;
		if (!strcmp(name, "istio_requests_total")) {
			label(blk, "response_code", code, sizeof(code));
			r->reqs += v;
			if (code[0] != '5' && strcmp(code, "0"))
				r->ok += v;
		} else if (!strcmp(name, "istio_tcp_connections_opened_total")) {
			r->conns += v;
		} else if (!strcmp(name, "istio_tcp_connections_closed_total")) {
			r->closed += v;
		} else if (!strcmp(name, "istio_tcp_sent_bytes_total") ||
			   !strcmp(name, "istio_tcp_received_bytes_total")) {
			r->bytes += v;
		} else if (!strcmp(name, "zerohop_drops_total")) {
			r->drops += v;
		} else if (!strcmp(name, "istio_request_duration_milliseconds_bucket") &&
			   !label(blk, "le", le, sizeof(le))) {
			double b = strcmp(le, "+Inf") ? atof(le) : INFINITY;
			int i;

			for (i = 0; i < r->nb && r->le[i] != b; i++)
				;
			if (i == r->nb) {
				if (r->nb == TOP_NB)
					continue;
				/* keep le sorted (the pages list them in order) */
				r->le[r->nb] = b;
				r->cum[r->nb++] = 0;
			}
			r->cum[i] += v;
		}
	}
}

static char *read_all(int fd)
{
	size_t len = 0, cap = 65536;
	char *p = zh_malloc(cap);
	ssize_t r;

	while ((r = read(fd, p + len, cap - len - 1)) > 0) {
		len += (size_t)r;
		if (cap - len < 4096)
			p = zh_realloc(p, cap *= 2);
	}
	p[len] = '\0';
	return p;
}

char *obs_view_proxy_get(const char *lab, const struct lab_node *nd, const char *target)
{
	int pfd[2], st;
	pid_t pid;
	char *page;

	if (pipe(pfd))
		return NULL;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return NULL;
	}
	if (pid == 0) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(TOP_PROXY_PORT),
					  .sin_addr.s_addr = nd->ip };
		struct timeval tv = { .tv_sec = 2 };
		char req[128], buf[65536];
		ssize_t r;
		int fd, hdr = 1;

		close(pfd[0]);
		if (lab_join_node(lab, nd->name))
			_exit(1);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", target);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) || write(fd, req, strlen(req)) < 0)
			_exit(1);
		while ((r = read(fd, buf, sizeof(buf))) > 0) {
			char *b = buf;

			if (hdr) {	/* our own server: headers end in the first read */
				char *e = memmem(buf, (size_t)r, "\r\n\r\n", 4);

				if (!e)
					continue;
				b = e + 4;
				r -= b - buf;
				hdr = 0;
			}
			if (write(pfd[1], b, (size_t)r) != r)
				_exit(1);
		}
		_exit(0);
	}
	close(pfd[1]);
	page = read_all(pfd[0]);
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return page;
}

int obs_view_proxy_open(const char *lab, const struct lab_node *nd, const char *target)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(TOP_PROXY_PORT),
				  .sin_addr.s_addr = nd->ip };
	struct timeval tv = { .tv_sec = 2 }, none = { 0 };
	char req[128], head[16] = "", ch;
	int self, fd = -1, state = 0, ret;
	size_t hl = 0;

	/* the socket is made in the node's netns and stays there; this
	 * process goes back to its own at once (one thread: nothing else
	 * runs in between) */
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return -errno;
	ret = lab_join_node(lab, nd->name);
	if (!ret) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ret = fd < 0 ? -errno : 0;
	}
	if (setns(self, CLONE_NEWNET)) {
		zh_err("observe: cannot return to our own network namespace: %s", strerror(errno));
		abort();	/* everything after would talk to the wrong network */
	}
	close(self);
	if (ret)
		return ret;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: proxy\r\n\r\n", target);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) || write(fd, req, strlen(req)) < 0)
		goto fail;
	while (state < 4) {	/* the head, up to \r\n\r\n; its first bytes kept */
		if (read(fd, &ch, 1) != 1)
			goto fail;
		if (hl < sizeof(head) - 1)
			head[hl++] = ch;
		state = (ch == (state % 2 ? '\n' : '\r')) ? state + 1 : (ch == '\r');
	}
	if (strncmp(head, "HTTP/1.1 200", 12))
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	return fd;
fail:
	close(fd);
	return -EIO;
}

static int take_sample(const char *lab, const struct lab_topo *t, const struct top_opts *o,
		       struct sample *s)
{
	int got = 0;

	s->n = 0;
	s->t = now_s();
	for (int i = 0; i < t->n_nodes; i++) {
		char path[300], *page;
		int fd;

		ag_obs_sock_path(path, sizeof(path), lab, t->nodes[i].name);
		fd = ag_obs_sock_get(path, "/metrics");
		if (fd >= 0) {
			page = read_all(fd);
			close(fd);
			parse_page(s, o, page);
			free(page);
			got++;
		}
		page = obs_view_proxy_get(lab, &t->nodes[i], "/metrics");
		if (page) {
			parse_page(s, o, page);
			free(page);
		}
	}
	return got ? 0 : -ENOENT;
}

/* q-quantile (0..1) of the difference of two cumulative histograms, in ms;
 * NAN when no request in the window. */
static double quantile(const struct row *a, const struct row *b, double q)
{
	double d[TOP_NB] = { 0 }, rank, prev_le = 0, prev = 0;

	if (!b->nb)
		return NAN;
	for (int i = 0; i < b->nb; i++) {	/* the window's cumulative counts */
		d[i] = b->cum[i];
		for (int j = 0; a && j < a->nb; j++)
			if (a->le[j] == b->le[i])
				d[i] -= a->cum[j];
	}
	if (d[b->nb - 1] <= 0)
		return NAN;
	rank = q * d[b->nb - 1];
	for (int i = 0; i < b->nb; i++) {
		if (d[i] >= rank) {
			if (isinf(b->le[i]))
				return prev_le;	/* PromQL: the highest finite bound */
			return prev_le + (b->le[i] - prev_le) *
						 (d[i] > prev ? (rank - prev) / (d[i] - prev) : 1);
		}
		prev = d[i];
		prev_le = b->le[i];
	}
	return prev_le;
}

struct out_row {
	const struct row *r;
	double rps, success, p50, p95, p99, cps, bps, drops, active;
	bool l7;
};

static int sort_by;	/* 0 rps, 1 name, 2 conns */

static int out_cmp(const void *x, const void *y)
{
	const struct out_row *a = x, *b = y;
	double d;

	if (sort_by == 1)
		return strcmp(a->r->key, b->r->key);
	d = sort_by == 2 ? b->cps - a->cps : (b->rps - a->rps ? b->rps - a->rps : b->cps - a->cps);
	return d > 0 ? 1 : d < 0 ? -1 : strcmp(a->r->key, b->r->key);
}

/* v with `decimals` decimals (and a % sign when pct), "-" when NAN. */
static void fmt_num(char *buf, size_t n, double v, int decimals, bool pct)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.*f%s", decimals, v, pct ? "%" : "");
}

static void render(const struct sample *a, const struct sample *b, const struct top_opts *o,
		   const char *lab, FILE *f)
{
	struct out_row *rows = zh_calloc((size_t)b->n + 1, sizeof(*rows));
	double dt = b->t - a->t > 0 ? b->t - a->t : 1;
	int n = 0;

	for (int i = 0; i < b->n; i++) {
		const struct row *r = &b->rows[i], *p = NULL;
		struct out_row *w = &rows[n++];

		for (int j = 0; j < a->n; j++)
			if (!strcmp(a->rows[j].key, r->key))
				p = &a->rows[j];
		w->r = r;
		w->l7 = r->reqs > 0;
		w->rps = (r->reqs - (p ? p->reqs : 0)) / dt;
		w->success = r->reqs - (p ? p->reqs : 0) > 0 ?
				     (r->ok - (p ? p->ok : 0)) / (r->reqs - (p ? p->reqs : 0)) : NAN;
		w->p50 = quantile(p, r, 0.50);
		w->p95 = quantile(p, r, 0.95);
		w->p99 = quantile(p, r, 0.99);
		w->cps = (r->conns - (p ? p->conns : 0)) / dt;
		w->bps = (r->bytes - (p ? p->bytes : 0)) / dt;
		w->drops = r->drops;
		w->active = r->conns - r->closed;
	}
	sort_by = o->sort && !strcmp(o->sort, "name") ? 1 : o->sort && !strcmp(o->sort, "conns") ? 2 : 0;
	qsort(rows, (size_t)n, sizeof(*rows), out_cmp);
	if (o->json) {
		static const char *const by[] = { "service", "workload", "edge" };

		fprintf(f, "{\"lab\":\"%s\",\"window_seconds\":%.3f,\"by\":\"%s\",\"rows\":[", lab, dt,
			by[o->by]);
		for (int i = 0; i < n; i++) {
			const struct out_row *w = &rows[i];
			const char *gt = strchr(w->r->key, '>');

			if (o->by == OBS_BY_EDGE && gt)
				fprintf(f, "%s{\"source\":\"%.*s\",\"destination\":\"%s\",", i ? "," : "",
					(int)(gt - w->r->key), w->r->key, gt + 1);
			else
				fprintf(f, "%s{\"%s\":\"%s\",", i ? "," : "", by[o->by], w->r->key);
			fprintf(f, "\"namespace\":\"%s\",\"l7\":%s,\"rps\":%.3f,", w->r->ns,
				w->l7 ? "true" : "false", w->rps);
			if (isnan(w->success))
				fprintf(f, "\"success_rate\":null,\"p50_ms\":null,\"p95_ms\":null,\"p99_ms\":null,");
			else
				fprintf(f, "\"success_rate\":%.4f,\"p50_ms\":%.3f,\"p95_ms\":%.3f,\"p99_ms\":%.3f,",
					w->success, w->p50, w->p95, w->p99);
			fprintf(f, "\"tcp_conns_per_second\":%.3f,\"tcp_active\":%.0f,"
				   "\"tcp_bytes_per_second\":%.1f,\"drops_total\":%.0f}",
				w->cps, w->active, w->bps, w->drops);
		}
		fprintf(f, "]}\n");
		free(rows);
		return;
	}
	fprintf(f, "%-44s %-10s %8s %8s %8s %8s %8s %8s %6s %10s %6s\n",
		o->by == OBS_BY_WORKLOAD ? "WORKLOAD" : o->by == OBS_BY_EDGE ? "EDGE" : "SERVICE",
		"NAMESPACE", "RPS", "SUCCESS", "P50ms",
		"P95ms", "P99ms", "CONN/s", "ACTIVE", "BYTES/s", "DROPS");
	for (int i = 0; i < n; i++) {
		const struct out_row *w = &rows[i];
		char rps[16], suc[16], p50[16], p95[16], p99[16];

		fmt_num(rps, sizeof(rps), w->l7 ? w->rps : NAN, 1, false);
		fmt_num(suc, sizeof(suc), isnan(w->success) ? NAN : w->success * 100, 2, true);
		fmt_num(p50, sizeof(p50), w->p50, 1, false);
		fmt_num(p95, sizeof(p95), w->p95, 1, false);
		fmt_num(p99, sizeof(p99), w->p99, 1, false);
		fprintf(f, "%-44.44s %-10.10s %8s %8s %8s %8s %8s %8.1f %6.0f %10.0f %6.0f\n",
			w->r->key, w->r->ns, rps, suc, p50, p95, p99, w->cps, w->active, w->bps,
			w->drops);
	}
	free(rows);
}

/* ---- the view API (obs_view.h) for the dashboard --------------------------- */

struct obs_view {
	struct top_opts o;
	struct lab_topo t;
	struct sample a, b;
	int n;			/* samples taken */
};

int obs_view_open(const char *lab, int by, struct obs_view **out)
{
	struct obs_view *v = zh_calloc(1, sizeof(*v));

	v->o.lab = lab;
	v->o.by = by;
	v->o.json = 1;
	if (lab_topo_read(lab, &v->t)) {
		free(v);
		return -ENOENT;
	}
	*out = v;
	return 0;
}

int obs_view_sample(struct obs_view *v)
{
	int ret;

	if (v->n)
		v->a = v->b;
	ret = take_sample(v->o.lab, &v->t, &v->o, &v->b);
	if (!ret && !v->n++)
		v->a = v->b;	/* first sample: rates 0 until the next one */
	return ret;
}

void obs_view_json(struct obs_view *v, FILE *f)
{
	render(&v->a, &v->b, &v->o, v->o.lab, f);
}

void obs_view_close(struct obs_view *v)
{
	free(v);
}

static volatile sig_atomic_t top_stop;

static void on_sig(int sig)
{
	(void)sig;
	top_stop = 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: zerohop top [--lab LAB] [-n NAMESPACE] [--by service|workload|edge]\n"
		"                   [--sort rps|name|conns] [--interval SECONDS] [--iterations N] [-o json]\n");
}

int cli_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lab", required_argument, NULL, 'l' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "by", required_argument, NULL, 'b' },
		{ "sort", required_argument, NULL, 's' },
		{ "interval", required_argument, NULL, 'i' },
		{ "iterations", required_argument, NULL, 'N' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct top_opts o = {};
	const char *lab_opt = NULL;
	struct sample *a, *b, *tmp;
	struct lab_topo *t;
	double interval = 2;
	int c, iters = 0, tty, ret = 1;
	struct termios old_tio;
	bool raw = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "hn:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'l': lab_opt = optarg; break;
		case 'n': o.ns = optarg; break;
		case 'b':
			if (strcmp(optarg, "service") && strcmp(optarg, "workload") && strcmp(optarg, "edge")) {
				fprintf(stderr, "zerohop top: --by: service, workload or edge, got '%s'\n", optarg);
				return 2;
			}
			o.by = !strcmp(optarg, "workload") ? OBS_BY_WORKLOAD :
			       !strcmp(optarg, "edge") ? OBS_BY_EDGE : OBS_BY_SERVICE;
			break;
		case 's':
			if (strcmp(optarg, "rps") && strcmp(optarg, "name") && strcmp(optarg, "conns")) {
				fprintf(stderr, "zerohop top: --sort: rps, name or conns, got '%s'\n", optarg);
				return 2;
			}
			o.sort = optarg;
			break;
		case 'i':
			interval = atof(optarg);
			if (interval < 0.2 || interval > 3600) {
				fprintf(stderr, "zerohop top: --interval: 0.2..3600 seconds, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'N': iters = atoi(optarg); break;
		case 'o':
			if (strcmp(optarg, "json")) {
				fprintf(stderr, "zerohop top: -o: only json (default: a table)\n");
				return 2;
			}
			o.json = 1;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	o.lab = zh_lab_name(lab_opt);
	t = zh_calloc(1, sizeof(*t));
	if (lab_topo_read(o.lab, t)) {
		fprintf(stderr, "zerohop top: lab %s is not up\n", o.lab);
		free(t);
		return 1;
	}
	a = zh_calloc(1, sizeof(*a));
	b = zh_calloc(1, sizeof(*b));
	tty = isatty(STDOUT_FILENO) && !o.json;
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	if (take_sample(o.lab, t, &o, a)) {
		fprintf(stderr, "zerohop top: no agent of lab %s answers (lab up with the mesh?)\n", o.lab);
		goto out;
	}
	if (tty && isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &old_tio)) {
		struct termios r = old_tio;

		r.c_lflag &= ~(ICANON | ECHO);
		raw = !tcsetattr(STDIN_FILENO, TCSANOW, &r);
	}
	for (int it = 0; !top_stop; it++) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		char ch;

		if (poll(&p, raw ? 1 : 0, (int)(interval * 1000)) > 0 &&
		    read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
			break;
		if (take_sample(o.lab, t, &o, b))
			break;
		if (tty)	/* in place: home, clear */
			printf("\033[H\033[2J");
		if (tty) {
			time_t now = time(NULL);
			char hms[16];

			strftime(hms, sizeof(hms), "%H:%M:%S", localtime(&now));
			printf("zerohop top — lab %s — %s, every %.1fs — q to quit\n\n", o.lab, hms,
			       interval);
		}
		render(a, b, &o, o.lab, stdout);
		fflush(stdout);
		if (!tty || (iters && it + 1 >= iters))
			break;
		tmp = a;
		a = b;
		b = tmp;
	}
	ret = 0;
out:
	if (raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &old_tio);
	free(a);
	free(b);
	free(t);
	return ret;
}
