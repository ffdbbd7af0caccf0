/* renew.c — the node agent keeps its node's SVIDs up to date by itself
 * (identity.h I6): after every state load, at half-life (I4) and when the
 * CA changes, through id_issue_node() (idempotent, cheap when nothing is
 * due). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "zerohop/identity.h"
#include "zerohop/log.h"

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* mtime of DIR/NAME ({0,0} when missing). */
static struct timespec file_mtime(const char *dir, const char *name)
{
	char path[400];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(path, &sb))
		return (struct timespec){ 0, 0 };
	return sb.st_mtim;
}

static bool ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

void id_renew_init(struct id_renew *r, const char *ca_dir, const char *out_dir, const char *node,
		   long ttl_s)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->ca_dir, sizeof(r->ca_dir), "%s", ca_dir);
	snprintf(r->out_dir, sizeof(r->out_dir), "%s", out_dir);
	snprintf(r->node, sizeof(r->node), "%s", node);
	r->ttl_s = ttl_s > 0 ? ttl_s : ID_DEFAULT_SVID_TTL;
}

int id_renew_sync(struct id_renew *r, const struct md_state *st)
{
	struct id_issue_report rep;
	struct id_err err = {};
	struct timespec ca, bundle;
	int ret;

	/* Read the CA's identity before issuing: a rotation that lands
	 * during the issue changes the mtime again and the next tick renews. */
	ca = file_mtime(r->ca_dir, "ca.crt");
	bundle = file_mtime(r->ca_dir, "bundle.pem");
	r->next_look_ms = mono_ms() + ID_RENEW_POLL_MS;
	if (!ca.tv_sec && !ca.tv_nsec) {	/* no CA (yet): plain text, I6 */
		r->ca_mtime = ca;
		r->next_due = 0;
		r->dirty = false;
		return 0;
	}
	ret = id_issue_node_settle(r->ca_dir, st, r->node, r->out_dir, r->ttl_s, ID_CA_SETTLE_S,
				   &rep, &err);	/* I11 */
	if (ret) {
		zh_err("identity: node %s: SVIDs in %s: %s (retried in %d ms)", r->node, r->out_dir,
		       err.msg, ID_RENEW_POLL_MS);
		r->dirty = true;
		return ret;
	}
	r->dirty = false;
	r->ca_mtime = ca;
	r->bundle_mtime = bundle;
	r->next_due = rep.next_due;
	if (rep.issued || rep.removed)
		zh_info("identity: node %s: %d SVIDs issued, %d kept, %d removed (%s)", r->node,
			rep.issued, rep.kept, rep.removed, r->out_dir);
	return 0;
}

int id_renew_tick(struct id_renew *r, const struct md_state *st)
{
	long long now = mono_ms();
	bool due;

	if (!st || now < r->next_look_ms)
		return 0;
	r->next_look_ms = now + ID_RENEW_POLL_MS;
	due = r->dirty || (r->next_due && time(NULL) >= r->next_due) ||
	      !ts_eq(file_mtime(r->ca_dir, "ca.crt"), r->ca_mtime) ||
	      !ts_eq(file_mtime(r->ca_dir, "bundle.pem"), r->bundle_mtime);
	return due ? id_renew_sync(r, st) : 0;
}

int id_renew_timeout_ms(const struct id_renew *r)
{
	long long left = r->next_look_ms - mono_ms();

	return left < 0 ? 0 : left > ID_RENEW_POLL_MS ? ID_RENEW_POLL_MS : (int)left;
}
