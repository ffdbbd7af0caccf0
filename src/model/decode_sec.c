/* decode_sec.c — decoders for Istio's security.istio.io PeerAuthentication
 * and AuthorizationPolicy (v1, v1beta1), the subset a node-level L4 tunnel
 * can honour (model.h, docs/mtls.md).
 *
 * What is refused, with the reason, rather than silently not enforced:
 * HTTP attributes (to.operation hosts/methods/paths, requestPrincipals,
 * when conditions: they need an L7 waypoint, as in Istio ambient, where
 * ztunnel cannot enforce them either), ipBlocks (use NetworkPolicy), action
 * CUSTOM/AUDIT, provider, targetRef(s) (waypoint attachment). Schema typos
 * are errors (schema.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "md_int.h"

static int mtls_mode(struct dctx *c, const struct yn *map, const char *field,
		     enum md_mtls_mode *out)
{
	char *v;

	*out = MD_MTLS_UNSET;
	if (dc_str(c, map, field, false, &v))
		return -EINVAL;
	if (!v || !strcmp(v, "UNSET"))
		return 0;
	if (!strcmp(v, "STRICT"))
		*out = MD_MTLS_STRICT;
	else if (!strcmp(v, "PERMISSIVE"))
		*out = MD_MTLS_PERMISSIVE;
	else if (!strcmp(v, "DISABLE"))
		*out = MD_MTLS_DISABLE;
	else
		return dc_fail(c, yn_get(map, field), field,
			       "\"%s\": expected STRICT, PERMISSIVE, DISABLE or UNSET", v);
	return 0;
}

/* A port number, given as a string ("8080", Istio's type) or an integer. */
static int port_num(struct dctx *c, const struct yn *n, const char *what, uint16_t *out)
{
	char *end;
	long v;

	if (!n || n->type != YN_SCALAR)
		return dc_fail(c, n, NULL, "%s must be a port number", what);
	v = strtol(n->s, &end, 10);
	if (!*n->s || *end || v < 1 || v > 65535)
		return dc_fail(c, n, NULL, "%s \"%s\" is not a port number (1..65535)", what, n->s);
	*out = (uint16_t)v;
	return 0;
}

/* ---- PeerAuthentication --------------------------------------------------- */

static int port_mtls(struct dctx *c, const struct yn *plm, struct md_peerauth *pa)
{
	size_t old = dc_push(c, "portLevelMtls");

	if (dc_map(c, plm, NULL))
		return -EINVAL;
	pa->ports = ar_alloc(c->ar, (size_t)plm->n * sizeof(*pa->ports));
	for (int i = 0; i < plm->n; i++) {
		struct yn key = { .type = YN_SCALAR, .line = plm->pairs[i].key_line,
				  .s = plm->pairs[i].key };
		size_t o2 = dc_push(c, plm->pairs[i].key);

		if (port_num(c, &key, "the key", &pa->ports[i].port) ||
		    dc_map(c, plm->pairs[i].val, NULL) ||
		    mtls_mode(c, plm->pairs[i].val, "mode", &pa->ports[i].mode))
			return -EINVAL;
		for (int j = 0; j < i; j++)
			if (pa->ports[j].port == pa->ports[i].port)
				return dc_fail(c, &key, NULL, "port %u given twice",
					       pa->ports[i].port);
		dc_pop(c, o2);
	}
	pa->n_ports = plm->n;
	dc_pop(c, old);
	return 0;
}

