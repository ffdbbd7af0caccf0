/* lab_cli.c — `zerohop lab up|down|status|exec` (see docs/lab.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/cli.h"
#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/model.h"
#include "zerohop/paths.h"
#include "zerohop/state.h"
#include "lab_int.h"
#include "lab_plan.h"

/* lab up -f: say what was not acted on (skipped kinds, warnings), as
 * `zerohop apply` does; the objects applied are not listed. */
static void up_report(void *arg, enum ss_event ev, const char *what, const char *ns,
		      const char *detail)
{
	(void)arg;
	(void)ns;
	if (ev == SS_IGNORED)
		fprintf(stderr, "%s ignored (%s)\n", what, detail);
	else if (ev == SS_WARNING)
		fprintf(stderr, "warning: %s: %s\n", what, detail);
}

static const struct ss_opts up_opts = { .report = up_report };

#define UP_TIMEOUT_MS 150000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zerohop lab up [--lab NAME] [-f FILE ...] [--overlay vxlan] [--no-mesh]\n"
		"                      [--accel on|off] [--accel-skip-ports PORT[,PORT...]]\n"
		"                      [--service-proxy nft] [--drain-delay DUR]\n"
		"       zerohop lab down [--lab NAME]\n"
		"       zerohop lab status [--lab NAME] [-o json]\n"
		"       zerohop lab exec [--lab NAME] [-n NS] POD -- CMD [ARGS...]   POD: [NS/]NAME | deploy/[NS/]NAME\n"
		"       zerohop lab exec [--lab NAME] --node NODE -- CMD [ARGS...]\n");
}

static bool name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max || s[0] == '-' || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

static bool pid_alive(const char *lab)
{
	char p[LAB_PATH], buf[32];

	lab_fmt(p, sizeof(p), "%s/%s/supervisor.pid", ZH_RUN_ROOT, lab);
	if (lab_read_file(p, buf, sizeof(buf)) <= 0)
		return false;
	return atoi(buf) > 1 && lab_pid_alive(atoi(buf));
}

static bool lab_is_up(const char *lab)
{
	char p[LAB_PATH];

	lab_fmt(p, sizeof(p), "%s/%s/ready", ZH_RUN_ROOT, lab);
	return access(p, F_OK) == 0 && pid_alive(lab);
}

/* Anything left of a lab of this name (run dir, netns, cgroup)? */
static bool lab_leftovers(const char *lab)
{
	char p[LAB_PATH];
	const char *root = lab_cgroup_root(false);

	zh_run_dir(p, sizeof(p), lab);
	if (access(p, F_OK) == 0)
		return true;
	lab_fmt(p, sizeof(p), "/run/netns/%s-fabric", lab);
	if (access(p, F_OK) == 0)
		return true;
	if (root) {
		lab_lab_cgroup_path(p, sizeof(p), lab);
		if (access(p, F_OK) == 0)
			return true;
	}
	return false;
}

/* The system objects of a mesh lab: cluster DNS as a Pod behind a Service. */
static int write_system_yaml(const struct lab_topo *t, const char *path)
{
	char sd[LAB_PATH], dns[16], buf[4096];

	zh_state_dir(sd, sizeof(sd), t->lab);
	lab_ip4_str(lab_dns_ip(t), dns);
	lab_fmt(buf, sizeof(buf),
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n---\n"
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: cluster-dns\n  namespace: kube-system\n"
		"  labels:\n    k8s-app: kube-dns\nspec:\n  nodeName: %s\n  containers:\n"
		"  - name: dns\n    image: zerohop/dns\n    command: [\"%s\", \"dns\", \"--state\", \"%s\"]\n"
		"    ports:\n    - name: dns\n      containerPort: 53\n      protocol: UDP\n"
		"    - name: dns-tcp\n      containerPort: 53\n      protocol: TCP\n---\n"
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: kube-dns\n  namespace: kube-system\n"
		"spec:\n  clusterIP: %s\n  selector:\n    k8s-app: kube-dns\n  ports:\n"
		"  - name: dns\n    port: 53\n    protocol: UDP\n    targetPort: 53\n"
		"  - name: dns-tcp\n    port: 53\n    protocol: TCP\n    targetPort: 53\n",
		t->nodes[0].name, t->zerohop, sd, dns);
	return lab_write_str(path, buf);
}

