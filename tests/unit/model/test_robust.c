/* test_robust.c — mutated manifests never crash the parser (run under
 * ASan/UBSan): every result is 0 or -EINVAL with a filled error, a state
 * that passed md_state_finish has consistent endpoints, and every accepted
 * object re-emitted as the state source stores it (yn_emit) parses back to
 * an equally valid state with the same objects. Seeded, reproducible:
 * ZH_SEED=N to replay. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"
#include "../../../src/model/md_int.h"

#define ROUNDS 3000

static const char *const seeds[] = {
	"apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: x, labels: {a: b}}\n"
	"spec:\n  clusterIP: 10.96.0.20\n  selector: {app: web}\n  ports:\n"
	"    - {name: http, port: 80, targetPort: http}\n    - {name: b, port: 81, protocol: UDP}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: x, labels: {app: web}}\n"
	"spec:\n  containers:\n    - name: c\n      ports: [{name: http, containerPort: 8080}]\n"
	"status: {podIP: 10.244.0.5, phase: Running}\n",
	"apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
	"spec:\n  service: a\n  backends: [{service: a, weight: 1}, {service: b, weight: 500m}]\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 1}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\nspec: {ports: [{port: 1}]}\n",
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec:\n"
	"  podSelector: {matchExpressions: [{key: a, operator: In, values: [x, y]}]}\n"
	"  policyTypes: [Ingress, Egress]\n  ingress:\n    - from:\n"
	"        - namespaceSelector: {matchLabels: {k: v}}\n          podSelector: {}\n"
	"        - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}\n"
	"      ports: [{port: 80, endPort: 90}, {protocol: UDP, port: dns}]\n"
	"  egress: [{to: [{podSelector: {}}]}]\n",
	"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\n"
	"spec:\n  parentRefs: [{kind: Service, group: \"\", name: a, port: 80}]\n  rules:\n"
	"    - matches: [{path: {type: PathPrefix, value: /a}, headers: [{name: h, value: v}]}]\n"
	"      filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: a, value: b}]}}]\n"
	"      backendRefs: [{name: a, port: 80, weight: 3}]\n      timeouts: {request: 1s}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n",
	"apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nspec: {nodes: [a, {name: b}], "
	"podCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/12}\n---\napiVersion: apps/v1\nkind: Deployment\n"
	"metadata: {name: d}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: d}}\n  template:\n"
	"    metadata: {labels: {app: d}}\n    spec: {nodeName: a, containers: [{name: c, command: [x]}]}\n"
	"---\napiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Namespace, metadata: {name: n, labels: {a: b}}}]\n",
};

static const char *const tokens[] = { ":", "-", "[", "]", "{", "}", "\n", " ", "  ", "\"", "'",
				      "---\n", "&a ", "*a", "~", "null", "0", "-1", "65536", "x",
				      "In", "None", "500m", "1Ki", "/", "#", "\t", "|\n", "?", "!!str " };

static unsigned long long rng;

static unsigned rnd(unsigned n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)((rng >> 33) % n);
}

static char *mutate(const char *src, size_t *len_out)
{
	size_t len = strlen(src), cap = len * 2 + 256;
	char *b = malloc(cap);
	int n = 1 + (int)rnd(4);

	memcpy(b, src, len);
	for (int k = 0; k < n; k++) {
		size_t at = len ? rnd((unsigned)len) : 0;

		switch (rnd(4)) {
		case 0:		/* flip a byte */
			if (len)
				b[at] = (char)rnd(256);
			break;
		case 1: {	/* delete a span */
			size_t span = 1 + rnd(8);

			if (at + span > len)
				span = len - at;
			memmove(b + at, b + at + span, len - at - span);
			len -= span;
			break;
		}
		default: {	/* insert a token */
			const char *t = tokens[rnd(sizeof(tokens) / sizeof(tokens[0]))];
			size_t tl = strlen(t);

			if (len + tl >= cap)
				break;
			memmove(b + at + tl, b + at, len - at);
			memcpy(b + at, t, tl);
			len += tl;
			break;
		}
		}
	}
	*len_out = len;
	return b;
}

/* Re-emit every object of st, parse them all again: same objects, valid. */
static int roundtrip(const struct md_state *st)
{
	const struct md_priv *pv = md_priv(st);
	struct md_state *again = md_state_new();
	struct md_err err;
	int bad = 0;

	for (int i = 0; i < pv->n_objs && !bad; i++) {
		char *text;
		size_t len;

		if (yn_emit(pv->objs[i].node, &text, &len)) {
			bad = 1;
			break;
		}
		if (md_state_add_buf(again, "emitted.yaml", text, len, &err)) {
			diag("re-parse failed: %s: %s\n%s", err.field, err.msg, text);
			bad = 1;
		}
		free(text);
	}
	if (!bad && md_state_finish(again, &err)) {
		diag("re-finish failed: %s: %s", err.field, err.msg);
		bad = 1;
	}
	if (!bad && (md_state_n_objects(again) != pv->n_objs || again->n_services != st->n_services ||
		     again->n_pods != st->n_pods || again->n_namespaces != st->n_namespaces)) {
		diag("round trip changed the objects");
		bad = 1;
	}
	for (int i = 0; !bad && i < st->n_services; i++)
		bad = st->services[i].cluster_ip != again->services[i].cluster_ip;
	md_state_free(again);
	return bad;
}

int main(void)
{
	const char *env = getenv("ZH_SEED");
	int bad_ret = 0, bad_err = 0, bad_ep = 0, bad_rt = 0, accepted = 0, rejected = 0;

	rng = env ? strtoull(env, NULL, 10) : 20261202;
	diag("seed %llu", rng);
	for (int i = 0; i < ROUNDS; i++) {
		size_t len;
		char *buf = mutate(seeds[i % (sizeof(seeds) / sizeof(seeds[0]))], &len);
		struct md_state *st = md_state_new();
		struct md_err err;
		int r;

		md_priv(st)->keep_tree = true;	/* for the round trip */
		memset(&err, 0, sizeof(err));
		r = md_state_add_buf(st, "m.yaml", buf, len, &err);
		if (!r)
			r = md_state_finish(st, &err);
		if (r && r != -EINVAL)
			bad_ret++;
		if (r && (!err.msg[0] || strcmp(err.file, "m.yaml")))
			bad_err++;
		if (r) {
			rejected++;
		} else {
			bad_rt += roundtrip(st);
			accepted++;
			for (int s = 0; s < st->n_services; s++)
				for (int p = 0; p < st->services[s].n_ports; p++)
					for (int e = 0; e < st->services[s].endpoints[p].n; e++)
						bad_ep += st->services[s].endpoints[p].v[e].port == 0 ||
							  st->services[s].endpoints[p].v[e].pod->phase !=
								  MD_PHASE_RUNNING;
		}
		md_state_free(st);
		free(buf);
	}
	diag("%d mutated inputs accepted, %d rejected", accepted, rejected);
	is_int(bad_ret, 0, "every failure is -EINVAL");
	is_int(bad_err, 0, "every failure fills the error with the file name and a message");
	is_int(bad_ep, 0, "accepted states have only ready endpoints with a port");
	is_int(bad_rt, 0, "every accepted state survives the emit / parse round trip");
	ok(accepted > 0 && rejected > 0, "the mutations exercise both outcomes");
	return done_testing();
}
