/* buf.h — a growable linear byte buffer (prefix buf_), HAProxy buf.h in
 * spirit: storage `area` of `size` bytes holding `data` unread bytes from
 * offset `head`. Readers consume from the head, writers produce at the tail;
 * buf_compact() moves unread bytes back to offset 0 so the tail has room.
 *
 * Ownership: the buffer owns area (zh_malloc, aborts on out-of-memory);
 * buf_free() releases it. Pointers from buf_head()/buf_tail() are valid until
 * the next call that may move data (compact, reserve, append, read_fd).
 */
#ifndef ZH_BUF_H
#define ZH_BUF_H

#include <stddef.h>
#include <string.h>
#include <sys/types.h>

struct buf {
	char *area;	/* storage, owned */
	size_t size;	/* bytes of area */
	size_t head;	/* offset of the first unread byte */
	size_t data;	/* unread bytes at area + head */
};

void buf_init(struct buf *b, size_t size);	/* size 0: allocate on first use */
void buf_free(struct buf *b);

static inline char *buf_head(const struct buf *b)
{
	return b->area + b->head;
}

static inline char *buf_tail(const struct buf *b)
{
	return b->area + b->head + b->data;
}

/* Contiguous free bytes after the tail. */
static inline size_t buf_room(const struct buf *b)
{
	return b->size - b->head - b->data;
}

/* Writer has put n bytes at buf_tail() (n <= buf_room()). */
static inline void buf_produce(struct buf *b, size_t n)
{
	b->data += n;
}

/* Reader is done with n bytes at buf_head() (n <= data). An emptied buffer
 * rewinds to offset 0 for free. */
static inline void buf_consume(struct buf *b, size_t n)
{
	b->head += n;
	b->data -= n;
	if (!b->data)
		b->head = 0;
}

void buf_compact(struct buf *b);
/* Make buf_room() >= n: compact first, grow (doubling) only if needed. */
void buf_reserve(struct buf *b, size_t n);

/* Copy n bytes to the tail, growing as needed. Inline: the proxy appends
 * every header it writes piece by piece, and the call was ~7 % of its
 * instructions per HTTP/2 request. */
static inline void buf_append(struct buf *b, const void *p, size_t n)
{
	if (!n)
		return;
	if (buf_room(b) < n)
		buf_reserve(b, n);
	memcpy(buf_tail(b), p, n);
	b->data += n;
}
/* printf at the tail, growing as needed; returns bytes added. */
size_t buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Room for one receive at the tail: the current room, made at least 4 KiB
 * first. What buf_read_fd(b, fd, 0) reads into, for callers that receive
 * another way (a batched receive, ioq.h). */
size_t buf_read_room(struct buf *b);
/* recv() up to max bytes (0 = buf_read_room) from the
 * socket fd into the tail. Returns bytes read, 0 at EOF, or -errno
 * (-EAGAIN when none). A socket only: recv, not read, because read goes
 * through the VFS file-position lock (fdget_pos), ~3 % of the proxy's CPU. */
ssize_t buf_read_fd(struct buf *b, int fd, size_t max);
/* send() unread bytes (MSG_NOSIGNAL) and consume what was written. Returns
 * bytes written (possibly fewer than data) or -errno (-EAGAIN when none). */
ssize_t buf_write_fd(struct buf *b, int fd);

#endif
