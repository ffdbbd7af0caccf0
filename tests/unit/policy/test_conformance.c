/* test_conformance.c — the Kubernetes upstream e2e NetworkPolicy cases
 * (tests/netpol/conformance.py: 42 TCP cases plus the UDP and SCTP contexts,
 * each named after its upstream name) on the real BPF programs.
 *
 * conformance.py emit first checks every upstream truth table against the
 * independent reference evaluator (exit 1 on any difference), then writes
 * each case step with fixed pod IPs. Here every step is loaded with
 * pol_sync() and every pod -> pod probe (9 x 8 per port/protocol) runs
 * through pol_egress + pol_ingress with BPF_PROG_TEST_RUN. Probes go to pod
 * IPs: Service translation happens before the policy hook (socket LB at
 * connect), which the lab run (tests/e2e/50-netpol-conformance.t) covers.
 * Each case runs twice: over the pods' IPv4 addresses, and over their IPv6
 * ones ("[IPv6]": pods dual-stack, IPv6 ipBlocks, the IPv6 tables). */
#include "pol_test.h"
#include "pol_kernel.h"

int main(void)
{
	char dir[] = "/tmp/zhP-conf-XXXXXX", cmd[512], path[300], line[400];
	struct pt_env e;
	struct pol *p = NULL;
	FILE *idx;

	if (pt_setup(&e, "cf", "")) {
		ok(0, "test environment (netns, cgroup)");
		return done_testing();
	}
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp: %s", strerror(errno));
		goto out;
	}
	/* --family 4,6: every case again over the pods' IPv6 addresses (IPv6
	 * ipBlocks in the CIDR cases), "... [IPv6]" (docs/ipv6.md) */
	snprintf(cmd, sizeof(cmd),
		 "python3 tests/netpol/conformance.py emit --family 4,6 --out %s >/dev/null", dir);
	ok(system(cmd) == 0, "reference evaluator reproduces every upstream truth table (both families)");
	is_int(pol_open(NULL, e.pin, &p), 0, "pol_open (load, pin, no attach)");
	if (!p)
		goto out;
	snprintf(path, sizeof(path), "%s/index", dir);
	idx = fopen(path, "r");
	ok(idx != NULL, "case index");
	while (idx && fgets(line, sizeof(line), idx)) {
		struct pk_result r = { 0 };
		char y[460], pr[460], *name = strchr(line, ' ');

		if (!name)
			continue;
		*name++ = 0;
		name[strcspn(name, "\n")] = 0;
		snprintf(y, sizeof(y), "%s/%s.yaml", dir, line);
		snprintf(pr, sizeof(pr), "%s/%s.probes", dir, line);
		int ret = pk_run_scenario(p, e.pin, y, pr, line, &r);

		ok(ret == 0 && r.cases > 0 && !r.errors && !r.bad_ref && !r.bad_eval,
		   "%s: %d probes, kernel = reference = compiled maps", name, r.cases);
	}
	if (idx)
		fclose(idx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
out:
	pol_close(p, 1);
	pt_teardown(&e);
	return done_testing();
}
