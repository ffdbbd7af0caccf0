/* netpol_load — load the NetworkPolicy datapath of one lab node from the
 * lab's state source (stand-in for the node agent's policy sync until the
 * agent calls pol_sync(); see docs/policy.md).
 *
 *   netpol_load --lab LAB --node NODE            sync once, leave it attached
 *   netpol_load --lab LAB --node NODE --watch S  sync on every state change for S seconds
 *   netpol_load --lab LAB --node NODE --drops    print drop counters (get policy-drops)
 *   netpol_load --lab LAB --node NODE --dump     print the compiled tables
 *   netpol_load --lab LAB --node NODE --down     detach and unpin
 *   ... --extra FILE   add FILE's manifests to the state for this sync only
 *                      (benchmarks: 50,000 policies without 50,000 state files)
 *
 * Run it inside the node's network namespace (zerohop lab exec --node NODE --)
 * so that the node's own addresses get the ingress exemption.
 * Exit status: 0 ok, 1 error (message on stderr), 2 usage.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/accel.h"
#include "zerohop/lab.h"
#include "zerohop/model.h"
#include "zerohop/paths.h"
#include "zerohop/policy.h"
#include "zerohop/state.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The state source's objects plus extra (state.h layout: manifests/, pods/). */
static int load_with_extra(const char *sdir, const char *extra, struct md_state **out,
			   struct md_err *err)
{
	struct md_state *st = md_state_new();
	char d[600];
	int ret;

	snprintf(d, sizeof(d), "%s/manifests", sdir);
	ret = md_state_add_dir(st, d, err);
	snprintf(d, sizeof(d), "%s/pods", sdir);
	if (!ret)
		ret = md_state_add_dir(st, d, err);
	if (!ret)
		ret = md_state_add_file(st, extra, err);
	if (!ret)
		ret = md_state_finish(st, err);
	if (ret) {
		md_state_free(st);
		return ret;
	}
	*out = st;
	return 0;
}

static const char *extra_file, *state_dir, *pin_dir, *cg_dir;

/* What the agent does after each pol_sync: tell the same-node accelerator
 * (when it runs on this node) the new generation, so that short-circuited
 * sockets go back through the stack, where the policy judges them. */
static void tell_accel(uint32_t gen)
{
	char path[700];
	struct ag_accel *a = NULL;

	snprintf(path, sizeof(path), "%s/accel_cfg", pin_dir);
	if (access(path, F_OK))
		return;
	if (ag_accel_open(cg_dir, pin_dir, 1, &a) == 0) {
		if (ag_accel_set_policy_gen(a, gen) == 0)
			printf("accelerator told generation %u\n", gen);
		ag_accel_close(a, 0);
	}
}

static int sync_once(struct ss *s, struct pol *p, const char *node)
{
	struct md_state *st = NULL;
	struct md_err err;
	char buf[900];
	double t0 = now_ms();
	int ret;

	ret = extra_file ? load_with_extra(state_dir, extra_file, &st, &err) : ss_load(s, &st, &err);
	if (ret) {
		fprintf(stderr, "netpol_load: state: %s\n", md_err_str(&err, buf, sizeof(buf)));
		return ret;
	}
	ret = pol_sync(p, st, node, &err);
	if (ret)
		fprintf(stderr, "netpol_load: sync: %s\n", md_err_str(&err, buf, sizeof(buf)));
	else
		printf("synced generation %u policies %d in %.1f ms at %.3f\n", pol_generation(p),
		       st->n_netpols, now_ms() - t0, now_ms());
	if (!ret)
		tell_accel(pol_generation(p));
	fflush(stdout);
	md_state_free(st);
	return ret;
}

int main(int argc, char **argv)
{
	const char *lab = NULL, *node = NULL, *mode = "sync";
	char cg[512], pin[512], sdir[512];
	struct pol *p = NULL;
	struct ss *s = NULL;
	int watch = 0, ret = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lab") && i + 1 < argc)
			lab = argv[++i];
		else if (!strcmp(argv[i], "--node") && i + 1 < argc)
			node = argv[++i];
		else if (!strcmp(argv[i], "--extra") && i + 1 < argc)
			extra_file = argv[++i];
		else if (!strcmp(argv[i], "--watch") && i + 1 < argc) {
			mode = "watch";
			watch = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--drops") || !strcmp(argv[i], "--down") ||
			   !strcmp(argv[i], "--dump"))
			mode = argv[i] + 2;
		else {
			fprintf(stderr, "usage: netpol_load --lab LAB --node NODE "
					"[--extra FILE] [--watch SECONDS | --drops | --dump | --down]\n");
			return 2;
		}
	}
	lab = zh_lab_name(lab);
	if (!node) {
		fprintf(stderr, "netpol_load: --node is required\n");
		return 2;
	}
	zh_pin_dir(pin, sizeof(pin), lab, node);
	zh_state_dir(sdir, sizeof(sdir), lab);
	state_dir = sdir;
	pin_dir = pin;
	cg_dir = cg;
	if (!strcmp(mode, "drops")) {
		struct pol_drops d;

		ret = pol_read_drops(pin, &d);
		if (ret) {
			fprintf(stderr, "netpol_load: no policy datapath pinned in %s: %s\n", pin,
				strerror(-ret));
			return 1;
		}
		pol_drops_print(&d, stdout);
		pol_drops_free(&d);
		return 0;
	}
	if (!lab_cgroup_root(false)) {
		fprintf(stderr, "netpol_load: no cgroup2 mount: is lab %s up?\n", lab);
		return 1;
	}
	lab_node_cgroup_path(cg, sizeof(cg), lab, node);
	if (access(cg, F_OK)) {
		fprintf(stderr, "netpol_load: node cgroup %s: %s\n", cg, strerror(errno));
		return 1;
	}
	if (!strcmp(mode, "down")) {
		if (pol_open(NULL, pin, &p) == 0)
			pol_close(p, 1);
		return 0;
	}
	if (ss_open(sdir, &s)) {
		fprintf(stderr, "netpol_load: state source %s unavailable\n", sdir);
		return 1;
	}
	if (!strcmp(mode, "dump")) {
		struct md_state *st = NULL;
		struct pol_compiled *c = NULL;
		struct md_err err;
		char buf[900];

		if (ss_load(s, &st, &err) || pol_compile(st, node, NULL, &c, &err)) {
			fprintf(stderr, "netpol_load: %s\n", md_err_str(&err, buf, sizeof(buf)));
		} else {
			pol_compiled_dump(c, stdout);
			ret = 0;
		}
		pol_compiled_free(c);
		md_state_free(st);
		ss_close(s);
		return ret;
	}
	if (pol_open(cg, pin, &p))
		goto out;
	ret = sync_once(s, p, node) ? 1 : 0;
	if (!strcmp(mode, "watch")) {
		double end = now_ms() + watch * 1e3;
		struct pollfd pfd = { .fd = ss_watch_fd(s), .events = POLLIN };

		while (now_ms() < end) {
			if (poll(&pfd, 1, 100) <= 0)
				continue;
			ss_watch_drain(s);
			ret = sync_once(s, p, node) ? 1 : 0;
		}
	}
out:
	pol_close(p, 0);
	ss_close(s);
	return ret;
}
