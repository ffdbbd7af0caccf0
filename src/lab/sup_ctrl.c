/* sup_ctrl.c — the lab supervisor's controllers (sup_int.h): the desired
 * state is the applied manifests (sup_load_want); sup_reconcile() turns it
 * into pods: a bare Pod whose spec or labels changed is replaced, a
 * Deployment is scaled and rolled one pod at a time (lab_sup.c invariant
 * 2: maxSurge 1, maxUnavailable 0), and pods nobody wants any more are
 * terminated gracefully.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "sup_int.h"

static struct sup_pod *find_pod(struct sup *s, const char *ns, const char *name)
{
	for (struct sup_pod *p = s->pods; p; p = p->next)
		if (!strcmp(p->ns, ns) && !strcmp(p->name, name))
			return p;
	return NULL;
}

static void deploy_pod_name(const char *deploy, const char *hash, char *buf, size_t len)
{
	static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
	char sfx[6];

	for (int i = 0; i < 5; i++)
		sfx[i] = alnum[random() % (sizeof(alnum) - 1)];
	sfx[5] = 0;
	lab_fmt(buf, len, "%s-%s-%s", deploy, hash, sfx);
}

/* Pick a pod of deployment d to terminate, never one already TERMINATING:
 * not-RUNNING first, then (want_new: newest, else oldest) among those
 * matching want_new. */
static struct sup_pod *deploy_victim(struct sup *s, const struct md_deployment *d,
				     const char *hash, bool want_new)
{
	struct sup_pod *best = NULL;

	for (struct sup_pod *p = s->pods; p; p = p->next) {
		if (strcmp(p->ns, d->meta.ns) || strcmp(p->owner, d->meta.name) ||
		    p->state == POD_TERMINATING)
			continue;
		if (!strcmp(p->hash, hash) != want_new)
			continue;
		if (!best) {
			best = p;
			continue;
		}
		if ((p->state == POD_RUNNING) != (best->state == POD_RUNNING)) {
			if (p->state != POD_RUNNING)
				best = p;
			continue;
		}
		if (want_new ? p->seq > best->seq : p->seq < best->seq)
			best = p;
	}
	return best;
}

static void reconcile_deployment(struct sup *s, const struct md_deployment *d)
{
	char hash[16], name[256], key[300];
	int n_new = 0, n_old = 0, new_ready = 0, old_ready = 0, r = d->replicas;

	lab_plan_hash(&d->template, &d->template_labels, hash);
	lab_fmt(key, sizeof(key), "%s/%s/%s", d->meta.ns, d->meta.name, hash);
	for (struct sup_pod *p = s->pods; p; p = p->next) {
		/* Invariant 2: a TERMINATING pod counts for nothing. */
		if (strcmp(p->ns, d->meta.ns) || strcmp(p->owner, d->meta.name) ||
		    p->state == POD_TERMINATING)
			continue;
		if (!strcmp(p->hash, hash)) {
			n_new++;
			new_ready += p->state == POD_RUNNING;
		} else {
			n_old++;
			old_ready += p->state == POD_RUNNING;
		}
	}
	/* Too many pods of the current template: remove the surplus. */
	while (n_new > r) {
		struct sup_pod *v = deploy_victim(s, d, hash, true);

		new_ready -= v->state == POD_RUNNING;
		sup_pod_terminate(s, v);
		n_new--;
	}
	/* Old pods that are not available can go at any time. */
	while (n_old > 0) {
		struct sup_pod *v = deploy_victim(s, d, hash, false);

		if (v->state == POD_RUNNING)
			break;
		sup_pod_terminate(s, v);
		n_old--;
	}
	/* Surge (invariant 2): with old pods left, one new pod at a time;
	 * without, create all missing pods at once. */
	while (n_new < r && (n_old == 0 || n_new + n_old < r + 1) && !sup_failed_has(s, key)) {
		struct md_labels labels = d->template_labels;

		do
			deploy_pod_name(d->meta.name, hash, name, sizeof(name));
		while (find_pod(s, d->meta.ns, name));
		if (!sup_pod_create(s, d->meta.ns, name, d->meta.name, hash, &labels,
				&d->template_annotations, &d->template, d->meta.file, d->meta.line))
			break;
		n_new++;
		if (n_old)
			break;
	}
	/* Remove old RUNNING pods while more than r pods stay available. */
	while (n_old > 0 && new_ready + old_ready > r) {
		struct sup_pod *v = deploy_victim(s, d, hash, false);

		old_ready -= v->state == POD_RUNNING;
		sup_pod_terminate(s, v);
		n_old--;
	}
}

void sup_reconcile(struct sup *s)
{
	const struct md_state *w = s->want;
	struct sup_pod *p, *next;

	if (!w)
		return;
	/* Pods that lost their manifest, their Deployment, or changed spec. */
	for (p = s->pods; p; p = next) {
		next = p->next;
		if (p->state == POD_TERMINATING)
			continue;
		if (p->owner[0]) {
			bool keep = false;

			for (int i = 0; i < w->n_deployments && !keep; i++)
				keep = !strcmp(w->deployments[i].meta.ns, p->ns) &&
				       !strcmp(w->deployments[i].meta.name, p->owner);
			if (!keep)
				sup_pod_terminate(s, p);
		} else {
			const struct md_pod *mp = md_find_pod(w, p->ns, p->name);
			char hash[16];

			if (mp && !mp->has_status)
				lab_plan_hash(&mp->spec, &mp->meta.labels, hash);
			if (!mp || mp->has_status || strcmp(hash, p->hash))
				sup_pod_terminate(s, p);
		}
	}
	/* System pods (kube-system: cluster DNS) first, and workloads only once
	 * they run, as a cluster's DNS is up before its applications: nginx
	 * resolves its upstreams when it starts. ready_check() bounds the wait. */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < w->n_pods; i++) {
			const struct md_pod *mp = &w->pods[i];
			char hash[16], key[300];

			if (mp->has_status || (pass == 0) != !strcmp(mp->meta.ns, "kube-system") ||
			    find_pod(s, mp->meta.ns, mp->meta.name))
				continue;
			lab_plan_hash(&mp->spec, &mp->meta.labels, hash);
			lab_fmt(key, sizeof(key), "%s/%s/%s", mp->meta.ns, mp->meta.name, hash);
			if (sup_failed_has(s, key))
				continue;
			sup_pod_create(s, mp->meta.ns, mp->meta.name, "", hash, &mp->meta.labels,
				   &mp->meta.annotations, &mp->spec, mp->meta.file, mp->meta.line);
		}
		if (pass == 0)
			for (p = s->pods; p; p = p->next)
				if (!strcmp(p->ns, "kube-system") && p->state == POD_STARTING &&
				    sup_node_serving(s, p->node))	/* else it waits for its agent */
					return;
	}
	for (int i = 0; i < w->n_deployments; i++)
		reconcile_deployment(s, &w->deployments[i]);
}

/* Load the desired state: the applied manifests only (runtime pods are ours). */
void sup_load_want(struct sup *s)
{
	char ebuf[1024];
	struct md_state *st = NULL;
	struct md_err err = { 0 };
	int ret;

	ret = ss_load_desired(s->ss, &st, &err);
	if (ret) {
		zh_err("desired state not loaded, keeping the previous one: %s",
		       md_err_str(&err, ebuf, sizeof(ebuf)));
		return;
	}
	md_state_free(s->want);
	s->want = st;
}

