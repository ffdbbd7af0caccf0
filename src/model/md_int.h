/* md_int.h — internals shared by the files of src/model and src/state
 * (not a public contract: other components use model.h and state.h).
 *
 * Memory: everything a state points to (YAML tree, strings, per-object
 * arrays) lives in one arena owned by the state's private part; only the
 * top-level object arrays of struct md_state are realloc'd. Merging a staging
 * state into the real one splices arenas, so no string is ever copied twice.
 */
#ifndef ZH_MD_INT_H
#define ZH_MD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zerohop/model.h"
#include "zerohop/vec.h"	/* zh_grow: the model's growable arrays */

/* ---- arena ------------------------------------------------------------ */

struct ar_blk;

struct md_arena {
	struct ar_blk *head;	/* current block first; blocks freed together */
	size_t blk;		/* block size; 0 = the default 64 KiB (pooled). Set
				 * smaller for the many small arenas of cached files */
};

void *ar_alloc(struct md_arena *a, size_t n);	/* zeroed, pointer-aligned, never NULL */
char *ar_strndup(struct md_arena *a, const char *s, size_t n);
char *ar_strdup(struct md_arena *a, const char *s);
char *ar_printf(struct md_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ar_splice(struct md_arena *dst, struct md_arena *src);	/* src becomes empty */

/* Roll back every allocation made after a mark (failed parse). */
struct md_arena_mark {
	struct ar_blk *head;
	size_t used;
};
struct md_arena_mark ar_mark(const struct md_arena *a);
void ar_reset(struct md_arena *a, struct md_arena_mark m);
void ar_free(struct md_arena *a);

/* ---- string -> int index (open addressing; keys are not copied) -------- */

struct md_idx_ent {
	uint64_t hash;
	const char *key;	/* NULL = empty slot */
	int val;
};

struct md_idx {
	struct md_idx_ent *v;
	size_t cap, n;
};

uint64_t md_hash(const char *s, size_t n);
/* Insert key -> val unless present; returns the existing value or -1. */
int md_idx_put(struct md_idx *ix, const char *key, int val);
int md_idx_get(const struct md_idx *ix, const char *key);	/* -1 when absent */
void md_idx_set(struct md_idx *ix, const char *key, int val);	/* insert or overwrite */
void md_idx_free(struct md_idx *ix);

/* ---- YAML document tree (libyaml events -> nodes with line numbers) ---- */

enum yn_type { YN_SCALAR, YN_MAP, YN_SEQ };

struct yn;

struct yn_pair {
	const char *key;	/* keys are scalars: kept inline, no node */
	int key_line;
	uint8_t key_style;	/* yaml_scalar_style_t, for the emitter */
	struct yn *val;
};

struct yn {			/* 24 bytes: a large state has millions */
	uint8_t type;		/* enum yn_type */
	uint8_t style;		/* yaml_scalar_style_t of a scalar */
	int line;		/* 1-based */
	int n;			/* pairs (map) or items (seq) */
	union {
		const char *s;	/* scalar, NUL-terminated (NUL inside is refused) */
		struct yn_pair *pairs;
		struct yn **items;
	};
};

/* Called once per document as soon as it is complete; root is NULL for an
 * empty document. A non-zero return stops the parse and is returned (the
 * callback fills err). After the callback the parser no longer refers to
 * the document's nodes, so it may release them. */
typedef int (*yn_doc_fn)(void *ctx, const struct yn *root, int line);

/* Parse buf (multi-document YAML or JSON): scalar strings are allocated in
 * strs, nodes, pairs and item arrays in nodes (so trees can be dropped
 * after decoding while the strings stay). Returns 0, the callback's
 * result, or -EINVAL with err set (file = name). */
int yn_parse(struct md_arena *strs, struct md_arena *nodes, const char *name, const char *buf,
	     size_t len, yn_doc_fn fn, void *ctx, struct md_err *err);

/* Re-emit one node as a YAML document (block style, scalars keep their
 * quoting). *out is malloc'd; caller frees. Returns 0 or -EINVAL. */
int yn_emit(const struct yn *root, char **out, size_t *len);

/* json_tree.c: a document that is one JSON object, without libyaml (J1);
 * YN_JSON_NOT when the text is not one it handles (J2): nothing allocated,
 * fn not called, yn_parse's libyaml path takes it. */
#define YN_JSON_NOT 1
int yn_parse_json(struct md_arena *strs, struct md_arena *nodes, const char *buf, size_t len,
		  yn_doc_fn fn, void *ctx);
/* root (a mapping) as one line of JSON that yn_parse_json reads back to the
 * same decoded object, metadata.resourceVersion left out; -ENOTSUP when
 * JSON cannot say it (J3). *out malloc'd. */
int yn_emit_json(const struct yn *root, char **out, size_t *len);

bool yn_is_null(const struct yn *n);	/* NULL, ~, null, empty plain scalar */
const struct yn *yn_get(const struct yn *map, const char *key);	/* NULL if absent/null */

/* ---- objects as parsed (for the state source) ------------------------- */

struct md_obj {
	enum md_kind kind;
	const char *ns;		/* NULL for cluster-scoped kinds */
	const char *name;
	const char *file;
	int line;
	const struct yn *node;	/* the object's YAML tree; NULL unless keep_tree */
	bool has_status;	/* pods: runtime pod */
};

/* ---- private part of struct md_state ------------------------------------ */

struct md_priv {
	struct md_arena ar;
	struct md_obj *objs;	/* every parsed object, in input order */
	int n_objs, cap_objs;
	/* lookup indexes "ns/name" -> array index, built by md_state_finish */
	struct md_idx ix[MD_K__COUNT];
	bool indexed;
	/* decode only apiVersion, kind and metadata (what ss_delete needs);
	 * objects are recorded in objs but not in the typed arrays */
	bool ident_only;
	/* keep each object's YAML tree (md_obj.node) for re-emitting it; off
	 * by default: the tree is most of the memory of a parsed state */
	bool keep_tree;
	/* input options (md_state_set_strict / md_state_set_namespace) */
	bool strict;
	const char *default_ns;
	/* capacities of the realloc'd top-level arrays */
	int cap_ns, cap_cm, cap_pod, cap_dep, cap_svc, cap_split, cap_route, cap_np;
	int cap_sa, cap_rg, cap_ign, cap_warn, cap_pa, cap_az;
	/* parsed files this state shares objects with (md_state_add_parsed):
	 * one reference each, dropped by md_state_free */
	struct md_file **files;
	int n_files, cap_files;
	/* endpoint index, kept after md_state_finish() for
	 * md_state_patch_pods(): "ns/key=value" of every label of every pod
	 * (ready or not) -> head of a chain of pod indexes in ep_le */
	struct md_idx ep_ix;
	struct md_lent *ep_le;
	int n_ep_le;
};

struct md_lent {
	int pod;		/* index into st->pods */
	int next;		/* next entry of the chain, -1 = end */
};

/* ---- parsed files, shareable between states (the state source's cache) --
 *
 * (Contract: model.h, "For state sources".) A struct md_file holds the decoded, *unfinished* objects of one file in
 * a staging state of its own. md_state_add_parsed() appends shallow copies
 * of its top-level objects to a state, so strings and sub-arrays are shared
 * with the file's arena; the few sub-arrays md_state_finish() writes into
 * (explicit namespaces' labels, split backends, route parents and rules with
 * their backendRefs) are copied into the state's own arena first, so no two
 * states ever write to the same memory. The result is exactly what
 * md_state_add_file() of the same files in the same order would give.
 * Reference counted: the cache holds one reference, every state built from
 * it one more, so evicting a changed file never frees memory a live state
 * points into. Single-threaded (plain counter), like the rest of the model. */
struct md_file {
	int refs;
	char *path;		/* as given to md_file_load */
	struct md_state *st;	/* the file's objects, as md_state_add_buf made them */
};

static inline struct md_priv *md_priv(const struct md_state *st)
{
	return (struct md_priv *)st->priv;
}

/* Decode one top-level document into st (arrays appended, strings in the
 * arena). Returns 0 or -EINVAL with err set. */
int md_decode_doc(struct md_state *st, const char *file, const struct yn *root,
		  struct md_err *err);

/* ---- decoding context (path of the field being decoded) ---------------- */

struct dctx {
	struct md_state *st;
	struct md_arena *ar;
	const char *file;
	struct md_err *err;
	char path[160];
	size_t plen;
};

/* Append ".name" or "[i]" to the path; returns the previous length for pop. */
size_t dc_push(struct dctx *c, const char *name);
size_t dc_push_idx(struct dctx *c, int i);
void dc_pop(struct dctx *c, size_t len);
/* Fill the error for node n (line) at path + "." + field (field may be NULL). */
int dc_fail(struct dctx *c, const struct yn *n, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Append a warning for node n at path + "." + field (the object decodes on). */
void dc_warn(struct dctx *c, const struct yn *n, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int dc_map(struct dctx *c, const struct yn *n, const char *field);	/* 0 if a mapping */
int dc_seq(struct dctx *c, const struct yn *n, const char *field);
/* Decodes one item of a sequence into elem (zeroed arena memory). */
typedef int (*dc_item_fn)(struct dctx *c, const struct yn *item, void *elem, void *arg);
/* The optional sequence map[field]: an arena array of its items, each
 * decoded by fn with the error path FIELD[i]. Absent: 0, outputs untouched. */
int dc_seq_each(struct dctx *c, const struct yn *map, const char *field, size_t size,
		void **out, int *n_out, dc_item_fn fn, void *arg);
/* Scalar string; required -> error when absent. *out NULL when absent. */
int dc_str(struct dctx *c, const struct yn *map, const char *field, bool required, char **out);
/* Integer in [min, max]; *present tells whether given (may be NULL). */
int dc_int(struct dctx *c, const struct yn *map, const char *field, long long min,
	   long long max, long long *out, bool *present);
int dc_str_list(struct dctx *c, const struct yn *map, const char *field, char ***out, int *n);
int dc_labels(struct dctx *c, const struct yn *map, const char *field, bool validate,
	      struct md_labels *out);
int dc_selector(struct dctx *c, const struct yn *map, const char *field, struct md_selector *out);
int dc_port_ref(struct dctx *c, const struct yn *map, const char *field, struct md_port_ref *out);
int dc_proto(struct dctx *c, const struct yn *map, const char *field, bool allow_sctp,
	     enum md_proto *out, bool *present);

/* Unknown fields of the kinds zerohop models entirely (HTTPRoute, GRPCRoute,
 * TrafficSplit, HTTPRouteGroup, NetworkPolicy, Cluster, PeerAuthentication,
 * AuthorizationPolicy) are errors
 * (schema.c); other kinds: 0. */
int md_check_fields(struct dctx *c, const struct yn *root, enum md_kind k);

/* mesh kinds (decode_mesh.c) */
int md_decode_split(struct dctx *c, const struct yn *root, const char *api, struct md_meta *meta);
int md_decode_route(struct dctx *c, const struct yn *root, struct md_meta *meta);
int md_decode_grpcroute(struct dctx *c, const struct yn *root, struct md_meta *meta);
/* HTTPRoute pieces GRPCRoute shares (decode_mesh.c; dc_seq_each callbacks:
 * elem is the item to fill, arg the route's md_meta, NULL for hdr_match) */
int md_route_parent_ref(struct dctx *c, const struct yn *p, void *elem, void *arg);
int md_route_backend_ref(struct dctx *c, const struct yn *n, void *elem, void *arg);
int md_route_hdr_match(struct dctx *c, const struct yn *h, void *elem, void *arg);
/* A filter of type RequestHeaderModifier or ResponseHeaderModifier into f:
 * 0 or -EINVAL; 1 when type is neither (f untouched). */
int md_route_hdr_filter(struct dctx *c, const struct yn *n, const char *type, struct md_filter *f);
/* A RequestMirror filter's requestMirror (f->type set by the caller; arg:
 * the route's struct md_meta, for the default namespace). 0 or -EINVAL. */
int md_route_mirror_filter(struct dctx *c, const struct yn *n, struct md_filter *f, void *arg);
/* spec {parentRefs, hostnames, rules} of a route into a new st->routes
 * entry (grpc: a GRPCRoute), each rule decoded by rule (arg: the meta),
 * then the warnings (no Service parent, hostnames ignored). */
int md_route_decode(struct dctx *c, const struct yn *root, struct md_meta *meta, bool grpc,
		    dc_item_fn rule);
int md_decode_netpol(struct dctx *c, const struct yn *root, struct md_meta *meta);
int md_decode_routegroup(struct dctx *c, const struct yn *root, struct md_meta *meta);
/* security.istio.io kinds (decode_sec.c) */
int md_decode_peerauth(struct dctx *c, const struct yn *root, struct md_meta *meta);
int md_decode_authzpol(struct dctx *c, const struct yn *root, struct md_meta *meta);

/* ---- value checks (values.c) --------------------------------------------- */

/* NULL when valid, else the reason. */
const char *md_check_label_key(const char *s);
const char *md_check_label_value(const char *s);
const char *md_check_port_name(const char *s);		/* IANA_SVC_NAME */
/* Like md_parse_cidr but accepts host bits; *canonical tells whether none set. */
int md_parse_cidr_loose(const char *s, uint32_t *net, int *len, bool *canonical);
uint32_t md_mask(int len);	/* host order */

/* ---- address families (families.c) --------------------------------------- */

/* Service spec.ipFamilyPolicy / ipFamilies / clusterIPs (and clusterIP,
 * whose string *ip is: kept as given, or set from clusterIPs[0]): the
 * checks that need no cluster (kube-apiserver's
 * ValidateServiceClusterIPsRelatedFields); fills s's family fields,
 * cluster_ip(6), ip(6)_given and headless. */
int md_decode_svc_families(struct dctx *c, const struct yn *spec, struct md_service *s);
/* Pod status.podIP / status.podIPs[].ip (one per family, podIPs[0] ==
 * podIP) into p->ip / p->ip6; the path is at "status". */
int md_decode_pod_ips(struct dctx *c, const struct yn *status, struct md_pod *p);
/* Cluster spec.podCIDR(s) / serviceCIDR(s) into cl (defaults already set). */
int md_decode_cluster_cidrs(struct dctx *c, const struct yn *spec, struct md_cluster *cl);
/* finish: default each Service's policy and families against the cluster,
 * then allocate the ClusterIPs of each family (all or nothing). */
int md_finish_families(struct md_state *st, struct md_err *err);

/* Append a warning (strings copied into st's arena). */
void md_warn(struct md_state *st, const char *file, int line, const char *field,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
