/* json.c — JSON string output (see json.h). */
#include <stdio.h>
#include <string.h>

#include "zerohop/buf.h"
#include "zerohop/json.h"

size_t json_esc_char(unsigned char ch, char out[7])
{
	switch (ch) {
	case '"': return (size_t)snprintf(out, 7, "\\\"");
	case '\\': return (size_t)snprintf(out, 7, "\\\\");
	case '\n': return (size_t)snprintf(out, 7, "\\n");
	case '\r': return (size_t)snprintf(out, 7, "\\r");
	case '\t': return (size_t)snprintf(out, 7, "\\t");
	}
	if (ch < 0x20 || ch == 0x7f)
		return (size_t)snprintf(out, 7, "\\u%04x", ch);
	return 0;
}

void json_put_str(FILE *f, const char *s)
{
	char e[7];

	fputc('"', f);
	for (; s && *s; s++) {
		if (json_esc_char((unsigned char)*s, e))
			fputs(e, f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

void json_buf_str(struct buf *b, const char *s, size_t n)
{
	size_t i, run = 0, el;
	char e[7];

	buf_reserve(b, n + 2);
	buf_append(b, "\"", 1);
	for (i = 0; i < n; i++) {
		el = json_esc_char((unsigned char)s[i], e);
		if (!el)
			continue;
		buf_append(b, s + run, i - run);	/* the literal run before i */
		buf_append(b, e, el);
		run = i + 1;
	}
	buf_append(b, s + run, n - run);
	buf_append(b, "\"", 1);
}
