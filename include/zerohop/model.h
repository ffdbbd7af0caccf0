/* model.h — the typed object set (struct md_state, src/model/objset.c)
 * parsed from Kubernetes manifests (prefix md_).
 *
 * The model knows nothing about BPF, the lab or I/O beyond reading YAML files.
 * A struct md_state is built by feeding it files (multi-document YAML, parsed
 * with libyaml) and is then read-only; the compiler (agent) and the lab read
 * its arrays directly.
 *
 * Contract:
 * - md_state_add_file()/md_state_add_buf() parse into a *staging* area and
 *   only merge it into the state when the whole input is valid, so a failed
 *   call leaves the state exactly as it was (all or nothing).
 *   md_state_finish() then checks duplicate names, resolves cross-object
 *   references (a missing one is no error: the split or route is marked
 *   not_ready and a warning added, as Kubernetes resolves eventually),
 *   allocates ClusterIPs and computes endpoints; it is also all-or-nothing:
 *   on error the state must be freed.
 * - Every error fills struct md_err with file, line and field and returns
 *   -EINVAL (or -ENOMEM/-errno for I/O). md_err_str() formats it as
 *   "FILE:LINE: FIELD: MESSAGE".
 * - Unknown fields are ignored, except in the spec of HTTPRoute, GRPCRoute,
 *   TrafficSplit, HTTPRouteGroup, NetworkPolicy and Cluster (errors, as
 *   kubectl's strict validation); wrong types and invalid values are errors,
 *   and so are fields the data plane could not honour as written. Kinds
 *   with no data-plane meaning are skipped into st->ignored (an error with
 *   md_state_set_strict); unknown kinds of Kubernetes' own API groups are
 *   errors. Fields accepted but not honoured add st->warnings.
 *   "apiVersion: v1, kind: List" with items is accepted.
 * - docs/model.md lists the kinds, fields, defaults and checks.
 * - All strings and arrays are owned by the state and freed by md_state_free().
 *
 * Pods: a Pod object may come from a manifest (desired state) or from the
 * lab's kubelet (runtime state: status.podIP, status.phase, spec.nodeName
 * set). A Pod with status replaces a same-named Pod without status; two Pods
 * of the same name that both carry status, or both lack it, are a duplicate
 * error. Endpoints are computed only from pods with an IP and phase Running.
 */
#ifndef ZH_MODEL_H
#define ZH_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <netinet/in.h>

#define MD_DEFAULT_NS "default"

/* ---- errors ---------------------------------------------------------- */

struct md_err {
	char file[256];		/* file name as given, or "<buffer>" */
	int line;		/* 1-based line of the offending node, 0 if none */
	char field[160];	/* path such as "spec.ports[1].port" */
	char msg[256];		/* what is wrong */
};

/* Format err as "FILE:LINE: FIELD: MESSAGE" into buf; returns buf. */
const char *md_err_str(const struct md_err *err, char *buf, size_t len);
/* Fill err for an I/O failure errno e on path ("WHAT: strerror(e)", no line
 * or field); returns -e. */
int md_err_io(struct md_err *err, const char *path, int e, const char *what);

/* ---- common pieces ---------------------------------------------------- */

struct md_kv {
	char *key;
	char *value;
};

struct md_labels {		/* ordered as in the manifest; keys unique */
	struct md_kv *v;
	int n;
};

/* Returns the value for key, or NULL. */
const char *md_labels_get(const struct md_labels *l, const char *key);

enum md_sel_op { MD_SEL_IN, MD_SEL_NOT_IN, MD_SEL_EXISTS, MD_SEL_DOES_NOT_EXIST };

struct md_sel_expr {
	char *key;
	enum md_sel_op op;
	char **values;		/* In/NotIn: non-empty; Exists/DoesNotExist: empty */
	int n_values;
};

/* A Kubernetes LabelSelector. present=false means the field was absent
 * (callers decide what absent means); an empty present selector matches
 * everything. */
struct md_selector {
	bool present;
	struct md_labels match_labels;
	struct md_sel_expr *exprs;
	int n_exprs;
};

bool md_selector_matches(const struct md_selector *sel, const struct md_labels *labels);

enum md_proto { MD_PROTO_TCP = 0, MD_PROTO_UDP = 1, MD_PROTO_SCTP = 2 };
const char *md_proto_name(enum md_proto p);

struct md_meta {
	char *name;
	char *ns;		/* MD_DEFAULT_NS when absent (cluster-scoped: NULL) */
	struct md_labels labels;
	struct md_labels annotations;
	char *file;		/* where the object was defined */
	int line;
};