/* Topology from the Cluster object (defaults when absent). */
static int topo_from_cluster(const struct md_cluster *c, struct lab_topo *t)
{
	int n = c->n_nodes, len = c->pod_cidr_len;

	if (n == 0) {
		lab_fmt(t->nodes[0].name, sizeof(t->nodes[0].name), "node-a");
		lab_fmt(t->nodes[1].name, sizeof(t->nodes[1].name), "node-b");
		n = 2;
	} else {
		if (n > LAB_MAX_NODES) {
			lab_err("%s:%d: spec.nodes: at most %d nodes in the lab", c->file, c->line,
				LAB_MAX_NODES);
			return -EINVAL;
		}
		for (int i = 0; i < n; i++) {
			if (!name_ok(c->nodes[i].name, 32)) {
				lab_err("%s:%d: spec.nodes[%d].name: '%s' is not a valid node name (letters, digits, '-', '_', '.', at most 32)",
					c->file, c->line, i, c->nodes[i].name);
				return -EINVAL;
			}
			lab_fmt(t->nodes[i].name, sizeof(t->nodes[i].name), "%s", c->nodes[i].name);
		}
	}
	t->n_nodes = n;
	if (c->pod_cidr) {
		t->pod_cidr = c->pod_cidr;
		t->pod_cidr_len = len;
	} else {
		inet_pton(AF_INET, "10.244.0.0", &t->pod_cidr);
		t->pod_cidr_len = len = 16;
	}
	if (c->svc_cidr) {
		t->svc_cidr = c->svc_cidr;
		t->svc_cidr_len = c->svc_cidr_len;
	} else {
		inet_pton(AF_INET, "10.96.0.0", &t->svc_cidr);
		t->svc_cidr_len = 12;
	}
	if (len > 24 || (len < 24 && (1L << (24 - len)) < n) || (len == 24 && n > 1)) {
		lab_err("%s:%d: spec.podCIDR: /%d holds fewer than %d /24 node ranges",
			c->file ? c->file : "<default>", c->line, len, n);
		return -EINVAL;
	}
	for (int i = 0; i < n; i++) {
		t->nodes[i].ip = htonl(ntohl(inet_addr(LAB_FABRIC_NET)) + i + 1);
		t->nodes[i].pod_net = htonl(ntohl(t->pod_cidr) + ((uint32_t)i << 8));
		t->nodes[i].pod_len = 24;
	}
	return 0;
}

/* Every workload must map to a command before anything is built. */
static int check_workloads(const struct lab_topo *t, const struct md_state *st)
{
	char err[1024];
	struct lab_plan plan;
	int bad = 0;

	for (int i = 0; i < st->n_pods; i++) {
		const struct md_pod *p = &st->pods[i];

		if (lab_plan_pod(t, st, p->meta.ns, p->meta.name, 0, &p->spec, p->meta.file,
				 p->meta.line, NULL, &plan, err, sizeof(err))) {
			lab_err("%s", err);
			bad++;
			continue;
		}
		lab_plan_free(&plan);
		if (p->spec.node_name && !lab_topo_node(t, p->spec.node_name)) {
			lab_err("%s:%d: pod %s/%s: spec.nodeName: no node '%s' in this lab",
				p->meta.file, p->meta.line, p->meta.ns, p->meta.name, p->spec.node_name);
			bad++;
		}
	}
	for (int i = 0; i < st->n_deployments; i++) {
		const struct md_deployment *d = &st->deployments[i];

		if (lab_plan_pod(t, st, d->meta.ns, d->meta.name, 0, &d->template, d->meta.file,
				 d->meta.line, NULL, &plan, err, sizeof(err))) {
			lab_err("%s", err);
			bad++;
			continue;
		}
		lab_plan_free(&plan);
		if (d->template.node_name && !lab_topo_node(t, d->template.node_name)) {
			lab_err("%s:%d: deployment %s/%s: spec.template.spec.nodeName: no node '%s' in this lab",
				d->meta.file, d->meta.line, d->meta.ns, d->meta.name,
				d->template.node_name);
			bad++;
		}
	}
	return bad ? -EINVAL : 0;
}

