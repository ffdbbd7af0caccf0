/* lab_sup.c — the lab's supervisor daemon: kubelet and Deployment
 * controller for every node of one lab, plus the babysitter of the node
 * agents and node L7 proxies. Its processes are in sup_proc.c, the
 * controllers (manifests -> pods) in sup_ctrl.c, what they share in
 * sup_int.h.
 *
 * Design note.
 *
 * The daemon keeps the desired state (the manifests in STATEDIR/manifests,
 * reloaded whenever the state source changes) and the actual state (struct
 * sup_pod list, one struct sup_proc per container or agent) and converges
 * the second towards the first in sup_reconcile(), called after every event.
 *
 * Pod life cycle (per struct sup_pod):
 *
 *	   sup_pod_create()                ready_check(): every declared
 *	 ─────────────▶ STARTING ─────▶ port listens, or READY_MS passed
 *	  namespaces,      │              or the command already exited
 *	  veth, cgroup,    │                         │
 *	  processes        │                         ▼
 *	                   │                      RUNNING  ── ss_put_pod(Running)
 *	                   │                         │
 *	                   │     sup_pod_terminate(): ss_put_pod(deletionTimestamp)
 *	                   │                      (generation G)
 *	                   │                         ▼
 *	                   │         TERMINATING/SYNC   every agent's published
 *	                   │                         │  generation >= G, or
 *	                   │                         │  TERM_SYNC_MS passed
 *	                   │                         ▼
 *	                   │         TERMINATING/DRAIN  drain_ms (lab up
 *	                   │                         │  --drain-delay, or the pod's
 *	                   │                         │  zerohop.io/drain-delay)
 *	                   ▼   sup_pod_terminate()       ▼
 *	                  (not RUNNING) ──▶ TERMINATING/STOP  SIGTERM; cgroup empty,
 *	                                             │  or STOP_GRACE_MS passed:
 *	                                             ▼  cgroup.kill
 *	                                   TERMINATING/KILL  cgroup empty or
 *	                                             │  KILL_WAIT_MS passed
 *	                                             ▼
 *	                                   pod_finish(): ss_del_pod, veth,
 *	                                   namespaces, dirs, IP, record freed
 *
 * term_check() runs every step from the main loop; pod_delete() (a pod
 * whose set-up failed, nothing started) skips the steps and stops at once.
 * `lab down` does not go through this at all: it kills the supervisor and
 * every cgroup of the lab (no drain).
 *
 * Process life cycle (struct sup_proc): pid>0 running; pid==0 waiting for
 * next_ms (restart backoff: BACKOFF_MIN_MS doubling to BACKOFF_MAX_MS, reset
 * after a run of BACKOFF_RESET_MS), as restartPolicy Always.
 *
 * Invariants:
 * 1. A pod is an endpoint (published Running) only once RUNNING, so the
 *    datapath never sends a connection to a pod whose ports are not
 *    listening yet. Termination re-publishes it with a deletionTimestamp
 *    before its processes are stopped: no longer an endpoint (an in-place
 *    change, which the agents apply incrementally in milliseconds), still
 *    a pod for NetworkPolicy while its processes run (its traffic stays
 *    judged during the drain). It is unpublished (ss_del_pod) once its
 *    processes are gone (pod_finish).
 * 2. Rollouts keep maxSurge 1 / maxUnavailable 0 over the pods that are not
 *    TERMINATING: at most replicas+1 of them exist, and an old RUNNING pod
 *    is terminated only while more than `replicas` of them are RUNNING. A
 *    TERMINATING pod is neither available nor counted against replicas (as
 *    in Kubernetes), so its replacement may start while it drains.
 * 3. Every process the daemon starts is in a cgroup under
 *    CGROOT/zerohop-LAB (pods under their node, agents and proxies under
 *    system/), so `lab down` can find and kill all of them even if this
 *    daemon is dead. A proxy is never under its node's cgroup: the agent's
 *    connect4 there would capture the proxy's own upstream connections.
 * 4. Pod IPs are unique per node (bitmap) and handed out next-fit, so a just
 *    freed address is not reused at once.
 * 5. The daemon never blocks for long: termination (sync, drain, SIGTERM
 *    grace, kill) and readiness are polled from the main loop; the only
 *    blocking stop (pod_delete(), set-up failures) has no process to wait for.
 * 6. With agents (mesh on, BPF mode), a new pod is isolated before its
 *    command starts: sup_pod_create() publishes it Pending with its IP (Endpoints
 *    use Running pods only, so no Service sends it traffic) and holds its
 *    containers; isolate_check() starts them once every agent's published
 *    generation (its health file, written after its policy and map sync:
 *    agent.c A9) has reached the generation
 *    of that write, or after ISOLATE_MS with a warning (an agent down must
 *    not stop the lab). Then it goes STARTING -> RUNNING as before.
 * 7. With agents in BPF mode, one `zerohop proxy --node NODE` per node
 *    (supervised like the agents) listens on NODE_IP:15001 before the
 *    first pod starts (bounded by READY_MS), so a pod's first connection to
 *    an L7 Service finds the proxy up instead of being refused.
 * 8. A RUNNING pod being removed keeps its processes, address and routes
 *    until every agent applied its removal (the generation of the
 *    ss_del_pod, bounded by TERM_SYNC_MS) and then drain_ms more (time for
 *    the node proxies and for connections chosen just before the update),
 *    so a connection the datapath chose before the removal reaches a live
 *    pod. Its containers are not restarted meanwhile, and its name stays
 *    taken: a Pod re-created under the same name starts once it is gone.
 * 9. A node daemon is judged by what it publishes, never by its private
 *    maps: an agent is ready once its health file names a synced generation
 *    (under its current pid), a proxy once it listens on its capture port.
 *    At start-up every agent, then every proxy, must become ready before
 *    any pod starts; one that exits first or is not ready within
 *    DAEMON_READY_MS fails `lab up` with its own last log line (or, with
 *    --keep-going, leaves the lab up and says it is degraded). A pod becomes
 *    RUNNING only on a node whose agent is ready (sup_node_serving), so no
 *    pod is published as an endpoint with no mesh under it.
 *
 * Node daemon states (struct sup_proc of agents[] and proxies[], shown by
 * `lab status` from RUNDIR/nodes/NODE/info, written by write_node_info):
 *
 *	  sup_proc_start()        daemons_refresh(): health file /
 *	 ───────────────▶ Starting ────── listening socket ──────▶ Running
 *	                     │                                       │
 *	                     └──────── exit (reap) ───────┬──────────┘
 *	                                                   ▼
 *	          restart_due() after backoff ◀── CrashLoopBackOff (last_error =
 *	                                            the last line of its log)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "zerohop/abi/l7cap.h"
#include "zerohop/health.h"
#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/model.h"
#include "zerohop/paths.h"
#include "zerohop/state.h"
#include "lab_int.h"
#include "lab_plan.h"
#include "sup_int.h"

/* The pod's IPv6 as text in buf (INET6_ADDRSTRLEN) on a dual-stack lab,
 * else NULL. */
