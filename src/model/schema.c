/* schema.c — unknown fields of the mesh kinds are errors (kubectl's default
 * strict validation does the same): a typo such as `backendRef:` for
 * `backendRefs:` in an HTTPRoute would otherwise route traffic differently
 * from what its author wrote, with no word.
 *
 * The field lists below are the complete published schemas of the kinds
 * zerohop models entirely (Gateway API HTTPRoute and GRPCRoute v1, SMI TrafficSplit and
 * HTTPRouteGroup, networking.k8s.io NetworkPolicy, our Cluster), for the
 * spec subtree (metadata is standard object metadata, status is the
 * server's). Fields that are in the schema but not honoured are refused or
 * warned about by the decoders (decode_mesh.c), not here. The core kinds
 * (Pod, Deployment, Service, ...) keep ignoring fields zerohop does not
 * read: their schemas are large and mostly without data-plane meaning.
 *
 * A node lists the keys allowed in a mapping; a key's child describes its
 * value (a mapping, or each item of a list); a NULL child means the value
 * is not checked (free-form maps such as matchLabels). */
#include <errno.h>
#include <string.h>

#include "md_int.h"

struct sch_key {
	const char *key;
	const struct sch_key *child;	/* NULL: value not checked */
};

#define END { NULL, NULL }

/* ---- shared pieces ---- */
static const struct sch_key s_label_expr[] = { { "key", NULL }, { "operator", NULL },
					       { "values", NULL }, END };
static const struct sch_key s_selector[] = { { "matchLabels", NULL },
					     { "matchExpressions", s_label_expr }, END };

/* ---- Gateway API HTTPRoute (v1, v1beta1) ---- */
static const struct sch_key s_parent[] = { { "group", NULL }, { "kind", NULL },
					   { "namespace", NULL }, { "name", NULL },
					   { "sectionName", NULL }, { "port", NULL }, END };
static const struct sch_key s_str_match[] = { { "type", NULL }, { "name", NULL },
					      { "value", NULL }, END };
static const struct sch_key s_path_match[] = { { "type", NULL }, { "value", NULL }, END };
static const struct sch_key s_match[] = { { "path", s_path_match }, { "headers", s_str_match },
					  { "queryParams", s_str_match }, { "method", NULL }, END };
static const struct sch_key s_hdr_kv[] = { { "name", NULL }, { "value", NULL }, END };
static const struct sch_key s_hdr_mod[] = { { "set", s_hdr_kv }, { "add", s_hdr_kv },
					    { "remove", NULL }, END };
static const struct sch_key s_path_mod[] = { { "type", NULL }, { "replaceFullPath", NULL },
					     { "replacePrefixMatch", NULL }, END };
static const struct sch_key s_redirect[] = { { "scheme", NULL }, { "hostname", NULL },
					     { "path", s_path_mod }, { "port", NULL },
					     { "statusCode", NULL }, END };
static const struct sch_key s_rewrite[] = { { "hostname", NULL }, { "path", s_path_mod }, END };
static const struct sch_key s_obj_ref[] = { { "group", NULL }, { "kind", NULL },
					    { "name", NULL }, { "namespace", NULL },
					    { "port", NULL }, END };
static const struct sch_key s_fraction[] = { { "numerator", NULL }, { "denominator", NULL }, END };
static const struct sch_key s_mirror[] = { { "backendRef", s_obj_ref }, { "percent", NULL },
					   { "fraction", s_fraction }, END };
/* cors and externalAuth (experimental channel) are in the schema; the
 * decoder refuses them as unknown filter types */
static const struct sch_key s_filter[] = { { "type", NULL },
					   { "requestHeaderModifier", s_hdr_mod },
					   { "responseHeaderModifier", s_hdr_mod },
					   { "requestMirror", s_mirror },
					   { "requestRedirect", s_redirect },
					   { "urlRewrite", s_rewrite },
					   { "extensionRef", NULL }, { "cors", NULL },
					   { "externalAuth", NULL }, END };
static const struct sch_key s_backend[] = { { "group", NULL }, { "kind", NULL },
					    { "name", NULL }, { "namespace", NULL },
					    { "port", NULL }, { "weight", NULL },
					    { "filters", s_filter }, END };
