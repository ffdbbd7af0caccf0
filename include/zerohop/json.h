/* json.h — JSON string output (prefix json_): the one escaper for every
 * `-o json`, the load generator's report and the echo server's bodies.
 *
 * Escaping (RFC 8259): '"' and '\\' get a backslash; \n, \r and \t their
 * short forms; every other byte below 0x20 and DEL (0x7f) becomes \u00XX.
 * Bytes from 0x80 up pass through unchanged (UTF-8 stays UTF-8; invalid
 * UTF-8 is not repaired). The output is always one quoted JSON string.
 */
#ifndef ZH_JSON_H
#define ZH_JSON_H

#include <stddef.h>
#include <stdio.h>

struct buf;

/* The escape of byte ch into out (NUL-terminated, at most 6 characters);
 * returns its length, or 0 when ch stands for itself. */
size_t json_esc_char(unsigned char ch, char out[7]);

/* "s" escaped to f; NULL is written as "". */
void json_put_str(FILE *f, const char *s);

/* The n bytes at s (NUL bytes included, as \u0000), quoted and escaped, at
 * the tail of b (growing it; buf.h). */
void json_buf_str(struct buf *b, const char *s, size_t n);

#endif
