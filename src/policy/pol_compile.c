/* pol_compile.c — NetworkPolicy compiler: md_state -> policy map contents.
 *
 * Design note
 * -----------
 * A pure function (no BPF, no I/O). The datapath answers "may local pod L talk
 * to peer P in direction D on proto/port" with at most three LPM lookups,
 * whatever the number of policies:
 *	rules[L.id, P.id,   D, proto, port]	P is a pod (identity)
 *	rules[L.id, ANY,    D, proto, port]	rule without peers
 *	rules[L.id, class,  D, proto, port]	class = cidr LPM(P's address)
 * and only when L is isolated for D (ipcache flag); otherwise it allows.
 *
 * Invariants this file keeps (tests/unit/policy/ check them):
 *  1. Identity = (namespace, label set, named container ports). Every pod of
 *     one identity is selected by exactly the same selectors and resolves
 *     every named port the same way, so a rule entry keyed by identity is
 *     exact for each pod.
 *  2. Classes: S = every ipBlock cidr and except prefix, plus the /32 of each
 *     pod that an egress ipBlock rule with a named port can reach. For an
 *     address x with longest match P in S, x is in prefix Q of S iff Q
 *     contains P; so membership of x in every ipBlock is a function of P,
 *     and a rule entry per (block, class inside it, not inside an except)
 *     is exact. An address matching nothing in S is in no ipBlock.
 *  3. Ports: a number is one /96 entry, a range [p, endPort] at most 30
 *     prefixes, "no port" one /80 entry per protocol; a rule without ports
 *     gets /80 entries for TCP, UDP and SCTP, never anything else, and a
 *     protocol never opens another one.
 *  4. Named ports resolve against the destination: the local identity for
 *     ingress, the peer identity for egress (a peer without identity cannot
 *     match a named egress port; ANY expands to every identity that has it).
 *  5. Output arrays are sorted and deduplicated, so the same state compiles
 *     to byte-identical tables (diffable, and the loader may skip no-ops).
 *  6. Every node's L7 proxy source address (pol_node_proxy_ip, and its
 *     IPv6 pol_node_proxy_ip6 in ipc6) is in the ipcache as POL_ID_PROXY /
 *     POL_F_PROXY, on every node, unless a pod holds that address (a pod
 *     always wins). Ingress admits it like the
 *     node itself (docs/policy.md "L7 Services").
 *  7. IPv6 (docs/ipv6.md "NetworkPolicy"): a pod with an IPv6 address has
 *     it in ipc6 with exactly the value of its IPv4 entry (same identity,
 *     flags, policies), so rules written by label hold for both families.
 *     A pod with an IPv6 only still gets an identity. IPv6 ipBlock
 *     prefixes are a class set of their own (invariant 2 within IPv6),
 *     numbered after the IPv4 classes; a block of one family never
 *     matches an address of the other (Kubernetes: an IPv4 cidr does not
 *     contain any IPv6 address).
 *  8. mTLS (bpf/policy.bpf.c invariant 11): an identity with a local pod
 *     and some port under STRICT (md_mtls_strict_ports) has POL_F_MTLS
 *     and rule entries {id, POL_ID_MTLS, ingress, TCP}: /80 its own mode,
 *     /96 each port whose mode differs; the longest match is the port's
 *     mode (enum pol_mtls_mode in the entry's pol). Exact per identity:
 *     PeerAuthentication selects by namespace and labels (invariant 1),
 *     and portLevelMtls names port numbers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "zerohop/log.h"
#include "zerohop/policy.h"
#include "zerohop/vec.h"
#include "pol_int.h"

const struct pol_limits pol_default_limits = {
	.ipcache = POL_MAX_IPCACHE,
	.cidrs = POL_MAX_CIDRS,
	.rules = POL_MAX_RULES,
	.policies = POL_MAX_POLICIES,
};

/* ---- selectors and ports ------------------------------------------------ */

/* A present selector against labels; an absent one is the caller's call.
 * The model's matcher is the one definition of LabelSelector semantics. */
bool pol_sel_match(const struct md_selector *sel, const struct md_labels *labels)
{
	return md_selector_matches(sel, labels);
}

uint8_t pol_ipproto(enum md_proto p)
{
	switch (p) {
	case MD_PROTO_TCP:
		return IPPROTO_TCP;
	case MD_PROTO_UDP:
		return IPPROTO_UDP;
	case MD_PROTO_SCTP:
		return IPPROTO_SCTP;
	}
	return 0;
}

/* Number of the named port on a pod for proto, 0 when it has none. */
static uint16_t pod_named_port(const struct md_pod *pod, const char *name, enum md_proto proto)
{
	for (int c = 0; c < pod->spec.n_containers; c++) {
		const struct md_container *ct = &pod->spec.containers[c];

		for (int i = 0; i < ct->n_ports; i++)
			if (ct->ports[i].name && ct->ports[i].proto == proto &&
			    strcmp(ct->ports[i].name, name) == 0)
				return ct->ports[i].port;
	}
	return 0;
}

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 16777619u;
	}
	return h;
}

/* ---- identities --------------------------------------------------------- */

struct cc_ident {
	char *canon;		/* ns \1 sorted k=v \2 sorted named ports */
	const struct md_pod *pod;	/* representative member */
	const char *ns;
	uint32_t id;
	bool local;		/* has a pod on the node */
	uint32_t flags;		/* POL_F_ISO_* */
	uint32_t pol[2];	/* policy a drop is charged to, per direction */
};

