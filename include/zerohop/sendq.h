/* sendq.h — a batch of nonblocking sends submitted with one system call
 * (prefix sendq_). On this VM a system call's entry and exit cost about
 * 1 µs, as much as the send itself on a short-circuited socket; a proxy
 * that answers a batch of ready sockets queues their sends and flushes them
 * together (Redis's beforeSleep write handling, h2o's deferred flush), with
 * one io_uring_enter(2) instead of one send(2) each.
 *
 * Contract:
 * - sendq_add() queues a send of len bytes at p on a nonblocking socket fd;
 *   nothing is sent until sendq_flush(). p must stay valid and unchanged
 *   until then. Returns false when the batch is full (flush first).
 * - sendq_flush() sends every queued buffer and reports each result to
 *   done(tag, res, arg): bytes sent (possibly fewer than len), or -errno
 *   (-EAGAIN when the socket buffer was full). Every send is nonblocking
 *   (MSG_DONTWAIT | MSG_NOSIGNAL): all results are known when it returns,
 *   and no send is left in flight, so the caller's buffers are free again.
 *   Results may be reported in any order; each tag exactly once.
 * - Sends on the same fd in one batch are not allowed (their order would not
 *   be defined): queue one per fd and per flush.
 * - With io_uring unavailable (old kernel, io_uring_disabled, seccomp) the
 *   queue falls back to one send(2) per entry in sendq_flush(), with the same
 *   results; sendq_uring() says which one is in use.
 * - One thread per queue.
 */
#ifndef ZH_SENDQ_H
#define ZH_SENDQ_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SENDQ_MAX 256	/* entries per batch */

struct sendq_ent {
	int fd;
	const void *p;
	size_t len;
	void *tag;
};

struct sendq {
	int ring_fd;		/* -1: fallback, send(2) per entry */
	unsigned n;		/* queued entries */
	struct sendq_ent ent[SENDQ_MAX];
	/* io_uring mappings (see sendq.c) */
	void *sq_map, *cq_map, *sqes;
	size_t sq_len, cq_len, sqes_len;
	unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	void *cqes;
};

typedef void sendq_done_cb(void *tag, ssize_t res, void *arg);

/* 0 with io_uring, or the -errno that made it fall back (still usable). */
int sendq_init(struct sendq *q);
void sendq_free(struct sendq *q);
bool sendq_uring(const struct sendq *q);

static inline unsigned sendq_pending(const struct sendq *q)
{
	return q->n;
}

bool sendq_add(struct sendq *q, int fd, const void *p, size_t len, void *tag);
/* Returns the number of sends reported. */
unsigned sendq_flush(struct sendq *q, sendq_done_cb *done, void *arg);

#endif
