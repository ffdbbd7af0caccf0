/* accel_check — a TCP client/server pair that exercises what applications do
 * with a stream socket, printing a deterministic transcript per case, so a
 * run with the same-node short-circuit ON can be compared byte for byte with a
 * run with it OFF (tests/e2e/40-accel.t).
 *
 *   accel_check server PORT                 serve cases one connection at a time
 *   accel_check client ADDR PORT [CASE...]  run cases (default: all), then stop the server
 *   accel_check list                        case names
 *
 * Every line of the transcript holds only what must not depend on timing or
 * on the path the bytes took: byte counts, FNV-1a checksums, the error class
 * observed. A case that does not finish within CASE_TIMEOUT seconds prints
 * "HANG" and the process exits 3. The server handles each connection in a
 * child process (so "peer exits mid-stream" is a real process exit) and
 * waits for it before accepting the next.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CASE_TIMEOUT 15
#define HDR_LEN 16
#define BUF_LEN (256 * 1024)

static const char *role = "?";
static const char *cur_case = "-";

static void on_alarm(int sig)
{
	char msg[128];
	int n = snprintf(msg, sizeof(msg), "%s %s: HANG\n", role, cur_case);

	(void)sig;
	if (write(1, msg, n) < 0)
		_exit(3);
	_exit(3);
}

static void die(const char *what)
{
	printf("%s %s: FAIL %s: %s\n", role, cur_case, what, strerror(errno));
	fflush(stdout);
	exit(1);
}

/* ---- deterministic data and checksums ------------------------------------ */

/* Byte i of stream `seed`: a function of the offset only, so any chunking of
 * the writes produces the same stream. */
static uint8_t gen_byte(uint64_t seed, uint64_t i)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i >> 3);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint8_t)(z >> ((i & 7) * 8));
}

static void gen_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = gen_byte(seed, off + i);
}

struct sum {
	uint64_t n;
	uint64_t h;	/* FNV-1a 64 */
};

static void sum_init(struct sum *s)
{
	s->n = 0;
	s->h = 0xcbf29ce484222325ull;
}

static void sum_add(struct sum *s, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		s->h ^= p[i];
		s->h *= 0x100000001b3ull;
	}
	s->n += len;
}

static struct sum sum_of(uint64_t seed, uint64_t len)
{
	static uint8_t buf[BUF_LEN];
	struct sum s;
	uint64_t off = 0;

	sum_init(&s);
	while (off < len) {
		size_t n = len - off < BUF_LEN ? len - off : BUF_LEN;

		gen_fill(buf, n, seed, off);
		sum_add(&s, buf, n);
		off += n;
	}
	return s;
}

/* ---- blocking I/O helpers ---------------------------------------------------- */

static int write_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len) {
		ssize_t n = write(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		b += n;
		len -= n;
	}
	return 0;
}

static int read_exact(int fd, void *p, size_t len)
{
	uint8_t *b = p;

	while (len) {
		ssize_t n = read(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		b += n;
		len -= n;
	}
	return 0;
}

/* Send `len` bytes of stream `seed` in writes of random size (1..max). */
static int send_stream(int fd, uint64_t seed, uint64_t len, size_t max, unsigned int *rnd)
{
	static uint8_t buf[BUF_LEN];
	uint64_t off = 0;
	int err;

	if (max > BUF_LEN)
		max = BUF_LEN;
	while (off < len) {
		size_t n = 1 + rand_r(rnd) % max;

		if (n > len - off)
			n = len - off;
		gen_fill(buf, n, seed, off);
		err = write_all(fd, buf, n);
		if (err)
			return err;
		off += n;
	}
	return 0;
}

/* Read until EOF; -errno on error. */
static int recv_to_eof(int fd, struct sum *s)
{
	static uint8_t buf[BUF_LEN];

	sum_init(s);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		sum_add(s, buf, n);
	}
}