struct cc_pod {
	const struct md_pod *pod;
	int ident;		/* index into cc.ids */
	bool local;
};

struct cc {
	const struct md_state *st;
	const struct pol_limits *lim;
	struct md_err *err;
	struct cc_ident *ids;
	int n_ids;
	struct cc_pod *pods;
	int n_pods;
	/* classes */
	struct pol_cidr *cidrs;
	int n_cidrs, cap_cidrs;
	struct pol_cidr6 *cidrs6;	/* invariant 7 */
	int n_cidrs6, cap_cidrs6;
	/* rules */
	struct pol_rule *rules;
	int n_rules, cap_rules;
	bool overflow;
	/* policies, sorted by ns/name */
	const struct md_netpol **pols;
	uint32_t *pol_ids;
	int n_pols;
};

/* qsort that accepts an empty (NULL) array */
static void sort(void *base, int n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, (size_t)n, size, cmp);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *pod_canon(const struct md_pod *pod)
{
	char **parts = NULL;
	int n = 0, cap = 0;
	size_t len = strlen(pod->meta.ns) + 3;
	char *s, *w;

	for (int i = 0; i < pod->meta.labels.n; i++) {
		const struct md_kv *kv = &pod->meta.labels.v[i];
		char *p = zh_malloc(strlen(kv->key) + strlen(kv->value) + 3);

		sprintf(p, "%s=%s\x03", kv->key, kv->value);
		zh_reserve((void **)&parts, &cap, n + 1, sizeof(*parts));
		parts[n++] = p;
	}
	sort(parts, n, sizeof(*parts), cmp_str);
	int n_labels = n;

	for (int c = 0; c < pod->spec.n_containers; c++) {
		const struct md_container *ct = &pod->spec.containers[c];

		for (int i = 0; i < ct->n_ports; i++) {
			char *p;

			if (!ct->ports[i].name)
				continue;
			p = zh_malloc(strlen(ct->ports[i].name) + 32);
			sprintf(p, "%s/%d/%u\x03", ct->ports[i].name, (int)ct->ports[i].proto,
				ct->ports[i].port);
			zh_reserve((void **)&parts, &cap, n + 1, sizeof(*parts));
			parts[n++] = p;
		}
	}
	sort(parts + n_labels, n - n_labels, sizeof(*parts), cmp_str);
	for (int i = 0; i < n; i++)
		len += strlen(parts[i]);
	s = w = zh_malloc(len + 1);
	w += sprintf(w, "%s\x01", pod->meta.ns);
	for (int i = 0; i < n; i++) {
		if (i == n_labels)
			*w++ = '\x02';
		w = stpcpy(w, parts[i]);
		free(parts[i]);
	}
	if (n_labels == n)
		*w++ = '\x02';
	*w = 0;
	free(parts);
	return s;
}

struct canon_ref {
	char *canon;
	int pod;
};

static int cmp_canon_ref(const void *a, const void *b)
{
	const struct canon_ref *x = a, *y = b;
	int c = strcmp(x->canon, y->canon);

	return c ? c : x->pod - y->pod;
}

static bool ip6_set(const struct in6_addr *a)
{
	static const struct in6_addr zero;

	return memcmp(a, &zero, sizeof(zero)) != 0;
}

static int build_identities(struct cc *cc, const char *node)
{
	const struct md_state *st = cc->st;
	struct canon_ref *refs = zh_calloc((size_t)st->n_pods + 1, sizeof(*refs));
	int n = 0;

	for (int i = 0; i < st->n_pods; i++) {
		if (!st->pods[i].ip && !ip6_set(&st->pods[i].ip6))
			continue;	/* no address yet (invariant 7: either family) */
		refs[n].canon = pod_canon(&st->pods[i]);
		refs[n].pod = i;
		n++;
	}
	if ((uint32_t)n > cc->lim->ipcache) {
		snprintf(cc->err->msg, sizeof(cc->err->msg),
			 "%d pod IPs exceed the ipcache limit of %u", n, cc->lim->ipcache);
		snprintf(cc->err->field, sizeof(cc->err->field), "pods");
		for (int i = 0; i < n; i++)
			free(refs[i].canon);
		free(refs);
		return -E2BIG;
	}
	sort(refs, n, sizeof(*refs), cmp_canon_ref);
	cc->ids = zh_calloc((size_t)n + 1, sizeof(*cc->ids));
	cc->pods = zh_calloc((size_t)n + 1, sizeof(*cc->pods));
	for (int i = 0; i < n; i++) {
		const struct md_pod *pod = &st->pods[refs[i].pod];
		bool local = !node || (pod->spec.node_name && strcmp(pod->spec.node_name, node) == 0);

		if (cc->n_ids == 0 || strcmp(cc->ids[cc->n_ids - 1].canon, refs[i].canon) != 0) {
			struct cc_ident *id = &cc->ids[cc->n_ids++];

			id->canon = refs[i].canon;
			id->pod = pod;
			id->ns = pod->meta.ns;
			id->id = POL_ID_FIRST_POD + (uint32_t)(cc->n_ids - 1);
		} else {
			free(refs[i].canon);
		}
		cc->ids[cc->n_ids - 1].local |= local;
		cc->pods[cc->n_pods].pod = pod;
		cc->pods[cc->n_pods].ident = cc->n_ids - 1;
		cc->pods[cc->n_pods].local = local;
		cc->n_pods++;
	}
	free(refs);
	return 0;
}

