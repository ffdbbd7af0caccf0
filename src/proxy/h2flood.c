/* h2flood.c — control-frame flood limits of an HTTP/2 client connection.
 *
 * A client can make a server work without opening a single request:
 * PING and SETTINGS each cost an ACK (CVE-2019-9512, -9515), WINDOW_UPDATE
 * and PRIORITY cost bookkeeping (CVE-2019-9513 and kin). libnghttp2 bounds
 * only the ACKs *queued* for a client that does not read (1,000,
 * h2conn.c); a client that reads can send them forever. Envoy counts them
 * against the work the connection does; this does the same with a token
 * bucket per kind.
 *
 * Invariants:
 *  1. Each kind (enum px_h2_flood) has its own bucket of at most
 *     PX_H2_CTRL_BURST tokens, full when the connection starts.
 *  2. Buckets refill PX_H2_CTRL_RATE tokens a second of elapsed time, and
 *     by credit for work: PX_H2_CTRL_PER_STREAM per request stream opened,
 *     PX_H2_CTRL_PER_DATA per DATA frame sent (a client acknowledges data
 *     with WINDOW_UPDATE; gRPC clients probe bandwidth with PINGs as data
 *     arrives) — never above the burst, so credit cannot be banked.
 *  3. A limited frame (PING or SETTINGS without ACK, WINDOW_UPDATE,
 *     PRIORITY) takes one token; a frame finding its bucket empty is over
 *     the limit: the caller ends the connection with GOAWAY
 *     ENHANCE_YOUR_CALM and counts the kind (zerohop_proxy_h2_defence_total
 *     {action="ping_flood"...}). ACKs are never limited: they answer us.
 */
#include "px_int.h"

#define FT_PRIORITY 0x2		/* RFC 9113 frame types */
#define FT_SETTINGS 0x4
#define FT_PING 0x6
#define FT_WINDOW_UPDATE 0x8
#define FL_ACK 0x1

static const char *const flood_names[PX_H2_FLOOD__N] = {
	[PX_H2_FLOOD_SETTINGS] = "settings_flood",
	[PX_H2_FLOOD_PING] = "ping_flood",
	[PX_H2_FLOOD_WINDOW_UPDATE] = "window_update_flood",
	[PX_H2_FLOOD_PRIORITY] = "priority_flood",
};

const char *px_h2_flood_name(enum px_h2_flood k)
{
	return flood_names[k];
}

void px_h2_ctrl_init(struct px_h2_ctrl *b, uint64_t now)
{
	for (int k = 0; k < PX_H2_FLOOD__N; k++)
		b->tokens[k] = PX_H2_CTRL_BURST;	/* invariant 1 */
	b->t = now;
}

void px_h2_ctrl_credit(struct px_h2_ctrl *b, double n)
{
	for (int k = 0; k < PX_H2_FLOOD__N; k++) {	/* invariant 2 */
		b->tokens[k] += n;
		if (b->tokens[k] > PX_H2_CTRL_BURST)
			b->tokens[k] = PX_H2_CTRL_BURST;
	}
}

int px_h2_ctrl_take(struct px_h2_ctrl *b, uint8_t type, uint8_t flags, uint64_t now)
{
	int k;

	switch (type) {
	case FT_SETTINGS: k = PX_H2_FLOOD_SETTINGS; break;
	case FT_PING: k = PX_H2_FLOOD_PING; break;
	case FT_WINDOW_UPDATE: k = PX_H2_FLOOD_WINDOW_UPDATE; break;
	case FT_PRIORITY: k = PX_H2_FLOOD_PRIORITY; break;
	default: return -1;
	}
	if ((type == FT_SETTINGS || type == FT_PING) && (flags & FL_ACK))
		return -1;	/* invariant 3 */
	if (now > b->t) {
		px_h2_ctrl_credit(b, (double)(now - b->t) * PX_H2_CTRL_RATE / 1e9);
		b->t = now;
	}
	if (b->tokens[k] < 1)
		return k;
	b->tokens[k] -= 1;
	return -1;
}