static const char *pod_ip6_str(struct sup *s, struct sup_pod *pod, char *buf)
{
	struct in6_addr ip6;

	if (!s->t.pod_cidr6_len)
		return NULL;
	lab_pod_ip6(&s->t.nodes[pod->node], pod->ip, &ip6);
	return inet_ntop(AF_INET6, &ip6, buf, INET6_ADDRSTRLEN);
}

static void pod_write_info(struct sup *s, struct sup_pod *pod)
{
	char dir[LAB_PATH], path[LAB_PATH + 8], buf[2048], a[16], a6[INET6_ADDRSTRLEN];
	char ip6l[80] = "";
	int restarts = 0;

	for (int i = 0; i < pod->n_procs; i++)
		restarts += pod->procs[i].restarts;
	lab_pod_dir(dir, sizeof(dir), s->t.lab, pod->ns, pod->name);
	lab_fmt(path, sizeof(path), "%s/info", dir);
	if (pod_ip6_str(s, pod, a6))
		lab_fmt(ip6l, sizeof(ip6l), "ip6 %s\n", a6);
	lab_fmt(buf, sizeof(buf),
		"namespace %s\nname %s\nnode %s\nowner %s\nip %s\n%sphase %s\npid %d\nrestarts %d\nhash %s\n",
		pod->ns, pod->name, s->t.nodes[pod->node].name, pod->owner,
		lab_ip4_str(pod->ip, a), ip6l,
		pod->state == POD_RUNNING ? "Running" :
		pod->state == POD_TERMINATING ? "Terminating" : "Pending",
		pod->n_procs ? (int)pod->procs[0].pid : 0, restarts, pod->hash);
	lab_write_str(path, buf);
}

/* Write the runtime pod into the state source; leaving: with a
 * deletionTimestamp (invariant 1). */
static void pod_publish(struct sup *s, struct sup_pod *pod, const char *phase, bool leaving)
{
	char *y = NULL, a[16], ts[64] = "", a6[INET6_ADDRSTRLEN];
	size_t len = 0;
	FILE *f = open_memstream(&y, &len);
	int ret;

	if (leaving) {
		time_t t = time(NULL);
		struct tm tm;

		strftime(ts, sizeof(ts), "  deletionTimestamp: \"%Y-%m-%dT%H:%M:%SZ\"\n",
			 gmtime_r(&t, &tm));
	}
	fprintf(f, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n%s%s",
		pod->name, pod->ns, ts, pod->yaml_meta);
	fprintf(f, "spec:\n  nodeName: %s\n%s", s->t.nodes[pod->node].name, pod->yaml_spec);
	/* dual-stack: both addresses, IPv4 first (the lab's primary family);
	 * IPv6-only: the IPv6 alone (lab.h v6only) */
	if (s->t.v6only && pod_ip6_str(s, pod, a6)) {
		fprintf(f, "status:\n  phase: %s\n  podIP: \"%s\"\n  podIPs: [{ip: \"%s\"}]\n",
			phase, a6, a6);
	} else {
		fprintf(f, "status:\n  phase: %s\n  podIP: %s\n", phase, lab_ip4_str(pod->ip, a));
		if (pod_ip6_str(s, pod, a6))
			fprintf(f, "  podIPs: [{ip: %s}, {ip: \"%s\"}]\n", a, a6);
	}
	fclose(f);
	ret = ss_put_pod(s->ss, pod->ns, pod->name, y);
	if (ret)
		zh_err("pod %s/%s: ss_put_pod: %s", pod->ns, pod->name, strerror(-ret));
	else
		pod->published = true;
	free(y);
}

/* ---- pod create / delete --------------------------------------------------------- */

static int alloc_ip(struct sup *s, int node, uint32_t *ip)
{
	const struct lab_node *n = &s->t.nodes[node];

	/* .2-.254 next-fit, without the CNI plugin's range (lab_int.h): a
	 * lab that has churned ~200 pods would otherwise hand a process pod
	 * the address of a container made by hand. */
	for (int k = 0; k < 253; k++) {
		int h = 2 + (s->ipcur[node] + k) % 253;

		if (s->ipmap[node][h] || (h >= LAB_CNI_RANGE_LO && h <= LAB_CNI_RANGE_HI))
			continue;
		s->ipmap[node][h] = 1;
		s->ipcur[node] = h - 1;
		*ip = htonl(ntohl(n->pod_net) + h);
		return 0;
	}
	return -ENOSPC;
}

static void free_ip(struct sup *s, int node, uint32_t ip)
{
	s->ipmap[node][ntohl(ip) & 0xff] = 0;
}

static int pick_node(struct sup *s, const char *node_name)
{
	int count[LAB_MAX_NODES] = { 0 }, best = -1;

	if (node_name) {
		for (int i = 0; i < s->t.n_nodes; i++)
			if (!strcmp(s->t.nodes[i].name, node_name))
				return i;
		return -ENOENT;
	}
	for (struct sup_pod *p = s->pods; p; p = p->next)
		count[p->node] += p->state != POD_TERMINATING;
	/* Least loaded; ties broken round-robin from s->rr. */
	for (int k = 0; k < s->t.n_nodes; k++) {
		int i = (s->rr + k) % s->t.n_nodes;

		if (best < 0 || count[i] < count[best])
			best = i;
	}
	s->rr = (best + 1) % s->t.n_nodes;
	return best;
}

static void pod_free(struct sup_pod *pod)
{
	for (int i = 0; i < pod->n_procs; i++)
		sup_proc_free(&pod->procs[i]);
	free(pod->procs);
	lab_plan_free(&pod->plan);
	free(pod->yaml_meta);
	free(pod->yaml_spec);
	free(pod);
}

bool sup_failed_has(struct sup *s, const char *key)
{
	for (int i = 0; i < s->n_failed; i++)
		if (!strcmp(s->failed[i], key))
			return true;
	return false;
}

static void failed_add(struct sup *s, const char *key, const char *why)
{
	lab_fmt(s->last_err, sizeof(s->last_err), "%s", why);
	if (s->n_failed < 64 && !sup_failed_has(s, key))
		lab_fmt(s->failed[s->n_failed++], sizeof(s->failed[0]), "%s", key);
}

static void pod_delete(struct sup *s, struct sup_pod *pod);
static bool agents_synced(struct sup *s, uint64_t gen);

