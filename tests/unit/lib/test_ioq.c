/* test_ioq.c — batched nonblocking sends (include/zerohop/ioq.h) on real
 * TCP loopback sockets: a batch delivers every buffer intact and reports
 * each tag once; a full socket answers -EAGAIN at once (the batch never
 * waits for room: nothing is left in flight); a reset peer reports an error;
 * receives report data, -EAGAIN and EOF without waiting; the
 * send(2)/recv(2) fallback gives the same results. The cost per send of both
 * ways is printed as a diagnostic (a figure, not a check). */
#include "tap.h"
#include "zerohop/ev.h"
#include "zerohop/ioq.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define NP 64

static int lfd;
static struct sockaddr_in laddr;

static void listener(void)
{
	socklen_t l = sizeof(laddr);

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	laddr = (struct sockaddr_in){ .sin_family = AF_INET,
				      .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(lfd, (struct sockaddr *)&laddr, sizeof(laddr)) || listen(lfd, 256) ||
	    getsockname(lfd, (struct sockaddr *)&laddr, &l))
		abort();
}

/* A connected TCP pair: *a nonblocking (the sender), *b blocking. */
static void tcp_pair(int *a, int *b)
{
	*a = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (connect(*a, (struct sockaddr *)&laddr, sizeof(laddr)) && errno != EINPROGRESS)
		abort();
	*b = accept(lfd, NULL, NULL);
	if (*b < 0)
		abort();
}

struct res {
	int calls;
	ssize_t res;
};

static void done(void *tag, ssize_t res, void *arg)
{
	struct res *r = tag;

	(void)arg;
	r->calls++;
	r->res = res;
}

static void batch_delivers(struct ioq *q, const char *mode)
{
	int a[NP], b[NP], i, good = 0, once = 0, added = 0;
	char msg[NP][64], got[64];
	struct res r[NP] = { 0 };
	unsigned n;

	for (i = 0; i < NP; i++) {
		tcp_pair(&a[i], &b[i]);
		snprintf(msg[i], sizeof(msg[i]), "message %d of the batch", i);
		added += ioq_send(q, a[i], msg[i], strlen(msg[i]), &r[i]);
	}
	is_int(added, NP, "%s: %d sends accepted", mode, NP);
	is_int(ioq_pending(q), NP, "%s: %d sends queued, none sent yet", mode, NP);
	n = ioq_flush(q, done, NULL);
	is_int(n, NP, "%s: the flush reports %d results", mode, NP);
	for (i = 0; i < NP; i++) {
		ssize_t k = recv(b[i], got, sizeof(got), 0);

		once += r[i].calls == 1;
		good += r[i].res == (ssize_t)strlen(msg[i]) && k == r[i].res &&
			!memcmp(got, msg[i], (size_t)k);
		close(a[i]);
		close(b[i]);
	}
	is_int(once, NP, "%s: every tag reported exactly once", mode);
	is_int(good, NP, "%s: every buffer arrived whole at its own peer", mode);
	is_int(ioq_pending(q), 0, "%s: the queue is empty after the flush", mode);
}

