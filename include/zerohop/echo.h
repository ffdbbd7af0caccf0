/* echo.h — the echo server's request parameters (prefix echo_), fortio's
 * query arguments (docs/echo.md lists them), parsed apart from the server
 * so they can be tested alone. The server itself is cli_echo() (cli.h).
 *
 *   size=N | size=N:PCT,M:PCT...     response body bytes (else: echo / JSON)
 *   status=CODE | status=C:PCT,...   response status (else 200)
 *   delay=DUR | delay=DUR:PCT,...    delay before the response (else none);
 *                                    DUR is Go-style: 150us, 2ms, 0.5s, 1m30s
 *   close=true|false|PCT             Connection: close always, never, or with PCT %
 *   header=NAME:VALUE                extra response header, repeatable
 * An entry without :PCT means 100 %. Percentages of one list sum to <= 100;
 * the remainder picks the default. Bad values are errors (the server answers
 * 400 naming the parameter); unknown keys are ignored.
 */
#ifndef ZH_ECHO_H
#define ZH_ECHO_H

#include <stddef.h>
#include <stdint.h>

#define ECHO_MAX_CHOICES 16
#define ECHO_MAX_HEADERS 16

struct echo_dist {
	int n;				/* 0 = parameter absent */
	uint64_t value[ECHO_MAX_CHOICES];	/* bytes, status, or ns */
	double pct[ECHO_MAX_CHOICES];	/* each in (0, 100], sum <= 100 */
};

struct echo_params {
	struct echo_dist size, status, delay;
	double close_pct;		/* 0..100 */
	int nheaders;
	const char *hname[ECHO_MAX_HEADERS];	/* into the caller's scratch */
	const char *hvalue[ECHO_MAX_HEADERS];
};

/* Parses the raw (percent-encoded) query string q[0..len). scratch holds the
 * decoded header names/values (scratch_len >= len + ECHO_MAX_HEADERS * 2 is
 * always enough). Returns 0 or -EINVAL with a message in err naming the
 * parameter and value. max_delay_ns and max_size clamp (as fortio does). */
int echo_parse_params(const char *q, size_t len, uint64_t max_size, uint64_t max_delay_ns,
		      struct echo_params *p, char *scratch, size_t scratch_len, char *err,
		      size_t errlen);

/* Picks from d with r uniform in [0, 100): 1 and *value when an entry is
 * chosen, 0 when the default applies. */
int echo_pick(const struct echo_dist *d, double r, uint64_t *value);

/* Go-style duration ("0", "150us", "1.5s", "1m30s") to ns; 0 or -EINVAL. */
int echo_parse_duration(const char *s, size_t len, uint64_t *ns);

/* Percent-decodes src[0..len) into dst ('+' becomes a space when plus is
 * set); returns the decoded length, or -EINVAL on a bad %XX escape. dst must
 * hold len bytes. */
int echo_url_decode(const char *src, size_t len, char *dst, int plus);

#endif
