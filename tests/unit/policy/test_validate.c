/* test_validate.c — bad NetworkPolicies are rejected with a clear error
 * naming file, line and field, and the state (and so the compiled policy)
 * is unchanged. Validation is the model's (src/model); this checks what the
 * policy component relies on, through the same call `zerohop apply` and
 * `zerohop validate` make (md_state_add_buf). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"

static const char *good =
	"apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x, labels: {app: a}}\n"
	"spec: {nodeName: node-a, containers: [{name: c}]}\n"
	"status: {phase: Running, podIP: 10.244.0.10}\n---\n"
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: ok, namespace: x}\n"
	"spec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8}}]}]}\n";

#define NP_HEAD "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n" \
		"metadata: {name: bad, namespace: x}\nspec:\n  podSelector: {}\n"

static const struct {
	const char *what, *yaml, *field_has;
} bad[] = {
	{ "invalid CIDR (prefix > 32)",
	  NP_HEAD "  ingress:\n  - from:\n    - ipBlock: {cidr: 10.0.0.0/33}\n", "cidr" },
	{ "invalid CIDR (octet > 255)",
	  NP_HEAD "  egress:\n  - to:\n    - ipBlock: {cidr: 10.0.0.300/8}\n", "cidr" },
	{ "except not inside cidr",
	  NP_HEAD "  ingress:\n  - from:\n    - ipBlock: {cidr: 10.0.0.0/24, except: [10.1.0.0/28]}\n",
	  "except" },
	{ "except equal to cidr (not a strict subset)",
	  NP_HEAD "  ingress:\n  - from:\n    - ipBlock: {cidr: 10.0.0.0/24, except: [10.0.0.0/24]}\n",
	  "except" },
	{ "endPort without port",
	  NP_HEAD "  ingress:\n  - ports: [{protocol: TCP, endPort: 90}]\n", "endPort" },
	{ "endPort below port",
	  NP_HEAD "  ingress:\n  - ports: [{port: 90, endPort: 80}]\n", "endPort" },
	{ "endPort with a named port",
	  NP_HEAD "  ingress:\n  - ports: [{port: http, endPort: 80}]\n", "endPort" },
	{ "unknown protocol",
	  NP_HEAD "  ingress:\n  - ports: [{protocol: ICMP, port: 80}]\n", "protocol" },
	{ "ipBlock together with podSelector in one peer",
	  NP_HEAD "  ingress:\n  - from:\n    - {ipBlock: {cidr: 10.0.0.0/8}, podSelector: {}}\n", "from" },
	{ "port out of range",
	  NP_HEAD "  ingress:\n  - ports: [{port: 70000}]\n", "port" },
	{ "unknown policyType",
	  NP_HEAD "  policyTypes: [Sideways]\n", "policyTypes" },
};

static int compile_rules(const struct md_state *st)
{
	struct pol_compiled *c = NULL;
	struct md_err err;
	int n;

	if (pol_compile(st, NULL, NULL, &c, &err))
		return -1;
	n = c->n_rules * 1000 + c->n_cidrs;
	pol_compiled_free(c);
	return n;
}

int main(void)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char buf[900];
	int before;

	if (md_state_add_buf(st, "good.yaml", good, strlen(good), &err) ||
	    md_state_finish(st, &err)) {
		ok(0, "good state: %s", md_err_str(&err, buf, sizeof(buf)));
		md_state_free(st);
		return done_testing();
	}
	before = compile_rules(st);
	ok(before > 0, "good state compiles");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct md_state *s2 = md_state_new();
		int ret;

		/* the same path as apply: current state + the new file, all or nothing */
		ret = md_state_add_buf(s2, "good.yaml", good, strlen(good), &err);
		if (!ret)
			ret = md_state_add_buf(s2, "bad.yaml", bad[i].yaml, strlen(bad[i].yaml), &err);
		if (!ret)
			ret = md_state_finish(s2, &err);
		md_err_str(&err, buf, sizeof(buf));
		is_int(ret, -EINVAL, "%s: rejected", bad[i].what);
		ok(ret && strstr(err.file, "bad.yaml") && err.line > 0 &&
		   strstr(buf, bad[i].field_has), "  error names file, line, field: %s", buf);
		md_state_free(s2);
	}
	/* state unchanged: a rejected add leaves the state as it was */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct md_state *s3 = md_state_new();

		md_state_add_buf(s3, "good.yaml", good, strlen(good), &err);
		md_state_add_buf(s3, "bad.yaml", bad[i].yaml, strlen(bad[i].yaml), &err);
		if (md_state_finish(s3, &err) == 0) {
			ok(s3->n_netpols == 1 && compile_rules(s3) == before,
			   "%s: state and compiled policy unchanged", bad[i].what);
		} else {
			ok(0, "%s: state still usable after the rejection", bad[i].what);
		}
		md_state_free(s3);
	}
	md_state_free(st);
	return done_testing();
}
