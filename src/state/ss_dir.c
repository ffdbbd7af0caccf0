/* ss_dir.c — the directory state source (state.h): one object per file,
 * written atomically, watched with inotify.
 *
 * Invariants:
 * 1. Nothing under DIR changes unless the resulting state (stored objects,
 *    with the applied ones replacing same-keyed ones or the deleted ones
 *    removed, plus runtime pods) passes md_state_finish().
 * 2. Every file is written as DIR/x/.tmp-NAME, fsync'd, then rename()d to
 *    NAME: a reader sees the old or the new object, never half of one.
 *    Temporary names start with '.', which md_state_add_dir() skips.
 * 3. Writers (apply, delete, put/del pod) hold an exclusive flock on
 *    DIR/.lock; ss_load() holds a shared one, so a load never sees half of a
 *    multi-object apply, across processes.
 * 4. DIR/generation is bumped (atomically, invariant 2) after the object
 *    files of a change are in place; it only grows.
 *
 * File names: manifests/KIND_NAMESPACE_NAME.yaml with the lower-case kind
 * and "_" as the namespace of cluster-scoped kinds; the one Cluster object
 * is manifests/cluster.yaml whatever its name, so applying a Cluster
 * replaces the previous one. Kubernetes names cannot contain '_' or '/', so
 * names never collide and never escape the directory.
 */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "zerohop/log.h"
#include "zerohop/state.h"
#include "../model/md_int.h"

struct ss {
	char *dir;
	char *mdir;		/* DIR/manifests */
	char *pdir;		/* DIR/pods */
	int lock_fd;
	int ino_fd;		/* -1 until ss_watch_fd() */
};

static int mkdir_p(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static char *join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = zh_malloc(n);

	snprintf(p, n, "%s/%s", a, b);
	return p;
}

/* Write data to dir/.tmp-name; with do_sync, fsync it too. */
static int write_tmp(const char *dir, const char *name, const char *data, size_t len, bool do_sync)
{
	char tmp[4096];
	size_t off = 0;
	int fd, ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", dir, name) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			ret = -errno;
			goto out;
		}
		off += (size_t)w;
	}
	if (do_sync && fsync(fd))
		ret = -errno;
out:
	close(fd);
	if (ret)
		unlink(tmp);
	return ret;
}

/* rename dir/.tmp-name to dir/name (unlink the temporary on failure). */
static int commit_tmp(const char *dir, const char *name)
{
	char tmp[4096], dst[4096];
	int ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", dir, name) >= (int)sizeof(tmp) ||
	    snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst))
		return -ENAMETOOLONG;
	if (rename(tmp, dst)) {
		ret = -errno;
		unlink(tmp);
	}
	return ret;
}

/* Write data to dir/name through dir/.tmp-name, fsync, rename. */
static int write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
	int ret = write_tmp(dir, name, data, len, true);

	return ret ? ret : commit_tmp(dir, name);
}

static void fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static void discard_tmp(const char *dir, const char *name)
{
	char tmp[4096];

	if (snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", dir, name) < (int)sizeof(tmp))
		unlink(tmp);
}

/* syncfs() the file system holding dir. */
static int sync_dir_fs(const char *dir, struct md_err *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0 || syncfs(fd))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	if (ret) {
		snprintf(err->file, sizeof(err->file), "%.*s", (int)sizeof(err->file) - 1, dir);
		err->line = 0;
		err->field[0] = 0;
		snprintf(err->msg, sizeof(err->msg), "syncfs: %s", strerror(-ret));
	}
	return ret;
}

uint64_t ss_generation(struct ss *s)
{
	char path[4096], buf[32] = "";
	uint64_t g = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/generation", s->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		g = strtoull(buf, NULL, 10);
	}
	return g;
}

static int bump_generation(struct ss *s)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", ss_generation(s) + 1);

	return write_atomic(s->dir, "generation", buf, (size_t)n);
}