/* IntOrString, as Kubernetes uses for targetPort and NetworkPolicy ports. */
struct md_port_ref {
	bool present;
	uint16_t num;		/* when name == NULL */
	char *name;		/* named port, or NULL */
};

/* ---- address families (dual-stack: docs/ipv6.md) ----------------------- */

enum md_family { MD_FAM_NONE = 0, MD_FAM_V4 = 4, MD_FAM_V6 = 6 };
const char *md_family_name(enum md_family f);	/* "IPv4", "IPv6" */

/* Service spec.ipFamilyPolicy; UNSET only before md_state_finish. */
enum md_fam_policy { MD_FP_UNSET = 0, MD_FP_SINGLE, MD_FP_PREFER_DUAL, MD_FP_REQUIRE_DUAL };
const char *md_fam_policy_name(enum md_fam_policy p);	/* "SingleStack" ... */

/* ---- cluster (lab topology) ------------------------------------------- */

struct md_node {
	char *name;
};

/* apiVersion zerohop.io/v1alpha1, kind Cluster. At most one per state;
 * when absent, defaults apply (two nodes "node-a", "node-b"). */
struct md_cluster {
	bool present;
	char *name;		/* metadata.name, default "zerohop" */
	struct md_node *nodes;
	int n_nodes;
	uint32_t pod_cidr;	/* network byte order; default 10.244.0.0/16 */
	int pod_cidr_len;
	uint32_t svc_cidr;	/* default 10.96.0.0/12 */
	int svc_cidr_len;	/* 0 = no IPv4 (IPv6-only cluster): pod_cidr unset too */
	/* IPv6 (spec.podCIDRs / spec.serviceCIDRs): len 0 = no IPv6. Pods and
	 * Services always have the same families (docs/ipv6.md). */
	struct in6_addr pod_cidr6;
	int pod_cidr6_len;
	struct in6_addr svc_cidr6;
	int svc_cidr6_len;
	/* family of serviceCIDRs[0]: what a SingleStack Service without
	 * ipFamilies gets (kube-apiserver's --service-cluster-ip-range[0]) */
	enum md_family primary;
	char *file;
	int line;
};

/* ---- namespaces, configmaps ------------------------------------------- */

struct md_namespace {
	struct md_meta meta;	/* labels include kubernetes.io/metadata.name */
};

struct md_configmap {
	struct md_meta meta;
	struct md_labels data;	/* key -> file content */
};

/* ---- pods and deployments --------------------------------------------- */

struct md_container_port {
	char *name;		/* may be NULL */
	uint16_t port;
	enum md_proto proto;
};

struct md_volume_mount {
	char *name;
	char *mount_path;
	char *sub_path;		/* may be NULL */
};

struct md_container {
	char *name;
	char *image;		/* may be NULL */
	char **command;		/* NULL-terminated argv pieces; may be empty */
	int n_command;
	char **args;
	int n_args;
	struct md_container_port *ports;
	int n_ports;
	struct md_volume_mount *mounts;
	int n_mounts;
};

struct md_volume {		/* only configMap volumes are modelled */
	char *name;
	char *configmap;	/* configMap.name, or NULL for other volume kinds */
};

struct md_pod_spec {
	char *node_name;	/* spec.nodeName, or NULL */
	char *service_account;	/* spec.serviceAccountName (or the older
				 * serviceAccount), or NULL: "default" */
	struct md_container *containers;
	int n_containers;
	struct md_volume *volumes;
	int n_volumes;
};

enum md_phase { MD_PHASE_NONE = 0, MD_PHASE_PENDING, MD_PHASE_RUNNING,
		MD_PHASE_SUCCEEDED, MD_PHASE_FAILED };

struct md_pod {
	struct md_meta meta;
	struct md_pod_spec spec;
	bool has_status;	/* status block present (runtime pod) */
	uint32_t ip;		/* the IPv4 of status.podIP(s), network order, 0 if none */
	struct in6_addr ip6;	/* the IPv6 of status.podIP(s), all zero if none
				 * (docs/ipv6.md; not an endpoint address yet) */
	enum md_phase phase;	/* status.phase */
	/* metadata.deletionTimestamp set: the pod is leaving (as in Kubernetes,
	 * where a terminating pod keeps its phase). Never an endpoint; still a
	 * pod for NetworkPolicy while its processes run. */
	bool terminating;
	char *owner;		/* metadata.ownerReferences[0].name (Deployment), or NULL */
};

struct md_deployment {
	struct md_meta meta;
	int replicas;		/* default 1 */
	struct md_selector selector;	/* required, must match template labels */
	struct md_labels template_labels;
	struct md_labels template_annotations;
	struct md_pod_spec template;
};

