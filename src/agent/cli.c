/* cli.c — `zerohop apply|delete|get`: the user's side of the state source.
 *
 * apply/delete validate everything first (ss_apply/ss_delete are all or
 * nothing) and print errors as the model formats them, "FILE:LINE: FIELD:
 * MESSAGE", exit 1, state untouched. get reads the state source (and, for
 * stats, the pinned maps of the lab's nodes); it never needs an agent.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <arpa/inet.h>

#include "zerohop/etcd.h"
#include "zerohop/agent.h"
#include "zerohop/obs.h"
#include "zerohop/accel.h"
#include "zerohop/cli.h"
#include "zerohop/json.h"
#include "zerohop/identity.h"
#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "zerohop/policy.h"
#include "zerohop/state.h"

struct cli_opts {
	const char *lab;
	const char *state;	/* explicit --state DIR */
	char **files;
	int n_files;
	bool json;
	bool yaml;		/* -o yaml: the stored manifests (etcd state) */
	bool strict;		/* --strict: ignored kinds are errors */
	const char *ns;		/* -n/--namespace, or NULL */
	const char *kind;
};

static void usage(FILE *f, const char *cmd)
{
	if (!strcmp(cmd, "get"))
		fprintf(f, "usage: zerohop get %s [-n NS] [-o json|table|yaml] [--lab LAB | --state DIR|etcd://H:P,...]\n"
			"  -n, --namespace NS   only objects of namespace NS (default: all)\n",
			CLI_GET_RESOURCES);
	else
		fprintf(f, "usage: zerohop %s -f FILE|DIR [-f ...] [-n NS]%s [--lab LAB | --state DIR|etcd://H:P,...]\n"
			"  -f, --filename PATH  a manifest file (multi-document YAML or JSON) or a\n"
			"                       directory of them (*.yaml, *.yml, *.json)\n"
			"  -n, --namespace NS   namespace of objects without one; an object naming\n"
			"                       another namespace is an error\n"
			"%s",
			cmd, !strcmp(cmd, "apply") ? " [--strict]" : "",
			!strcmp(cmd, "apply") ?
			"  --strict             refuse kinds zerohop does not act on (Secret, RBAC,\n"
			"                       Gateway, other meshes' resources...) instead of\n"
			"                       skipping them\n" : "");
	fprintf(f, "  --etcd-cacert F, --etcd-cert F, --etcd-key F\n"
		"                       TLS to etcd (--state https://H:P,...): CA, client\n"
		"                       certificate and key (or ZEROHOP_ETCD_CACERT/CERT/KEY)\n");
}

/* 0, 1 for --help (usage printed on stdout), or -EINVAL (usage error). */
static int parse_common(int argc, char **argv, struct cli_opts *o, bool want_files)
{
	static const struct option opts[] = {
		{ "lab", required_argument, NULL, 'l' },
		{ "state", required_argument, NULL, 's' },
		{ "filename", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "strict", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		EG_TLS_OPTIONS,	/* etcd over TLS: docs/state-etcd.md */
		{ 0 },
	};
	const char *why;
	int c;

	optind = 1;
	o->files = zh_calloc(argc + 1, sizeof(*o->files));
	while ((c = getopt_long(argc, argv, "f:o:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': o->lab = optarg; break;
		case 's': o->state = optarg; break;
		case EG_TLS_FLAG ... EG_TLS_FLAG + 2: eg_tls_flag(c, optarg); break;
		case 'h':
			usage(stdout, argv[0]);
			return 1;
		case 'n':
			if ((why = md_check_dns_label(optarg))) {
				fprintf(stderr, "zerohop %s: -n: invalid namespace \"%s\": %s\n", argv[0],
					optarg, why);
				return -EINVAL;
			}
			o->ns = optarg;
			break;
		case 'S':
			if (!want_files)
				goto bad;
			o->strict = true;
			break;
		case 'f':
			if (!want_files)
				goto bad;
			o->files[o->n_files++] = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "json") && strcmp(optarg, "table") && strcmp(optarg, "yaml")) {
				fprintf(stderr, "zerohop %s: -o: expected json, table or yaml, got '%s'\n",
					argv[0], optarg);
				return -EINVAL;
			}
			o->json = !strcmp(optarg, "json");
			o->yaml = !strcmp(optarg, "yaml");
			break;
		default:
			goto bad;
		}
	}
	if (want_files && !o->n_files) {
		usage(stderr, argv[0]);
		return -EINVAL;
	}
	if (!want_files) {
		if (optind >= argc) {
			usage(stderr, argv[0]);
			return -EINVAL;
		}
		o->kind = argv[optind];
	}
	return 0;
bad:
	fprintf(stderr, "zerohop %s: unknown option (see zerohop %s --help)\n", argv[0], argv[0]);
	return -EINVAL;
}