/* Create a pod from spec; returns the pod (STARTING) or NULL (logged). */
struct sup_pod *sup_pod_create(struct sup *s, const char *ns, const char *name,
			       const char *owner, const char *hash,
			       const struct md_labels *labels, const struct md_labels *annotations,
			       const struct md_pod_spec *spec, const char *file, int line)
{
	char dir[LAB_PATH], cg[LAB_PATH], errbuf[512], key[300];
	struct sup_pod *pod = zh_calloc(1, sizeof(*pod));
	const char *drain = md_labels_get(annotations, LAB_DRAIN_ANNOTATION);
	int node, ret;

	lab_fmt(key, sizeof(key), "%s/%s/%s", ns, owner[0] ? owner : name, hash);
	pod->drain_ms = s->t.drain_ms;
	if (drain && lab_parse_drain(drain, &pod->drain_ms)) {
		lab_fmt(errbuf, sizeof(errbuf),
			"%s:%d: pod %s/%s: annotation %s: expected 0 or a duration up to %ds such as 500ms or 2s, got '%s'",
			file, line, ns, name, LAB_DRAIN_ANNOTATION, LAB_DRAIN_MAX_MS / 1000, drain);
		zh_err("%s", errbuf);
		failed_add(s, key, errbuf);
		free(pod);
		return NULL;
	}
	node = pick_node(s, spec->node_name);
	if (node < 0) {
		lab_fmt(errbuf, sizeof(errbuf), "%s:%d: pod %s/%s: spec.nodeName: no node '%s' in this lab",
			file, line, ns, name, spec->node_name);
		zh_err("%s", errbuf);
		failed_add(s, key, errbuf);
		free(pod);
		return NULL;
	}
	lab_fmt(pod->ns, sizeof(pod->ns), "%s", ns);
	lab_fmt(pod->name, sizeof(pod->name), "%s", name);
	lab_fmt(pod->owner, sizeof(pod->owner), "%s", owner);
	lab_fmt(pod->hash, sizeof(pod->hash), "%s", hash);
	pod->node = node;
	pod->seq = ++s->seq;
	pod->created_ms = sup_now_ms();
	if (alloc_ip(s, node, &pod->ip)) {
		zh_err("pod %s/%s: node %s has no free pod address", ns, name,
		       s->t.nodes[node].name);
		free(pod);
		return NULL;
	}
	lab_pod_addr_str(&s->t, &s->t.nodes[node], pod->ip, pod->addr);
	lab_pod_dir(dir, sizeof(dir), s->t.lab, ns, name);
	ret = lab_plan_pod(&s->t, s->want, ns, name, pod->ip, spec, file, line, dir, &pod->plan,
			   errbuf, sizeof(errbuf));
	if (ret) {
		zh_err("%s", errbuf);
		failed_add(s, key, errbuf);
		lab_rm_tree(dir);
		free_ip(s, node, pod->ip);
		free(pod);
		return NULL;
	}
	if (lab_sc_pod_plan(s, pod, annotations)) {
		lab_fmt(errbuf, sizeof(errbuf), "%s:%d: pod %s/%s: sidecar not planned", file,
			line, ns, name);
		failed_add(s, key, errbuf);
		lab_plan_free(&pod->plan);
		lab_rm_tree(dir);
		free_ip(s, node, pod->ip);
		free(pod);
		return NULL;
	}
	pod->yaml_meta = lab_plan_yaml_meta(labels, owner, hash);
	pod->yaml_spec = lab_plan_yaml_spec(spec);
	/* Link first, so pod_delete() can undo a half-built pod. */
	pod->next = s->pods;
	s->pods = pod;
	s->n_pods++;
	pod->n_procs = pod->plan.n_cmds;
	pod->procs = zh_calloc(pod->n_procs, sizeof(*pod->procs));
	pod_write_info(s, pod);

	/* --runtime podman: podman makes the namespaces and the CNI plugin the
	 * network (lab_podman.c); one container per pod */
	if (s->t.podman && pod->n_procs != 1) {
		zh_err("%s:%d: pod %s/%s: the podman runtime runs one container per pod, not %d",
		       file, line, ns, name, pod->n_procs);
		goto fail;
	}
	ret = s->t.podman ? 0 : lab_pod_ns_create(s->t.lab, ns, name, pod->plan.mounts,
						  pod->plan.n_mounts);
	if (ret)
		goto fail;
	ret = s->t.podman ? 0 : lab_net_pod_add(&s->t, s->t.nodes[node].name, ns, name, pod->ip);
	if (ret || (ret = lab_sc_pod_capture(s, pod)))	/* istio-init, before any process */
		goto fail;
	lab_pod_cgroup_path(cg, sizeof(cg), s->t.lab, s->t.nodes[node].name, ns, name);
	if (mkdir(cg, 0755) && errno != EEXIST) {
		zh_err("pod %s/%s: mkdir %s: %s", ns, name, cg, strerror(errno));
		goto fail;
	}
	if (lab_sc_planned(&pod->plan))
		lab_sc_bpf_pod_add(s, pod, cg);	/* --accel: before any of its processes */
	/* Invariant 6: with agents, publish the pod Pending with its IP first
	 * and hold its containers until every agent synced that generation. */
	if (s->t.mesh && !s->t.nft) {
		pod_publish(s, pod, "Pending", false);
		if (pod->published) {
			pod->isolate_gen = ss_generation(s->ss);
			pod->isolate_until = sup_now_ms() + ISOLATE_MS;
		}
	}
	for (int i = 0; i < pod->n_procs; i++) {
		struct sup_proc *p = &pod->procs[i];

		p->argv = pod->plan.cmds[i].argv;
		pod->plan.cmds[i].argv = NULL;	/* ownership moves to the proc */
		lab_fmt(p->name, sizeof(p->name), "%s", pod->plan.cmds[i].name);
		lab_fmt(p->log, sizeof(p->log), "%s/log", dir);
		lab_fmt(p->cgroup, sizeof(p->cgroup), "%s", cg);
		lab_pod_netns_path(p->netns, sizeof(p->netns), s->t.lab, ns, name);
		lab_pod_nsfile(p->uts, sizeof(p->uts), s->t.lab, ns, name, "uts");
		lab_pod_nsfile(p->mnt, sizeof(p->mnt), s->t.lab, ns, name, "mnt");
		if (s->t.podman) {
			/* `zerohop lab podman ... run` in the node's namespace
			 * (it enters it itself): the container is its child */
			char **cmd = p->argv;

			p->argv = lab_podman_pod_argv(&s->t, s->t.nodes[node].name, ns, name, pod->ip,
						      pod->addr, cg, pod->plan.mounts,
						      pod->plan.n_mounts, cmd);
			for (int k = 0; cmd[k]; k++)
				free(cmd[k]);
			free(cmd);
			lab_node_netns_path(p->netns, sizeof(p->netns), s->t.lab, s->t.nodes[node].name);
			p->uts[0] = p->mnt[0] = 0;
		}
		lab_sc_proc_fix(p);
		if (pod->isolate_gen) {
			p->next_ms = UINT64_MAX - 1;	/* held: isolate_check() starts it */
			continue;
		}
		ret = sup_proc_start(p, pod);
		if (ret) {
			zh_err("%s:%d: pod %s/%s: container %s: exec %s: %s", file, line, ns, name,
			       p->name, p->argv[0], strerror(-ret));
			p->next_ms = sup_now_ms() + BACKOFF_MIN_MS;
		}
	}
	zh_info("pod %s/%s created on %s%s", ns, name, s->t.nodes[node].name,
		pod->isolate_gen ? " (containers held until the agents synced it)" : "");
	pod_write_info(s, pod);
	return pod;
fail:
	lab_fmt(errbuf, sizeof(errbuf), "%s:%d: pod %s/%s: set-up failed (see supervisor.log)",
		file, line, ns, name);
	zh_err("%s", errbuf);
	failed_add(s, key, errbuf);
	pod_delete(s, pod);
	return NULL;
}

