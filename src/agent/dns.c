/* dns.c — `zerohop dns`: the cluster DNS responder (runs in a pod behind the
 * kube-dns Service, so every query exercises the agent's UDP path).
 *
 * Answers, for every Service with a ClusterIP (case-insensitive, trailing dot
 * optional):
 *   SERVICE.NAMESPACE.svc.cluster.local, SERVICE.NAMESPACE.svc,
 *   SERVICE.NAMESPACE, and SERVICE alone (the "default" namespace wins when
 *   several namespaces have the name; pods normally query the fully
 *   qualified form through their resolv.conf search list)
 *   A     -> the IPv4 ClusterIP, TTL 5 s
 *   AAAA  -> the IPv6 ClusterIP (dual-stack and IPv6 Services, docs/ipv6.md)
 *   other, or a family the Service does not have -> NOERROR, no answer
 * Any other name -> NXDOMAIN. Malformed queries -> FORMERR (when a header
 * can be read) or silence. UDP and TCP (RFC 1035 length-prefixed) on the
 * same port. The table is rebuilt when the state source changes; a state
 * that fails to load keeps the previous table.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "zerohop/cli.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "zerohop/state.h"

struct dns_ent {
	char *name;		/* lower case, no trailing dot */
	uint32_t ip;		/* IPv4 ClusterIP, network order; 0 = none */
	struct in6_addr ip6;	/* IPv6 ClusterIP; all zero = none */
	int prio;		/* lower wins for the same name */
};

struct dns_table {
	struct dns_ent *v;
	int n, cap;
};

static void tbl_add(struct dns_table *t, int prio, const struct md_service *sv,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void tbl_add(struct dns_table *t, int prio, const struct md_service *sv,
		    const char *fmt, ...)
{
	va_list ap;
	char *s, *p;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	for (p = s; *p; p++)
		*p = tolower((unsigned char)*p);
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->v = zh_realloc(t->v, t->cap * sizeof(*t->v));
	}
	t->v[t->n++] = (struct dns_ent){ .name = s, .ip = sv->cluster_ip, .ip6 = sv->cluster_ip6,
					 .prio = prio };
}

static int ent_cmp(const void *a, const void *b)
{
	const struct dns_ent *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : x->prio - y->prio;
}

