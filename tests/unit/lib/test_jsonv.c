/* test_jsonv.c — the strict JSON reader (jsonv.h): what it accepts, what it
 * refuses (with a byte offset), and the accessors on a CNI-like config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/jsonv.h"

static struct jv *P(const char *s, char *err)
{
	return jv_parse(s, strlen(s), err, 128);
}

int main(void)
{
	char err[128];
	struct jv *v;
	static const char *bad[] = {
		"", "{", "{\"a\":1,}", "[1,]", "{'a':1}", "{\"a\" 1}", "tru", "01", "1.", "-",
		"\"abc", "\"\\x\"", "\"\\ud800\"", "\"\\u0000\"", "{} {}", "[1] x", "\"a\tb\"",
		"{\"a\":1 \"b\":2}", "nul",
	};

	v = P(" {\"cniVersion\": \"1.0.0\", \"name\": \"zh\", \"ipam\": {\"subnet\": \"10.0.0.0/24\"},"
	      " \"n\": -12.5e1, \"t\": true, \"f\": false, \"z\": null, \"a\": [1, \"x\", {}],"
	      " \"u\": \"\\u00e9\\ud83d\\ude00\\n\\/\"} \n", err);
	ok(v != NULL, "a CNI-like config parses (%s)", err);
	is_str(jv_str(jv_get(v, "cniVersion")), "1.0.0", "string member");
	is_str(jv_str(jv_get(jv_get(v, "ipam"), "subnet")), "10.0.0.0/24", "nested member");
	ok(jv_get(v, "n") && jv_get(v, "n")->num == -125.0, "number with exponent");
	ok(jv_get(v, "t")->b && !jv_get(v, "f")->b, "true and false");
	ok(jv_is(jv_get(v, "z"), JV_NULL), "null");
	ok(jv_get(v, "a")->n == 3 && jv_is(jv_at(jv_get(v, "a"), 2), JV_OBJ), "array of 3");
	ok(jv_at(jv_get(v, "a"), 3) == NULL, "past the end is NULL");
	is_str(jv_str(jv_get(v, "u")), "\xc3\xa9\xf0\x9f\x98\x80\n/", "\\u escapes and a surrogate pair to UTF-8");
	ok(jv_get(v, "missing") == NULL && jv_str(jv_get(v, "n")) == NULL, "absent and mistyped give NULL");
	ok(jv_get(NULL, "x") == NULL && jv_str(NULL) == NULL, "NULL is accepted");
	jv_free(v);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = P(bad[i], err);
		ok(v == NULL && strstr(err, "at byte "), "refused: '%s' (%s)", bad[i], err);
		jv_free(v);
	}
	{
		char deep[2 * JV_MAX_DEPTH + 8];
		int n = JV_MAX_DEPTH + 1;

		memset(deep, '[', n);
		memset(deep + n, ']', n);
		deep[2 * n] = 0;
		v = P(deep, err);
		ok(v == NULL && strstr(err, "deep"), "nesting past JV_MAX_DEPTH refused (%s)", err);
		n = JV_MAX_DEPTH;
		memset(deep, '[', n);
		memset(deep + n, ']', n);
		deep[2 * n] = 0;
		v = P(deep, err);
		ok(v != NULL, "nesting of JV_MAX_DEPTH accepted");
		jv_free(v);
	}
	{	/* jv_print: a compact round trip */
		const char *in = "{\"a\":[1,2.5,-3e+20,true,false,null],\"s\":\"x\\\"y\\n\",\"o\":{}}";
		char *out = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&out, &len);

		v = P(in, err);
		jv_print(f, v);
		fclose(f);
		is_str(out, in, "jv_print writes back what was read");
		free(out);
		jv_free(v);
	}
	v = P("[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]", err);
	ok(v && v->n == 17 && jv_at(v, 16)->num == 17, "arrays grow");
	jv_free(v);
	return done_testing();
}
