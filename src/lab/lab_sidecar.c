/* lab_sidecar.c — `lab up --mesh sidecar`: the supervisor's side of the
 * sidecar baseline (what Istio's injector, istio-init and istiod do), over
 * the renderer in sidecar_cfg.c (include/zerohop/sidecar.h).
 *
 * Per pod that sc_wanted():
 *   lab_sc_pod_plan()     (pod creation, before any process) writes
 *                         RUNDIR/pods/NS_POD/sidecar.cfg from the current
 *                         state and appends container SC_CONTAINER
 *                         (`haproxy -W -f sidecar.cfg`, master-worker) and
 *                         its listeners to the pod's readiness ports, so the
 *                         pod is Running (an endpoint) only once its sidecar
 *                         listens;
 *   lab_sc_pod_capture()  (after the pod's veth, before any process: the
 *                         istio-init step) loads sc_capture_rules() into the
 *                         pod's network namespace;
 *   lab_sc_proc_fix()     the sidecar runs in the pod's cgroup and network
 *                         and UTS namespaces but the host's mount namespace:
 *                         nginx pods get a tmpfs /run, which would hide its
 *                         configuration (and HAProxy needs no pod files);
 *   lab_sc_sync()         (every state change, after the debounce) renders
 *                         every sidecar again and reloads (SIGUSR2 to the
 *                         master) those whose text changed (SC1: no change,
 *                         no reload) — istiod's push. The reload is held
 *                         (lab_sc_tick) until the master has its SIGUSR2
 *                         handler: sent earlier, SIGUSR2's default action
 *                         would kill a sidecar that is still starting.
 * Nothing here needs undoing at `lab down`: the rules live in the pod's
 * network namespace and the processes in its cgroup, both removed with it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zerohop/log.h"
#include "zerohop/sidecar.h"
#include "sup_int.h"

/* The state with endpoints (manifests + runtime pods), cached per
 * generation of the state source. */
static struct md_state *sc_st;
static uint64_t sc_gen;

static const struct md_state *state_now(struct sup *s)
{
	uint64_t gen = ss_generation(s->ss);
	struct md_state *st = NULL;
	struct md_err err = { 0 };
	char ebuf[512];

	if (sc_st && gen == sc_gen)
		return sc_st;
	if (ss_load(s->ss, &st, &err)) {
		zh_err("sidecar: state not loaded, keeping the previous one: %s",
		       md_err_str(&err, ebuf, sizeof(ebuf)));
		return sc_st;
	}
	md_state_free(sc_st);
	sc_st = st;
	sc_gen = gen;
	return sc_st;
}

static struct sup_proc *sidecar_proc(struct sup_pod *pod)
{
	for (int i = 0; i < pod->n_procs; i++)
		if (!strcmp(pod->procs[i].name, SC_CONTAINER))
			return &pod->procs[i];
	return NULL;
}

bool lab_sc_planned(const struct lab_plan *p)
{
	for (int i = 0; i < p->n_cmds; i++)
		if (!strcmp(p->cmds[i].name, SC_CONTAINER))
			return true;
	return false;
}

/* Render pod's configuration into its run dir; *changed when the file's
 * text differs (or it did not exist). 0 or -errno. */
static int write_cfg(struct sup *s, const struct sup_pod *pod, bool *changed)
{
	const struct md_state *st = state_now(s);
	char dir[LAB_PATH], path[LAB_PATH + 16], sock[LAB_PATH + 16], *text = NULL, *old;
	uint16_t ports[64];
	int n = 0, ret;
	struct sc_pod p;

	if (!st)
		return -EAGAIN;
	for (int i = 0; i < pod->plan.n_ports && n < 64; i++) {
		uint16_t pt = pod->plan.ports[i].port;

		if (pod->plan.ports[i].proto == MD_PROTO_TCP && pt != SC_OUTBOUND_PORT &&
		    pt != SC_INBOUND_PORT)
			ports[n++] = pt;
	}
	lab_pod_dir(dir, sizeof(dir), s->t.lab, pod->ns, pod->name);
	lab_fmt(path, sizeof(path), "%s/sidecar.cfg", dir);
	lab_fmt(sock, sizeof(sock), "%s/sidecar.sock", dir);
	p = (struct sc_pod){ .ns = pod->ns, .name = pod->name, .ip = pod->ip, .tcp_ports = ports,
			     .n_tcp_ports = n, .stats_sock = sock };
	ret = sc_render_cfg(st, &p, &text);
	if (ret)
		return ret;
	old = zh_malloc(strlen(text) + 2);
	/* lab_read_file returns the bytes read: the file is unchanged only
	 * when it was read and holds exactly this text (SC1). */
	*changed = lab_read_file(path, old, strlen(text) + 2) < 0 || strcmp(old, text);
	free(old);
	ret = *changed ? lab_write_str(path, text) : 0;
	free(text);
	return ret;
}

