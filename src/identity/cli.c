/* cli.c — `zerohop ca init|rotate|issue` and `zerohop get identities|certs`
 * (docs/identity.md). Only parses and prints; the work is in ca.c and
 * svid.c. */
#include <errno.h>
#include <glob.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/cli.h"
#include "zerohop/identity.h"
#include "zerohop/json.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "zerohop/state.h"

void id_ca_dir(char *buf, size_t len, const char *lab)
{
	char run[200];

	snprintf(buf, len, "%s/ca", zh_run_dir(run, sizeof(run), lab));
}

void id_svid_dir(char *buf, size_t len, const char *lab, const char *node)
{
	char run[200];

	snprintf(buf, len, "%s/nodes/%s/svid", zh_run_dir(run, sizeof(run), lab), node);
}

static void ca_usage(FILE *f)
{
	fprintf(f,
		"usage: zerohop ca init [--trust-domain TD] [--ttl DUR]   [--lab LAB | --ca-dir DIR]\n"
		"       zerohop ca rotate [--finish [--force]] [--ttl DUR] [--lab LAB | --ca-dir DIR]\n"
		"       zerohop ca issue --node NODE [--pod NS/NAME] [--ttl DUR] [--out DIR]\n"
		"                                                 [--lab LAB | --state DIR --ca-dir DIR]\n"
		"  init     a new cluster CA (EC P-256; default trust domain %s, valid 1 year)\n"
		"  rotate   a new CA; the old one stays in the trust bundle until --finish, which\n"
		"           is refused until every node's SVIDs are of the new CA (--force: now)\n"
		"  issue    X.509-SVIDs for the pods scheduled on NODE (24h by default, renewed\n"
		"           after half their lifetime); --pod: one pod, refused if not on NODE\n"
		"  a lab's CA is in /run/zerohop/LAB/ca, its SVIDs in /run/zerohop/LAB/nodes/NODE/svid\n",
		ID_DEFAULT_TRUST_DOMAIN);
}

struct ca_opts {
	const char *lab, *ca_dir, *state, *td, *node, *pod, *out;
	long ttl_s;
	bool finish, force;
};

static int parse_ttl(const char *s, long *out)
{
	uint64_t ms;

	if (md_duration_ms(s, &ms) || ms < 60000) {
		fprintf(stderr, "zerohop ca: --ttl %s: expected a duration of at least 1m "
				"(\"24h\", \"90m\")\n", s);
		return -EINVAL;
	}
	*out = (long)(ms / 1000);
	return 0;
}

static int ca_issue(const struct ca_opts *o, const char *ca_dir)
{
	char state[256], out[300], ns[128];
	struct md_state *st = NULL;
	struct md_err merr = {};
	struct id_err err = {};
	struct id_issue_report r;
	const char *slash;
	struct ss *s = NULL;
	int ret;

	if (!o->node) {
		fprintf(stderr, "zerohop ca issue: --node NODE is required\n");
		return -EINVAL;
	}
	if (o->state)
		snprintf(state, sizeof(state), "%s", o->state);
	else
		zh_state_dir(state, sizeof(state), zh_lab_name(o->lab));
	if (o->out)
		snprintf(out, sizeof(out), "%s", o->out);
	else
		id_svid_dir(out, sizeof(out), zh_lab_name(o->lab), o->node);
	ret = ss_open(state, &s);
	if (!ret)
		ret = ss_load(s, &st, &merr);
	if (ret) {
		char buf[800];

		fprintf(stderr, "zerohop ca issue: state %s: %s\n", state,
			merr.msg[0] ? md_err_str(&merr, buf, sizeof(buf)) : strerror(-ret));
		goto out;
	}
	if (o->pod) {
		slash = strchr(o->pod, '/');
		snprintf(ns, sizeof(ns), "%.*s", slash ? (int)(slash - o->pod) : 7,
			 slash ? o->pod : "default");
		ret = id_issue_pod(ca_dir, st, o->node, ns, slash ? slash + 1 : o->pod, out,
				   o->ttl_s, &err);
		if (!ret)
			printf("%s: SVID for %s/%s in %s\n", o->node, ns, slash ? slash + 1 : o->pod,
			       out);
	} else {
		ret = id_issue_node(ca_dir, st, o->node, out, o->ttl_s, &r, &err);
		if (!ret)
			printf("%s: %d issued, %d kept, %d removed (%s)\n", o->node, r.issued,
			       r.kept, r.removed, out);
	}
	if (ret)
		fprintf(stderr, "zerohop ca issue: %s\n", err.msg);
out:
	md_state_free(st);
	ss_close(s);
	return ret;
}

