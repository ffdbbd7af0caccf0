/* test_lb_kernel.c — the load balancer in the real kernel, no lab needed:
 * this process moves itself into a throw-away cgroup (zhA-lbtest-PID) and a
 * fresh network namespace with only loopback; backends listen on 127.0.0.x,
 * Services are VIPs that exist only in the maps. Checks translation,
 * getpeername, UDP both ways, ECONNREFUSED, weights, make-before-break under
 * a connecting client, adoption of pinned state, cleanup. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>

#include "tap.h"
#include "zerohop/agent.h"
#include "zerohop/lab.h"

static char cg[300], pin[300], orig_cg[700];

static uint32_t ip(const char *s)
{
	uint32_t v;

	inet_pton(AF_INET, s, &v);
	return v;
}

static struct sockaddr_in sa(const char *a, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };

	s.sin_addr.s_addr = ip(a);
	return s;
}

/* A compiled state built by hand: n services with given backends/weights. */
struct bdef {
	const char *addr;
	int port;
	double w;
};

static void add_svc(struct ag_compiled *c, const char *vip, int port, uint8_t proto,
		    const struct bdef *b, int n)
{
	struct ag_svc *e;
	uint32_t thr[8], al[8];
	double w[8];
	int i;

	c->svcs = realloc(c->svcs, (c->n_svcs + 1) * sizeof(*c->svcs));
	e = &c->svcs[c->n_svcs++];
	memset(e, 0, sizeof(*e));
	ag_v4_mapped(e->key.vip, ip(vip));
	e->key.port = htons(port);
	e->key.proto = proto;
	e->ns = strdup("default");
	e->name = strdup(vip);
	e->source = strdup("test");
	e->n_be = n;
	e->be = calloc(n ? n : 1, sizeof(*e->be));
	e->alias = calloc(n ? n : 1, sizeof(*e->alias));
	for (i = 0; i < n; i++) {
		ag_v4_mapped(e->be[i].be.addr, ip(b[i].addr));
		e->be[i].be.port = htons(b[i].port);
		e->be[i].weight = w[i] = b[i].w;
	}
	if (n)
		ag_alias_build(w, n, thr, al);
	for (i = 0; i < n; i++) {
		e->alias[i].a = e->be[i].be;
		e->alias[i].b = e->be[al[i]].be;
		e->alias[i].threshold = thr[i];
	}
}

static int cmp_svc(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct zh_lb_svc_key));
}

static void sort_c(struct ag_compiled *c)
{
	qsort(c->svcs, c->n_svcs, sizeof(*c->svcs), cmp_svc);
}

static int listener(const char *addr, int port, int type)
{
	struct sockaddr_in s = sa(addr, port);
	int fd = socket(AF_INET, type | SOCK_NONBLOCK, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&s, sizeof(s)) || (type == SOCK_STREAM && listen(fd, 1024))) {
		diag("bind %s:%d: %s", addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Connect to VIP:port; return the index (into ls) of the listener that got
 * the connection, -errno on connect failure. peer: getpeername result. */
static int conn_once(const char *vip, int port, const int *ls, int n, struct sockaddr_in *peer)
{
	struct sockaddr_in d = sa(vip, port), p;
	socklen_t pl = sizeof(p);
	struct pollfd pf[4];
	int fd, i, got = -1, a;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&d, sizeof(d))) {
		got = -errno;
		goto out;
	}
	if (peer && getpeername(fd, (struct sockaddr *)&p, &pl) == 0)
		*peer = p;
	for (i = 0; i < n; i++)
		pf[i] = (struct pollfd){ .fd = ls[i], .events = POLLIN };
	if (poll(pf, n, 1000) <= 0)
		goto out;
	for (i = 0; i < n; i++) {
		if (!(pf[i].revents & POLLIN))
			continue;
		a = accept(ls[i], NULL, NULL);
		if (a >= 0) {
			close(a);
			got = i;
			break;
		}
	}
out:
	close(fd);
	return got;
}

