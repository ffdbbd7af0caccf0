/* test_h2flood.c — the control-frame budgets of src/proxy/h2flood.c: the
 * burst, one bucket per kind, ACKs and other frames free, refill by time
 * and by credit for work, never above the burst. */
#include "tap.h"
#include "../../../src/proxy/px_int.h"

#define SEC 1000000000ull

/* Frames of type/flags taken at now until one is refused: how many passed. */
static int until_refused(struct px_h2_ctrl *b, uint8_t type, uint8_t flags, uint64_t now,
			 int max, int *kind)
{
	int n = 0;

	*kind = -1;
	while (n < max && (*kind = px_h2_ctrl_take(b, type, flags, now)) < 0)
		n++;
	return n;
}

int main(void)
{
	struct px_h2_ctrl b;
	int k, n;

	px_h2_ctrl_init(&b, 10 * SEC);
	n = until_refused(&b, 0x6, 0, 10 * SEC, 100000, &k);
	is_int(n, PX_H2_CTRL_BURST, "PING: the burst passes at once");
	is_int(k, PX_H2_FLOOD_PING, "... the next is a ping flood");
	is_str(px_h2_flood_name(k), "ping_flood", "... named for its metric label");
	is_int(until_refused(&b, 0x6, 0x1, 10 * SEC, 5000, &k), 5000, "PING ACKs are never limited");
	is_int(until_refused(&b, 0x4, 0x1, 10 * SEC, 5000, &k), 5000, "SETTINGS ACKs neither");
	is_int(until_refused(&b, 0x0, 0, 10 * SEC, 5000, &k), 5000, "DATA is not a control frame");
	is_int(until_refused(&b, 0x3, 0, 10 * SEC, 5000, &k), 5000,
	       "RST_STREAM is not limited here (nghttp2's rapid-reset limit is)");
	n = until_refused(&b, 0x4, 0, 10 * SEC, 100000, &k);
	is_int(n, PX_H2_CTRL_BURST, "SETTINGS has its own bucket: a full burst");
	is_int(k, PX_H2_FLOOD_SETTINGS, "... then a settings flood");
	n = until_refused(&b, 0x8, 0, 10 * SEC, 100000, &k);
	is_int(k, PX_H2_FLOOD_WINDOW_UPDATE, "WINDOW_UPDATE: window update flood after %d", n);
	n = until_refused(&b, 0x2, 0, 10 * SEC, 100000, &k);
	is_int(k, PX_H2_FLOOD_PRIORITY, "PRIORITY: priority flood after %d", n);

	/* refill by time: PX_H2_CTRL_RATE a second */
	n = until_refused(&b, 0x6, 0, 11 * SEC, 100000, &k);
	is_int(n, PX_H2_CTRL_RATE, "one second later: %d more PINGs", PX_H2_CTRL_RATE);
	n = until_refused(&b, 0x6, 0, 11 * SEC + SEC / 2, 100000, &k);
	is_int(n, PX_H2_CTRL_RATE / 2, "half a second: half as many");
	n = until_refused(&b, 0x6, 0, 1000 * SEC, 100000, &k);
	is_int(n, PX_H2_CTRL_BURST, "idle for long: never more than the burst");
	/* credit for work */
	px_h2_ctrl_credit(&b, 10 * PX_H2_CTRL_PER_DATA);
	n = until_refused(&b, 0x6, 0, 1000 * SEC, 100000, &k);
	is_int(n, 10 * PX_H2_CTRL_PER_DATA, "10 DATA frames sent: %d more PINGs",
	       10 * PX_H2_CTRL_PER_DATA);
	px_h2_ctrl_credit(&b, 1e9);
	n = until_refused(&b, 0x8, 0, 1000 * SEC, 100000, &k);
	is_int(n, PX_H2_CTRL_BURST, "credit is capped at the burst too");
	/* a clock that goes back does not refill */
	n = until_refused(&b, 0x8, 0, 999 * SEC, 100000, &k);
	is_int(n, 0, "an earlier timestamp refills nothing");
	return done_testing();
}