/* The end of every pod: its processes are gone (or given up on); remove
 * its cgroup, network, namespaces, run dir and address, and free it. */
static void pod_finish(struct sup *s, struct sup_pod *pod)
{
	char dir[LAB_PATH], cg[LAB_PATH];
	struct sup_pod **pp;

	lab_pod_cgroup_path(cg, sizeof(cg), s->t.lab, s->t.nodes[pod->node].name, pod->ns,
			    pod->name);
	/* Reap our direct children now; exit statuses of other pids are picked
	 * up by the SIGCHLD handler later. */
	for (int i = 0; i < pod->n_procs; i++)
		if (pod->procs[i].pid > 0)
			waitpid(pod->procs[i].pid, NULL, WNOHANG);
	if (pod->published)
		ss_del_pod(s->ss, pod->ns, pod->name);	/* invariant 1: processes gone */
	pod->published = false;
	if (s->t.podman) {	/* CNI DEL, netns, runc state; then conmon's cgroup */
		char ccg[LAB_PATH + 8];

		lab_podman_pod_rm(s->t.lab, s->t.nodes[pod->node].name, pod->ns, pod->name);
		lab_fmt(ccg, sizeof(ccg), "%s/conmon", cg);
		rmdir(ccg);
	}
	lab_sc_bpf_pod_del(s, pod, cg);	/* before the cgroup id goes */
	rmdir(cg);
	lab_net_pod_del(&s->t, s->t.nodes[pod->node].name, pod->ns, pod->name);
	lab_pod_ns_destroy(s->t.lab, pod->ns, pod->name);
	lab_pod_dir(dir, sizeof(dir), s->t.lab, pod->ns, pod->name);
	lab_rm_tree(dir);
	free_ip(s, pod->node, pod->ip);
	for (pp = &s->pods; *pp; pp = &(*pp)->next)
		if (*pp == pod) {
			*pp = pod->next;
			break;
		}
	s->n_pods--;
	if (pod->state == POD_TERMINATING)
		zh_info("pod %s/%s deleted (%llu ms after termination began)", pod->ns, pod->name,
			(unsigned long long)(sup_now_ms() - pod->term_start));
	else
		zh_info("pod %s/%s deleted", pod->ns, pod->name);
	pod_free(pod);
}

static void pod_no_restart(struct sup_pod *pod)
{
	pod->isolate_gen = 0;	/* held containers are never started */
	for (int i = 0; i < pod->n_procs; i++)
		pod->procs[i].next_ms = UINT64_MAX;
}

/* Immediate removal, for a pod whose set-up failed (nothing to drain):
 * unpublish (invariant 1), stop, finish. */
static void pod_delete(struct sup *s, struct sup_pod *pod)
{
	char cg[LAB_PATH];

	if (pod->published)
		ss_del_pod(s->ss, pod->ns, pod->name);
	pod->published = false;
	pod_no_restart(pod);
	lab_pod_cgroup_path(cg, sizeof(cg), s->t.lab, s->t.nodes[pod->node].name, pod->ns,
			    pod->name);
	sup_cgroup_stop(cg);
	pod_finish(s, pod);
}

/* Graceful removal (invariant 8): leave the endpoints now (re-published
 * with a deletionTimestamp, invariant 1), and let term_check() take
 * the pod through SYNC and DRAIN (RUNNING pods: they are endpoints) or
 * straight to STOP (a pod that never ran is no endpoint). Never blocks.
 * A pod already TERMINATING is left alone. */
void sup_pod_terminate(struct sup *s, struct sup_pod *pod)
{
	uint64_t now = sup_now_ms();
	bool endpoint = pod->state == POD_RUNNING;

	if (pod->state == POD_TERMINATING)
		return;
	if (pod->published)
		pod_publish(s, pod, endpoint ? "Running" : "Pending", true);
	pod_no_restart(pod);
	pod->state = POD_TERMINATING;
	pod->term_start = now;
	pod->term_gen = ss_generation(s->ss);
	pod->term = endpoint ? TERM_SYNC : TERM_DRAIN;
	pod->term_until = endpoint ? now + TERM_SYNC_MS : now;
	pod_write_info(s, pod);
	zh_info("pod %s/%s terminating (%s)", pod->ns, pod->name,
		endpoint ? "left the endpoints; drains once the agents applied it" : "was not running");
}

/* Advance one TERMINATING pod as far as it can go now (design note);
 * frees it at the end. */
static void term_step(struct sup *s, struct sup_pod *pod, uint64_t now)
{
	char cg[LAB_PATH], p[LAB_PATH + 16];

	lab_pod_cgroup_path(cg, sizeof(cg), s->t.lab, s->t.nodes[pod->node].name, pod->ns,
			    pod->name);
	switch (pod->term) {
	case TERM_SYNC:
		if (!agents_synced(s, pod->term_gen)) {
			if (now < pod->term_until)
				return;
			zh_warn("pod %s/%s: agents did not apply generation %llu within %d ms; draining anyway",
				pod->ns, pod->name, (unsigned long long)pod->term_gen, TERM_SYNC_MS);
		}
		pod->term = TERM_DRAIN;
		pod->term_until = now + pod->drain_ms;
		/* fall through */
	case TERM_DRAIN:
		if (now < pod->term_until)
			return;
		sup_cgroup_signal(cg, SIGTERM);
		pod->term = TERM_STOP;
		pod->term_until = now + STOP_GRACE_MS;
		/* fall through */
	case TERM_STOP:
		if (!sup_cgroup_populated(cg))
			break;
		if (now < pod->term_until)
			return;
		lab_fmt(p, sizeof(p), "%s/cgroup.kill", cg);
		if (lab_write_sys(p, "1"))	/* before 5.14: pid by pid */
			sup_cgroup_signal(cg, SIGKILL);
		pod->term = TERM_KILL;
		pod->term_until = now + KILL_WAIT_MS;
		return;
	case TERM_KILL:
		if (sup_cgroup_populated(cg)) {
			if (now < pod->term_until)
				return;
			zh_warn("pod %s/%s: processes left after cgroup.kill; removing the pod anyway",
				pod->ns, pod->name);
		}
		break;
	}
	pod_finish(s, pod);
}