static int open_state(const struct cli_opts *o, struct ss **s)
{
	const char *env = getenv("ZEROHOP_STATE");	/* docs/state-etcd.md */
	char dir[512];
	int ret;

	if (o->state)
		snprintf(dir, sizeof(dir), "%s", o->state);
	else if (!o->lab && env && *env)
		snprintf(dir, sizeof(dir), "%s", env);
	else
		zh_state_dir(dir, sizeof(dir), zh_lab_name(o->lab));
	ret = ss_open(dir, s);
	if (ret)
		fprintf(stderr, "zerohop: state %s: %s\n", dir, strerror(-ret));
	return ret;
}

static void report_line(void *arg, enum ss_event ev, const char *what, const char *ns,
			const char *detail)
{
	static const char *const verb[] = { "created", "configured", "unchanged", "deleted" };

	(void)arg;
	(void)ns;
	if (ev == SS_WARNING)
		fprintf(stderr, "warning: %s: %s\n", what, detail);
	else if (ev == SS_IGNORED)
		printf("%s ignored (%s)\n", what, detail);
	else
		printf("%s %s\n", what, verb[ev]);
}

static int apply_or_delete(int argc, char **argv, bool del)
{
	struct cli_opts o = {};
	struct md_err err = {};
	struct ss_opts so = { .report = report_line };
	struct ss *s = NULL;
	char buf[800];
	int ret;

	zh_log_init(argv[0], ZH_WARN);
	ret = parse_common(argc, argv, &o, true);
	if (ret)
		goto out;
	ret = open_state(&o, &s);
	if (ret)
		goto out;
	so.strict = o.strict;
	so.ns = o.ns;
	ret = del ? ss_delete_opts(s, o.files, o.n_files, &so, &err) :
		    ss_apply_opts(s, o.files, o.n_files, &so, &err);
	if (ret) {
		if (err.file[0] || err.msg[0])
			fprintf(stderr, "%s\n", md_err_str(&err, buf, sizeof(buf)));
		else
			fprintf(stderr, "zerohop %s: %s\n", argv[0], strerror(-ret));
		goto out;
	}
	printf("%s: generation %llu\n", del ? "deleted" : "applied",
	       (unsigned long long)ss_generation(s));
out:
	ss_close(s);
	free(o.files);
	return ret < 0 ? 1 : 0;
}

int cli_apply(int argc, char **argv)
{
	return apply_or_delete(argc, argv, false);
}

int cli_delete(int argc, char **argv)
{
	return apply_or_delete(argc, argv, true);
}

/* ---- get ------------------------------------------------------------------ */

/* get -n NS: only objects of that namespace. */
static const char *g_ns;

static bool ns_skip(const char *ns)
{
	return g_ns && strcmp(g_ns, ns ? ns : MD_DEFAULT_NS);
}

static void jstr(const char *s)
{
	json_put_str(stdout, s);
}

static const char *ip_str(uint32_t ip, char *buf)
{
	return inet_ntop(AF_INET, &ip, buf, INET_ADDRSTRLEN);
}

/* A map address: IPv4 when v4-mapped, else "[IPv6]" (docs/ipv6.md). */
static const char *addr_str(const uint8_t a[16], char *buf)
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char b6[INET6_ADDRSTRLEN];

	if (!memcmp(a, pre, sizeof(pre)))
		return ip_str(ag_v4_of(a), buf);
	snprintf(buf, INET6_ADDRSTRLEN + 2, "[%s]", inet_ntop(AF_INET6, a, b6, sizeof(b6)));
	return buf;
}

static const char *phase_str(enum md_phase p)
{
	static const char *const n[] = { "-", "Pending", "Running", "Succeeded", "Failed" };

	return p <= MD_PHASE_FAILED ? n[p] : "?";
}

/* Does svc go through the node L7 proxy (its TCP ports)? The same rules as
 * compile.c 3-4: an HTTPRoute that needs L7 on it, or the opt-in annotation. */
static bool svc_via_proxy(const struct md_state *st, const struct md_service *svc)
{
	const char *v = md_labels_get(&svc->meta.annotations, ZH_LB_ANN_L7);
	int i, p;

	if (v && !strcmp(v, "true"))
		return true;
	for (i = 0; i < st->n_routes; i++)
		for (p = 0; p < st->routes[i].n_parents; p++)
			if (st->routes[i].parents[p].svc == svc && md_route_needs_l7(&st->routes[i]))
				return true;
	for (i = 0; i < st->n_splits; i++)
		if (st->splits[i].root_svc == svc && st->splits[i].n_matches)
			return true;
	return false;
}

/* The Service's address of family f ("" when it has none). */
static const char *svc_ip(const struct md_service *s, enum md_family f, char *buf, size_t len)
{
	if (f == MD_FAM_V6)
		return inet_ntop(AF_INET6, &s->cluster_ip6, buf, (socklen_t)len);
	return s->cluster_ip ? inet_ntop(AF_INET, &s->cluster_ip, buf, (socklen_t)len) : "";
}

