/* bench_srv.c — a misbehaving HTTP/TCP server for the load generator's tests.
 *
 *   bench_srv MODE [--port N] [--stall-ms 200] [--period-ms 1000] [--max-time S]
 *
 * Listens on 127.0.0.1 (port 0 = any), prints the port on the first line of
 * stdout, then serves until SIGTERM or --max-time seconds (default 120), so a
 * test that dies cannot leave it behind for long. MODE is how it answers each
 * HTTP request (one read of a head ending in CRLFCRLF, body by Content-Length):
 *   ok       200, "hello\n", keep-alive
 *   chunked  200, chunked body "hello\n" in two chunks
 *   503      503, keep-alive
 *   reset    RST (SO_LINGER 0 then close) instead of an answer
 *   short    head with Content-Length: 100, 9 body bytes, then close
 *   hang     never answers (the connection stays open)
 *   stall    like ok, but during the first --stall-ms of every --period-ms
 *            (from server start) every answer is held until the stall ends
 *   echo     raw TCP echo (for tcp://)
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXC 4096
#define BUFSZ 65536

struct held {
	int fd;
	uint64_t release;
};

static char *inbuf[MAXC];
static size_t inlen[MAXC];
static struct held *heldq;
static size_t nheld, capheld;
static volatile sig_atomic_t stop;
static const char *mode;
static uint64_t t_start, stall_ns = 200000000ULL, period_ns = 1000000000ULL;

static const char ok_resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n"
			      "Content-Type: text/plain\r\n\r\nhello\n";
static const char chunked_resp[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				   "3\r\nhel\r\n3\r\nlo\n\r\n0\r\n\r\n";
static const char e503_resp[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n"
				"\r\nbusy\n";
static const char short_resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-part";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void on_term(int sig)
{
	stop = 1;
}

static void send_all(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {	/* tests send little: wait briefly */
				usleep(100);
				continue;
			}
			return;
		}
		b += w;
		n -= (size_t)w;
	}
}

static void drop(int ep, int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	inlen[fd] = 0;
	for (size_t i = 0; i < nheld; i++)
		if (heldq[i].fd == fd)
			heldq[i].fd = -1;
}

/* One complete request at the start of inbuf[fd]? Returns its length or 0. */
static size_t request_len(int fd)
{
	char *b = inbuf[fd], *end, *cl;
	size_t head, body = 0;

	b[inlen[fd]] = 0;
	end = strstr(b, "\r\n\r\n");
	if (!end)
		return 0;
	head = (size_t)(end - b) + 4;
	cl = strcasestr(b, "\r\ncontent-length:");
	if (cl && cl < end)
		body = (size_t)strtoul(cl + 17, NULL, 10);
	return inlen[fd] >= head + body ? head + body : 0;
}

static void answer(int ep, int fd)
{
	uint64_t now = now_ns(), phase;

	if (!strcmp(mode, "ok")) {
		send_all(fd, ok_resp, sizeof(ok_resp) - 1);
	} else if (!strcmp(mode, "chunked")) {
		send_all(fd, chunked_resp, sizeof(chunked_resp) - 1);
	} else if (!strcmp(mode, "503")) {
		send_all(fd, e503_resp, sizeof(e503_resp) - 1);
	} else if (!strcmp(mode, "reset")) {
		struct linger lg = { 1, 0 };

		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		drop(ep, fd);
	} else if (!strcmp(mode, "short")) {
		send_all(fd, short_resp, sizeof(short_resp) - 1);
		drop(ep, fd);
	} else if (!strcmp(mode, "stall")) {
		phase = (now - t_start) % period_ns;
		if (phase < stall_ns) {
			if (nheld == capheld) {
				capheld = capheld ? capheld * 2 : 256;
				heldq = realloc(heldq, capheld * sizeof(*heldq));
			}
			heldq[nheld].fd = fd;
			heldq[nheld].release = now - phase + stall_ns;
			nheld++;
		} else {
			send_all(fd, ok_resp, sizeof(ok_resp) - 1);
		}
	}
	/* hang: nothing */
}

static void on_data(int ep, int fd)
{
	ssize_t n;
	size_t rl;

	if (!inbuf[fd])
		inbuf[fd] = malloc(BUFSZ + 1);
	n = recv(fd, inbuf[fd] + inlen[fd], BUFSZ - inlen[fd], 0);
	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		drop(ep, fd);
		return;
	}
	if (!strcmp(mode, "echo")) {
		send_all(fd, inbuf[fd], (size_t)n);
		return;
	}
	inlen[fd] += (size_t)n;
	while ((rl = request_len(fd))) {
		memmove(inbuf[fd], inbuf[fd] + rl, inlen[fd] - rl);
		inlen[fd] -= rl;
		answer(ep, fd);
		if (!strcmp(mode, "reset") || !strcmp(mode, "short"))
			return;	/* fd is gone */
	}
	if (inlen[fd] == BUFSZ)
		drop(ep, fd);
}

static void release_held(void)
{
	uint64_t now = now_ns();
	size_t j = 0;

	for (size_t i = 0; i < nheld; i++) {
		if (heldq[i].fd < 0)
			continue;
		if (heldq[i].release <= now)
			send_all(heldq[i].fd, ok_resp, sizeof(ok_resp) - 1);
		else
			heldq[j++] = heldq[i];
	}
	nheld = j;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct epoll_event ev, evs[64];
	int lfd, ep, one = 1, port = 0;
	double max_time = 120;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_srv ok|chunked|503|reset|short|hang|stall|echo "
			"[--port N] [--stall-ms MS] [--period-ms MS] [--max-time S]\n");
		return 2;
	}
	mode = argv[1];
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--stall-ms"))
			stall_ns = strtoull(argv[i + 1], NULL, 10) * 1000000ULL;
		else if (!strcmp(argv[i], "--period-ms"))
			period_ns = strtoull(argv[i + 1], NULL, 10) * 1000000ULL;
		else if (!strcmp(argv[i], "--max-time"))
			max_time = atof(argv[i + 1]);
		else {
			fprintf(stderr, "bench_srv: unknown flag %s\n", argv[i]);
			return 2;
		}
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1024)) {
		perror("bench_srv: listen");
		return 1;
	}
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	printf("%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	ep = epoll_create1(0);
	ev.events = EPOLLIN;
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	t_start = now_ns();
	while (!stop && now_ns() - t_start < (uint64_t)(max_time * 1e9)) {
		int n = epoll_wait(ep, evs, 64, nheld ? 1 : 100);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				int c;

				while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					if (c >= MAXC) {
						close(c);
						continue;
					}
					setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					inlen[c] = 0;
					ev.events = EPOLLIN;
					ev.data.fd = c;
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
				}
				continue;
			}
			on_data(ep, fd);
		}
		if (nheld)
			release_held();
	}
	return 0;
}