/* ---- classes (ipBlock prefixes) ----------------------------------------- */

static uint32_t mask_of(int len)
{
	return len == 0 ? 0 : htonl(~0u << (32 - len));
}

/* Is prefix (a, alen) inside prefix (b, blen)? (network order) */
static bool prefix_in(uint32_t a, int alen, uint32_t b, int blen)
{
	return alen >= blen && (a & mask_of(blen)) == (b & mask_of(blen));
}

static void add_prefix(struct cc *cc, uint32_t net, int len)
{
	zh_reserve((void **)&cc->cidrs, &cc->cap_cidrs, cc->n_cidrs + 1, sizeof(*cc->cidrs));
	cc->cidrs[cc->n_cidrs].net = net & mask_of(len);
	cc->cidrs[cc->n_cidrs].len = (uint8_t)len;
	cc->cidrs[cc->n_cidrs].class_id = 0;
	cc->n_cidrs++;
}

int pol_cmp_cidr(const void *a, const void *b)
{
	const struct pol_cidr *x = a, *y = b;

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	if (x->net != y->net)
		return ntohl(x->net) < ntohl(y->net) ? -1 : 1;
	return 0;
}

static bool in_block(const struct md_ipblock *b, uint32_t net, int len)
{
	if (b->v6)
		return false;	/* invariant 7: no IPv4 address in an IPv6 block */
	if (!prefix_in(net, len, b->cidr, b->len))
		return false;
	for (int i = 0; i < b->n_except; i++)
		if (prefix_in(net, len, b->except[i], b->except_len[i]))
			return false;
	return true;
}

/* ---- IPv6 classes (invariant 7) ---- */

static void add_prefix6(struct cc *cc, const struct in6_addr *net, int len)
{
	struct pol_cidr6 *e;

	zh_reserve((void **)&cc->cidrs6, &cc->cap_cidrs6, cc->n_cidrs6 + 1, sizeof(*cc->cidrs6));
	e = &cc->cidrs6[cc->n_cidrs6++];
	memset(e, 0, sizeof(*e));
	for (int i = 0; i < 16; i++) {
		int keep = len - 8 * i;

		e->net[i] = net->s6_addr[i] &
			    (keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff00 >> keep));
	}
	e->len = (uint8_t)len;
}

int pol_cmp_cidr6(const void *a, const void *b)
{
	const struct pol_cidr6 *x = a, *y = b;

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->net, y->net, 16);
}

/* Is prefix net/len inside block b (and in none of its excepts)? */
static bool in_block6(const struct md_ipblock *b, const uint8_t net[16], int len)
{
	struct in6_addr a;

	memcpy(&a, net, 16);
	if (!b->v6 || len < b->len || !md_in_cidr6(&a, &b->cidr6, b->len))
		return false;
	for (int i = 0; i < b->n_except; i++)
		if (len >= b->except_len[i] && md_in_cidr6(&a, &b->except6[i], b->except_len[i]))
			return false;
	return true;
}

static bool rule_has_named(const struct md_np_rule *r)
{
	for (int i = 0; i < r->n_ports; i++)
		if (r->ports[i].port.present && r->ports[i].port.name)
			return true;
	return false;
}