static void get_services(const struct md_state *st, bool json)
{
	char ip[INET6_ADDRSTRLEN], b6[INET6_ADDRSTRLEN];
	int i, p, n_out = 0;

	if (!json)
		printf("%-16s %-24s %-16s %-24s %-12s %s\n", "NAMESPACE", "NAME", "CLUSTER-IP",
		       "PORTS", "ENDPOINTS", "L7");
	else
		printf("[");
	for (i = 0; i < st->n_services; i++) {
		const struct md_service *s = &st->services[i];
		char ports[256] = "", eps[64] = "";
		int off = 0, eoff = 0;

		if (ns_skip(s->meta.ns))
			continue;
		for (p = 0; p < s->n_ports; p++) {
			off += snprintf(ports + off, off < (int)sizeof(ports) ? sizeof(ports) - off : 0,
					"%s%u/%s", p ? "," : "", s->ports[p].port,
					md_proto_name(s->ports[p].proto));
			eoff += snprintf(eps + eoff, eoff < (int)sizeof(eps) ? sizeof(eps) - eoff : 0,
					 "%s%d", p ? "," : "", s->endpoints ? s->endpoints[p].n : 0);
		}
		/* clusterIP is the primary family's address, as in Kubernetes */
		if (s->headless)
			snprintf(ip, sizeof(ip), "None");
		else if (s->n_families && s->families[0] == MD_FAM_V6)
			svc_ip(s, MD_FAM_V6, ip, sizeof(ip));
		else
			ip_str(s->cluster_ip, ip);
		if (!json) {
			printf("%-16s %-24s %-16s %-24s %-12s %s\n", s->meta.ns, s->meta.name, ip, ports,
			       eps, svc_via_proxy(st, s) ? "node proxy" : "-");
			continue;
		}
		printf("%s{\"namespace\":", n_out++ ? "," : "");
		jstr(s->meta.ns);
		printf(",\"name\":");
		jstr(s->meta.name);
		printf(",\"clusterIP\":");
		jstr(ip);
		/* the dual-stack fields after defaulting (docs/ipv6.md) */
		printf(",\"clusterIPs\":[");
		for (p = 0; p < (s->headless ? 1 : s->n_families); p++) {
			printf("%s", p ? "," : "");
			jstr(s->headless ? "None" : svc_ip(s, s->families[p], b6, sizeof(b6)));
		}
		printf("],\"ipFamilies\":[");
		for (p = 0; p < s->n_families; p++)
			printf("%s\"%s\"", p ? "," : "", md_family_name(s->families[p]));
		printf("],\"ipFamilyPolicy\":\"%s\"", md_fam_policy_name(s->fam_policy));
		printf(",\"l7Proxy\":%s,\"ports\":[", svc_via_proxy(st, s) ? "true" : "false");
		for (p = 0; p < s->n_ports; p++) {
			printf("%s{\"name\":", p ? "," : "");
			jstr(s->ports[p].name ? s->ports[p].name : "");
			printf(",\"port\":%u,\"protocol\":\"%s\",\"endpoints\":%d}", s->ports[p].port,
			       md_proto_name(s->ports[p].proto), s->endpoints ? s->endpoints[p].n : 0);
		}
		printf("]}");
	}
	if (json)
		printf("]\n");
}

static void get_endpoints(const struct md_state *st, bool json)
{
	char ip[INET_ADDRSTRLEN];
	int i, p, e, first = 1;

	if (!json)
		printf("%-16s %-24s %-10s %s\n", "NAMESPACE", "NAME", "PORT", "ENDPOINTS");
	else
		printf("[");
	for (i = 0; i < st->n_services; i++) {
		const struct md_service *s = &st->services[i];

		if (ns_skip(s->meta.ns))
			continue;
		for (p = 0; p < s->n_ports; p++) {
			const struct md_endpoint_set *set = s->endpoints ? &s->endpoints[p] : NULL;
			int n = set ? set->n : 0;

			if (json) {
				printf("%s{\"namespace\":", first ? "" : ",");
				first = 0;
				jstr(s->meta.ns);
				printf(",\"name\":");
				jstr(s->meta.name);
				printf(",\"port\":%u,\"protocol\":\"%s\",\"endpoints\":[", s->ports[p].port,
				       md_proto_name(s->ports[p].proto));
				for (e = 0; e < n; e++) {
					printf("%s{\"ip\":\"%s\",\"port\":%u,\"pod\":", e ? "," : "",
					       ip_str(set->v[e].ip, ip), set->v[e].port);
					jstr(set->v[e].pod ? set->v[e].pod->meta.name : "");
					printf("}");
				}
				printf("]}");
				continue;
			}
			printf("%-16s %-24s %-10u ", s->meta.ns, s->meta.name, s->ports[p].port);
			if (!n)
				printf("<none>");
			for (e = 0; e < n; e++)
				printf("%s%s:%u", e ? "," : "", ip_str(set->v[e].ip, ip), set->v[e].port);
			printf("\n");
		}
	}
	if (json)
		printf("]\n");
}