static int lo_up(void)
{
	struct ifreq ifr = {};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), ret;

	strcpy(ifr.ifr_name, "lo");
	ret = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	if (!ret)
		ret = ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	return ret;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ret;

	if (fd < 0)
		return -errno;
	ret = write(fd, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : -errno;
	close(fd);
	return ret;
}

static void leave_cgroup(void)
{
	char path[800], pid[32];

	if (!orig_cg[0])
		return;
	snprintf(path, sizeof(path), "%s/cgroup.procs", orig_cg);
	snprintf(pid, sizeof(pid), "%d", getpid());
	write_str(path, pid);
}

static void cleanup(void)
{
	leave_cgroup();
	ag_lb_cleanup(pin);
	rmdir(cg);
}

static void find_orig_cgroup(const char *root)
{
	char line[400];
	FILE *f = fopen("/proc/self/cgroup", "r");

	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(orig_cg, sizeof(orig_cg), "%s%s", root, line + 3);
		}
	}
	if (f)
		fclose(f);
}

/* A crashed earlier run leaves its cgroup and pins: remove those whose
 * process is gone (only our own zhA-lbtest-* names). */
static void clean_stale(const char *root)
{
	struct dirent *de;
	DIR *d = opendir(root);
	char p[600];

	while (d && (de = readdir(d))) {
		int pid;

		if (sscanf(de->d_name, "zhA-lbtest-%d", &pid) != 1 || kill(pid, 0) == 0)
			continue;
		snprintf(p, sizeof(p), "/sys/fs/bpf/zhA-lbtest-%d", pid);
		ag_lb_cleanup(p);
		snprintf(p, sizeof(p), "%s/%s", root, de->d_name);
		rmdir(p);
	}
	if (d)
		closedir(d);
}