static int recv_exact_sum(int fd, uint64_t len, struct sum *s)
{
	static uint8_t buf[BUF_LEN];

	sum_init(s);
	while (s->n < len) {
		size_t want = len - s->n < BUF_LEN ? len - s->n : BUF_LEN;
		ssize_t n = read(fd, buf, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		sum_add(s, buf, n);
	}
	return 0;
}

/* Reply with what was received: 16 bytes n, h. */
static void reply_sum(int fd, const struct sum *s)
{
	uint64_t v[2] = { s->n, s->h };

	if (write_all(fd, v, sizeof(v)))
		die("reply");
}

/* Client: read the server's (n, h) and print whether it matches the stream. */
static void check_reply(int fd, uint64_t seed, uint64_t len)
{
	struct sum want = sum_of(seed, len);
	uint64_t v[2];

	if (read_exact(fd, v, sizeof(v)))
		die("reading reply");
	printf("C %s: server got n=%llu match=%d\n", cur_case, (unsigned long long)v[0],
	       v[0] == want.n && v[1] == want.h);
}

static const char *err_class(int err)
{
	switch (err) {
	case 0:
		return "ok";
	case -EPIPE:
	case -ECONNRESET:
		return "peer-gone";	/* which one depends on timing on any path */
	case -EAGAIN:
		return "again";
	default:
		return strerror(-err);
	}
}

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- the cases: client side c_*, server side s_* ------------------------------ */

#define LARGE_LEN (4u << 20)

/* One write() call of 4 MiB (a 1 MiB+ write), then half-close. */
static void c_large(int fd)
{
	uint8_t *buf = malloc(LARGE_LEN);

	gen_fill(buf, LARGE_LEN, 1, 0);
	if (write_all(fd, buf, LARGE_LEN))
		die("write");
	free(buf);
	shutdown(fd, SHUT_WR);
	check_reply(fd, 1, LARGE_LEN);
}

static void s_to_eof_reply(int fd)
{
	struct sum s;
	int err = recv_to_eof(fd, &s);

	printf("S %s: read n=%llu h=%016llx end=%s\n", cur_case, (unsigned long long)s.n,
	       (unsigned long long)s.h, err_class(err));
	reply_sum(fd, &s);
}

/* Non-blocking sender, tiny send buffer: short writes and EAGAIN, resumed. */
#define PARTIAL_LEN (2u << 20)
static void c_partial(int fd)
{
	static uint8_t buf[65536];
	unsigned int rnd = 7;
	uint64_t off = 0;
	int sndbuf = 4096;
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	set_nonblock(fd, 1);
	while (off < PARTIAL_LEN) {
		size_t n = 1 + rand_r(&rnd) % sizeof(buf);
		ssize_t w;

		if (n > PARTIAL_LEN - off)
			n = PARTIAL_LEN - off;
		gen_fill(buf, n, 2, off);
		w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (poll(&p, 1, 5000) != 1)
				die("poll POLLOUT");
			continue;
		}
		if (w < 0)
			die("send");
		off += w;	/* a short write resumes at the first unsent byte */
	}
	set_nonblock(fd, 0);
	shutdown(fd, SHUT_WR);
	check_reply(fd, 2, PARTIAL_LEN);
}

/* Slow reader, so the normal path fills the sender's buffer. */
static void s_slow_reader(int fd)
{
	static uint8_t buf[8192];
	struct sum s;
	ssize_t n;
	int i = 0;

	sum_init(&s);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		sum_add(&s, buf, n);
		if (++i % 32 == 0)
			msleep(1);
	}
	printf("S %s: read n=%llu h=%016llx end=%s\n", cur_case, (unsigned long long)s.n,
	       (unsigned long long)s.h, err_class(n < 0 ? -errno : 0));
	reply_sum(fd, &s);
}

/* sendfile() from a file (memfd) of 3 MiB + 123 bytes. */
#define SENDFILE_LEN ((3u << 20) + 123)
static void c_sendfile(int fd)
{
	uint8_t *buf = malloc(SENDFILE_LEN);
	int mfd = memfd_create("accel_check", 0);
	off_t off = 0;

	gen_fill(buf, SENDFILE_LEN, 3, 0);
	if (mfd < 0 || write_all(mfd, buf, SENDFILE_LEN))
		die("memfd");
	free(buf);
	while (off < (off_t)SENDFILE_LEN) {
		ssize_t n = sendfile(fd, mfd, &off, SENDFILE_LEN - off);

		if (n < 0 && errno != EINTR)
			die("sendfile");
	}
	close(mfd);
	shutdown(fd, SHUT_WR);
	check_reply(fd, 3, SENDFILE_LEN);
}

