/* hbone_px.c — the node proxy's HBONE listener (hbone.h) and its decision
 * for each CONNECT (docs/mtls.md), WIP: the destination must be a pod of
 * this node whose SVID the server presented (SNI), not under DISABLE, and
 * allowed by AuthorizationPolicy for the peer's principal (md_authz_check).
 * Each denial is logged by hbone.c with the reason returned here. */
#include <arpa/inet.h>

#include "zerohop/hbone.h"
#include "px_int.h"

static const struct md_pod *local_pod(const struct md_state *st, const char *node, uint32_t ip)
{
	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		if (p->ip == ip && p->spec.node_name && !strcmp(p->spec.node_name, node))
			return p;
	}
	return NULL;
}

static const char *authorize(void *arg, const char *peer, const char *sni, uint32_t ip,
			     uint16_t port)
{
	static char why[400];	/* one loop, one call at a time */
	struct px_server *s = arg;
	const struct md_state *st = s->tbl ? px_table_state(s->tbl) : NULL;
	const struct md_authzpol *pol = NULL;
	const struct md_pod *p;
	const char *r;
	char want[600];

	if (!st)
		return "no state loaded yet";
	p = local_pod(st, s->cfg->node, ip);
	if (!p)
		return "destination is not a pod of this node";
	snprintf(want, sizeof(want), "%s.%s", p->meta.name, p->meta.ns);
	if (!sni || strcmp(sni, want))
		return "destination is not the workload whose identity was presented";
	if (md_mtls_mode_of(st, p, port) == MD_MTLS_DISABLE)
		return "destination's PeerAuthentication mode is DISABLE";
	if (!strncmp(peer, "spiffe://", 9))
		peer += 9;	/* Istio's principals have no scheme */
	r = md_authz_check(st, p, port, peer, &pol);
	if (!r)
		return NULL;
	snprintf(why, sizeof(why), "%s (AuthorizationPolicy %s/%s)", r,
		 pol ? pol->meta.ns : "-", pol ? pol->meta.name : "-");
	return why;
}

int px_hbone_open(struct px_server *s)
{
	struct hb_opts o = { .loop = s->loop, .listen = s->cfg->hbone_listen,
			     .svid_dir = s->cfg->svid_dir, .authorize = authorize, .arg = s };
	char err[300];
	int rc = hb_server_open(&o, &s->hbone, err, sizeof(err));

	if (rc)
		zh_err("proxy: %s", err);
	else
		zh_info("proxy: HBONE on %s (SVIDs in %s)", s->cfg->hbone_listen, s->cfg->svid_dir);
	return rc;
}
