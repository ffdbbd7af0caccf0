/* test_drain.c — lab_parse_drain(): the values `lab up --drain-delay` and the
 * zerohop.io/drain-delay annotation accept (docs/lab.md "Pod termination"). */
#include <errno.h>

#include "zerohop/lab.h"
#include "../../lib/tap.h"

int main(void)
{
	static const struct {
		const char *in;
		int ret, ms;
	} cases[] = {
		{ "0", 0, 0 },
		{ "0s", 0, 0 },
		{ "500ms", 0, 500 },
		{ "1s", 0, 1000 },
		{ "2s500ms", 0, 2500 },
		{ "1m", 0, 60000 },		/* LAB_DRAIN_MAX_MS exactly */
		{ "61s", -EINVAL, -1 },		/* above the maximum */
		{ "1h", -EINVAL, -1 },
		{ "", -EINVAL, -1 },
		{ "5", -EINVAL, -1 },		/* a unit is required except for 0 */
		{ "5x", -EINVAL, -1 },
		{ "-1s", -EINVAL, -1 },
		{ "soon", -EINVAL, -1 },
		{ "1.5s", -EINVAL, -1 },
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ms = -1, ret = lab_parse_drain(cases[i].in, &ms);

		is_int(ret, cases[i].ret, "lab_parse_drain(\"%s\") returns %d", cases[i].in,
		       cases[i].ret);
		is_int(ms, cases[i].ms, "lab_parse_drain(\"%s\") -> %d ms", cases[i].in,
		       cases[i].ms);
	}
	is_int(LAB_DRAIN_DEFAULT_MS, 1000, "the default drain delay is 1 s");
	return done_testing();
}
