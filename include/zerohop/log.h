/* log.h — one logging wrapper and the out-of-memory policy (prefix zh_).
 * Daemons abort on out-of-memory through zh_malloc/zh_calloc/zh_realloc/
 * zh_strdup, so callers never check their result. */
#ifndef ZH_LOG_H
#define ZH_LOG_H

#include <stddef.h>

enum zh_level { ZH_DEBUG, ZH_INFO, ZH_WARN, ZH_ERR };

void zh_log_init(const char *prog, enum zh_level min);
void zh_log(enum zh_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define zh_info(...) zh_log(ZH_INFO, __VA_ARGS__)
#define zh_warn(...) zh_log(ZH_WARN, __VA_ARGS__)
#define zh_err(...)  zh_log(ZH_ERR, __VA_ARGS__)
#define zh_dbg(...)  zh_log(ZH_DEBUG, __VA_ARGS__)

void *zh_malloc(size_t n);
void *zh_calloc(size_t n, size_t size);
void *zh_realloc(void *p, size_t n);
char *zh_strdup(const char *s);

#endif
