/* obs_cli.c — `zerohop observe`: the flow log of a lab's agents, like
 * `hubble observe` (docs/observability.md).
 *
 * Reads GET /flows (and /flows?follow=1) from every node agent's unix
 * socket (ag_obs_sock_path; the agents run in the nodes' network
 * namespaces, the socket is in the shared run dir), filters, and prints one
 * line per event, or the agents' JSON objects unchanged with -o json.
 * Without --follow: the events the agents still hold (ZH_OBS_FLOW_RING
 * each), merged by time. With --follow: those, then new ones as they come,
 * until SIGINT/SIGTERM or --timeout. L7 requests come from each node
 * proxy's request log (GET /flows on NODE_IP:15090, in the node's netns):
 * read once without --follow, streamed (/flows?follow=1) with it; their
 * lines get the node's name added as the agents' have it.
 */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "zerohop/log.h"
#include "zerohop/obs.h"
#include "zerohop/lab.h"
#include "zerohop/paths.h"
#include "obs_view.h"

struct filt {
	const char *pod, *service, *verdict, *type, *node;
	int json;
};

/* The string value of "key" inside the object "sect" of a flow line (sect
 * NULL: the top level), copied into out. Our own fixed format: no escapes
 * in values (names are DNS labels). 0, or -ENOENT. */
static int jget(const char *line, const char *sect, const char *key, char *out, size_t n)
{
	char pat[64];
	const char *p = line, *end = NULL, *v, *q;

	if (sect) {
		snprintf(pat, sizeof(pat), "\"%s\":{", sect);
		p = strstr(line, pat);
		if (!p)
			return -ENOENT;
		end = strchr(p, '}');
	}
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	v = strstr(p, pat);
	if (!v || (end && v > end))
		return -ENOENT;
	v += strlen(pat);
	if (*v == '"') {
		v++;
		q = strchr(v, '"');
	} else {
		q = v + strcspn(v, ",}");
	}
	if (!q || (size_t)(q - v) >= n)
		return -ENOENT;
	memcpy(out, v, (size_t)(q - v));
	out[q - v] = '\0';
	return 0;
}

/* NAME matches "ns/name" or "name" (or a pod name's prefix: a Deployment). */
static int name_match(const char *want, const char *ns, const char *name)
{
	char full[200];

	if (!name[0])
		return 0;
	snprintf(full, sizeof(full), "%s/%s", ns, name);
	return !strcmp(want, full) || !strcmp(want, name) ||
	       (!strchr(want, '/') && !strncmp(name, want, strlen(want))) ||
	       (strchr(want, '/') && !strncmp(full, want, strlen(want)));
}

static int keep(const struct filt *f, const char *line)
{
	char a[128] = "", b[128] = "", ns1[128] = "", ns2[128] = "";

	if (f->verdict && (jget(line, NULL, "verdict", a, sizeof(a)) || strcasecmp(a, f->verdict)))
		return 0;
	if (f->type && (jget(line, NULL, "type", a, sizeof(a)) || strcasecmp(a, f->type)))
		return 0;
	if (f->pod) {
		/* a request names workloads, not pods: match those then */
		if (jget(line, "source", "pod", a, sizeof(a)))
			jget(line, "source", "workload", a, sizeof(a));
		jget(line, "source", "namespace", ns1, sizeof(ns1));
		if (jget(line, "destination", "pod", b, sizeof(b)))
			jget(line, "destination", "workload", b, sizeof(b));
		jget(line, "destination", "namespace", ns2, sizeof(ns2));
		if (!name_match(f->pod, ns1, a) && !name_match(f->pod, ns2, b))
			return 0;
	}
	if (f->service) {
		const char *sl;

		if (jget(line, "destination", "service", a, sizeof(a)))
			return 0;
		sl = strchr(a, '/');
		/* "ns/name" exactly, or "name" in any namespace */
		if (strcmp(f->service, a) && (strchr(f->service, '/') || !sl || strcmp(f->service, sl + 1)))
			return 0;
	}
	return 1;
}