/* splice(): pipe -> socket on the client, socket -> pipe on the server. */
#define SPLICE_LEN ((2u << 20) + 77)
static void c_splice(int fd)
{
	static uint8_t buf[65536];
	uint64_t off = 0;
	int pfd[2];

	if (pipe(pfd))
		die("pipe");
	while (off < SPLICE_LEN) {
		size_t n = SPLICE_LEN - off < sizeof(buf) ? SPLICE_LEN - off : sizeof(buf);
		ssize_t m;
		size_t left;

		gen_fill(buf, n, 4, off);
		if (write_all(pfd[1], buf, n))
			die("pipe write");
		for (left = n; left; left -= m) {
			m = splice(pfd[0], NULL, fd, NULL, left, SPLICE_F_MOVE);
			if (m <= 0)
				die("splice to socket");
		}
		off += n;
	}
	close(pfd[0]);
	close(pfd[1]);
	shutdown(fd, SHUT_WR);
	check_reply(fd, 4, SPLICE_LEN);
}

/* The receive side of splice: plain writes here, splice(2) on the server. */
static void c_splice_recv(int fd)
{
	unsigned int rnd = 17;

	if (send_stream(fd, 17, SPLICE_LEN, 65536, &rnd))
		die("send");
	shutdown(fd, SHUT_WR);
	check_reply(fd, 17, SPLICE_LEN);
}

static void s_splice(int fd)
{
	static uint8_t buf[65536];
	struct sum s;
	int pfd[2];
	ssize_t n, r;

	if (pipe(pfd))
		die("pipe");
	sum_init(&s);
	while ((n = splice(fd, NULL, pfd[1], NULL, sizeof(buf), SPLICE_F_MOVE)) > 0) {
		while (n > 0) {
			r = read(pfd[0], buf, n);
			if (r <= 0)
				die("pipe read");
			sum_add(&s, buf, r);
			n -= r;
		}
	}
	printf("S %s: read n=%llu h=%016llx end=%s\n", cur_case, (unsigned long long)s.n,
	       (unsigned long long)s.h, err_class(n < 0 ? -errno : 0));
	close(pfd[0]);
	close(pfd[1]);
	reply_sum(fd, &s);
}

/* MSG_PEEK then the same bytes again with MSG_WAITALL. */
static void c_peek(int fd)
{
	unsigned int rnd = 5;

	if (send_stream(fd, 5, 1000, 1000 + 1, &rnd))
		die("send");
	check_reply(fd, 5, 1000);
}

static void s_peek(int fd)
{
	uint8_t peek[100], all[1000];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct sum s;
	ssize_t n, m;

	if (poll(&p, 1, 5000) != 1)
		die("poll");
	msleep(50);	/* let the whole 1000-byte write land */
	n = recv(fd, peek, sizeof(peek), MSG_PEEK);
	m = recv(fd, all, sizeof(all), MSG_WAITALL);
	printf("S %s: peek=%zd read=%zd same=%d\n", cur_case, n, m,
	       n > 0 && m >= n && !memcmp(peek, all, n));
	sum_init(&s);
	if (m > 0)
		sum_add(&s, all, m);
	reply_sum(fd, &s);
}

/* Half-close both ways: FIN after data, then the server answers and closes. */
static void c_halfclose(int fd)
{
	unsigned int rnd = 6;
	struct sum s, want = sum_of(66, 50000);
	int err;

	if (send_stream(fd, 6, 100000, 9000, &rnd))
		die("send");
	shutdown(fd, SHUT_WR);
	err = recv_to_eof(fd, &s);
	printf("C %s: reply n=%llu match=%d end=%s\n", cur_case, (unsigned long long)s.n,
	       s.n == want.n && s.h == want.h, err_class(err));
}

static void s_halfclose(int fd)
{
	unsigned int rnd = 66;
	struct sum s;
	int err = recv_to_eof(fd, &s);

	printf("S %s: read n=%llu h=%016llx end=%s\n", cur_case, (unsigned long long)s.n,
	       (unsigned long long)s.h, err_class(err));
	/* Writing after the peer's FIN is legal: the other half is open. */
	if (send_stream(fd, 66, 50000, 7000, &rnd))
		die("send after FIN");
}