static const struct sch_key s_timeouts[] = { { "request", NULL }, { "backendRequest", NULL }, END };
static const struct sch_key s_retry[] = { { "codes", NULL }, { "attempts", NULL },
					  { "backoff", NULL }, END };
static const struct sch_key s_rule[] = { { "name", NULL }, { "matches", s_match },
					 { "filters", s_filter }, { "backendRefs", s_backend },
					 { "timeouts", s_timeouts }, { "retry", s_retry },
					 { "sessionPersistence", NULL }, END };
static const struct sch_key s_route_spec[] = { { "parentRefs", s_parent },
					       { "hostnames", NULL }, { "rules", s_rule },
					       { "useDefaultGateways", NULL }, END };

/* ---- Gateway API GRPCRoute (v1) ---- */
static const struct sch_key s_grpc_method[] = { { "type", NULL }, { "service", NULL },
						{ "method", NULL }, END };
static const struct sch_key s_grpc_match[] = { { "method", s_grpc_method },
					       { "headers", s_str_match }, END };
/* the types GRPCRoute's schema allows; decode_grpc.c refuses the last two */
static const struct sch_key s_grpc_filter[] = { { "type", NULL },
						{ "requestHeaderModifier", s_hdr_mod },
						{ "responseHeaderModifier", s_hdr_mod },
						{ "requestMirror", s_mirror },
						{ "extensionRef", NULL }, END };
static const struct sch_key s_grpc_backend[] = { { "group", NULL }, { "kind", NULL },
						 { "name", NULL }, { "namespace", NULL },
						 { "port", NULL }, { "weight", NULL },
						 { "filters", s_grpc_filter }, END };
static const struct sch_key s_grpc_rule[] = { { "name", NULL }, { "matches", s_grpc_match },
					      { "filters", s_grpc_filter },
					      { "backendRefs", s_grpc_backend },
					      { "sessionPersistence", NULL }, END };
static const struct sch_key s_grpc_spec[] = { { "parentRefs", s_parent },
					      { "hostnames", NULL }, { "rules", s_grpc_rule },
					      { "useDefaultGateways", NULL }, END };

/* ---- SMI ---- */
static const struct sch_key s_split_backend[] = { { "service", NULL }, { "weight", NULL }, END };
static const struct sch_key s_split_match[] = { { "kind", NULL }, { "name", NULL },
						{ "apiGroup", NULL }, END };
static const struct sch_key s_split_spec[] = { { "service", NULL },
					       { "backends", s_split_backend },
					       { "matches", s_split_match }, END };
static const struct sch_key s_rg_match[] = { { "name", NULL }, { "pathRegex", NULL },
					     { "methods", NULL }, { "headers", NULL }, END };
static const struct sch_key s_rg_spec[] = { { "matches", s_rg_match }, END };

/* ---- NetworkPolicy ---- */
static const struct sch_key s_ipblock[] = { { "cidr", NULL }, { "except", NULL }, END };
static const struct sch_key s_peer[] = { { "podSelector", s_selector },
					 { "namespaceSelector", s_selector },
					 { "ipBlock", s_ipblock }, END };
static const struct sch_key s_np_port[] = { { "protocol", NULL }, { "port", NULL },
					    { "endPort", NULL }, END };
static const struct sch_key s_np_in[] = { { "from", s_peer }, { "ports", s_np_port }, END };
static const struct sch_key s_np_out[] = { { "to", s_peer }, { "ports", s_np_port }, END };
static const struct sch_key s_np_spec[] = { { "podSelector", s_selector },
					    { "policyTypes", NULL }, { "ingress", s_np_in },
					    { "egress", s_np_out }, END };

/* ---- Cluster (ours) ---- */
static const struct sch_key s_node[] = { { "name", NULL }, END };
static const struct sch_key s_cluster_spec[] = { { "nodes", s_node }, { "podCIDR", NULL },
						 { "serviceCIDR", NULL }, { "podCIDRs", NULL },
						 { "serviceCIDRs", NULL }, END };

/* ---- security.istio.io PeerAuthentication, AuthorizationPolicy (v1) ----
 * every field of Istio's schema is listed so that a typo is an error; the
 * decoder (decode_sec.c) refuses the ones an L4 node tunnel cannot honour */
static const struct sch_key s_wsel[] = { { "matchLabels", NULL }, END };
static const struct sch_key s_pa_mtls[] = { { "mode", NULL }, END };
static const struct sch_key s_pa_spec[] = { { "selector", s_wsel }, { "mtls", s_pa_mtls },
					    { "portLevelMtls", NULL }, END };