static int build_classes(struct cc *cc)
{
	for (int p = 0; p < cc->n_pols; p++) {
		const struct md_netpol *np = cc->pols[p];

		for (int d = 0; d < 2; d++) {
			const struct md_np_rule *rules = d == POL_DIR_INGRESS ? np->ingress : np->egress;
			int n_rules = d == POL_DIR_INGRESS ? np->n_ingress : np->n_egress;

			for (int r = 0; r < n_rules; r++) {
				for (int k = 0; k < rules[r].n_peers; k++) {
					const struct md_np_peer *peer = &rules[r].peers[k];

					if (!peer->has_ipblock)
						continue;
					if (peer->ipblock.v6) {
						add_prefix6(cc, &peer->ipblock.cidr6, peer->ipblock.len);
						for (int e = 0; e < peer->ipblock.n_except; e++)
							add_prefix6(cc, &peer->ipblock.except6[e],
								    peer->ipblock.except_len[e]);
						if (d != POL_DIR_EGRESS || !rule_has_named(&rules[r]))
							continue;
						for (int i = 0; i < cc->n_pods; i++)
							if (ip6_set(&cc->pods[i].pod->ip6) &&
							    in_block6(&peer->ipblock,
								      cc->pods[i].pod->ip6.s6_addr, 128))
								add_prefix6(cc, &cc->pods[i].pod->ip6, 128);
						continue;
					}
					add_prefix(cc, peer->ipblock.cidr, peer->ipblock.len);
					for (int e = 0; e < peer->ipblock.n_except; e++)
						add_prefix(cc, peer->ipblock.except[e],
							   peer->ipblock.except_len[e]);
					if (d != POL_DIR_EGRESS || !rule_has_named(&rules[r]))
						continue;
					/* invariant 2: pods a named egress port may reach */
					for (int i = 0; i < cc->n_pods; i++)
						if (cc->pods[i].pod->ip &&
						    in_block(&peer->ipblock, cc->pods[i].pod->ip, 32))
							add_prefix(cc, cc->pods[i].pod->ip, 32);
				}
			}
		}
	}
	sort(cc->cidrs, cc->n_cidrs, sizeof(*cc->cidrs), pol_cmp_cidr);
	int n = 0;

	for (int i = 0; i < cc->n_cidrs; i++) {
		if (n && pol_cmp_cidr(&cc->cidrs[n - 1], &cc->cidrs[i]) == 0)
			continue;
		cc->cidrs[n] = cc->cidrs[i];
		cc->cidrs[n].class_id = POL_ID_FIRST_CIDR + (uint32_t)n;
		n++;
	}
	cc->n_cidrs = n;
	/* IPv6 classes, numbered after the IPv4 ones (invariant 7) */
	sort(cc->cidrs6, cc->n_cidrs6, sizeof(*cc->cidrs6), pol_cmp_cidr6);
	int n6 = 0;

	for (int i = 0; i < cc->n_cidrs6; i++) {
		if (n6 && pol_cmp_cidr6(&cc->cidrs6[n6 - 1], &cc->cidrs6[i]) == 0)
			continue;
		cc->cidrs6[n6] = cc->cidrs6[i];
		cc->cidrs6[n6].class_id = POL_ID_FIRST_CIDR + (uint32_t)(n + n6);
		n6++;
	}
	cc->n_cidrs6 = n6;
	if ((uint32_t)n6 > cc->lim->cidrs) {
		snprintf(cc->err->field, sizeof(cc->err->field), "ipBlock");
		snprintf(cc->err->msg, sizeof(cc->err->msg),
			 "%d distinct IPv6 ipBlock prefixes exceed the limit of %u", n6,
			 cc->lim->cidrs);
		return -E2BIG;
	}
	if ((uint32_t)n > cc->lim->cidrs) {
		snprintf(cc->err->field, sizeof(cc->err->field), "ipBlock");
		snprintf(cc->err->msg, sizeof(cc->err->msg),
			 "%d distinct ipBlock prefixes exceed the limit of %u", n, cc->lim->cidrs);
		return -E2BIG;
	}
	return 0;
}

/* ---- rule entries -------------------------------------------------------- */

static void emit(struct cc *cc, uint32_t local, uint32_t peer, int dir, uint8_t proto,
		 uint32_t port, int plen, uint32_t pol)
{
	struct pol_rule *r;

	if (cc->overflow)
		return;
	if ((uint32_t)cc->n_rules >= cc->lim->rules) {
		cc->overflow = true;
		return;
	}
	zh_reserve((void **)&cc->rules, &cc->cap_rules, cc->n_rules + 1, sizeof(*cc->rules));
	r = &cc->rules[cc->n_rules++];
	memset(r, 0, sizeof(*r));
	r->key.prefixlen = (uint32_t)plen;
	r->key.local = htonl(local);
	r->key.peer = htonl(peer);
	r->key.dir = (uint8_t)dir;
	r->key.proto = proto;
	r->key.port = htons((uint16_t)port);
	r->val.pol = pol;
}

/* [lo, hi] (host order, lo <= hi, 1..65535) as aligned power-of-two blocks. */
static void emit_range(struct cc *cc, uint32_t local, uint32_t peer, int dir, uint8_t proto,
		       uint32_t lo, uint32_t hi, uint32_t pol)
{
	while (lo <= hi) {
		int bits = 0;

		/* grow the block while aligned and inside the range */
		while (bits < 16 && (lo & ((2u << bits) - 1)) == 0 &&
		       lo + (2u << bits) - 1 <= hi)
			bits++;
		emit(cc, local, peer, dir, proto, lo, POL_PLEN_FULL - bits, pol);
		lo += 1u << bits;
	}
}

/* One peer of a rule after expansion: what the rule entry is keyed by, and
 * the identity that resolves named egress ports (-1: none). */
struct target {
	uint32_t key;
	int ident;
	bool named_only;	/* only named ports apply (ANY expanded for them) */
};

static const struct md_np_port all_ports[3] = {
	{ .has_proto = true, .proto = MD_PROTO_TCP },
	{ .has_proto = true, .proto = MD_PROTO_UDP },
	{ .has_proto = true, .proto = MD_PROTO_SCTP },
};

static void emit_rule(struct cc *cc, const struct cc_ident *local, int dir,
		      const struct md_np_rule *rule, const struct target *tg, int n_tg,
		      uint32_t pol)
{
	const struct md_np_port *ports = rule->n_ports ? rule->ports : all_ports;
	int n_ports = rule->n_ports ? rule->n_ports : 3;

	for (int t = 0; t < n_tg; t++) {
		for (int i = 0; i < n_ports; i++) {
			const struct md_np_port *pp = &ports[i];
			uint8_t proto = pol_ipproto(pp->proto);
			const struct md_pod *dst;
			uint16_t num;

			if (tg[t].named_only && !(pp->port.present && pp->port.name))
				continue;
			if (!pp->port.present) {
				emit(cc, local->id, tg[t].key, dir, proto, 0, POL_PLEN_ANY_PORT, pol);
				continue;
			}
			if (!pp->port.name) {
				uint32_t hi = pp->end_port ? pp->end_port : pp->port.num;

				emit_range(cc, local->id, tg[t].key, dir, proto, pp->port.num, hi, pol);
				continue;
			}
			/* invariant 4 */
			if (dir == POL_DIR_INGRESS)
				dst = local->pod;
			else if (tg[t].ident >= 0)
				dst = cc->ids[tg[t].ident].pod;
			else
				continue;
			num = pod_named_port(dst, pp->port.name, pp->proto);
			if (num)
				emit(cc, local->id, tg[t].key, dir, proto, num, POL_PLEN_FULL, pol);
		}
	}
}