/* RST: SO_LINGER 0 close after the server acknowledged every byte. */
static void c_rst(int fd)
{
	unsigned int rnd = 8;
	struct linger lg = { 1, 0 };
	char ack;

	if (send_stream(fd, 8, 5000, 800, &rnd))
		die("send");
	if (read_exact(fd, &ack, 1))
		die("ack");
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	printf("C %s: acked, closing with RST\n", cur_case);
}

static void s_rst(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct sum s;
	char c;
	ssize_t n;
	int err = recv_exact_sum(fd, 5000, &s);

	printf("S %s: read n=%llu h=%016llx end=%s\n", cur_case, (unsigned long long)s.n,
	       (unsigned long long)s.h, err_class(err));
	if (write_all(fd, "k", 1))
		die("ack");
	if (poll(&p, 1, 5000) != 1)
		die("poll for RST");
	n = recv(fd, &c, 1, 0);
	printf("S %s: after RST recv=%zd err=%s revents_err=%d\n", cur_case, n,
	       n < 0 ? strerror(errno) : "none", !!(p.revents & (POLLERR | POLLHUP)));
}

/* Sender for the readiness cases: 1 MiB in uneven bursts with pauses. */
#define READY_LEN (1u << 20)
static void c_bursts(int fd, uint64_t seed)
{
	unsigned int rnd = (unsigned int)seed;
	uint64_t off = 0;
	static uint8_t buf[65536];
	int i = 0;

	while (off < READY_LEN) {
		size_t n = 1 + rand_r(&rnd) % sizeof(buf);

		if (n > READY_LEN - off)
			n = READY_LEN - off;
		gen_fill(buf, n, seed, off);
		if (write_all(fd, buf, n))
			die("write");
		off += n;
		if (++i % 4 == 0)
			msleep(2);
	}
	shutdown(fd, SHUT_WR);
	check_reply(fd, seed, READY_LEN);
}

static void c_epoll_et(int fd) { c_bursts(fd, 9); }
static void c_epoll_lt(int fd) { c_bursts(fd, 10); }
static void c_pollsel(int fd) { c_bursts(fd, 11); }

/* Non-blocking reader under epoll; et: drain to EAGAIN per edge; lt: one
 * small read per wakeup. A missed wakeup shows as a 5 s timeout. */
static void s_epoll(int fd, int et)
{
	static uint8_t buf[4096];
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (et ? EPOLLET : 0) };
	struct sum s;
	int ep = epoll_create1(0), done = 0, timeouts = 0;

	set_nonblock(fd, 1);
	ev.data.fd = fd;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		die("epoll");
	sum_init(&s);
	while (!done) {
		int r = epoll_wait(ep, &ev, 1, 5000);

		if (r == 0) {
			timeouts++;
			break;
		}
		if (r < 0)
			continue;
		for (;;) {
			ssize_t n = read(fd, buf, sizeof(buf));

			if (n > 0) {
				sum_add(&s, buf, n);
				if (!et)
					break;
				continue;
			}
			if (n == 0)
				done = 1;
			else if (errno != EAGAIN)
				die("read");
			break;
		}
	}
	close(ep);
	set_nonblock(fd, 0);
	printf("S %s: read n=%llu h=%016llx eof=%d timeouts=%d\n", cur_case,
	       (unsigned long long)s.n, (unsigned long long)s.h, done, timeouts);
	reply_sum(fd, &s);
}

static void s_epoll_et(int fd) { s_epoll(fd, 1); }
static void s_epoll_lt(int fd) { s_epoll(fd, 0); }

/* poll() and select() in turn before each read. */
static void s_pollsel(int fd)
{
	static uint8_t buf[16384];
	struct sum s;
	int i, done = 0, timeouts = 0;

	sum_init(&s);
	for (i = 0; !done; i++) {
		int r;

		if (i % 2) {
			struct pollfd p = { .fd = fd, .events = POLLIN };

			r = poll(&p, 1, 5000);
		} else {
			struct timeval tv = { 5, 0 };
			fd_set rf;

			FD_ZERO(&rf);
			FD_SET(fd, &rf);
			r = select(fd + 1, &rf, NULL, NULL, &tv);
		}
		if (r == 0) {
			timeouts++;
			break;
		}
		if (r < 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0)
			sum_add(&s, buf, n);
		else if (n == 0)
			done = 1;
		else if (errno != EAGAIN)
			die("recv");
		/* EAGAIN after readiness would be a false wakeup: loop. */
	}
	printf("S %s: read n=%llu h=%016llx eof=%d timeouts=%d\n", cur_case,
	       (unsigned long long)s.n, (unsigned long long)s.h, done, timeouts);
	reply_sum(fd, &s);
}

