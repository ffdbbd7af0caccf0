/* px_capcheck.c — TAP test of bpf/l7cap.bpf.c on the real kernel: attach the
 * sock_ops program to a cgroup of our own (zhX-l7cap-PID under the cgroup2
 * mount given as argv[1]), join it, and check the hand-over from the
 * cookie-keyed map (what connect4 writes) to the client-address map (what
 * the proxy reads at accept). Maps are not pinned. Cleans up on every path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/abi/l7cap.h"
#include "l7cap.skel.h"

static int n, failed;

static void ok(int cond, const char *what)
{
	n++;
	if (!cond)
		failed++;
	printf("%sok %d - %s\n", cond ? "" : "not ", n, what);
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Connect a fresh client to 127.0.0.1:port; before that, record dst for its
 * cookie when dst != NULL. Returns the fd or -1. */
static int client(int map_fd, uint16_t port, const struct zh_l7cap_dst *dst, uint64_t *cookie)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t cl = sizeof(*cookie);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_COOKIE, cookie, &cl))
		return -1;
	if (dst && bpf_map_update_elem(map_fd, cookie, dst, BPF_ANY))
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int listener(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&a, &al))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

/* Look up (and delete) the original destination of the accepted peer. */
static int peer_orig(int map_fd, int lfd, struct zh_l7cap_dst *out)
{
	struct sockaddr_in p;
	socklen_t pl = sizeof(p);
	struct zh_l7cap_client k = { 0 };
	int afd = accept(lfd, (struct sockaddr *)&p, &pl), rc;

	if (afd < 0)
		return -errno;
	k.ip = p.sin_addr.s_addr;
	k.port = p.sin_port;
	rc = bpf_map_lookup_elem(map_fd, &k, out) ? -errno : 0;
	if (!rc)
		bpf_map_delete_elem(map_fd, &k);
	close(afd);
	return rc;
}

int main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : "/sys/fs/cgroup/unified";
	char cg[512], procs[600], orig[600], line[512], self[32];
	struct zh_l7cap_dst want = { .ip = htonl(0x0a60004d), .port = htons(8080) }, got;
	struct zh_l7cap *skel = NULL;
	struct bpf_link *link = NULL;
	struct bpf_map *m;
	uint16_t pport = 0, oport = 0;
	int cgfd = -1, lfd = -1, lfd2 = -1, c1 = -1, c2 = -1, c3 = -1, joined = 0;
	uint64_t ck;
	FILE *f;

	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(cg, sizeof(cg), "%s/zhX-l7cap-%d", root, (int)getpid());
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	snprintf(self, sizeof(self), "%d", (int)getpid());
	/* where we are now in the v2 hierarchy, to go back */
	orig[0] = 0;
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(orig, sizeof(orig), "%s%s/cgroup.procs", root, line + 3);
		}
	if (f)
		fclose(f);
	lfd = listener(&pport);
	lfd2 = listener(&oport);
	if (lfd < 0 || lfd2 < 0 || mkdir(cg, 0755)) {
		printf("1..0 # SKIP cannot create listeners or cgroup %s: %s\n", cg, strerror(errno));
		return 0;
	}
	cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	skel = zh_l7cap__open();
	ok(skel != NULL, "l7cap opens");
	if (!skel)
		goto out;
	/* No pinning in a test: without a pin root, libbpf would pin the
	 * shared maps at the bpffs root, outside any lab. */
	bpf_object__for_each_map(m, skel->obj)
		bpf_map__set_pin_path(m, NULL);
	skel->rodata->l7cap_cfg.proxy_ip = htonl(INADDR_LOOPBACK);
	skel->rodata->l7cap_cfg.proxy_port = htons(pport);
	ok(zh_l7cap__load(skel) == 0, "l7cap loads (verifier)");
	link = bpf_program__attach_cgroup(skel->progs.zh_l7cap_sockops, cgfd);
	ok(link != NULL, "sock_ops attached to our own cgroup");
	if (!link)
		goto out;
	joined = write_file(procs, self) == 0;
	ok(joined, "test process joined the cgroup");
	if (!joined)
		goto out;

	int sock_fd = bpf_map__fd(skel->maps.zh_l7cap_sock);
	int orig_fd = bpf_map__fd(skel->maps.zh_l7cap_orig);

	c1 = client(sock_fd, pport, &want, &ck);
	ok(c1 >= 0, "redirected client connects to the proxy listener");
	memset(&got, 0, sizeof(got));
	ok(peer_orig(orig_fd, lfd, &got) == 0, "proxy finds the original destination by peer address");
	ok(got.ip == want.ip && got.port == want.port, "… 10.96.0.77:8080, byte for byte");
	ok(bpf_map_lookup_elem(sock_fd, &ck, &got) && errno == ENOENT,
	   "cookie entry consumed (deleted) by sock_ops");
	c2 = client(sock_fd, pport, NULL, &ck);
	ok(c2 >= 0 && peer_orig(orig_fd, lfd, &got) == -ENOENT,
	   "a direct (unredirected) client has no entry: the proxy closes it");
	c3 = client(sock_fd, oport, &want, &ck);
	ok(c3 >= 0 && peer_orig(orig_fd, lfd2, &got) == -ENOENT,
	   "a connection to another port is not recorded");
	ok(bpf_map_lookup_elem(sock_fd, &ck, &got) == 0, "… and its cookie entry is left alone");
out:
	if (joined && orig[0] && write_file(orig, self))
		fprintf(stderr, "px_capcheck: could not return to %s\n", orig);
	if (c1 >= 0)
		close(c1);
	if (c2 >= 0)
		close(c2);
	if (c3 >= 0)
		close(c3);
	bpf_link__destroy(link);
	zh_l7cap__destroy(skel);
	if (cgfd >= 0)
		close(cgfd);
	if (rmdir(cg))
		fprintf(stderr, "px_capcheck: rmdir %s: %s\n", cg, strerror(errno));
	close(lfd);
	close(lfd2);
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}
