/* buf.c — growable linear byte buffer (contract in buf.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zerohop/buf.h"
#include "zerohop/log.h"

void buf_init(struct buf *b, size_t size)
{
	b->area = size ? zh_malloc(size) : NULL;
	b->size = size;
	b->head = 0;
	b->data = 0;
}

void buf_free(struct buf *b)
{
	free(b->area);
	b->area = NULL;
	b->size = b->head = b->data = 0;
}

void buf_compact(struct buf *b)
{
	if (!b->head)
		return;
	if (b->data)
		memmove(b->area, b->area + b->head, b->data);
	b->head = 0;
}

void buf_reserve(struct buf *b, size_t n)
{
	size_t want;

	if (buf_room(b) >= n)
		return;
	buf_compact(b);
	if (buf_room(b) >= n)
		return;
	want = b->size ? b->size : 4096;
	while (want - b->data < n)
		want *= 2;
	b->area = zh_realloc(b->area, want);
	b->size = want;
}

size_t buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	buf_reserve(b, 128);
	va_start(ap, fmt);
	n = vsnprintf(buf_tail(b), buf_room(b), fmt, ap);
	va_end(ap);
	if (n < 0)
		return 0;
	if ((size_t)n >= buf_room(b)) {
		buf_reserve(b, (size_t)n + 1);
		va_start(ap, fmt);
		n = vsnprintf(buf_tail(b), buf_room(b), fmt, ap);
		va_end(ap);
	}
	b->data += (size_t)n;
	return (size_t)n;
}

size_t buf_read_room(struct buf *b)
{
	if (buf_room(b) < 4096)
		buf_reserve(b, 4096);
	return buf_room(b);
}

ssize_t buf_read_fd(struct buf *b, int fd, size_t max)
{
	ssize_t n;

	if (!max)
		max = buf_read_room(b);
	else
		buf_reserve(b, max);
	n = recv(fd, buf_tail(b), max, 0);
	if (n < 0)
		return -errno;
	b->data += (size_t)n;
	return n;
}

ssize_t buf_write_fd(struct buf *b, int fd)
{
	ssize_t n;

	if (!b->data)
		return 0;
	n = send(fd, buf_head(b), b->data, MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	buf_consume(b, (size_t)n);
	return n;
}
