/* test_property.c — random policies, labels and probes: the compiled maps
 * (evaluated in user space by pol_eval, the same algorithm as the BPF slow
 * path) against the independent reference evaluator tests/netpol/refeval.py.
 *
 * tests/netpol/gen_property.py writes N scenarios (manifests + probes with the
 * reference verdict); this test parses each with the model, compiles it with
 * pol_compile() and compares every probe. Seeded and reproducible:
 *	ZH_NETPOL_SEED=S ZH_NETPOL_SCENARIOS=N ZH_NETPOL_PROBES=M build/tests/unit/policy/test_property.t
 * Default: 200 scenarios x 50 probes = 10,000 cases. The real datapath is
 * checked on a sample of the same cases by tests/unit/policy/test_bpf_prop.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"

static enum md_proto proto_of(const char *s)
{
	return strcmp(s, "UDP") == 0 ? MD_PROTO_UDP : strcmp(s, "SCTP") == 0 ? MD_PROTO_SCTP :
									 MD_PROTO_TCP;
}

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

int main(void)
{
	const char *seed = env_or("ZH_NETPOL_SEED", "20261202");
	int n_sc = atoi(env_or("ZH_NETPOL_SCENARIOS", "200"));
	const char *n_pr = env_or("ZH_NETPOL_PROBES", "50");
	char dir[] = "/tmp/zhP-prop-XXXXXX", cmd[512];
	int cases = 0, bad = 0, parsed = 0, allows = 0;

	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return done_testing();
	}
	snprintf(cmd, sizeof(cmd),
		 "python3 tests/netpol/gen_property.py --seed %s --scenarios %d --probes %s --out %s",
		 seed, n_sc, n_pr, dir);
	ok(system(cmd) == 0, "reference generator ran (seed %s)", seed);

	for (int k = 0; k < n_sc; k++) {
		char path[256], line[256];
		struct md_state *st = md_state_new();
		struct pol_compiled *c = NULL;
		struct md_err err;
		char ebuf[800];
		FILE *f;

		snprintf(path, sizeof(path), "%s/s%04d.yaml", dir, k);
		if (md_state_add_file(st, path, &err) || md_state_finish(st, &err)) {
			diag("%s: model: %s", path, md_err_str(&err, ebuf, sizeof(ebuf)));
			md_state_free(st);
			continue;
		}
		if (pol_compile(st, NULL, NULL, &c, &err)) {
			diag("%s: compile: %s", path, md_err_str(&err, ebuf, sizeof(ebuf)));
			md_state_free(st);
			continue;
		}
		parsed++;
		snprintf(path, sizeof(path), "%s/s%04d.probes", dir, k);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f)) {
			char src[32], dst[32], proto[8], want[8];
			unsigned port;
			uint32_t s, d, reason, pid;
			bool got;

			if (sscanf(line, "%31s %31s %u %7s %7s", src, dst, &port, proto, want) != 5)
				continue;
			inet_pton(AF_INET, src, &s);
			inet_pton(AF_INET, dst, &d);
			got = pol_eval(c, s, d, (uint16_t)port, proto_of(proto), &reason, &pid);
			cases++;
			allows += got;
			if (got != (strcmp(want, "allow") == 0)) {
				if (bad++ < 10)
					diag("disagree: scenario s%04d probe %s -> %s:%u/%s: reference %s, compiled %s",
					     k, src, dst, port, proto, want, got ? "allow" : "deny");
			}
		}
		if (f)
			fclose(f);
		pol_compiled_free(c);
		md_state_free(st);
	}
	is_int(parsed, n_sc, "every scenario parsed and compiled");
	ok(cases >= n_sc * atoi(n_pr), "%d cases evaluated (%d allowed, %d denied)", cases, allows,
	   cases - allows);
	is_int(bad, 0, "zero disagreements between compiled maps and reference");
	if (bad)
		diag("scenarios kept in %s for inspection", dir);
	else {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			diag("could not remove %s", dir);
	}
	return done_testing();
}