int md_decode_peerauth(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	struct md_priv *pv = md_priv(c->st);
	struct md_peerauth *pa = zh_grow((void **)&c->st->peerauths, &c->st->n_peerauths,
					 &pv->cap_pa, sizeof(*pa));
	const struct yn *spec = yn_get(root, "spec"), *mtls, *plm;
	size_t old;

	pa->meta = *meta;
	if (!spec)	/* an empty policy: UNSET, inherits */
		return 0;
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) || dc_selector(c, spec, "selector", &pa->selector))
		return -EINVAL;
	mtls = yn_get(spec, "mtls");
	if (mtls) {
		size_t o2 = dc_push(c, "mtls");

		if (dc_map(c, mtls, NULL) || mtls_mode(c, mtls, "mode", &pa->mode))
			return -EINVAL;
		dc_pop(c, o2);
	}
	plm = yn_get(spec, "portLevelMtls");
	if (plm && !pa->selector.present)
		return dc_fail(c, plm, "portLevelMtls",
			       "needs a selector (as in Istio: ports are a workload's)");
	if (plm && port_mtls(c, plm, pa))
		return -EINVAL;
	if (pa->mode == MD_MTLS_STRICT || pa->n_ports)
		dc_warn(c, mtls ? mtls : plm, mtls ? "mtls.mode" : "portLevelMtls",
			"STRICT: other nodes reach these pods through the HBONE tunnel over IPv4; "
			"native IPv6 and the node proxies' own (L7) connections from other nodes "
			"are refused, and nodes whose proxy runs without the tunnel "
			"(ZH_PROXY_HBONE=0) do not enforce it (docs/mtls.md)");
	dc_pop(c, old);
	return 0;
}

/* ---- AuthorizationPolicy ------------------------------------------------------ */

/* Istio's string match: exact, "prefix*", "*suffix" or "*"; no other '*'. */
static int match_list(struct dctx *c, const struct yn *map, const char *field, char ***out,
		      int *n)
{
	if (dc_str_list(c, map, field, out, n))
		return -EINVAL;
	if (yn_get(map, field) && !*n)
		return dc_fail(c, yn_get(map, field), field,
			       "an empty list matches nothing; remove the field to match any");
	for (int i = 0; i < *n; i++) {
		const char *s = (*out)[i], *star = strchr(s, '*');
		size_t len = strlen(s);

		if (!len || (star && star != s && star != s + len - 1) ||
		    (star && strchr(star + 1, '*')))
			return dc_fail(c, yn_get(map, field)->items[i], field,
				       "\"%s\": expected an exact value, \"prefix*\", \"*suffix\" or \"*\"",
				       s);
	}
	return 0;
}

static int refuse(struct dctx *c, const struct yn *map, const char *const *fields,
		  const char *why)
{
	for (; *fields; fields++)
		if (yn_get(map, *fields))
			return dc_fail(c, yn_get(map, *fields), *fields, "not supported: %s", why);
	return 0;
}

static const char *const l7_source[] = { "requestPrincipals", "notRequestPrincipals", NULL };
static const char *const ip_source[] = { "ipBlocks", "notIpBlocks", "remoteIpBlocks",
					 "notRemoteIpBlocks", NULL };
static const char *const sa_source[] = { "serviceAccounts", "notServiceAccounts", NULL };
static const char *const l7_op[] = { "hosts", "notHosts", "methods", "notMethods", "paths",
				     "notPaths", NULL };
#define L7_WHY "an HTTP attribute needs an L7 waypoint; zerohop's node tunnel enforces " \
	"identities and ports only (as Istio ambient's ztunnel)"

static int az_from(struct dctx *c, const struct yn *f, void *elem, void *arg)
{
	struct md_authz_source *s = elem;
	const struct yn *src = yn_get(f, "source");
	size_t old;

	(void)arg;
	if (dc_map(c, f, NULL))
		return -EINVAL;
	if (!src)
		return dc_fail(c, f, "source", "is required");
	old = dc_push(c, "source");
	if (dc_map(c, src, NULL) || refuse(c, src, l7_source, L7_WHY) ||
	    refuse(c, src, ip_source, "use a NetworkPolicy ipBlock") ||
	    refuse(c, src, sa_source, "use principals (TD/ns/NS/sa/SA)") ||
	    match_list(c, src, "principals", &s->principals, &s->n_principals) ||
	    match_list(c, src, "notPrincipals", &s->not_principals, &s->n_not_principals) ||
	    match_list(c, src, "namespaces", &s->namespaces, &s->n_namespaces) ||
	    match_list(c, src, "notNamespaces", &s->not_namespaces, &s->n_not_namespaces))
		return -EINVAL;
	dc_pop(c, old);
	return 0;
}

