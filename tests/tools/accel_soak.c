/* accel_soak — many connections, random message sizes, every byte checked.
 *
 *   accel_soak server PORT
 *   accel_soak client ADDR PORT CONNS SECONDS [SEED]
 *
 * Each client thread owns one connection and loops until the deadline: it
 * sends a message (16-byte header: length, sequence, FNV-1a 64 of the
 * payload; then 1 B .. 1 MiB of payload, sizes log-uniform so small and large
 * both occur often) in writes of random size, the server checks it and echoes
 * it back in writes of random size, and the client checks the echo against
 * what it sent. Every 50th message on average a thread closes and reopens
 * its connection (insert/remove churn in the sockhash).
 *
 * A read or write that makes no progress for IO_TIMEOUT seconds counts as a
 * hang (SO_RCVTIMEO/SO_SNDTIMEO). The client prints one summary line and
 * exits 0 only with zero corruption, zero hangs and zero errors; the server
 * prints a "CORRUPT" line for any bad message it sees.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_MSG (1u << 20)
#define IO_TIMEOUT 10
#define HDR_LEN 16

struct hdr {
	uint32_t len;
	uint32_t seq;
	uint64_t sum;
};
_Static_assert(sizeof(struct hdr) == HDR_LEN, "header layout");

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t xs(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* 0: done; -ETIMEDOUT: no progress within IO_TIMEOUT (a hang); -errno. */
static int io_all(int fd, void *buf, size_t len, int wr, uint64_t *rnd)
{
	uint8_t *p = buf;

	while (len) {
		size_t chunk = len;
		ssize_t n;

		if (rnd && xs(rnd) % 4 == 0)	/* split some transfers */
			chunk = 1 + xs(rnd) % len;
		n = wr ? send(fd, p, chunk, MSG_NOSIGNAL) : recv(fd, p, chunk, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= n;
	}
	return 0;
}

static void set_timeouts(int fd)
{
	struct timeval tv = { IO_TIMEOUT, 0 };
	int one = 1;

	/* Header and payload are separate writes: without NODELAY the normal
	 * path would wait on delayed ACKs and measure nothing useful. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ---- server ------------------------------------------------------------------ */

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc(MAX_MSG);
	uint64_t rnd = (uint64_t)fd * 0x9e3779b97f4a7c15ull | 1;
	struct hdr h;

	set_timeouts(fd);
	for (;;) {
		if (io_all(fd, &h, sizeof(h), 0, NULL))
			break;	/* client closed (or gone): end of this connection */
		if (h.len == 0 || h.len > MAX_MSG) {
			printf("S CORRUPT fd=%d bad length %u\n", fd, h.len);
			break;
		}
		if (io_all(fd, buf, h.len, 0, &rnd))
			break;
		if (fnv(buf, h.len) != h.sum)
			printf("S CORRUPT fd=%d seq=%u len=%u\n", fd, h.seq, h.len);
		if (io_all(fd, &h, sizeof(h), 1, NULL) || io_all(fd, buf, h.len, 1, &rnd))
			break;
	}
	free(buf);
	close(fd);
	return NULL;
}

static int server(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 256)) {
		perror("accel_soak: listen");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("S listening\n");
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0)
			continue;
		if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd)) {
			close(fd);
			continue;
		}
		pthread_detach(t);
	}
}

/* ---- client ------------------------------------------------------------------ */

static struct sockaddr_in peer;
static double deadline;

struct worker {
	pthread_t t;
	uint64_t seed;
	uint64_t msgs, bytes, corrupt, hangs, errors, reconnects;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dial(void)
{
	int fd, tries;

	for (tries = 0; tries < 100; tries++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&peer, sizeof(peer))) {
			set_timeouts(fd);
			return fd;
		}
		close(fd);
		usleep(50000);
	}
	return -1;
}

static void count_err(struct worker *w, int err)
{
	if (err == -ETIMEDOUT)
		w->hangs++;
	else
		w->errors++;
}