/* I11: --finish waits for every node. A lab's SVID directories are all
 * on this machine; with --ca-dir alone only the CA's age can be seen. */
static int finish_ready(const struct ca_opts *o, const char *ca_dir, struct id_err *err)
{
	const char *dirs[64];
	char pattern[300];
	glob_t g = { 0 };
	int n = 0, ret;

	if (!o->ca_dir) {
		id_svid_dir(pattern, sizeof(pattern), zh_lab_name(o->lab), "*");
		if (!glob(pattern, GLOB_ONLYDIR, NULL, &g))
			for (size_t i = 0; i < g.gl_pathc && n < 64; i++)
				dirs[n++] = g.gl_pathv[i];
	}
	ret = id_ca_finish_ready(ca_dir, dirs, n, err);
	globfree(&g);
	if (ret == -EBUSY && strlen(err->msg) + 40 < sizeof(err->msg))
		strcat(err->msg, " (--force ends it now)");
	return ret;
}

int cli_ca(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lab", required_argument, NULL, 'l' },
		{ "ca-dir", required_argument, NULL, 'c' },
		{ "state", required_argument, NULL, 's' },
		{ "trust-domain", required_argument, NULL, 't' },
		{ "ttl", required_argument, NULL, 'T' },
		{ "node", required_argument, NULL, 'N' },
		{ "pod", required_argument, NULL, 'p' },
		{ "out", required_argument, NULL, 'o' },
		{ "finish", no_argument, NULL, 'F' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct ca_opts o = { .ttl_s = 0 };
	struct id_err err = {};
	char ca_dir[300];
	const char *verb;
	int c, ret;

	zh_log_init("ca", ZH_WARN);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		ca_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	verb = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': o.lab = optarg; break;
		case 'c': o.ca_dir = optarg; break;
		case 's': o.state = optarg; break;
		case 't': o.td = optarg; break;
		case 'N': o.node = optarg; break;
		case 'p': o.pod = optarg; break;
		case 'o': o.out = optarg; break;
		case 'F': o.finish = true; break;
		case 'f': o.force = true; break;
		case 'T':
			if (parse_ttl(optarg, &o.ttl_s))
				return 2;
			break;
		case 'h': ca_usage(stdout); return 0;
		default:
			fprintf(stderr, "zerohop ca: unknown option (see zerohop ca --help)\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zerohop ca %s: unexpected argument '%s'\n", verb, argv[optind]);
		return 2;
	}
	if (o.ca_dir)
		snprintf(ca_dir, sizeof(ca_dir), "%s", o.ca_dir);
	else
		id_ca_dir(ca_dir, sizeof(ca_dir), zh_lab_name(o.lab));
	if (!strcmp(verb, "init")) {
		ret = id_ca_init(ca_dir, o.td, o.ttl_s ? o.ttl_s : ID_DEFAULT_CA_TTL, &err);
		if (!ret)
			printf("CA created in %s (trust domain %s)\n", ca_dir,
			       o.td ? o.td : ID_DEFAULT_TRUST_DOMAIN);
	} else if (!strcmp(verb, "rotate")) {
		ret = o.finish && !o.force ? finish_ready(&o, ca_dir, &err) : 0;
		if (!ret)
			ret = id_ca_rotate(ca_dir, o.ttl_s ? o.ttl_s : ID_DEFAULT_CA_TTL, o.finish,
					   &err);
		if (!ret)
			printf(o.finish ? "rotation finished: the bundle holds the active CA only\n"
					: "new CA active; the previous one stays trusted until "
					  "zerohop ca rotate --finish\n");
	} else if (!strcmp(verb, "issue")) {
		if (!o.ttl_s)
			o.ttl_s = ID_DEFAULT_SVID_TTL;
		return ca_issue(&o, ca_dir) ? 1 : 0;
	} else {
		fprintf(stderr, "zerohop ca: unknown command '%s' (init, rotate, issue)\n", verb);
		return 2;
	}
	if (ret)
		fprintf(stderr, "zerohop ca %s: %s\n", verb, err.msg);
	return ret ? 1 : 0;
}

/* ---- zerohop get identities | certs -------------------------------------- */