static int port_item(struct dctx *c, const struct yn *item, void *elem, void *arg)
{
	(void)arg;
	return port_num(c, item, "a port", elem);
}

static int port_list(struct dctx *c, const struct yn *map, const char *field, uint16_t **out,
		     int *n)
{
	const struct yn *v = yn_get(map, field);

	if (v && v->type == YN_SEQ && !v->n)
		return dc_fail(c, v, field, "an empty list matches nothing; remove the field to match any");
	return dc_seq_each(c, map, field, sizeof(**out), (void **)out, n, port_item, NULL);
}

static int az_to(struct dctx *c, const struct yn *t, void *elem, void *arg)
{
	struct md_authz_op *op = elem;
	const struct yn *o = yn_get(t, "operation");
	size_t old;

	(void)arg;
	if (dc_map(c, t, NULL))
		return -EINVAL;
	if (!o)
		return dc_fail(c, t, "operation", "is required");
	old = dc_push(c, "operation");
	if (dc_map(c, o, NULL) || refuse(c, o, l7_op, L7_WHY) ||
	    port_list(c, o, "ports", &op->ports, &op->n_ports) ||
	    port_list(c, o, "notPorts", &op->not_ports, &op->n_not_ports))
		return -EINVAL;
	dc_pop(c, old);
	return 0;
}

static int az_rule(struct dctx *c, const struct yn *r, void *elem, void *arg)
{
	struct md_authz_rule *rule = elem;

	(void)arg;
	if (dc_map(c, r, NULL))
		return -EINVAL;
	if (yn_get(r, "when"))
		return dc_fail(c, yn_get(r, "when"), "when",
			       "not supported: conditions (when) are not enforced by zerohop");
	return dc_seq_each(c, r, "from", sizeof(*rule->from), (void **)&rule->from,
			   &rule->n_from, az_from, NULL) ||
	       dc_seq_each(c, r, "to", sizeof(*rule->to), (void **)&rule->to, &rule->n_to, az_to,
			   NULL) ? -EINVAL : 0;
}

int md_decode_authzpol(struct dctx *c, const struct yn *root, struct md_meta *meta)
{
	static const char *const attach[] = { "targetRef", "targetRefs", NULL };
	static const char *const prov[] = { "provider", NULL };
	struct md_priv *pv = md_priv(c->st);
	struct md_authzpol *az = zh_grow((void **)&c->st->authzpols, &c->st->n_authzpols,
					 &pv->cap_az, sizeof(*az));
	const struct yn *spec = yn_get(root, "spec");
	char *action;
	size_t old;

	az->meta = *meta;
	az->action = MD_AUTHZ_ALLOW;
	if (!spec) {	/* Istio: an empty ALLOW policy denies every request */
		dc_warn(c, root, "spec", "an empty AuthorizationPolicy denies all traffic to its "
			"namespace (as in Istio); enforced only on connections through the HBONE "
			"tunnel (docs/mtls.md)");
		return 0;
	}
	old = dc_push(c, "spec");
	if (dc_map(c, spec, NULL) || dc_selector(c, spec, "selector", &az->selector) ||
	    refuse(c, spec, attach, "waypoint attachment; select the workloads with selector") ||
	    refuse(c, spec, prov, "CUSTOM authorization providers") ||
	    dc_str(c, spec, "action", false, &action))
		return -EINVAL;
	if (action && !strcmp(action, "DENY"))
		az->action = MD_AUTHZ_DENY;
	else if (action && strcmp(action, "ALLOW"))
		return dc_fail(c, yn_get(spec, "action"), "action",
			       "\"%s\": expected ALLOW or DENY (CUSTOM and AUDIT are not supported)",
			       action);
	if (dc_seq_each(c, spec, "rules", sizeof(*az->rules), (void **)&az->rules, &az->n_rules,
			az_rule, NULL))
		return -EINVAL;
	dc_warn(c, spec, NULL, "enforced only on connections through the HBONE tunnel (to STRICT "
		"pods, on nodes whose proxy carries it): plain-text connections are not "
		"checked (docs/mtls.md)");
	dc_pop(c, old);
	return 0;
}