static void full_and_reset(struct ioq *q, const char *mode)
{
	int a, b, c, d, sz = 4096;
	static char big[1 << 16];
	struct res r1 = { 0 }, r2 = { 0 };
	struct linger lg = { 1, 0 };
	uint64_t t0;

	tcp_pair(&a, &b);
	setsockopt(a, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	while (send(a, big, sizeof(big), MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;	/* fill it: the peer does not read */
	tcp_pair(&c, &d);
	setsockopt(d, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(d);	/* RST to c */
	usleep(20000);
	ioq_send(q, a, big, sizeof(big), &r1);
	ioq_send(q, c, "x", 1, &r2);
	t0 = ev_now_ns();
	ioq_flush(q, done, NULL);
	ok(ev_now_ns() - t0 < 100000000ULL, "%s: a batch with a full socket returns at once", mode);
	is_int(r1.res, -EAGAIN, "%s: the full socket's send reports -EAGAIN", mode);
	ok(r2.res == -ECONNRESET || r2.res == -EPIPE,
	   "%s: the reset socket's send reports an error (%zd)", mode, r2.res);
	close(a);
	close(b);
	close(c);
}

/* Receives: data, no data (-EAGAIN at once), and the peer's EOF (0), in
 * one batch, mixed with a send. */
static void recv_batch(struct ioq *q, const char *mode)
{
	int a[NP], b[NP], i, good = 0, again = 0, eof = 0;
	char got[NP][64], msg[64];
	struct res r[NP] = { 0 }, rs = { 0 };
	uint64_t t0;

	for (i = 0; i < NP; i++) {
		tcp_pair(&a[i], &b[i]);
		snprintf(msg, sizeof(msg), "reply %d", i);
		if (i % 3 == 0)
			(void)!send(b[i], msg, strlen(msg), 0);
		else if (i % 3 == 1)
			close(b[i]), b[i] = -1;	/* EOF */
		/* i % 3 == 2: nothing to read */
	}
	usleep(20000);
	for (i = 0; i < NP; i++)
		ioq_recv(q, a[i], got[i], sizeof(got[i]), &r[i]);
	ioq_send(q, a[2], "ping", 4, &rs);	/* a send beside a recv on the same fd */
	t0 = ev_now_ns();
	is_int(ioq_flush(q, done, NULL), NP + 1, "%s: a mixed batch reports every result", mode);
	ok(ev_now_ns() - t0 < 100000000ULL, "%s: receives without data do not wait", mode);
	for (i = 0; i < NP; i++) {
		snprintf(msg, sizeof(msg), "reply %d", i);
		if (i % 3 == 0)
			good += r[i].res == (ssize_t)strlen(msg) && !memcmp(got[i], msg, strlen(msg));
		else if (i % 3 == 1)
			eof += r[i].res == 0;
		else
			again += r[i].res == -EAGAIN;
	}
	is_int(good, (NP + 2) / 3, "%s: each receive with data got its own peer's bytes", mode);
	is_int(eof, (NP + 1) / 3, "%s: each closed peer reads as EOF (0)", mode);
	is_int(again, NP / 3, "%s: each receive without data reports -EAGAIN", mode);
	is_int(rs.res, 4, "%s: the send in the same batch went out", mode);
	for (i = 0; i < NP; i++) {
		close(a[i]);
		if (b[i] >= 0)
			close(b[i]);
	}
}

/* A full batch refuses one more; a bad fd is reported per entry. */
static void full_batch(struct ioq *q, const char *mode)
{
	static struct res r[IOQ_MAX];
	int i, badf = 0;

	memset(r, 0, sizeof(r));
	for (i = 0; i < IOQ_MAX; i++)
		ioq_send(q, -1, "x", 1, &r[i]);
	ok(!ioq_send(q, -1, "x", 1, &r[0]), "%s: entry %d is refused (flush first)", mode,
	   IOQ_MAX + 1);
	is_int(ioq_flush(q, done, NULL), IOQ_MAX, "%s: a full batch flushes whole", mode);
	for (i = 0; i < IOQ_MAX; i++)
		badf += r[i].calls == 1 && r[i].res == -EBADF;
	is_int(badf, IOQ_MAX, "%s: each bad fd reports -EBADF once", mode);
}

/* ns per send: NP pairs, NP sends per flush, rounds flushes (a figure). */
static double cost(struct ioq *q, bool plain)
{
	int a[NP], b[NP], i, k, one = 1, rounds = 200;
	struct res r[NP];
	char buf[4096];
	uint64_t t0, t = 0;

	for (i = 0; i < NP; i++) {
		tcp_pair(&a[i], &b[i]);
		setsockopt(a[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	for (k = 0; k < rounds; k++) {
		t0 = ev_now_ns();
		for (i = 0; i < NP; i++) {
			if (plain)
				send(a[i], "0123456789abcdef", 16, MSG_DONTWAIT | MSG_NOSIGNAL);
			else
				ioq_send(q, a[i], "0123456789abcdef", 16, &r[i]);
		}
		if (!plain)
			ioq_flush(q, done, NULL);
		t += ev_now_ns() - t0;
		for (i = 0; i < NP; i++)
			(void)!recv(b[i], buf, sizeof(buf), 0);
	}
	for (i = 0; i < NP; i++) {
		close(a[i]);
		close(b[i]);
	}
	return (double)t / (rounds * NP);
}

int main(void)
{
	struct ioq q;
	int rc;
	double tp, tu;

	listener();
	rc = ioq_init(&q);
	ok(rc == 0 && ioq_uring(&q), "io_uring is available here (init: %d)", rc);
	batch_delivers(&q, "io_uring");
	full_and_reset(&q, "io_uring");
	full_batch(&q, "io_uring");
	recv_batch(&q, "io_uring");
	ok(ioq_uring(&q), "the ring is still in use after errors");
	tp = cost(&q, true);
	tu = cost(&q, false);
	diag("per send, %d sockets a batch: send(2) %.0f ns, ioq %.0f ns (%.2fx)", NP, tp, tu,
	     tp / tu);
	ioq_free(&q);
	ok(!ioq_uring(&q), "after ioq_free the queue falls back to send(2)");
	batch_delivers(&q, "fallback");
	full_and_reset(&q, "fallback");
	full_batch(&q, "fallback");
	recv_batch(&q, "fallback");
	close(lfd);
	return done_testing();
}
