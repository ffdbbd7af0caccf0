/* pin_upgrade.c — carry the pins of an agent of an older layout over to
 * today's names, before anything is loaded (docs/maps.md "Upgrading").
 *
 * An agent upgraded in place finds the maps and links its predecessor
 * pinned; it adopts them by path (src/agent/lb.c "pins and adoption").
 * When a release renames pins (the load balancer's zh_lb_* became lb_*),
 * the new agent would not find them: it would create empty maps and attach
 * a second set of links beside the old ones. So each renamed pin is moved
 * with rename(2) in the pin dir (bpffs supports it; the map or link
 * object, its content and its cgroup attachment are untouched).
 *
 * Invariants:
 *  P1. Every step is one rename(2) or one unlink(2): after any failure
 *      each object is pinned under exactly one of its names, and the next
 *      start finishes the job (the step is idempotent).
 *  P2. When both names exist (an older agent was started over a pin dir
 *      already upgraded), the new name wins and the old pin is removed:
 *      for a link that detaches the old program, so never two sets of
 *      hooks run on one cgroup.
 *  P3. Runs before the first bpf_map__set_pin_path()/load of the module
 *      (ag_lb_open) and before --cleanup (ag_lb_cleanup), so neither ever
 *      sees an old name.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "zerohop/agent.h"
#include "zerohop/log.h"

/* old pin name -> new pin name. Append, never reorder or remove: an agent
 * may skip releases. */
static const struct {
	const char *old, *cur;
} renames[] = {
	/* maps, then links: the one-prefix-per-module rename */
	{ "zh_lb_svc", "lb_svc" },
	{ "zh_lb_alias", "lb_alias" },
	{ "zh_lb_sock", "lb_sock" },
	{ "zh_lb_udprev", "lb_udprev" },
	{ "zh_lb_meta", "lb_meta" },
	{ "zh_lb_stats", "lb_stats" },
	{ "zh_lb_link_connect4", "lb_link_connect4" },
	{ "zh_lb_link_sendmsg4", "lb_link_sendmsg4" },
	{ "zh_lb_link_recvmsg4", "lb_link_recvmsg4" },
	{ "zh_lb_link_getpeername4", "lb_link_getpeername4" },
	{ "zh_lb_link_connect6", "lb_link_connect6" },
	{ "zh_lb_link_sendmsg6", "lb_link_sendmsg6" },
	{ "zh_lb_link_recvmsg6", "lb_link_recvmsg6" },
	{ "zh_lb_link_getpeername6", "lb_link_getpeername6" },
};

int ag_pin_upgrade(const char *pin_dir, int *moved)
{
	char from[320], to[320];
	struct stat st;
	size_t i;
	int n = 0;

	for (i = 0; i < sizeof(renames) / sizeof(renames[0]); i++) {
		if (snprintf(from, sizeof(from), "%s/%s", pin_dir, renames[i].old) >= (int)sizeof(from) ||
		    snprintf(to, sizeof(to), "%s/%s", pin_dir, renames[i].cur) >= (int)sizeof(to))
			return -ENAMETOOLONG;
		if (lstat(from, &st)) {
			if (errno == ENOENT || errno == ENOTDIR)
				continue;
			zh_err("pin upgrade: %s: %s", from, strerror(errno));
			return -errno;
		}
		if (lstat(to, &st) == 0) {	/* P2 */
			if (unlink(from)) {
				zh_err("pin upgrade: remove %s (%s exists): %s", from, renames[i].cur,
				       strerror(errno));
				return -errno;
			}
			zh_info("pin upgrade: %s and %s both pinned: kept %s, removed the old one",
				renames[i].old, renames[i].cur, renames[i].cur);
			n++;
			continue;
		}
		if (rename(from, to)) {
			zh_err("pin upgrade: rename %s to %s: %s", from, renames[i].cur, strerror(errno));
			return -errno;
		}
		n++;
	}
	if (n)
		zh_info("pin upgrade: %d pins of an older layout in %s moved to their new names", n,
			pin_dir);
	if (moved)
		*moved = n;
	return 0;
}
