/* test_cgpod6.c — a pod without IPv4 (an IPv6-only cluster's pod) is found
 * by its cgroup at connect6 (pol_cgpod6, bpf/policy.bpf.c invariant 10):
 * its denied connect fails at once with EPERM instead of a SYN the
 * per-packet program drops until the client gives up, and an allowed one
 * connects. Real sockets in a private network namespace; the test process
 * moves into the pod's cgroup (NS_POD under the node cgroup, as the lab's
 * kubelet lays them out) before connecting. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pol_test.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"

#define B6 "fd00:250::2"
#define SIX "fd00:250::6"

static const char *pods_yaml =
	"apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: x, labels: {app: b}}\n"
	"spec: {nodeName: node-a, containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}\n"
	"status: {phase: Running, podIP: 10.250.0.2, podIPs: [{ip: 10.250.0.2}, {ip: \"" B6 "\"}]}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: six, namespace: x, labels: {app: six}}\n"
	"spec: {nodeName: node-a, containers: [{name: c}]}\n"
	"status: {phase: Running, podIP: \"" SIX "\"}\n---\n";

static const char *deny =
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: six-egress, namespace: x}\n"
	"spec: {podSelector: {matchLabels: {app: six}}, policyTypes: [Egress]}\n";

static const char *allow =
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: six-egress, namespace: x}\n"
	"spec: {podSelector: {matchLabels: {app: six}}, policyTypes: [Egress],"
	" egress: [{to: [{podSelector: {matchLabels: {app: b}}}], ports: [{port: 8080}]}]}\n";

static int sync_to(struct pol *p, const char *policy)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char buf[900];
	int ret;

	ret = md_state_add_buf(st, "pods.yaml", pods_yaml, strlen(pods_yaml), &err);
	if (!ret)
		ret = md_state_add_buf(st, "np.yaml", policy, strlen(policy), &err);
	if (!ret)
		ret = md_state_finish(st, &err);
	if (!ret)
		ret = pol_sync(p, st, "node-a", &err);
	if (ret)
		diag("sync: %s", md_err_str(&err, buf, sizeof(buf)));
	md_state_free(st);
	return ret;
}

static struct sockaddr_in6 addr6(const char *ip, int port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };

	inet_pton(AF_INET6, ip, &a.sin6_addr);
	return a;
}

/* An unbound AF_INET6 TCP connect to dst:port: fd, -ETIMEDOUT or -errno;
 * *ms: how long connect() took to give its answer. */
static int connect6(const char *dst, int port, int wait_ms, long *ms)
{
	struct sockaddr_in6 d = addr6(dst, port);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	socklen_t el = sizeof(err);
	struct timespec t0, t1;
	int ret = fd;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (connect(fd, (struct sockaddr *)&d, sizeof(d)) && errno != EINPROGRESS)
		ret = -errno;
	else if (poll(&pfd, 1, wait_ms) != 1)
		ret = -ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err)
		ret = -err;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	if (ret < 0)
		close(fd);
	return ret;
}

static int join(const char *cg)
{
	char path[600], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	return pt_write(path, pid);
}

int main(void)
{
	struct sockaddr_in6 la = addr6(B6, 8080);
	char podcg[700];
	struct pt_env e;
	struct pol *p = NULL;
	int lfd = -1, fd, one = 1, ret;
	long ms;

	if (pt_setup(&e, "c6", "10.250.0.2 10.250.0.9")) {
		ok(0, "test environment (netns, cgroup)");
		return done_testing();
	}
	ok(system("ip -6 addr add " B6 "/128 dev lo nodad && ip -6 addr add " SIX "/128 dev lo nodad") == 0,
	   "IPv6 addresses of b and six on lo");
	snprintf(podcg, sizeof(podcg), "%s/x_six", e.cg);
	ok(mkdir(podcg, 0755) == 0 || errno == EEXIST, "the pod's cgroup x_six under the node cgroup");
	ret = pol_open(e.cg, e.pin, &p);
	is_int(ret, 0, "pol_open attaches to the node cgroup");
	if (ret)
		goto out;
	lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ok(bind(lfd, (struct sockaddr *)&la, sizeof(la)) == 0 && listen(lfd, 16) == 0,
	   "b listens on [" B6 "]:8080");

	is_int(sync_to(p, deny), 0, "sync: six (IPv6 only) may open nothing");
	ok(join(podcg) == 0, "this process is now in six's cgroup");
	fd = connect6(B6, 8080, 1000, &ms);
	ok(fd == -EPERM && ms < 100,
	   "six -> b:8080 denied: connect6 fails at once with EPERM (%s, %ld ms)",
	   fd < 0 ? strerror(-fd) : "connected", ms);
	if (fd >= 0)
		close(fd);

	is_int(sync_to(p, allow), 0, "sync: six may open b:8080");
	fd = connect6(B6, 8080, 1000, &ms);
	ok(fd >= 0, "six -> b:8080 allowed: connects (%s, %ld ms)",
	   fd < 0 ? strerror(-fd) : "ok", ms);
	if (fd >= 0)
		close(fd);
	fd = connect6(B6, 9090, 1000, &ms);
	ok(fd == -EPERM && ms < 100,
	   "six -> b:9090 (not in the rule) fails at once with EPERM (%s, %ld ms)",
	   fd < 0 ? strerror(-fd) : "connected", ms);
	if (fd >= 0)
		close(fd);
	ok(join(e.cg) == 0, "back in the node cgroup");
out:
	if (lfd >= 0)
		close(lfd);
	if (p)
		pol_close(p, 1);
	rmdir(podcg);
	pt_teardown(&e);
	return done_testing();
}
