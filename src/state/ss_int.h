/* ss_int.h — inside the state layer (src/state): the shared object-event
 * layer (prefix sev_) every state source feeds, and the sources behind the
 * state.h dispatcher (src/state/ss.c).
 *
 * A state source only turns its store into object events: "key now holds
 * this parsed manifest" (put) or "key is gone" (delete), at a revision, in
 * batches. The event layer keeps the parsed objects by key and turns a
 * batch into the model: a fresh build (md_state_finish) or, when every
 * change of the batch is an in-place pod or Service update the model
 * accepts, a patch of the caller's finished state (ss_load_delta's
 * contract in state.h). The directory source (ss_dir.c) keys by file name,
 * the etcd source (ss_etcd.c) by etcd key; neither touches md_state itself.
 *
 * Invariants (cited as E1..):
 *  E1. sev_build() appends the objects in key order (strcmp), so a build
 *      equals a fresh parse of the same texts in key order; the directory
 *      source's keys are its file names, which md_state_add_dir also sorts
 *      with strcmp (ss_dir.c invariant 5 holds).
 *  E2. A key whose text did not parse is kept with its error (f == NULL):
 *      every build reports that error, the first in key order, exactly as
 *      a fresh load would; it is never silently dropped.
 *  E3. Within a batch the last event of a key wins; events of a batch are
 *      applied by sev_commit() only, so a half-read batch never shows.
 *  E4. sev_load_delta() patches the caller's state only when the caller's
 *      token is the epoch before this batch, no set was reset in the batch
 *      and every change is patchable (md_svc_patchable on manifests,
 *      md_pod_patchable on runtime pods); anything else is a full build.
 *  E5. Every md_file is reference counted: the table holds one reference,
 *      the change log one per side, each built state its own (model.h).
 */
#ifndef ZH_SS_INT_H
#define ZH_SS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "zerohop/model.h"
#include "zerohop/state.h"

struct sev_obj {
	char *key;
	struct md_file *f;	/* NULL: did not parse, err says why (E2) */
	struct md_err *err;
	uint64_t rev;		/* the store's revision of this version (0: none) */
};

struct sev_op {			/* a pending event of the current batch */
	char *key;
	struct md_file *f;	/* put: the new file (reference), or NULL with err */
	struct md_err *err;
	uint64_t rev;
	bool del;
	int seq;		/* arrival order (E3) */
};

struct sev_chg {
	struct md_file *old_f, *new_f;	/* NULL: added / removed / unparseable */
};

struct sev_set {
	struct sev_obj *v;	/* sorted by key */
	int n;
	struct sev_op *ops;	/* pending (E3) */
	int n_ops, cap_ops;
	struct sev_chg *chg;	/* what the last commit changed */
	int n_chg, cap_chg;
	bool reset;		/* the current batch began with sev_reset (a relist) */
	bool full;		/* the source asks for a full build of this batch */
};

/* Two sets, the order of a build: manifests first, then runtime pods. */
struct sev_src {
	struct sev_set set[2];
	uint64_t epoch;		/* bumped by every batch (E4) */
};

/* Begin a batch: clears the change logs, bumps the epoch, returns the
 * epoch before (the base sev_load_delta compares tokens with). */
uint64_t sev_begin(struct sev_src *src);
/* The batch replaces the whole content of the set (a relist / full scan):
 * every key not put again in this batch is gone. */
void sev_reset(struct sev_set *s);
/* Queue a put (f: reference handed over; NULL with why when it did not
 * parse) or a delete. */
void sev_put(struct sev_set *s, const char *key, struct md_file *f, const struct md_err *why,
	     uint64_t rev);
void sev_del(struct sev_set *s, const char *key, uint64_t rev);
/* Apply the queued events of s (E3), recording what changed. */
void sev_commit(struct sev_set *s);
/* Drop the queued events of s and its reset (a listing that failed half
 * way: the set stays as it was, E3). */
