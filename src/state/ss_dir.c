/* ss_dir.c — the directory state source (state.h): one object per file,
 * written atomically, watched with inotify.
 *
 * Invariants:
 * 1. Nothing under DIR changes unless the resulting state (stored objects,
 *    with the applied ones replacing same-keyed ones or the deleted ones
 *    removed, plus runtime pods) passes md_state_finish().
 * 2. Every file is written as a temporary DIR/x/NAME.tmp.PID, fsync'd (a
 *    multi-object apply: all temporaries, one syncfs), then rename()d to
 *    NAME: a reader sees the old or the new object, never half of one
 *    (src/lib/fileio.c does both steps, invariants W1-W4 of fileio.h).
 *    Temporary names do not end in .yaml, so md_state_add_dir() and the
 *    watch (md_manifest_name) skip them.
 * 3. Writers (apply, delete, put/del pod) hold an exclusive flock on
 *    DIR/.lock; sdir_load() holds a shared one, so a load never sees half of a
 *    multi-object apply, across processes.
 * 4. DIR/generation is bumped (atomically, invariant 2) after the object
 *    files of a change are in place; it only grows.
 *
 * 5. sdir_load() gives exactly the state a fresh parse of manifests/ then
 *    pods/ (each in name order) and md_state_finish() would give; the parse
 *    cache below only decides which files need parsing again.
 *
 * Parse cache (ss_load): per directory, a name-sorted array of entries
 * (file name, dev, inode, size, mtime ns, ctime ns); the parsed md_file of
 * each lives in the event layer under the same name. A
 * load builds the md_state from the entries' shared, unfinished objects
 * (md_state_add_parsed) and runs md_state_finish() on it, so validation
 * is the same code as for a fresh load.
 *   C1. Which files to look at: with the inotify watch open (ss_watch_fd)
 *       and no queue overflow since the last full scan, only the names the
 *       watch reported (drained into per-directory dirty lists, and drained
 *       once more under the shared lock, when every writer's renames are
 *       already queued) are stat'ed; otherwise the whole directory is read
 *       and every file stat'ed ("full scan").
 *   C2. A looked-at file is parsed again unless its (dev, inode, size,
 *       mtime, ctime) equal the entry's. Writers rename a new inode into
 *       place, so a change shows in the key; for a file changed in place
 *       within the file system's timestamp granularity, a full scan also
 *       re-parses every entry whose file changed less than RACY_NS before
 *       it was read ("racy" entries, as git does for its index). With the
 *       watch, IN_CLOSE_WRITE reports such writes anyway.
 *   C3. A file that fails to read or parse is never cached: the entry keeps
 *       no md_file, and every load parses it again, in name order, so the
 *       first error reported is the one a fresh load reports.
 *   C4. A built state holds a reference on every md_file it uses, so
 *       dropping or replacing an entry never frees memory a live state
 *       points into (model.h, struct md_file).
 *   C5. Every cache update is one batch of object events on the shared
 *       layer (src/state/ss_int.h, E1-E5): a re-parsed or new file is a put
 *       keyed by its file name, a vanished one a delete. That layer keeps
 *       the parsed files and the change log and decides whether
 *       sdir_load_delta() may patch the caller's state in place (E4); a
 *       rescan (full scan) never does. The result is then what invariant 5
 *       says sdir_load() gives (tests/unit/agent/test_incr.c checks it
 *       against a fresh load). This file keeps only the stat keys.
 * The "generation" file is not part of the key: every writer changes the
 * object files themselves, and C1/C2 see those changes directly (a bump
 * with no file change, e.g. ss_put_pod of identical text, costs nothing).
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
#include <time.h>

#include "zerohop/fileio.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "zerohop/state.h"
#include "zerohop/vec.h"
#include "zerohop/model.h"
#include "ss_int.h"

/* A file changed less than this before a full scan read it is parsed again
 * by the next full scan (C2): 50 ms, above the coarse clock tick (<= 10 ms)
 * that file timestamps are taken from. */
#define RACY_NS 50000000LL
/* More reported names than this: forget them and scan the whole directory. */
#define MAX_DIRTY 65536

