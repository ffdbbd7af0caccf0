/* cli_yaml.c — `zerohop get KIND -o yaml`: the stored manifests as etcd
 * holds them, each with its mod revision as metadata.resourceVersion
 * (docs/state-etcd.md, ss_etcd.c K2), ready to edit and apply again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/cli.h"
#include "zerohop/model.h"
#include "zerohop/state.h"

struct yq {
	char kind[64];		/* lower-case singular, "" for every kind */
	const char *ns;
	int n;
};

/* "services", "svc", "service", "Service" → "service"; "all" → "". */
static int kind_of(const char *arg, char *out, size_t len)
{
	static const char *const alias[][2] = {
		{ "svc", "service" }, { "po", "pod" }, { "ep", "service" },
		{ "splits", "trafficsplit" }, { "routes", "httproute" },
		{ "routegroups", "httproutegroup" }, { "netpol", "networkpolicy" },
		{ "networkpolicies", "networkpolicy" }, { "sa", "serviceaccount" },
		{ "deploy", "deployment" }, { "ns", "namespace" }, { "cm", "configmap" },
	};
	char low[64];
	size_t l = strlen(arg);

	if (!strcmp(arg, "all")) {
		out[0] = 0;
		return 0;
	}
	if (l >= sizeof(low))
		return -EINVAL;
	for (size_t i = 0; i <= l; i++)
		low[i] = (char)(arg[i] >= 'A' && arg[i] <= 'Z' ? arg[i] - 'A' + 'a' : arg[i]);
	for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++)
		if (!strcmp(low, alias[i][0])) {
			snprintf(out, len, "%s", alias[i][1]);
			return 0;
		}
	for (int k = 0; k < MD_K__COUNT; k++) {
		const char *n = md_kind_lower((enum md_kind)k);
		size_t nl = strlen(n);

		if (!strcmp(low, n) || (!strncmp(low, n, nl) && !strcmp(low + nl, "s")) ||
		    (!strncmp(low, n, nl - 1) && n[nl - 1] == 'y' && !strcmp(low + nl - 1, "ies"))) {
			snprintf(out, len, "%s", n);
			return 0;
		}
	}
	return -EINVAL;
}

static int one(void *arg, const char *key, const char *text, size_t len, uint64_t rev)
{
	struct yq *q = arg;
	char kind[64], ns[256];
	const char *p = key, *md;

	/* /zerohop/v1/KIND/NS/NAME only (runtime pods are not manifests) */
	if (strncmp(p, "/zerohop/v1/", 12) || sscanf(p + 12, "%63[^/]/%255[^/]/", kind, ns) != 2)
		return 0;
	if ((q->kind[0] && strcmp(kind, q->kind)) || (q->ns && strcmp(ns, q->ns)))
		return 0;
	md = strstr(text, "metadata:\n");
	printf("---\n");
	if (!md || (md != text && md[-1] != '\n')) {
		fwrite(text, 1, len, stdout);
	} else {
		size_t head = (size_t)(md - text) + strlen("metadata:\n");

		fwrite(text, 1, head, stdout);
		printf("  resourceVersion: \"%llu\"\n", (unsigned long long)rev);
		fwrite(text + head, 1, len - head, stdout);
	}
	if (len && text[len - 1] != '\n')
		printf("\n");
	q->n++;
	return 0;
}

int cli_get_yaml(struct ss *s, const char *kind, const char *ns)
{
	struct md_err err = {};
	struct yq q = { .ns = ns };
	char buf[800];
	int ret;

	if (kind_of(kind, q.kind, sizeof(q.kind))) {
		fprintf(stderr, "zerohop get: -o yaml: unknown kind '%s'\n", kind);
		return -EINVAL;
	}
	ret = ss_list_raw(s, one, &q, &err);
	if (ret) {
		fprintf(stderr, "zerohop get: %s\n", md_err_str(&err, buf, sizeof(buf)));
		return ret;
	}
	return 0;
}