static bool ns_matches(const struct cc *cc, const struct md_np_peer *peer,
		       const char *pol_ns, const char *ns)
{
	if (!peer->ns_sel.present)
		return strcmp(pol_ns, ns) == 0;
	return pol_sel_match(&peer->ns_sel, md_namespace_labels(cc->st, ns));
}

/* Expand the peers of a rule into targets. */
static int rule_targets(struct cc *cc, const struct md_netpol *np, int dir,
			const struct md_np_rule *rule, struct target **out)
{
	struct target *tg = NULL;
	int n = 0, cap = 0;
	bool named = dir == POL_DIR_EGRESS && rule_has_named(rule);

	if (rule->n_peers == 0) {
		if (!named) {
			zh_reserve((void **)&tg, &cap, n + 1, sizeof(*tg));
			tg[n++] = (struct target){ POL_ID_ANY, -1, false };
		} else {
			/* invariant 4: ANY + named egress port = every pod identity;
			 * numeric ports of the same rule still need ANY */
			zh_reserve((void **)&tg, &cap, n + 1, sizeof(*tg));
			tg[n++] = (struct target){ POL_ID_ANY, -1, false };
			for (int i = 0; i < cc->n_ids; i++) {
				zh_reserve((void **)&tg, &cap, n + 1, sizeof(*tg));
				tg[n++] = (struct target){ cc->ids[i].id, i, true };
			}
		}
		*out = tg;
		return n;
	}
	for (int k = 0; k < rule->n_peers; k++) {
		const struct md_np_peer *peer = &rule->peers[k];

		if (peer->has_ipblock && peer->ipblock.v6) {
			for (int c = 0; c < cc->n_cidrs6; c++) {
				const struct pol_cidr6 *cl = &cc->cidrs6[c];
				int ident = -1;

				if (!in_block6(&peer->ipblock, cl->net, cl->len))
					continue;
				if (named && cl->len == 128) {
					for (int i = 0; i < cc->n_pods; i++)
						if (!memcmp(cc->pods[i].pod->ip6.s6_addr, cl->net, 16))
							ident = cc->pods[i].ident;
				}
				zh_reserve((void **)&tg, &cap, n + 1, sizeof(*tg));
				tg[n++] = (struct target){ cl->class_id, ident, false };
			}
			continue;
		}
		if (peer->has_ipblock) {
			for (int c = 0; c < cc->n_cidrs; c++) {
				const struct pol_cidr *cl = &cc->cidrs[c];
				int ident = -1;

				if (!in_block(&peer->ipblock, cl->net, cl->len))
					continue;
				if (named && cl->len == 32) {
					for (int i = 0; i < cc->n_pods; i++)
						if (cc->pods[i].pod->ip && cc->pods[i].pod->ip == cl->net)
							ident = cc->pods[i].ident;
				}
				zh_reserve((void **)&tg, &cap, n + 1, sizeof(*tg));
				tg[n++] = (struct target){ cl->class_id, ident, false };
			}
			continue;
		}
		for (int i = 0; i < cc->n_ids; i++) {
			const struct cc_ident *id = &cc->ids[i];

			if (!ns_matches(cc, peer, np->meta.ns, id->ns))
				continue;
			if (peer->pod_sel.present &&
			    !pol_sel_match(&peer->pod_sel, &id->pod->meta.labels))
				continue;
			zh_reserve((void **)&tg, &cap, n + 1, sizeof(*tg));
			tg[n++] = (struct target){ id->id, i, false };
		}
	}
	*out = tg;
	return n;
}

static void compile_policy(struct cc *cc, int p)
{
	const struct md_netpol *np = cc->pols[p];
	bool types[2] = { np->type_ingress, np->type_egress };
	bool *sel = zh_calloc((size_t)cc->n_ids + 1, sizeof(*sel));
	int n_sel = 0;

	for (int i = 0; i < cc->n_ids; i++) {
		const struct cc_ident *id = &cc->ids[i];

		if (!id->local || strcmp(id->ns, np->meta.ns) != 0)
			continue;
		if (np->pod_sel.present && !pol_sel_match(&np->pod_sel, &id->pod->meta.labels))
			continue;
		sel[i] = true;
		n_sel++;
	}
	for (int d = 0; d < 2 && n_sel; d++) {
		const struct md_np_rule *rules = d == POL_DIR_INGRESS ? np->ingress : np->egress;
		int n_rules = d == POL_DIR_INGRESS ? np->n_ingress : np->n_egress;
		uint32_t iso = d == POL_DIR_INGRESS ? POL_F_ISO_INGRESS : POL_F_ISO_EGRESS;

		if (!types[d])
			continue;
		for (int i = 0; i < cc->n_ids; i++) {
			if (!sel[i])
				continue;
			if (!(cc->ids[i].flags & iso))
				cc->ids[i].pol[d] = cc->pol_ids[p];
			cc->ids[i].flags |= iso;
		}
		for (int r = 0; r < n_rules; r++) {
			struct target *tg = NULL;
			int n_tg = rule_targets(cc, np, d, &rules[r], &tg);

			for (int i = 0; i < cc->n_ids; i++)
				if (sel[i])
					emit_rule(cc, &cc->ids[i], d, &rules[r], tg, n_tg,
						  cc->pol_ids[p]);
			free(tg);
		}
	}
	free(sel);
}

