/* vec.c — the growable array (see vec.h). */
#include <string.h>

#include "zerohop/log.h"
#include "zerohop/vec.h"

void zh_reserve(void **arr, int *cap, int need, size_t elem)
{
	int c;

	if (need <= *cap)
		return;
	/* the first room is about 256 bytes, not 8 elements: a model holding
	 * one object (the etcd source keeps one per key, 100,000s of them)
	 * then pays 152 bytes for its one pod, not 1,216 */
	c = *cap ? *cap * 2 : (int)(elem < 256 ? 256 / elem : 1);
	if (c < need)
		c = need;
	*arr = zh_realloc(*arr, (size_t)c * elem);
	*cap = c;
}

void *zh_grow(void **arr, int *n, int *cap, size_t elem)
{
	char *p;

	zh_reserve(arr, cap, *n + 1, elem);
	p = (char *)*arr + (size_t)*n * elem;
	memset(p, 0, elem);
	(*n)++;
	return p;
}