static void fmt_time(char *buf, size_t len, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void json_info(const struct id_cert_info *ci)
{
	char nb[32], na[32];

	fmt_time(nb, sizeof(nb), ci->not_before);
	fmt_time(na, sizeof(na), ci->not_after);
	printf("{\"serial\": ");
	json_put_str(stdout, ci->serial);
	printf(", \"notBefore\": \"%s\", \"notAfter\": \"%s\", \"verified\": %s}", nb, na,
	       ci->verified ? "true" : "false");
}

static int get_identities(const struct md_state *st, const char *lab, const char *td,
			  const char *ns, bool json)
{
	char ca_dir[300], dir[300], crt[700], id[300], na[32];
	int n = 0;

	id_ca_dir(ca_dir, sizeof(ca_dir), lab);
	if (json)
		printf("[");
	else
		printf("%-12s %-24s %-10s %-16s %-56s %-10s %s\n", "NAMESPACE", "NAME", "NODE",
		       "SERVICEACCOUNT", "SPIFFE ID", "MTLS", "SVID");
	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];
		struct id_cert_info ci;
		bool have = false;

		if (ns && strcmp(p->meta.ns, ns))
			continue;
		if (id_pod_spiffe(id, sizeof(id), td, st, p))
			continue;
		if (p->spec.node_name) {
			id_svid_dir(dir, sizeof(dir), lab, p->spec.node_name);
			snprintf(crt, sizeof(crt), "%s/%s_%s.crt", dir, p->meta.ns, p->meta.name);
			have = !access(crt, R_OK) && !id_cert_info(ca_dir, crt, &ci, NULL) &&
			       !strcmp(ci.uri, id);
		}
		if (json) {
			printf("%s{\"namespace\": ", n ? ", " : "");
			json_put_str(stdout, p->meta.ns);
			printf(", \"name\": ");
			json_put_str(stdout, p->meta.name);
			printf(", \"node\": ");
			json_put_str(stdout, p->spec.node_name);
			printf(", \"serviceAccount\": ");
			json_put_str(stdout, md_pod_service_account(st, p));
			printf(", \"spiffeId\": ");
			json_put_str(stdout, id);
			/* PeerAuthentication, workload level (port 0: no portLevelMtls) */
			printf(", \"mtls\": \"%s\"", md_mtls_mode_name(md_mtls_mode_of(st, p, 0)));
			printf(", \"svid\": ");
			if (have)
				json_info(&ci);
			else
				printf("null");
			printf("}");
		} else {
			if (have)
				fmt_time(na, sizeof(na), ci.not_after);
			printf("%-12s %-24s %-10s %-16s %-56s %-10s %s%s\n", p->meta.ns, p->meta.name,
			       p->spec.node_name ? p->spec.node_name : "-",
			       md_pod_service_account(st, p), id,
			       md_mtls_mode_name(md_mtls_mode_of(st, p, 0)),
			       have ? "expires " : "none", have ? na : "");
		}
		n++;
	}
	if (json)
		printf("]\n");
	return 0;
}

static int get_certs(const char *lab, bool json)
{
	static const char *const cas[] = { "ca.crt", "previous.crt" };
	char ca_dir[300], path[400], nb[32], na[32];
	int n = 0;

	id_ca_dir(ca_dir, sizeof(ca_dir), lab);
	if (json)
		printf("[");
	else
		printf("%-12s %-40s %-34s %-21s %s\n", "ROLE", "SUBJECT", "SERIAL", "NOT AFTER",
		       "TRUSTED");
	for (int i = 0; i < 2; i++) {
		struct id_cert_info ci;

		snprintf(path, sizeof(path), "%s/%s", ca_dir, cas[i]);
		if (access(path, R_OK) || id_cert_info(ca_dir, path, &ci, NULL))
			continue;
		fmt_time(nb, sizeof(nb), ci.not_before);
		fmt_time(na, sizeof(na), ci.not_after);
		if (json) {
			printf("%s{\"role\": \"%s\", \"subject\": ", n ? ", " : "",
			       i ? "previous-ca" : "ca");
			json_put_str(stdout, ci.subject);
			printf(", \"cert\": ");
			json_info(&ci);
			printf("}");
		} else {
			printf("%-12s %-40s %-34s %-21s %s\n", i ? "previous-ca" : "ca", ci.subject,
			       ci.serial, na, ci.verified ? "yes" : "no");
		}
		n++;
	}
	if (json)
		printf("]\n");
	if (!n)
		fprintf(stderr, "zerohop get certs: no CA in %s (zerohop ca init)\n", ca_dir);
	return n ? 0 : -ENOENT;
}

int id_get(const char *kind, const struct md_state *st, const char *lab, const char *ns,
	   bool json)
{
	char ca_dir[300], td[256];
	struct id_err err = {};

	if (!strcmp(kind, "certs"))
		return get_certs(lab, json);
	id_ca_dir(ca_dir, sizeof(ca_dir), lab);
	if (id_ca_trust_domain(ca_dir, td, sizeof(td), &err))
		snprintf(td, sizeof(td), "%s", ID_DEFAULT_TRUST_DOMAIN);	/* IDs exist without a CA */
	return get_identities(st, lab, td, ns, json);
}