static void term_check(struct sup *s)
{
	uint64_t now = sup_now_ms();
	struct sup_pod *pod, *next;

	for (pod = s->pods; pod; pod = next) {
		next = pod->next;
		if (pod->state == POD_TERMINATING)
			term_step(s, pod, now);
	}
}

/* ---- readiness ----------------------------------------------------------------- */

/* Is there a socket in /proc/PID/net/FILE with local port `port` (and, for
 * TCP, state LISTEN)? */
static bool proc_net_has(pid_t pid, const char *file, uint16_t port, bool listen)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	lab_fmt(path, sizeof(path), "/proc/%d/net/%s", (int)pid, file);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char local[64];
		unsigned int st, p;
		char *colon;

		if (sscanf(line, " %*d: %63s %*s %x", local, &st) != 2)
			continue;
		colon = strrchr(local, ':');
		if (!colon || sscanf(colon + 1, "%x", &p) != 1)
			continue;
		if (p == port && (!listen || st == 0x0A))
			found = true;
	}
	fclose(f);
	return found;
}

static bool pod_ports_ready(struct sup *s, struct sup_pod *pod)
{
	char cg[LAB_PATH];
	pid_t pid = 0;

	for (int i = 0; i < pod->n_procs && !pid; i++)
		pid = pod->procs[i].pid;
	if (s->t.podman) {	/* the container's process, not podman's */
		lab_pod_cgroup_path(cg, sizeof(cg), s->t.lab, s->t.nodes[pod->node].name, pod->ns,
				    pod->name);
		pid = lab_podman_pod_pid(cg);
	}
	if (!pid)
		return false;
	for (int i = 0; i < pod->plan.n_ports; i++) {
		const struct lab_port *pt = &pod->plan.ports[i];
		bool tcp = pt->proto == MD_PROTO_TCP;

		if (pt->proto == MD_PROTO_SCTP)
			continue;
		if (!proc_net_has(pid, tcp ? "tcp" : "udp", pt->port, tcp) &&
		    !proc_net_has(pid, tcp ? "tcp6" : "udp6", pt->port, tcp))
			return false;
	}
	return true;
}

static void ready_check(struct sup *s)
{
	uint64_t now = sup_now_ms();

	for (struct sup_pod *pod = s->pods; pod; pod = pod->next) {
		bool all_execd = true, any_exited = false;

		if (pod->state != POD_STARTING)
			continue;
		for (int i = 0; i < pod->n_procs; i++) {
			all_execd &= pod->procs[i].ever_execd;
			any_exited |= pod->procs[i].exited_once;
		}
		if (!all_execd)
			continue;
		/* Not Running (an endpoint) on a node whose agent does not
		 * serve it: its policy and Services would not be in force. */
		if (!sup_node_serving(s, pod->node))
			continue;
		if (!pod_ports_ready(s, pod)) {
			if (!any_exited && now - pod->created_ms < READY_MS)
				continue;
			zh_warn("pod %s/%s: declared ports not listening after %llu ms; marking Running",
				pod->ns, pod->name, (unsigned long long)(now - pod->created_ms));
		}
		pod->state = POD_RUNNING;
		pod_publish(s, pod, "Running", false);
		pod_write_info(s, pod);
		zh_info("pod %s/%s running (%llu ms)", pod->ns, pod->name,
			(unsigned long long)(now - pod->created_ms));
	}
}

/* ---- reconcile ------------------------------------------------------------------ */

/* ---- agents ---------------------------------------------------------------------- */

static void agents_start(struct sup *s)
{
	char cg[LAB_PATH], pin[LAB_PATH], sd[LAB_PATH];

	for (int i = 0; i < s->t.n_nodes; i++) {
		struct sup_proc *p = &s->agents[i];
		const char *node = s->t.nodes[i].name;
		char **v = zh_calloc(34, sizeof(char *));
		int n = 0;

		lab_node_cgroup_path(cg, sizeof(cg), s->t.lab, node);
		zh_pin_dir(pin, sizeof(pin), s->t.lab, node);
		if (lab_etcd_node_spec(s->t.lab, sd, sizeof(sd)))	/* agents over the fabric */
			zh_state_dir(sd, sizeof(sd), s->t.lab);
		v[n++] = zh_strdup(s->t.zerohop);
		v[n++] = zh_strdup("agent");
		v[n++] = zh_strdup("--node");
		v[n++] = zh_strdup(node);
		v[n++] = zh_strdup("--lab");
		v[n++] = zh_strdup(s->t.lab);
		v[n++] = zh_strdup("--cgroup");
		v[n++] = zh_strdup(cg);
		v[n++] = zh_strdup("--state");
		v[n++] = zh_strdup(sd);
		n = lab_etcd_agent_args(s->t.lab, v, n);	/* --state etcd-tls */
		v[n++] = zh_strdup("--pin-dir");
		v[n++] = zh_strdup(pin);
		lab_fmt(p->health, sizeof(p->health), "%s/%s/nodes/%s/agent.health", ZH_RUN_ROOT,
			s->t.lab, node);
		unlink(p->health);	/* a file of an earlier run says nothing of this one */
		v[n++] = zh_strdup("--health-file");
		v[n++] = zh_strdup(p->health);
		{
			char ip[16], ma[32];

			lab_fmt(ma, sizeof(ma), "%s:%d", lab_ip4_str(s->t.nodes[i].ip, ip),
				AGENT_METRICS_PORT);
			v[n++] = zh_strdup("--metrics-addr");
			v[n++] = zh_strdup(ma);
		}
		if (s->t.accel >= 0) {
			v[n++] = zh_strdup("--accel");
			v[n++] = zh_strdup(s->t.accel ? "on" : "off");
		}
		if (s->t.accel_skip_ports[0]) {
			v[n++] = zh_strdup("--accel-skip-ports");
			v[n++] = zh_strdup(s->t.accel_skip_ports);
		}
		if (s->t.nft) {
			v[n++] = zh_strdup("--mode");
			v[n++] = zh_strdup("nft");
		} else {
			/* The node proxy's cgroup (proxies_start), made here so
			 * the agent can attach the same-node short-circuit to it
			 * before the proxy starts (docs/accel.md "Node proxy
			 * legs"); the lab made it, so attaching there is safe. */
			char pcg[LAB_PATH], lcg[LAB_PATH];

			lab_lab_cgroup_path(lcg, sizeof(lcg), s->t.lab);
			lab_fmt(pcg, sizeof(pcg), "%s/system/proxy-%s", lcg, node);
			if (mkdir(pcg, 0755) && errno != EEXIST)
				zh_warn("mkdir %s: %s", pcg, strerror(errno));
			v[n++] = zh_strdup("--proxy-cgroup");
			v[n++] = zh_strdup(pcg);
		}
		p->argv = v;
		lab_fmt(p->name, sizeof(p->name), "agent");
		lab_fmt(p->log, sizeof(p->log), "%s/%s/nodes/%s/agent.log", ZH_RUN_ROOT, s->t.lab,
			node);
		lab_fmt(p->cgroup, sizeof(p->cgroup), "%s/../system/agent-%s", cg, node);
		lab_node_netns_path(p->netns, sizeof(p->netns), s->t.lab, node);
		if (sup_proc_start(p, NULL))
			p->next_ms = sup_now_ms() + BACKOFF_MIN_MS;
	}
}