static void end_str(const char *line, const char *sect, char *out, size_t n)
{
	char ip[64] = "", port[16] = "", pod[128] = "", ns[128] = "", svc[200] = "";

	jget(line, sect, "ip", ip, sizeof(ip));
	jget(line, sect, "port", port, sizeof(port));
	if (jget(line, sect, "pod", pod, sizeof(pod)))
		jget(line, sect, "workload", pod, sizeof(pod));	/* requests: workloads */
	jget(line, sect, "namespace", ns, sizeof(ns));
	jget(line, sect, "service", svc, sizeof(svc));
	if (pod[0])
		snprintf(out, n, "%s/%s:%s", ns, pod, port);
	else
		snprintf(out, n, "%s:%s", ip, port);
	if (svc[0]) {
		size_t l = strlen(out);

		snprintf(out + l, n - l, " (svc %s)", svc);
	}
}

static void print_line(const struct filt *f, const char *line)
{
	char t[32] = "", node[64] = "", type[16] = "", verdict[16] = "", reason[32] = "";
	char src[400], dst[400], extra[128] = "", bs[32], br[32], rtt[16], sc[8];
	time_t sec;
	struct tm tm;

	if (!keep(f, line))
		return;
	if (f->json) {
		fputs(line, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		return;
	}
	jget(line, NULL, "time", t, sizeof(t));
	jget(line, NULL, "node", node, sizeof(node));
	jget(line, NULL, "type", type, sizeof(type));
	jget(line, NULL, "verdict", verdict, sizeof(verdict));
	jget(line, NULL, "reason", reason, sizeof(reason));
	end_str(line, "source", src, sizeof(src));
	end_str(line, "destination", dst, sizeof(dst));
	if (!jget(line, NULL, "bytes_sent", bs, sizeof(bs)) &&
	    !jget(line, NULL, "bytes_received", br, sizeof(br)) &&
	    !jget(line, NULL, "srtt_us", rtt, sizeof(rtt)) &&
	    !jget(line, NULL, "short_circuit", sc, sizeof(sc)))
		snprintf(extra, sizeof(extra), " sent=%s recv=%s srtt=%sus%s", bs, br, rtt,
			 !strcmp(sc, "true") ? " short-circuit" : "");
	if (!strcmp(type, "request")) {	/* the node proxy's (L7 Services) */
		char m[16] = "", path[128] = "", status[8] = "", ms[24] = "", gs[8] = "";

		jget(line, NULL, "method", m, sizeof(m));
		jget(line, NULL, "path", path, sizeof(path));
		jget(line, NULL, "status", status, sizeof(status));
		jget(line, NULL, "duration_ms", ms, sizeof(ms));
		jget(line, NULL, "grpc_status", gs, sizeof(gs));	/* gRPC only */
		snprintf(extra, sizeof(extra), " %s %s %s%s%s %sms", m, path, status,
			 gs[0] ? " grpc-status=" : "", gs, ms);
	}
	sec = (time_t)atof(t);
	localtime_r(&sec, &tm);
	strftime(t, sizeof(t), "%b %d %H:%M:%S", &tm);
	printf("%s %-8s %s -> %s %s %s%s%s%s\n", t, node, src, dst, type, verdict,
	       strcmp(reason, "none") ? " reason=" : "", strcmp(reason, "none") ? reason : "",
	       extra);
	fflush(stdout);
}

/* Connect to path, send GET target; the fd positioned after the headers, or -errno. */
int ag_obs_sock_get(const char *path, const char *target)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char req[256], c;
	int fd, state = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = -errno;

		close(fd);
		return e;
	}
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: agent\r\n\r\n", target);
	if (write(fd, req, strlen(req)) < 0)
		goto fail;
	/* skip the headers: up to \r\n\r\n */
	while (state < 4) {
		if (read(fd, &c, 1) != 1)
			goto fail;
		state = (c == (state % 2 ? '\n' : '\r')) ? state + 1 : (c == '\r');
	}
	return fd;
fail:
	close(fd);
	return -EIO;
}

