/* netpol_probe — probe many destinations at once, like agnhost connect.
 *
 *   netpol_probe [--timeout-ms N] PROTO:IP:PORT[:LABEL]...
 *
 * IP is IPv4, or IPv6 in brackets (tcp:[fd00::1]:80): an AF_INET6 socket.
 *
 * PROTO tcp: connected within the timeout (a denied SYN is dropped, so a
 * denied probe times out; a refused one fails at once). PROTO udp: a
 * datagram sent from a connected socket gets any reply (the echo server
 * answers) within the timeout. All probes run concurrently; one line per
 * probe on stdout: "PROTO:IP:PORT[:LABEL] ok|fail". Exit 0 (2 on usage).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MAX_PROBES 512

struct probe {
	const char *arg;
	int fd;
	int udp;
	int done, ok;
};

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int start(struct probe *p)
{
	char buf[160], *proto, *ip, *port, *rest;
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	int v6;

	snprintf(buf, sizeof(buf), "%s", p->arg);
	proto = strtok_r(buf, ":", &rest);
	v6 = rest && rest[0] == '[';
	ip = v6 ? strtok_r(rest + 1, "]", &rest) : strtok_r(NULL, ":", &rest);
	port = strtok_r(NULL, ":", &rest);
	if (!proto || !ip || !port)
		return -EINVAL;
	if (v6 ? inet_pton(AF_INET6, ip, &a6.sin6_addr) != 1 : inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		return -EINVAL;
	p->udp = strcmp(proto, "udp") == 0;
	if (!p->udp && strcmp(proto, "tcp") != 0)
		return -EINVAL;
	a.sin_port = a6.sin6_port = htons((uint16_t)atoi(port));
	p->fd = socket(v6 ? AF_INET6 : AF_INET, (p->udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK, 0);
	if (p->fd < 0)
		return -errno;
	if ((v6 ? connect(p->fd, (struct sockaddr *)&a6, sizeof(a6)) :
		  connect(p->fd, (struct sockaddr *)&a, sizeof(a))) && errno != EINPROGRESS) {
		p->done = 1;	/* e.g. EPERM from an egress policy, ECONNREFUSED */
		return 0;
	}
	if (p->udp && send(p->fd, "probe\n", 6, 0) < 0)
		p->done = 1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct probe pr[MAX_PROBES];
	struct pollfd pfd[MAX_PROBES];
	int n = 0, timeout = 1000;
	long end;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc) {
			timeout = atoi(argv[++i]);
			continue;
		}
		if (n == MAX_PROBES || argv[i][0] == '-') {
			fprintf(stderr, "usage: netpol_probe [--timeout-ms N] PROTO:IP:PORT[:LABEL]... (at most %d)\n",
				MAX_PROBES);
			return 2;
		}
		pr[n].arg = argv[i];
		pr[n].fd = -1;
		if (start(&pr[n])) {
			fprintf(stderr, "netpol_probe: bad probe %s\n", argv[i]);
			return 2;
		}
		n++;
	}
	end = now_ms() + timeout;
	for (;;) {
		int m = 0, left = (int)(end - now_ms());

		for (int i = 0; i < n; i++) {
			if (pr[i].done)
				continue;
			pfd[m].fd = pr[i].fd;
			pfd[m].events = pr[i].udp ? POLLIN : POLLOUT;
			pfd[m].revents = 0;
			m++;
		}
		if (!m || left <= 0)
			break;
		if (poll(pfd, (nfds_t)m, left) <= 0)
			continue;
		for (int i = 0, k = 0; i < n; i++) {
			int err = 0;
			socklen_t el = sizeof(err);
			char buf[64];

			if (pr[i].done)
				continue;
			if (pfd[k++].revents == 0)
				continue;
			pr[i].done = 1;
			if (pr[i].udp)
				pr[i].ok = recv(pr[i].fd, buf, sizeof(buf), 0) > 0;
			else
				pr[i].ok = getsockopt(pr[i].fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 &&
					   err == 0;
		}
	}
	for (int i = 0; i < n; i++) {
		printf("%s %s\n", pr[i].arg, pr[i].ok ? "ok" : "fail");
		if (pr[i].fd >= 0)
			close(pr[i].fd);
	}
	return 0;
}
