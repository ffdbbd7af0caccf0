/* pol_kernel.h — run probes through the real policy programs with
 * BPF_PROG_TEST_RUN, and compare them with the reference and with pol_eval.
 * Header-only; shared by test_bpf_prop.c and test_conformance.c. */
#ifndef ZH_POL_KERNEL_H
#define ZH_POL_KERNEL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <netinet/in.h>

#include <bpf/bpf.h>

#include "tap.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"

static enum md_proto proto_of(const char *s)
{
	return strcmp(s, "UDP") == 0 ? MD_PROTO_UDP : strcmp(s, "SCTP") == 0 ? MD_PROTO_SCTP :
									 MD_PROTO_TCP;
}

/* The first bytes of a TCP SYN / UDP / SCTP header. */
static void fill_l4(uint8_t *l4, uint16_t sport, uint16_t dport, enum md_proto proto)
{
	((uint16_t *)l4)[0] = htons(sport);
	((uint16_t *)l4)[1] = htons(dport);
	if (proto == MD_PROTO_TCP) {
		struct tcphdr *t = (struct tcphdr *)l4;

		t->doff = 5;
		t->syn = 1;
	} else if (proto == MD_PROTO_UDP) {
		((struct udphdr *)l4)->len = htons(8);
	}
}

/* Ethernet + IPv4 + first bytes of TCP (SYN) / UDP / SCTP. */
static size_t build_pkt(uint8_t *buf, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport,
			enum md_proto proto)
{
	struct ethhdr *eth = (struct ethhdr *)buf;
	struct iphdr *ip = (struct iphdr *)(eth + 1);
	uint8_t *l4 = (uint8_t *)(ip + 1);
	size_t l4len = proto == MD_PROTO_TCP ? 20 : proto == MD_PROTO_UDP ? 8 : 12;

	memset(buf, 0, 14 + 20 + 20);
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->tot_len = htons((uint16_t)(20 + l4len));
	ip->protocol = proto == MD_PROTO_TCP ? IPPROTO_TCP :
		       proto == MD_PROTO_UDP ? IPPROTO_UDP : IPPROTO_SCTP;
	ip->saddr = src;
	ip->daddr = dst;
	fill_l4(l4, sport, dport, proto);
	return 14 + 20 + l4len;
}

/* The same over native IPv6 (addresses 16 bytes, network order). */
static size_t build_pkt6(uint8_t *buf, const uint8_t *src, const uint8_t *dst, uint16_t sport,
			 uint16_t dport, enum md_proto proto)
{
	struct ethhdr *eth = (struct ethhdr *)buf;
	struct ipv6hdr *ip = (struct ipv6hdr *)(eth + 1);
	uint8_t *l4 = (uint8_t *)(ip + 1);
	size_t l4len = proto == MD_PROTO_TCP ? 20 : proto == MD_PROTO_UDP ? 8 : 12;

	memset(buf, 0, 14 + 40 + 20);
	eth->h_proto = htons(ETH_P_IPV6);
	ip->version = 6;
	ip->hop_limit = 64;
	ip->payload_len = htons((uint16_t)l4len);
	ip->nexthdr = proto == MD_PROTO_TCP ? IPPROTO_TCP :
		      proto == MD_PROTO_UDP ? IPPROTO_UDP : IPPROTO_SCTP;
	memcpy(&ip->saddr, src, 16);
	memcpy(&ip->daddr, dst, 16);
	fill_l4(l4, sport, dport, proto);
	return 14 + 40 + l4len;
}

static int run(int prog, uint8_t *pkt, size_t len, int *retval)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = (uint32_t)len,
		    .repeat = 1);
	int ret = bpf_prog_test_run_opts(prog, &o);

	*retval = (int)o.retval;
	return ret;
}