struct src {
	int fd;
	const char *node;	/* a node proxy's stream: add "node" to its lines */
	char buf[8192];
	size_t len;
};

/* A proxy's request line with "node":NODE first, as the agents write it
 * (the caller frees it). */
static char *with_node(const char *node, const char *l)
{
	size_t len = strlen(l) + strlen(node) + 16;
	char *w = zh_malloc(len);

	snprintf(w, len, "{\"node\":\"%s\",%s", node, l + 1);
	return w;
}

/* Move complete lines of s out through print_line (or into lines[]). */
static void drain_lines(struct src *s, const struct filt *f, char ***lines, int *n)
{
	char *nl;

	while ((nl = memchr(s->buf, '\n', s->len))) {
		*nl = '\0';
		if (s->node && s->buf[0] == '{') {
			char *w = with_node(s->node, s->buf);

			print_line(f, w);	/* only followed proxies have node set */
			free(w);
		} else if (s->node) {
			;	/* not a flow line */
		} else if (lines) {
			*lines = zh_realloc(*lines, (size_t)(*n + 1) * sizeof(char *));
			(*lines)[(*n)++] = zh_strdup(s->buf);
		} else {
			print_line(f, s->buf);
		}
		s->len -= (size_t)(nl + 1 - s->buf);
		memmove(s->buf, nl + 1, s->len);
	}
	if (s->len == sizeof(s->buf))
		s->len = 0;	/* a line longer than the buffer: not ours, dropped */
}

static int by_time(const void *a, const void *b)
{
	char x[32] = "0", y[32] = "0";
	double dx, dy;

	jget(*(char *const *)a, NULL, "time", x, sizeof(x));
	jget(*(char *const *)b, NULL, "time", y, sizeof(y));
	dx = atof(x);
	dy = atof(y);
	return dx < dy ? -1 : dx > dy;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: zerohop observe [--lab LAB] [--node NODE] [--pod [NS/]NAME] [--service [NS/]NAME]\n"
		"                       [--verdict FORWARDED|DROPPED|ERROR] [--type open|close|fail|drop|request]\n"
		"                       [-f|--follow] [--timeout SECONDS] [-o json]\n");
}

