/* cni_pod.c — the pod as the node's state source sees it (state.h
 * "runtime Pods"): the same YAML the lab's kubelet writes (lab_sup.c
 * pod_publish), so the agent serves a container exactly like a lab pod.
 *
 * Labels: DIR/NS_NAME of the config's labelsDir ("key=value" lines, '#'
 * comments), then args.cni.labels of the config (CNI conventions), the
 * second winning. Each key and value is checked as Kubernetes checks
 * labels, so a bad one fails ADD (invalid config, naming file and line)
 * instead of reaching the state source, where it would fail every load.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerohop/state.h"
#include "cni_int.h"

#define MAX_LABELS 64

struct label {
	char key[254], value[64];
};

/* [prefix/]name: name 1-63 of [A-Za-z0-9._-] starting and ending
 * alphanumeric; prefix a DNS subdomain. Values: "" or the same as name. */
static bool label_part_ok(const char *s, size_t n, bool empty_ok)
{
	if (!n)
		return empty_ok;
	if (n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static bool label_key_ok(const char *k)
{
	const char *slash = strchr(k, '/');

	if (!slash)
		return label_part_ok(k, strlen(k), false);
	if (slash == k || slash - k > 253)
		return false;
	for (const char *p = k; p < slash; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '-' && *p != '.')
			return false;
	return label_part_ok(slash + 1, strlen(slash + 1), false);
}

static int label_set(struct label *l, int *n, const char *k, const char *v, const char *where,
		     struct cni_err *e)
{
	int i;

	if (!label_key_ok(k) || !label_part_ok(v, strlen(v), true))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid pod label",
				"%s: '%s=%s' is not a valid Kubernetes label", where, k, v);
	for (i = 0; i < *n && strcmp(l[i].key, k); i++)
		;
	if (i == *n) {
		if (*n == MAX_LABELS)
			return cni_fail(e, CNI_ERR_CONFIG, "too many pod labels", "%s: more than %d",
					where, MAX_LABELS);
		(*n)++;
	}
	snprintf(l[i].key, sizeof(l[i].key), "%s", k);
	snprintf(l[i].value, sizeof(l[i].value), "%s", v);
	return 0;
}

static int labels_read(const struct cni_req *r, struct label *l, int *n, struct cni_err *e)
{
	const struct jv *cl = jv_get(jv_get(jv_get(r->conf, "args"), "cni"), "labels");
	char path[PATH_MAX], line[512], where[PATH_MAX + 32];
	FILE *f;
	int ln = 0, ret;

	*n = 0;
	if (r->labels_dir) {
		snprintf(path, sizeof(path), "%s/%s_%s", r->labels_dir, r->pod_ns, r->pod_name);
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f)) {
			char *s = line, *eq, *end;

			ln++;
			while (isspace((unsigned char)*s))
				s++;
			end = s + strlen(s);
			while (end > s && isspace((unsigned char)end[-1]))
				*--end = 0;
			if (!*s || *s == '#')
				continue;
			snprintf(where, sizeof(where), "%s:%d", path, ln);
			eq = strchr(s, '=');
			if (!eq) {
				fclose(f);
				return cni_fail(e, CNI_ERR_CONFIG, "invalid labels file",
						"%s: expected key=value, got '%s'", where, s);
			}
			for (char *k = eq; k > s && isspace((unsigned char)k[-1]); k--)
				k[-1] = 0;
			*eq++ = 0;
			while (isspace((unsigned char)*eq))
				eq++;
			ret = label_set(l, n, s, eq, where, e);
			if (ret) {
				fclose(f);
				return ret;
			}
		}
		if (f)
			fclose(f);
	}
	for (int i = 0; cl && i < cl->n; i++) {
		const char *k = jv_str(jv_get(jv_at(cl, i), "key"));
		const char *v = jv_str(jv_get(jv_at(cl, i), "value"));

		snprintf(where, sizeof(where), "args.cni.labels[%d]", i);
		if (!k || !v)
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"%s: expected {\"key\": STRING, \"value\": STRING}", where);
		ret = label_set(l, n, k, v, where, e);
		if (ret)
			return ret;
	}
	return 0;
}

