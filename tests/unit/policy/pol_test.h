/* pol_test.h — helpers for the policy datapath tests: a private network
 * namespace with "pod" addresses on lo, a cgroup of our own (prefix zhP) the
 * test process joins, plain socket helpers with timeouts. Header-only. */
#ifndef ZH_POL_TEST_H
#define ZH_POL_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tap.h"

struct pt_env {
	char cg2[256];		/* cgroup2 mount */
	char cg[320];		/* our cgroup */
	char pin[320];		/* our pin dir */
	char pin_lab[256];	/* its parent, removed at the end */
};

/* cgroup2 mount point, mounting our own under /run/zerohop when none is. */
static inline int pt_cgroup2(char *out, size_t len)
{
	char dev[256], mnt[256], type[64];
	FILE *f = fopen("/proc/self/mounts", "r");

	while (f && fscanf(f, "%255s %255s %63s %*[^\n]", dev, mnt, type) == 3) {
		if (strcmp(type, "cgroup2") == 0) {
			snprintf(out, len, "%s", mnt);
			fclose(f);
			return 0;
		}
	}
	if (f)
		fclose(f);
	mkdir("/run/zerohop", 0755);
	mkdir("/run/zerohop/cgroup2", 0755);
	if (mount("none", "/run/zerohop/cgroup2", "cgroup2", 0, NULL) && errno != EBUSY)
		return -errno;
	snprintf(out, len, "/run/zerohop/cgroup2");
	return 0;
}

static inline int pt_write(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Remove what a crashed earlier run of this test left: cgroup zhP-TAG-PID
 * and pin dir /sys/fs/bpf/zerohop/zhP-TAG-PID/node-a, for dead PIDs only. */
static inline void pt_reap(const char *cg2, const char *tag)
{
	char prefix[64], path[600];
	struct dirent *de;
	DIR *d = opendir(cg2);

	snprintf(prefix, sizeof(prefix), "zhP-%s-", tag);
	while (d && (de = readdir(d))) {
		DIR *pd;
		struct dirent *pe;
		int pid;

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		pid = atoi(de->d_name + strlen(prefix));
		if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "/sys/fs/bpf/zerohop/%s/node-a", de->d_name);
		pd = opendir(path);
		while (pd && (pe = readdir(pd))) {
			char f[900];

			if (pe->d_name[0] == '.')
				continue;
			snprintf(f, sizeof(f), "%s/%s", path, pe->d_name);
			unlink(f);
		}
		if (pd)
			closedir(pd);
		rmdir(path);
		snprintf(path, sizeof(path), "/sys/fs/bpf/zerohop/%s", de->d_name);
		rmdir(path);
		snprintf(path, sizeof(path), "%s/%s", cg2, de->d_name);
		rmdir(path);
	}
	if (d)
		closedir(d);
}

/* Private netns with addrs (space separated) on lo; join a new zhP cgroup. */
static inline int pt_setup(struct pt_env *e, const char *tag, const char *addrs)
{
	char cmd[512], pid[32];

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (BPF, netns, cgroup)\n");
		exit(0);
	}
	if (unshare(CLONE_NEWNET)) {
		printf("1..0 # SKIP unshare(CLONE_NEWNET): %s\n", strerror(errno));
		exit(0);
	}
	snprintf(cmd, sizeof(cmd), "ip link set lo up");
	for (const char *a = addrs; *a;) {
		char one[32];
		int n = 0;

		while (*a == ' ')
			a++;
		while (*a && *a != ' ' && n < 31)
			one[n++] = *a++;
		one[n] = 0;
		if (n)
			snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd),
				 " && ip addr add %s/32 dev lo", one);
	}
	if (system(cmd) != 0)
		return -EIO;
	if (pt_cgroup2(e->cg2, sizeof(e->cg2)))
		return -EIO;
	pt_reap(e->cg2, tag);
	snprintf(e->cg, sizeof(e->cg), "%s/zhP-%s-%d", e->cg2, tag, (int)getpid());
	if (mkdir(e->cg, 0755) && errno != EEXIST)
		return -errno;
	snprintf(cmd, sizeof(cmd), "%s/cgroup.procs", e->cg);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (pt_write(cmd, pid))
		return -EIO;
	snprintf(e->pin_lab, sizeof(e->pin_lab), "/sys/fs/bpf/zerohop/zhP-%s-%d", tag, (int)getpid());
	snprintf(e->pin, sizeof(e->pin), "%s/node-a", e->pin_lab);
	return 0;
}

static inline void pt_teardown(struct pt_env *e)
{
	char path[400], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", e->cg2);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	pt_write(path, pid);
	rmdir(e->cg);
	rmdir(e->pin);
	rmdir(e->pin_lab);
}

static inline struct sockaddr_in pt_addr(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static inline int pt_listen(const char *ip, int port, int type)
{
	struct sockaddr_in a = pt_addr(ip, port);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    (type == SOCK_STREAM && listen(fd, 16))) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* TCP connect from src to dst:port; fd, or -ETIMEDOUT / -errno. */
static inline int pt_connect(const char *src, const char *dst, int port, int ms)
{
	struct sockaddr_in s = pt_addr(src, 0), d = pt_addr(dst, port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
	socklen_t el = sizeof(err);
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };

	if (bind(fd, (struct sockaddr *)&s, sizeof(s)))
		goto fail;
	if (connect(fd, (struct sockaddr *)&d, sizeof(d)) && errno != EINPROGRESS)
		goto fail;
	if (poll(&pfd, 1, ms) != 1) {
		close(fd);
		return -ETIMEDOUT;
	}
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
	if (err) {
		close(fd);
		return -err;
	}
	return fd;
fail:
	err = errno;
	close(fd);
	return -err;
}

/* Read up to len bytes within ms; bytes read, 0 on timeout, -errno. */
static inline int pt_recv(int fd, void *buf, size_t len, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&pfd, 1, ms) != 1)
		return 0;
	n = recv(fd, buf, len, MSG_DONTWAIT);
	return n < 0 ? -errno : (int)n;
}

static inline int pt_accept(int lfd, int ms)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };

	if (poll(&pfd, 1, ms) != 1)
		return -ETIMEDOUT;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* UDP socket bound to ip:port (0 = any port). */
static inline int pt_udp(const char *ip, int port)
{
	return pt_listen(ip, port, SOCK_DGRAM);
}

static inline int pt_sendto(int fd, const char *dst, int port, const char *msg)
{
	struct sockaddr_in d = pt_addr(dst, port);

	return sendto(fd, msg, strlen(msg), 0, (struct sockaddr *)&d, sizeof(d)) < 0 ? -errno : 0;
}

#endif