/* Forget tracked flows between scenarios (their tuples repeat). */
static void flush_ct(const char *pin)
{
	char path[400];
	struct pol_ct_key k;
	int fd;

	struct pol_ct6_key k6;

	for (int i = 0; i < 2; i++) {	/* pol_ct, then its IPv6 twin pol_ct6 */
		void *key = i ? (void *)&k6 : (void *)&k;

		snprintf(path, sizeof(path), "%s/%s", pin, i ? "pol_ct6" : "pol_ct");
		fd = bpf_obj_get(path);
		if (fd < 0)
			continue;
		while (bpf_map_get_next_key(fd, NULL, key) == 0)
			bpf_map_delete_elem(fd, key);
		close(fd);
	}
}

struct pk_result {
	int cases, allows, bad_ref, bad_eval, errors;
};

/* Load the scenario yaml into the kernel (pol_sync, node NULL: every pod
 * local) and run every probe of the probes file through pol_egress and
 * pol_ingress. Adds to *r; 0, or -errno when the scenario did not load. */
static inline int pk_run_scenario(struct pol *p, const char *pin, const char *yaml,
				  const char *probes, const char *label, struct pk_result *r)
{
	uint32_t pktbuf[40];	/* IP header 4-aligned after the 14-byte Ethernet header */
	uint8_t *pkt = (uint8_t *)pktbuf + 2;
	char line[256], ebuf[800];
	struct md_state *st = md_state_new();
	struct pol_compiled *c = NULL;
	struct md_err err;
	FILE *f;
	int probe = 0, ret;

	ret = md_state_add_file(st, yaml, &err);
	if (!ret)
		ret = md_state_finish(st, &err);
	if (!ret)
		ret = pol_sync(p, st, NULL, &err);
	if (!ret)
		ret = pol_compile(st, NULL, NULL, &c, &err);
	if (ret) {
		diag("%s: %s", yaml, md_err_str(&err, ebuf, sizeof(ebuf)));
		md_state_free(st);
		return ret;
	}
	flush_ct(pin);
	f = fopen(probes, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char src[64], dst[64], proto[8], want[8];
		unsigned port;
		uint32_t s, d, reason, pid;
		uint8_t s6[16], d6[16];
		int rv_e = 0, rv_i = 0;
		bool got, ev;
		size_t len;

		if (sscanf(line, "%63s %63s %u %7s %7s", src, dst, &port, proto, want) != 5)
			continue;
		if (strchr(src, ':')) {	/* native IPv6 (docs/ipv6.md "NetworkPolicy") */
			inet_pton(AF_INET6, src, s6);
			inet_pton(AF_INET6, dst, d6);
			len = build_pkt6(pkt, s6, d6, (uint16_t)(20000 + probe++), (uint16_t)port,
					 proto_of(proto));
		} else {
			inet_pton(AF_INET, src, &s);
			inet_pton(AF_INET, dst, &d);
			len = build_pkt(pkt, s, d, (uint16_t)(20000 + probe++), (uint16_t)port,
					proto_of(proto));
		}
		if (run(pol_prog_fd(p, POL_DIR_EGRESS), pkt, len, &rv_e) ||
		    run(pol_prog_fd(p, POL_DIR_INGRESS), pkt, len, &rv_i)) {
			if (r->errors++ < 3)
				diag("BPF_PROG_TEST_RUN: %s", strerror(errno));
			continue;
		}
		got = rv_e == 1 && rv_i == 1;
		ev = strchr(src, ':') ?
			pol_eval6(c, s6, d6, (uint16_t)port, proto_of(proto), &reason, &pid) :
			pol_eval(c, s, d, (uint16_t)port, proto_of(proto), &reason, &pid);
		r->cases++;
		r->allows += got;
		if (got != (strcmp(want, "allow") == 0) && r->bad_ref++ < 10)
			diag("kernel vs reference: %s %s -> %s:%u/%s: reference %s, kernel %s (egress %d, ingress %d)",
			     label, src, dst, port, proto, want, got ? "allow" : "deny", rv_e, rv_i);
		if (got != ev)
			r->bad_eval++;
	}
	if (f)
		fclose(f);
	pol_compiled_free(c);
	md_state_free(st);
	return 0;
}

#endif
