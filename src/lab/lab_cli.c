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
#include "zerohop/json.h"
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

static const struct ss_opts up_apply_opts = { .report = up_report };

#define UP_TIMEOUT_MS 150000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zerohop lab up [--lab NAME] [-f FILE ...] [--overlay vxlan] [--no-mesh]\n"
		"                      [--accel on|off] [--accel-skip-ports PORT[,PORT...]]\n"
		"                      [--service-proxy nft] [--drain-delay DUR] [--keep-going]\n"
		"                      [--runtime process|podman]\n"
		"                      [--state etcd|etcd-tls]   (3-member etcd cluster: docs/state-etcd.md)\n"
		"                      [--mesh zerohop|sidecar|none]\n"
		"       zerohop lab down [--lab NAME]\n"
		"       zerohop lab status [--lab NAME] [-o json]\n"
		"       zerohop lab exec [--lab NAME] [-n NS] POD -- CMD [ARGS...]   POD: [NS/]NAME | deploy/[NS/]NAME\n"
		"       zerohop lab exec [--lab NAME] --node NODE -- CMD [ARGS...]\n"
		"       zerohop lab podman [--lab NAME] --node NODE -- PODMAN-ARGS...   (docs/cni.md)\n");
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
	char sd[LAB_PATH], dns[INET6_ADDRSTRLEN], buf[4096];

	zh_state_dir(sd, sizeof(sd), t->lab);
	lab_dns_str(t, dns);
	lab_fmt(buf, sizeof(buf),
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n---\n"
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: cluster-dns\n  namespace: kube-system\n"
		"  labels:\n    k8s-app: kube-dns\nspec:\n  nodeName: %s\n  containers:\n"
		"  - name: dns\n    image: zerohop/dns\n    command: [\"%s\", \"dns\", \"--state\", \"%s\"%s]\n"
		"    ports:\n    - name: dns\n      containerPort: 53\n      protocol: UDP\n"
		"    - name: dns-tcp\n      containerPort: 53\n      protocol: TCP\n---\n"
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: kube-dns\n  namespace: kube-system\n"
		"spec:\n  clusterIP: \"%s\"\n  selector:\n    k8s-app: kube-dns\n  ports:\n"
		"  - name: dns\n    port: 53\n    protocol: UDP\n    targetPort: 53\n"
		"  - name: dns-tcp\n    port: 53\n    protocol: TCP\n    targetPort: 53\n",
		t->nodes[0].name, t->zerohop, sd,
		t->v6only ? ", \"--addr\", \"::\"" : "",	/* its pod has only an IPv6 */
		dns);
	return lab_write_str(path, buf);
}

/* Dual-stack (docs/ipv6.md): node i gets the i-th /64 of the IPv6 pod
 * CIDR and fabric IPv6 LAB_FABRIC_NET6 + (i+1). IPv6-only (no IPv4 pod
 * CIDR): the same, and pods get no IPv4 (lab.h, struct lab_topo v6only);
 * the nodes keep their IPv4 fabric, the lab's underlay. */