int main(void)
{
	const struct bdef b_tcp[] = { { "127.0.0.2", 8080, 1 }, { "127.0.0.3", 8080, 2 } };
	const struct bdef b_only3[] = { { "127.0.0.3", 8080, 1 } };
	const struct bdef b_only2[] = { { "127.0.0.2", 8080, 1 } };
	const struct bdef b_udp[] = { { "127.0.0.4", 5353, 1 }, { "127.0.0.5", 5353, 1 } };
	struct ag_compiled c = {}, c2 = {}, c3 = {};
	struct ag_lb_opts o = {};
	struct ag_sync_stats ss;
	struct ag_lb *lb = NULL;
	struct sockaddr_in peer = {};
	uint64_t stats[ZH_LB_STAT_MAX], meta[ZH_LB_META_MAX];
	const char *root;
	char pidbuf[32], path[400];
	int ls[2], us[2], i, n3 = 0, fails = 0, ret;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (BPF, cgroups, netns)\n");
		return 0;
	}
	root = lab_cgroup_root(true);
	if (!root) {
		printf("1..0 # SKIP no cgroup2 hierarchy\n");
		return 0;
	}
	find_orig_cgroup(root);
	clean_stale(root);
	snprintf(cg, sizeof(cg), "%s/zhA-lbtest-%d", root, getpid());
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/zhA-lbtest-%d", getpid());
	if (mkdir(cg, 0755)) {
		printf("1..0 # SKIP cannot create cgroup %s: %s\n", cg, strerror(errno));
		return 0;
	}
	atexit(cleanup);

	add_svc(&c, "10.96.0.1", 80, ZH_LB_TCP, b_tcp, 2);
	add_svc(&c, "10.96.0.2", 80, ZH_LB_TCP, NULL, 0);
	add_svc(&c, "10.96.0.3", 53, ZH_LB_UDP, b_udp, 2);
	sort_c(&c);

	o.cgroup = cg;
	o.pin_dir = pin;
	ret = ag_lb_open(&o, &lb);
	is_int(ret, 0, "load + attach to %s, pins in %s", cg, pin);
	if (ret)
		return done_testing();
	is_int(ag_lb_sync(lb, &c, 1, &ss), 0, "sync 3 services");
	is_int(ss.svc_added, 3, "3 services added");
	is_int(ss.alias_written, 4, "4 alias entries written");

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	snprintf(pidbuf, sizeof(pidbuf), "%d", getpid());
	ok(write_str(path, pidbuf) == 0, "moved into the test cgroup");
	ok(unshare(CLONE_NEWNET) == 0 && lo_up() == 0, "fresh network namespace, lo up");

	ls[0] = listener("127.0.0.2", 8080, SOCK_STREAM);
	ls[1] = listener("127.0.0.3", 8080, SOCK_STREAM);
	us[0] = listener("127.0.0.4", 5353, SOCK_DGRAM);
	us[1] = listener("127.0.0.5", 5353, SOCK_DGRAM);
	ok(ls[0] >= 0 && ls[1] >= 0 && us[0] >= 0 && us[1] >= 0, "backends listening");

	/* TCP: translation, getpeername, weights 1:2 over 3000 connections. */
	ret = conn_once("10.96.0.1", 80, ls, 2, &peer);
	ok(ret >= 0, "TCP connect to the VIP reaches a backend");
	ok(peer.sin_addr.s_addr == ip("10.96.0.1") && ntohs(peer.sin_port) == 80,
	   "getpeername shows the ClusterIP 10.96.0.1:80");
	for (i = 0; i < 3000; i++) {
		ret = conn_once("10.96.0.1", 80, ls, 2, NULL);
		if (ret < 0)
			fails++;
		else
			n3 += ret == 1;
	}
	is_int(fails, 0, "3000 connections, none failed");
	/* 99.9 % two-sided binomial interval around 2/3 of 3000: +-3.29 sd. */
	ok(abs(n3 - 2000) <= 85, "weight 2 backend got %d of 3000 (2000 +- 85)", n3);

	ret = conn_once("10.96.0.2", 80, ls, 2, NULL);
	is_int(ret, -ECONNREFUSED, "service without endpoints: ECONNREFUSED at once");
	ret = conn_once("127.0.0.2", 8080, ls, 2, &peer);
	ok(ret == 0 && peer.sin_addr.s_addr == ip("127.0.0.2"),
	   "a non-service address is untouched (getpeername real)");

	/* Unconnected UDP: per datagram, reply source restored. */
	{
		struct sockaddr_in d = sa("10.96.0.3", 53), from, src;
		socklen_t fl = sizeof(from), sl = sizeof(src);
		struct pollfd pf[2] = { { us[0], POLLIN, 0 }, { us[1], POLLIN, 0 } };
		int u = socket(AF_INET, SOCK_DGRAM, 0), k, got_be = -1;
		char buf[64];
		ssize_t n;

		sendto(u, "ping", 4, 0, (struct sockaddr *)&d, sizeof(d));
		poll(pf, 2, 1000);
		for (k = 0; k < 2; k++)
			if (pf[k].revents & POLLIN)
				got_be = k;
		ok(got_be >= 0, "unconnected UDP datagram to the VIP reaches a backend");
		if (got_be >= 0) {
			n = recvfrom(us[got_be], buf, sizeof(buf), 0, (struct sockaddr *)&src, &sl);
			sendto(us[got_be], "pong", 4, 0, (struct sockaddr *)&src, sl);
			n = recvfrom(u, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
			ok(n == 4 && from.sin_addr.s_addr == ip("10.96.0.3") && ntohs(from.sin_port) == 53,
			   "unconnected UDP reply comes from the ClusterIP 10.96.0.3:53");
		}
		close(u);

		/* Connected UDP. */
		u = socket(AF_INET, SOCK_DGRAM, 0);
		ok(connect(u, (struct sockaddr *)&d, sizeof(d)) == 0, "connected UDP: connect to the VIP");
		fl = sizeof(from);
		getpeername(u, (struct sockaddr *)&from, &fl);
		ok(from.sin_addr.s_addr == ip("10.96.0.3"), "connected UDP: getpeername is the VIP");
		send(u, "ping", 4, 0);
		pf[0].revents = pf[1].revents = 0;
		poll(pf, 2, 1000);
		got_be = pf[0].revents & POLLIN ? 0 : pf[1].revents & POLLIN ? 1 : -1;
		if (got_be >= 0) {
			sl = sizeof(src);
			recvfrom(us[got_be], buf, sizeof(buf), 0, (struct sockaddr *)&src, &sl);
			sendto(us[got_be], "pong", 4, 0, (struct sockaddr *)&src, sl);
			fl = sizeof(from);
			n = recvfrom(u, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
			ok(n == 4 && from.sin_addr.s_addr == ip("10.96.0.3"),
			   "connected UDP: reply received, source is the VIP");
		} else {
			ok(0, "connected UDP: datagram reached no backend");
		}
		close(u);
	}

	/* AF_INET6 sockets, v4-mapped VIPs (connect6 ... getpeername6, issue
	 * 14): the same translation as above; native IPv6 untouched. */
	{
		struct sockaddr_in6 d6 = { .sin6_family = AF_INET6, .sin6_port = htons(80) }, p6, f6;
		struct sockaddr_in src;
		socklen_t pl = sizeof(p6), sl;
		struct pollfd pf[2] = { { ls[0], POLLIN, 0 }, { ls[1], POLLIN, 0 } };
		char buf[64];
		int t, a, k, got_be = -1, lsn, cli;
		ssize_t n;

		inet_pton(AF_INET6, "::ffff:10.96.0.1", &d6.sin6_addr);
		t = socket(AF_INET6, SOCK_STREAM, 0);
		ok(connect(t, (struct sockaddr *)&d6, sizeof(d6)) == 0,
		   "AF_INET6 TCP connect to ::ffff:VIP is translated");
		getpeername(t, (struct sockaddr *)&p6, &pl);
		ok(!memcmp(&p6.sin6_addr, &d6.sin6_addr, 16) && ntohs(p6.sin6_port) == 80,
		   "AF_INET6 getpeername shows ::ffff:10.96.0.1 port 80");
		if (poll(pf, 2, 1000) > 0)
			for (k = 0; k < 2; k++)
				if ((pf[k].revents & POLLIN) && (a = accept(ls[k], NULL, NULL)) >= 0) {
					got_be = k;
					close(a);
				}
		ok(got_be >= 0, "  and a backend accepted it");
		close(t);

		inet_pton(AF_INET6, "::ffff:10.96.0.2", &d6.sin6_addr);
		t = socket(AF_INET6, SOCK_STREAM, 0);
		ret = connect(t, (struct sockaddr *)&d6, sizeof(d6)) ? -errno : 0;
		is_int(ret, -ECONNREFUSED, "AF_INET6 to a service without endpoints: ECONNREFUSED");
		close(t);

		d6.sin6_port = htons(53);
		inet_pton(AF_INET6, "::ffff:10.96.0.3", &d6.sin6_addr);
		t = socket(AF_INET6, SOCK_DGRAM, 0);
		sendto(t, "ping", 4, 0, (struct sockaddr *)&d6, sizeof(d6));
		pf[0] = (struct pollfd){ us[0], POLLIN, 0 };
		pf[1] = (struct pollfd){ us[1], POLLIN, 0 };
		poll(pf, 2, 1000);
		got_be = pf[0].revents & POLLIN ? 0 : pf[1].revents & POLLIN ? 1 : -1;
		ok(got_be >= 0, "AF_INET6 unconnected UDP to ::ffff:VIP reaches a backend");
		if (got_be >= 0) {
			sl = sizeof(src);
			recvfrom(us[got_be], buf, sizeof(buf), 0, (struct sockaddr *)&src, &sl);
			sendto(us[got_be], "pong", 4, 0, (struct sockaddr *)&src, sl);
			pl = sizeof(f6);
			n = recvfrom(t, buf, sizeof(buf), 0, (struct sockaddr *)&f6, &pl);
			ok(n == 4 && !memcmp(&f6.sin6_addr, &d6.sin6_addr, 16) && ntohs(f6.sin6_port) == 53,
			   "  reply source is ::ffff:10.96.0.3 port 53 (recvmsg6)");
		}
		close(t);

		/* native IPv6: [::1] listener, left alone */
		lsn = socket(AF_INET6, SOCK_STREAM, 0);
		memset(&d6, 0, sizeof(d6));
		d6.sin6_family = AF_INET6;
		d6.sin6_addr = in6addr_loopback;
		d6.sin6_port = htons(8081);
		cli = -1;
		if (!bind(lsn, (struct sockaddr *)&d6, sizeof(d6)) && !listen(lsn, 4)) {
			cli = socket(AF_INET6, SOCK_STREAM, 0);
			ret = connect(cli, (struct sockaddr *)&d6, sizeof(d6)) ? -errno : 0;
			is_int(ret, 0, "native IPv6 [::1] from an AF_INET6 socket: untouched, connects");
		} else {
			diag("no IPv6 loopback here (%s): native IPv6 check skipped", strerror(errno));
		}
		if (cli >= 0)
			close(cli);
		close(lsn);
	}

	/* Make-before-break under load: a child connects in a loop while the
	 * parent flips the backend set 300 times. Zero failures allowed. */
	{
		int pfd[2], child_fails = -1, flips;
		pid_t pid;

		add_svc(&c2, "10.96.0.1", 80, ZH_LB_TCP, b_only3, 1);
		add_svc(&c2, "10.96.0.2", 80, ZH_LB_TCP, NULL, 0);
		add_svc(&c2, "10.96.0.3", 53, ZH_LB_UDP, b_udp, 2);
		sort_c(&c2);
		add_svc(&c3, "10.96.0.1", 80, ZH_LB_TCP, b_only2, 1);
		add_svc(&c3, "10.96.0.2", 80, ZH_LB_TCP, NULL, 0);
		add_svc(&c3, "10.96.0.3", 53, ZH_LB_UDP, b_udp, 2);
		sort_c(&c3);
		if (pipe(pfd))
			return 1;
		pid = fork();
		if (pid == 0) {
			int f = 0, k;

			for (k = 0; k < 4000; k++)
				f += conn_once("10.96.0.1", 80, ls, 2, NULL) < 0;
			if (write(pfd[1], &f, sizeof(f)) != sizeof(f))
				_exit(1);
			_exit(0);
		}
		for (flips = 0; flips < 300; flips++) {
			const struct ag_compiled *x = flips % 3 == 0 ? &c2 : flips % 3 == 1 ? &c3 : &c;

			if (ag_lb_sync(lb, x, 2 + flips, NULL))
				break;
			usleep(1000);
		}
		is_int(flips, 300, "300 live backend-set changes synced");
		if (read(pfd[0], &child_fails, sizeof(child_fails)) != sizeof(child_fails))
			child_fails = -1;
		waitpid(pid, NULL, 0);
		is_int(child_fails, 0, "4000 connections during the changes: none failed");
		close(pfd[0]);
		close(pfd[1]);
	}

	/* Removed backend gets no new connection once the update is applied. */
	ag_lb_sync(lb, &c2, 1000, &ss);
	for (i = 0, fails = 0; i < 200; i++)
		fails += conn_once("10.96.0.1", 80, ls, 2, NULL) != 1;
	is_int(fails, 0, "after the update: 200 of 200 connections to the remaining backend");

	/* Restart: close without unpin, the datapath keeps working alone. */
	ag_lb_close(lb, false);
	lb = NULL;
	is_int(conn_once("10.96.0.1", 80, ls, 2, NULL), 1, "agent gone: pinned datapath still translates");
	ret = ag_lb_open(&o, &lb);
	is_int(ret, 0, "new agent adopts pinned maps and links");
	if (ret)
		return done_testing();
	is_int(ag_lb_sync(lb, &c2, 1001, &ss), 0, "reconcile after adoption");
	ok(ss.svc_same == 3 && ss.alias_written == 0 && ss.svc_removed == 0,
	   "adopted state equals desired: nothing rewritten (same %d, written %d)", ss.svc_same,
	   ss.alias_written);
	is_int(conn_once("10.96.0.1", 80, ls, 2, NULL), 1, "adopted datapath translates");

	is_int(ag_lb_read_stats(pin, stats, meta), 0, "read pinned counters");
	is_int(meta[ZH_LB_META_GENERATION], 1001, "apply-generation marker in the map");
	ok(stats[ZH_LB_STAT_CONNECT_XLATE] >= 7000, "connect_translated counted (%llu)",
	   (unsigned long long)stats[ZH_LB_STAT_CONNECT_XLATE]);
	ok(stats[ZH_LB_STAT_CONNECT_NOBACKEND] >= 1, "no-backend refusals counted");
	ok(stats[ZH_LB_STAT_V6_MAPPED] >= 2, "v6_socket_v4mapped_service counted (%llu)",
	   (unsigned long long)stats[ZH_LB_STAT_V6_MAPPED]);
	ok(stats[ZH_LB_STAT_SENDMSG_XLATE] >= 1 && stats[ZH_LB_STAT_RECVMSG_REVNAT] >= 2,
	   "UDP counters counted");
	is_int(stats[ZH_LB_STAT_ALIAS_MISS], 0, "never a missing alias entry");

	/* A service removed: its VIP is just an address again (unroutable here). */
	{
		struct ag_compiled c4 = {};

		add_svc(&c4, "10.96.0.3", 53, ZH_LB_UDP, b_udp, 2);
		ag_lb_sync(lb, &c4, 1002, &ss);
		is_int(ss.svc_removed, 2, "2 services removed");
		ret = conn_once("10.96.0.1", 80, ls, 2, NULL);
		ok(ret == -ENETUNREACH, "removed service: connect untranslated (%d)", ret);
		for (i = 0; i < c4.n_svcs; i++) {
			free(c4.svcs[i].be);
			free(c4.svcs[i].alias);
			free(c4.svcs[i].ns);
			free(c4.svcs[i].name);
			free(c4.svcs[i].source);
		}
		free(c4.svcs);
	}

	/* --cleanup: links detached, pins gone. */
	ag_lb_close(lb, true);
	ok(access(pin, F_OK) != 0, "cleanup removed the pin dir");
	{
		struct sockaddr_in d = sa("10.96.0.3", 53);
		struct pollfd pf[2] = { { us[0], POLLIN, 0 }, { us[1], POLLIN, 0 } };
		int u = socket(AF_INET, SOCK_DGRAM, 0);

		sendto(u, "x", 1, 0, (struct sockaddr *)&d, sizeof(d));
		ok(poll(pf, 2, 200) == 0, "after cleanup: datagrams to the VIP are no longer translated");
		close(u);
	}
	for (i = 0; i < 2; i++) {
		close(ls[i]);
		close(us[i]);
	}
	{
		struct ag_compiled *all[] = { &c, &c2, &c3 };
		int k;

		for (k = 0; k < 3; k++) {
			for (i = 0; i < all[k]->n_svcs; i++) {
				free(all[k]->svcs[i].be);
				free(all[k]->svcs[i].alias);
				free(all[k]->svcs[i].ns);
				free(all[k]->svcs[i].name);
				free(all[k]->svcs[i].source);
			}
			free(all[k]->svcs);
		}
	}
	return done_testing();
}