/* Resolve a named or numeric port against a pod's containers.
 * Returns the port number, or 0 when the pod has no such named port for proto. */
uint16_t md_pod_resolve_port(const struct md_pod *pod, const struct md_port_ref *ref,
			     enum md_proto proto);

/* ServiceAccount (v1): kept for workload identity (mTLS, later); only
 * metadata is read. */
struct md_serviceaccount {
	struct md_meta meta;
};

/* ---- services and endpoints -------------------------------------------- */

struct md_service_port {
	char *name;		/* may be NULL when the service has one port */
	uint16_t port;
	struct md_port_ref target;	/* defaults to port */
	enum md_proto proto;	/* TCP or UDP */
	char *app_protocol;	/* appProtocol, or NULL */
};

struct md_endpoint {
	const struct md_pod *pod;	/* points into state->pods */
	uint32_t ip;		/* network order */
	uint16_t port;		/* resolved targetPort, host order */
};

struct md_endpoint_set {	/* one per service port, same index as ports */
	struct md_endpoint *v;
	int n;
};

struct md_service {
	struct md_meta meta;
	/* The IPv4 ClusterIP, network order; given or allocated. 0 when
	 * headless or when the Service has no IPv4 family (IPv6 single-stack):
	 * consumers that only do IPv4 skip such a Service. */
	uint32_t cluster_ip;
	bool ip_given;
	bool headless;		/* clusterIP: None */
	/* Dual-stack (docs/ipv6.md). Before md_state_finish these hold what
	 * the manifest gave; md_state_finish defaults them exactly as
	 * kube-apiserver does (policy, families) and allocates one ClusterIP
	 * per family. */
	struct in6_addr cluster_ip6;	/* IPv6 ClusterIP; all zero = none */
	bool ip6_given;
	enum md_fam_policy fam_policy;	/* ipFamilyPolicy */
	enum md_family families[2];	/* ipFamilies, [0] the primary family */
	int n_families;
	enum md_family given_ip_fams[2];	/* families of spec.clusterIPs in order
						 * (none for headless) */
	int n_given_ips;
	struct md_service_port *ports;
	int n_ports;
	struct md_selector selector;	/* absent = no endpoints computed */
	struct md_endpoint_set *endpoints;	/* n_ports sets, filled by md_state_finish */
};

/* ---- SMI TrafficSplit ------------------------------------------------- */

struct md_split_backend {
	char *service;		/* service name in the split's namespace */
	uint64_t weight_milli;	/* weight in thousandths: "1" -> 1000, "500m" -> 500 */
	const struct md_service *svc;	/* resolved by md_state_finish */
	int line;		/* line of this backend entry in meta.file */
};

/* spec.matches[] of a v1alpha3/v1alpha4 split: an HTTPRouteGroup of the
 * split's namespace (resolved by name at routing time: md_find_routegroup). */
struct md_split_match {
	char *kind;		/* "HTTPRouteGroup" (the only kind accepted) */
	char *name;
	int line;
};

struct md_trafficsplit {
	struct md_meta meta;
	char *api_version;	/* split.smi-spec.io/v1alpha1 .. v1alpha4 */
	char *root;		/* spec.service */
	const struct md_service *root_svc;	/* resolved; NULL = not ready */
	int root_line;		/* line of spec.service */
	struct md_split_backend *backends;	/* svc NULL = that Service does not exist (yet) */
	int n_backends;
	struct md_split_match *matches;	/* none = every request is split */
	int n_matches;
	/* Eventual references (as in Kubernetes): set by md_state_finish when
	 * the root Service, a backend Service or a matches group is missing;
	 * "" when ready. A missing backend's share is not served; a missing
	 * root leaves the split without effect. */
	const char *not_ready;
};

/* SMI HTTPRouteGroup (specs.smi-spec.io/v1alpha3, v1alpha4): what a
 * TrafficSplit's matches select. A request matches a group when it matches
 * any of its matches; a match needs every given condition. */
struct md_rg_match {
	char *name;
	char *path_regex;	/* anchored at the start of the path; NULL = any */
	char **methods;		/* none or "*" = any */
	int n_methods;
	struct md_labels headers;	/* header name -> regex (searched in the value) */
};

struct md_routegroup {
	struct md_meta meta;
	struct md_rg_match *matches;
	int n_matches;
};

/* Parse a Kubernetes quantity ("1", "500m", "2k", "1.5", "1Ki") into
 * thousandths. Returns 0 or -EINVAL (negative, malformed, overflow). */
int md_quantity_milli(const char *s, uint64_t *out);

/* ---- Gateway API HTTPRoute --------------------------------------------- */

