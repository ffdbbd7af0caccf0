/* state.h — the state source: where desired and runtime cluster state lives
 * (prefix ss_). The embedded default is a directory watched with inotify;
 * "etcd://HOST:PORT[,HOST:PORT...]" names an etcd v3 cluster instead
 * (docs/state-etcd.md). Every operation below works on both; where the
 * etcd source differs it is said. Both sources feed one shared layer that
 * turns object events into the model (src/state/ss_int.h).
 *
 * Layout of the directory source (DIR is e.g. /run/zerohop/LAB/state):
 *   DIR/manifests/KIND_NAMESPACE_NAME.yaml   one applied object per file
 *   DIR/pods/NAMESPACE_NAME.yaml             runtime Pods written by the
 *                                            kubelet (the lab): spec.nodeName,
 *                                            status.podIP, status.phase
 *   DIR/generation                           a counter bumped by every change
 *   DIR/.lock                                flock: writers exclusive, ss_load shared
 * KIND is lower case ("service"), NAMESPACE is "_" for cluster-scoped kinds,
 * and the one Cluster object is always manifests/cluster.yaml.
 * Every file is written to a temporary name (".tmp-*", never read) and
 * rename()d into place, so a reader sees the old object or the new one,
 * never half of one; ss_load() never sees half of a multi-object apply.
 *
 * Contract:
 * - ss_apply() parses and validates the inputs *together with the current
 *   state* (the result must pass md_state_finish) before it writes anything;
 *   on any error nothing is written and err names file, line and field.
 *   An applied object replaces the stored object of the same kind,
 *   namespace and name. A multi-document file becomes one file per object.
 * - ss_delete() removes the objects named in the inputs (only apiVersion,
 *   kind and metadata are read, like kubectl delete -f). Every one must
 *   exist (-ENOENT, err names it), and the remaining state must still be
 *   valid (-EINVAL, e.g. a TrafficSplit left pointing at a deleted Service).
 * - ss_load() builds a finished md_state from manifests/ and pods/; the
 *   caller frees it with md_state_free().
 * - ss_watch_fd() returns an inotify fd (non-blocking, owned by s) that
 *   becomes readable on any change; call ss_watch_drain() then ss_load()
 *   again (debounce is the caller's). Readers opening the state do not
 *   wake it.
 * - Results are 0 or -errno; ss_apply/ss_delete/ss_load fill err.
 */
#ifndef ZH_STATE_H
#define ZH_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "zerohop/model.h"

struct ss;

/* spec: a directory (its layout is created if missing) or an etcd:// URL
 * (nothing is contacted before the first operation). */
int ss_open(const char *spec, struct ss **out);
void ss_close(struct ss *s);
const char *ss_dir(const struct ss *s);	/* the spec as given */
bool ss_spec_is_etcd(const char *spec);
bool ss_is_etcd(const struct ss *s);

int ss_apply(struct ss *s, char *const *paths, int n_paths, struct md_err *err);
int ss_delete(struct ss *s, char *const *paths, int n_paths, struct md_err *err);

/* What an apply or delete did, object by object (kubectl's lines), and the
 * warnings about its inputs (fields accepted but not honoured, references
 * not resolved yet). Reported only when the whole operation succeeded. */
enum ss_event {
	SS_CREATED,
	SS_CONFIGURED,
	SS_UNCHANGED,
	SS_DELETED,
	SS_IGNORED,		/* a kind with no data-plane meaning: not stored */
	SS_WARNING,		/* what = "FILE:LINE: FIELD", detail = message */
};
/* what: "KIND[.GROUP]/NAME" in lower case as kubectl prints it
 * ("service/web", "gateway.gateway.networking.k8s.io/gw"); ns may be NULL;
 * detail: the reason of an SS_IGNORED, the message of an SS_WARNING. */
typedef void (*ss_report_fn)(void *arg, enum ss_event ev, const char *what, const char *ns,
			     const char *detail);