static int get_backends(const struct md_state *st, bool json)
{
	struct ag_compiled *c = NULL;
	char err[400], ip[INET6_ADDRSTRLEN + 2], bip[INET6_ADDRSTRLEN + 2];
	int i, j, ret, n_out = 0;

	ret = ag_compile(st, &c, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "zerohop get backends: %s\n", err);
		return ret;
	}
	if (!json)
		printf("%-28s %-24s %-26s %-22s %s\n", "SERVICE", "VIP", "SOURCE", "BACKEND", "SHARE");
	else
		printf("{\"services\":[");
	for (i = 0; i < c->n_svcs; i++) {
		const struct ag_svc *s = &c->svcs[i];
		double sum = 0;
		char vip[64], svc[160];

		for (j = 0; j < s->n_be; j++)
			sum += s->be[j].weight;
		snprintf(vip, sizeof(vip), "%s:%u/%s", addr_str(s->key.vip, ip),
			 ntohs(s->key.port), s->key.proto == ZH_LB_UDP ? "UDP" : "TCP");
		snprintf(svc, sizeof(svc), "%s/%s", s->ns, s->name);
		if (ns_skip(s->ns))
			continue;
		if (json) {
			printf("%s{\"service\":", n_out++ ? "," : "");
			jstr(svc);
			printf(",\"vip\":");
			jstr(vip);
			printf(",\"source\":");
			jstr(s->source);
			printf(",\"l7_proxy\":%s,\"backends\":[",
			       s->flags & ZH_LB_F_L7 ? "true" : "false");
			for (j = 0; j < s->n_be; j++) {
				printf("%s{\"addr\":\"%s:%u\",\"pod\":", j ? "," : "",
				       addr_str(s->be[j].be.addr, bip), ntohs(s->be[j].be.port));
				jstr(s->be[j].pod);
				printf(",\"via\":");
				jstr(s->be[j].via);
				printf(",\"share\":%.6f}", s->be[j].weight / sum);
			}
			printf("]}");
			continue;
		}
		if (!s->n_be)
			printf("%-28s %-24s %-26s %-22s %s\n", svc, vip, s->source, "<none>",
			       "connect refused");
		for (j = 0; j < s->n_be; j++) {
			char b[64];

			snprintf(b, sizeof(b), "%s:%u", addr_str(s->be[j].be.addr, bip),
				 ntohs(s->be[j].be.port));
			printf("%-28s %-24s %-26s %-22s %.4f%s\n", j ? "" : svc, j ? "" : vip,
			       j ? "" : s->source, b, s->be[j].weight / sum,
			       !j && (s->flags & ZH_LB_F_L7) ? "  (L7: connections go through the node proxy)" : "");
		}
	}
	if (json) {
		printf("],\"notes\":[");
		for (i = 0; i < c->n_notes; i++) {
			printf("%s", i ? "," : "");
			jstr(c->notes[i]);
		}
		printf("]}\n");
	} else {
		for (i = 0; i < c->n_notes; i++)
			printf("note: %s\n", c->notes[i]);
	}
	ag_compiled_free(c);
	return 0;
}

/* What a lab's nodes run in place of the agent's hooks: the L7 capture
 * needs the agent's connect4 (bpf mode). Not a lab, or lab.conf unreadable:
 * the agent's default (bpf). */
enum dp_kind { DP_BPF, DP_NFT, DP_NONE };

static enum dp_kind lab_datapath(const char *lab)
{
	struct lab_topo t;

	if (!lab || lab_topo_read(lab, &t))
		return DP_BPF;
	return !t.mesh ? DP_NONE : t.nft ? DP_NFT : DP_BPF;
}

