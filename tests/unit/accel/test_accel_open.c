/* test_accel_open.c — src/agent/accel.c against the real kernel: load, pin,
 * attach, adopt, local endpoints, counters from a fresh reader, policy
 * generation demotion, partial-pin recovery, off, cleanup, and the refusal to
 * attach to a cgroup root.
 *
 * Needs root, a cgroup2 mount and bpffs (skipped otherwise). Everything it
 * makes is named zhS-unit-PID and removed at the end; the traffic is loopback
 * inside a private network namespace of this process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "tap.h"
#include "zerohop/accel.h"
#include "zerohop/mounts.h"
#include "zerohop/abi/accel.h"

#define BPF_FS_MAGIC 0xcafe4a11

static char cgroot[256], cg[300], pcg[320], pin[300], oldcg[1024];

static int find_cgroup2(void)
{
	FILE *f = fopen("/proc/mounts", "r");
	char dev[256], dir[256], type[64];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fscanf(f, "%255s %255s %63s %*[^\n]", dev, dir, type) == 3)
		if (!strcmp(type, "cgroup2")) {
			snprintf(cgroot, sizeof(cgroot), "%s", dir);
			found = 1;
		}
	fclose(f);
	return found;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ok_;

	if (fd < 0)
		return -errno;
	ok_ = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok_ ? 0 : -EIO;
}

/* Move this process into cgroup dir `dir`. */
static int enter_cgroup(const char *dir)
{
	char p[600], pid[32];

	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return write_str(p, pid);
}

static void remember_cgroup(void)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512];

	snprintf(oldcg, sizeof(oldcg), "%s", cgroot);
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(oldcg, sizeof(oldcg), "%s%s", cgroot, line + 3);
		}
	}
	if (f)
		fclose(f);
}

static int lo_up(void)
{
	struct ifreq ifr = {};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), r;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	r = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	if (!r)
		r = ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	return r;
}

/* A connected loopback pair; returns 0 and fds. */
static int tcp_pair(int *cfd, int *sfd)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al))
		return -errno;
	*cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*cfd, (struct sockaddr *)&a, sizeof(a)))
		return -errno;
	*sfd = accept(lfd, NULL, NULL);
	close(lfd);
	return *sfd < 0 ? -errno : 0;
}

/* Backpressure (bpf/accel.bpf.c invariant 13): a non-blocking writer
 * whose reader does not read. Writes until EAGAIN (at most cap bytes);
 * returns the bytes taken, then reads them all back and checks their
 * order (*bad: bytes out of place, -1 short). */
static long bp_fill_and_drain(int cfd, int sfd, long cap, long *bad)
{
	static unsigned char wbuf[65536], rbuf[65536];
	struct timeval tv = { 5, 0 };
	long sent = 0, got = 0, i;
	ssize_t k;

	*bad = 0;
	fcntl(cfd, F_SETFL, fcntl(cfd, F_GETFL) | O_NONBLOCK);
	while (sent < cap) {
		for (i = 0; i < (long)sizeof(wbuf); i++)
			wbuf[i] = (unsigned char)((sent + i) % 251);
		k = write(cfd, wbuf, sizeof(wbuf));
		if (k <= 0)
			break;	/* EAGAIN: TCP's window, as without the short-circuit */
		sent += k;
	}
	setsockopt(sfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sent) {
		k = read(sfd, rbuf, sizeof(rbuf));
		if (k <= 0) {
			*bad = -1;
			break;
		}
		for (i = 0; i < k; i++)
			*bad += rbuf[i] != (unsigned char)((got + i) % 251);
		got += k;
	}
	return sent;
}

static int count_keys(const char *name)
{
	char p[400];
	uint8_t key[64], next[64];
	int fd, n = 0, err;

	snprintf(p, sizeof(p), "%s/%s", pin, name);
	fd = bpf_obj_get(p);
	if (fd < 0)
		return -errno;
	for (err = bpf_map_get_next_key(fd, NULL, next); !err;
	     err = bpf_map_get_next_key(fd, key, next)) {
		memcpy(key, next, sizeof(key));
		n++;
	}
	close(fd);
	return n;
}