enum md_path_type { MD_PATH_NONE = 0, MD_PATH_EXACT, MD_PATH_PREFIX, MD_PATH_REGEX };
enum md_str_match { MD_MATCH_EXACT = 0, MD_MATCH_REGEX };

struct md_header_match {	/* also used for queryParams */
	enum md_str_match type;
	char *name;
	char *value;
};

struct md_route_match {
	enum md_path_type path_type;	/* default PathPrefix "/" when path omitted */
	char *path;
	struct md_header_match *headers;
	int n_headers;
	struct md_header_match *query;
	int n_query;
	char *method;		/* or NULL */
	/* GRPCRoute matches (method.service / method.method turned into the
	 * path above, see md_decode_grpcroute): lengths of the given service
	 * and method (0 = any), the precedence keys of Gateway API's GRPCRoute */
	bool grpc;
	bool grpc_regex;	/* method.type RegularExpression */
	int grpc_svc_len;
	int grpc_method_len;
};

enum md_filter_type {
	MD_FILTER_REQUEST_HEADER_MODIFIER,
	MD_FILTER_RESPONSE_HEADER_MODIFIER,
	MD_FILTER_REQUEST_REDIRECT,
	MD_FILTER_URL_REWRITE,
	MD_FILTER_REQUEST_MIRROR,
	MD_FILTER_EXTENSION_REF,
};

struct md_header_mod {
	struct md_labels set;	/* name -> value */
	struct md_labels add;
	char **remove;
	int n_remove;
};

enum md_path_mod_type { MD_PATHMOD_NONE = 0, MD_PATHMOD_FULL, MD_PATHMOD_PREFIX };

struct md_filter {
	enum md_filter_type type;
	struct md_header_mod headers;	/* header modifiers */
	/* RequestRedirect / URLRewrite */
	char *scheme;		/* redirect only */
	char *hostname;
	enum md_path_mod_type path_type;
	char *path;		/* replaceFullPath or replacePrefixMatch */
	uint16_t port;		/* redirect only, 0 = unset */
	int status_code;	/* redirect: 301, 302 (default), 303, 307, 308 */
	/* RequestMirror: backendRef {name, namespace, port}; resolved by the
	 * router (md_find_service), a missing Service mirrors nothing.
	 * mirror_permille = percent x 10 or fraction, default 1000 (all). */
	char *mirror_name;
	char *mirror_ns;
	uint16_t mirror_port;
	uint32_t mirror_permille;
};

struct md_backend_ref {
	char *name;		/* Service name */
	char *ns;		/* defaults to the route's namespace */
	uint16_t port;		/* 0 = unset */
	uint32_t weight;	/* default 1; 0 = receives nothing */
	const struct md_service *svc;	/* resolved, NULL when missing */
	struct md_filter *filters;
	int n_filters;
	char *kind;		/* "Service" (default) */
	int line;
};

struct md_route_rule {
	struct md_route_match *matches;	/* none = one match PathPrefix "/" */
	int n_matches;
	struct md_filter *filters;
	int n_filters;
	struct md_backend_ref *backends;
	int n_backends;
	uint64_t timeout_request_ms;	/* timeouts.request, 0 = unset */
	uint64_t timeout_backend_ms;	/* timeouts.backendRequest, 0 = unset */
	/* Gateway API rules[].retry (GEP-1731): present replaces the
	 * annotation/default policy of this rule. attempts = extra tries
	 * (default 1 when retry is given, as Envoy's), codes = statuses to
	 * retry (none given: 500, 502, 503, 504), backoff_ms 0 = the default. */
	bool has_retry;
	int retry_attempts;
	int *retry_codes;
	int n_retry_codes;
	uint64_t retry_backoff_ms;
};

struct md_parent_ref {
	char *group;		/* "" (core) for a Service parent */
	char *kind;		/* "Service" for the mesh pattern, "Gateway" otherwise */
	char *name;
	char *ns;
	uint16_t port;		/* 0 = unset */
	const struct md_service *svc;	/* kind Service: resolved by md_state_finish */
	int line;
};

struct md_httproute {
	struct md_meta meta;
	struct md_parent_ref *parents;
	int n_parents;
	char **hostnames;
	int n_hostnames;
	struct md_route_rule *rules;
	int n_rules;
	const char *not_ready;	/* "" or why a Service parent is not resolved
				 * (yet): the route has no effect there */
	bool grpc;		/* a GRPCRoute (same shape: its method matches are
				 * paths /SERVICE/METHOD, docs/model.md) */
};

/* A route whose parentRef is a Service of another namespace is a GAMMA
 * consumer route: it applies only to clients of the route's namespace. */
bool md_parent_is_consumer(const struct md_httproute *r, const struct md_parent_ref *p);