static const struct sch_key s_az_source[] = {
	{ "principals", NULL }, { "notPrincipals", NULL }, { "requestPrincipals", NULL },
	{ "notRequestPrincipals", NULL }, { "namespaces", NULL }, { "notNamespaces", NULL },
	{ "ipBlocks", NULL }, { "notIpBlocks", NULL }, { "remoteIpBlocks", NULL },
	{ "notRemoteIpBlocks", NULL }, { "serviceAccounts", NULL },
	{ "notServiceAccounts", NULL }, END };
static const struct sch_key s_az_from[] = { { "source", s_az_source }, END };
static const struct sch_key s_az_op[] = { { "hosts", NULL }, { "notHosts", NULL },
					  { "ports", NULL }, { "notPorts", NULL },
					  { "methods", NULL }, { "notMethods", NULL },
					  { "paths", NULL }, { "notPaths", NULL }, END };
static const struct sch_key s_az_to[] = { { "operation", s_az_op }, END };
static const struct sch_key s_az_rule[] = { { "from", s_az_from }, { "to", s_az_to },
					    { "when", NULL }, END };
static const struct sch_key s_az_spec[] = { { "selector", s_wsel }, { "targetRef", NULL },
					    { "targetRefs", NULL }, { "rules", s_az_rule },
					    { "action", NULL }, { "provider", NULL }, END };

/* The whole object: only spec is checked (metadata is ObjectMeta). */
#define ROOT(name, spec) \
	static const struct sch_key name[] = { { "apiVersion", NULL }, { "kind", NULL }, \
					       { "metadata", NULL }, { "spec", spec }, \
					       { "status", NULL }, END }
ROOT(r_route, s_route_spec);
ROOT(r_grpc, s_grpc_spec);
ROOT(r_split, s_split_spec);
ROOT(r_rg, s_rg_spec);
ROOT(r_np, s_np_spec);
ROOT(r_cluster, s_cluster_spec);
ROOT(r_pa, s_pa_spec);
ROOT(r_az, s_az_spec);

static int check(struct dctx *c, const struct yn *n, const struct sch_key *sch);

static int check_value(struct dctx *c, const struct yn *v, const struct sch_key *child)
{
	size_t base = c->plen;

	if (!child || !v)
		return 0;
	if (v->type == YN_MAP)
		return check(c, v, child);
	if (v->type != YN_SEQ)
		return 0;	/* a wrong type is the decoder's error */
	for (int i = 0; i < v->n; i++) {
		dc_push_idx(c, i);
		if (v->items[i]->type == YN_MAP && check(c, v->items[i], child))
			return -EINVAL;
		dc_pop(c, base);
	}
	return 0;
}

static int check(struct dctx *c, const struct yn *n, const struct sch_key *sch)
{
	for (int i = 0; i < n->n; i++) {
		const struct yn_pair *p = &n->pairs[i];
		const struct sch_key *k;
		size_t old;

		for (k = sch; k->key && strcmp(k->key, p->key); k++)
			;
		if (!k->key) {
			struct yn at = { .type = YN_SCALAR, .line = p->key_line };

			return dc_fail(c, &at, p->key, "unknown field (a typo? kubectl's strict "
				       "validation refuses it too)");
		}
		old = dc_push(c, p->key);
		if (check_value(c, p->val, k->child))
			return -EINVAL;
		dc_pop(c, old);
	}
	return 0;
}

int md_check_fields(struct dctx *c, const struct yn *root, enum md_kind k)
{
	const struct sch_key *sch;

	switch (k) {
	case MD_K_HTTPROUTE: sch = r_route; break;
	case MD_K_GRPCROUTE: sch = r_grpc; break;
	case MD_K_TRAFFICSPLIT: sch = r_split; break;
	case MD_K_ROUTEGROUP: sch = r_rg; break;
	case MD_K_NETPOL: sch = r_np; break;
	case MD_K_CLUSTER: sch = r_cluster; break;
	case MD_K_PEERAUTH: sch = r_pa; break;
	case MD_K_AUTHZPOL: sch = r_az; break;
	default: return 0;
	}
	return root->type == YN_MAP ? check(c, root, sch) : 0;
}
