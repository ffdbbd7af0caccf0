/* ioq.h — a batch of nonblocking socket sends and receives submitted with
 * one system call (prefix ioq_). On this VM a system call's entry and exit
 * cost about 1 µs, as much as the send or receive itself on a
 * short-circuited socket; a proxy that serves a batch of ready sockets
 * queues their receives (after epoll) and their sends (before the next
 * wait) and does each batch with one io_uring_enter(2) instead of one
 * recv(2)/send(2) each (Redis's beforeSleep write handling, h2o's deferred
 * flush).
 *
 * Contract:
 * - ioq_send() queues a send of len bytes at p on a nonblocking socket fd,
 *   ioq_recv() a receive of at most len bytes into p; nothing happens until
 *   ioq_flush(). p must stay valid (and, for a send, unchanged) until then.
 *   Both return false when the batch is full (flush first).
 * - ioq_flush() performs every queued operation and reports each result to
 *   done(tag, res, arg): bytes sent or received (a send may be short; a
 *   receive of 0 is the peer's EOF), or -errno (-EAGAIN: no room, or no
 *   data). Every operation is nonblocking (MSG_DONTWAIT, and MSG_NOSIGNAL
 *   for sends): all results are known when it returns and none is left in
 *   flight, so the caller's buffers are free again. Results may be reported
 *   in any order; each tag exactly once.
 * - At most one operation per fd and direction in one batch (their order
 *   would not be defined).
 * - With io_uring unavailable (old kernel, io_uring_disabled, seccomp) the
 *   queue falls back to one send(2)/recv(2) per entry in ioq_flush(), with
 *   the same results; ioq_uring() says which one is in use.
 * - One thread per queue.
 */
#ifndef ZH_IOQ_H
#define ZH_IOQ_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define IOQ_MAX 256	/* entries per batch */

struct ioq_ent {
	int fd;
	bool recv;
	void *p;
	size_t len;
	void *tag;
};

struct ioq {
	int ring_fd;		/* -1: fallback, send(2) per entry */
	unsigned n;		/* queued entries */
	struct ioq_ent ent[IOQ_MAX];
	/* io_uring mappings (see ioq.c) */
	void *sq_map, *cq_map, *sqes;
	size_t sq_len, cq_len, sqes_len;
	unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	void *cqes;
};

typedef void ioq_done_cb(void *tag, ssize_t res, void *arg);

/* 0 with io_uring, or the -errno that made it fall back (still usable). */
int ioq_init(struct ioq *q);
void ioq_free(struct ioq *q);
bool ioq_uring(const struct ioq *q);

static inline unsigned ioq_pending(const struct ioq *q)
{
	return q->n;
}

bool ioq_send(struct ioq *q, int fd, const void *p, size_t len, void *tag);
bool ioq_recv(struct ioq *q, int fd, void *p, size_t len, void *tag);
/* Returns the number of results reported. */
unsigned ioq_flush(struct ioq *q, ioq_done_cb *done, void *arg);

#endif