/* What the agent of this run published (health.h), or -ENOENT/-ESRCH when
 * it published nothing yet or the file is an earlier process's. */
static int agent_health(const struct sup_proc *p, struct zh_health *h)
{
	int ret;

	if (!p->pid)
		return -ESRCH;
	ret = zh_health_read(p->health, h);
	if (ret)
		return ret;
	return h->pid == (int)p->pid ? 0 : -ESRCH;
}

/* ---- node proxies (invariant 7) ------------------------------------------------ */

static void proxies_start(struct sup *s)
{
	char cg[LAB_PATH], ip[16], stats[32];

	lab_lab_cgroup_path(cg, sizeof(cg), s->t.lab);
	for (int i = 0; i < s->t.n_nodes; i++) {
		struct sup_proc *p = &s->proxies[i];
		const char *node = s->t.nodes[i].name;
		char **v = zh_calloc(10, sizeof(char *));
		int n = 0;

		v[n++] = zh_strdup(s->t.zerohop);
		v[n++] = zh_strdup("proxy");
		v[n++] = zh_strdup("--node");
		v[n++] = zh_strdup(node);
		v[n++] = zh_strdup("--lab");
		v[n++] = zh_strdup(s->t.lab);
		lab_fmt(stats, sizeof(stats), "%s:%d", lab_ip4_str(s->t.nodes[i].ip, ip),
			PROXY_STATS_PORT);
		v[n++] = zh_strdup("--stats-addr");
		v[n++] = zh_strdup(stats);
		p->argv = v;
		lab_fmt(p->name, sizeof(p->name), "proxy");
		lab_fmt(p->log, sizeof(p->log), "%s/%s/nodes/%s/proxy.log", ZH_RUN_ROOT, s->t.lab,
			node);
		lab_fmt(p->cgroup, sizeof(p->cgroup), "%s/system/proxy-%s", cg, node);
		if (mkdir(p->cgroup, 0755) && errno != EEXIST)
			zh_warn("mkdir %s: %s", p->cgroup, strerror(errno));
		lab_node_netns_path(p->netns, sizeof(p->netns), s->t.lab, node);
		if (sup_proc_start(p, NULL))
			p->next_ms = sup_now_ms() + BACKOFF_MIN_MS;
	}
}

/* ---- node daemons' readiness and state (lab status) ----------------------- */

/* Look again at every running node daemon not known ready yet: an agent is
 * ready once it published a synced generation, a proxy once it listens on
 * its capture port. A degraded agent (its last sync failed) stays ready:
 * the kernel serves its last good generation; its error is shown. Returns
 * true when some daemon's state changed. */
static bool daemons_refresh(struct sup *s)
{
	bool changed = false;

	for (int i = 0; i < s->t.n_nodes; i++) {
		struct sup_proc *a = &s->agents[i], *x = &s->proxies[i];
		struct zh_health h;

		if (a->argv && a->pid && agent_health(a, &h) == 0) {
			bool ready = h.generation > 0;
			const char *err = strcmp(h.state, "ready") ? h.error : "";

			if (ready != a->ready || (ready && strcmp(err, a->last_error))) {
				a->ready = ready;
				lab_fmt(a->last_error, sizeof(a->last_error), "%s", err);
				changed = true;
			}
		}
		if (x->argv && x->pid && !x->ready &&
		    proc_net_has(x->pid, "tcp", ZH_L7CAP_PORT, true)) {
			x->ready = true;
			x->last_error[0] = '\0';
			changed = true;
		}
	}
	return changed;
}

/* kubectl's words for a container: Running once ready, Starting before,
 * CrashLoopBackOff while waiting to be restarted after an exit. */
static const char *daemon_state(const struct sup_proc *p)
{
	if (!p->argv)
		return "None";
	if (p->pid)
		return p->ready ? "Running" : "Starting";
	return p->exited_once || p->exec_errno ? "CrashLoopBackOff" : "Waiting";
}

bool sup_node_serving(const struct sup *s, int i)
{
	return !s->t.mesh || s->agents[i].ready;
}

static void write_node_info(struct sup *s)
{
	char path[LAB_PATH], buf[1024];

	for (int i = 0; i < s->t.n_nodes; i++) {
		const struct sup_proc *a = &s->agents[i], *x = &s->proxies[i];

		lab_fmt(path, sizeof(path), "%s/%s/nodes/%s/info", ZH_RUN_ROOT, s->t.lab,
			s->t.nodes[i].name);
		/* lab_node_info_read() parses this */
		lab_fmt(buf, sizeof(buf),
			"agent_pid %d\nagent_restarts %d\nagent_state %s\nagent_log %s\nagent_error %s\n"
			"proxy_pid %d\nproxy_restarts %d\nproxy_state %s\nproxy_log %s\nproxy_error %s\n",
			(int)a->pid, a->restarts, daemon_state(a), a->argv ? a->log : "", a->last_error,
			(int)x->pid, x->restarts, daemon_state(x), x->argv ? x->log : "", x->last_error);
		lab_write_str(path, buf);
	}
}

static void reap(struct sup *s);

/* Start-up (lab up): wait until every daemon of ps[] is ready. A daemon
 * that exits first, or is not ready within DAEMON_READY_MS, fails the wait
 * with its own error line and log in msg: 0 all ready, -1 failed. */
