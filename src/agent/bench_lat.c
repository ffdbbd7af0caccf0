/* bench_lat.c — how long an applied change takes to reach the kernel:
 * `zerohop agent --bench-latency N --node NODE -f A.yaml -f B.yaml`.
 *
 * Alternates ss_apply(A), ss_apply(B) N times against the running lab's state
 * source; after each apply returns, spins on the node's pinned lb_meta
 * GENERATION until it reaches the state generation the apply produced (the
 * agent writes it after every map entry of that generation, lb.c S3), and
 * records the elapsed time (polling every 50 us, so the resolution is about
 * 0.1 ms). Prints min/median/p90/p99/max in ms.
 *
 * A file holding exactly one Pod *with a status block* is written as a
 * runtime pod (ss_put_pod, what the lab's kubelet does when a pod becomes
 * ready or not), not applied: alternating two such files that differ in
 * status.phase measures the common endpoint change, a pod's readiness. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "zerohop/agent.h"
#include "zerohop/log.h"
#include "zerohop/state.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A runtime pod file: its text and identity; 0 when it is not one. */
static int runtime_pod(const char *path, char **text, char **ns, char **name)
{
	struct md_state *st = md_state_new();
	struct md_err err = {};
	FILE *f = NULL;
	long len;
	int ret = 0;

	if (md_state_add_file(st, path, &err) || st->n_pods != 1 || md_state_n_objects(st) != 1 ||
	    !st->pods[0].has_status)
		goto out;
	f = fopen(path, "r");
	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto out;
	*text = zh_calloc(len + 1, 1);
	if (fread(*text, 1, len, f) != (size_t)len) {
		free(*text);
		*text = NULL;
		goto out;
	}
	*ns = zh_strdup(st->pods[0].meta.ns);
	*name = zh_strdup(st->pods[0].meta.name);
	ret = 1;
out:
	if (f)
		fclose(f);
	md_state_free(st);
	return ret;
}

int ag_bench_latency(const char *state_dir, const char *pin_dir, char *const *files, int n_files,
		     int rounds)
{
	struct md_err err = {};
	struct ss *s = NULL;
	double *lat = NULL;
	char path[320], buf[800];
	int fd = -1, i, ret, timeouts = 0;
	uint32_t k = ZH_LB_META_GENERATION;

	if (n_files < 1 || rounds < 1)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/lb_meta", pin_dir);
	fd = bpf_obj_get(path);
	if (fd < 0) {
		ret = -errno;
		fprintf(stderr, "bench-latency: %s: %s (is the agent running?)\n", path, strerror(-ret));
		return ret;
	}
	ret = ss_open(state_dir, &s);
	if (ret)
		goto out;
	lat = zh_calloc(rounds, sizeof(*lat));
	for (i = 0; i < rounds; i++) {
		uint64_t want, got = 0;
		double t0, t;

		char *text = NULL, *ns = NULL, *name = NULL;

		if (runtime_pod(files[i % n_files], &text, &ns, &name)) {
			ret = ss_put_pod(s, ns, name, text);
			if (ret)
				fprintf(stderr, "bench-latency: %s: %s\n", files[i % n_files],
					strerror(-ret));
			free(text);
			free(ns);
			free(name);
			if (ret)
				goto out;
		} else {
			ret = ss_apply(s, &files[i % n_files], 1, &err);
			if (ret) {
				fprintf(stderr, "bench-latency: %s\n",
					md_err_str(&err, buf, sizeof(buf)));
				goto out;
			}
		}
		t0 = now_ms();
		want = ss_generation(s);
		/* Poll every 50 us rather than spin: on a 2-core machine a spinning
		 * reader would steal the CPU the agent needs. */
		for (;;) {
			bpf_map_lookup_elem(fd, &k, &got);
			t = now_ms();
			if (got >= want || t - t0 >= 2000)
				break;
			usleep(50);
		}
		if (got < want)
			timeouts++;
		lat[i] = t - t0;
		usleep(20000);	/* let the agent go idle: measure a cold change */
	}
	qsort(lat, rounds, sizeof(*lat), cmp_d);
	printf("apply -> kernel (lb_meta generation), %d changes: min %.2f ms, median %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms, timeouts %d\n",
	       rounds, lat[0], lat[rounds / 2], lat[rounds * 9 / 10], lat[rounds * 99 / 100],
	       lat[rounds - 1], timeouts);
	ret = timeouts ? -ETIMEDOUT : 0;
out:
	free(lat);
	ss_close(s);
	close(fd);
	return ret;
}
