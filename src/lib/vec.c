/* vec.c — the growable array (see vec.h). */
#include <string.h>

#include "zerohop/log.h"
#include "zerohop/vec.h"

void zh_reserve(void **arr, int *cap, int need, size_t elem)
{
	int c;

	if (need <= *cap)
		return;
	c = *cap ? *cap * 2 : 8;
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
