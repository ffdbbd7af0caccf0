/* fuzz_h1_response.c — libFuzzer target: response heads and their framing,
 * whole and in pieces (same promises as fuzz_h1_request.c).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude \
 *     tests/fuzz/fuzz_h1_response.c src/lib/h1.c src/lib/log.c -o fuzz_h1_response
 *   ./fuzz_h1_response -max_total_time=20 tests/fuzz/corpus/h1_response
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/h1.h"

static int parse(const char *buf, size_t len, size_t last, const struct h1_limits *lim,
		 struct h1_header *h, size_t *nh, struct h1_response *resp)
{
	*nh = 100;
	return h1_parse_response(buf, len, last, lim, resp, h, nh);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct h1_limits def, small = { 64, 256, 8 };
	struct h1_header h[100], hp[100];	/* hp: pieces (point into freed copies) */
	struct h1_response resp, rp;
	size_t nh, np, k, last, step = size < 600 ? 1 : 7;
	uint64_t cl;
	int whole, pieces, i;
	char *b = malloc(size ? size : 1);

	h1_limits_default(&def);
	memcpy(b, data, size);
	for (i = 0; i < 2; i++) {
		const struct h1_limits *lim = i ? &small : &def;

		whole = parse(b, size, 0, lim, h, &nh, &resp);
		pieces = -EAGAIN;
		last = 0;
		for (k = step < size ? step : size; size; k = k + step < size ? k + step : size) {
			char *p = malloc(k);

			memcpy(p, data, k);
			pieces = parse(p, k, last, lim, hp, &np, &rp);
			free(p);
			last = k;
			if (pieces != -EAGAIN || k == size)
				break;
		}
		if (pieces != -EAGAIN && pieces != whole)
			abort();
		if (whole > 0 && pieces != whole)
			abort();
		if (whole > 0) {
			if (resp.status < 100 || resp.status > 599 || (size_t)whole > size)
				abort();
			h1_body_framing(h, nh, 0, resp.status, 0, &cl);
			h1_body_framing(h, nh, 0, resp.status, 1, &cl);
		}
	}
	free(b);
	return 0;
}