/* SO_RCVLOWAT 1000: 500 bytes must not wake the reader; 1000 come in one read. */
static void c_rcvlowat(int fd)
{
	unsigned int rnd = 12;
	char go;

	if (read_exact(fd, &go, 1))	/* the server has set SO_RCVLOWAT */
		die("go");
	if (send_stream(fd, 12, 500, 501, &rnd))
		die("send");
	msleep(300);
	/* Second half of the same stream. */
	{
		static uint8_t buf[500];

		gen_fill(buf, 500, 12, 500);
		if (write_all(fd, buf, 500))
			die("send");
	}
	check_reply(fd, 12, 1000);
}

static void s_rcvlowat(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int lowat = 1000, early, ready;
	uint8_t buf[4096];
	struct sum s;
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
	if (write_all(fd, "g", 1))
		die("go");
	msleep(150);	/* the first 500 bytes are here by now */
	early = poll(&p, 1, 0);
	/* Wait for readiness, not in recv(): on any path Linux does not wake a
	 * blocked reader that already copied part of its low-water mark. */
	ready = poll(&p, 1, 5000);
	n = recv(fd, buf, sizeof(buf), 0);
	printf("S %s: ready_below_lowat=%d ready_at_lowat=%d first_recv=%zd\n", cur_case,
	       early, ready, n);
	if (n > 0 && n < 1000 && read_exact(fd, buf + n, 1000 - n))
		die("rest");
	sum_init(&s);
	if (n > 0)
		sum_add(&s, buf, 1000);
	reply_sum(fd, &s);
}

/* The server reads 1 MiB then its process exits (close by exit, unread data
 * pending); the client keeps writing until it sees the peer is gone. */
#define EXIT_AFTER (1u << 20)
static void c_writer_until_error(int fd, uint64_t seed)
{
	static uint8_t buf[65536];
	uint64_t off = 0;
	int err = 0;

	signal(SIGPIPE, SIG_IGN);
	while (!err) {
		gen_fill(buf, sizeof(buf), seed, off);
		err = write_all(fd, buf, sizeof(buf));
		off += sizeof(buf);
	}
	printf("C %s: writing stopped: %s, wrote>=%d\n", cur_case, err_class(err),
	       off >= EXIT_AFTER);
}

static void c_peer_exit(int fd) { c_writer_until_error(fd, 13); }
static void c_close_write(int fd) { c_writer_until_error(fd, 14); }

static void s_read_then(int fd, uint64_t seed, int do_exit)
{
	struct sum s, want = sum_of(seed, EXIT_AFTER);
	int err = recv_exact_sum(fd, EXIT_AFTER, &s);

	printf("S %s: read n=%llu match=%d end=%s, now %s\n", cur_case, (unsigned long long)s.n,
	       s.n == want.n && s.h == want.h, err_class(err), do_exit ? "exiting" : "closing");
	fflush(stdout);
	if (do_exit)
		_exit(0);	/* the kernel closes the socket with bytes unread */
	close(fd);
}

static void s_peer_exit(int fd) { s_read_then(fd, 13, 1); }
static void s_close_write(int fd) { s_read_then(fd, 14, 0); }

/* Both ends write 1 MiB at once, then read the other's (no deadlock:
 * each side writes from a child thread of control — here a forked writer). */