static int daemons_wait(struct sup *s, struct sup_proc *ps, const char *what, char *msg,
			size_t len)
{
	uint64_t start = sup_now_ms();

	for (;;) {
		bool all = true;

		reap(s);
		daemons_refresh(s);
		for (int i = 0; i < s->t.n_nodes; i++) {
			struct sup_proc *p = &ps[i];

			if (!p->argv || p->ready)
				continue;
			all = false;
			if (p->exited_once || p->exec_errno) {
				lab_fmt(msg, len, "node %s: %s cannot start: %s (log %s)",
					s->t.nodes[i].name, what,
					p->last_error[0] ? p->last_error : "exited", p->log);
				return -1;
			}
			if (sup_now_ms() - start > DAEMON_READY_MS) {
				lab_fmt(msg, len, "node %s: %s not ready after %d s%s%s (log %s)",
					s->t.nodes[i].name, what, DAEMON_READY_MS / 1000,
					p->last_error[0] ? ": " : "", p->last_error, p->log);
				return -1;
			}
		}
		if (all)
			return 0;
		usleep(20000);
	}
}

/* ---- events ------------------------------------------------------------------------ */

static void reap(struct sup *s)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		char who[256];

		for (struct sup_pod *pod = s->pods; pod; pod = pod->next)
			for (int i = 0; i < pod->n_procs; i++) {
				if (pod->procs[i].pid != pid)
					continue;
				lab_fmt(who, sizeof(who), "pod %s/%s", pod->ns, pod->name);
				sup_proc_exited(&pod->procs[i], status, who);
				if (pod->state == POD_TERMINATING)
					pod->procs[i].next_ms = UINT64_MAX;	/* invariant 8 */
				pod_write_info(s, pod);
			}
		for (int i = 0; i < s->t.n_nodes; i++)
			if (s->agents[i].pid == pid || s->proxies[i].pid == pid) {
				lab_fmt(who, sizeof(who), "node %s", s->t.nodes[i].name);
				sup_proc_exited(s->agents[i].pid == pid ? &s->agents[i] : &s->proxies[i],
					    status, who);
				write_node_info(s);
			}
	}
}

/* Has every running agent published (health.h; A9 in agent.c) a
 * generation >= gen? An agent that is down does not hold pods back:
 * ISOLATE_MS and TERM_SYNC_MS bound the rest. */
static bool agents_synced(struct sup *s, uint64_t gen)
{
	struct zh_health h;

	for (int i = 0; i < s->t.n_nodes; i++)
		if (s->agents[i].argv && agent_health(&s->agents[i], &h) == 0 &&
		    h.generation < gen)
			return false;
	return true;
}

/* Release held pods (invariant 6): start their containers once the agents
 * have the pod (its policy is in force), or after ISOLATE_MS with a warning. */
static void isolate_check(struct sup *s)
{
	uint64_t now = sup_now_ms();

	for (struct sup_pod *pod = s->pods; pod; pod = pod->next) {
		if (!pod->isolate_gen)
			continue;
		if (!agents_synced(s, pod->isolate_gen)) {
			if (now < pod->isolate_until)
				continue;
			zh_warn("pod %s/%s: agents did not sync generation %llu within %d ms; starting it anyway",
				pod->ns, pod->name, (unsigned long long)pod->isolate_gen, ISOLATE_MS);
		}
		pod->isolate_gen = 0;
		pod->created_ms = now;	/* READY_MS counts from the start */
		for (int i = 0; i < pod->n_procs; i++) {
			struct sup_proc *p = &pod->procs[i];
			int ret = sup_proc_start(p, pod);

			if (ret) {
				zh_err("pod %s/%s: container %s: exec %s: %s", pod->ns, pod->name,
				       p->name, p->argv[0], strerror(-ret));
				p->next_ms = now + BACKOFF_MIN_MS;
			}
		}
		pod_write_info(s, pod);
	}
}

/* Start processes whose backoff expired; returns ms until the next one. */
static int restart_due(struct sup *s)
{
	uint64_t now = sup_now_ms(), next = UINT64_MAX;

	for (struct sup_pod *pod = s->pods; pod; pod = pod->next)
		for (int i = 0; i < pod->n_procs; i++) {
			struct sup_proc *p = &pod->procs[i];

			if (p->pid || p->next_ms == UINT64_MAX)
				continue;
			if (p->next_ms <= now) {
				sup_proc_start(p, pod);
				pod_write_info(s, pod);
			} else if (p->next_ms < next) {
				next = p->next_ms;
			}
		}
	for (int i = 0; i < 2 * s->t.n_nodes; i++) {
		struct sup_proc *p = i < s->t.n_nodes ? &s->agents[i] :
					 &s->proxies[i - s->t.n_nodes];

		if (!p->argv || p->pid)
			continue;
		if (p->next_ms <= now) {
			sup_proc_start(p, NULL);
			write_node_info(s);
		} else if (p->next_ms < next) {
			next = p->next_ms;
		}
	}
	if (next == UINT64_MAX)
		return 1000;
	return next - now > 1000 ? 1000 : (int)(next - now);
}

/* Initial start: every pod RUNNING, or a pod whose command cannot exec. */
static int initial_status(struct sup *s, char *msg, size_t len)
{
	const struct md_state *w = s->want;
	int want = 0, have = 0;

	for (struct sup_pod *p = s->pods; p; p = p->next) {
		for (int i = 0; i < p->n_procs; i++)
			if (p->procs[i].exec_errno && !p->procs[i].ever_execd) {
				lab_fmt(msg, len, "pod %s/%s: container %s: exec %s: %s", p->ns,
					p->name, p->procs[i].name, p->procs[i].argv[0],
					strerror(p->procs[i].exec_errno));
				return -1;
			}
		/* --keep-going: a pod held on a node whose agent does not
		 * serve stays Pending, and does not hold `lab up` */
		if (p->state == POD_STARTING && !(s->t.keep_going && !sup_node_serving(s, p->node)))
			return 0;
		have += p->state == POD_RUNNING || p->state == POD_STARTING;
	}
	if (s->n_failed) {
		lab_fmt(msg, len, "%s", s->last_err);
		return -1;
	}
	/* Every wanted pod exists (a Deployment may still be creating some). */
	for (int i = 0; w && i < w->n_pods; i++)
		want += !w->pods[i].has_status;
	for (int i = 0; w && i < w->n_deployments; i++)
		want += w->deployments[i].replicas;
	return have >= want ? 1 : 0;
}

/* Daemon set-up: signals through a signalfd, our own cgroup under
 * system/ (invariant 3), the pid file. Returns the signalfd. */
