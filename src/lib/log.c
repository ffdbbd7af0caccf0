/* log.c — logging and the abort-on-OOM allocators (see log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zerohop/log.h"

static const char *log_prog = "zerohop";
static enum zh_level log_min = ZH_INFO;

void zh_log_init(const char *prog, enum zh_level min)
{
	log_prog = prog;
	log_min = min;
}

void zh_log(enum zh_level lvl, const char *fmt, ...)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	struct timespec ts;
	va_list ap;

	if (lvl < log_min)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "%ld.%03ld %s %s: ", (long)ts.tv_sec, ts.tv_nsec / 1000000, log_prog,
		names[lvl]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void oom(size_t n)
{
	fprintf(stderr, "%s: out of memory allocating %zu bytes\n", log_prog, n);
	abort();
}

void *zh_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(n);
	return p;
}

void *zh_calloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom(n * size);
	return p;
}

void *zh_realloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		oom(n);
	return q;
}

char *zh_strdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom(strlen(s) + 1);
	return p;
}