int cli_observe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lab", required_argument, NULL, 'l' },
		{ "node", required_argument, NULL, 'n' },
		{ "pod", required_argument, NULL, 'p' },
		{ "service", required_argument, NULL, 's' },
		{ "verdict", required_argument, NULL, 'v' },
		{ "type", required_argument, NULL, 't' },
		{ "follow", no_argument, NULL, 'f' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct filt f = {};
	const char *lab_opt = NULL, *lab;
	struct src *srcs = NULL;
	struct pollfd *pfd = NULL;
	char pattern[300], **lines = NULL;
	glob_t g = {};
	struct lab_topo *t = zh_calloc(1, sizeof(*t));
	int c, follow = 0, n = 0, n_lines = 0, ret = 1, nn, l7;
	double timeout = 0, t0;
	struct timespec ts;

	optind = 1;
	while ((c = getopt_long(argc, argv, "hfo:", opts, NULL)) != -1) {
		switch (c) {
		case 'l': lab_opt = optarg; break;
		case 'n': f.node = optarg; break;
		case 'p': f.pod = optarg; break;
		case 's': f.service = optarg; break;
		case 'v': f.verdict = optarg; break;
		case 't': f.type = optarg; break;
		case 'f': follow = 1; break;
		case 'T': timeout = atof(optarg); break;
		case 'o':
			if (strcmp(optarg, "json")) {
				fprintf(stderr, "zerohop observe: -o: only json (default: one line per event)\n");
				return 2;
			}
			f.json = 1;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (f.verdict && strcasecmp(f.verdict, "FORWARDED") && strcasecmp(f.verdict, "DROPPED") &&
	    strcasecmp(f.verdict, "ERROR")) {
		fprintf(stderr, "zerohop observe: --verdict: FORWARDED, DROPPED or ERROR, got '%s'\n",
			f.verdict);
		return 2;
	}
	lab = zh_lab_name(lab_opt);
	if (f.node)
		ag_obs_sock_path(pattern, sizeof(pattern), lab, f.node);
	else
		ag_obs_sock_path(pattern, sizeof(pattern), lab, "*");
	if (glob(pattern, 0, NULL, &g) || !g.gl_pathc) {
		fprintf(stderr, "zerohop observe: no agent socket %s (lab %s up, with agents?)\n",
			pattern, lab);
		return 1;
	}
	/* the proxies: their requests, and their HBONE servers' denials (drop) */
	l7 = !f.type || !strcasecmp(f.type, "request") || !strcasecmp(f.type, "drop");
	nn = l7 && !lab_topo_read(lab, t) ? t->n_nodes : 0;
	srcs = zh_calloc(g.gl_pathc + (size_t)nn, sizeof(*srcs));
	pfd = zh_calloc(g.gl_pathc + (size_t)nn, sizeof(*pfd));
	for (size_t i = 0; i < g.gl_pathc; i++) {
		int fd = ag_obs_sock_get(g.gl_pathv[i], follow ? "/flows?follow=1" : "/flows");

		if (fd < 0) {
			fprintf(stderr, "zerohop observe: %s: %s\n", g.gl_pathv[i], strerror(-fd));
			continue;
		}
		srcs[n].fd = fd;
		pfd[n] = (struct pollfd){ .fd = fd, .events = POLLIN };
		n++;
	}
	for (int i = 0; follow && i < nn; i++) {	/* the proxies' requests, streamed */
		int fd;

		if (f.node && strcmp(f.node, t->nodes[i].name))
			continue;
		fd = obs_view_proxy_open(lab, &t->nodes[i], "/flows?follow=1");
		if (fd < 0)
			continue;	/* no proxy on that node (no L7 Service): nothing to show */
		srcs[n].fd = fd;
		srcs[n].node = t->nodes[i].name;
		pfd[n] = (struct pollfd){ .fd = fd, .events = POLLIN };
		n++;
	}
	if (!n)
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	signal(SIGPIPE, SIG_IGN);
	for (int open_n = n; open_n > 0;) {
		int wait_ms = -1;

		if (timeout > 0) {
			double now;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
			if (now - t0 >= timeout)
				break;
			wait_ms = (int)((timeout - (now - t0)) * 1000) + 1;
		}
		if (poll(pfd, (nfds_t)n, wait_ms) <= 0)
			break;
		for (int i = 0; i < n; i++) {
			ssize_t r;

			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			r = read(srcs[i].fd, srcs[i].buf + srcs[i].len, sizeof(srcs[i].buf) - srcs[i].len);
			if (r <= 0) {
				close(srcs[i].fd);
				pfd[i].fd = -1;
				open_n--;
				continue;
			}
			srcs[i].len += (size_t)r;
			drain_lines(&srcs[i], &f, follow ? NULL : &lines, &n_lines);
		}
	}
	if (!follow) {
		/* L7 requests: each node proxy's request log */
		for (int i = 0; i < nn; i++) {
			char *page, *save = NULL, *l;

			if (f.node && strcmp(f.node, t->nodes[i].name))
				continue;
			page = obs_view_proxy_get(lab, &t->nodes[i], "/flows");
			for (l = page ? strtok_r(page, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
				if (l[0] != '{')
					continue;
				lines = zh_realloc(lines, (size_t)(n_lines + 1) * sizeof(char *));
				lines[n_lines++] = with_node(t->nodes[i].name, l);
			}
			free(page);
		}
	}
	if (!follow) {
		qsort(lines, (size_t)n_lines, sizeof(*lines), by_time);
		for (int i = 0; i < n_lines; i++)
			print_line(&f, lines[i]);
	}
	ret = 0;
out:
	for (int i = 0; i < n; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	for (int i = 0; i < n_lines; i++)
		free(lines[i]);
	free(lines);
	free(srcs);
	free(pfd);
	free(t);
	globfree(&g);
	return ret;
}