struct ss_cent {
	char *name;		/* file name inside the directory */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	bool racy;		/* changed within RACY_NS of being read (C2) */
	bool ok;		/* parsed: else parsed again on every load (C3) */
};

struct ss_cdir {
	const char *path;	/* s->mdir or s->pdir */
	int wd;			/* inotify watch descriptor, -1 without watch */
	struct ss_cent *v;	/* sorted by name (strcmp), like md_state_add_dir */
	int n;
	bool valid;		/* entries reflect the directory + dirty (C1) */
	char **dirty;		/* names the watch reported since the last load */
	int n_dirty, cap_dirty;
	struct sev_set *set;	/* the parsed objects, keyed by file name (ss_int.h) */
};

struct ss_dir {
	char *dir;
	char *mdir;		/* DIR/manifests */
	char *pdir;		/* DIR/pods */
	int lock_fd;
	int ino_fd;		/* -1 until sdir_watch_fd() */
	struct ss_cdir cache[2];	/* manifests, pods */
	struct sev_src src;	/* their objects and change logs (C5) */
};

static char *join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = zh_malloc(n);

	snprintf(p, n, "%s/%s", a, b);
	return p;
}

/* The temporary + rename steps are src/lib/fileio.c's (zh_write_tmp,
 * zh_commit_tmp: invariant 2); these name the file by directory and name. */
static int file_path(char *buf, size_t len, const char *dir, const char *name)
{
	return snprintf(buf, len, "%s/%s", dir, name) >= (int)len ? -ENAMETOOLONG : 0;
}

/* Write dir/name's temporary; with do_sync, fsync it too. */
static int write_tmp(const char *dir, const char *name, const char *data, size_t len, bool do_sync)
{
	char path[4096];
	int ret = file_path(path, sizeof(path), dir, name);

	return ret ? ret : zh_write_tmp(path, data, len, 0644, do_sync);
}

/* rename dir/name's temporary onto it (the temporary goes on failure). */
static int commit_tmp(const char *dir, const char *name)
{
	char path[4096];
	int ret = file_path(path, sizeof(path), dir, name);

	return ret ? ret : zh_commit_tmp(path);
}

/* Write data to dir/name through its temporary, fsync, rename. */
static int write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
	char path[4096];
	int ret = file_path(path, sizeof(path), dir, name);

	return ret ? ret : zh_write_atomic(path, data, len, 0644, true);
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
	char path[4096];

	if (!file_path(path, sizeof(path), dir, name))
		zh_discard_tmp(path);
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

uint64_t sdir_generation(struct ss_dir *s)
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

static int bump_generation(struct ss_dir *s)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", sdir_generation(s) + 1);

	return write_atomic(s->dir, "generation", buf, (size_t)n);
}

/* ---- parse cache (design note on top) ------------------------------------- */

static void dirty_clear(struct ss_cdir *cd)
{
	for (int i = 0; i < cd->n_dirty; i++)
		free(cd->dirty[i]);
	cd->n_dirty = 0;
}

static void cent_free(struct ss_cent *e)
{
	free(e->name);
}

static void cdir_clear(struct ss_cdir *cd)
{
	for (int i = 0; i < cd->n; i++)
		cent_free(&cd->v[i]);
	free(cd->v);
	cd->v = NULL;
	cd->n = 0;
	cd->valid = false;
	dirty_clear(cd);
	free(cd->dirty);
	cd->dirty = NULL;
	cd->cap_dirty = 0;
}

static void dirty_add(struct ss_cdir *cd, const char *name)
{
	if (!cd->valid || !md_manifest_name(name))
		return;	/* a full scan comes anyway / never loaded */
	if (cd->n_dirty == MAX_DIRTY) {
		cd->valid = false;
		dirty_clear(cd);
		return;
	}
	zh_reserve((void **)&cd->dirty, &cd->cap_dirty, cd->n_dirty + 1, sizeof(*cd->dirty));
	cd->dirty[cd->n_dirty++] = zh_strdup(name);
}

