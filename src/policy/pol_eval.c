/* pol_eval.c — user-space evaluation of compiled policy tables.
 *
 * The same decision procedure as the BPF slow path (bpf/policy.bpf.c,
 * pol_allow_dir), run on the arrays pol_compile() produced instead of on the
 * kernel maps. Used by the property test to check most random cases fast;
 * the real datapath is checked on a sample (docs/policy.md says which).
 * The LPM semantics are re-implemented here on sorted arrays: a rule matches
 * when its fixed 80 bits are equal and the first prefixlen-80 bits of the
 * port agree.
 */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "zerohop/policy.h"
#include "pol_int.h"

const struct pol_ipc_val *pol_ipc_find(const struct pol_compiled *c, uint32_t ip)
{
	int lo = 0, hi = c->n_ipc - 1;
	uint32_t want = ntohl(ip);

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		uint32_t v = ntohl(c->ipc[mid].ip);

		if (v == want)
			return &c->ipc[mid].val;
		if (v < want)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* Longest prefix containing ip: cidrs are sorted by (len, net). */
uint32_t pol_cidr_find(const struct pol_compiled *c, uint32_t ip)
{
	for (int i = c->n_cidrs - 1; i >= 0; i--) {
		const struct pol_cidr *p = &c->cidrs[i];
		uint32_t m = p->len ? htonl(~0u << (32 - p->len)) : 0;

		if ((ip & m) == p->net)
			return p->class_id;
	}
	return 0;
}

const struct pol_rule_val *pol_rule_find(const struct pol_compiled *c, uint32_t local,
					 uint32_t peer, int dir, uint8_t proto, uint16_t port)
{
	struct pol_rule_key k = {
		.local = htonl(local), .peer = htonl(peer), .dir = (uint8_t)dir, .proto = proto,
	};
	const struct pol_rule_val *best = NULL;
	uint32_t best_len = 0;
	int lo = 0, hi = c->n_rules;

	/* first entry whose 10 fixed bytes are >= ours */
	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (memcmp(&c->rules[mid].key.local, &k.local, 10) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int i = lo; i < c->n_rules; i++) {
		const struct pol_rule *r = &c->rules[i];
		uint32_t bits;

		if (memcmp(&r->key.local, &k.local, 10) != 0)
			break;
		bits = r->key.prefixlen - POL_PLEN_ANY_PORT;
		if (bits && ((ntohs(r->key.port) ^ port) >> (16 - bits)) != 0)
			continue;
		if (!best || r->key.prefixlen > best_len) {
			best = &r->val;
			best_len = r->key.prefixlen;
		}
	}
	return best;
}

/* The decision of one direction once the addresses are looked up (both
 * families): ep the local pod's entry, peer the peer's (NULL: not in the
 * ipcache, i.e. world), cls the peer's cidr class (0: none). */
static bool judge_dir(const struct pol_compiled *c, int dir, const struct pol_ipc_val *ep,
		      const struct pol_ipc_val *peer, uint32_t cls, uint16_t port,
		      enum md_proto proto)
{
	uint32_t iso = dir == POL_DIR_INGRESS ? POL_F_ISO_INGRESS : POL_F_ISO_EGRESS;
	uint8_t ipp = pol_ipproto(proto);

	if (!ep || !(ep->flags & POL_F_LOCAL) || !(ep->flags & iso))
		return true;
	if (dir == POL_DIR_INGRESS && peer && (peer->flags & (POL_F_NODE | POL_F_PROXY)))
		return true;
	if (pol_rule_find(c, ep->id, peer ? peer->id : POL_ID_WORLD, dir, ipp, port))
		return true;
	if (pol_rule_find(c, ep->id, POL_ID_ANY, dir, ipp, port))
		return true;
	return cls && pol_rule_find(c, ep->id, cls, dir, ipp, port);
}

bool pol_eval_dir(const struct pol_compiled *c, int dir, uint32_t local_ip, uint32_t peer_ip,
		  uint16_t port, enum md_proto proto)
{
	return judge_dir(c, dir, pol_ipc_find(c, local_ip), pol_ipc_find(c, peer_ip),
			 pol_cidr_find(c, peer_ip), port, proto);
}

bool pol_eval(const struct pol_compiled *c, uint32_t src_ip, uint32_t dst_ip,
	      uint16_t dport, enum md_proto proto, uint32_t *reason, uint32_t *pol_id)
{
	const struct pol_ipc_val *ep;

	*reason = POL_DROP_NONE;
	*pol_id = 0;
	if (src_ip == dst_ip)		/* a pod may always reach itself */
		return true;
	if (!pol_eval_dir(c, POL_DIR_EGRESS, src_ip, dst_ip, dport, proto)) {
		ep = pol_ipc_find(c, src_ip);
		*reason = POL_DROP_EGRESS_DENIED;
		*pol_id = ep ? ep->pol[POL_DIR_EGRESS] : 0;
		return false;
	}
	if (!pol_eval_dir(c, POL_DIR_INGRESS, dst_ip, src_ip, dport, proto)) {
		ep = pol_ipc_find(c, dst_ip);
		*reason = POL_DROP_INGRESS_DENIED;
		*pol_id = ep ? ep->pol[POL_DIR_INGRESS] : 0;
		return false;
	}
	return true;
}

/* ---- IPv6 (pol_compile.c invariant 7): the same procedure on the IPv6
 * ipcache and classes ---- */

const struct pol_ipc_val *pol_ipc6_find(const struct pol_compiled *c, const uint8_t ip[16])
{
	int lo = 0, hi = c->n_ipc6 - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2, r = memcmp(c->ipc6[mid].ip, ip, 16);

		if (!r)
			return &c->ipc6[mid].val;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* Longest prefix containing ip: cidrs6 are sorted by (len, net). */
uint32_t pol_cidr6_find(const struct pol_compiled *c, const uint8_t ip[16])
{
	for (int i = c->n_cidrs6 - 1; i >= 0; i--) {
		const struct pol_cidr6 *p = &c->cidrs6[i];
		int full = p->len / 8, rest = p->len % 8;

		if (memcmp(ip, p->net, (size_t)full))
			continue;
		if (rest && ((ip[full] ^ p->net[full]) & (0xff00 >> rest)))
			continue;
		return p->class_id;
	}
	return 0;
}

bool pol_eval_dir6(const struct pol_compiled *c, int dir, const uint8_t local[16],
		   const uint8_t peer_ip[16], uint16_t port, enum md_proto proto)
{
	return judge_dir(c, dir, pol_ipc6_find(c, local), pol_ipc6_find(c, peer_ip),
			 pol_cidr6_find(c, peer_ip), port, proto);
}

bool pol_eval6(const struct pol_compiled *c, const uint8_t src[16], const uint8_t dst[16],
	       uint16_t dport, enum md_proto proto, uint32_t *reason, uint32_t *pol_id)
{
	const struct pol_ipc_val *ep;

	*reason = POL_DROP_NONE;
	*pol_id = 0;
	if (!memcmp(src, dst, 16))
		return true;
	if (!pol_eval_dir6(c, POL_DIR_EGRESS, src, dst, dport, proto)) {
		ep = pol_ipc6_find(c, src);
		*reason = POL_DROP_EGRESS_DENIED;
		*pol_id = ep ? ep->pol[POL_DIR_EGRESS] : 0;
		return false;
	}
	if (!pol_eval_dir6(c, POL_DIR_INGRESS, dst, src, dport, proto)) {
		ep = pol_ipc6_find(c, dst);
		*reason = POL_DROP_INGRESS_DENIED;
		*pol_id = ep ? ep->pol[POL_DIR_INGRESS] : 0;
		return false;
	}
	return true;
}

static const char *id_name(uint32_t id, char *buf, size_t len)
{
	if (id == POL_ID_ANY)
		return "any";
	if (id == POL_ID_WORLD)
		return "world";
	if (id == POL_ID_HOST)
		return "host";
	if (id == POL_ID_PROXY)
		return "node-proxy";
	if (id >= POL_ID_FIRST_CIDR)
		snprintf(buf, len, "cidr#%u", id - POL_ID_FIRST_CIDR);
	else
		snprintf(buf, len, "id#%u", id);
	return buf;
}

static const char *proto_name(uint8_t p)
{
	return p == IPPROTO_TCP ? "TCP" : p == IPPROTO_UDP ? "UDP" : p == IPPROTO_SCTP ? "SCTP" : "?";
}

void pol_compiled_dump(const struct pol_compiled *c, FILE *f)
{
	char a[INET6_ADDRSTRLEN], b1[32], b2[32];

	fprintf(f, "identities %d, ipcache %d, cidr classes %d, rules %d, policies %d\n",
		c->n_ids, c->n_ipc, c->n_cidrs, c->n_rules, c->n_policies);
	if (c->n_ipc6 || c->n_cidrs6)
		fprintf(f, "ipcache6 %d, cidr6 classes %d\n", c->n_ipc6, c->n_cidrs6);
	for (int i = 0; i < c->n_ids; i++)
		fprintf(f, "  identity %u ns=%s pods=%d\n", c->ids[i].id, c->ids[i].ns,
			c->ids[i].n_pods);
	for (int i = 0; i < c->n_ipc; i++) {
		const struct pol_ipc_val *v = &c->ipc[i].val;

		inet_ntop(AF_INET, &c->ipc[i].ip, a, sizeof(a));
		fprintf(f, "  ip %-15s %s%s%s%s\n", a, id_name(v->id, b1, sizeof(b1)),
			v->flags & POL_F_LOCAL ? " local" : "",
			v->flags & POL_F_ISO_INGRESS ? " isolated-ingress" : "",
			v->flags & POL_F_ISO_EGRESS ? " isolated-egress" : "");
	}
	for (int i = 0; i < c->n_ipc6; i++) {
		const struct pol_ipc_val *v = &c->ipc6[i].val;

		inet_ntop(AF_INET6, c->ipc6[i].ip, a, sizeof(a));
		fprintf(f, "  ip %-15s %s%s%s%s\n", a, id_name(v->id, b1, sizeof(b1)),
			v->flags & POL_F_LOCAL ? " local" : "",
			v->flags & POL_F_ISO_INGRESS ? " isolated-ingress" : "",
			v->flags & POL_F_ISO_EGRESS ? " isolated-egress" : "");
	}
	for (int i = 0; i < c->n_cidrs6; i++) {
		inet_ntop(AF_INET6, c->cidrs6[i].net, a, sizeof(a));
		fprintf(f, "  class cidr#%u %s/%u\n", c->cidrs6[i].class_id - POL_ID_FIRST_CIDR, a,
			c->cidrs6[i].len);
	}
	for (int i = 0; i < c->n_cidrs; i++) {
		inet_ntop(AF_INET, &c->cidrs[i].net, a, sizeof(a));
		fprintf(f, "  class cidr#%u %s/%u\n", c->cidrs[i].class_id - POL_ID_FIRST_CIDR, a,
			c->cidrs[i].len);
	}
	for (int i = 0; i < c->n_rules; i++) {
		const struct pol_rule_key *k = &c->rules[i].key;
		int bits = (int)k->prefixlen - POL_PLEN_ANY_PORT;

		fprintf(f, "  rule %s %s %s %s ", id_name(ntohl(k->local), b1, sizeof(b1)),
			k->dir == POL_DIR_INGRESS ? "from" : "to",
			id_name(ntohl(k->peer), b2, sizeof(b2)), proto_name(k->proto));
		if (!bits)
			fprintf(f, "any");
		else if (bits == 16)
			fprintf(f, "%u", ntohs(k->port));
		else
			fprintf(f, "%u-%u", ntohs(k->port),
				ntohs(k->port) + (1u << (16 - bits)) - 1);
		fprintf(f, " (policy %u)\n", c->rules[i].val.pol);
	}
}
