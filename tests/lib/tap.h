/* tap.h — the Test Anything Protocol for C unit tests (run under prove).
 *
 * Usage:
 *	int main(void) {
 *		ok(1 + 1 == 2, "arithmetic");
 *		is_int(f(), 3, "f returns 3");
 *		is_str(s, "x", "name");
 *		return done_testing();
 *	}
 *
 * Each check prints "ok N - name" or "not ok N - name" plus a diagnostic;
 * done_testing() prints the plan "1..N" and returns the process exit status
 * (non-zero when any check failed), so a test cannot pass by crashing early:
 * prove counts a missing plan as a failure.
 */
#ifndef ZH_TAP_H
#define ZH_TAP_H

#include <stdio.h>
#include <string.h>
#include <stdarg.h>

static int tap_n, tap_failed;

static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...) do {						\
	long long tap_g_ = (long long)(got), tap_w_ = (long long)(want);	\
	if (!tap_ok(tap_g_ == tap_w_, __FILE__, __LINE__, __VA_ARGS__))	\
		printf("#   got %lld, want %lld\n", tap_g_, tap_w_);	\
} while (0)

#define is_str(got, want, ...) do {						\
	const char *tap_g_ = (got), *tap_w_ = (want);			\
	int tap_c_ = tap_g_ && tap_w_ ? strcmp(tap_g_, tap_w_) == 0 : tap_g_ == tap_w_; \
	if (!tap_ok(tap_c_, __FILE__, __LINE__, __VA_ARGS__))		\
		printf("#   got \"%s\", want \"%s\"\n", tap_g_ ? tap_g_ : "(null)", \
		       tap_w_ ? tap_w_ : "(null)");				\
} while (0)

static inline void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