int ss_open(const char *dir, struct ss **out)
{
	struct ss *s = zh_calloc(1, sizeof(*s));
	char *lock = NULL;
	struct stat sb;
	int ret;

	s->ino_fd = -1;
	s->lock_fd = -1;
	s->dir = zh_strdup(dir);
	s->mdir = join(dir, "manifests");
	s->pdir = join(dir, "pods");
	if ((ret = mkdir_p(s->mdir)) || (ret = mkdir_p(s->pdir)))
		goto fail;
	lock = join(dir, ".lock");
	s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (s->lock_fd < 0) {
		ret = -errno;
		goto fail;
	}
	{
		char *gen = join(dir, "generation");

		ret = stat(gen, &sb) && errno == ENOENT ? write_atomic(dir, "generation", "0\n", 2) : 0;
		free(gen);
		if (ret)
			goto fail;
	}
	free(lock);
	*out = s;
	return 0;
fail:
	free(lock);
	ss_close(s);
	return ret;
}

void ss_close(struct ss *s)
{
	if (!s)
		return;
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	if (s->ino_fd >= 0)
		close(s->ino_fd);
	free(s->dir);
	free(s->mdir);
	free(s->pdir);
	free(s);
}

const char *ss_dir(const struct ss *s)
{
	return s->dir;
}

static int lock(struct ss *s, int how)
{
	while (flock(s->lock_fd, how))
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void unlock(struct ss *s)
{
	flock(s->lock_fd, LOCK_UN);
}

static int io_err(struct md_err *err, const char *path, int e, const char *what)
{
	snprintf(err->file, sizeof(err->file), "%.*s", (int)sizeof(err->file) - 1, path);
	err->line = 0;
	err->field[0] = 0;
	snprintf(err->msg, sizeof(err->msg), "%s: %s", what, strerror(e));
	return -e;
}

/* The stored file name of an object. */
static void obj_file(const struct md_obj *o, char *buf, size_t len)
{
	if (o->kind == MD_K_CLUSTER)
		snprintf(buf, len, "cluster.yaml");
	else
		snprintf(buf, len, "%s_%s_%s.yaml", md_kind_lower(o->kind), o->ns ? o->ns : "_",
			 o->name);
}

/* True when dir/name exists and holds exactly text. */
static bool same_content(const char *dir, const char *name, const char *text, size_t len)
{
	char path[4096], buf[8192];
	size_t off = 0;
	bool same = false;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			same = r == 0 && off == len;
			break;
		}
		if ((size_t)r > len - off || memcmp(buf, text + off, (size_t)r))
			break;
		off += (size_t)r;
	}
	close(fd);
	return same;
}

static int add_inputs(struct md_state *st, char *const *paths, int n, struct md_err *err)
{
	for (int i = 0; i < n; i++) {
		struct stat sb;
		int r;

		if (!stat(paths[i], &sb) && S_ISDIR(sb.st_mode))
			r = md_state_add_dir(st, paths[i], err);
		else
			r = md_state_add_file(st, paths[i], err);
		if (r)
			return r;
	}
	return 0;
}

/* Add every stored manifest to st except the names in skip, then the
 * runtime pods. */
static int add_stored(struct ss *s, struct md_state *st, const struct md_idx *skip,
		      struct md_err *err)
{
	struct dirent *de;
	char path[4096];
	DIR *d;
	int ret = 0;

	d = opendir(s->mdir);
	if (!d)
		return io_err(err, s->mdir, errno, "cannot open directory");
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".yaml"))
			continue;
		if (md_idx_get(skip, de->d_name) >= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->mdir, de->d_name);
		ret = md_state_add_file(st, path, err);
		if (ret)
			break;
	}
	closedir(d);
	if (!ret)
		ret = md_state_add_dir(st, s->pdir, err);
	return ret;
}

