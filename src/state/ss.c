/* ss.c — the state.h API, dispatched to the source the spec names:
 * "etcd://HOST:PORT[,HOST:PORT...]" is the etcd v3 source (ss_etcd.c),
 * "https://..." or "etcds://..." the same over TLS,
 * anything else a directory (ss_dir.c). Both feed the same event layer
 * (ss_events.c), so the model sees no difference. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/log.h"
#include "ss_int.h"

struct ss {
	struct ss_dir *dir;	/* exactly one of the two */
	struct ss_etcd *etcd;
};

bool ss_spec_is_etcd(const char *spec)
{
	return spec && (!strncmp(spec, "etcd://", 7) || !strncmp(spec, "https://", 8) ||
			!strncmp(spec, "etcds://", 8));	/* TLS: etcd.h T1 */
}

int ss_open(const char *spec, struct ss **out)
{
	struct ss *s = zh_calloc(1, sizeof(*s));
	int ret = ss_spec_is_etcd(spec) ? setcd_open(spec, &s->etcd) : sdir_open(spec, &s->dir);

	if (ret) {
		free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void ss_close(struct ss *s)
{
	if (!s)
		return;
	if (s->etcd)
		setcd_close(s->etcd);
	else
		sdir_close(s->dir);
	free(s);
}

const char *ss_dir(const struct ss *s)
{
	return s->etcd ? setcd_spec(s->etcd) : sdir_path(s->dir);
}

bool ss_is_etcd(const struct ss *s)
{
	return s->etcd != NULL;
}

int ss_apply_opts(struct ss *s, char *const *paths, int n_paths, const struct ss_opts *o,
		  struct md_err *err)
{
	return s->etcd ? setcd_apply(s->etcd, paths, n_paths, o, err) :
			 sdir_apply(s->dir, paths, n_paths, o, err);
}

int ss_delete_opts(struct ss *s, char *const *paths, int n_paths, const struct ss_opts *o,
		   struct md_err *err)
{
	return s->etcd ? setcd_delete(s->etcd, paths, n_paths, o, err) :
			 sdir_delete(s->dir, paths, n_paths, o, err);
}

int ss_apply(struct ss *s, char *const *paths, int n_paths, struct md_err *err)
{
	return ss_apply_opts(s, paths, n_paths, NULL, err);
}

int ss_delete(struct ss *s, char *const *paths, int n_paths, struct md_err *err)
{
	return ss_delete_opts(s, paths, n_paths, NULL, err);
}

int ss_load(struct ss *s, struct md_state **out, struct md_err *err)
{
	return s->etcd ? setcd_load(s->etcd, out, err) : sdir_load(s->dir, out, err);
}

int ss_load_delta(struct ss *s, struct md_state **io, uint64_t *token, struct ss_delta *d,
		  struct md_err *err)
{
	return s->etcd ? setcd_load_delta(s->etcd, io, token, d, err) :
			 sdir_load_delta(s->dir, io, token, d, err);
}

int ss_load_desired(struct ss *s, struct md_state **out, struct md_err *err)
{
	char dir[4200];
	struct md_state *st;
	int ret;

	if (s->etcd)
		return setcd_load_desired(s->etcd, out, err);
	st = md_state_new();
	snprintf(dir, sizeof(dir), "%s/manifests", sdir_path(s->dir));
	ret = md_state_add_dir(st, dir, err);
	if (ret == -ENOENT)
		ret = 0;
	if (!ret)
		ret = md_state_finish(st, err);
	if (ret) {
		md_state_free(st);
		return ret;
	}
	*out = st;
	return 0;
}

int ss_put_pod(struct ss *s, const char *ns, const char *name, const char *yaml)
{
	return s->etcd ? setcd_put_pod(s->etcd, ns, name, yaml) : sdir_put_pod(s->dir, ns, name, yaml);
}

int ss_del_pod(struct ss *s, const char *ns, const char *name)
{
	return s->etcd ? setcd_del_pod(s->etcd, ns, name) : sdir_del_pod(s->dir, ns, name);
}

uint64_t ss_generation(struct ss *s)
{
	return s->etcd ? setcd_generation(s->etcd) : sdir_generation(s->dir);
}

int ss_watch_fd(struct ss *s)
{
	return s->etcd ? setcd_watch_fd(s->etcd) : sdir_watch_fd(s->dir);
}

void ss_watch_drain(struct ss *s)
{
	if (s->etcd)
		setcd_watch_drain(s->etcd);
	else
		sdir_watch_drain(s->dir);
}

int ss_health(struct ss *s, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	return s->etcd ? setcd_health(s->etcd, buf, len) : 0;
}

int ss_list_raw(struct ss *s, ss_raw_fn fn, void *arg, struct md_err *err)
{
	if (!s->etcd) {
		snprintf(err->msg, sizeof(err->msg), "stored manifests are listed from etcd only");
		return -EOPNOTSUPP;
	}
	return setcd_list_raw(s->etcd, fn, arg, err);
}