static int mk_cgroups(const struct lab_topo *t)
{
	char p[LAB_PATH + 32];
	int ret;

	if (!lab_cgroup_root(true))
		return -ENOENT;
	lab_lab_cgroup_path(p, sizeof(p), t->lab);
	ret = lab_mkdirs(p, 0755);
	strncat(p, "/system", sizeof(p) - strlen(p) - 1);
	ret = ret ?: lab_mkdirs(p, 0755);
	for (int i = 0; !ret && i < t->n_nodes; i++) {
		lab_node_cgroup_path(p, sizeof(p), t->lab, t->nodes[i].name);
		ret = lab_mkdirs(p, 0755);
		if (!ret) {
			char a[LAB_PATH + 64];

			lab_lab_cgroup_path(a, sizeof(a), t->lab);
			lab_fmt(p, sizeof(p), "%s/system/agent-%s", a, t->nodes[i].name);
			ret = lab_mkdirs(p, 0755);
		}
	}
	if (ret)
		lab_err("mkdir cgroup %s: %s", p, strerror(-ret));
	return ret;
}

static void print_log_tail(const char *path)
{
	char buf[4096];
	int n = lab_read_file(path, buf, sizeof(buf));

	if (n > 0)
		fprintf(stderr, "--- %s (tail) ---\n%s", path,
			n > 2000 ? buf + n - 2000 : buf);
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lab_parse_drain(const char *s, int *ms)
{
	uint64_t v = 0;

	if (strcmp(s, "0") && md_duration_ms(s, &v))
		return -EINVAL;
	if (v > LAB_DRAIN_MAX_MS)
		return -EINVAL;
	*ms = (int)v;
	return 0;
}

/* --accel-skip-ports: the same rules as the agent's, checked here so that a
 * bad list fails `lab up` before anything is built, naming the item. */
static int check_skip_ports(const char *list)
{
	const char *p = list;
	int item = 0;

	while (*p) {
		size_t len = strcspn(p, ",");
		long v = 0;

		item++;
		if (len == 0 || len > 5 || strspn(p, "0123456789") < len) {
			lab_err("--accel-skip-ports: item %d '%.*s' is not a port number (1..65535)",
				item, (int)(len > 32 ? 32 : len), p);
			return -EINVAL;
		}
		for (size_t i = 0; i < len; i++)
			v = v * 10 + (p[i] - '0');
		if (v < 1 || v > 65535) {
			lab_err("--accel-skip-ports: item %d '%.*s' is out of range (1..65535)", item,
				(int)len, p);
			return -EINVAL;
		}
		p += len;
		if (*p == ',' && !*++p) {
			lab_err("--accel-skip-ports: empty item after the last ','");
			return -EINVAL;
		}
	}
	return 0;
}

static int lab_up(const char *lab, char **files, int n_files, bool overlay, bool mesh, int accel,
		  bool nft, const char *skip_ports, int drain_ms)
{
	struct lab_topo *t = zh_calloc(1, sizeof(*t));
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };
	struct ss *ss = NULL;
	char ebuf[1024], rundir[LAB_PATH], p[LAB_PATH + 32], line[2048];
	char **apply = NULL;
	int n_apply = 0, ret = 1, pfd[2] = { -1, -1 };
	uint64_t t0 = ms_now();
	ssize_t r;
	size_t off = 0;
	pid_t pid;

	/* A command that exits before reading its input (lab_run_input) must
	 * give us EPIPE, not kill us half-way through building the lab. */
	signal(SIGPIPE, SIG_IGN);
	if (lab_is_up(lab)) {
		lab_err("lab %s is already up (zerohop lab down --lab %s first)", lab, lab);
		goto out;
	}
	/* Parse and check everything before building anything. */
	for (int i = 0; i < n_files; i++) {
		if (md_state_add_file(st, files[i], &err)) {
			lab_err("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
			goto out;
		}
	}
	if (md_state_finish(st, &err)) {
		lab_err("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
		goto out;
	}
	lab_fmt(t->lab, sizeof(t->lab), "%s", lab);
	t->overlay = overlay;
	t->mesh = mesh;
	t->accel = accel;
	t->nft = nft;
	t->drain_ms = drain_ms;
	lab_fmt(t->accel_skip_ports, sizeof(t->accel_skip_ports), "%s", skip_ports ? skip_ports : "");
	r = readlink("/proc/self/exe", t->zerohop, sizeof(t->zerohop) - 1);
	if (r <= 0) {
		lab_err("readlink /proc/self/exe: %s", strerror(errno));
		goto out;
	}
	t->zerohop[r] = 0;
	if (topo_from_cluster(&st->cluster, t) || check_workloads(t, st))
		goto out;

	/* A crashed or killed earlier run: clean it first. */
	if (lab_leftovers(lab)) {
		fprintf(stderr, "zerohop lab: cleaning leftovers of an earlier run of lab %s\n", lab);
		if (lab_down(lab, false)) {
			lab_err("cannot clean leftovers of lab %s", lab);
			goto out;
		}
	}
	zh_run_dir(rundir, sizeof(rundir), lab);
	if (lab_mkdirs(rundir, 0755)) {
		lab_err("mkdir %s: %s", rundir, strerror(errno));
		goto out;
	}
	lab_fmt(p, sizeof(p), "%s/pods", rundir);
	lab_mkdirs(p, 0755);
	for (int i = 0; i < t->n_nodes; i++) {
		lab_fmt(p, sizeof(p), "%s/nodes/%s", rundir, t->nodes[i].name);
		lab_mkdirs(p, 0755);
	}
	if (lab_topo_write(t)) {
		lab_err("write %s/lab.conf: %s", rundir, strerror(errno));
		goto fail;
	}
	if (mk_cgroups(t) || lab_net_up(t))
		goto fail;

	/* The workloads go into the state source; the supervisor acts on them. */
	zh_state_dir(p, sizeof(p), lab);
	if ((ret = ss_open(p, &ss))) {
		lab_err("state source %s: %s", p, strerror(-ret));
		goto fail;
	}
	apply = zh_calloc(n_files + 1, sizeof(char *));
	for (int i = 0; i < n_files; i++)
		apply[n_apply++] = files[i];
	if (mesh) {
		static char sys[LAB_PATH + 32];

		lab_fmt(sys, sizeof(sys), "%s/system.yaml", rundir);
		if (write_system_yaml(t, sys)) {
			lab_err("write %s", sys);
			goto fail;
		}
		apply[n_apply++] = sys;
	}
	if (n_apply && ss_apply_opts(ss, apply, n_apply, &up_opts, &err)) {
		lab_err("apply: %s", md_err_str(&err, ebuf, sizeof(ebuf)));
		goto fail;
	}
	ss_close(ss);
	ss = NULL;

	if (pipe2(pfd, O_CLOEXEC)) {
		lab_err("pipe: %s", strerror(errno));
		goto fail;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		lab_err("fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		int fd;

		close(pfd[0]);
		setsid();
		lab_fmt(p, sizeof(p), "%s/supervisor.log", rundir);
		fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 0);
			close(fd);
		}
		/* A daemon keeps no descriptor of its caller but the ready pipe. */
		if (pfd[1] > 3)
			close_range(3, pfd[1] - 1, 0);
		close_range(pfd[1] + 1, ~0U, 0);
		lab_supervisor(t, pfd[1]);
	}
	close(pfd[1]);
	pfd[1] = -1;
	for (;;) {
		struct pollfd q = { .fd = pfd[0], .events = POLLIN };
		int left = (int)(UP_TIMEOUT_MS - (ms_now() - t0));

		if (left <= 0 || poll(&q, 1, left) <= 0) {
			lab_err("lab %s: pods did not start within %d s", lab, UP_TIMEOUT_MS / 1000);
			goto fail_log;
		}
		r = read(pfd[0], line + off, sizeof(line) - 1 - off);
		if (r <= 0)
			break;
		off += r;
		if (memchr(line, '\n', off) || off >= sizeof(line) - 1)
			break;
	}
	line[off] = 0;
	line[strcspn(line, "\n")] = 0;
	if (strncmp(line, "ok", 2)) {
		lab_err("lab %s: %s", lab, off ? line : "supervisor died before the lab was ready");
		goto fail_log;
	}
	/* The lab counts as up from here (lab_is_up): ready + live supervisor. */
	lab_fmt(p, sizeof(p), "%s/ready", rundir);
	if (lab_write_str(p, "ok\n")) {
		lab_err("write %s: %s", p, strerror(errno));
		goto fail_log;
	}
	{
		struct lab_pod_info *pods;
		int n;

		lab_pod_list(lab, &pods, &n);
		printf("lab %s up: %d nodes, %d pods%s%s in %.2f s\n", lab, t->n_nodes, n,
		       overlay ? ", vxlan overlay" : "", mesh ? "" : ", no mesh",
		       (ms_now() - t0) / 1000.0);
		free(pods);
	}
	ret = 0;
	goto out;
fail_log:
	lab_fmt(p, sizeof(p), "%s/supervisor.log", rundir);
	print_log_tail(p);
fail:
	if (ss)
		ss_close(ss);
	lab_down(lab, false);
	ret = 1;
out:
	if (pfd[0] >= 0)
		close(pfd[0]);
	free(apply);
	md_state_free(st);
	free(t);
	return ret;
}

/* ---- status -------------------------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static int node_agent_pid(const char *lab, const char *node)
{
	char p[LAB_PATH], buf[128];

	lab_fmt(p, sizeof(p), "%s/%s/nodes/%s/info", ZH_RUN_ROOT, lab, node);
	if (lab_read_file(p, buf, sizeof(buf)) <= 0 || strncmp(buf, "agent_pid ", 10))
		return 0;
	return atoi(buf + 10);
}

/* The node L7 proxy's pid from the same info file (lab_sup.c), 0 if none. */
static int node_proxy_pid(const char *lab, const char *node)
{
	char p[LAB_PATH], buf[256], *v;

	lab_fmt(p, sizeof(p), "%s/%s/nodes/%s/info", ZH_RUN_ROOT, lab, node);
	if (lab_read_file(p, buf, sizeof(buf)) <= 0 || !(v = strstr(buf, "\nproxy_pid ")))
		return 0;
	return atoi(v + 11);
}

static int lab_status(const char *lab, bool json)
{
	struct lab_topo t;
	struct lab_pod_info *pods = NULL;
	char a[16], b[16], p[LAB_PATH], buf[32];
	int n = 0, sup = 0;
	bool up;

	if (lab_topo_read(lab, &t)) {
		lab_err("lab %s is not up", lab);
		return 1;
	}
	lab_pod_list(lab, &pods, &n);
	up = lab_is_up(lab);
	lab_fmt(p, sizeof(p), "%s/%s/supervisor.pid", ZH_RUN_ROOT, lab);
	if (lab_read_file(p, buf, sizeof(buf)) > 0)
		sup = atoi(buf);
	if (json) {
		printf("{\"lab\":");
		json_str(lab);
		printf(",\"up\":%s,\"supervisorPid\":%d,\"overlay\":%s,\"mesh\":%s,\"podCIDR\":\"%s/%d\",\"serviceCIDR\":\"%s/%d\",\"nodes\":[",
		       up ? "true" : "false", sup, t.overlay ? "\"vxlan\"" : "null",
		       t.mesh ? "true" : "false", lab_ip4_str(t.pod_cidr, a), t.pod_cidr_len,
		       lab_ip4_str(t.svc_cidr, b), t.svc_cidr_len);
		for (int i = 0; i < t.n_nodes; i++) {
			printf("%s{\"name\":", i ? "," : "");
			json_str(t.nodes[i].name);
			printf(",\"ip\":\"%s\",\"podCIDR\":\"%s/%d\",\"netns\":\"%s-%s\",\"agentPid\":%d,\"proxyPid\":%d}",
			       lab_ip4_str(t.nodes[i].ip, a), lab_ip4_str(t.nodes[i].pod_net, b),
			       t.nodes[i].pod_len, lab, t.nodes[i].name,
			       node_agent_pid(lab, t.nodes[i].name),
			       node_proxy_pid(lab, t.nodes[i].name));
		}
		printf("],\"pods\":[");
		for (int i = 0; i < n; i++) {
			char nsn[256];

			printf("%s{\"namespace\":", i ? "," : "");
			json_str(pods[i].ns);
			printf(",\"name\":");
			json_str(pods[i].name);
			printf(",\"node\":");
			json_str(pods[i].node);
			printf(",\"ip\":\"%s\",\"phase\":\"%s\",\"pid\":%d,\"restarts\":%d,\"owner\":",
			       lab_ip4_str(pods[i].ip, a), pods[i].phase, pods[i].pid,
			       pods[i].restarts);
			if (pods[i].owner[0])
				json_str(pods[i].owner);
			else
				printf("null");
			printf(",\"netns\":");
			json_str(lab_pod_netns_name(nsn, sizeof(nsn), lab, pods[i].ns, pods[i].name));
			printf("}");
		}
		printf("]}\n");
	} else {
		printf("lab %s: %s, supervisor pid %d%s%s\n", lab, up ? "up" : "NOT RUNNING", sup,
		       t.overlay ? ", vxlan overlay" : "", t.mesh ? "" : ", no mesh");
		printf("%-16s %-15s %-18s %-10s %s\n", "NODE", "IP", "POD CIDR", "AGENT PID",
		       "PROXY PID");
		for (int i = 0; i < t.n_nodes; i++) {
			char cidr[32];

			lab_fmt(cidr, sizeof(cidr), "%s/%d", lab_ip4_str(t.nodes[i].pod_net, b),
				t.nodes[i].pod_len);
			printf("%-16s %-15s %-18s %-10d %d\n", t.nodes[i].name,
			       lab_ip4_str(t.nodes[i].ip, a), cidr,
			       node_agent_pid(lab, t.nodes[i].name),
			       node_proxy_pid(lab, t.nodes[i].name));
		}
		printf("\n%-14s %-40s %-12s %-15s %-11s %-8s %s\n", "NAMESPACE", "POD", "NODE", "IP",
		       "PHASE", "PID", "RESTARTS");
		for (int i = 0; i < n; i++)
			printf("%-14s %-40s %-12s %-15s %-11s %-8d %d\n", pods[i].ns, pods[i].name,
			       pods[i].node, lab_ip4_str(pods[i].ip, a), pods[i].phase, pods[i].pid,
			       pods[i].restarts);
	}
	free(pods);
	return up ? 0 : 1;
}

/* ---- exec ---------------------------------------------------------------------- */

static int lab_exec(const char *lab, const char *pod_ref, const char *node, char **cmd)
{
	struct lab_topo t;

	if (lab_topo_read(lab, &t)) {
		lab_err("lab %s is not up", lab);
		return 125;
	}
	if (node) {
		if (!lab_topo_node(&t, node)) {
			lab_err("lab %s has no node '%s'", lab, node);
			return 125;
		}
		if (lab_join_node(lab, node))
			return 125;
	} else {
		struct lab_pod_info pod;

		if (lab_pod_find(lab, pod_ref, &pod)) {
			lab_err("lab %s has no pod '%s'", lab, pod_ref);
			return 125;
		}
		if (lab_join_pod(lab, &pod))
			return 125;
		setenv("POD_NAME", pod.name, 1);
		setenv("POD_NAMESPACE", pod.ns, 1);
		setenv("HOSTNAME", pod.name, 1);
	}
	fflush(NULL);
	execvp(cmd[0], cmd);
	lab_err("exec %s: %s", cmd[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* ---- entry --------------------------------------------------------------------- */

int cli_lab(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lab", required_argument, NULL, 'l' },
		{ "name", required_argument, NULL, 'l' },
		{ "file", required_argument, NULL, 'f' },
		{ "overlay", required_argument, NULL, 'O' },
		{ "no-mesh", no_argument, NULL, 'M' },
		{ "accel", required_argument, NULL, 'a' },
		{ "service-proxy", required_argument, NULL, 'S' },
		{ "accel-skip-ports", required_argument, NULL, 'P' },
		{ "drain-delay", required_argument, NULL, 'D' },
		{ "node", required_argument, NULL, 'N' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *sub, *lab_opt = NULL, *node = NULL, *pod_ns = NULL, *skip_ports = NULL;
	char **files = NULL;
	int n_files = 0, accel = -1, c, ret = 2, drain_ms = LAB_DRAIN_DEFAULT_MS;
	bool up_only = false;
	bool overlay = false, mesh = true, nft = false, json = false;
	const char *lab;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	sub = argv[1];
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
		usage(stdout);
		return 0;
	}
	files = zh_calloc(argc, sizeof(char *));
	optind = 2;
	/* '+': stop at the first non-option (exec's POD), and at "--". */
	while ((c = getopt_long(argc, argv, "+l:f:o:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			lab_opt = optarg;
			break;
		case 'f':
			files[n_files++] = optarg;
			break;
		case 'O':
			if (strcmp(optarg, "vxlan")) {
				lab_err("--overlay: only 'vxlan' is supported, got '%s'", optarg);
				goto out;
			}
			overlay = true;
			break;
		case 'M':
			mesh = false;
			break;
		case 'a':
			if (!strcmp(optarg, "on"))
				accel = 1;
			else if (!strcmp(optarg, "off"))
				accel = 0;
			else {
				lab_err("--accel: expected on or off, got '%s'", optarg);
				goto out;
			}
			break;
		case 'S':
			if (strcmp(optarg, "nft")) {
				lab_err("--service-proxy: only 'nft' is supported, got '%s'", optarg);
				goto out;
			}
			nft = true;
			break;
		case 'P':
			if (strlen(optarg) >= sizeof(((struct lab_topo *)0)->accel_skip_ports)) {
				lab_err("--accel-skip-ports: list too long");
				goto out;
			}
			if (check_skip_ports(optarg))
				goto out;
			skip_ports = optarg;
			up_only = true;
			break;
		case 'D':
			if (lab_parse_drain(optarg, &drain_ms)) {
				lab_err("--drain-delay: expected 0 or a duration up to %ds such as 500ms or 2s, got '%s'",
					LAB_DRAIN_MAX_MS / 1000, optarg);
				goto out;
			}
			up_only = true;
			break;
		case 'N':
			node = optarg;
			break;
		case 'n':
			pod_ns = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "json")) {
				lab_err("-o: only 'json' is supported, got '%s'", optarg);
				goto out;
			}
			json = true;
			break;
		case 'h':
			usage(stdout);
			ret = 0;
			goto out;
		default:
			usage(stderr);
			goto out;
		}
	}
	lab = zh_lab_name(lab_opt);
	if (!name_ok(lab, 32)) {
		lab_err("lab name '%s': letters, digits, '-', '_', '.', at most 32 characters", lab);
		goto out;
	}
	if (geteuid() != 0 && strcmp(sub, "status")) {
		lab_err("lab %s needs root (namespaces, cgroups, mounts)", sub);
		goto out;
	}
	if (up_only && strcmp(sub, "up")) {
		lab_err("%s: --accel-skip-ports and --drain-delay are options of lab up", sub);
		goto out;
	}
	if (!strcmp(sub, "up")) {
		if (optind < argc) {
			lab_err("up: unexpected argument '%s'", argv[optind]);
			goto out;
		}
		if (nft && !mesh) {
			lab_err("--service-proxy nft is programmed by the node agents; drop --no-mesh");
			goto out;
		}
		ret = lab_up(lab, files, n_files, overlay, mesh, accel, nft, skip_ports, drain_ms);
	} else if (!strcmp(sub, "down")) {
		ret = lab_down(lab, true) ? 1 : 0;
	} else if (!strcmp(sub, "status")) {
		ret = lab_status(lab, json);
	} else if (!strcmp(sub, "exec")) {
		const char *pod = NULL;
		char ref[256];

		/* getopt consumed a "--" that directly follows the options. */
		if (optind > 2 && !strcmp(argv[optind - 1], "--")) {
			if (!node || optind >= argc) {
				usage(stderr);
				goto out;
			}
			ret = lab_exec(lab, NULL, node, argv + optind);
			goto out;
		}
		if (!node && optind < argc && strcmp(argv[optind], "--"))
			pod = argv[optind++];
		/* Options may also follow POD (kubectl style). */
		while (optind < argc && strcmp(argv[optind], "--")) {
			if (!strcmp(argv[optind], "--lab") && optind + 1 < argc) {
				lab = argv[optind + 1];
				optind += 2;
			} else {
				lab_err("exec: unexpected argument '%s' (use: exec POD -- CMD)",
					argv[optind]);
				goto out;
			}
		}
		if (optind >= argc || strcmp(argv[optind], "--") || optind + 1 >= argc ||
		    (!pod && !node)) {
			usage(stderr);
			goto out;
		}
		if (pod && pod_ns) {
			/* -n NS POD, as kubectl: NAME -> NS/NAME, deploy/NAME -> deploy/NS/NAME. */
			bool dep = !strncmp(pod, "deploy/", 7);

			lab_fmt(ref, sizeof(ref), "%s%s/%s", dep ? "deploy/" : "", pod_ns,
				dep ? pod + 7 : pod);
			pod = ref;
		}
		ret = lab_exec(lab, pod, node, argv + optind + 1);
	} else {
		lab_err("unknown subcommand '%s'", sub);
		usage(stderr);
	}
out:
	free(files);
	return ret;
}