int cni_pod_publish(const struct cni_req *r, uint32_t ip, struct cni_err *e)
{
	struct label l[MAX_LABELS];
	char *y = NULL, a[16];
	size_t len = 0;
	struct ss *s;
	FILE *f;
	int n, ret;

	ret = labels_read(r, l, &n, e);
	if (ret)
		return ret;
	f = open_memstream(&y, &len);
	fprintf(f, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n",
		r->pod_name, r->pod_ns);
	if (n)
		fprintf(f, "  labels:\n");
	for (int i = 0; i < n; i++)	/* both checked above: no quote or backslash inside */
		fprintf(f, "    \"%s\": \"%s\"\n", l[i].key, l[i].value);
	fprintf(f, "  annotations:\n    %s: \"%s\"\n    %s: \"%s\"\n", CNI_ANN_CONTAINER, r->id,
		CNI_ANN_NETNS, r->netns);
	fprintf(f, "spec:\n  nodeName: %s\n  containers:\n  - name: main\n", r->node);
	inet_ntop(AF_INET, &ip, a, sizeof(a));
	if (r->plen6) {	/* dual-stack: both, IPv4 first (as the lab's kubelet) */
		char a6[INET6_ADDRSTRLEN];
		struct in6_addr ip6;

		cni_ip6_of(r, ip, &ip6);
		inet_ntop(AF_INET6, &ip6, a6, sizeof(a6));
		if (r->v6only)	/* its IPv4 is only the index (cni_net.c invariant 6) */
			fprintf(f, "status:\n  phase: Running\n  podIP: \"%s\"\n  podIPs: [{ip: \"%s\"}]\n",
				a6, a6);
		else
			fprintf(f, "status:\n  phase: Running\n  podIP: %s\n"
				"  podIPs: [{ip: %s}, {ip: \"%s\"}]\n", a, a, a6);
	} else {
		fprintf(f, "status:\n  phase: Running\n  podIP: %s\n", a);
	}
	fclose(f);
	ret = ss_open(r->state_dir, &s);
	if (!ret) {
		ret = ss_put_pod(s, r->pod_ns, r->pod_name, y);
		ss_close(s);
	}
	free(y);
	if (ret)
		return cni_fail(e, ret == -EINVAL ? CNI_ERR_CONFIG : CNI_ERR_IO,
				"cannot publish the pod to the node's state",
				"pod %s/%s in %s: %s", r->pod_ns, r->pod_name, r->state_dir,
				strerror(-ret));
	return 0;
}

/* The stored pod's text (NULL when absent); the file layout is state.h's. */
static char *pod_text(const char *state_dir, const char *ns, const char *name)
{
	char p[PATH_MAX], *t = NULL;
	size_t len = 0;
	FILE *f;

	snprintf(p, sizeof(p), "%s/pods/%s_%s.yaml", state_dir, ns, name);
	f = fopen(p, "re");
	if (!f)
		return NULL;
	t = cni_read_all(fileno(f), &len);
	fclose(f);
	return t;
}

static bool names_id(const char *text, const char *id)
{
	char want[400];

	snprintf(want, sizeof(want), "%s: \"%s\"\n", CNI_ANN_CONTAINER, id);
	return text && strstr(text, want);
}

const char *cni_pod_ip(const struct cni_req *r, uint32_t ip, char out[INET6_ADDRSTRLEN])
{
	struct in6_addr ip6;

	if (!r->v6only)
		return inet_ntop(AF_INET, &ip, out, INET6_ADDRSTRLEN);
	cni_ip6_of(r, ip, &ip6);
	return inet_ntop(AF_INET6, &ip6, out, INET6_ADDRSTRLEN);
}

bool cni_pod_matches(const struct cni_req *r, const struct cni_rec *rec)
{
	char *t = pod_text(r->state_dir, rec->ns, rec->name), want[80], a[INET6_ADDRSTRLEN];
	bool yes;

	/* an IPv6 is written quoted (YAML would read a bare "::" oddly) */
	cni_pod_ip(r, rec->ip, a);
	snprintf(want, sizeof(want), r->v6only ? "podIP: \"%s\"\n" : "podIP: %s\n", a);
	yes = names_id(t, r->id) && strstr(t, want);
	free(t);
	return yes;
}

int cni_pod_unpublish(const char *state_dir, const char *ns, const char *name, const char *id)
{
	char *t = pod_text(state_dir, ns, name);
	struct ss *s;
	int ret = 0;

	/* another container now owns the name (a replaced sandbox): leave it */
	if (names_id(t, id) && !(ret = ss_open(state_dir, &s))) {
		ret = ss_del_pod(s, ns, name);
		ss_close(s);
	}
	free(t);
	return ret;
}