/* ---- mTLS modes (invariant 8) ----------------------------------------- */

struct mtls_emit {
	struct cc *cc;
	uint32_t id;
};

static void mtls_port(void *arg, uint16_t port, bool strict)
{
	struct mtls_emit *m = arg;

	emit(m->cc, m->id, POL_ID_MTLS, POL_DIR_INGRESS, IPPROTO_TCP, port,
	     port ? POL_PLEN_FULL : POL_PLEN_ANY_PORT, strict ? POL_MTLS_STRICT : POL_MTLS_PLAIN);
}

static void compile_mtls(struct cc *cc)
{
	for (int i = 0; i < cc->n_ids; i++) {
		struct cc_ident *id = &cc->ids[i];
		struct mtls_emit m = { cc, id->id };

		if (id->local && md_mtls_strict_ports(cc->st, id->pod, mtls_port, &m))
			id->flags |= POL_F_MTLS;
	}
}

int pol_cmp_rule(const void *a, const void *b)
{
	const struct pol_rule *x = a, *y = b;
	int c = memcmp(&x->key.local, &y->key.local, 12);

	if (c)
		return c;
	if (x->key.prefixlen != y->key.prefixlen)
		return x->key.prefixlen < y->key.prefixlen ? -1 : 1;
	return 0;
}

static int cmp_rule_pol(const void *a, const void *b)
{
	const struct pol_rule *x = a, *y = b;
	int c = pol_cmp_rule(a, b);

	if (c)
		return c;
	return x->val.pol < y->val.pol ? -1 : x->val.pol > y->val.pol;
}

static int cmp_pol(const void *a, const void *b)
{
	const struct md_netpol *x = *(const struct md_netpol *const *)a;
	const struct md_netpol *y = *(const struct md_netpol *const *)b;
	int c = strcmp(x->meta.ns, y->meta.ns);

	return c ? c : strcmp(x->meta.name, y->meta.name);
}

int pol_cmp_ipc6(const void *a, const void *b)
{
	return memcmp(((const struct pol_ipc6 *)a)->ip, ((const struct pol_ipc6 *)b)->ip, 16);
}

/* The IPv6 ipcache (invariant 7): each pod's IPv6 with its IPv4 entry's
 * value (pods: the first n_pods entries of c->ipc, before VIPs are added),
 * the Services' IPv6 ClusterIPs as VIPs; a pod wins over a VIP. */
static void build_ipc6(const struct cc *cc, struct pol_compiled *c, const struct pol_ipc_val *pv)
{
	const struct md_state *st = cc->st;
	int n = 0;

	c->ipc6 = zh_calloc((size_t)cc->n_pods + (size_t)st->n_services +
				    (size_t)st->cluster.n_nodes + 1, sizeof(*c->ipc6));
	for (int i = 0; i < cc->n_pods; i++) {
		if (!ip6_set(&cc->pods[i].pod->ip6))
			continue;
		memcpy(c->ipc6[c->n_ipc6].ip, cc->pods[i].pod->ip6.s6_addr, 16);
		c->ipc6[c->n_ipc6++].val = pv[i];
	}
	for (int i = 0; i < st->n_services; i++) {
		const struct md_service *sv = &st->services[i];

		if (!ip6_set(&sv->cluster_ip6) || sv->headless)
			continue;
		memcpy(c->ipc6[c->n_ipc6].ip, sv->cluster_ip6.s6_addr, 16);
		c->ipc6[c->n_ipc6++].val = (struct pol_ipc_val){ .id = POL_ID_WORLD,
								 .flags = POL_F_VIP };
	}
	/* the node proxies' IPv6 upstream source addresses (invariant 6) */
	for (int i = 0; i < st->cluster.n_nodes; i++) {
		struct in6_addr pip;

		if (!pol_node_proxy_ip6(&st->cluster, i, &pip))
			continue;
		memcpy(c->ipc6[c->n_ipc6].ip, pip.s6_addr, 16);
		c->ipc6[c->n_ipc6++].val = (struct pol_ipc_val){ .id = POL_ID_PROXY,
								 .flags = POL_F_PROXY };
	}
	sort(c->ipc6, c->n_ipc6, sizeof(*c->ipc6), pol_cmp_ipc6);
	for (int i = 0; i < c->n_ipc6; i++) {
		if (n && !memcmp(c->ipc6[n - 1].ip, c->ipc6[i].ip, 16)) {
			char a[INET6_ADDRSTRLEN];

			uint32_t rsv = POL_F_VIP | POL_F_PROXY;

			if ((c->ipc6[n - 1].val.flags & rsv) && !(c->ipc6[i].val.flags & rsv))
				c->ipc6[n - 1] = c->ipc6[i];	/* a pod wins over a VIP */
			else if (!(c->ipc6[i].val.flags & rsv)) {
				inet_ntop(AF_INET6, c->ipc6[i].ip, a, sizeof(a));
				zh_warn("policy: two pods share IP %s; using the first", a);
			}
			continue;
		}
		c->ipc6[n++] = c->ipc6[i];
	}
	c->n_ipc6 = n;
}