static void tbl_free(struct dns_table *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static void tbl_build(struct dns_table *t, const struct md_state *st)
{
	int i;

	for (i = 0; i < st->n_services; i++) {
		const struct md_service *s = &st->services[i];
		const char *ns = s->meta.ns ? s->meta.ns : MD_DEFAULT_NS;

		if (s->headless || (!s->cluster_ip && IN6_IS_ADDR_UNSPECIFIED(&s->cluster_ip6)))
			continue;
		tbl_add(t, 0, s, "%s.%s.svc.cluster.local", s->meta.name, ns);
		tbl_add(t, 0, s, "%s.%s.svc", s->meta.name, ns);
		tbl_add(t, 0, s, "%s.%s", s->meta.name, ns);
		tbl_add(t, strcmp(ns, MD_DEFAULT_NS) ? 1 : 0, s, "%s", s->meta.name);
	}
	qsort(t->v, t->n, sizeof(*t->v), ent_cmp);
}

static const struct dns_ent *tbl_find(const struct dns_table *t, const char *name)
{
	int lo = 0, hi = t->n - 1, found = -1;

	while (lo <= hi) {	/* first entry with this name = best prio */
		int mid = (lo + hi) / 2, c = strcmp(t->v[mid].name, name);

		if (c == 0)
			found = mid;
		if (c >= 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return found >= 0 ? &t->v[found] : NULL;
}

/* Build the answer to query q (qlen bytes) into out. Returns the answer
 * length, or 0 when nothing should be sent. */
static size_t dns_answer(const struct dns_table *t, const uint8_t *q, size_t qlen, uint8_t *out,
			 size_t outlen)
{
	char name[256];
	size_t off = 12, nlen = 0, qend;
	uint16_t qtype, qclass, flags;
	const struct dns_ent *e = NULL;
	int rcode = 0, ancount = 0, rdlen = 0;

	if (qlen < 12 || outlen < 512)
		return 0;
	flags = q[2] << 8 | q[3];
	if (flags & 0x8000)
		return 0;	/* a response: ignore */
	if ((q[4] << 8 | q[5]) != 1 || ((flags >> 11) & 0xf) != 0) {
		rcode = 1;	/* FORMERR / only standard queries with one question */
		qend = 12;
		goto reply;
	}
	while (off < qlen && q[off]) {
		size_t l = q[off];

		if (l > 63 || off + 1 + l >= qlen || nlen + l + 1 >= sizeof(name)) {
			rcode = 1;
			qend = 12;
			goto reply;
		}
		if (nlen)
			name[nlen++] = '.';
		memcpy(name + nlen, q + off + 1, l);
		nlen += l;
		off += 1 + l;
	}
	if (off + 5 > qlen) {
		rcode = 1;
		qend = 12;
		goto reply;
	}
	name[nlen] = 0;
	for (size_t i = 0; i < nlen; i++)
		name[i] = tolower((unsigned char)name[i]);
	qtype = q[off + 1] << 8 | q[off + 2];
	qclass = q[off + 3] << 8 | q[off + 4];
	qend = off + 5;
	e = tbl_find(t, name);
	if (!e)
		rcode = 3;	/* NXDOMAIN */
	else if (qclass != 1 && qclass != 255)
		;
	else if (qtype == 1 && e->ip)
		rdlen = 4;
	else if (qtype == 28 && !IN6_IS_ADDR_UNSPECIFIED(&e->ip6))
		rdlen = 16;
	ancount = rdlen ? 1 : 0;
reply:
	memcpy(out, q, qend);
	out[2] = 0x84 | (q[2] & 0x01);	/* QR, AA, RD copied */
	out[3] = rcode;
	out[4] = 0;
	out[5] = qend > 12 ? 1 : 0;
	out[6] = 0;
	out[7] = ancount;
	memset(out + 8, 0, 4);
	if (ancount) {
		uint8_t *a = out + qend;

		a[0] = 0xc0; a[1] = 12;			/* name: pointer to the question */
		a[2] = 0; a[3] = rdlen == 4 ? 1 : 28;	/* A or AAAA */
		a[4] = 0; a[5] = 1;			/* IN */
		a[6] = 0; a[7] = 0; a[8] = 0; a[9] = 5;	/* TTL 5 s */
		a[10] = 0; a[11] = (uint8_t)rdlen;
		memcpy(a + 12, rdlen == 4 ? (const void *)&e->ip : (const void *)&e->ip6, rdlen);
		return qend + 12 + rdlen;
	}
	return qend;
}

static int reload(struct ss *s, struct dns_table *t)
{
	struct dns_table nt = {};
	struct md_state *st = NULL;
	struct md_err err = {};
	char buf[800];
	int ret;

	ss_watch_drain(s);
	ret = ss_load(s, &st, &err);
	if (ret) {
		zh_err("dns: state: %s (keeping the previous names)", md_err_str(&err, buf, sizeof(buf)));
		return ret;
	}
	tbl_build(&nt, st);
	md_state_free(st);
	tbl_free(t);
	*t = nt;
	zh_info("dns: %d names", t->n);
	return 0;
}

static void serve_tcp(int lfd, const struct dns_table *t)
{
	struct timeval tv = { .tv_sec = 1 };
	uint8_t q[65536 + 2], a[1024];
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (;;) {	/* one connection may carry several queries */
		size_t got = 0, want = 2, n;
		ssize_t r;

		while (got < want) {
			r = read(fd, q + got, want - got);
			if (r <= 0)
				goto out;
			got += r;
			if (got == 2)
				want = 2 + (q[0] << 8 | q[1]);
		}
		n = dns_answer(t, q + 2, want - 2, a + 2, sizeof(a) - 2);
		if (!n)
			goto out;
		a[0] = n >> 8;
		a[1] = n & 0xff;
		if (write(fd, a, n + 2) != (ssize_t)(n + 2))
			goto out;
	}
out:
	close(fd);
}

int cli_dns(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "lab", required_argument, NULL, 'l' },
		{ "port", required_argument, NULL, 'p' },
		{ "addr", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	/* --addr IPv4, or IPv6 ("::" in an IPv6-only lab's DNS pod: a
	 * dual-stack socket, it serves both families) */
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	bool v6 = false;
	struct dns_table t = {};
	const char *state = NULL, *lab = NULL;
	char dir[256];
	struct pollfd pfd[3];
	struct ss *s = NULL;
	int c, port = 53, ufd = -1, tfd = -1, one = 1, ret = 1;

	zh_log_init("dns", ZH_INFO);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': state = optarg; break;
		case 'l': lab = optarg; break;
		case 'h':
			printf("usage: zerohop dns [--state DIR | --lab LAB] [--port 53] [--addr IP]\n");
			return 0;
		case 'p':
			port = atoi(optarg);
			if (port < 1 || port > 65535) {
				fprintf(stderr, "zerohop dns: --port: 1..65535, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'a':
			if (inet_pton(AF_INET6, optarg, &sa6.sin6_addr) == 1) {
				v6 = true;
			} else if (inet_pton(AF_INET, optarg, &sa.sin_addr) != 1) {
				fprintf(stderr, "zerohop dns: --addr: not an IPv4 or IPv6 address: '%s'\n",
					optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: zerohop dns [--state DIR | --lab LAB] [--port 53] [--addr IP]\n");
			return 2;
		}
	}
	if (state)
		snprintf(dir, sizeof(dir), "%s", state);
	else
		zh_state_dir(dir, sizeof(dir), zh_lab_name(lab));
	if (ss_open(dir, &s)) {
		fprintf(stderr, "zerohop dns: cannot open state %s\n", dir);
		return 1;
	}
	reload(s, &t);
	sa.sin_port = sa6.sin6_port = htons(port);
	ufd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	tfd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ufd < 0 || tfd < 0)
		goto out;
	setsockopt(tfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ufd, v6 ? (struct sockaddr *)&sa6 : (struct sockaddr *)&sa,
		 v6 ? sizeof(sa6) : sizeof(sa)) ||
	    bind(tfd, v6 ? (struct sockaddr *)&sa6 : (struct sockaddr *)&sa,
		 v6 ? sizeof(sa6) : sizeof(sa)) ||
	    listen(tfd, 64)) {
		fprintf(stderr, "zerohop dns: bind port %d: %s\n", port, strerror(errno));
		goto out;
	}
	zh_info("dns: serving port %d (UDP, TCP) from %s", port, dir);
	pfd[0] = (struct pollfd){ .fd = ufd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = tfd, .events = POLLIN };
	pfd[2] = (struct pollfd){ .fd = ss_watch_fd(s), .events = POLLIN };
	for (;;) {
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[2].revents & POLLIN) {
			usleep(2000);	/* debounce a burst of writes */
			reload(s, &t);
		}
		if (pfd[0].revents & POLLIN) {
			struct sockaddr_storage from;
			socklen_t fl = sizeof(from);
			uint8_t q[1500], a[1024];
			ssize_t n = recvfrom(ufd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
			size_t al;

			if (n > 0 && (al = dns_answer(&t, q, n, a, sizeof(a))))
				sendto(ufd, a, al, 0, (struct sockaddr *)&from, fl);
		}
		if (pfd[1].revents & POLLIN)
			serve_tcp(tfd, &t);
	}
out:
	if (ufd >= 0)
		close(ufd);
	if (tfd >= 0)
		close(tfd);
	tbl_free(&t);
	ss_close(s);
	return ret;
}