void sev_discard(struct sev_set *s);
const struct sev_obj *sev_find(const struct sev_set *s, const char *key);
void sev_src_clear(struct sev_src *src);

/* A fresh, finished state of both sets (E1, E2). */
int sev_load(struct sev_src *src, struct md_state **out, struct md_err *err);
/* The same from set k alone (k = 0: the applied manifests). */
int sev_load_set(struct sev_src *src, int k, struct md_state **out, struct md_err *err);
/* ss_load_delta's contract (state.h) after a committed batch begun at base. */
int sev_load_delta(struct sev_src *src, uint64_t base, struct md_state **io, uint64_t *token,
		   struct ss_delta *d, struct md_err *err);

/* ---- the sources behind state.h (ss.c dispatches on the spec) ---------- */

struct ss_dir;
int sdir_open(const char *dir, struct ss_dir **out);
void sdir_close(struct ss_dir *s);
const char *sdir_path(const struct ss_dir *s);
int sdir_apply(struct ss_dir *s, char *const *paths, int n_paths, const struct ss_opts *o,
	       struct md_err *err);
int sdir_delete(struct ss_dir *s, char *const *paths, int n_paths, const struct ss_opts *o,
		struct md_err *err);
int sdir_load(struct ss_dir *s, struct md_state **out, struct md_err *err);
int sdir_load_delta(struct ss_dir *s, struct md_state **io, uint64_t *token, struct ss_delta *d,
		    struct md_err *err);
int sdir_put_pod(struct ss_dir *s, const char *ns, const char *name, const char *yaml);
int sdir_del_pod(struct ss_dir *s, const char *ns, const char *name);
uint64_t sdir_generation(struct ss_dir *s);
int sdir_watch_fd(struct ss_dir *s);
void sdir_watch_drain(struct ss_dir *s);

struct ss_etcd;
int setcd_open(const char *spec, struct ss_etcd **out);
void setcd_close(struct ss_etcd *s);
const char *setcd_spec(const struct ss_etcd *s);
int setcd_apply(struct ss_etcd *s, char *const *paths, int n_paths, const struct ss_opts *o,
		struct md_err *err);
int setcd_delete(struct ss_etcd *s, char *const *paths, int n_paths, const struct ss_opts *o,
		 struct md_err *err);
int setcd_load(struct ss_etcd *s, struct md_state **out, struct md_err *err);
int setcd_load_delta(struct ss_etcd *s, struct md_state **io, uint64_t *token,
		     struct ss_delta *d, struct md_err *err);
int setcd_load_desired(struct ss_etcd *s, struct md_state **out, struct md_err *err);
int setcd_put_pod(struct ss_etcd *s, const char *ns, const char *name, const char *yaml);
int setcd_del_pod(struct ss_etcd *s, const char *ns, const char *name);
uint64_t setcd_generation(struct ss_etcd *s);
int setcd_watch_fd(struct ss_etcd *s);
void setcd_watch_drain(struct ss_etcd *s);
int setcd_health(struct ss_etcd *s, char *buf, size_t len);
int setcd_list_raw(struct ss_etcd *s, ss_raw_fn fn, void *arg, struct md_err *err);

/* Shared by the sources: kubectl's report lines (ss_dir.c). */
void ss_report_obj(const struct ss_opts *o, enum ss_event ev, const struct md_state *st, int i);
void ss_report_ignored(const struct ss_opts *o, const struct md_state *st);
void ss_set_input_opts(struct md_state *st, const struct ss_opts *o);
int ss_add_inputs(struct md_state *st, char *const *paths, int n, struct md_err *err);
/* The inputs of an apply (MD_PARSE_KEEP_TREE: re-emitted when stored) or a
 * delete (MD_PARSE_IDENT_ONLY, like kubectl delete -f) with the command's
 * options; st is left parsing stored objects as stored (MD_PARSE_FULL). */
int ss_read_inputs(struct md_state *st, enum md_parse_mode mode, char *const *paths, int n,
		   const struct ss_opts *o, struct md_err *err);

#endif