static int topo6_from_cluster(const struct md_cluster *c, struct lab_topo *t)
{
	int len = c->pod_cidr6_len;

	if (!len)
		return 0;
	if (!c->pod_cidr) {
		if (!c->svc_cidr6_len || c->svc_cidr6_len > 120) {
			lab_err("%s:%d: spec.serviceCIDRs: an IPv6-only lab needs an IPv6 service "
				"CIDR of /120 or shorter", c->file, c->line);
			return -EINVAL;
		}
		t->v6only = true;
		t->svc_cidr6 = c->svc_cidr6;
		t->svc_cidr6_len = c->svc_cidr6_len;
	}
	if (len > 56 || (len > 48 && (1L << (64 - len)) < t->n_nodes)) {
		lab_err("%s:%d: spec.podCIDRs: IPv6 /%d holds fewer than %d /64 node ranges (at most /56)",
			c->file, c->line, len, t->n_nodes);
		return -EINVAL;
	}
	t->pod_cidr6 = c->pod_cidr6;
	t->pod_cidr6_len = len;
	for (int i = 0; i < t->n_nodes; i++) {
		struct lab_node *nd = &t->nodes[i];

		inet_pton(AF_INET6, LAB_FABRIC_NET6, &nd->ip6);
		nd->ip6.s6_addr[14] = (uint8_t)((i + 1) >> 8);
		nd->ip6.s6_addr[15] = (uint8_t)(i + 1);
		/* node i's /64: i added to the 64-bit prefix (len <= 56, i < 256) */
		nd->pod_net6 = c->pod_cidr6;
		nd->pod_net6.s6_addr[7] = (uint8_t)(nd->pod_net6.s6_addr[7] + i);
	}
	return 0;
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
	return topo6_from_cluster(c, t);
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

/* What `lab up` was asked for (its flags). */
struct up_opts {
	char **files;
	int n_files;
	bool overlay, mesh, nft, keep_going, podman, sidecar;
	int etcd;		/* --state: 0 dir, 1 etcd, 2 etcd-tls (lab_etcd.c) */
	int accel;		/* -1 agent default, 0 off, 1 on */
	const char *skip_ports;	/* --accel-skip-ports or NULL */
	int drain_ms;
	bool prometheus;	/* --prometheus: lab_prom.c */
};

/* Phase 1, before anything is built: parse and check every manifest and
 * fill the topology. 0, or -1 with the error printed. */
static int up_plan(const char *lab, const struct up_opts *o, struct md_state *st,
		   struct lab_topo *t)
{
	struct md_err err = { 0 };
	char ebuf[1024];
	ssize_t r;

	for (int i = 0; i < o->n_files; i++) {
		if (md_state_add_file(st, o->files[i], &err)) {
			lab_err("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
			return -1;
		}
	}
	if (md_state_finish(st, &err)) {
		lab_err("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
		return -1;
	}
	lab_fmt(t->lab, sizeof(t->lab), "%s", lab);
	t->overlay = o->overlay;
	t->mesh = o->mesh;
	t->accel = o->accel;
	t->nft = o->nft;
	t->sidecar = o->sidecar;
	t->drain_ms = o->drain_ms;
	t->podman = o->podman;
	t->keep_going = o->keep_going;
	lab_fmt(t->accel_skip_ports, sizeof(t->accel_skip_ports), "%s",
		o->skip_ports ? o->skip_ports : "");
	r = readlink("/proc/self/exe", t->zerohop, sizeof(t->zerohop) - 1);
	if (r <= 0) {
		lab_err("readlink /proc/self/exe: %s", strerror(errno));
		return -1;
	}
	t->zerohop[r] = 0;
	if (topo_from_cluster(&st->cluster, t) || check_workloads(t, st))
		return -1;
	return 0;
}

/* Phase 2: run dir, cgroups, network, and the workloads (plus the system
 * pods with the mesh) into the state source. 0, or -1 with the error
 * printed; the caller takes down whatever was built. */
static int up_build(const struct lab_topo *t, const struct up_opts *o)
{
	char rundir[LAB_PATH], p[LAB_PATH + 32], ebuf[1024];
	static char sys[LAB_PATH + 32];
	struct md_err err = { 0 };
	struct ss *ss = NULL;
	char **apply;
	int n_apply = 0, ret = -1;

	zh_run_dir(rundir, sizeof(rundir), t->lab);
	if (lab_mkdirs(rundir, 0755)) {
		lab_err("mkdir %s: %s", rundir, strerror(errno));
		return -1;
	}
	lab_fmt(p, sizeof(p), "%s/pods", rundir);
	lab_mkdirs(p, 0755);
	for (int i = 0; i < t->n_nodes; i++) {
		lab_fmt(p, sizeof(p), "%s/nodes/%s", rundir, t->nodes[i].name);
		lab_mkdirs(p, 0755);
	}
	if (lab_topo_write(t)) {
		lab_err("write %s/lab.conf: %s", rundir, strerror(errno));
		return -1;
	}
	if (mk_cgroups(t) || lab_net_up(t) || (o->etcd && lab_etcd_up(t, o->etcd == 2)))
		return -1;

	/* The workloads go into the state source; the supervisor acts on them. */
	zh_state_dir(p, sizeof(p), t->lab);
	if ((ret = ss_open(p, &ss))) {
		lab_err("state source %s: %s", p, strerror(-ret));
		return -1;
	}
	ret = -1;
	apply = zh_calloc(o->n_files + 1, sizeof(char *));
	for (int i = 0; i < o->n_files; i++)
		apply[n_apply++] = o->files[i];
	if (o->mesh) {
		lab_fmt(sys, sizeof(sys), "%s/system.yaml", rundir);
		if (write_system_yaml(t, sys)) {
			lab_err("write %s", sys);
			goto out;
		}
		apply[n_apply++] = sys;
	}
	if (n_apply && ss_apply_opts(ss, apply, n_apply, &up_apply_opts, &err)) {
		lab_err("apply: %s", md_err_str(&err, ebuf, sizeof(ebuf)));
		goto out;
	}
	ret = 0;
out:
	ss_close(ss);
	free(apply);
	return ret;
}

/* Phase 3: fork the supervisor (lab_sup.c) and wait for its one-line
 * report on a pipe: "ok", "ok degraded: WHY" (--keep-going) or the reason
 * it failed, into line. 0 on "ok...", -1 otherwise (line says why). */
static int up_start(const struct lab_topo *t, uint64_t t0, char *line, size_t len)
{
	char rundir[LAB_PATH], p[LAB_PATH + 32];
	int pfd[2], ret = -1;
	size_t off = 0;
	ssize_t r;
	pid_t pid;

	zh_run_dir(rundir, sizeof(rundir), t->lab);
	lab_fmt(line, len, "supervisor died before the lab was ready");
	if (pipe2(pfd, O_CLOEXEC)) {
		lab_fmt(line, len, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		lab_fmt(line, len, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
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
	for (;;) {
		struct pollfd q = { .fd = pfd[0], .events = POLLIN };
		int left = (int)(UP_TIMEOUT_MS - (ms_now() - t0));

		if (left <= 0 || poll(&q, 1, left) <= 0) {
			lab_fmt(line, len, "pods did not start within %d s", UP_TIMEOUT_MS / 1000);
			goto out;
		}
		r = read(pfd[0], line + off, len - 1 - off);
		if (r <= 0)
			break;
		off += r;
		if (memchr(line, '\n', off) || off >= len - 1)
			break;
	}
	if (off) {
		line[off] = 0;
		line[strcspn(line, "\n")] = 0;
	} else {
		lab_fmt(line, len, "supervisor died before the lab was ready");
	}
	ret = strncmp(line, "ok", 2) ? -1 : 0;
out:
	close(pfd[0]);
	return ret;
}

static int lab_up(const char *lab, const struct up_opts *o)
{
	struct lab_topo *t = zh_calloc(1, sizeof(*t));
	struct md_state *st = md_state_new();
	char p[LAB_PATH + 32], line[2048];
	uint64_t t0 = ms_now();
	int ret = 1;

	/* A command that exits before reading its input (lab_run_input) must
	 * give us EPIPE, not kill us half-way through building the lab. */
	signal(SIGPIPE, SIG_IGN);
	if (lab_is_up(lab)) {
		lab_err("lab %s is already up (zerohop lab down --lab %s first)", lab, lab);
		goto out;
	}
	if (up_plan(lab, o, st, t))
		goto out;
	/* A crashed or killed earlier run: clean it first. */
	if (lab_leftovers(lab)) {
		fprintf(stderr, "zerohop lab: cleaning leftovers of an earlier run of lab %s\n", lab);
		if (lab_down(lab, false)) {
			lab_err("cannot clean leftovers of lab %s", lab);
			goto out;
		}
	}
	if (up_build(t, o))
		goto fail;
	if (t->podman && lab_podman_up(t))	/* the pod image on every node */
		goto fail;
	if (up_start(t, t0, line, sizeof(line))) {
		lab_err("lab %s: %s", lab, line);
		goto fail_log;
	}
	/* The lab counts as up from here (lab_is_up): ready + live supervisor. */
	lab_fmt(p, sizeof(p), "%s/%s/ready", ZH_RUN_ROOT, lab);
	if (lab_write_str(p, "ok\n")) {
		lab_err("write %s: %s", p, strerror(errno));
		goto fail_log;
	}
	{
		struct lab_pod_info *pods;
		int n;

		lab_pod_list(lab, &pods, &n);
		printf("lab %s up: %d nodes, %d pods%s%s in %.2f s\n", lab, t->n_nodes, n,
		       o->overlay ? ", vxlan overlay" : "",
		       !o->mesh ? ", no mesh" : o->sidecar ? ", sidecar mesh (HAProxy)" : "",
		       (ms_now() - t0) / 1000.0);
		free(pods);
		if (o->prometheus) {
			char pa[64];

			if (lab_prom_start(t, o->mesh && !o->nft, pa, sizeof(pa)))
				goto fail;
			printf("prometheus: http://%s (in netns %s-%s)\n", pa, lab, t->nodes[0].name);
		}
		/* --keep-going: up, but say loudly what does not work */
		if (!strncmp(line, "ok degraded: ", 13))
			fprintf(stderr, "zerohop lab: lab %s is DEGRADED: %s\n"
				"zerohop lab: pods on that node stay Pending; see zerohop lab status --lab %s\n",
				lab, line + 13, lab);
	}
	ret = 0;
	goto out;
fail_log:
	lab_fmt(p, sizeof(p), "%s/%s/supervisor.log", ZH_RUN_ROOT, lab);
	print_log_tail(p);
fail:
	lab_down(lab, false);
	ret = 1;
out:
	md_state_free(st);
	free(t);
	return ret;
}

/* ---- status -------------------------------------------------------------------- */

static void json_str(const char *s)
{
	json_put_str(stdout, s);
}

static void json_daemon(const char *key, const struct lab_daemon_info *d)
{
	printf(",\"%s\":{\"state\":", key);
	json_str(d->state);
	printf(",\"pid\":%d,\"restarts\":%d,\"last_error\":", d->pid, d->restarts);
	if (d->error[0])
		json_str(d->error);
	else
		printf("null");
	printf(",\"log\":");
	if (d->log[0])
		json_str(d->log);
	else
		printf("null");
	printf("}");
}

/* "Running", or "CrashLoopBackOff (3)" with the restarts, kubectl-like. */
static const char *daemon_cell(const struct lab_daemon_info *d, char *buf, size_t len)
{
	if (d->restarts && strcmp(d->state, "None"))
		lab_fmt(buf, len, "%s (%d)", d->state, d->restarts);
	else
		lab_fmt(buf, len, "%s", d->state);
	return buf;
}

static int lab_status(const char *lab, bool json)
{
	struct lab_topo t;
	struct lab_pod_info *pods = NULL;
	char a[16], b[16], p[LAB_PATH], buf[32], a6[INET6_ADDRSTRLEN], b6[INET6_ADDRSTRLEN];
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
		printf(",\"up\":%s,\"supervisorPid\":%d,\"overlay\":%s,\"mesh\":%s,\"meshMode\":\"%s\",\"podCIDR\":\"%s/%d\",\"serviceCIDR\":\"%s/%d\",\"nodes\":[",
		       up ? "true" : "false", sup, t.overlay ? "\"vxlan\"" : "null",
		       t.mesh ? "true" : "false",
		       !t.mesh ? "none" : t.sidecar ? "sidecar" : t.nft ? "nft" : "zerohop", lab_ip4_str(t.pod_cidr, a), t.pod_cidr_len,
		       lab_ip4_str(t.svc_cidr, b), t.svc_cidr_len);
		for (int i = 0; i < t.n_nodes; i++) {
			printf("%s{\"name\":", i ? "," : "");
			json_str(t.nodes[i].name);
			struct lab_node_daemons nd;

			lab_node_daemons_read(lab, t.nodes[i].name, &nd);
			printf(",\"ip\":\"%s\",\"podCIDR\":\"%s/%d\",\"netns\":\"%s-%s\",\"agentPid\":%d,\"proxyPid\":%d",
			       lab_ip4_str(t.nodes[i].ip, a), lab_ip4_str(t.nodes[i].pod_net, b),
			       t.nodes[i].pod_len, lab, t.nodes[i].name, nd.agent.pid, nd.proxy.pid);
			json_daemon("agent", &nd.agent);
			json_daemon("proxy", &nd.proxy);
			if (t.pod_cidr6_len)	/* dual-stack (docs/ipv6.md) */
				printf(",\"ip6\":\"%s\",\"podCIDR6\":\"%s/64\"",
				       inet_ntop(AF_INET6, &t.nodes[i].ip6, a6, sizeof(a6)),
				       inet_ntop(AF_INET6, &t.nodes[i].pod_net6, b6, sizeof(b6)));
			printf("}");
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
			/* "ip": the pod's primary address, its IPv6 when it has
			 * no IPv4 (an IPv6-only lab), as status.podIP */
			printf(",\"ip\":\"%s\",\"phase\":\"%s\",\"pid\":%d,\"restarts\":%d,\"owner\":",
			       t.v6only ? inet_ntop(AF_INET6, &pods[i].ip6, a6, sizeof(a6)) :
					  lab_ip4_str(pods[i].ip, a),
			       pods[i].phase, pods[i].pid, pods[i].restarts);
			if (pods[i].owner[0])
				json_str(pods[i].owner);
			else
				printf("null");
			printf(",\"netns\":");
			json_str(lab_pod_netns_name(nsn, sizeof(nsn), lab, pods[i].ns, pods[i].name));
			if (t.pod_cidr6_len)
				printf(",\"ip6\":\"%s\"",
				       inet_ntop(AF_INET6, &pods[i].ip6, a6, sizeof(a6)));
			printf("}");
		}
		printf("]");
		if (t.pod_cidr6_len)
			printf(",\"podCIDR6\":\"%s/%d\",\"ipv6Only\":%s",
			       inet_ntop(AF_INET6, &t.pod_cidr6, a6, sizeof(a6)), t.pod_cidr6_len,
			       t.v6only ? "true" : "false");
		lab_etcd_status(lab, true);
		printf("}\n");
	} else {
		printf("lab %s: %s, supervisor pid %d%s%s\n", lab, up ? "up" : "NOT RUNNING", sup,
		       t.overlay ? ", vxlan overlay" : "", t.mesh ? "" : ", no mesh");
		printf("%-12s %-12s %-15s %-22s %-7s %-22s %s\n", "NODE", "IP", "POD CIDR",
		       "AGENT", "PID", "PROXY", "PID");
		for (int i = 0; i < t.n_nodes; i++) {
			char cidr[32], ac[48], pc[48];
			struct lab_node_daemons nd;

			lab_node_daemons_read(lab, t.nodes[i].name, &nd);
			lab_fmt(cidr, sizeof(cidr), "%s/%d", lab_ip4_str(t.nodes[i].pod_net, b),
				t.nodes[i].pod_len);
			printf("%-12s %-12s %-15s %-22s %-7d %-22s %d\n", t.nodes[i].name,
			       lab_ip4_str(t.nodes[i].ip, a), cidr,
			       daemon_cell(&nd.agent, ac, sizeof(ac)), nd.agent.pid,
			       daemon_cell(&nd.proxy, pc, sizeof(pc)), nd.proxy.pid);
		}
		/* What is wrong, in one line each, as kubectl describe would */
		for (int i = 0; i < t.n_nodes; i++) {
			struct lab_node_daemons nd;
			const struct lab_daemon_info *ds[2];

			lab_node_daemons_read(lab, t.nodes[i].name, &nd);
			ds[0] = &nd.agent;
			ds[1] = &nd.proxy;
			for (int k = 0; k < 2; k++)
				if (ds[k]->error[0] || (strcmp(ds[k]->state, "Running") &&
							strcmp(ds[k]->state, "None")))
					printf("  %s %s: %s: %s%s%s\n", t.nodes[i].name,
					       k ? "proxy" : "agent", ds[k]->state,
					       ds[k]->error[0] ? ds[k]->error : "no error logged",
					       ds[k]->log[0] ? "; log " : "", ds[k]->log);
		}
		lab_etcd_status(lab, false);
		if (t.pod_cidr6_len) {	/* dual-stack: each node's IPv6 */
			printf("\n%-12s %-24s %s\n", "NODE", "IPV6", "IPV6 POD CIDR");
			for (int i = 0; i < t.n_nodes; i++)
				printf("%-12s %-24s %s/64\n", t.nodes[i].name,
				       inet_ntop(AF_INET6, &t.nodes[i].ip6, a6, sizeof(a6)),
				       inet_ntop(AF_INET6, &t.nodes[i].pod_net6, b6, sizeof(b6)));
		}
		printf("\n%-14s %-40s %-12s %-15s %-11s %-8s %s%s\n", "NAMESPACE", "POD", "NODE", "IP",
		       "PHASE", "PID", t.pod_cidr6_len ? "RESTARTS " : "RESTARTS",
		       t.pod_cidr6_len ? "IPV6" : "");
		for (int i = 0; i < n; i++) {
			printf("%-14s %-40s %-12s %-15s %-11s %-8d %d", pods[i].ns, pods[i].name,
			       pods[i].node, t.v6only ? "-" : lab_ip4_str(pods[i].ip, a), pods[i].phase, pods[i].pid,
			       pods[i].restarts);
			if (t.pod_cidr6_len)
				printf("        %s", inet_ntop(AF_INET6, &pods[i].ip6, a6, sizeof(a6)));
			printf("\n");
		}
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
		if (lab_podman_has_pod(lab, &pod))	/* --runtime podman: podman exec */
			return lab_podman_exec(lab, &pod, cmd);
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
		{ "mesh", required_argument, NULL, 'm' },
		{ "accel", required_argument, NULL, 'a' },
		{ "service-proxy", required_argument, NULL, 'S' },
		{ "accel-skip-ports", required_argument, NULL, 'P' },
		{ "drain-delay", required_argument, NULL, 'D' },
		{ "keep-going", no_argument, NULL, 'K' },
		{ "runtime", required_argument, NULL, 'R' },
		{ "state", required_argument, NULL, 'E' },
		{ "prometheus", no_argument, NULL, 'Q' },
		{ "node", required_argument, NULL, 'N' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *sub, *lab_opt = NULL, *node = NULL, *pod_ns = NULL, *skip_ports = NULL;
	char **files = NULL;
	int n_files = 0, accel = -1, c, ret = 2, drain_ms = LAB_DRAIN_DEFAULT_MS;
	bool up_only = false, keep_going = false, podman = false, prometheus = false;
	/* ZH_LAB_STATE=etcd (or etcd-tls): the default of --state (runs a lab
	 * test on etcd) */
	const char *ls = getenv("ZH_LAB_STATE");
	int etcd = !ls ? 0 : !strcmp(ls, "etcd") ? 1 : !strcmp(ls, "etcd-tls") ? 2 : 0;
	bool overlay = false, mesh = true, nft = false, json = false, sidecar = false;
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
		case 'm':	/* docs/sidecar-baseline.md */
			if (!strcmp(optarg, "none")) {
				mesh = false;
			} else if (!strcmp(optarg, "sidecar")) {
				sidecar = true;
			} else if (strcmp(optarg, "zerohop")) {
				lab_err("--mesh: expected zerohop, sidecar or none, got '%s'", optarg);
				goto out;
			}
			up_only = true;
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
		case 'K':
			keep_going = true;
			up_only = true;
			break;
		case 'R':	/* pods as processes (default) or podman containers */
			if (strcmp(optarg, "process") && strcmp(optarg, "podman")) {
				lab_err("--runtime: expected process or podman, got '%s'", optarg);
				goto out;
			}
			podman = !strcmp(optarg, "podman");
			up_only = true;
			break;
		case 'E':
			if (strcmp(optarg, "etcd") && strcmp(optarg, "etcd-tls") && strcmp(optarg, "dir")) {
				lab_err("--state: expected etcd, etcd-tls or dir, got '%s'", optarg);
				goto out;
			}
			etcd = !strcmp(optarg, "etcd") ? 1 : !strcmp(optarg, "etcd-tls") ? 2 : 0;
			up_only = true;
			break;
		case 'Q':
			prometheus = true;
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
		lab_err("%s: --accel-skip-ports, --drain-delay, --keep-going, --runtime, --state, --prometheus and --mesh are options of lab up", sub);
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
		if (sidecar && podman) {
			lab_err("--mesh sidecar runs its sidecars as processes: not with --runtime podman yet");
			goto out;
		}
		if (sidecar && (!mesh || nft)) {
			lab_err("--mesh sidecar: drop --no-mesh and --service-proxy (the sidecar lab runs kube-proxy-style nft under its sidecars)");
			goto out;
		}
		/* Sidecars balance; under them the agents are kube-proxy (nft
		 * DNAT: cluster DNS over UDP), and accel is off unless asked. */
		if (sidecar && lab_sc_check())
			goto out;
		if (sidecar) {
			nft = true;
			if (accel < 0)
				accel = 0;
		}
		struct up_opts uo = {
			.files = files, .n_files = n_files, .overlay = overlay, .mesh = mesh,
			.nft = nft, .keep_going = keep_going, .accel = accel, .sidecar = sidecar,
			.skip_ports = skip_ports, .drain_ms = drain_ms, .podman = podman,
			.etcd = etcd,
			.prometheus = prometheus,
		};

		ret = lab_up(lab, &uo);
	} else if (!strcmp(sub, "down")) {
		ret = lab_down(lab, true) ? 1 : 0;
	} else if (!strcmp(sub, "status")) {
		ret = lab_status(lab, json);
	} else if (!strcmp(sub, "podman")) {
		/* podman --node NODE -- ARGS: real containers (lab_podman.c) */
		if (!node || optind >= argc) {
			usage(stderr);
			goto out;
		}
		ret = lab_podman(lab, node, argv + optind, argc - optind);
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
