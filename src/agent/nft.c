/* nft.c — the baseline users would otherwise have: kube-proxy-style
 * nftables DNAT, rendered from the same struct ag_compiled as the BPF maps.
 *
 * Layout of `table ip zerohop` (replaced atomically by one `nft -f` run):
 *   map svc     VIP . port . proto -> goto svc_N      one element per service
 *   set noep    VIP . port . proto                    services without endpoints
 *   chain svc_N numgen random mod TOTAL vmap { ranges -> goto ep_N_I }
 *               (ranges proportional to the compiled weights)
 *   chain ep_N_I  dnat to BACKEND:PORT (hairpin: marked, masqueraded in
 *                 nat postrouting, as kube-proxy does)
 *   nat prerouting/output  ip daddr . th dport . l4proto vmap @svc
 *   filter prerouting/output  in @noep: reject (TCP reset / ICMP unreachable),
 *                             so a client sees ECONNREFUSED as with BPF.
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

static const char *proto_str(uint8_t p)
{
	return p == ZH_LB_UDP ? "udp" : "tcp";
}

/* An IPv4 (v4-mapped) entry: the table is `ip`; IPv6 ClusterIPs (docs/ipv6.md)
 * are not rendered in nft mode. */
static bool is_v4(const struct ag_svc *s)
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(s->key.vip, pre, sizeof(pre));
}

int ag_nft_render(const struct ag_compiled *c, FILE *f)
{
	char vip[INET_ADDRSTRLEN], be[INET_ADDRSTRLEN];
	int i, j, n_noep = 0, n_svc = 0;
	uint32_t ip;

	fprintf(f, "table ip zerohop\ndelete table ip zerohop\ntable ip zerohop {\n");
	for (i = 0; i < c->n_svcs; i++) {
		const struct ag_svc *s = &c->svcs[i];
		double sum = 0, acc = 0;
		int lo = 0;

		if (!s->n_be || !is_v4(s))
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
			ip = ag_v4_of(s->be[j].be.addr);
			inet_ntop(AF_INET, &ip, be, sizeof(be));
			/* Hairpin (a pod reaching itself through the VIP): its reply
			 * would bypass the node, so masquerade it, as kube-proxy does. */
			fprintf(f, "\tchain ep_%d_%d {\n\t\tip saddr %s meta mark set meta mark | 0x%x\n"
				"\t\tmeta l4proto %s dnat to %s:%u\n\t}\n", i, j, be, NFT_MASQ_MARK,
				proto_str(s->key.proto), be, ntohs(s->be[j].be.port));
		}
		n_svc++;
	}
	fprintf(f, "\tmap svc {\n\t\ttype ipv4_addr . inet_service . inet_proto : verdict\n");
	if (n_svc) {
		fprintf(f, "\t\telements = {");
		for (i = 0, j = 0; i < c->n_svcs; i++) {
			const struct ag_svc *s = &c->svcs[i];

			if (!s->n_be || !is_v4(s))
				continue;
			ip = ag_v4_of(s->key.vip);
			inet_ntop(AF_INET, &ip, vip, sizeof(vip));
			fprintf(f, "%s\n\t\t\t%s . %u . %s : goto svc_%d", j++ ? "," : "", vip,
				ntohs(s->key.port), proto_str(s->key.proto), i);
		}
		fprintf(f, "\n\t\t}\n");
	}
	fprintf(f, "\t}\n\tset noep {\n\t\ttype ipv4_addr . inet_service . inet_proto\n");
	for (i = 0; i < c->n_svcs; i++)
		n_noep += !c->svcs[i].n_be && is_v4(&c->svcs[i]);
	if (n_noep) {
		fprintf(f, "\t\telements = {");
		for (i = 0, j = 0; i < c->n_svcs; i++) {
			const struct ag_svc *s = &c->svcs[i];

			if (s->n_be || !is_v4(s))
				continue;
			ip = ag_v4_of(s->key.vip);
			inet_ntop(AF_INET, &ip, vip, sizeof(vip));
			fprintf(f, "%s\n\t\t\t%s . %u . %s", j++ ? "," : "", vip, ntohs(s->key.port),
				proto_str(s->key.proto));
		}
		fprintf(f, "\n\t\t}\n");
	}
	fprintf(f, "\t}\n"
		"\tchain nat_prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n"
		"\t\tip daddr . th dport . meta l4proto vmap @svc\n\t}\n"
		"\tchain nat_output {\n\t\ttype nat hook output priority -100; policy accept;\n"
		"\t\tip daddr . th dport . meta l4proto vmap @svc\n\t}\n"
		"\tchain nat_postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n"
		"\t\tmeta mark & 0x%x == 0x%x masquerade\n\t}\n"
		"\tchain noep_prerouting {\n\t\ttype filter hook prerouting priority -110; policy accept;\n"
		"\t\tip daddr . th dport . meta l4proto @noep meta l4proto tcp reject with tcp reset\n"
		"\t\tip daddr . th dport . meta l4proto @noep reject\n\t}\n"
		"\tchain noep_output {\n\t\ttype filter hook output priority -110; policy accept;\n"
		"\t\tip daddr . th dport . meta l4proto @noep meta l4proto tcp reject with tcp reset\n"
		"\t\tip daddr . th dport . meta l4proto @noep reject\n\t}\n"
		"}\n", NFT_MASQ_MARK, NFT_MASQ_MARK);
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
	/* "table" first makes the delete idempotent. */
	if (write(fd, "table ip zerohop\ndelete table ip zerohop\n", 41) != 41) {
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