int pol_cmp_ipc(const void *a, const void *b)
{
	const struct pol_ipc *x = a, *y = b;

	return ntohl(x->ip) < ntohl(y->ip) ? -1 : ntohl(x->ip) > ntohl(y->ip);
}

/* ---- entry point ---------------------------------------------------------- */

int pol_compile(const struct md_state *st, const char *node, const struct pol_limits *lim,
		struct pol_compiled **out, struct md_err *err)
{
	struct cc cc = { .st = st, .lim = lim ? lim : &pol_default_limits, .err = err };
	struct pol_compiled *c = NULL;
	int ret;

	memset(err, 0, sizeof(*err));
	snprintf(err->file, sizeof(err->file), "<policy>");
	*out = NULL;
	if ((uint32_t)st->n_netpols > cc.lim->policies) {
		snprintf(err->field, sizeof(err->field), "NetworkPolicy");
		snprintf(err->msg, sizeof(err->msg), "%d policies exceed the limit of %u",
			 st->n_netpols, cc.lim->policies);
		return -E2BIG;
	}
	ret = build_identities(&cc, node);
	if (ret)
		goto out;

	cc.n_pols = st->n_netpols;
	cc.pols = zh_calloc((size_t)cc.n_pols + 1, sizeof(*cc.pols));
	cc.pol_ids = zh_calloc((size_t)cc.n_pols + 1, sizeof(*cc.pol_ids));
	for (int i = 0; i < cc.n_pols; i++)
		cc.pols[i] = &st->netpols[i];
	sort(cc.pols, cc.n_pols, sizeof(*cc.pols), cmp_pol);
	ret = pol_assign_ids(cc.pols, cc.n_pols, cc.pol_ids);
	if (ret)
		goto out;

	ret = build_classes(&cc);
	if (ret)
		goto out;
	for (int p = 0; p < cc.n_pols; p++)
		compile_policy(&cc, p);
	compile_mtls(&cc);
	if (cc.overflow) {
		snprintf(err->field, sizeof(err->field), "NetworkPolicy");
		snprintf(err->msg, sizeof(err->msg),
			 "compiled rules exceed the rule map limit of %u entries", cc.lim->rules);
		ret = -E2BIG;
		goto out;
	}

	c = zh_calloc(1, sizeof(*c));
	/* rules: sort, keep the lowest policy id per key (invariant 5) */
	sort(cc.rules, cc.n_rules, sizeof(*cc.rules), cmp_rule_pol);
	c->rules = zh_calloc((size_t)cc.n_rules + 1, sizeof(*c->rules));
	for (int i = 0; i < cc.n_rules; i++) {
		if (c->n_rules && pol_cmp_rule(&c->rules[c->n_rules - 1], &cc.rules[i]) == 0)
			continue;
		c->rules[c->n_rules++] = cc.rules[i];
	}
	c->ids = zh_calloc((size_t)cc.n_ids + 1, sizeof(*c->ids));
	for (int i = 0; i < cc.n_ids; i++) {
		c->ids[i].id = cc.ids[i].id;
		c->ids[i].ns = zh_strdup(cc.ids[i].ns);
		c->ids[i].first_pod = (int)(cc.ids[i].pod - st->pods);
	}
	c->n_ids = cc.n_ids;
	c->ipc = zh_calloc((size_t)cc.n_pods + 1, sizeof(*c->ipc));
	struct pol_ipc_val *pv = zh_calloc((size_t)cc.n_pods + 1, sizeof(*pv));

	for (int i = 0; i < cc.n_pods; i++) {
		const struct cc_ident *id = &cc.ids[cc.pods[i].ident];

		c->ids[cc.pods[i].ident].n_pods++;
		pv[i].id = id->id;
		pv[i].flags = cc.pods[i].local ? (POL_F_LOCAL | id->flags) : 0;
		pv[i].pol[0] = cc.pods[i].local ? id->pol[0] : 0;
		pv[i].pol[1] = cc.pods[i].local ? id->pol[1] : 0;
		if (cc.pods[i].local)
			c->n_local_pods++;
		if (!cc.pods[i].pod->ip)
			continue;	/* an IPv6-only pod: ipc6 alone */
		c->ipc[c->n_ipc].ip = cc.pods[i].pod->ip;
		c->ipc[c->n_ipc].val = pv[i];
		c->n_ipc++;
	}
	build_ipc6(&cc, c, pv);
	free(pv);
	/* Service VIPs: connect4 leaves them to cgroup_skb (judged on the backend) */
	for (int i = 0; i < st->n_services; i++) {
		const struct md_service *sv = &st->services[i];

		if (!sv->cluster_ip || sv->headless)
			continue;
		c->ipc = zh_realloc(c->ipc, (size_t)(c->n_ipc + 1) * sizeof(*c->ipc));
		c->ipc[c->n_ipc].ip = sv->cluster_ip;
		c->ipc[c->n_ipc].val = (struct pol_ipc_val){ .id = POL_ID_WORLD, .flags = POL_F_VIP };
		c->n_ipc++;
	}
	/* the node proxies' upstream source addresses (invariant 6) */
	for (int i = 0; i < st->cluster.n_nodes; i++) {
		uint32_t pip = pol_node_proxy_ip(&st->cluster, i);

		if (!pip)
			continue;
		c->ipc = zh_realloc(c->ipc, (size_t)(c->n_ipc + 1) * sizeof(*c->ipc));
		c->ipc[c->n_ipc].ip = pip;
		c->ipc[c->n_ipc].val = (struct pol_ipc_val){ .id = POL_ID_PROXY, .flags = POL_F_PROXY };
		c->n_ipc++;
	}
	sort(c->ipc, c->n_ipc, sizeof(*c->ipc), pol_cmp_ipc);
	/* two pods with one IP (a stale runtime pod): keep the first, loudly */
	int n = 0;

