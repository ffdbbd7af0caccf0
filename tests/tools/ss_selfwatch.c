/* ss_selfwatch SPEC — one state handle that both watches and writes, as the
 * lab's supervisor does (it watches the state and publishes its runtime
 * pods with ss_put_pod on the same handle). tests/e2e/94-etcd-selfwatch.t
 * runs it against a real etcd. Steps, each printed as "step: ok|FAIL why":
 *   1. load (the source lists at R), put pod self-1 (revision W1), then
 *      start the watcher: self-1 must reach the handle's model;
 *   2. another handle puts pod other-1 (X); once the watcher has queued it
 *      (the eventfd fires) and before the main thread drains it, this
 *      handle puts self-2 (W2 > X): other-1 and self-2 must both reach the
 *      model, and the generation must be W2 (not behind the own write).
 * Exit 0 when every step passed. */
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "zerohop/model.h"
#include "zerohop/state.h"

static char pod_yaml[512];

static const char *pod(const char *name, int ip)
{
	snprintf(pod_yaml, sizeof(pod_yaml),
		 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n"
		 "  labels:\n    app: selfwatch\nspec:\n  nodeName: node-1\n"
		 "  containers:\n  - name: c\n    image: busybox\n"
		 "status:\n  phase: Running\n  podIP: 10.244.9.%d\n",
		 name, ip);
	return pod_yaml;
}

static bool has(struct ss *s, const char *name)
{
	struct md_state *st = NULL;
	struct md_err err = {};
	bool found = false;

	if (ss_load(s, &st, &err)) {
		fprintf(stderr, "load: %s\n", err.msg);
		return false;
	}
	for (int i = 0; i < md_state_n_objects(st) && !found; i++) {
		struct md_obj_id o;

		md_state_obj_id(st, i, &o);
		found = o.kind == MD_K_POD && !strcmp(o.name, name);
	}
	md_state_free(st);
	return found;
}

/* Drain and reload on every wake-up for up to ms until all names are in. */
static bool wait_for(struct ss *s, int fd, const char *a, const char *b, int ms)
{
	for (int t = 0; t < ms; t += 100) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 100) > 0)
			ss_watch_drain(s);
		if (has(s, a) && (!b || has(s, b)))
			return true;
	}
	return false;
}

int main(int argc, char **argv)
{
	struct ss *s = NULL, *o = NULL;
	struct md_state *st = NULL;
	struct md_err err = {};
	int fd, fails = 0;
	uint64_t w2;

	if (argc != 2) {
		fprintf(stderr, "usage: ss_selfwatch etcd://HOST:PORT\n");
		return 2;
	}
	if (ss_open(argv[1], &s) || ss_open(argv[1], &o))
		return 2;
	if (ss_load(s, &st, &err)) {
		fprintf(stderr, "first load: %s\n", err.msg);
		return 2;
	}
	md_state_free(st);
	if (ss_put_pod(s, "default", "self-1", pod("self-1", 1)))
		return 2;
	fd = ss_watch_fd(s);
	if (fd < 0)
		return 2;
	if (wait_for(s, fd, "self-1", NULL, 5000)) {
		printf("own write before the watch: ok\n");
	} else {
		printf("own write before the watch: FAIL self-1 never reached the model\n");
		fails++;
	}

	if (ss_put_pod(o, "default", "other-1", pod("other-1", 2)))
		return 2;
	{	/* the watcher queued it: the eventfd is readable; do not drain */
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 5000) <= 0) {
			printf("other write queued: FAIL no wake-up in 5 s\n");
			return 1;
		}
	}
	if (ss_put_pod(s, "default", "self-2", pod("self-2", 3)))
		return 2;
	w2 = ss_generation(s);
	if (wait_for(s, fd, "other-1", "self-2", 5000)) {
		printf("queued write of another client, then an own write: ok\n");
	} else {
		printf("queued write of another client, then an own write: FAIL other-1 %s, self-2 %s\n",
		       has(s, "other-1") ? "in" : "missing", has(s, "self-2") ? "in" : "missing");
		fails++;
	}
	if (ss_generation(s) == w2) {
		printf("generation after the own write: ok\n");
	} else {
		printf("generation after the own write: FAIL %llu, the write was %llu\n",
		       (unsigned long long)ss_generation(s), (unsigned long long)w2);
		fails++;
	}
	ss_close(o);
	ss_close(s);
	return fails ? 1 : 0;
}