static void get_splits(const struct md_state *st, bool json, enum dp_kind dp)
{
	int i, b, n_out = 0;

	if (!json)
		printf("%-16s %-24s %-24s %-40s %s\n", "NAMESPACE", "NAME", "ROOT",
		       "BACKENDS (weight)", "STATUS");
	else
		printf("[");
	for (i = 0; i < st->n_splits; i++) {
		const struct md_trafficsplit *t = &st->splits[i];
		bool ready = !t->not_ready || !*t->not_ready;
		char bk[512] = "", status[600];
		int off = 0;

		if (ns_skip(t->meta.ns))
			continue;
		if (!ready)
			snprintf(status, sizeof(status), "not ready: %s", t->not_ready);
		else if (t->n_matches && dp == DP_NFT)
			/* the root keeps its own endpoints (compile.c); nothing
			 * captures it for the proxy that would apply the matches */
			snprintf(status, sizeof(status), "NOT enforced: matches need the node L7 "
				 "proxy, which --service-proxy nft does not capture (the root "
				 "Service's own endpoints serve every request)");
		else if (t->n_matches && dp == DP_NONE)
			snprintf(status, sizeof(status), "not enforced (lab without mesh: no agent)");
		else if (t->n_matches)
			snprintf(status, sizeof(status), "ready (matching requests only, per request "
				 "by the node L7 proxy)");
		else
			snprintf(status, sizeof(status), "ready");
		if (json) {
			printf("%s{\"namespace\":", n_out++ ? "," : "");
			jstr(t->meta.ns);
			printf(",\"name\":");
			jstr(t->meta.name);
			printf(",\"service\":");
			jstr(t->root);
			printf(",\"ready\":%s,\"reason\":", ready ? "true" : "false");
			jstr(ready ? "" : t->not_ready);
			printf(",\"matches\":[");
			for (b = 0; b < t->n_matches; b++) {
				printf("%s", b ? "," : "");
				jstr(t->matches[b].name);
			}
			printf("],\"backends\":[");
			for (b = 0; b < t->n_backends; b++) {
				printf("%s{\"service\":", b ? "," : "");
				jstr(t->backends[b].service);
				printf(",\"weight_milli\":%llu,\"exists\":%s}",
				       (unsigned long long)t->backends[b].weight_milli,
				       t->backends[b].svc ? "true" : "false");
			}
			printf("]}");
			continue;
		}
		for (b = 0; b < t->n_backends; b++)
			off += snprintf(bk + off, off < (int)sizeof(bk) ? sizeof(bk) - off : 0,
					"%s%s=%llum", b ? " " : "", t->backends[b].service,
					(unsigned long long)t->backends[b].weight_milli);
		printf("%-16s %-24s %-24s %-40s %s\n", t->meta.ns, t->meta.name, t->root, bk, status);
	}
	if (json)
		printf("]\n");
}

static void get_serviceaccounts(const struct md_state *st, bool json)
{
	int i, j, n_out = 0;

	if (!json)
		printf("%-16s %-32s %s\n", "NAMESPACE", "NAME", "PODS");
	else
		printf("[");
	for (i = 0; i < st->n_serviceaccounts; i++) {
		const struct md_serviceaccount *sa = &st->serviceaccounts[i];
		int pods = 0;

		if (ns_skip(sa->meta.ns))
			continue;
		for (j = 0; j < st->n_pods; j++)
			pods += st->pods[j].has_status && !st->pods[j].terminating &&
				!strcmp(st->pods[j].meta.ns, sa->meta.ns) &&
				!strcmp(md_pod_service_account(st, &st->pods[j]), sa->meta.name);
		if (!json) {
			printf("%-16s %-32s %d\n", sa->meta.ns, sa->meta.name, pods);
			continue;
		}
		printf("%s{\"namespace\":", n_out++ ? "," : "");
		jstr(sa->meta.ns);
		printf(",\"name\":");
		jstr(sa->meta.name);
		printf(",\"pods\":%d}", pods);
	}
	if (json)
		printf("]\n");
}

static void get_routegroups(const struct md_state *st, bool json)
{
	int i, j, n_out = 0;

	if (!json)
		printf("%-16s %-24s %s\n", "NAMESPACE", "NAME", "MATCHES");
	else
		printf("[");
	for (i = 0; i < st->n_routegroups; i++) {
		const struct md_routegroup *g = &st->routegroups[i];

		if (ns_skip(g->meta.ns))
			continue;
		if (json) {
			printf("%s{\"namespace\":", n_out++ ? "," : "");
			jstr(g->meta.ns);
			printf(",\"name\":");
			jstr(g->meta.name);
			printf(",\"matches\":[");
		} else {
			printf("%-16s %-24s ", g->meta.ns, g->meta.name);
		}
		for (j = 0; j < g->n_matches; j++) {
			printf("%s", j ? (json ? "," : " ") : "");
			if (json)
				jstr(g->matches[j].name);
			else
				printf("%s", g->matches[j].name);
		}
		printf(json ? "]}" : "\n");
	}
	if (json)
		printf("]\n");
}

static void get_pods(const struct md_state *st, bool json)
{
	char ip[INET_ADDRSTRLEN];
	int i, n_out = 0;

	if (!json)
		printf("%-16s %-32s %-12s %-16s %s\n", "NAMESPACE", "NAME", "NODE", "IP", "PHASE");
	else
		printf("[");
	for (i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];
		const char *node = p->spec.node_name ? p->spec.node_name : "-";

		if (ns_skip(p->meta.ns))
			continue;
		if (p->ip)
			ip_str(p->ip, ip);
		else
			snprintf(ip, sizeof(ip), "-");
		if (!json) {
			printf("%-16s %-32s %-12s %-16s %s\n", p->meta.ns, p->meta.name, node, ip,
			       p->terminating ? "Terminating" : phase_str(p->phase));
			continue;
		}
		printf("%s{\"namespace\":", n_out++ ? "," : "");
		jstr(p->meta.ns);
		printf(",\"name\":");
		jstr(p->meta.name);
		printf(",\"node\":");
		jstr(node);
		printf(",\"ip\":");
		jstr(ip);
		/* status.podIPs: every family, IPv4 first (ip is the primary) */
		printf(",\"ips\":[");
		if (p->ip)
			jstr(ip);
		if (!IN6_IS_ADDR_UNSPECIFIED(&p->ip6)) {
			char a6[INET6_ADDRSTRLEN];

			printf("%s", p->ip ? "," : "");
			jstr(inet_ntop(AF_INET6, &p->ip6, a6, sizeof(a6)));
		}
		printf("]");
		printf(",\"phase\":");
		jstr(phase_str(p->phase));
		printf(",\"terminating\":%s", p->terminating ? "true" : "false");
		printf("}");
	}
	if (json)
		printf("]\n");
}

