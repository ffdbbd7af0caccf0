/* state.h — the state source: where desired and runtime cluster state lives
 * (prefix ss_). The embedded default is a directory watched with inotify;
 * etcd or the Kubernetes API can later implement the same operations.
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

#include <stdint.h>

#include "zerohop/model.h"

struct ss;

int ss_open(const char *dir, struct ss **out);	/* creates the layout if missing */
void ss_close(struct ss *s);
const char *ss_dir(const struct ss *s);

int ss_apply(struct ss *s, char *const *paths, int n_paths, struct md_err *err);
int ss_delete(struct ss *s, char *const *paths, int n_paths, struct md_err *err);
int ss_load(struct ss *s, struct md_state **out, struct md_err *err);

/* Runtime pods (kubelet side). yaml must be exactly one Pod named ns/name
 * (else -EINVAL, the reason is logged); it is not validated against the
 * rest of the state, and spec.nodeName of a runtime pod is not checked.
 * ss_del_pod() returns 0 when the pod is already gone (the generation is
 * bumped only when a file was removed). */
int ss_put_pod(struct ss *s, const char *ns, const char *name, const char *yaml);
int ss_del_pod(struct ss *s, const char *ns, const char *name);

uint64_t ss_generation(struct ss *s);
int ss_watch_fd(struct ss *s);
void ss_watch_drain(struct ss *s);

#endif
