/* test_json.c — the JSON string escaper (json.h), both outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/buf.h"
#include "zerohop/json.h"

/* json_put_str into a memory stream; returns a malloc'd string. */
static char *put(const char *s)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	json_put_str(f, s);
	fclose(f);
	return out;
}

static void both(const char *in, size_t n, const char *want, const char *name)
{
	struct buf b;
	char *p;

	buf_init(&b, 0);
	json_buf_str(&b, in, n);
	ok(b.data == strlen(want) && !memcmp(buf_head(&b), want, b.data), "buf: %s", name);
	buf_free(&b);
	if (strlen(in) == n) {
		p = put(in);
		is_str(p, want, "FILE: %s", name);
		free(p);
	}
}

int main(void)
{
	char e[7];

	both("", 0, "\"\"", "empty string");
	both("plain text", 10, "\"plain text\"", "nothing to escape");
	both("a\"b\\c", 5, "\"a\\\"b\\\\c\"", "quote and backslash");
	both("l1\nl2\r\t", 7, "\"l1\\nl2\\r\\t\"", "short forms for \\n \\r \\t");
	both("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"", "other controls and DEL as \\u00XX");
	both("caf\xc3\xa9", 5, "\"caf\xc3\xa9\"", "UTF-8 passes through");
	both("a\0b", 3, "\"a\\u0000b\"", "buf: NUL inside the n bytes");

	{
		char *p = put(NULL);

		is_str(p, "\"\"", "FILE: NULL is the empty string");
		free(p);
	}
	is_int(json_esc_char('x', e), 0, "a plain byte stands for itself");
	is_int(json_esc_char('\b', e), 6, "backspace: \\u0008");
	is_str(e, "\\u0008", "backspace escape text");
	return done_testing();
}