static int sup_init_self(const struct lab_topo *t)
{
	char cg[LAB_PATH], path[LAB_PATH + 32], pid[16];
	sigset_t mask;
	int ret;

	zh_log_init("supervisor", ZH_INFO);
	srandom(getpid() ^ (unsigned)time(NULL));
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);

	lab_lab_cgroup_path(cg, sizeof(cg), t->lab);
	lab_fmt(path, sizeof(path), "%s/system/supervisor", cg);
	mkdir(path, 0755);
	strcat(path, "/cgroup.procs");
	lab_fmt(pid, sizeof(pid), "%d", (int)getpid());
	ret = lab_write_sys(path, pid);
	if (ret)
		zh_warn("join %s: %s", path, strerror(-ret));
	lab_fmt(path, sizeof(path), "%s/%s/supervisor.pid", ZH_RUN_ROOT, t->lab);
	lab_write_str(path, pid);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Poll timeout: restarts due, pods being readied, debounce pending. */
static int sup_timeout(struct sup *s, int restart_ms, uint64_t dirty_at)
{
	int timeout = restart_ms;

	uint64_t now = sup_now_ms();

	for (struct sup_pod *p = s->pods; p; p = p->next) {
		int t = timeout;

		if (p->state == POD_STARTING)
			t = p->isolate_gen ? 2 : 10;
		else if (p->state == POD_TERMINATING && p->term == TERM_DRAIN)
			t = p->term_until > now ? (int)(p->term_until - now) : 0;
		else if (p->state == POD_TERMINATING)
			t = p->term == TERM_SYNC ? 2 : 10;
		if (t < timeout)
			timeout = t;
	}
	if (dirty_at) {
		int d = dirty_at > now ? (int)(dirty_at - now) : 0;

		if (d < timeout)
			timeout = d;
	}
	return timeout;
}

void lab_supervisor(const struct lab_topo *t, int ready_fd)
{
	struct sup *s = zh_calloc(1, sizeof(*s));
	char sd[LAB_PATH], msg[1024];
	uint64_t start = sup_now_ms(), dirty_at = 0;
	struct pollfd pfd[2];
	int ret;

	s->t = *t;
	pfd[0].fd = sup_init_self(t);
	pfd[0].events = POLLIN;
	zh_state_dir(sd, sizeof(sd), t->lab);
	ret = ss_open(sd, &s->ss);
	if (ret) {
		lab_fmt(msg, sizeof(msg), "state source %s: %s\n", sd, strerror(-ret));
		goto fatal;
	}
	/* Agents first: pods are under the datapath from their first connect.
	 * An agent or proxy that cannot start fails `lab up` with its own
	 * error line (invariant 9), unless --keep-going. */
	if (t->mesh) {
		agents_start(s);
		write_node_info(s);
		if (daemons_wait(s, s->agents, "agent", s->degraded, sizeof(s->degraded))) {
			write_node_info(s);
			if (!t->keep_going) {
				lab_fmt(msg, sizeof(msg), "%s\n", s->degraded);
				goto fatal;
			}
			zh_err("%s; going on (--keep-going)", s->degraded);
		}
		/* Then the proxies (they share the capture maps the agents
		 * pinned), listening before any pod starts (invariant 7). */
		if (!t->nft) {
			char pmsg[sizeof(s->degraded)];

			proxies_start(s);
			write_node_info(s);
			if (daemons_wait(s, s->proxies, "node proxy", pmsg, sizeof(pmsg))) {
				write_node_info(s);
				if (!t->keep_going) {
					lab_fmt(msg, sizeof(msg), "%s\n", pmsg);
					goto fatal;
				}
				zh_err("%s; going on (--keep-going)", pmsg);
				if (!s->degraded[0])
					lab_fmt(s->degraded, sizeof(s->degraded), "%s", pmsg);
			}
		}
	}
	write_node_info(s);
	sup_load_want(s);
	if (!s->want) {
		lab_fmt(msg, sizeof(msg), "cannot load the desired state (see supervisor.log)\n");
		goto fatal;
	}
	pfd[1].fd = ss_watch_fd(s->ss);
	pfd[1].events = POLLIN;
	for (;;) {
		struct signalfd_siginfo si;
		int restart_ms;

		reap(s);
		if (dirty_at && sup_now_ms() >= dirty_at) {
			dirty_at = 0;
			sup_load_want(s);
			lab_sc_sync(s);
		}
		/* Before reconcile: a pod finished here frees its name for a
		 * re-created Pod in the same round (invariant 8). */
		term_check(s);
		sup_reconcile(s);
		if (t->mesh && sup_now_ms() - s->refresh_ms >= 100) {
			s->refresh_ms = sup_now_ms();
			if (daemons_refresh(s))
				write_node_info(s);
		}
		isolate_check(s);
		lab_sc_tick(s);
		ready_check(s);
		restart_ms = restart_due(s);
		if (!s->initial_done) {
			int st = initial_status(s, msg, sizeof(msg) - 1);

			if (st < 0) {
				strcat(msg, "\n");
				goto fatal;
			}
			if (st == 0 && sup_now_ms() - start > INITIAL_TIMEOUT_MS) {
				lab_fmt(msg, sizeof(msg), "pods not running after %d s\n",
					INITIAL_TIMEOUT_MS / 1000);
				goto fatal;
			}
			if (st > 0) {
				s->initial_done = true;
				/* A lab is up only if `lab up` said so: when it died
				 * (killed), leave the pieces to the next up or down. */
				char ok[sizeof(s->degraded) + 16];

				lab_fmt(ok, sizeof(ok), "ok%s%s\n", s->degraded[0] ? " degraded: " : "",
					s->degraded);
				if (write(ready_fd, ok, strlen(ok)) != (ssize_t)strlen(ok)) {
					zh_err("lab up went away before the lab was ready; exiting (lab up or lab down cleans up)");
					exit(1);
				}
				close(ready_fd);	/* lab up writes RUNDIR/ready */
				zh_info("lab %s ready: %d pods in %llu ms", t->lab, s->n_pods,
					(unsigned long long)(sup_now_ms() - start));
			}
		}
		if (poll(pfd, 2, sup_timeout(s, restart_ms, dirty_at)) < 0 && errno != EINTR)
			continue;
		if (pfd[1].revents & POLLIN) {
			ss_watch_drain(s->ss);
			if (!dirty_at)
				dirty_at = sup_now_ms() + DEBOUNCE_MS;
		}
		while (read(pfd[0].fd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
				zh_info("signal %d: exiting (pods keep running until lab down)",
					si.ssi_signo);
				exit(0);
			}
		}
	}
fatal:
	zh_err("%s", msg);
	if (!s->initial_done && write(ready_fd, msg, strlen(msg)) < 0)
		zh_warn("lab up went away");
	exit(1);
}