static void *client_conn(void *arg)
{
	struct worker *w = arg;
	uint8_t *out = malloc(MAX_MSG), *in = malloc(MAX_MSG);
	uint64_t rnd = w->seed;
	uint32_t seq = 0;
	int fd = dial(), err;

	if (fd < 0) {
		w->errors++;
		goto out;
	}
	while (now() < deadline) {
		/* log-uniform length in [1, 1 MiB] */
		uint32_t bits = xs(&rnd) % 21;
		uint32_t len = 1 + (uint32_t)(xs(&rnd) % (1u << bits));
		struct hdr h = { .len = len, .seq = seq++ }, back;
		uint32_t i;

		for (i = 0; i + 8 <= len; i += 8) {
			uint64_t v = xs(&rnd);

			memcpy(out + i, &v, 8);
		}
		for (; i < len; i++)
			out[i] = (uint8_t)xs(&rnd);
		h.sum = fnv(out, len);
		err = io_all(fd, &h, sizeof(h), 1, NULL);
		if (!err)
			err = io_all(fd, out, len, 1, &rnd);
		if (!err)
			err = io_all(fd, &back, sizeof(back), 0, NULL);
		if (!err && (back.len != h.len || back.seq != h.seq || back.sum != h.sum)) {
			w->corrupt++;
			break;	/* the stream is out of step: stop this worker */
		}
		if (!err)
			err = io_all(fd, in, len, 0, &rnd);
		if (err) {
			count_err(w, err);
			break;
		}
		if (memcmp(in, out, len) || fnv(in, len) != h.sum)
			w->corrupt++;
		w->msgs++;
		w->bytes += 2ull * len;
		if (xs(&rnd) % 50 == 0) {
			close(fd);
			fd = dial();
			w->reconnects++;
			if (fd < 0) {
				w->errors++;
				goto out;
			}
		}
	}
	close(fd);
out:
	free(out);
	free(in);
	return NULL;
}

static int client(const char *addr, int port, int conns, int secs, uint64_t seed)
{
	struct worker *ws = calloc(conns, sizeof(*ws));
	struct worker sum = {};
	int i;

	peer.sin_family = AF_INET;
	peer.sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &peer.sin_addr) != 1) {
		fprintf(stderr, "accel_soak: bad IPv4 address '%s'\n", addr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	deadline = now() + secs;
	for (i = 0; i < conns; i++) {
		ws[i].seed = (seed + i + 1) * 0x9e3779b97f4a7c15ull | 1;
		if (pthread_create(&ws[i].t, NULL, client_conn, &ws[i])) {
			fprintf(stderr, "accel_soak: pthread_create failed\n");
			return 1;
		}
	}
	for (i = 0; i < conns; i++) {
		pthread_join(ws[i].t, NULL);
		sum.msgs += ws[i].msgs;
		sum.bytes += ws[i].bytes;
		sum.corrupt += ws[i].corrupt;
		sum.hangs += ws[i].hangs;
		sum.errors += ws[i].errors;
		sum.reconnects += ws[i].reconnects;
	}
	printf("soak: conns=%d secs=%d msgs=%llu bytes=%llu corrupt=%llu hangs=%llu errors=%llu "
	       "reconnects=%llu\n", conns, secs, (unsigned long long)sum.msgs,
	       (unsigned long long)sum.bytes, (unsigned long long)sum.corrupt,
	       (unsigned long long)sum.hangs, (unsigned long long)sum.errors,
	       (unsigned long long)sum.reconnects);
	free(ws);
	return sum.corrupt || sum.hangs || sum.errors || !sum.msgs;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
			      argc == 7 ? strtoull(argv[6], NULL, 0) : 1);
	fprintf(stderr, "usage: accel_soak server PORT | client ADDR PORT CONNS SECONDS [SEED]\n");
	return 2;
}