static void get_routes(const struct md_state *st, bool json, enum dp_kind dp)
{
	int i, p, n_out = 0;

	if (!json)
		printf("%-16s %-24s %-28s %s\n", "NAMESPACE", "NAME", "PARENTS", "STATUS");
	else
		printf("[");
	for (i = 0; i < st->n_routes; i++) {
		const struct md_httproute *r = &st->routes[i];
		bool l7 = md_route_needs_l7(r), svc_parent = false;
		char parents[256] = "", full[700];
		const char *status;
		bool consumer = false;
		int off = 0;

		if (ns_skip(r->meta.ns))
			continue;
		for (p = 0; p < r->n_parents; p++) {
			consumer |= md_parent_is_consumer(r, &r->parents[p]);
			const char *kind = r->parents[p].kind ? r->parents[p].kind : "Gateway";

			svc_parent |= !strcmp(kind, "Service");
			off += snprintf(parents + off, off < (int)sizeof(parents) ? sizeof(parents) - off : 0,
					"%s%s/%s", p ? "," : "", kind, r->parents[p].name);
		}
		if (svc_parent && dp == DP_NONE)
			status = "not enforced (lab without mesh: no agent)";
		else if (l7 && svc_parent && dp == DP_NFT)
			/* nft DNAT balances the parent's ClusterIP per connection
			 * (weights included); nothing captures it for the proxy */
			status = "NOT enforced: matches/filters need the node L7 proxy, which --service-proxy nft does not capture (balanced at L4 per connection)";
		else if (l7 && svc_parent)
			status = "enforced by the node L7 proxy (per request)";
		else if (svc_parent)
			status = "enforced at L4 (backendRefs weights per connection)";
		else
			status = "not acted on (no Service parent; zerohop has no ingress gateway)";
		if (r->not_ready && *r->not_ready) {
			snprintf(full, sizeof(full), "not ready: %s; %s", r->not_ready, status);
			status = full;
		} else if (consumer && l7 && dp == DP_BPF) {
			snprintf(full, sizeof(full), "%s; consumer route: clients in namespace %s only",
				 status, r->meta.ns);
			status = full;
		}
		if (!json) {
			char name[300];

			/* GRPCRoutes are routes too, named by kind beside HTTPRoutes */
			snprintf(name, sizeof(name), "%s%s", r->grpc ? "grpcroute/" : "",
				 r->meta.name);
			printf("%-16s %-24s %-28s %s\n", r->meta.ns, name, parents, status);
			continue;
		}
		printf("%s{\"namespace\":", n_out++ ? "," : "");
		jstr(r->meta.ns);
		printf(",\"name\":");
		jstr(r->meta.name);
		printf(",\"kind\":\"%s\"", r->grpc ? "GRPCRoute" : "HTTPRoute");
		printf(",\"ready\":%s,\"parents\":", r->not_ready && *r->not_ready ? "false" : "true");
		jstr(parents);
		printf(",\"needs_l7\":%s,\"status\":", l7 ? "true" : "false");
		jstr(status);
		printf("}");
	}
	if (json)
		printf("]\n");
}

/* On a lab, say which node agents are not serving and why (the counters
 * above are the kernel's: a node whose agent is down keeps its last
 * programmed state, a node that never had one has nothing to show). */
static void stats_daemons_say(const char *lab)
{
	struct lab_topo t;

	if (lab_topo_read(lab, &t))
		return;
	for (int i = 0; i < t.n_nodes; i++) {
		struct lab_node_daemons nd;

		/* a running agent with an error is degraded (its last sync
		 * failed, or its etcd is out of reach: docs/state-etcd.md) */
		if (!t.mesh || lab_node_daemons_read(lab, t.nodes[i].name, &nd) ||
		    (!strcmp(nd.agent.state, "Running") && !nd.agent.error[0]))
			continue;
		printf("node %s: agent %s%s%s (see zerohop lab status --lab %s)\n", t.nodes[i].name,
		       nd.agent.state, nd.agent.error[0] ? ": " : "", nd.agent.error, lab);
	}
}