	for (int i = 0; i < c->n_ipc; i++) {
		if (n && c->ipc[n - 1].ip == c->ipc[i].ip) {
			uint32_t rsv = POL_F_VIP | POL_F_PROXY;
			bool proxy = (c->ipc[n - 1].val.flags | c->ipc[i].val.flags) & POL_F_PROXY;
			char a[INET_ADDRSTRLEN];

			if ((c->ipc[n - 1].val.flags & rsv) && !(c->ipc[i].val.flags & rsv))
				c->ipc[n - 1] = c->ipc[i];	/* a pod wins over a VIP */
			if (proxy)
				continue;	/* (a pod on .1: a plan without proxies) */
			inet_ntop(AF_INET, &c->ipc[i].ip, a, sizeof(a));
			zh_warn("policy: two pods share IP %s; using the first", a);
			continue;
		}
		c->ipc[n++] = c->ipc[i];
	}
	c->n_ipc = n;
	c->cidrs = cc.cidrs;
	c->n_cidrs = cc.n_cidrs;
	cc.cidrs = NULL;
	c->cidrs6 = cc.cidrs6;
	c->n_cidrs6 = cc.n_cidrs6;
	cc.cidrs6 = NULL;
	c->n_policies = cc.n_pols;
	c->policy_names = zh_calloc((size_t)cc.n_pols + 1, sizeof(char *));
	c->policy_ids = cc.pol_ids;
	cc.pol_ids = NULL;
	for (int i = 0; i < cc.n_pols; i++) {
		char *s = zh_malloc(strlen(cc.pols[i]->meta.ns) + strlen(cc.pols[i]->meta.name) + 2);

		sprintf(s, "%s/%s", cc.pols[i]->meta.ns, cc.pols[i]->meta.name);
		c->policy_names[i] = s;
	}
	*out = c;
	ret = 0;
out:
	for (int i = 0; i < cc.n_ids; i++)
		free(cc.ids[i].canon);
	free(cc.ids);
	free(cc.pods);
	free(cc.cidrs);
	free(cc.cidrs6);
	free(cc.rules);
	free(cc.pols);
	free(cc.pol_ids);
	return ret;
}

bool pol_node_proxy_ip6(const struct md_cluster *cl, int i, struct in6_addr *out)
{
	int len = cl->pod_cidr6_len;

	/* a /56 or shorter holds 256 /64s or more: node i's is byte 7 + i */
	if (!len || len > 56 || i < 0 || i > 255)
		return false;
	*out = cl->pod_cidr6;
	out->s6_addr[7] = (uint8_t)(out->s6_addr[7] + i);
	memset(&out->s6_addr[8], 0, 7);
	out->s6_addr[15] = 1;
	return true;
}

uint32_t pol_node_proxy_ip(const struct md_cluster *cl, int i)
{
	int len = cl->pod_cidr_len;

	if (!cl->pod_cidr || len > 24 || len < 8 || i < 0 || (uint32_t)i >= 1u << (24 - len))
		return 0;
	return htonl(ntohl(cl->pod_cidr) + ((uint32_t)i << 8) + 1);
}

/* Stable id per policy: FNV-1a of "ns/name", linear probing on collision
 * (in name order, so it is deterministic); never 0. */
int pol_assign_ids(const struct md_netpol **pols, int n, uint32_t *ids)
{
	uint32_t size = 64, *set;

	while (size < (uint32_t)n * 2)
		size *= 2;
	set = zh_calloc(size, sizeof(*set));	/* open addressing, 0 = empty */
	for (int i = 0; i < n; i++) {
		char buf[POL_NAME_MAX];
		uint32_t h, slot;

		snprintf(buf, sizeof(buf), "%s/%s", pols[i]->meta.ns, pols[i]->meta.name);
		h = fnv1a(buf);
		for (;;) {
			if (h == 0)
				h = 1;
			for (slot = h & (size - 1); set[slot] && set[slot] != h;
			     slot = (slot + 1) & (size - 1))
				;
			if (!set[slot])
				break;
			h++;	/* taken by another policy */
		}
		set[slot] = h;
		ids[i] = h;
	}
	free(set);
	return 0;
}

void pol_compiled_free(struct pol_compiled *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n_ids; i++)
		free(c->ids[i].ns);
	free(c->ids);
	free(c->ipc);
	free(c->cidrs);
	free(c->ipc6);
	free(c->cidrs6);
	free(c->rules);
	for (int i = 0; i < c->n_policies; i++)
		free(c->policy_names[i]);
	free(c->policy_names);
	free(c->policy_ids);
	free(c);
}
