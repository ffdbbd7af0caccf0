/* test_vec.c — the growable array (vec.h). */
#include <stdlib.h>

#include "tap.h"
#include "zerohop/vec.h"

struct item {
	int a;
	long b;
};

int main(void)
{
	struct item *v = NULL, *it;
	int n = 0, cap = 0, *w = NULL, wcap = 0;
	int bad = 0;

	for (int i = 0; i < 1000; i++) {
		it = zh_grow((void **)&v, &n, &cap, sizeof(*v));
		if (it != &v[i] || it->a || it->b)
			bad++;
		it->a = i;
	}
	is_int(n, 1000, "1000 appends counted");
	is_int(bad, 0, "each new element is the next one, zeroed");
	ok(cap >= 1000 && cap <= 2048, "capacity doubles (%d for 1000)", cap);
	bad = 0;
	for (int i = 0; i < n; i++)
		bad += v[i].a != i;
	is_int(bad, 0, "growing kept every element");
	free(v);

	zh_reserve((void **)&w, &wcap, 3, sizeof(*w));
	is_int(wcap, 64, "first reserve: 256 bytes of ints");
	zh_reserve((void **)&w, &wcap, 64, sizeof(*w));
	is_int(wcap, 64, "reserve within capacity: unchanged");
	zh_reserve((void **)&w, &wcap, 65, sizeof(*w));
	is_int(wcap, 128, "one past: doubled");
	zh_reserve((void **)&w, &wcap, 1000, sizeof(*w));
	is_int(wcap, 1000, "more than double: exactly what is needed");
	w[999] = 7;
	ok(w[999] == 7, "the room is usable");
	free(w);
	{	/* a big element: one, not 8 (the etcd source's one-object models) */
		char (*big)[200] = NULL;
		int bcap = 0;

		zh_reserve((void **)&big, &bcap, 1, sizeof(*big));
		is_int(bcap, 1, "first reserve of a 200-byte element: one");
		zh_reserve((void **)&big, &bcap, 2, sizeof(*big));
		is_int(bcap, 2, "then doubled");
		free(big);
	}
	return done_testing();
}