static bool on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[LAB_PATH];

	for (const char *p = path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		lab_fmt(buf, sizeof(buf), "%.*s/%s", (int)n, p, prog);
		if (n && access(buf, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

int lab_sc_check(void)
{
	static const char *const need[] = { "haproxy", "nft" };

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!on_path(need[i])) {
			lab_err("--mesh sidecar needs %s on PATH (Debian package %s; scripts/deps.sh installs it)",
				need[i], i ? "nftables" : "haproxy");
			return -ENOENT;
		}
	return 0;
}

int lab_sc_pod_plan(struct sup *s, struct sup_pod *pod, const struct md_labels *annotations)
{
	struct lab_plan *pl = &pod->plan;
	char dir[LAB_PATH], cfg[LAB_PATH + 16];
	bool changed;
	char **argv;
	int ret;

	if (!s->t.sidecar || !sc_wanted(pod->ns, annotations))
		return 0;
	ret = write_cfg(s, pod, &changed);
	if (ret) {
		zh_err("pod %s/%s: sidecar configuration: %s", pod->ns, pod->name, strerror(-ret));
		return ret;
	}
	lab_pod_dir(dir, sizeof(dir), s->t.lab, pod->ns, pod->name);
	lab_fmt(cfg, sizeof(cfg), "%s/sidecar.cfg", dir);
	argv = zh_calloc(5, sizeof(char *));
	argv[0] = zh_strdup("haproxy");
	argv[1] = zh_strdup("-W");	/* master-worker: SIGUSR2 reloads, pid stays */
	argv[2] = zh_strdup("-f");
	argv[3] = zh_strdup(cfg);
	/* Last container: the app's pid stays the pod's pid (lab status). */
	pl->cmds = zh_realloc(pl->cmds, (pl->n_cmds + 1) * sizeof(*pl->cmds));
	memset(&pl->cmds[pl->n_cmds], 0, sizeof(pl->cmds[0]));
	lab_fmt(pl->cmds[pl->n_cmds].name, sizeof(pl->cmds[0].name), "%s", SC_CONTAINER);
	pl->cmds[pl->n_cmds++].argv = argv;
	pl->ports = zh_realloc(pl->ports, (pl->n_ports + 2) * sizeof(*pl->ports));
	pl->ports[pl->n_ports++] = (struct lab_port){ SC_OUTBOUND_PORT, MD_PROTO_TCP };
	pl->ports[pl->n_ports++] = (struct lab_port){ SC_INBOUND_PORT, MD_PROTO_TCP };
	return 0;
}

int lab_sc_pod_capture(struct sup *s, struct sup_pod *pod)
{
	char nn[LAB_PATH];
	char *argv[] = { "ip", "netns", "exec", nn, "nft", "-f", "-", NULL };

	if (!s->t.sidecar || !lab_sc_planned(&pod->plan))
		return 0;
	lab_pod_netns_name(nn, sizeof(nn), s->t.lab, pod->ns, pod->name);
	return lab_run_input(argv, sc_capture_rules(), false);
}

void lab_sc_proc_fix(struct sup_proc *p)
{
	if (!strcmp(p->name, SC_CONTAINER))
		p->mnt[0] = '\0';
}

/* Has pid a handler for sig (SigCgt in /proc/PID/status)? */
static bool catches(int pid, int sig)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	FILE *f;

	lab_fmt(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigCgt: %llx", &mask) == 1)
			break;
	fclose(f);
	return mask & (1ULL << (sig - 1));
}

void lab_sc_tick(struct sup *s)
{
	if (!s->t.sidecar)
		return;
	for (struct sup_pod *pod = s->pods; pod; pod = pod->next) {
		struct sup_proc *p;

		if (!pod->sc_pending || !(p = sidecar_proc(pod)))
			continue;
		if (p->pid <= 0) {
			pod->sc_pending = false;	/* its next start reads the new file */
		} else if (catches(p->pid, SIGUSR2)) {
			kill(p->pid, SIGUSR2);
			pod->sc_pending = false;
		}
	}
}

void lab_sc_sync(struct sup *s)
{
	int n = 0;

	if (!s->t.sidecar)
		return;
	for (struct sup_pod *pod = s->pods; pod; pod = pod->next) {
		bool changed = false;

		if (!sidecar_proc(pod))
			continue;
		if (write_cfg(s, pod, &changed)) {
			zh_err("pod %s/%s: sidecar configuration not written", pod->ns, pod->name);
			continue;
		}
		if (changed) {
			pod->sc_pending = true;
			n++;
		}
	}
	if (n)
		zh_info("sidecar: generation %llu: %d sidecar configurations changed",
			(unsigned long long)sc_gen, n);
	lab_sc_tick(s);
}