/* Read every queued inotify event into the dirty lists (C1). */
static void watch_read(struct ss_dir *s)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	if (s->ino_fd < 0)
		return;
	while ((n = read(s->ino_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				for (int d = 0; d < 2; d++) {
					s->cache[d].valid = false;
					dirty_clear(&s->cache[d]);
				}
				continue;
			}
			for (int d = 0; d < 2; d++)
				if (ev->wd == s->cache[d].wd && ev->len)
					dirty_add(&s->cache[d], ev->name);
		}
	}
}

static bool ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static long long ts_ns(struct timespec t)
{
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The entry for name as the directory holds it now: old (moved into *out)
 * when its key still matches, else a fresh parse, queued as a put on the
 * set (the event layer, ss_int.h). Returns false when there is no such
 * manifest file (gone, or a directory). full: a full scan, which re-parses
 * racy entries (C2). */
static bool cent_refresh(struct ss_cdir *cd, int dfd, const char *name, struct ss_cent *old,
			 bool full, long long t0, struct ss_cent *out)
{
	char path[4096];
	struct md_file *f = NULL;
	struct md_err err;
	struct stat sb;

	if (fstatat(dfd, name, &sb, 0)) {
		if (errno == ENOENT || errno == ENOTDIR)
			return false;
		memset(&sb, 0, sizeof(sb));	/* unreadable: the load reports it (C3) */
	} else if (S_ISDIR(sb.st_mode)) {
		return false;
	}
	if (old && old->ok && old->dev == sb.st_dev && old->ino == sb.st_ino &&
	    old->size == sb.st_size && ts_eq(old->mtime, sb.st_mtim) &&
	    ts_eq(old->ctime, sb.st_ctim) && !(full && old->racy)) {
		*out = *old;
		old->name = NULL;
		return true;
	}
	memset(out, 0, sizeof(*out));
	out->name = old ? old->name : zh_strdup(name);
	if (old)
		old->name = NULL;
	out->dev = sb.st_dev;
	out->ino = sb.st_ino;
	out->size = sb.st_size;
	out->mtime = sb.st_mtim;
	out->ctime = sb.st_ctim;
	out->racy = ts_ns(sb.st_mtim) >= t0 - RACY_NS || ts_ns(sb.st_ctim) >= t0 - RACY_NS;
	snprintf(path, sizeof(path), "%s/%s", cd->path, name);
	memset(&err, 0, sizeof(err));
	if (md_file_load(dfd, name, path, &f, &err))
		f = NULL;	/* C3: kept with its error, parsed again next load */
	out->ok = f != NULL;
	sev_put(cd->set, name, f, &err, 0);
	return true;
}

static int cmp_pstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Bring cd up to date with its directory (C1, C2): merge the sorted old
 * entries with the sorted names to look at, turning what changed into
 * events on cd->set (committed here). Called under the shared lock. */
static int cdir_update(struct ss_cdir *cd, bool watched, long long t0, struct md_err *err)
{
	bool full = !watched || !cd->valid;
	char **names = NULL;
	int n_names = 0, cap = 0, i = 0, j = 0, n_new = 0, ret = 0, dfd;
	struct ss_cent *nv;
	DIR *d;

	d = opendir(cd->path);
	if (!d)
		return md_err_io(err, cd->path, errno, "cannot open directory");
	dfd = dirfd(d);
	if (full) {
		struct dirent *de;

		dirty_clear(cd);
		while ((de = readdir(d))) {
			if (!md_manifest_name(de->d_name) || de->d_type == DT_DIR)
				continue;
			zh_reserve((void **)&names, &cap, n_names + 1, sizeof(*names));
			names[n_names++] = zh_strdup(de->d_name);
		}
	} else {
		names = cd->dirty;
		n_names = cd->n_dirty;
		cd->dirty = NULL;
		cd->n_dirty = cd->cap_dirty = 0;
	}
	if (n_names)
		qsort(names, (size_t)n_names, sizeof(*names), cmp_pstr);
	nv = zh_calloc((size_t)(cd->n + n_names) + 1, sizeof(*nv));
	while (i < cd->n || j < n_names) {
		int c = i == cd->n ? 1 : j == n_names ? -1 : strcmp(cd->v[i].name, names[j]);

		if (c < 0) {	/* not looked at: kept unless the scan missed it */
			if (full) {
				sev_del(cd->set, cd->v[i].name, 0);
				cent_free(&cd->v[i]);
			} else {
				nv[n_new++] = cd->v[i];
			}
			i++;
			continue;
		}
		if (cent_refresh(cd, dfd, names[j], c == 0 ? &cd->v[i] : NULL, full, t0,
				 &nv[n_new]))
			n_new++;
		else if (c == 0)
			sev_del(cd->set, cd->v[i].name, 0);	/* removed */
		if (c == 0) {
			cent_free(&cd->v[i]);	/* what refresh did not take over */
			i++;
		}
		/* duplicates in the dirty list: look once */
		for (j++; j < n_names && !strcmp(names[j], names[j - 1]); j++)
			;
	}
	cd->set->full = full;	/* C5: a rescan never patches */
	sev_commit(cd->set);
	free(cd->v);
	cd->v = nv;
	cd->n = n_new;
	cd->valid = watched;
	for (int k = 0; k < n_names; k++)
		free(names[k]);
	free(names);
	closedir(d);
	return ret;
}

int sdir_open(const char *dir, struct ss_dir **out)
{
	struct ss_dir *s = zh_calloc(1, sizeof(*s));
	char *lock = NULL;
	struct stat sb;
	int ret;

	s->ino_fd = -1;
	s->lock_fd = -1;
	s->dir = zh_strdup(dir);
	s->mdir = join(dir, "manifests");
	s->pdir = join(dir, "pods");
	s->cache[0].path = s->mdir;
	s->cache[1].path = s->pdir;
	s->cache[0].set = &s->src.set[0];
	s->cache[1].set = &s->src.set[1];
	s->cache[0].wd = s->cache[1].wd = -1;
	if ((ret = zh_mkdir_p(s->mdir, 0755)) || (ret = zh_mkdir_p(s->pdir, 0755)))
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
	sdir_close(s);
	return ret;
}

void sdir_close(struct ss_dir *s)
{
	if (!s)
		return;
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	if (s->ino_fd >= 0)
		close(s->ino_fd);
	for (int d = 0; d < 2; d++)
		cdir_clear(&s->cache[d]);
	sev_src_clear(&s->src);
	free(s->dir);
	free(s->mdir);
	free(s->pdir);
	free(s);
}

const char *sdir_path(const struct ss_dir *s)
{
	return s->dir;
}

static int lock(struct ss_dir *s, int how)
{
	while (flock(s->lock_fd, how))
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void unlock(struct ss_dir *s)
{
	flock(s->lock_fd, LOCK_UN);
}

/* The stored file name of an object. */
static void obj_file(const struct md_obj_id *o, char *buf, size_t len)
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

int ss_add_inputs(struct md_state *st, char *const *paths, int n, struct md_err *err)
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

/* File names of the objects of st (obj_file), NULL-terminated, and the
 * same pointers sorted in *sorted (for add_stored); both malloc'd. */
static char **obj_files(const struct md_state *st, char ***sorted)
{
	int n = md_state_n_objects(st);
	char **v = zh_calloc((size_t)n + 1, sizeof(*v));

	for (int i = 0; i < n; i++) {
		struct md_obj_id o;
		char buf[600];

		md_state_obj_id(st, i, &o);
		obj_file(&o, buf, sizeof(buf));
		v[i] = zh_strdup(buf);
	}
	*sorted = zh_calloc((size_t)n + 1, sizeof(**sorted));
	memcpy(*sorted, v, (size_t)n * sizeof(*v));
	qsort(*sorted, (size_t)n, sizeof(**sorted), cmp_pstr);
	return v;
}

/* Add every stored manifest to st except the n_skip names in skip (sorted),
 * then the runtime pods. */
static int add_stored(struct ss_dir *s, struct md_state *st, char *const *skip, int n_skip,
		      struct md_err *err)
{
	struct dirent *de;
	char path[4096];
	DIR *d;
	int ret = 0;

	d = opendir(s->mdir);
	if (!d)
		return md_err_io(err, s->mdir, errno, "cannot open directory");
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".yaml"))
			continue;
		if (bsearch(&(const char *){ de->d_name }, skip, (size_t)n_skip, sizeof(*skip),
			    cmp_pstr))
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

/* ---- reports (kubectl's lines) ---------------------------------------------- */

static const char *kind_group(enum md_kind k)
{
	switch (k) {
	case MD_K_CLUSTER: return "zerohop.io";
	case MD_K_DEPLOYMENT: return "apps";
	case MD_K_TRAFFICSPLIT: return "split.smi-spec.io";
	case MD_K_HTTPROUTE:
	case MD_K_GRPCROUTE: return "gateway.networking.k8s.io";
	case MD_K_NETPOL: return "networking.k8s.io";
	case MD_K_ROUTEGROUP: return "specs.smi-spec.io";
	case MD_K_PEERAUTH: case MD_K_AUTHZPOL: return "security.istio.io";
	default: return "";
	}
}

/* "kind[.group]/name", lower case. */
static void what_of(char *buf, size_t len, const char *kind, const char *group, const char *name)
{
	size_t i;

	snprintf(buf, len, "%s%s%s/%s", kind, *group ? "." : "", group, name);
	for (i = 0; buf[i] && buf[i] != '.' && buf[i] != '/'; i++)
		if (buf[i] >= 'A' && buf[i] <= 'Z')
			buf[i] = (char)(buf[i] - 'A' + 'a');
}

/* Object i of st (md_state_obj_id), as kubectl names it in its report. */
void ss_report_obj(const struct ss_opts *o, enum ss_event ev, const struct md_state *st, int i)
{
	struct md_obj_id ob;
	char what[600];

	if (!o || !o->report)
		return;
	md_state_obj_id(st, i, &ob);
	what_of(what, sizeof(what), md_kind_name(ob.kind), kind_group(ob.kind), ob.name);
	o->report(o->arg, ev, what, ob.ns, NULL);
}

void ss_report_ignored(const struct ss_opts *o, const struct md_state *st)
{
	char what[600];

	for (int i = 0; o && o->report && i < st->n_ignored; i++) {
		const struct md_ignored *ig = &st->ignored[i];

		what_of(what, sizeof(what), ig->kind, ig->group, ig->name);
		o->report(o->arg, SS_IGNORED, what, ig->ns, ig->reason);
	}
}

/* Warnings about the inputs: every warning of an object outside the
 * stored directories (the inputs are named as given). */
static void report_warnings(const struct ss_dir *s, const struct ss_opts *o, const struct md_state *st)
{
	size_t ml = strlen(s->mdir), pl = strlen(s->pdir);
	char what[600];

	for (int i = 0; o && o->report && i < st->n_warnings; i++) {
		const struct md_warning *w = &st->warnings[i];

		if ((!strncmp(w->file, s->mdir, ml) && w->file[ml] == '/') ||
		    (!strncmp(w->file, s->pdir, pl) && w->file[pl] == '/'))
			continue;
		snprintf(what, sizeof(what), "%s:%d: %s", w->file, w->line, w->field);
		o->report(o->arg, SS_WARNING, what, NULL, w->msg);
	}
}

void ss_set_input_opts(struct md_state *st, const struct ss_opts *o)
{
	md_state_set_strict(st, o && o->strict);
	md_state_set_namespace(st, o ? o->ns : NULL);
}

int ss_read_inputs(struct md_state *st, enum md_parse_mode mode, char *const *paths, int n,
		   const struct ss_opts *o, struct md_err *err)
{
	int ret;

	md_state_set_parse(st, mode);
	ss_set_input_opts(st, o);
	ret = ss_add_inputs(st, paths, n, err);
	ss_set_input_opts(st, NULL);	/* stored objects are read as stored */
	md_state_set_parse(st, MD_PARSE_FULL);
	return ret;
}

int sdir_apply(struct ss_dir *s, char *const *paths, int n_paths, const struct ss_opts *o,
		  struct md_err *err)
{
	struct md_state *u = md_state_new();
	char **fnames = NULL, **names = NULL;
	bool *changed = NULL, *existed = NULL;
	int n_in, ret, n_tmp = 0, n_done = 0, n_changed = 0;

	/* the inputs are re-emitted into their files */
	ret = ss_read_inputs(u, MD_PARSE_KEEP_TREE, paths, n_paths, o, err);
	if (ret)
		goto out;
	n_in = md_state_n_objects(u);
	fnames = obj_files(u, &names);
	ret = lock(s, LOCK_EX);
	if (ret) {
		md_err_io(err, s->dir, -ret, "cannot lock the state");
		goto out;
	}
	ret = add_stored(s, u, names, n_in, err);
	if (!ret)
		ret = md_state_finish(u, err);
	/* temporaries first, one sync for all of them (an fsync per file
	 * costs a disk flush each when the state is not on tmpfs), then the
	 * renames: a reader never sees a file before its content is durable.
	 * An object whose stored file already has the same text is skipped, and
	 * an apply that changes nothing leaves the generation alone (watchers
	 * are not woken by a re-apply). */
	changed = zh_calloc((size_t)n_in + 1, sizeof(*changed));
	existed = zh_calloc((size_t)n_in + 1, sizeof(*existed));
	for (int i = 0; !ret && i < n_in; i++) {
		char *text;
		size_t len;
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", s->mdir, fnames[i]);
		existed[i] = access(path, F_OK) == 0;
		ret = md_state_obj_yaml(u, i, &text, &len);
		if (ret) {
			struct md_obj_id id;

			md_state_obj_id(u, i, &id);
			snprintf(err->file, sizeof(err->file), "%s", id.file);
			err->line = id.line;
			err->field[0] = 0;
			snprintf(err->msg, sizeof(err->msg), "cannot re-emit the object as YAML");
			break;
		}
		changed[i] = !same_content(s->mdir, fnames[i], text, len);
		if (changed[i]) {
			ret = write_tmp(s->mdir, fnames[i], text, len, n_in == 1);
			if (ret)
				md_err_io(err, s->mdir, -ret, fnames[i]);
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
			md_err_io(err, s->mdir, -ret, fnames[i]);
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
			md_err_io(err, s->dir, -ret, "cannot write generation");
	}
	for (int i = 0; !ret && i < n_in; i++)
		ss_report_obj(o, !changed[i] ? SS_UNCHANGED : existed[i] ? SS_CONFIGURED : SS_CREATED,
			   u, i);
	if (!ret) {
		ss_report_ignored(o, u);
		report_warnings(s, o, u);
	}
	free(existed);
	free(changed);
	unlock(s);
out:
	for (int i = 0; fnames && fnames[i]; i++)
		free(fnames[i]);
	free(fnames);
	free(names);
	md_state_free(u);
	return ret;
}

int sdir_delete(struct ss_dir *s, char *const *paths, int n_paths, const struct ss_opts *o,
		   struct md_err *err)
{
	struct md_state *in = md_state_new(), *u = NULL;
	char **fnames = NULL, **names = NULL, path[4096];
	int ret, n_in;

	/* like kubectl delete -f: only kind, apiVersion and metadata matter */
	ret = ss_read_inputs(in, MD_PARSE_IDENT_ONLY, paths, n_paths, o, err);
	if (ret)
		goto out;
	n_in = md_state_n_objects(in);
	fnames = obj_files(in, &names);
	ret = lock(s, LOCK_EX);
	if (ret) {
		md_err_io(err, s->dir, -ret, "cannot lock the state");
		goto out;
	}
	for (int i = 0; i < n_in; i++) {
		struct md_obj_id id;

		snprintf(path, sizeof(path), "%s/%s", s->mdir, fnames[i]);
		if (access(path, F_OK) == 0)
			continue;
		md_state_obj_id(in, i, &id);
		snprintf(err->file, sizeof(err->file), "%s", id.file);
		err->line = id.line;
		snprintf(err->field, sizeof(err->field), "metadata.name");
		snprintf(err->msg, sizeof(err->msg), "%s %s%s%s not found", md_kind_name(id.kind),
			 id.ns ? id.ns : "", id.ns ? "/" : "", id.name);
		ret = -ENOENT;
		goto unlock;
	}
	u = md_state_new();
	ret = add_stored(s, u, names, n_in, err);
	if (!ret)
		ret = md_state_finish(u, err);
	if (ret)
		goto unlock;
	for (int i = 0; i < n_in; i++) {
		snprintf(path, sizeof(path), "%s/%s", s->mdir, fnames[i]);
		if (unlink(path) && errno != ENOENT) {
			ret = md_err_io(err, path, errno, "cannot remove");
			goto unlock;
		}
	}
	fsync_dir(s->mdir);
	ret = bump_generation(s);
	if (ret)
		md_err_io(err, s->dir, -ret, "cannot write generation");
	for (int i = 0; !ret && i < n_in; i++)
		ss_report_obj(o, SS_DELETED, in, i);
	if (!ret)
		ss_report_ignored(o, in);
unlock:
	unlock(s);
out:
	for (int i = 0; fnames && fnames[i]; i++)
		free(fnames[i]);
	free(fnames);
	free(names);
	md_state_free(u);
	md_state_free(in);
	return ret;
}

/* Under the shared lock, bring both caches up to date: one batch of
 * events (ss_int.h); returns the batch's base epoch in *base. */
static int update(struct ss_dir *s, uint64_t *base, struct md_err *err)
{
	struct timespec now;
	int ret;

	ret = lock(s, LOCK_SH);
	if (ret)
		return md_err_io(err, s->dir, -ret, "cannot lock the state");
	/* every finished writer's events are queued now (C1) */
	watch_read(s);
	clock_gettime(CLOCK_REALTIME, &now);
	*base = sev_begin(&s->src);
	for (int d = 0; !ret && d < 2; d++)
		ret = cdir_update(&s->cache[d], s->ino_fd >= 0, ts_ns(now), err);
	unlock(s);
	return ret;
}

int sdir_load(struct ss_dir *s, struct md_state **out, struct md_err *err)
{
	uint64_t base;
	int ret = update(s, &base, err);

	return ret ? ret : sev_load(&s->src, out, err);
}

int sdir_load_delta(struct ss_dir *s, struct md_state **io, uint64_t *token, struct ss_delta *d,
		    struct md_err *err)
{
	uint64_t base;
	int ret;

	memset(d, 0, sizeof(*d));
	ret = update(s, &base, err);
	return ret ? ret : sev_load_delta(&s->src, base, io, token, d, err);
}

static int pod_file(const char *ns, const char *name, char *buf, size_t len)
{
	if (!ns || !name || md_check_dns_label(ns) || md_check_dns_subdomain(name))
		return -EINVAL;
	snprintf(buf, len, "%s_%s.yaml", ns, name);
	return 0;
}

int sdir_put_pod(struct ss_dir *s, const char *ns, const char *name, const char *yaml)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char fname[600];
	struct md_obj_id o;
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
	if (md_state_n_objects(st) == 1)
		md_state_obj_id(st, 0, &o);
	if (md_state_n_objects(st) != 1 || o.kind != MD_K_POD || strcmp(o.ns, ns) ||
	    strcmp(o.name, name)) {
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

int sdir_del_pod(struct ss_dir *s, const char *ns, const char *name)
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

int sdir_watch_fd(struct ss_dir *s)
{
	const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE;

	if (s->ino_fd >= 0)
		return s->ino_fd;
	s->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->ino_fd < 0)
		return -errno;
	/* entries loaded before the watch existed must be re-checked (C1) */
	s->cache[0].valid = s->cache[1].valid = false;
	if ((s->cache[0].wd = inotify_add_watch(s->ino_fd, s->mdir, mask)) < 0 ||
	    (s->cache[1].wd = inotify_add_watch(s->ino_fd, s->pdir, mask)) < 0 ||
	    /* DIR: only the rename of generation (opening .lock must not wake anyone) */
	    inotify_add_watch(s->ino_fd, s->dir, IN_MOVED_TO) < 0) {
		int e = errno;

		close(s->ino_fd);
		s->ino_fd = -1;
		s->cache[0].wd = s->cache[1].wd = -1;
		return -e;
	}
	return s->ino_fd;
}

void sdir_watch_drain(struct ss_dir *s)
{
	watch_read(s);	/* the names are kept for the next ss_load (C1) */
}
