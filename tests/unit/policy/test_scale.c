/* test_scale.c — policy count does not change the cost that matters:
 * compile + load of 10,000 policies within 2 s, a one-policy
 * change on top of them loaded quickly, and the slow-path cost per new
 * connection flat from 0 to 50,000 non-matching policies (BPF_PROG_TEST_RUN
 * of a SYN that walks the whole slow path: the kernel's own duration, per
 * run, over many repeats).
 *
 * Non-matching policies (the Romana shape): each selects the server pod and
 * allows ingress from the client's label on its own port 20000+i (one rule
 * LPM entry each) or from a label nobody has (no entry), alternating; the
 * traffic goes to 8080, admitted by one policy. Timings go to the TAP
 * diagnostics and to docs/benchmarks/log/policy.md by hand, with this command:
 *	build/tests/unit/policy/test_scale.t
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include "pol_test.h"
#include "pol_kernel.h"
#include "zerohop/log.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *state_yaml(int n, int extra_port)
{
	size_t cap = (size_t)n * 400 + 4096, len = 0;
	char *s = malloc(cap);

	len += (size_t)snprintf(s + len, cap - len,
		"apiVersion: v1\nkind: Pod\nmetadata: {name: client, namespace: x, labels: {app: client}}\n"
		"spec: {nodeName: node-a, containers: [{name: c}]}\n"
		"status: {phase: Running, podIP: 10.244.0.10}\n---\n"
		"apiVersion: v1\nkind: Pod\nmetadata: {name: server, namespace: x, labels: {app: server}}\n"
		"spec: {nodeName: node-a, containers: [{name: c}]}\n"
		"status: {phase: Running, podIP: 10.244.0.20}\n---\n"
		"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
		"metadata: {name: allow-client, namespace: x}\n"
		"spec: {podSelector: {matchLabels: {app: server}}, ingress: [{from: [{podSelector: "
		"{matchLabels: {app: client}}}], ports: [{port: %d}]}]}\n---\n", extra_port);
	for (int i = 0; i < n; i++) {
		if (i % 2)
			len += (size_t)snprintf(s + len, cap - len,
				"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
				"metadata: {name: nm-%d, namespace: x}\n"
				"spec: {podSelector: {matchLabels: {app: server}}, ingress: [{from: "
				"[{podSelector: {matchLabels: {app: client}}}], ports: [{port: %d}]}]}\n---\n",
				i, 20000 + i % 40000);
		else
			len += (size_t)snprintf(s + len, cap - len,
				"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
				"metadata: {name: nm-%d, namespace: x}\n"
				"spec: {podSelector: {matchLabels: {app: server}}, ingress: [{from: "
				"[{podSelector: {matchLabels: {app: nobody-%d}}}]}]}\n---\n", i, i);
	}
	return s;
}

static struct md_state *parse(const char *y, double *ms)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char buf[900];
	double t0 = now_ms();

	if (md_state_add_buf(st, "scale.yaml", y, strlen(y), &err) || md_state_finish(st, &err)) {
		diag("model: %s", md_err_str(&err, buf, sizeof(buf)));
		md_state_free(st);
		return NULL;
	}
	*ms = now_ms() - t0;
	return st;
}

/* Mean ns of the program per new connection: one SYN per BPF_PROG_TEST_RUN
 * call (repeat=1: every call gets a fresh socket, so nothing is cached and
 * each run walks the whole slow path), averaged over 1000 calls. */
static double syn_cost(struct pol *p)
{
	uint32_t pktbuf[32];
	uint8_t *pkt = (uint8_t *)pktbuf + 2;
	size_t len = build_pkt(pkt, inet_addr("10.244.0.10"), inet_addr("10.244.0.20"), 40000,
			       8080, MD_PROTO_TCP);
	double sum = 0;

	for (int i = 0; i < 1000; i++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = (uint32_t)len,
			    .repeat = 1);

		if (bpf_prog_test_run_opts(pol_prog_fd(p, POL_DIR_INGRESS), &o) || o.retval != 1)
			return -1;
		sum += o.duration;
	}
	return sum / 1000;
}

