/* test_ss_scale.c — the state source at 10,000 Services: applying one small
 * file and loading the whole state grow linearly with the state (2,500 vs
 * 10,000 Services) and stay within bounds. This binary runs under ASan/UBSan
 * on a shared machine, so times are CPU times and the bound is loose (5 s); the
 * plain-build figures (well under a second) are in docs/benchmarks/log/model.md.
 * The state lives on tmpfs (/dev/shm) like /run on a typical node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include "tap.h"
#include "zerohop/state.h"

#define N_SVC 10000

/* CPU time (user + system) of this process: on a shared 2-core machine the
 * wall clock mostly measures the neighbours. */
static double now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int apply_text(struct ss *s, const char *dir, const char *name, const char *text,
		      struct md_err *err)
{
	char path[600];
	char *paths[] = { path };
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	return ss_apply(s, paths, 1, err);
}

struct run {
	double big, load, one, reload, restat, fresh;
	int ok;
};

/* What ss_load cost before the parse cache: parse every file, finish. */
static int fresh_load(const char *dir, struct md_state **out, struct md_err *err)
{
	char sub[700];
	struct md_state *st = md_state_new();
	int r;

	snprintf(sub, sizeof(sub), "%s/manifests", dir);
	r = md_state_add_dir(st, sub, err);
	snprintf(sub, sizeof(sub), "%s/pods", dir);
	if (!r)
		r = md_state_add_dir(st, sub, err);
	if (!r)
		r = md_state_finish(st, err);
	if (r)
		md_state_free(st);
	else
		*out = st;
	return r;
}

static void run(int n_svc, struct run *out)
{
	char tmp[] = "/dev/shm/zh-ss-scale-XXXXXX", dir[600], cmd[700], eb[512];
	size_t cap = (size_t)n_svc * 200, len = 0;
	char *big = malloc(cap);
	struct md_state *st = NULL;
	struct md_err err;
	struct ss *s, *s2 = NULL;
	double t0;
	int r;

	out->ok = 0;
	if (!mkdtemp(tmp)) {
		free(big);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/state", tmp);
	if (ss_open(dir, &s) || ss_open(dir, &s2))
		goto out;
	ok(ss_watch_fd(s) >= 0, "watch the state (the agent's way)");
	for (int i = 0; i < n_svc; i++)
		len += (size_t)snprintf(big + len, cap - len,
					"---\napiVersion: v1\nkind: Service\n"
					"metadata: {name: svc-%d, namespace: bench}\n"
					"spec:\n  selector: {app: app-%d}\n"
					"  ports: [{name: http, port: 80, targetPort: 8080}]\n", i, i);
	t0 = now();
	r = apply_text(s, tmp, "big.yaml", big, &err);
	out->big = now() - t0;
	is_int(r, 0, "apply %d Services in one file", n_svc);
	if (r)
		diag("%s", md_err_str(&err, eb, sizeof(eb)));

	t0 = now();
	r = ss_load(s, &st, &err);
	out->load = now() - t0;
	is_int(r, 0, "load the %d Services back", n_svc);
	ok(st && st->n_services == n_svc, "all of them");
	md_state_free(st);
	st = NULL;
	r = ss_load(s2, &st, &err);	/* fills the unwatched handle's cache */
	md_state_free(st);
	st = NULL;

	t0 = now();
	r = apply_text(s, tmp, "one.yaml",
		       "apiVersion: v1\nkind: Service\nmetadata: {name: svc-5, namespace: bench}\n"
		       "spec:\n  selector: {app: app-5, v: x}\n  ports: [{name: http, port: 80}]\n",
		       &err);
	out->one = now() - t0;
	is_int(r, 0, "apply one changed Service on top of %d", n_svc);

	/* the agent's case: reload after one change, with the watch naming the
	 * file (C1); then the same without a watch (stat every file); then a
	 * fresh parse of everything, as ss_load did before the cache */
	t0 = now();
	r = ss_load(s, &st, &err);
	out->reload = now() - t0;
	is_int(r, 0, "watched reload after one change");
	ok(st && md_find_service(st, "bench", "svc-5") &&
	   md_labels_get(&md_find_service(st, "bench", "svc-5")->selector.match_labels, "v"),
	   "it sees the change");
	md_state_free(st);
	st = NULL;
	t0 = now();
	r = ss_load(s2, &st, &err);
	out->restat = now() - t0;
	is_int(r, 0, "unwatched reload after one change");
	md_state_free(st);
	st = NULL;
	t0 = now();
	r = fresh_load(dir, &st, &err);
	out->fresh = now() - t0;
	is_int(r, 0, "fresh parse of the same state");
	md_state_free(st);
	st = NULL;
	diag("%d Services, CPU time: apply all %.0f ms, first load %.0f ms, apply one %.0f ms, "
	     "reload after one change: watched %.1f ms, unwatched %.1f ms, fresh parse %.1f ms",
	     n_svc, out->big * 1e3, out->load * 1e3, out->one * 1e3, out->reload * 1e3,
	     out->restat * 1e3, out->fresh * 1e3);
	ss_close(s);
	ss_close(s2);
	out->ok = 1;
out:
	free(big);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	ok(system(cmd) == 0, "cleanup");
}

int main(void)
{
	struct run small, large;

	run(N_SVC / 4, &small);
	run(N_SVC, &large);
	if (small.ok && large.ok) {
		/* linear growth is 4x; quadratic would be 16x */
		ok(large.load < 8 * small.load + 0.05, "load grows linearly (%.1fx for 4x the Services)",
		   large.load / small.load);
		ok(large.one < 8 * small.one + 0.05,
		   "apply one grows linearly (%.1fx for 4x the Services)", large.one / small.one);
		ok(large.one < 5.0, "apply one to 10,000 Services: %.0f ms (bound 5 s under ASan)",
		   large.one * 1e3);
		ok(large.load < 5.0, "load 10,000 Services: %.0f ms (bound 5 s under ASan)",
		   large.load * 1e3);
		/* CPU time, so the neighbours matter little; the plain build's
		 * ratio is far larger (docs/benchmarks/log/model.md) */
		ok(large.reload * 3 < large.fresh,
		   "a watched reload after one change costs under a third of a fresh parse "
		   "(%.1f ms vs %.1f ms)", large.reload * 1e3, large.fresh * 1e3);
	}
	return done_testing();
}
