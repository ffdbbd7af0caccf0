/* netpol_hold — hold one TCP connection to an echo server and ping it.
 *
 *   netpol_hold IP PORT SECONDS
 *
 * IP may be IPv6 (e.g. ::ffff:a.b.c.d: an AF_INET6 socket to a v4-mapped
 * address, as a dual-stack client connects).
 * Connects once, then every 100 ms writes 4 bytes and waits up to 100 ms for
 * them to come back. One line per round on stdout, flushed:
 *	"T_MS ok" (echo came back) or "T_MS lost" (it did not)
 * T_MS counts from the connect. Exit 0 when it connected, 1 otherwise. Used
 * to watch an established connection being revoked by a policy change. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct sockaddr *sa = (struct sockaddr *)&a;
	socklen_t salen = sizeof(a);
	long t0, end;
	int fd;

	if (argc == 4 && inet_pton(AF_INET6, argv[1], &a6.sin6_addr) == 1) {
		a6.sin6_port = htons((uint16_t)atoi(argv[2]));
		sa = (struct sockaddr *)&a6;
		salen = sizeof(a6);
	} else if (argc != 4 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
		fprintf(stderr, "usage: netpol_hold IP PORT SECONDS\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[2]));
	fd = socket(sa->sa_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, sa, salen)) {
		printf("connect failed: %s\n", strerror(errno));
		return 1;
	}
	t0 = now_ms();
	end = t0 + atoi(argv[3]) * 1000L;
	while (now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char buf[256];
		int got = 0;

		if (send(fd, "ping", 4, MSG_NOSIGNAL) != 4)
			break;
		/* drain whatever comes back within 100 ms (late echoes included) */
		while (poll(&p, 1, 100) == 1) {
			ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (n <= 0)
				break;
			got += (int)n;
			if (got >= 4)
				break;
		}
		printf("%ld %s\n", now_ms() - t0, got > 0 ? "ok" : "lost");
		fflush(stdout);
		usleep(100000);
	}
	close(fd);
	return 0;
}