/* True when the route needs the L7 proxy: any rule has a non-default match,
 * any filter (rule or backendRef) or a timeout (timeouts are per request).
 * Pure backendRefs weights are enforceable at L4, except for a GRPCRoute:
 * always L7 (gRPC calls share long-lived connections: weights per
 * connection would pin, the problem per-call balancing solves). */
bool md_route_needs_l7(const struct md_httproute *r);

/* Parse a Gateway API duration ("500ms", "10s", "1h2m") into milliseconds. */
int md_duration_ms(const char *s, uint64_t *out);

/* ---- NetworkPolicy (networking.k8s.io/v1) ------------------------------ */

struct md_ipblock {
	uint32_t cidr;		/* network order (IPv4 block) */
	int len;
	uint32_t *except;	/* network order, each inside cidr (IPv4 block) */
	int *except_len;
	int n_except;
	bool v6;		/* an IPv6 block: cidr6/except6 hold the prefixes
				 * (cidr/except unused); excepts share its family */
	struct in6_addr cidr6;
	struct in6_addr *except6;
};

struct md_np_peer {
	struct md_selector pod_sel;	/* present = podSelector given */
	struct md_selector ns_sel;	/* present = namespaceSelector given */
	bool has_ipblock;
	struct md_ipblock ipblock;
};

struct md_np_port {
	bool has_proto;
	enum md_proto proto;	/* default TCP */
	struct md_port_ref port;	/* absent = all ports */
	uint16_t end_port;	/* 0 = no range */
};

struct md_np_rule {
	struct md_np_peer *peers;	/* from (ingress) / to (egress); none = all */
	int n_peers;
	bool peers_present;	/* field given (even empty list) */
	struct md_np_port *ports;	/* none = all ports */
	int n_ports;
};

struct md_netpol {
	struct md_meta meta;
	struct md_selector pod_sel;
	bool type_ingress;	/* effective policyTypes after defaults */
	bool type_egress;
	bool types_given;	/* spec.policyTypes was present */
	struct md_np_rule *ingress;
	int n_ingress;
	struct md_np_rule *egress;
	int n_egress;
};

/* ---- mTLS mode and authorization on identities (security.istio.io) ------
 *
 * Istio's security.istio.io/v1 (and v1beta1) PeerAuthentication and
 * AuthorizationPolicy, the subset a node-level L4 tunnel can honour
 * (docs/mtls.md; decoded in decode_sec.c, evaluated in security.c). A
 * policy without selector covers its namespace; in MD_MESH_ROOT_NS (Istio's
 * root namespace) it covers the whole mesh. Principals are SPIFFE IDs
 * without the scheme, "TD/ns/NS/sa/SA", as Istio writes them. */
#define MD_MESH_ROOT_NS "istio-system"

struct md_state;

enum md_mtls_mode {
	MD_MTLS_UNSET = 0,	/* inherit from the namespace, then the mesh */
	MD_MTLS_PERMISSIVE,	/* the default: mTLS and plain text accepted */
	MD_MTLS_STRICT,		/* mTLS only */
	MD_MTLS_DISABLE,	/* plain text only */
};
const char *md_mtls_mode_name(enum md_mtls_mode m);	/* "STRICT" */

struct md_port_mtls {
	uint16_t port;		/* the workload's (container) port */
	enum md_mtls_mode mode;
};

struct md_peerauth {
	struct md_meta meta;
	struct md_selector selector;	/* matchLabels only; absent = the namespace */
	enum md_mtls_mode mode;		/* spec.mtls.mode */
	struct md_port_mtls *ports;	/* spec.portLevelMtls (needs a selector) */
	int n_ports;
};

enum md_authz_action { MD_AUTHZ_ALLOW = 0, MD_AUTHZ_DENY };

/* One from[].source: matches when every given field matches (each list:
 * any of its values; exact, "prefix*" or "*suffix" as Istio). */
struct md_authz_source {
	char **principals, **not_principals, **namespaces, **not_namespaces;
	int n_principals, n_not_principals, n_namespaces, n_not_namespaces;
};

/* One to[].operation: only ports at L4 (HTTP fields are refused). */
struct md_authz_op {
	uint16_t *ports, *not_ports;
	int n_ports, n_not_ports;
};

/* A rule matches when any from matches (none: any source) and any to
 * matches (none: any port). */
struct md_authz_rule {
	struct md_authz_source *from;
	int n_from;
	struct md_authz_op *to;
	int n_to;
};

struct md_authzpol {
	struct md_meta meta;
	struct md_selector selector;	/* matchLabels only; absent = the namespace */
	enum md_authz_action action;	/* default ALLOW */
	struct md_authz_rule *rules;	/* none: ALLOW matches nothing (denies
					 * all), DENY matches nothing */
	int n_rules;
};

