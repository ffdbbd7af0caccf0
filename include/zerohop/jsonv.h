/* jsonv.h — JSON input (prefix jv_): a strict RFC 8259 reader into a small
 * tree, for the CNI plugin's stdin configuration and `ip -j` output. The
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
#include <stdio.h>

#define JV_MAX_DEPTH 64

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

struct jv {
	enum jv_type type;
	bool b;			/* JV_BOOL */
	double num;		/* JV_NUM */
	char *str;		/* JV_STR: the decoded string (UTF-8) */
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
/* v as compact JSON to f (strings through json.h's escaper). */
void jv_print(FILE *f, const struct jv *v);

#endif
