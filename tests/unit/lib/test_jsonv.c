/* test_jsonv.c — the strict JSON reader (jsonv.h): what it accepts, what it
 * refuses (with a byte offset), and the accessors on a CNI-like config. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
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
	{	/* numbers keep their text: exact int64s (etcd's revisions) */
		v = P("{\"big\": 18446744073709551615, \"s\": \"9007199254740993\", \"neg\": -1,"
		      " \"frac\": 1.5, \"e\": 1e3, \"str\": \"12x\", \"t\": true}", err);
		ok(v && jv_u64(jv_get(v, "big"), 0) == UINT64_MAX, "u64: 2^64-1 exact");
		ok(jv_u64(jv_get(v, "s"), 0) == 9007199254740993ULL, "u64: 2^53+1 in a string, exact");
		ok(jv_u64(jv_get(v, "neg"), 7) == 7 && jv_u64(jv_get(v, "frac"), 7) == 7 &&
		   jv_u64(jv_get(v, "e"), 7) == 7 && jv_u64(jv_get(v, "str"), 7) == 7 &&
		   jv_u64(jv_get(v, "t"), 7) == 7 && jv_u64(NULL, 7) == 7,
		   "u64: negative, fraction, exponent, non-digits, bool, absent give the default");
		ok(jv_bool(jv_get(v, "t")) && !jv_bool(jv_get(v, "big")) && !jv_bool(NULL), "jv_bool");
		is_str(jv_get(v, "frac")->str, "1.5", "a number's text as written");
		jv_free(v);
	}
	{	/* the lexer on its own */
		static const struct { const char *in; int end; } ends[] = {
			{ "\"abc\"", 4 }, { "\"a\\\"b\"", 5 }, { "\"a\\\\\"x", 4 }, { "\"a\\\\\\\"b\"", 7 },
			{ "\"\"", 1 }, { "\"abc", -1 }, { "\"a\\\"", -1 },
		};
		char out[64];
		const char *at, *q;
		size_t n;

		for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
			const char *in = ends[i].in;

			q = jv_lex_string_end(in, in + strlen(in));
			is_int(q ? (int)(q - in) : -1, ends[i].end, "string end of %s", in);
		}
		q = "\"plain \\u00e9 \\ud83d\\ude00\"";
		ok(!jv_lex_string(q, q + strlen(q) - 1, out, &n, 0, &at) && n == 13 &&
		   !strcmp(out, "plain \xc3\xa9 \xf0\x9f\x98\x80"), "decode: escapes to UTF-8");
		ok(jv_lex_string(q, q + strlen(q) - 1, out, &n, JV_LEX_NO_SURROGATES, &at) &&
		   at == q + 14, "NO_SURROGATES refuses a pair, at its backslash");
		q = "\"caf\xc3\xa9\"";
		ok(!jv_lex_string(q, q + strlen(q) - 1, out, &n, 0, &at) && n == 5, "UTF-8 bytes pass");
		ok(jv_lex_string(q, q + strlen(q) - 1, out, &n, JV_LEX_ASCII, &at) && at == q + 4,
		   "ASCII refuses them, at the first");
		is_int((int)jv_lex_number("-0.5e+3,", "-0.5e+3," + 8), 7, "number length");
		is_int((int)jv_lex_number("01", "01" + 2), 1, "a leading zero ends the number");
		ok(!jv_lex_number("-", "-" + 1) && !jv_lex_number("1.", "1." + 2) &&
		   !jv_lex_number(".5", ".5" + 2), "not numbers: -, 1., .5");
	}
	return done_testing();
}
