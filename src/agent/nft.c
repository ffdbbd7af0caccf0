/* nft.c — the baseline users would otherwise have: kube-proxy-style
 * nftables DNAT, rendered from the same struct ag_compiled as the BPF maps.
 *
 * One table per address family, `table ip zerohop` for IPv4 ClusterIPs
 * and `table ip6 zerohop` for IPv6 ones (docs/ipv6.md), the same layout in
 * each, all replaced atomically by one `nft -f` run:
 *   map svc     VIP . port . proto -> goto svc_N      one element per service
 *   set noep    VIP . port . proto                    services without endpoints
 *   chain svc_N numgen random mod TOTAL vmap { ranges -> goto ep_N_I }
 *               (ranges proportional to the compiled weights)
 *   chain ep_N_I  dnat to BACKEND:PORT (hairpin: marked, masqueraded in
 *                 nat postrouting, as kube-proxy does)
 *   nat prerouting/output  daddr . th dport . l4proto vmap @svc
 *   filter prerouting/output  in @noep: reject (TCP reset / ICMP or ICMPv6
 *                             unreachable), so a client sees ECONNREFUSED
 *                             as with BPF.
 * The compiler gives a Service's IPv6 ClusterIP its own entry with the
 * endpoints' IPv6 addresses (src/agent/compile.c rule 5), so each entry
 * lands whole in one table. The ip6 table is written only when there is an
 * IPv6 entry, and deleted in every run, so a cluster without IPv6 gets
 * exactly the IPv4 table it always had.
 * Works in the node's network namespace: pods' packets pass its prerouting,
 * node processes its output; conntrack reverses the DNAT on replies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "zerohop/agent.h"
#include "zerohop/log.h"
#include "zerohop/run.h"

#define NFT_TOTAL 100000	/* resolution of the weighted ranges */
#define NFT_MASQ_MARK 0x4000	/* kube-proxy's masquerade bit */
#define NFT_CLEANUP "table ip zerohop\ndelete table ip zerohop\n" \
		    "table ip6 zerohop\ndelete table ip6 zerohop\n"

/* What differs between the two tables. */
struct nft_family {
	const char *table;	/* nft family keyword */
	const char *addr_type;	/* set/map key type */
	const char *match;	/* address match prefix */
	bool v6;
};

static const struct nft_family nft_v4 = { "ip", "ipv4_addr", "ip", false };
static const struct nft_family nft_v6 = { "ip6", "ipv6_addr", "ip6", true };

static const char *proto_str(uint8_t p)
{
	return p == ZH_LB_UDP ? "udp" : "tcp";
}

/* An IPv4 (v4-mapped) entry goes to the ip table, any other to ip6. */
static bool is_v4(const struct ag_svc *s)
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(s->key.vip, pre, sizeof(pre));
}

static bool in_family(const struct ag_svc *s, const struct nft_family *fam)
{
	return is_v4(s) != fam->v6;
}

/* The backends nft can DNAT to: none for an IPv6 L7 entry, whose one
 * backend is the IPv4 ClusterIP the node proxy routes by (compile.c rule
 * 5), which nft mode does not capture: it rejects, as before the proxy
 * had an IPv6 path. */
static int nft_n_be(const struct ag_svc *s, const struct nft_family *fam)
{
	return fam->v6 && (s->flags & ZH_LB_F_L7) ? 0 : s->n_be;
}

/* ADDR (16 bytes, v4-mapped for IPv4) as FAM writes it. */
static const char *addr_str(const uint8_t addr[16], const struct nft_family *fam,
			    char *buf, size_t len)
{
	uint32_t ip;

	if (fam->v6)
		return inet_ntop(AF_INET6, addr, buf, len);
	ip = ag_v4_of(addr);
	return inet_ntop(AF_INET, &ip, buf, len);
}

static void render_svc_chains(const struct ag_compiled *c, const struct nft_family *fam,
			      FILE *f, int *n_svc)
{
	char be[INET6_ADDRSTRLEN];
	int i, j;

	for (i = 0; i < c->n_svcs; i++) {
		const struct ag_svc *s = &c->svcs[i];
		double sum = 0, acc = 0;
		int lo = 0;

		if (!nft_n_be(s, fam) || !in_family(s, fam))
			continue;
		for (j = 0; j < s->n_be; j++)
			sum += s->be[j].weight;
		fprintf(f, "\tchain svc_%d {\n\t\tnumgen random mod %d vmap {", i, NFT_TOTAL);
		for (j = 0; j < s->n_be; j++) {
			int hi;

			acc += s->be[j].weight;
			hi = j == s->n_be - 1 ? NFT_TOTAL : (int)(acc / sum * NFT_TOTAL + 0.5);
			if (hi <= lo)
				continue;	/* below the resolution: no range */
			if (hi - 1 == lo)
				fprintf(f, "%s %d : goto ep_%d_%d", lo ? "," : "", lo, i, j);
			else
				fprintf(f, "%s %d-%d : goto ep_%d_%d", lo ? "," : "", lo, hi - 1, i, j);
			lo = hi;
		}
		fprintf(f, " }\n\t}\n");
		for (j = 0; j < s->n_be; j++) {
			addr_str(s->be[j].be.addr, fam, be, sizeof(be));
			/* Hairpin (a pod reaching itself through the VIP): its reply
			 * would bypass the node, so masquerade it, as kube-proxy does. */
			fprintf(f, "\tchain ep_%d_%d {\n\t\t%s saddr %s meta mark set meta mark | 0x%x\n"
				"\t\tmeta l4proto %s dnat to %s%s%s:%u\n\t}\n", i, j, fam->match, be,
				NFT_MASQ_MARK, proto_str(s->key.proto), fam->v6 ? "[" : "", be,
				fam->v6 ? "]" : "", ntohs(s->be[j].be.port));
		}
		(*n_svc)++;
	}
}