static int get_stats(const struct cli_opts *o)
{
	char root[256], pin[512];
	const char *lab = zh_lab_name(o->lab);
	struct dirent *de;
	int n = 0, k;
	DIR *d;

	snprintf(root, sizeof(root), "%s/%s", ZH_BPF_ROOT, lab);
	d = opendir(root);
	if (!d) {
		fprintf(stderr, "zerohop get stats: no pinned agents for lab %s (%s: %s)\n", lab, root,
			strerror(errno));
		stats_daemons_say(lab);
		return -ENOENT;
	}
	if (o->json)
		printf("{");
	while ((de = readdir(d))) {
		uint64_t st[ZH_LB_STAT_MAX], meta[ZH_LB_META_MAX];
		struct ag_accel_stats as;
		struct pol_drops pd;
		uint64_t obs_ev = 0, obs_lost = 0;
		int have_accel, have_pol, have_obs;

		if (de->d_name[0] == '.')
			continue;
		snprintf(pin, sizeof(pin), "%s/%s", root, de->d_name);
		if (ag_lb_read_stats(pin, st, meta))
			continue;
		have_accel = ag_accel_read_pinned_stats(pin, &as) == 0;
		have_pol = pol_read_drops(pin, &pd) == 0;
		have_obs = ag_obs_read_pinned_stats(pin, &obs_ev, &obs_lost) == 0;
		if (have_pol)
			pol_drops_free(&pd);
		if (o->json) {
			printf("%s", n ? "," : "");
			jstr(de->d_name);
			printf(":{\"generation\":%llu,\"syncs\":%llu",
			       (unsigned long long)meta[ZH_LB_META_GENERATION],
			       (unsigned long long)meta[ZH_LB_META_SYNCS]);
			for (k = 0; k < ZH_LB_STAT_MAX; k++)
				printf(",\"%s\":%llu", ag_lb_stat_name(k), (unsigned long long)st[k]);
			if (have_accel)
				printf(",\"accel_sockets\":%llu,\"accel_active\":%llu,\"accel_msgs\":%llu,"
				       "\"accel_bytes\":%llu,\"accel_fallbacks\":%llu,\"accel_proxy_sockets\":%llu,"
				       "\"accel_fin_held\":%llu,\"accel_backpressure\":%llu,\"accel_bp_resumed\":%llu",
				       (unsigned long long)as.sockets, (unsigned long long)as.active,
				       (unsigned long long)as.msgs, (unsigned long long)as.bytes,
				       (unsigned long long)as.fallbacks, (unsigned long long)as.proxy,
				       (unsigned long long)as.fin_held, (unsigned long long)as.backpressure,
				       (unsigned long long)as.bp_resumed);
			if (have_pol)
				printf(",\"policy_generation\":%u", pd.generation);
			if (have_obs)	/* L4 signals (docs/observability.md) */
				printf(",\"obs_events\":%llu,\"obs_events_lost\":%llu",
				       (unsigned long long)obs_ev, (unsigned long long)obs_lost);
			printf("}");
		} else {
			printf("node %s: generation %llu, syncs %llu\n", de->d_name,
			       (unsigned long long)meta[ZH_LB_META_GENERATION],
			       (unsigned long long)meta[ZH_LB_META_SYNCS]);
			for (k = 0; k < ZH_LB_STAT_MAX; k++)
				printf("  %-32s %llu\n", ag_lb_stat_name(k), (unsigned long long)st[k]);
			if (have_accel)
				printf("  %-32s %llu\n  %-32s %llu\n  %-32s %llu\n  %-32s %llu\n  %-32s %llu\n"
				       "  %-32s %llu\n  %-32s %llu\n  %-32s %llu\n  %-32s %llu\n",
				       "accel_sockets", (unsigned long long)as.sockets,
				       "accel_active", (unsigned long long)as.active,
				       "accel_msgs", (unsigned long long)as.msgs,
				       "accel_bytes", (unsigned long long)as.bytes,
				       "accel_fallbacks", (unsigned long long)as.fallbacks,
				       "accel_proxy_sockets", (unsigned long long)as.proxy,
				       "accel_fin_held", (unsigned long long)as.fin_held,
				       "accel_backpressure", (unsigned long long)as.backpressure,
				       "accel_bp_resumed", (unsigned long long)as.bp_resumed);
			if (have_pol)
				printf("  %-32s %u\n", "policy_generation", pd.generation);
			if (have_obs)
				printf("  %-32s %llu\n  %-32s %llu\n", "obs_events",
				       (unsigned long long)obs_ev, "obs_events_lost",
				       (unsigned long long)obs_lost);
		}
		n++;
	}
	closedir(d);
	if (o->json)
		printf("}\n");
	if (!n && !o->json)
		printf("no agent maps pinned under %s\n", root);
	if (!o->json)
		stats_daemons_say(lab);
	return 0;
}

