/* test_echo_params.c — fortio-style echo parameters: values, probability
 * lists, durations, clamping, and every rejected form. */
#include <errno.h>
#include <string.h>

#include "tap.h"
#include "zerohop/echo.h"

#define MS 1000000ull

static int parse(const char *q, struct echo_params *p, char *err)
{
	static char scratch[4096];

	return echo_parse_params(q, strlen(q), 262144, 1500 * MS, p, scratch, sizeof(scratch), err,
				 256);
}

static void test_values(void)
{
	struct echo_params p;
	char err[256];
	uint64_t v;

	is_int(parse("size=1024", &p, err), 0, "size=1024");
	ok(p.size.n == 1 && p.size.value[0] == 1024 && p.size.pct[0] == 100, "one 100%% entry");
	ok(echo_pick(&p.size, 99.99, &v) && v == 1024, "always picked");

	is_int(parse("size=1024:10,512:5", &p, err), 0, "size list");
	ok(p.size.n == 2 && p.size.pct[0] == 10 && p.size.pct[1] == 5, "two entries");
	ok(echo_pick(&p.size, 9.9, &v) && v == 1024, "r < 10 picks 1024");
	ok(echo_pick(&p.size, 12, &v) && v == 512, "10 <= r < 15 picks 512");
	ok(!echo_pick(&p.size, 15, &v), "r >= 15: default (echo)");

	is_int(parse("status=503:30,429:10", &p, err), 0, "status list");
	ok(p.status.n == 2 && p.status.value[0] == 503 && p.status.value[1] == 429, "statuses");
	is_int(parse("status=418", &p, err), 0, "status=418");

	is_int(parse("delay=50ms:10", &p, err), 0, "delay with probability");
	ok(p.delay.value[0] == 50 * MS && p.delay.pct[0] == 10, "50 ms at 10%%");
	is_int(parse("delay=10s", &p, err), 0, "long delay accepted");
	is_int(p.delay.value[0], 1500 * MS, "and clamped to max-delay");
	is_int(parse("size=10000000", &p, err), 0, "big size accepted");
	is_int(p.size.value[0], 262144, "and clamped to max-size");

	is_int(parse("close=true", &p, err), 0, "close=true");
	ok(p.close_pct == 100, "100%%");
	is_int(parse("close=5.3", &p, err), 0, "close=5.3");
	ok(p.close_pct > 5.29 && p.close_pct < 5.31, "5.3%%");
	is_int(parse("close=false", &p, err), 0, "close=false");
	ok(parse("close=0", &p, err) == 0 && p.close_pct == 0, "close=0 is never");

	is_int(parse("header=X-A:b&header=X-Other:%20v%3Aw", &p, err), 0, "two headers");
	ok(p.nheaders == 2 && !strcmp(p.hname[0], "X-A") && !strcmp(p.hvalue[0], "b"), "first");
	ok(!strcmp(p.hname[1], "X-Other") && !strcmp(p.hvalue[1], "v:w"),
	   "second, decoded, OWS dropped, colon kept in value");
	is_int(parse("foo=bar&x&size=1", &p, err), 0, "unknown keys ignored");
	is_int(parse("", &p, err), 0, "empty query");
}

static void test_errors(void)
{
	static const char *bad[] = {
		"size=", "size=abc", "size=-1", "size=10:", "size=10:0", "size=10:101",
		"size=10:60,20:50", "size=10,", "status=99", "status=600", "status=20x",
		"delay=5", "delay=5parsecs", "delay=ms", "close=maybe", "close=-1",
		"header=novalue", "header=:v", "header=X%0D%0AInjected:1", "header=X:a%0Db",
		"header=X Y:z", "size=%zz", "header=X:a%00b",
	};
	struct echo_params p;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		is_int(parse(bad[i], &p, err), -EINVAL, "rejected: %s", bad[i]);
		ok(err[0] != 0, "  with a message: %s", err);
	}
}

static void test_durations(void)
{
	static const struct {
		const char *s;
		uint64_t ns;
	} ok_cases[] = {
		{ "0", 0 }, { "150us", 150000 }, { "2ms", 2 * MS }, { "0.5s", 500 * MS },
		{ "1m30s", 90000 * MS }, { "10ns", 10 }, { "1h", 3600000 * MS }, { "1.5ms", 1500000 },
		{ "\xc2\xb5s", 0 },
	};
	uint64_t ns;
	size_t i;

	for (i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]) - 1; i++) {
		int r = echo_parse_duration(ok_cases[i].s, strlen(ok_cases[i].s), &ns);

		ok(r == 0 && ns == ok_cases[i].ns, "duration %s = %llu ns", ok_cases[i].s,
		   (unsigned long long)ok_cases[i].ns);
	}
	ok(echo_parse_duration("3\xc2\xb5s", 4, &ns) == 0 && ns == 3000, "micro sign unit");
	is_int(echo_parse_duration("", 0, &ns), -EINVAL, "empty duration");
	is_int(echo_parse_duration("1", 1, &ns), -EINVAL, "number without unit");
	is_int(echo_parse_duration("1s2", 3, &ns), -EINVAL, "trailing number");
	is_int(echo_parse_duration("s", 1, &ns), -EINVAL, "unit without number");
}

static void test_decode(void)
{
	char out[32];

	is_int(echo_url_decode("a%20b+c", 7, out, 1), 5, "decode length");
	ok(!memcmp(out, "a b c", 5), "%%20 and + decoded");
	is_int(echo_url_decode("a+b", 3, out, 0), 3, "plus kept when not asked");
	is_int(echo_url_decode("%2", 2, out, 1), -EINVAL, "truncated escape");
	is_int(echo_url_decode("%g0", 3, out, 1), -EINVAL, "bad hex");
}

int main(void)
{
	test_values();
	test_errors();
	test_durations();
	test_decode();
	return done_testing();
}
