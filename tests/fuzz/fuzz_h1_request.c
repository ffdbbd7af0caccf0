/* fuzz_h1_request.c — libFuzzer target: request heads, framing, and the
 * chunked decoder on whatever follows the head. Besides "no crash, no
 * sanitizer report" it checks the parser's own promises (h1.c invariants):
 * feeding the bytes in pieces never gives a different decided result than
 * feeding them whole, and a success is a success both ways; the chunked
 * decoder gives the same payload however its input is split.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude \
 *     tests/fuzz/fuzz_h1_request.c src/lib/h1.c src/lib/log.c -o fuzz_h1_request
 *   ./fuzz_h1_request -max_total_time=20 tests/fuzz/corpus/h1_request
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/h1.h"

static int parse(const char *buf, size_t len, size_t last, const struct h1_limits *lim,
		 struct h1_header *h, size_t *nh, struct h1_request *req)
{
	*nh = 100;
	return h1_parse_request(buf, len, last, lim, req, h, nh);
}

/* Exact-size copies so ASan sees any read past len. */
static int fed_in_pieces(const uint8_t *data, size_t size, size_t step,
			 const struct h1_limits *lim)
{
	struct h1_header h[100];
	struct h1_request req;
	size_t k, last = 0, nh;
	int r = -EAGAIN;

	for (k = step < size ? step : size; ; k = k + step < size ? k + step : size) {
		char *b = malloc(k ? k : 1);

		memcpy(b, data, k);
		r = parse(b, k, last, lim, h, &nh, &req);
		free(b);
		last = k;
		if (r != -EAGAIN || k == size)
			break;
	}
	return r;
}

static void check_chunked(const uint8_t *data, size_t size)
{
	struct h1_chunked a, b;
	char *x = malloc(size ? size : 1), *y = malloc(size ? size : 1);
	size_t na = size, half = size / 2, nb1 = half, nb2 = size - half;
	ssize_t ra, rb;

	memcpy(x, data, size);
	memcpy(y, data, size);
	h1_chunked_init(&a);
	h1_chunked_init(&b);
	ra = h1_decode_chunked(&a, x, &na);
	rb = h1_decode_chunked(&b, y, &nb1);
	if (rb >= 0 && !h1_chunked_done(&b)) {
		/* Second piece decoded in place right after the first's payload. */
		memmove(y + nb1, data + half, nb2);
		rb = h1_decode_chunked(&b, y + nb1, &nb2);
		nb1 += nb2;
	} else if (rb >= 0) {
		rb += (ssize_t)nb2;	/* done in the first piece: rest is leftover */
	}
	if ((ra < 0) != (rb < 0))
		abort();
	if (ra >= 0 && (h1_chunked_done(&a) != h1_chunked_done(&b) || na != nb1 ||
			memcmp(x, y, na) || (h1_chunked_done(&a) && ra != rb)))
		abort();
	free(x);
	free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct h1_limits def, small = { 64, 256, 8 };
	struct h1_header h[100];
	struct h1_request req;
	size_t nh;
	uint64_t cl;
	int whole, pieces, i;
	char *b = malloc(size ? size : 1);

	h1_limits_default(&def);
	memcpy(b, data, size);
	for (i = 0; i < 2; i++) {
		const struct h1_limits *lim = i ? &small : &def;

		whole = parse(b, size, 0, lim, h, &nh, &req);
		pieces = fed_in_pieces(data, size, size < 600 ? 1 : 7, lim);
		if (pieces != -EAGAIN && pieces != whole)
			abort();	/* decided differently */
		if (whole > 0 && pieces != whole)
			abort();	/* success must be seen in pieces too */
		if (whole > 0) {
			if ((size_t)whole > size || nh > 100)
				abort();
			h1_body_framing(h, nh, 1, 0, 0, &cl);
			h1_body_framing(h, nh, 0, 200, 0, &cl);
			h1_check_host(&req, h, nh);
			h1_find_header(h, nh, "content-length");
			h1_header_has_token(h, nh, "connection", "close");
			if (!i)
				check_chunked(data + whole, size - (size_t)whole);
		} else if (whole != -EAGAIN) {
			if (h1_err_status(whole) < 400 || !h1_err_str(whole))
				abort();
		}
	}
	free(b);
	return 0;
}
