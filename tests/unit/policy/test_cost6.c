/* test_cost6.c — what a native IPv6 packet costs the policy programs next to
 * an IPv4 one (bpf/policy.bpf.c invariant 10: one body, the IPv6 twins of
 * the address-keyed tables, the same lookup counts).
 *
 * One state: pod b (both families) isolated for ingress, a allowed on 8080,
 * c not. Through pol_ingress with BPF_PROG_TEST_RUN (repeat R, the kernel's
 * mean ns per run), per family:
 *   fast  a -> b:8080 SYN: admitted once, then every run hits the flow
 *         table (pol_ct / pol_ct6: one lookup after the state word)
 *   slow  c -> b:8080 SYN: denied, so re-judged every run (invariant 3):
 *         2 ipcache, 3 rule, 1 cidr lookups and a flow-table write
 * Rounds interleave the four; the medians and the IPv6/IPv4 ratios are
 * printed (docs/BENCHMARKS.md). Only the verdicts are asserted: timings on
 * a shared machine are figures, not pass/fail. */
#include "pol_test.h"
#include "pol_kernel.h"

#define ROUNDS 7
#define REPEAT 20000

static const char *state_yaml =
	"apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x, labels: {app: a}}\n"
	"spec: {nodeName: n, containers: [{name: c}]}\n"
	"status: {podIP: 10.244.0.10, podIPs: [{ip: 10.244.0.10}, {ip: \"fd00:10:244::10\"}]}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: x, labels: {app: b}}\n"
	"spec: {nodeName: n, containers: [{name: c}]}\n"
	"status: {podIP: 10.244.0.11, podIPs: [{ip: 10.244.0.11}, {ip: \"fd00:10:244::11\"}]}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: c, namespace: x, labels: {app: c}}\n"
	"spec: {nodeName: n, containers: [{name: c}]}\n"
	"status: {podIP: 10.244.0.12, podIPs: [{ip: 10.244.0.12}, {ip: \"fd00:10:244::12\"}]}\n---\n"
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: b-from-a, namespace: x}\n"
	"spec:\n  podSelector: {matchLabels: {app: b}}\n"
	"  ingress:\n  - from: [{podSelector: {matchLabels: {app: a}}},\n"
	"           {ipBlock: {cidr: 192.168.0.0/16}}, {ipBlock: {cidr: \"fd99::/64\"}}]\n"
	"    ports: [{port: 8080}]\n";

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Mean ns per run of prog over REPEAT runs of pkt; *ret the verdict. */
static int timed(int prog, uint8_t *pkt, size_t len, uint64_t *ns, int *ret)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = (uint32_t)len,
		    .repeat = REPEAT);

	if (bpf_prog_test_run_opts(prog, &o))
		return -errno;
	*ns = o.duration;
	*ret = (int)o.retval;
	return 0;
}

int main(void)
{
	static const char *const name[4] = { "IPv4 fast", "IPv6 fast", "IPv4 slow", "IPv6 slow" };
	uint32_t buf[4][40];	/* IP header 4-aligned after the 14-byte Ethernet header */
	uint8_t a6[16], b6[16], c6[16];
	uint32_t a4, b4, c4;
	uint64_t ns[4][ROUNDS], med[4];
	size_t len[4];
	struct md_state *st = md_state_new();
	struct pol *p = NULL;
	struct md_err err;
	struct pt_env e;
	int prog, bad = 0;

	if (pt_setup(&e, "c6", "")) {
		ok(0, "test environment (netns, cgroup)");
		return done_testing();
	}
	inet_pton(AF_INET, "10.244.0.10", &a4);
	inet_pton(AF_INET, "10.244.0.11", &b4);
	inet_pton(AF_INET, "10.244.0.12", &c4);
	inet_pton(AF_INET6, "fd00:10:244::10", a6);
	inet_pton(AF_INET6, "fd00:10:244::11", b6);
	inet_pton(AF_INET6, "fd00:10:244::12", c6);
	is_int(pol_open(NULL, e.pin, &p), 0, "pol_open (load, pin, no attach)");
	if (!p)
		goto out;
	ok(md_state_add_buf(st, "cost6.yaml", state_yaml, strlen(state_yaml), &err) == 0 &&
	   md_state_finish(st, &err) == 0 && pol_sync(p, st, NULL, &err) == 0,
	   "dual-stack state synced: %s", err.msg);
	prog = pol_prog_fd(p, POL_DIR_INGRESS);
	len[0] = build_pkt((uint8_t *)buf[0] + 2, a4, b4, 40000, 8080, MD_PROTO_TCP);
	len[1] = build_pkt6((uint8_t *)buf[1] + 2, a6, b6, 40000, 8080, MD_PROTO_TCP);
	len[2] = build_pkt((uint8_t *)buf[2] + 2, c4, b4, 40001, 8080, MD_PROTO_TCP);
	len[3] = build_pkt6((uint8_t *)buf[3] + 2, c6, b6, 40001, 8080, MD_PROTO_TCP);
	for (int r = 0; r < ROUNDS; r++) {
		for (int k = 0; k < 4; k++) {
			int ret = -1;

			if (timed(prog, (uint8_t *)buf[k] + 2, len[k], &ns[k][r], &ret) ||
			    ret != (k < 2))
				bad++;
		}
	}
	ok(!bad, "every run judged as written: a -> b:8080 admitted, c -> b:8080 dropped, both families");
	for (int k = 0; k < 4; k++) {
		qsort(ns[k], ROUNDS, sizeof(ns[k][0]), cmp_u64);
		med[k] = ns[k][ROUNDS / 2];
		diag("%s: %llu ns per run (median of %d rounds of %d runs; min %llu, max %llu)",
		     name[k], (unsigned long long)med[k], ROUNDS, REPEAT,
		     (unsigned long long)ns[k][0], (unsigned long long)ns[k][ROUNDS - 1]);
	}
	diag("IPv6 / IPv4, fast path (flow table hit): %.2f", (double)med[1] / (double)(med[0] ?: 1));
	diag("IPv6 / IPv4, slow path (denied, re-judged): %.2f",
	     (double)med[3] / (double)(med[2] ?: 1));
out:
	md_state_free(st);
	pol_close(p, 1);
	pt_teardown(&e);
	return done_testing();
}