int main(void)
{
	static const int sizes[] = { 0, 200, 10000, 50000 };
	double cost[4][5] = { { 0 } };
	struct md_state *states[4] = { NULL };
	struct pt_env e;
	struct pol *p = NULL;
	struct md_err err;
	char buf[900];

	if (getenv("ZH_POL_TIMING"))
		zh_log_init("test_scale", ZH_DEBUG);
	if (pt_setup(&e, "sc", "")) {
		ok(0, "test environment");
		return done_testing();
	}
	is_int(pol_open(NULL, e.pin, &p), 0, "pol_open");
	if (!p)
		goto out;
	for (int i = 0; i < 4; i++) {
		char *y = state_yaml(sizes[i], 8080);
		double t_parse = 0, t0, t_sync, t_change;
		struct md_state *st = parse(y, &t_parse), *st2;
		int ret;

		free(y);
		if (!st) {
			ok(0, "%d policies parse", sizes[i]);
			continue;
		}
		states[i] = NULL;
		{
			struct pol_compiled *c = NULL;

			t0 = now_ms();
			pol_compile(st, "node-a", NULL, &c, &err);
			diag("%d policies: compile alone %.0f ms, %d rule entries", sizes[i],
			     now_ms() - t0, c ? c->n_rules : -1);
			pol_compiled_free(c);
		}
		t0 = now_ms();
		ret = pol_sync(p, st, "node-a", &err);
		t_sync = now_ms() - t0;
		ok(ret == 0, "%d + 1 policies: compile + load %.0f ms (parse %.0f ms)%s%s", sizes[i],
		   t_sync, t_parse, ret ? ": " : "", ret ? md_err_str(&err, buf, sizeof(buf)) : "");
		/* Times are reported, not asserted: speed targets live in the
		 * benchmarks (docs/benchmarks/log/policy.md), and an ASan build on a
		 * shared machine would make a timed check flaky. */
		/* one change (the admitting policy's port) on top of the same set,
		 * four times in a row: the first diffs against the tables of two
		 * syncs ago (another size), the later ones are the steady state */
		y = state_yaml(sizes[i], 8081);
		st2 = parse(y, &t_parse);
		free(y);
		{
			double ch[4];

			ret = st2 ? 0 : -EINVAL;
			for (int r = 0; r < 4 && !ret; r++) {
				t0 = now_ms();
				ret = pol_sync(p, r % 2 ? st : st2, "node-a", &err);
				ch[r] = now_ms() - t0;
			}
			t_change = ch[1] < ch[2] ? (ch[2] < ch[3] ? ch[2] : (ch[1] < ch[3] ? ch[3] : ch[1]))
						 : (ch[1] < ch[3] ? ch[1] : (ch[2] < ch[3] ? ch[3] : ch[2]));
			ok(ret == 0, "%d + 1 policies: one change loaded in %.0f %.0f %.0f %.0f ms (steady median %.0f)",
			   sizes[i], ch[0], ch[1], ch[2], ch[3], t_change);
		}
		/* agent restart with these tables in force (st, the last sync):
		 * the adopter reads both slots back, and its first sync of the
		 * same state must keep the generation */
		if (ret == 0) {
			struct pol *p2 = NULL;
			uint32_t gen = pol_generation(p);
			double t_open, t_resync;

			t0 = now_ms();
			ret = pol_open(NULL, e.pin, &p2);
			t_open = now_ms() - t0;
			t0 = now_ms();
			if (!ret)
				ret = pol_sync(p2, st, "node-a", &err);
			t_resync = now_ms() - t0;
			ok(ret == 0 && pol_generation(p2) == gen,
			   "%d + 1 policies: restart keeps generation %u (adopt + read back %.0f ms, first sync %.0f ms)",
			   sizes[i], gen, t_open, t_resync);
			pol_close(p2, 0);
		}
		md_state_free(st2);
		states[i] = st;
	}
	/* per-connection cost, sizes interleaved (A B C D A B C D ...) */
	for (int r = 0; r < 5; r++)
		for (int i = 0; i < 4; i++) {
			if (!states[i] || pol_sync(p, states[i], "node-a", &err))
				continue;
			cost[i][r] = syn_cost(p);
		}
	for (int i = 0; i < 4; i++) {
		diag("ingress program per new connection (SYN, slow path) with %d non-matching policies: %.0f %.0f %.0f %.0f %.0f ns",
		     sizes[i], cost[i][0], cost[i][1], cost[i][2], cost[i][3], cost[i][4]);
		md_state_free(states[i]);
	}
	{
		/* the ratio that matters: median over runs, vs 0 policies */
		for (int i = 1; i < 4; i++) {
			double a[5], b[5], t;

			memcpy(a, cost[0], sizeof(a));
			memcpy(b, cost[i], sizeof(b));
			for (int x = 0; x < 5; x++)
				for (int y = x + 1; y < 5; y++) {
					if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t; }
					if (b[y] < b[x]) { t = b[x]; b[x] = b[y]; b[y] = t; }
				}
			diag("per-connection program cost with %d policies / with 0: %.2f (medians of 5 interleaved rounds: %.0f / %.0f ns)",
			     sizes[i], b[2] / a[2], b[2], a[2]);
			ok(b[2] > 0 && a[2] > 0, "slow path measured with %d policies", sizes[i]);
		}
	}
out:
	pol_close(p, 1);
	pt_teardown(&e);
	return done_testing();
}
