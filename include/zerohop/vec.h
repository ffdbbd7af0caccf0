/* vec.h — the one growable-array idiom (prefix zh_): a plain C array
 * `T *v` with an element count and a capacity, both int, grown by doubling
 * through zh_realloc (log.h: aborts on out-of-memory, so callers never
 * check). The array stays the caller's: free(v) releases it.
 *
 *	struct item *v = NULL; int n = 0, cap = 0;
 *	struct item *it = zh_grow((void **)&v, &n, &cap, sizeof(*v));
 *	zh_reserve((void **)&v, &cap, n + m, sizeof(*v));	then fill v[n..n+m)
 */
#ifndef ZH_VEC_H
#define ZH_VEC_H

#include <stddef.h>

/* Make *cap >= need (elements of elem bytes): the capacity doubles from
 * about 256 bytes' worth (at least one element), or jumps to need when
 * doubling is not enough. The new room is not zeroed;
 * pointers into the array are invalid after a call that grew it. */
void zh_reserve(void **arr, int *cap, int need, size_t elem);

/* Append one zeroed element at index *n (growing as zh_reserve does) and
 * return it; *n is incremented. */
void *zh_grow(void **arr, int *n, int *cap, size_t elem);

#endif