static int pinned(const char *name)
{
	char p[400];

	snprintf(p, sizeof(p), "%s/%s", pin, name);
	return access(p, F_OK) == 0;
}

static __u32 link_prog_count_at(const char *path)
{
	__u32 ids[8], cnt = 8;
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	if (fd < 0)
		return 99;
	if (bpf_prog_query(fd, BPF_CGROUP_SOCK_OPS, 0, NULL, ids, &cnt))
		cnt = 99;
	close(fd);
	return cnt;
}

static __u32 link_prog_count(void)
{
	return link_prog_count_at(cg);
}

int main(void)
{
	struct ag_accel_stats st, st2;
	struct ag_accel *a = NULL, *b = NULL;
	uint32_t ips[3];
	struct statfs sfs;
	char buf[4096];
	int cfd = -1, sfd = -1, err, i;
	ssize_t n;

	if (geteuid() != 0 || !find_cgroup2()) {
		printf("1..0 # SKIP needs root and a cgroup2 mount\n");
		return 0;
	}
	/* As the agent does at start (mounts.h): the product mounts bpffs. */
	if (zh_bpffs_ensure(ZH_BPFFS) < 0 || statfs("/sys/fs/bpf", &sfs) ||
	    sfs.f_type != BPF_FS_MAGIC) {
		printf("1..0 # SKIP no bpffs at /sys/fs/bpf\n");
		return 0;
	}
	snprintf(cg, sizeof(cg), "%s/zhS-unit-%d", cgroot, getpid());
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/zerohop/zhS-unit-%d/node", getpid());
	snprintf(pcg, sizeof(pcg), "%s-proxy", cg);
	remember_cgroup();
	ok(mkdir(cg, 0755) == 0, "made cgroup %s", cg);

	/* Safety: a cgroup root is refused, nothing pinned. */
	err = ag_accel_open(cgroot, pin, 1, &a);
	is_int(err, -EPERM, "attaching to the cgroup root %s is refused", cgroot);
	ok(a == NULL, "no handle on failure");

	err = ag_accel_open(cg, pin, 1, &a);
	is_int(err, 0, "open(enable=1) loads, pins and attaches");
	if (err) {
		diag("cannot continue without the datapath");
		goto out_cg;
	}
	ok(pinned("accel_sockhash") && pinned("accel_msg") && pinned("accel_sockops_link") &&
	   pinned("accel_setsockopt_link") && pinned("accel_fin") && pinned("accel_fin_link"),
	   "maps, programs and links are pinned (the FIN hold too)");
	is_int(link_prog_count(), 1, "one sock_ops program on the cgroup");

	ips[0] = htonl(0x0af40001);
	ips[1] = htonl(0x0af40002);
	ips[2] = htonl(0x0af40003);
	is_int(ag_accel_set_local(a, ips, 3), 0, "set_local with 3 addresses");
	is_int(count_keys("accel_local"), 3, "3 local endpoints in the map");
	is_int(ag_accel_set_local(a, ips + 1, 2), 0, "set_local with 2 of them");
	is_int(count_keys("accel_local"), 2, "the stale one was removed");
	is_int(ag_accel_set_local(a, ips, ZH_ACCEL_MAX_LOCAL + 1), -E2BIG, "too many: -E2BIG");

	/* Adoption (agent restart): same link, no second attach. */
	err = ag_accel_open(cg, pin, 1, &b);
	is_int(err, 0, "a second open adopts the pins");
	is_int(link_prog_count(), 1, "still one sock_ops program on the cgroup");
	ag_accel_close(b, 0);
	b = NULL;

	/* The node proxy's cgroup (docs/accel.md "Node proxy legs"): a
	 * sibling of the node cgroup; the root and the node cgroup itself are
	 * refused; idempotent; NULL detaches. */
	{
		struct zh_accel_proxy_ep eps[ZH_ACCEL_MAX_PROXY + 1] = {
			{ .ip4 = htonl(0x0afa0001), .port = 15001 },
			{ .ip4 = htonl(0x0af40001), .port = 0 },
		};

		ok(mkdir(pcg, 0755) == 0, "made proxy cgroup %s", pcg);
		is_int(ag_accel_attach_proxy(a, cgroot), -EPERM, "proxy slot: the cgroup root is refused");
		is_int(ag_accel_attach_proxy(a, cg), -EPERM, "proxy slot: the node cgroup itself is refused");
		ok(!pinned("accel_sockops_proxy_link"), "no proxy link after a refusal");
		is_int(ag_accel_attach_proxy(a, pcg), 0, "proxy slot: a sibling cgroup is accepted");
		ok(pinned("accel_sockops_proxy_link") && pinned("accel_setsockopt_proxy_link"),
		   "proxy links pinned");
		is_int(ag_accel_attach_proxy(a, pcg), 0, "attaching the proxy slot again");
		is_int(link_prog_count_at(pcg), 1, "one sock_ops program on the proxy cgroup");
		is_int(link_prog_count(), 1, "still one on the node cgroup");
		is_int(ag_accel_set_proxy(a, eps, 2), 0, "set_proxy with 2 endpoints");
		is_int(count_keys("accel_proxy"), 2, "2 proxy endpoints in the map");
		is_int(ag_accel_set_proxy(a, eps + 1, 1), 0, "set_proxy with 1 of them");
		is_int(count_keys("accel_proxy"), 1, "the other one was removed");
		is_int(ag_accel_set_proxy(a, eps, ZH_ACCEL_MAX_PROXY + 1), -E2BIG, "too many: -E2BIG");
		is_int(ag_accel_attach_proxy(a, NULL), 0, "proxy slot detached (NULL)");
		ok(!pinned("accel_sockops_proxy_link") && link_prog_count_at(pcg) == 0,
		   "no proxy link, no program on the proxy cgroup");
		is_int(link_prog_count(), 1, "the node link stays");
		is_int(ag_accel_attach_proxy(a, pcg), 0, "proxy slot attached again (for the off case)");
	}

	/* Real sockets: this process, in the cgroup, in a private netns. */
	if (unshare(CLONE_NEWNET) || lo_up()) {
		diag("unshare/lo: %s", strerror(errno));
		goto out_close;
	}
	ok(enter_cgroup(cg) == 0, "this process entered the cgroup");
	is_int(tcp_pair(&cfd, &sfd), 0, "loopback TCP connection");
	ag_accel_stats(a, &st);
	is_int(st.active, 2, "both ends of the loopback connection are in the sockhash");
	is_int(st.sockets, 2, "sockets counter = 2");
	ok(write(cfd, "hello", 5) == 5 && read(sfd, buf, sizeof(buf)) == 5 && !memcmp(buf, "hello", 5),
	   "bytes arrive");
	ag_accel_stats(a, &st);
	ok(st.msgs >= 1 && st.bytes >= 5, "the message was redirected (msgs %llu, bytes %llu)",
	   (unsigned long long)st.msgs, (unsigned long long)st.bytes);
	is_int(ag_accel_read_pinned_stats(pin, &st2), 0, "a fresh reader gets the counters");
	ok(st2.msgs == st.msgs && st2.active == st.active, "same counters from the pins");

	/* Backpressure: a second pair whose reader does not read (inv. 13). */
	{
		int c2 = -1, s2 = -1;
		long sent, bad;

		is_int(tcp_pair(&c2, &s2), 0, "second loopback connection");
		ag_accel_stats(a, &st2);
		sent = bp_fill_and_drain(c2, s2, 64L << 20, &bad);
		ag_accel_stats(a, &st);
		ok(sent < (12L << 20), "backpressure: a writer to a reader that does not read gets EAGAIN "
		   "after %ld KiB (< 12 MiB; 64 MiB without it)", sent >> 10);
		is_int(st.backpressure - st2.backpressure, 1, "counted once in backpressure");
		ok(st.msgs > st2.msgs, "the first bytes were short-circuited (%llu messages)",
		   (unsigned long long)(st.msgs - st2.msgs));
		is_int(bad, 0, "every byte read back, in order");
		/* The reader has read everything: a later message goes back on
		 * the short-circuit. Not always the first: after the writer's
		 * EAGAIN the kernel keeps the last verdict (normal path) for one
		 * more message without running the program (tcp_bpf_send_verdict). */
		ag_accel_stats(a, &st2);
		for (i = 0; i < 2; i++) {
			usleep(100000);
			ok(write(c2, "again", 5) == 5 && read(s2, buf, sizeof(buf)) == 5 &&
			   !memcmp(buf, "again", 5), "a message after the reader caught up arrives (%d)", i);
		}
		ag_accel_stats(a, &st);
		is_int(st.bp_resumed - st2.bp_resumed, 1, "the writer resumed the short-circuit once");
		ok(st.msgs - st2.msgs >= 1, "  and from then on messages are redirected (%llu)",
		   (unsigned long long)(st.msgs - st2.msgs));
		close(c2);
		close(s2);
	}

	/* Policy generation moves: the live socket is demoted, bytes intact. */
	is_int(ag_accel_set_policy_gen(a, 7), 0, "policy generation set to 7");
	ok(write(cfd, "world", 5) == 5, "write after the change");
	n = read(sfd, buf, sizeof(buf));
	ok(n == 5 && !memcmp(buf, "world", 5), "bytes after demotion arrive (%zd)", n);
	ag_accel_stats(a, &st2);
	is_int(st2.demoted, 1, "the socket was demoted once");
	is_int(st2.msgs, st.msgs, "and nothing more was redirected");
	close(cfd);
	close(sfd);
	for (i = 0; i < 50; i++) {
		ag_accel_stats(a, &st);
		if (!st.active)
			break;
		usleep(20000);
	}
	is_int(st.active, 0, "the sockhash drains after close");
	enter_cgroup(oldcg);

out_close:
	ag_accel_close(a, 0);
	a = NULL;

	/* Partial pins (crash between pins): reloaded whole. */
	snprintf(buf, sizeof(buf), "%s/accel_stats", pin);
	unlink(buf);
	err = ag_accel_open(cg, pin, 1, &a);
	is_int(err, 0, "open over a partial pin set reloads");
	ok(pinned("accel_stats") && pinned("accel_sockops_link"), "pins complete again");
	is_int(link_prog_count(), 1, "one sock_ops program, not two");
	ag_accel_close(a, 0);
	a = NULL;

	/* Off: links gone, maps kept (stats readable), DISABLED set. */
	err = ag_accel_open(NULL, pin, 0, &a);
	is_int(err, 0, "open(enable=0)");
	ok(!pinned("accel_sockops_link") && !pinned("accel_setsockopt_link") && !pinned("accel_fin_link"),
	   "links removed");
	is_int(link_prog_count(), 0, "no sock_ops program on the cgroup");
	ok(!pinned("accel_sockops_proxy_link") && !pinned("accel_setsockopt_proxy_link") &&
	   link_prog_count_at(pcg) == 0, "proxy links removed too");
	ok(pinned("accel_stats"), "counters still pinned");
	/* Cleanup. */
	ag_accel_close(a, 1);
	a = NULL;
	ok(!pinned("accel_sockhash") && !pinned("accel_stats") && !pinned("accel_msg"),
	   "close(unpin=1) removed every pin");
	is_int(ag_accel_read_pinned_stats(pin, &st), -ENOENT, "stats after cleanup: -ENOENT");
	rmdir(pin);
	snprintf(buf, sizeof(buf), "/sys/fs/bpf/zerohop/zhS-unit-%d", getpid());
	rmdir(buf);
out_cg:
	ag_accel_close(a, 1);
	ok(rmdir(cg) == 0, "cgroup removed");
	rmdir(pcg);
	return done_testing();
}
