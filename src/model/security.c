/* security.c — what PeerAuthentication and AuthorizationPolicy decide for a
 * connection to a pod (model.h; Istio's semantics, docs/mtls.md). Pure:
 * the node proxy's tunnel calls these with the peer's verified identity. */
#include <stdio.h>
#include <string.h>

#include "md_int.h"

const char MD_AUTHZ_DENIED_BY_DENY[] = "denied by a DENY policy";
const char MD_AUTHZ_NOT_ALLOWED[] = "no ALLOW policy matches";

const char *md_mtls_mode_name(enum md_mtls_mode m)
{
	switch (m) {
	case MD_MTLS_PERMISSIVE: return "PERMISSIVE";
	case MD_MTLS_STRICT: return "STRICT";
	case MD_MTLS_DISABLE: return "DISABLE";
	default: return "UNSET";
	}
}

/* Does a policy of namespace ns with selector sel cover pod p? */
static bool covers(const struct md_state *st, const char *ns, const struct md_selector *sel,
		   const struct md_pod *p)
{
	if (strcmp(ns, MD_MESH_ROOT_NS) && strcmp(ns, p->meta.ns))
		return false;
	if (!sel->present)
		return true;
	/* a selector in the root namespace selects workloads of its own
	 * namespace only (Istio) */
	return !strcmp(ns, p->meta.ns) && md_selector_matches(sel, &p->meta.labels);
}

enum md_mtls_mode md_mtls_mode_of(const struct md_state *st, const struct md_pod *p,
				  uint16_t port)
{
	/* levels: 0 workload, 1 namespace, 2 mesh; the first policy of each */
	const struct md_peerauth *lv[3] = { NULL, NULL, NULL };

	for (int i = 0; i < st->n_peerauths; i++) {
		const struct md_peerauth *pa = &st->peerauths[i];
		int l;

		if (!covers(st, pa->meta.ns, &pa->selector, p))
			continue;
		l = pa->selector.present ? 0 : strcmp(pa->meta.ns, p->meta.ns) ? 2 : 1;
		if (!lv[l])
			lv[l] = pa;
	}
	if (lv[0])
		for (int i = 0; i < lv[0]->n_ports; i++)
			if (lv[0]->ports[i].port == port && lv[0]->ports[i].mode != MD_MTLS_UNSET)
				return lv[0]->ports[i].mode;
	for (int l = 0; l < 3; l++)
		if (lv[l] && lv[l]->mode != MD_MTLS_UNSET)
			return lv[l]->mode;
	return MD_MTLS_PERMISSIVE;
}

/* A port no portLevelMtls names gives the pod's own mode; 0 is never a
 * container port (the decoder refuses it). */
bool md_mtls_strict_ports(const struct md_state *st, const struct md_pod *p,
			  void (*fn)(void *arg, uint16_t port, bool strict), void *arg)
{
	bool own = md_mtls_mode_of(st, p, 0) == MD_MTLS_STRICT, any = own;

	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			if (!any)
				return false;
			fn(arg, 0, own);
		}
		for (int i = 0; i < st->n_peerauths; i++) {
			const struct md_peerauth *pa = &st->peerauths[i];

			for (int j = 0; j < pa->n_ports; j++) {
				bool s = md_mtls_mode_of(st, p, pa->ports[j].port) == MD_MTLS_STRICT;

				if (s == own)
					continue;
				if (pass == 0)
					any = true;
				else
					fn(arg, pa->ports[j].port, s);
			}
		}
	}
	return true;
}

/* Istio's string match: exact, "prefix*", "*suffix", "*". */
static bool str_match(const char *pat, const char *v)
{
	size_t lp = strlen(pat), lv = strlen(v);

	if (!strcmp(pat, "*"))
		return true;
	if (lp && pat[lp - 1] == '*')
		return !strncmp(pat, v, lp - 1);
	if (pat[0] == '*')
		return lv >= lp - 1 && !strcmp(v + lv - (lp - 1), pat + 1);
	return !strcmp(pat, v);
}

static bool any_match(char *const *pats, int n, const char *v)
{
	for (int i = 0; i < n; i++)
		if (v && str_match(pats[i], v))
			return true;
	return false;
}

/* A field given must match; a plain-text peer (principal NULL) has no
 * principal and no namespace: a positive field then fails, a negative
 * one passes (nothing to exclude). */
static bool source_match(const struct md_authz_source *s, const char *principal,
			 const char *ns)
{
	return (!s->n_principals || any_match(s->principals, s->n_principals, principal)) &&
	       (!s->n_namespaces || any_match(s->namespaces, s->n_namespaces, ns)) &&
	       !any_match(s->not_principals, s->n_not_principals, principal) &&
	       !any_match(s->not_namespaces, s->n_not_namespaces, ns);
}

static bool port_in(const uint16_t *v, int n, uint16_t port)
{
	for (int i = 0; i < n; i++)
		if (v[i] == port)
			return true;
	return false;
}

static bool rule_match(const struct md_authz_rule *r, uint16_t port, const char *principal,
		       const char *ns)
{
	bool from = !r->n_from, to = !r->n_to;

	for (int i = 0; i < r->n_from && !from; i++)
		from = source_match(&r->from[i], principal, ns);
	for (int i = 0; i < r->n_to && !to; i++)
		to = (!r->to[i].n_ports || port_in(r->to[i].ports, r->to[i].n_ports, port)) &&
		     !port_in(r->to[i].not_ports, r->to[i].n_not_ports, port);
	return from && to;
}

static bool policy_match(const struct md_authzpol *az, uint16_t port, const char *principal,
			 const char *ns)
{
	for (int i = 0; i < az->n_rules; i++)
		if (rule_match(&az->rules[i], port, principal, ns))
			return true;
	return false;
}

const char *md_authz_check(const struct md_state *st, const struct md_pod *dst, uint16_t port,
			   const char *principal, const struct md_authzpol **policy)
{
	const struct md_authzpol *allow = NULL;
	char ns[256] = "";
	const char *p;

	/* "TD/ns/NS/sa/SA" -> NS: what from.source.namespaces matches */
	if (principal && (p = strstr(principal, "/ns/"))) {
		const char *e = strchr(p + 4, '/');

		if (e && (size_t)(e - p - 4) < sizeof(ns))
			snprintf(ns, sizeof(ns), "%.*s", (int)(e - p - 4), p + 4);
	}
	if (policy)
		*policy = NULL;
	for (int i = 0; i < st->n_authzpols; i++) {
		const struct md_authzpol *az = &st->authzpols[i];

		if (az->action != MD_AUTHZ_DENY || !covers(st, az->meta.ns, &az->selector, dst))
			continue;
		if (policy_match(az, port, principal, ns[0] ? ns : NULL)) {
			if (policy)
				*policy = az;
			return MD_AUTHZ_DENIED_BY_DENY;
		}
	}
	for (int i = 0; i < st->n_authzpols; i++) {
		const struct md_authzpol *az = &st->authzpols[i];

		if (az->action != MD_AUTHZ_ALLOW || !covers(st, az->meta.ns, &az->selector, dst))
			continue;
		if (policy_match(az, port, principal, ns[0] ? ns : NULL))
			return NULL;
		allow = az;
	}
	if (!allow)
		return NULL;
	if (policy)
		*policy = allow;
	return MD_AUTHZ_NOT_ALLOWED;
}