struct ss_opts {
	bool strict;		/* an ignored kind is an error (--strict) */
	const char *ns;		/* -n: namespace of objects without one; another
				 * namespace in an object is an error */
	ss_report_fn report;	/* may be NULL */
	void *arg;
};

int ss_apply_opts(struct ss *s, char *const *paths, int n_paths, const struct ss_opts *o,
		  struct md_err *err);
int ss_delete_opts(struct ss *s, char *const *paths, int n_paths, const struct ss_opts *o,
		   struct md_err *err);
int ss_load(struct ss *s, struct md_state **out, struct md_err *err);

/* Runtime pods (kubelet side). yaml must be exactly one Pod named ns/name
 * (else -EINVAL, the reason is logged); it is not validated against the
 * rest of the state, and spec.nodeName of a runtime pod is not checked.
 * ss_del_pod() returns 0 when the pod is already gone (the generation is
 * bumped only when a file was removed). */
int ss_put_pod(struct ss *s, const char *ns, const char *name, const char *yaml);
int ss_del_pod(struct ss *s, const char *ns, const char *name);

/* Incremental load, for a long-lived reader (the agent) that keeps the
 * state it loaded last. *io is that state (or NULL), *token what the last
 * ss_load_delta() call stored (0 at first). When the only changes since
 * then are runtime pods updated in place (same namespace, name and labels)
 * and Services updated in place (same name, ports and clusterIP; selector
 * or targetPort changed), one object per file (see md_state_patch_pods and
 * md_state_patch_svcs in src/model/md_int.h), *io is patched in place and
 * d->patched is set, d->svcs lists the indexes of the Services whose
 * endpoints were recomputed; otherwise *io is replaced by a fresh load (the
 * previous one freed). Either way *io then equals what ss_load() would
 * return. On error *io and *token are untouched, and the next call loads
 * in full (the token no longer matches the source's cache).
 * Free d with ss_delta_free(). 0/-errno with err. */
struct ss_delta {
	bool patched;		/* false: *io is a fresh full load */
	int n_pods;		/* pods patched in place */
	int n_svc_objs;		/* Services patched in place */
	int *svcs;		/* Services whose endpoints changed (patched only) */
	int n_svcs;
	bool pol_relevant;	/* full load, or a patched pod changed IP, node or ports */
};

int ss_load_delta(struct ss *s, struct md_state **io, uint64_t *token, struct ss_delta *d,
		  struct md_err *err);

static inline void ss_delta_free(struct ss_delta *d)
{
	free(d->svcs);
	d->svcs = NULL;
	d->n_svcs = 0;
}

/* Directory: the generation counter. etcd: the newer of the store revision
 * of the last load (ss_load/ss_load_delta) and of this handle's last write
 * (apply, delete, runtime pod); a write never hides a watch event. */
uint64_t ss_generation(struct ss *s);
/* Directory: inotify. etcd: the first call starts a watcher thread (list,
 * then watch from the next revision, resume, relist on compaction, fail
 * over between endpoints, backoff) and returns an eventfd that becomes
 * readable on every change and on every change of ss_health. */
int ss_watch_fd(struct ss *s);
void ss_watch_drain(struct ss *s);

/* The applied objects alone (no runtime pods), finished: what the lab's
 * supervisor reconciles pods against. 0/-errno with err. */
int ss_load_desired(struct ss *s, struct md_state **out, struct md_err *err);

/* 0 when the store is reachable (always for a directory); -ENOTCONN with
 * a one-line reason in buf while the watcher cannot reach any endpoint. */
int ss_health(struct ss *s, char *buf, size_t len);

/* etcd only: every stored object, in key order, with its text and mod
 * revision (metadata.resourceVersion); fn returns 0 to go on. */
typedef int (*ss_raw_fn)(void *arg, const char *key, const char *text, size_t len,
			 uint64_t mod_rev);
int ss_list_raw(struct ss *s, ss_raw_fn fn, void *arg, struct md_err *err);

#endif