/* Drop counters of every node of the lab (pol_read_drops on each pin dir).
 * A node without a policy datapath pinned is listed as such, not skipped. */
static int get_policy_drops(const struct cli_opts *o)
{
	char root[256], pin[512];
	const char *lab = zh_lab_name(o->lab);
	struct dirent *de;
	int n = 0, r, i;
	DIR *d;

	snprintf(root, sizeof(root), "%s/%s", ZH_BPF_ROOT, lab);
	d = opendir(root);
	if (!d) {
		fprintf(stderr, "zerohop get policy-drops: no pinned agents for lab %s (%s: %s)\n", lab,
			root, strerror(errno));
		return -ENOENT;
	}
	if (o->json)
		printf("{");
	while ((de = readdir(d))) {
		struct pol_drops pd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(pin, sizeof(pin), "%s/%s", root, de->d_name);
		if (pol_read_drops(pin, &pd)) {
			if (!o->json)
				printf("node %s: no policy datapath pinned in %s\n", de->d_name, pin);
			continue;
		}
		if (o->json) {
			printf("%s", n ? "," : "");
			jstr(de->d_name);
			printf(":{\"generation\":%u,\"by_reason\":{", pd.generation);
			for (r = 1, i = 0; r < POL_DROP__MAX; r++, i++) {
				printf("%s", i ? "," : "");
				jstr(pol_drop_reason_name(r));
				printf(":%llu", (unsigned long long)pd.by_reason[r]);
			}
			printf("},\"by_policy\":[");
			for (i = 0; i < pd.n_by_policy; i++) {
				printf("%s{\"policy\":", i ? "," : "");
				jstr(pd.by_policy[i].name);
				printf(",\"reason\":");
				jstr(pol_drop_reason_name(pd.by_policy[i].reason));
				printf(",\"packets\":%llu}", (unsigned long long)pd.by_policy[i].packets);
			}
			printf("]}");
		} else {
			printf("node %s:\n", de->d_name);
			pol_drops_print(&pd, stdout);
		}
		pol_drops_free(&pd);
		n++;
	}
	closedir(d);
	if (o->json)
		printf("}\n");
	else if (!n)
		printf("no policy datapath pinned under %s\n", root);
	return 0;
}

int cli_get(int argc, char **argv)
{
	struct cli_opts o = {};
	struct md_state *st = NULL;
	struct md_err err = {};
	struct ss *s = NULL;
	char buf[800];
	int ret;

	zh_log_init("get", ZH_WARN);
	ret = parse_common(argc, argv, &o, false);
	if (ret)
		goto out;
	g_ns = o.ns;
	if (!strcmp(o.kind, "stats")) {
		ret = get_stats(&o);
		goto out;
	}
	if (!strcmp(o.kind, "policy-drops")) {
		ret = get_policy_drops(&o);
		goto out;
	}
	ret = open_state(&o, &s);
	if (ret)
		goto out;
	if (o.yaml) {
		ret = cli_get_yaml(s, o.kind, o.ns);
		goto out;
	}
	ret = ss_load(s, &st, &err);
	if (ret) {
		fprintf(stderr, "%s\n", md_err_str(&err, buf, sizeof(buf)));
		goto out;
	}
	if (!strcmp(o.kind, "services") || !strcmp(o.kind, "svc"))
		get_services(st, o.json);
	else if (!strcmp(o.kind, "endpoints") || !strcmp(o.kind, "ep"))
		get_endpoints(st, o.json);
	else if (!strcmp(o.kind, "backends"))
		ret = get_backends(st, o.json);
	else if (!strcmp(o.kind, "splits") || !strcmp(o.kind, "trafficsplits"))
		get_splits(st, o.json, lab_datapath(zh_lab_name(o.lab)));
	else if (!strcmp(o.kind, "pods") || !strcmp(o.kind, "po"))
		get_pods(st, o.json);
	else if (!strcmp(o.kind, "routes") || !strcmp(o.kind, "httproutes") ||
		 !strcmp(o.kind, "grpcroutes"))
		get_routes(st, o.json, lab_datapath(zh_lab_name(o.lab)));
	else if (!strcmp(o.kind, "serviceaccounts") || !strcmp(o.kind, "sa"))
		get_serviceaccounts(st, o.json);
	else if (!strcmp(o.kind, "routegroups") || !strcmp(o.kind, "httproutegroups"))
		get_routegroups(st, o.json);
	else if (!strcmp(o.kind, "identities") || !strcmp(o.kind, "certs"))
		ret = id_get(o.kind, st, zh_lab_name(o.lab), o.ns, o.json);
	else {
		fprintf(stderr, "zerohop get: unknown resource '%s' (%s)\n", o.kind,
			CLI_GET_RESOURCES);
		ret = -EINVAL;
	}
out:
	md_state_free(st);
	ss_close(s);
	free(o.files);
	return ret < 0 ? 1 : 0;
}
