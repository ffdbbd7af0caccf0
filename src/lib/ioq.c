/* ioq.c — batched nonblocking sends and receives over a minimal io_uring
 * (contract in include/zerohop/ioq.h).
 *
 * Why every operation completes inside io_uring_enter: the SQEs carry
 * MSG_DONTWAIT, which makes the kernel mark the request no-wait
 * (REQ_F_NOWAIT): a socket without room (send) or without data (recv)
 * completes with -EAGAIN instead of arming a poll and finishing later. The
 * others copy their bytes during the submit, inline on this thread. So one
 * io_uring_enter(n, min_complete = n, GETEVENTS) submits the batch and
 * returns with all n completions posted; none is ever in flight afterwards,
 * and the caller's buffers are free again — the same semantics as n
 * send(2)/recv(2) calls, at the price of one system call. (The wait for
 * stragglers below is a safety net: if a kernel ever punted one, a buffer
 * would still not be handed back early.)
 *
 * Ring layout (io_uring(7)): the SQ ring (head, tail, mask, array), the SQE
 * array and the CQ ring (head, tail, mask, cqes) are three mmaps (two with
 * IORING_FEAT_SINGLE_MMAP). This thread is the only producer of SQEs and the
 * only consumer of CQEs: a release store publishes the SQ tail, an acquire
 * load reads the CQ tail.
 */
#include "zerohop/ioq.h"

#include <errno.h>
#include <linux/io_uring.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int ring_setup(unsigned entries, struct io_uring_params *p)
{
	return (int)syscall(__NR_io_uring_setup, entries, p);
}

static int ring_enter(int fd, unsigned submit, unsigned wait, unsigned flags)
{
	return (int)syscall(__NR_io_uring_enter, fd, submit, wait, flags, NULL, 0);
}

static void unmap_all(struct ioq *q)
{
	if (q->sqes)
		munmap(q->sqes, q->sqes_len);
	if (q->cq_map && q->cq_map != q->sq_map)
		munmap(q->cq_map, q->cq_len);
	if (q->sq_map)
		munmap(q->sq_map, q->sq_len);
	q->sqes = q->cq_map = q->sq_map = NULL;
}

int ioq_init(struct ioq *q)
{
	struct io_uring_params p;
	int fd, err;

	memset(q, 0, sizeof(*q));
	q->ring_fd = -1;
	memset(&p, 0, sizeof(p));
	fd = ring_setup(IOQ_MAX, &p);
	if (fd < 0)
		return -errno;
	q->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	q->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP)
		q->sq_len = q->cq_len = q->sq_len > q->cq_len ? q->sq_len : q->cq_len;
	q->sq_map = mmap(NULL, q->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			 fd, IORING_OFF_SQ_RING);
	if (q->sq_map == MAP_FAILED) {
		q->sq_map = NULL;
		goto fail;
	}
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		q->cq_map = q->sq_map;
	} else {
		q->cq_map = mmap(NULL, q->cq_len, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
		if (q->cq_map == MAP_FAILED) {
			q->cq_map = NULL;
			goto fail;
		}
	}
	q->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	q->sqes = mmap(NULL, q->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       fd, IORING_OFF_SQES);
	if (q->sqes == MAP_FAILED) {
		q->sqes = NULL;
		goto fail;
	}
	q->sq_head = (unsigned *)((char *)q->sq_map + p.sq_off.head);
	q->sq_tail = (unsigned *)((char *)q->sq_map + p.sq_off.tail);
	q->sq_mask = (unsigned *)((char *)q->sq_map + p.sq_off.ring_mask);
	q->sq_array = (unsigned *)((char *)q->sq_map + p.sq_off.array);
	q->cq_head = (unsigned *)((char *)q->cq_map + p.cq_off.head);
	q->cq_tail = (unsigned *)((char *)q->cq_map + p.cq_off.tail);
	q->cq_mask = (unsigned *)((char *)q->cq_map + p.cq_off.ring_mask);
	q->cqes = (char *)q->cq_map + p.cq_off.cqes;
	q->ring_fd = fd;
	return 0;
fail:
	err = -errno;
	unmap_all(q);
	close(fd);
	return err;
}

