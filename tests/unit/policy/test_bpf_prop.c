/* test_bpf_prop.c — the real BPF datapath against the reference evaluator.
 *
 * The same seeded random scenarios as test_property.c (gen_property.py is
 * deterministic per seed), loaded into the kernel with pol_open()/pol_sync(),
 * and every probe run through the real programs with BPF_PROG_TEST_RUN: a
 * packet src -> dst:port through pol_egress (the source pod's side) and
 * pol_ingress (the destination pod's side); allowed iff both pass. The
 * verdict must equal refeval.py's and pol_eval()'s. Default: all 200
 * scenarios x 50 probes = 10,000 kernel cases (TCP SYN, UDP, SCTP). Runs in a
 * private network namespace (no node addresses). What BPF_PROG_TEST_RUN does
 * not reach (socket storage, listeners, replies, revocation) is covered on
 * real sockets by test_datapath.c.
 * Then the same again over IPv6 (gen_property.py --family 6: dual-stack
 * pods, IPv6 probes, mostly IPv6 ipBlocks; docs/ipv6.md "NetworkPolicy").
 *	ZH_NETPOL_SEED=S ZH_NETPOL_BPF_SCENARIOS=N build/tests/unit/policy/test_bpf_prop.t
 */
#include "pol_test.h"
#include "pol_kernel.h"

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

int main(void)
{
	const char *seed = env_or("ZH_NETPOL_SEED", "20261202");
	int n_sc = atoi(env_or("ZH_NETPOL_BPF_SCENARIOS", "200"));
	char dir[] = "/tmp/zhP-bprop-XXXXXX", cmd[512];
	struct pt_env e;
	struct pol *p = NULL;

	if (pt_setup(&e, "bp", "")) {
		ok(0, "test environment (netns, cgroup)");
		return done_testing();
	}
	/* no cgroup: the programs are only run by BPF_PROG_TEST_RUN here */
	is_int(pol_open(NULL, e.pin, &p), 0, "pol_open (load, pin, no attach)");
	for (int fam = 4; p && fam <= 6; fam += 2) {
		struct pk_result r = { 0 };
		int synced = 0;

		snprintf(dir, sizeof(dir), "/tmp/zhP-bprop-XXXXXX");
		if (!mkdtemp(dir)) {
			ok(0, "mkdtemp: %s", strerror(errno));
			break;
		}
		snprintf(cmd, sizeof(cmd),
			 "python3 tests/netpol/gen_property.py --seed %s --scenarios %d --probes 50 "
			 "--family %d --out %s", seed, n_sc, fam, dir);
		ok(system(cmd) == 0, "IPv%d: reference generator ran (seed %s)", fam, seed);
		for (int k = 0; k < n_sc; k++) {
			char y[256], pr[256], label[16];

			snprintf(y, sizeof(y), "%s/s%04d.yaml", dir, k);
			snprintf(pr, sizeof(pr), "%s/s%04d.probes", dir, k);
			snprintf(label, sizeof(label), "s%04d", k);
			if (pk_run_scenario(p, e.pin, y, pr, label, &r) == 0)
				synced++;
		}
		is_int(synced, n_sc, "IPv%d: every scenario loaded into the kernel", fam);
		is_int(r.errors, 0, "IPv%d: every probe ran through both programs", fam);
		ok(r.cases >= n_sc * 50, "IPv%d: %d kernel cases (%d allowed, %d denied)", fam,
		   r.cases, r.allows, r.cases - r.allows);
		is_int(r.bad_ref, 0, "IPv%d: zero disagreements: kernel datapath vs reference evaluator",
		       fam);
		is_int(r.bad_eval, 0,
		       "IPv%d: zero disagreements: kernel datapath vs pol_eval of the compiled maps", fam);
		if (r.bad_ref) {
			diag("scenarios kept in %s", dir);
			continue;
		}
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			diag("could not remove %s", dir);
	}
	pol_close(p, 1);
	pt_teardown(&e);
	return done_testing();
}