int ss_apply(struct ss *s, char *const *paths, int n_paths, struct md_err *err)
{
	struct md_state *u = md_state_new();
	struct md_idx names = { 0 };
	struct md_priv *pv = md_priv(u);
	char **fnames = NULL;
	bool *changed = NULL;
	int n_in, ret, n_tmp = 0, n_done = 0, n_changed = 0;

	pv->keep_tree = true;	/* the inputs are re-emitted into their files */
	ret = add_inputs(u, paths, n_paths, err);
	if (ret)
		goto out;
	pv->keep_tree = false;
	n_in = pv->n_objs;
	fnames = zh_calloc((size_t)n_in + 1, sizeof(*fnames));
	for (int i = 0; i < n_in; i++) {
		char buf[600];

		obj_file(&pv->objs[i], buf, sizeof(buf));
		fnames[i] = zh_strdup(buf);
		md_idx_put(&names, fnames[i], i);
	}
	ret = lock(s, LOCK_EX);
	if (ret) {
		io_err(err, s->dir, -ret, "cannot lock the state");
		goto out;
	}
	ret = add_stored(s, u, &names, err);
	if (!ret)
		ret = md_state_finish(u, err);
	/* temporaries first, one sync for all of them (an fsync per file
	 * costs a disk flush each when the state is not on tmpfs), then the
	 * renames: a reader never sees a file before its content is durable.
	 * An object whose stored file already has the same text is skipped, and
	 * an apply that changes nothing leaves the generation alone (watchers
	 * are not woken by a re-apply). */
	changed = zh_calloc((size_t)n_in + 1, sizeof(*changed));
	for (int i = 0; !ret && i < n_in; i++) {
		char *text;
		size_t len;

		ret = yn_emit(pv->objs[i].node, &text, &len);
		if (ret) {
			snprintf(err->file, sizeof(err->file), "%s", pv->objs[i].file);
			err->line = pv->objs[i].line;
			err->field[0] = 0;
			snprintf(err->msg, sizeof(err->msg), "cannot re-emit the object as YAML");
			break;
		}
		changed[i] = !same_content(s->mdir, fnames[i], text, len);
		if (changed[i]) {
			ret = write_tmp(s->mdir, fnames[i], text, len, n_in == 1);
			if (ret)
				io_err(err, s->mdir, -ret, fnames[i]);
			else
				n_changed++;
		}
		free(text);
		if (!ret)
			n_tmp = i + 1;
	}
	if (!ret && n_changed > 1)
		ret = sync_dir_fs(s->mdir, err);
	for (int i = 0; !ret && i < n_in; i++) {
		if (changed[i])
			ret = commit_tmp(s->mdir, fnames[i]);
		if (ret)
			io_err(err, s->mdir, -ret, fnames[i]);
		else
			n_done = i + 1;
	}
	for (int i = n_done; i < n_tmp; i++)
		if (changed[i])
			discard_tmp(s->mdir, fnames[i]);
	if (!ret && n_changed) {
		fsync_dir(s->mdir);
		ret = bump_generation(s);
		if (ret)
			io_err(err, s->dir, -ret, "cannot write generation");
	}
	free(changed);
	unlock(s);
out:
	for (int i = 0; fnames && fnames[i]; i++)
		free(fnames[i]);
	free(fnames);
	md_idx_free(&names);
	md_state_free(u);
	return ret;
}

int ss_delete(struct ss *s, char *const *paths, int n_paths, struct md_err *err)
{
	struct md_state *in = md_state_new(), *u = NULL;
	struct md_idx names = { 0 };
	struct md_priv *pv = md_priv(in);
	char **fnames = NULL, path[4096];
	int ret;

	/* like kubectl delete -f: only kind, apiVersion and metadata matter */
	pv->ident_only = true;
	ret = add_inputs(in, paths, n_paths, err);
	if (ret)
		goto out;
	fnames = zh_calloc((size_t)pv->n_objs + 1, sizeof(*fnames));
	for (int i = 0; i < pv->n_objs; i++) {
		char buf[600];

		obj_file(&pv->objs[i], buf, sizeof(buf));
		fnames[i] = zh_strdup(buf);
		md_idx_put(&names, fnames[i], i);
	}
	ret = lock(s, LOCK_EX);
	if (ret) {
		io_err(err, s->dir, -ret, "cannot lock the state");
		goto out;
	}
	for (int i = 0; i < pv->n_objs; i++) {
		const struct md_obj *o = &pv->objs[i];

		snprintf(path, sizeof(path), "%s/%s", s->mdir, fnames[i]);
		if (access(path, F_OK) == 0)
			continue;
		snprintf(err->file, sizeof(err->file), "%s", o->file);
		err->line = o->line;
		snprintf(err->field, sizeof(err->field), "metadata.name");
		snprintf(err->msg, sizeof(err->msg), "%s %s%s%s not found", md_kind_name(o->kind),
			 o->ns ? o->ns : "", o->ns ? "/" : "", o->name);
		ret = -ENOENT;
		goto unlock;
	}
	u = md_state_new();
	ret = add_stored(s, u, &names, err);
	if (!ret)
		ret = md_state_finish(u, err);
	if (ret)
		goto unlock;
	for (int i = 0; i < pv->n_objs; i++) {
		snprintf(path, sizeof(path), "%s/%s", s->mdir, fnames[i]);
		if (unlink(path) && errno != ENOENT) {
			ret = io_err(err, path, errno, "cannot remove");
			goto unlock;
		}
	}
	fsync_dir(s->mdir);
	ret = bump_generation(s);
	if (ret)
		io_err(err, s->dir, -ret, "cannot write generation");
unlock:
	unlock(s);
out:
	for (int i = 0; fnames && fnames[i]; i++)
		free(fnames[i]);
	free(fnames);
	md_idx_free(&names);
	md_state_free(u);
	md_state_free(in);
	return ret;
}