/* The mTLS mode in force for connections to pod p on port (its container
 * port): portLevelMtls of the workload policy, its mode, the namespace's,
 * the mesh's, else PERMISSIVE (Istio's order; never UNSET). When several
 * policies select one workload (or several namespace-wide ones), the first
 * in state order wins, as Istio takes the oldest. */
enum md_mtls_mode md_mtls_mode_of(const struct md_state *st, const struct md_pod *p,
				  uint16_t port);

/* Where pod p is STRICT, as the datapath keys it (lb_mtls, the policy
 * rules): when some port of p is STRICT, calls fn(arg, 0, strict) for the
 * pod's own mode (md_mtls_mode_of at a port no portLevelMtls names), then
 * fn(arg, port, strict) for each portLevelMtls port whose mode differs
 * from it (duplicates possible); returns true. Else calls nothing and
 * returns false. */
bool md_mtls_strict_ports(const struct md_state *st, const struct md_pod *p,
			  void (*fn)(void *arg, uint16_t port, bool strict), void *arg);

/* AuthorizationPolicy for a connection to pod dst on port from a peer:
 * principal "TD/ns/NS/sa/SA" or NULL for plain text (then no source field
 * matches, as in Istio). NULL: allowed; else the reason (a constant,
 * compare by pointer: MD_AUTHZ_DENIED_BY_DENY or MD_AUTHZ_NOT_ALLOWED),
 * with *policy the deciding policy (the DENY that matched, or one of the
 * ALLOW policies none of which matched). DENY first, then ALLOW: when any
 * ALLOW policy selects dst, one must match. */
extern const char MD_AUTHZ_DENIED_BY_DENY[];	/* "denied by a DENY policy" */
extern const char MD_AUTHZ_NOT_ALLOWED[];	/* "no ALLOW policy matches" */
const char *md_authz_check(const struct md_state *st, const struct md_pod *dst, uint16_t port,
			   const char *principal, const struct md_authzpol **policy);

/* ---- what an apply does not act on ------------------------------------ */

/* An object of a kind with no data-plane meaning for zerohop (Secret, RBAC,
 * Gateway, other meshes' resources...): skipped, never stored, reported. */
struct md_ignored {
	char *kind;
	char *group;		/* "" for the core group */
	char *ns;		/* may be NULL */
	char *name;
	char *file;
	int line;
	const char *reason;
};

/* A field accepted but not honoured (safe to ignore), or a reference not
 * resolved yet: one line each, printed by the CLIs as warnings. */
struct md_warning {
	char *file;
	int line;
	char *field;
	char *msg;
};

/* ---- the state ---------------------------------------------------------- */

struct md_state {
	struct md_cluster cluster;
	struct md_namespace *namespaces;	/* explicit + implied by objects */
	int n_namespaces;
	struct md_configmap *configmaps;
	int n_configmaps;
	struct md_pod *pods;
	int n_pods;
	struct md_deployment *deployments;
	int n_deployments;
	struct md_service *services;
	int n_services;
	struct md_trafficsplit *splits;
	int n_splits;
	struct md_httproute *routes;	/* HTTPRoutes and GRPCRoutes (grpc set) */
	int n_routes;
	struct md_netpol *netpols;
	int n_netpols;
	struct md_serviceaccount *serviceaccounts;
	int n_serviceaccounts;
	struct md_routegroup *routegroups;
	int n_routegroups;
	struct md_peerauth *peerauths;		/* security.istio.io PeerAuthentication */
	int n_peerauths;
	struct md_authzpol *authzpols;		/* security.istio.io AuthorizationPolicy */
	int n_authzpols;
	struct md_ignored *ignored;	/* in input order */
	int n_ignored;
	struct md_warning *warnings;	/* parse warnings, then finish's */
	int n_warnings;
	bool finished;		/* md_state_finish succeeded */
	void *priv;		/* parser staging / arena, owned */
};

struct md_state *md_state_new(void);
void md_state_free(struct md_state *st);

/* Whether a directory entry is a manifest: ends in .yaml, .yml or .json and
 * does not start with '.' (temporary files). md_state_add_dir and the
 * directory state source (state.h) read exactly these. */
bool md_manifest_name(const char *name);

/* Input options, set before adding input (copied into every staging state):
 * strict: an object of an ignored kind is an error (--strict);
 * ns: the namespace of objects without one (-n); an object naming another
 * namespace is an error. NULL = "default" and no conflict check. The
 * string must outlive the adds. */
void md_state_set_strict(struct md_state *st, bool strict);
void md_state_set_namespace(struct md_state *st, const char *ns);