static void c_duplex(int fd)
{
	struct sum s, want = sum_of(16, 3u << 20);
	unsigned int rnd = 15;
	pid_t pid = fork();
	int st, err;

	if (pid == 0) {
		_exit(send_stream(fd, 15, 3u << 20, 100000, &rnd) ? 1 : 0);
	}
	err = recv_exact_sum(fd, 3u << 20, &s);
	waitpid(pid, &st, 0);
	shutdown(fd, SHUT_WR);
	printf("C %s: read n=%llu match=%d end=%s writer=%d\n", cur_case,
	       (unsigned long long)s.n, s.n == want.n && s.h == want.h, err_class(err),
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	check_reply(fd, 15, 3u << 20);
}

static void s_duplex(int fd)
{
	unsigned int rnd = 16;
	pid_t pid = fork();
	struct sum s;
	int st, err;

	if (pid == 0)
		_exit(send_stream(fd, 16, 3u << 20, 70000, &rnd) ? 1 : 0);
	err = recv_to_eof(fd, &s);
	waitpid(pid, &st, 0);
	printf("S %s: read n=%llu h=%016llx end=%s writer=%d\n", cur_case,
	       (unsigned long long)s.n, (unsigned long long)s.h, err_class(err),
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	reply_sum(fd, &s);
}

struct acase {
	const char *name;
	void (*client)(int fd);
	void (*server)(int fd);
};

static const struct acase cases[] = {
	{ "large", c_large, s_to_eof_reply },
	{ "partial", c_partial, s_slow_reader },
	{ "sendfile", c_sendfile, s_to_eof_reply },
	{ "splice", c_splice, s_to_eof_reply },
	{ "splice_recv", c_splice_recv, s_splice },
	{ "peek", c_peek, s_peek },
	{ "halfclose", c_halfclose, s_halfclose },
	{ "rst", c_rst, s_rst },
	{ "epoll_et", c_epoll_et, s_epoll_et },
	{ "epoll_lt", c_epoll_lt, s_epoll_lt },
	{ "pollsel", c_pollsel, s_pollsel },
	{ "rcvlowat", c_rcvlowat, s_rcvlowat },
	{ "duplex", c_duplex, s_duplex },
	{ "peer_exit", c_peer_exit, s_peer_exit },
	{ "close_write", c_close_write, s_close_write },
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

static const struct acase *find_case(const char *name)
{
	int i;

	for (i = 0; i < NCASES; i++)
		if (!strcmp(cases[i].name, name))
			return &cases[i];
	return NULL;
}

static int serve(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	role = "S";
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 16))
		die("listen");
	printf("S listening\n");
	fflush(stdout);
	for (;;) {
		char hdr[HDR_LEN + 1] = {};
		const struct acase *c;
		int fd = accept(lfd, NULL, NULL), st;
		pid_t pid;

		if (fd < 0)
			die("accept");
		alarm(CASE_TIMEOUT);
		if (read_exact(fd, hdr, HDR_LEN))
			die("header");
		if (!strcmp(hdr, "quit")) {
			printf("S done\n");
			return 0;
		}
		c = find_case(hdr);
		if (!c) {
			printf("S unknown case '%s'\n", hdr);
			return 1;
		}
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			cur_case = c->name;
			c->server(fd);
			fflush(stdout);
			close(fd);
			_exit(0);
		}
		close(fd);
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("S %s: handler exit status %d\n", c->name,
			       WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
			fflush(stdout);
		}
		alarm(0);
	}
}

static int dial(const char *addr, int port, const char *hdr_name)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	char hdr[HDR_LEN] = {};
	int fd, tries;

	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
		fprintf(stderr, "accel_check: bad IPv4 address '%s'\n", addr);
		exit(2);
	}
	snprintf(hdr, sizeof(hdr), "%s", hdr_name);
	for (tries = 0;; tries++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(fd);
		if (tries > 100)
			die("connect");
		msleep(50);	/* the server may still be starting */
	}
	if (write_all(fd, hdr, HDR_LEN))
		die("header");
	return fd;
}

static int client(const char *addr, int port, int argc, char **argv)
{
	int i, fd;

	role = "C";
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < (argc ? argc : NCASES); i++) {
		const struct acase *c = argc ? find_case(argv[i]) : &cases[i];

		if (!c) {
			fprintf(stderr, "accel_check: unknown case '%s' (try: accel_check list)\n",
				argv[i]);
			return 2;
		}
		cur_case = c->name;
		alarm(CASE_TIMEOUT);
		fd = dial(addr, port, c->name);
		c->client(fd);
		fflush(stdout);
		close(fd);
		alarm(0);
	}
	cur_case = "quit";
	fd = dial(addr, port, "quit");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_alarm);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), argc - 4, argv + 4);
	if (argc == 2 && !strcmp(argv[1], "list")) {
		for (i = 0; i < NCASES; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	fprintf(stderr, "usage: accel_check server PORT | client ADDR PORT [CASE...] | list\n");
	return 2;
}