int ss_load(struct ss *s, struct md_state **out, struct md_err *err)
{
	struct md_state *st = md_state_new();
	int ret;

	ret = lock(s, LOCK_SH);
	if (ret) {
		io_err(err, s->dir, -ret, "cannot lock the state");
		goto fail;
	}
	ret = md_state_add_dir(st, s->mdir, err);
	if (!ret)
		ret = md_state_add_dir(st, s->pdir, err);
	unlock(s);
	if (!ret)
		ret = md_state_finish(st, err);
	if (ret)
		goto fail;
	*out = st;
	return 0;
fail:
	md_state_free(st);
	return ret;
}

static int pod_file(const char *ns, const char *name, char *buf, size_t len)
{
	if (!ns || !name || md_check_dns_label(ns) || md_check_dns_subdomain(name))
		return -EINVAL;
	snprintf(buf, len, "%s_%s.yaml", ns, name);
	return 0;
}

int ss_put_pod(struct ss *s, const char *ns, const char *name, const char *yaml)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char fname[600];
	const struct md_obj *o;
	int ret;

	ret = pod_file(ns, name, fname, sizeof(fname));
	if (ret)
		goto out;
	/* the stored pod must parse, be one Pod, and carry the given name */
	ret = md_state_add_buf(st, fname, yaml, strlen(yaml), &err);
	if (ret) {
		char buf[1024];

		zh_warn("ss_put_pod %s/%s: %s", ns, name, md_err_str(&err, buf, sizeof(buf)));
		goto out;
	}
	o = md_priv(st)->objs;
	if (md_priv(st)->n_objs != 1 || o->kind != MD_K_POD || strcmp(o->ns, ns) ||
	    strcmp(o->name, name)) {
		zh_warn("ss_put_pod %s/%s: the YAML must be exactly one Pod of that name", ns, name);
		ret = -EINVAL;
		goto out;
	}
	ret = lock(s, LOCK_EX);
	if (ret)
		goto out;
	ret = write_atomic(s->pdir, fname, yaml, strlen(yaml));
	if (!ret)
		ret = bump_generation(s);
	unlock(s);
out:
	md_state_free(st);
	return ret;
}

int ss_del_pod(struct ss *s, const char *ns, const char *name)
{
	char fname[600], path[4096];
	int ret;

	ret = pod_file(ns, name, fname, sizeof(fname));
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/%s", s->pdir, fname);
	ret = lock(s, LOCK_EX);
	if (ret)
		return ret;
	if (unlink(path) == 0)
		ret = bump_generation(s);
	else if (errno != ENOENT)
		ret = -errno;
	unlock(s);
	return ret;
}

int ss_watch_fd(struct ss *s)
{
	const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE;

	if (s->ino_fd >= 0)
		return s->ino_fd;
	s->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->ino_fd < 0)
		return -errno;
	if (inotify_add_watch(s->ino_fd, s->mdir, mask) < 0 ||
	    inotify_add_watch(s->ino_fd, s->pdir, mask) < 0 ||
	    /* DIR: only the rename of generation (opening .lock must not wake anyone) */
	    inotify_add_watch(s->ino_fd, s->dir, IN_MOVED_TO) < 0) {
		int e = errno;

		close(s->ino_fd);
		s->ino_fd = -1;
		return -e;
	}
	return s->ino_fd;
}

void ss_watch_drain(struct ss *s)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	if (s->ino_fd < 0)
		return;
	while (read(s->ino_fd, buf, sizeof(buf)) > 0)
		;
}