/* Parse one file / buffer (multi-document YAML). All or nothing. */
int md_state_add_file(struct md_state *st, const char *path, struct md_err *err);
int md_state_add_buf(struct md_state *st, const char *name, const char *buf, size_t len,
		     struct md_err *err);
/* Every *.yaml / *.yml / *.json file of dir, in name order, non-recursive,
 * skipping names that start with '.'; the whole directory is one
 * all-or-nothing unit. */
int md_state_add_dir(struct md_state *st, const char *dir, struct md_err *err);

/* Cross-object validation, ClusterIP allocation, endpoints. All or nothing. */
int md_state_finish(struct md_state *st, struct md_err *err);

/* Lookups (NULL when missing). ns NULL means MD_DEFAULT_NS. */
const struct md_service *md_find_service(const struct md_state *st, const char *ns,
					 const char *name);
const struct md_pod *md_find_pod(const struct md_state *st, const char *ns, const char *name);
const struct md_namespace *md_find_namespace(const struct md_state *st, const char *name);
const struct md_deployment *md_find_deployment(const struct md_state *st, const char *ns,
					       const char *name);
const struct md_configmap *md_find_configmap(const struct md_state *st, const char *ns,
					     const char *name);
const struct md_routegroup *md_find_routegroup(const struct md_state *st, const char *ns,
					       const char *name);
const struct md_serviceaccount *md_find_serviceaccount(const struct md_state *st,
						       const char *ns, const char *name);

/* The ServiceAccount a pod runs as: its spec.serviceAccountName, else its
 * owner Deployment's template's (runtime pods written by the lab's kubelet
 * carry only what it copies), else "default". Never NULL. */
const char *md_pod_service_account(const struct md_state *st, const struct md_pod *p);

/* Number of objects parsed into st (implied namespaces not counted). */
int md_state_n_objects(const struct md_state *st);

/* Labels of a namespace (implied ones included); never NULL. */
const struct md_labels *md_namespace_labels(const struct md_state *st, const char *ns);

/* ---- for state sources (src/state): parsed objects and files -----------
 *
 * A state source stores each object in a file of its own and reloads only
 * what changed; these calls give it the objects as parsed (before
 * md_state_finish) and reference-counted parsed files it can reuse. */

enum md_kind {
	MD_K_CLUSTER,
	MD_K_NAMESPACE,
	MD_K_CONFIGMAP,
	MD_K_POD,
	MD_K_DEPLOYMENT,
	MD_K_SERVICE,
	MD_K_TRAFFICSPLIT,
	MD_K_HTTPROUTE,
	MD_K_NETPOL,
	MD_K_SERVICEACCOUNT,
	MD_K_ROUTEGROUP,	/* SMI HTTPRouteGroup */
	MD_K_GRPCROUTE,		/* Gateway API GRPCRoute: kept in md_state.routes (grpc) */
	MD_K_PEERAUTH,		/* security.istio.io PeerAuthentication */
	MD_K_AUTHZPOL,		/* security.istio.io AuthorizationPolicy */
	MD_K__COUNT
};

const char *md_kind_name(enum md_kind k);	/* "Service" */
const char *md_kind_lower(enum md_kind k);	/* "service" (file names) */
bool md_kind_namespaced(enum md_kind k);

/* Name checks (Kubernetes validation): NULL when valid, else a constant
 * message saying why not. */
const char *md_check_dns_label(const char *s);		/* RFC 1123 label, <= 63 */
const char *md_check_dns_subdomain(const char *s);	/* RFC 1123 subdomain, <= 253 */

/* How md_state_add_* parse into st from now on (default MD_PARSE_FULL). */
enum md_parse_mode {
	MD_PARSE_FULL,		/* typed objects, no YAML trees kept */
	MD_PARSE_KEEP_TREE,	/* as FULL, plus each object's YAML for md_state_obj_yaml */
	MD_PARSE_IDENT_ONLY,	/* apiVersion, kind and metadata only (deletes) */
};
void md_state_set_parse(struct md_state *st, enum md_parse_mode mode);

/* Object i (0 <= i < md_state_n_objects) as parsed, in input order. The
 * strings belong to st. */
struct md_obj_id {
	enum md_kind kind;
	const char *ns;		/* NULL for cluster-scoped kinds */
	const char *name;
	const char *file;	/* as given to md_state_add_* */
	int line;		/* of the document's first line */
};
void md_state_obj_id(const struct md_state *st, int i, struct md_obj_id *out);

/* Object i re-emitted as one YAML document (block style, scalars keep their
 * quoting); needs MD_PARSE_KEEP_TREE when it was parsed. *text is
 * malloc'd, the caller frees it. 0 or -EINVAL. */
