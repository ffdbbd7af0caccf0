/* jsonv.h — JSON input (prefix jv_): a strict RFC 8259 reader into a small
 * tree, for the CNI plugin's stdin configuration, `ip -j` output and the
 * etcd v3 JSON gateway's responses (src/state/ss_etcd.c); and the lexing
 * of strings and numbers it is built on, shared with the reader that
 * builds the model's YAML tree directly (src/model/json_tree.c). The
 * writer side is json.h.
 *
 * Contract:
 * - jv_parse() accepts exactly one JSON value, surrounded by whitespace
 *   only; anything else (trailing text, a comma too many, single quotes,
 *   a lone surrogate, nesting deeper than JV_MAX_DEPTH) is an error. On
 *   error it returns NULL and err names the byte offset and what was
 *   expected. A NUL inside a string (\u0000) is refused: every string is
 *   a C string.
 * - The tree is owned by the caller and freed with jv_free() (NULL is fine).
 *   Objects keep member order; a duplicate key is kept (jv_get returns the
 *   first), as most JSON readers do not refuse them either.
 * - Accessors take NULL and a value of another type and return NULL/the
 *   fallback, so `jv_str(jv_get(jv_get(root, "ipam"), "subnet"))` is safe.
 */
#ifndef ZH_JSONV_H
#define ZH_JSONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JV_MAX_DEPTH 64

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

struct jv {
	enum jv_type type;
	bool b;			/* JV_BOOL */
	double num;		/* JV_NUM */
	char *str;		/* JV_STR: the decoded string (UTF-8);
				 * JV_NUM: the number's text as written (exact
				 * integers beyond 2^53: jv_u64) */
	size_t len;		/* JV_STR, JV_NUM: strlen(str) */
	int n;			/* JV_ARR, JV_OBJ: number of items */
	struct jv **items;	/* JV_ARR, JV_OBJ: the values */
	char **keys;		/* JV_OBJ: the keys, parallel to items */
};

struct jv *jv_parse(const char *s, size_t len, char *err, size_t errlen);
void jv_free(struct jv *v);

const struct jv *jv_get(const struct jv *obj, const char *key);	/* NULL: absent / not an object */
const struct jv *jv_at(const struct jv *arr, int i);		/* NULL: out of range / not an array */
const char *jv_str(const struct jv *v);				/* NULL unless a string */
bool jv_is(const struct jv *v, enum jv_type t);
/* A non-negative integer, exact to 2^64-1: a JSON number or a string of
 * decimal digits (etcd's int64 fields come as either); def when absent,
 * negative, fractional or not a number. */
uint64_t jv_u64(const struct jv *v, uint64_t def);
bool jv_bool(const struct jv *v);				/* true only for JSON true */
/* v as compact JSON to f (strings through json.h's escaper; numbers as
 * written). */
void jv_print(FILE *f, const struct jv *v);

/* Framing a stream of concatenated objects or arrays (a watch response):
 * the length of the first complete one at buf (leading white space
 * included), 0 when it is not complete yet, -EINVAL when buf does not start
 * with '{' or '['. Only brackets and strings are looked at: parse the
 * frame with jv_parse. */
long jv_next(const char *buf, size_t len);

/* ---- lexing ------------------------------------------------------------
 * The string and number grammar of RFC 8259 for readers that build their
 * own structures (one lexer, so every JSON reader accepts the same
 * strings and numbers). */

/* The length of the number at p (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?),
 * 0 when p does not start one. Inline: json_tree.c asks it of every
 * scalar it writes or reads. */
static inline bool jv_lex_digit_(const char *p, const char *end)
{
	return p < end && *p >= '0' && *p <= '9';
}

static inline size_t jv_lex_number(const char *p, const char *end)
{
	const char *s = p;

	if (p < end && *p == '-')
		p++;
	if (!jv_lex_digit_(p, end))
		return 0;
	if (*p == '0')
		p++;
	else
		while (jv_lex_digit_(p, end))
			p++;
	if (p < end && *p == '.') {
		if (!jv_lex_digit_(++p, end))
			return 0;
		while (jv_lex_digit_(p, end))
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (!jv_lex_digit_(p, end))
			return 0;
		while (jv_lex_digit_(p, end))
			p++;
	}
	return (size_t)(p - s);
}

/* The closing quote of the string whose opening quote is at p; NULL when
 * unterminated. Decoding never lengthens: its body fits in q - p bytes,
 * the terminating NUL included. */
const char *jv_lex_string_end(const char *p, const char *end);

enum {
	JV_LEX_ASCII = 1,		/* refuse bytes >= 0x80 */
	JV_LEX_NO_SURROGATES = 2,	/* refuse \uD800-\uDFFF, pairs too */
};
/* Decode the string between its quotes p and q (from jv_lex_string_end)
 * into out (room for q - p bytes), NUL-terminated, *n its length. NULL on
 * success, else what is wrong, with *bad at the offending byte. Control
 * characters, bad escapes, lone surrogates and \u0000 are refused. */
const char *jv_lex_string(const char *p, const char *q, char *out, size_t *n, unsigned flags,
			  const char **bad);

#endif