void ioq_free(struct ioq *q)
{
	if (q->ring_fd >= 0) {
		unmap_all(q);
		close(q->ring_fd);
	}
	q->ring_fd = -1;
	q->n = 0;
}

bool ioq_uring(const struct ioq *q)
{
	return q->ring_fd >= 0;
}

bool ioq_send(struct ioq *q, int fd, const void *p, size_t len, void *tag)
{
	if (q->n == IOQ_MAX)
		return false;
	q->ent[q->n++] = (struct ioq_ent){ .fd = fd, .p = (void *)p, .len = len, .tag = tag };
	return true;
}

bool ioq_recv(struct ioq *q, int fd, void *p, size_t len, void *tag)
{
	if (q->n == IOQ_MAX)
		return false;
	q->ent[q->n++] = (struct ioq_ent){ .fd = fd, .recv = true, .p = p, .len = len, .tag = tag };
	return true;
}

static unsigned flush_plain(struct ioq *q, ioq_done_cb *done, void *arg)
{
	unsigned i, n = q->n;

	q->n = 0;
	for (i = 0; i < n; i++) {
		struct ioq_ent *e = &q->ent[i];
		ssize_t r = e->recv ? recv(e->fd, e->p, e->len, MSG_DONTWAIT)
				    : send(e->fd, e->p, e->len, MSG_DONTWAIT | MSG_NOSIGNAL);

		done(q->ent[i].tag, r < 0 ? -errno : r, arg);
	}
	return n;
}

unsigned ioq_flush(struct ioq *q, ioq_done_cb *done, void *arg)
{
	unsigned i, n = q->n, tail, head, got = 0;
	struct io_uring_sqe *sqes = q->sqes;
	struct io_uring_cqe *cqes = q->cqes;
	int r;

	if (!n)
		return 0;
	if (q->ring_fd < 0 || n == 1)	/* one operation: a plain call is as cheap */
		return flush_plain(q, done, arg);
	tail = *q->sq_tail;
	for (i = 0; i < n; i++) {
		unsigned idx = (tail + i) & *q->sq_mask;
		struct io_uring_sqe *e = &sqes[idx];

		memset(e, 0, sizeof(*e));
		e->opcode = q->ent[i].recv ? IORING_OP_RECV : IORING_OP_SEND;
		e->fd = q->ent[i].fd;
		e->addr = (unsigned long)q->ent[i].p;
		e->len = (unsigned)q->ent[i].len;
		e->msg_flags = q->ent[i].recv ? MSG_DONTWAIT : MSG_DONTWAIT | MSG_NOSIGNAL;
		e->user_data = i;
		q->sq_array[idx] = idx;
	}
	__atomic_store_n(q->sq_tail, tail + n, __ATOMIC_RELEASE);
	do {
		r = ring_enter(q->ring_fd, n, n, IORING_ENTER_GETEVENTS);
	} while (r < 0 && errno == EINTR);
	if (r < 0) {
		/* Nothing was submitted (io_uring_enter reports an error only
		 * then): take the SQEs back and send them one by one, and do so
		 * from now on. */
		__atomic_store_n(q->sq_tail, tail, __ATOMIC_RELEASE);
		unmap_all(q);
		close(q->ring_fd);
		q->ring_fd = -1;
		return flush_plain(q, done, arg);
	}
	/* All n completions are posted: every send was no-wait (see top). Wait
	 * for any stragglers anyway, so a buffer is never handed back early. */
	while (got < n) {
		head = *q->cq_head;
		tail = __atomic_load_n(q->cq_tail, __ATOMIC_ACQUIRE);
		if (head == tail) {
			if (ring_enter(q->ring_fd, 0, 1, IORING_ENTER_GETEVENTS) < 0 &&
			    errno != EINTR)
				break;
			continue;
		}
		for (; head != tail; head++, got++) {
			struct io_uring_cqe *c = &cqes[head & *q->cq_mask];
			unsigned k = (unsigned)c->user_data;

			if (k < n)
				done(q->ent[k].tag, c->res, arg);
		}
		__atomic_store_n(q->cq_head, head, __ATOMIC_RELEASE);
	}
	q->n = 0;
	return got;
}