/* The elements of the svc map (WITH_BE) or of the noep set (!WITH_BE). */
static void render_elements(const struct ag_compiled *c, const struct nft_family *fam,
			    FILE *f, bool with_be)
{
	char vip[INET6_ADDRSTRLEN];
	int i, n = 0;

	for (i = 0; i < c->n_svcs; i++) {
		const struct ag_svc *s = &c->svcs[i];

		if (!nft_n_be(s, fam) == with_be || !in_family(s, fam))
			continue;
		addr_str(s->key.vip, fam, vip, sizeof(vip));
		fprintf(f, "%s\n\t\t\t%s . %u . %s", n++ ? "," : "\t\telements = {", vip,
			ntohs(s->key.port), proto_str(s->key.proto));
		if (with_be)
			fprintf(f, " : goto svc_%d", i);
	}
	if (n)
		fprintf(f, "\n\t\t}\n");
}

static void render_table(const struct ag_compiled *c, const struct nft_family *fam, FILE *f)
{
	const char *m = fam->match;
	int n_svc = 0;

	fprintf(f, "table %s zerohop {\n", fam->table);
	render_svc_chains(c, fam, f, &n_svc);
	fprintf(f, "\tmap svc {\n\t\ttype %s . inet_service . inet_proto : verdict\n", fam->addr_type);
	render_elements(c, fam, f, true);
	fprintf(f, "\t}\n\tset noep {\n\t\ttype %s . inet_service . inet_proto\n", fam->addr_type);
	render_elements(c, fam, f, false);
	fprintf(f, "\t}\n"
		"\tchain nat_prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n"
		"\t\t%s daddr . th dport . meta l4proto vmap @svc\n\t}\n"
		"\tchain nat_output {\n\t\ttype nat hook output priority -100; policy accept;\n"
		"\t\t%s daddr . th dport . meta l4proto vmap @svc\n\t}\n"
		"\tchain nat_postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n"
		"\t\tmeta mark & 0x%x == 0x%x masquerade\n\t}\n"
		"\tchain noep_prerouting {\n\t\ttype filter hook prerouting priority -110; policy accept;\n"
		"\t\t%s daddr . th dport . meta l4proto @noep meta l4proto tcp reject with tcp reset\n"
		"\t\t%s daddr . th dport . meta l4proto @noep reject\n\t}\n"
		"\tchain noep_output {\n\t\ttype filter hook output priority -110; policy accept;\n"
		"\t\t%s daddr . th dport . meta l4proto @noep meta l4proto tcp reject with tcp reset\n"
		"\t\t%s daddr . th dport . meta l4proto @noep reject\n\t}\n"
		"}\n", m, m, NFT_MASQ_MARK, NFT_MASQ_MARK, m, m, m, m);
}

int ag_nft_render(const struct ag_compiled *c, FILE *f)
{
	bool any_v6 = false;
	int i;

	for (i = 0; i < c->n_svcs; i++)
		any_v6 |= !is_v4(&c->svcs[i]);
	fputs(NFT_CLEANUP, f);	/* "table" first makes each delete idempotent */
	render_table(c, &nft_v4, f);
	if (any_v6)
		render_table(c, &nft_v6, f);
	return ferror(f) ? -EIO : 0;
}

static int run_nft(const char *script_path)
{
	char *argv[] = { "nft", "-f", (char *)script_path, NULL };
	int rc = zh_run(argv);

	return rc < 0 ? rc : rc ? -EIO : 0;
}

int ag_nft_apply(const struct ag_compiled *c)
{
	char path[] = "/tmp/zerohop-nft-XXXXXX";
	FILE *f = NULL;
	int fd, ret;

	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		ret = -errno;
		close(fd);
		goto out;
	}
	ret = ag_nft_render(c, f);
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret)
		ret = run_nft(path);
	if (ret)
		zh_err("nft: applying the rules failed (nft's message above)");
out:
	unlink(path);
	return ret;
}

int ag_nft_cleanup(void)
{
	char path[] = "/tmp/zerohop-nft-XXXXXX";
	int fd, ret;

	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	/* "table" first makes each delete idempotent. */
	if (write(fd, NFT_CLEANUP, sizeof(NFT_CLEANUP) - 1) != sizeof(NFT_CLEANUP) - 1) {
		ret = -EIO;
		close(fd);
		goto out;
	}
	close(fd);
	ret = run_nft(path);
out:
	unlink(path);
	return ret;
}