int md_state_obj_yaml(const struct md_state *st, int i, char **text, size_t *len);
/* The same as one line of JSON (what the etcd source stores): parsed back,
 * the same object without metadata.resourceVersion; -ENOTSUP when JSON
 * cannot say it exactly (a plain scalar such as +80 or ~: store the YAML).
 * src/model/json_tree.c J3. */
int md_state_obj_json(const struct md_state *st, int i, char **text, size_t *len);

/* A parsed file (opaque): the decoded, unfinished objects of one manifest
 * file, reference counted. A state built with md_state_add_parsed shares
 * its objects and holds a reference until md_state_free; the result is
 * exactly what md_state_add_file of the same files in the same order gives. */
struct md_file;

/* Read and parse dir/name (name relative to dfd, path for messages) into a
 * new md_file with one reference. 0, or -errno/-EINVAL with err set. */
int md_file_load(int dfd, const char *name, const char *path, struct md_file **out,
		 struct md_err *err);
/* The same from text in memory (a store's value); path names it in errors. */
int md_file_parse(const char *path, const char *buf, size_t len, struct md_file **out,
		  struct md_err *err);
struct md_file *md_file_get(struct md_file *f);	/* take a reference; NULL is fine */
void md_file_put(struct md_file *f);	/* drop a reference; NULL is fine */
/* Append f's objects to st (not finished) and take a reference on f. Fails
 * like md_state_add_file would (second Cluster object); st is then unchanged. */
int md_state_add_parsed(struct md_state *st, struct md_file *f, struct md_err *err);

/* ---- incremental update of a finished state (finish.c) ------------------
 *
 * The common change at scale is one runtime pod updated in place by the
 * kubelet (phase, IP, ports, node): it can only change the endpoints of the
 * Services that select it. md_state_patch_pods() applies such updates to a
 * finished state so that it becomes exactly what a full load of the new
 * files would give (same arrays, same order, same endpoints):
 *   - the pod keeps its slot in st->pods (endpoints point at slots);
 *   - only "patchable" updates are accepted (md_pod_patchable()): both
 *     versions are runtime pods (status present) with the same namespace,
 *     name and labels (so the label index and the set of selecting
 *     Services do not change) and each file holds exactly that one object;
 *   - the endpoints of every Service selecting the pod are computed again
 *     with the same code as md_state_finish() step 8.
 * Anything else (a new or deleted pod, label change, any manifest) needs a
 * full load. */

/* Index in st->pods of the pod old_f defines, when new_f may replace it in
 * place (rules above) and st was built from old_f's objects; else -1. */
int md_pod_patchable(const struct md_state *st, const struct md_file *old_f,
		     const struct md_file *new_f);
/* Replace st->pods[idx[i]] by the pod of nf[i] for i < n (all checked with
 * md_pod_patchable first: this never fails), take a reference on each nf[i],
 * recompute the endpoints of the Services selecting them. *aff gets the
 * indexes of those Services (sorted, unique; malloc'd, caller frees),
 * *pol_relevant whether any pod changed what NetworkPolicy reads besides
 * labels (IP, node, container ports) — a phase change alone does not. */
void md_state_patch_pods(struct md_state *st, struct md_file *const *nf, const int *idx, int n,
			 int **aff, int *n_aff, bool *pol_relevant);

/* Services changed in place the same way: one Service per file, same
 * namespace and name, same ports (number, protocol, name), same headless
 * flag and same given clusterIP (so ClusterIP allocation, NetworkPolicy's
 * VIPs, the map keys and the compiler's notes stay): selector and
 * targetPort may change. md_svc_patchable() returns the index in
 * st->services or -1; md_state_patch_svcs() replaces each and recomputes
 * its endpoints (never fails once checked). */
int md_svc_patchable(const struct md_state *st, const struct md_file *old_f,
		     const struct md_file *new_f);
void md_state_patch_svcs(struct md_state *st, struct md_file *const *nf, const int *idx, int n);

/* IPv4 helpers: parse "a.b.c.d" / "a.b.c.d/len" (network order). 0 / -EINVAL. */
int md_parse_ipv4(const char *s, uint32_t *ip);
int md_parse_cidr(const char *s, uint32_t *net, int *len);
/* IPv6 "a::b" (not v4-mapped) / "a::/len" with no host bits. 0 / -EINVAL. */
int md_parse_ipv6(const char *s, struct in6_addr *ip);
int md_parse_cidr6(const char *s, struct in6_addr *net, int *len);
/* Whether ip lies in net/len. */
bool md_in_cidr6(const struct in6_addr *ip, const struct in6_addr *net, int len);

#endif
