/* test_events.c — the shared object-event layer (src/state/ss_int.h, E1-E5)
 * on its own, as the etcd source drives it: puts, deletes and relists in
 * batches; the last event of a key wins; a relist drops what it does not
 * list; builds are in key order and equal a fresh parse; an in-place
 * Service change is patched, anything else rebuilt; a text that does not
 * parse is reported by every build until replaced. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "../../../src/state/ss_int.h"

static struct md_file *parse(const char *key, const char *text, struct md_err *err)
{
	struct md_file *f = NULL;

	memset(err, 0, sizeof(*err));
	if (md_file_parse(key, text, strlen(text), &f, err))
		return NULL;
	return f;
}

static void put(struct sev_set *s, const char *key, const char *text, uint64_t rev)
{
	struct md_err err;
	struct md_file *f = parse(key, text, &err);

	sev_put(s, key, f, &err, rev);
}

static char svc_buf[8][512];

static const char *svc(int slot, const char *name, const char *sel)
{
	snprintf(svc_buf[slot], sizeof(svc_buf[slot]),
		 "apiVersion: v1\nkind: Service\nmetadata: {name: %s}\n"
		 "spec: {clusterIP: 10.96.0.%d, selector: {app: %s}, ports: [{port: 80}]}\n",
		 name, 10 + name[0], sel);	/* the ClusterIP stays with the name */
	return svc_buf[slot];
}

static int n_svcs(struct md_state *st)
{
	return st ? st->n_services : -1;
}

int main(void)
{
	struct sev_src src = {};
	struct md_state *st = NULL, *fresh = NULL;
	struct ss_delta d;
	struct md_err err;
	uint64_t base, token = 0;

	/* one batch: three puts, one key twice (the last wins, E3) */
	base = sev_begin(&src);
	put(&src.set[0], "/zerohop/v1/service/default/b", svc(1, "b", "x"), 3);
	put(&src.set[0], "/zerohop/v1/service/default/a", svc(0, "a", "x"), 2);
	put(&src.set[0], "/zerohop/v1/service/default/b", svc(2, "b", "y"), 4);
	sev_commit(&src.set[0]);
	sev_commit(&src.set[1]);
	is_int(src.set[0].n, 2, "two keys after a batch with one key put twice");
	ok(!strcmp(src.set[0].v[0].key, "/zerohop/v1/service/default/a"), "objects kept in key order (E1)");
	is_int((int)sev_find(&src.set[0], "/zerohop/v1/service/default/b")->rev, 4,
	       "the last event of a key wins (revision 4)");
	ok(!sev_load_delta(&src, base, &st, &token, &d, &err) && !d.patched, "first load is a full build");
	ss_delta_free(&d);
	is_int(n_svcs(st), 2, "two Services");
	ok(st && !strcmp(st->services[0].meta.name, "a"), "built in key order");
	ok(st && !strcmp(md_labels_get(&st->services[1].selector.match_labels, "app"), "y"),
	   "b has the selector of its last put");

	/* an in-place Service change: patched (E4) */
	base = sev_begin(&src);
	put(&src.set[0], "/zerohop/v1/service/default/a", svc(3, "a", "z"), 5);
	sev_commit(&src.set[0]);
	sev_commit(&src.set[1]);
	ok(!sev_load_delta(&src, base, &st, &token, &d, &err) && d.patched && d.n_svc_objs == 1,
	   "a selector change is patched in place");
	ss_delta_free(&d);
	ok(!sev_load(&src, &fresh, &err) &&
	   !strcmp(md_labels_get(&fresh->services[0].selector.match_labels, "app"), "z") &&
	   !strcmp(md_labels_get(&st->services[0].selector.match_labels, "app"), "z"),
	   "the patched state equals a fresh build");
	md_state_free(fresh);

	/* a ClusterIP change is not patchable */
	base = sev_begin(&src);
	put(&src.set[0], "/zerohop/v1/service/default/a",
	    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n"
	    "spec: {clusterIP: 10.96.1.1, selector: {app: z}, ports: [{port: 80}]}\n", 5);
	sev_commit(&src.set[0]);
	sev_commit(&src.set[1]);
	ok(!sev_load_delta(&src, base, &st, &token, &d, &err) && !d.patched,
	   "a ClusterIP change is a full build");
	ss_delta_free(&d);

	/* a stale token: full build even for a patchable change */
	base = sev_begin(&src);
	put(&src.set[0], "/zerohop/v1/service/default/a", svc(4, "a", "w"), 6);
	sev_commit(&src.set[0]);
	sev_commit(&src.set[1]);
	token = 12345;
	ok(!sev_load_delta(&src, base, &st, &token, &d, &err) && !d.patched,
	   "a token from another epoch forces a full build");
	ss_delta_free(&d);

	/* a delete and a new key: full build */
	base = sev_begin(&src);
	sev_del(&src.set[0], "/zerohop/v1/service/default/b", 7);
	sev_del(&src.set[0], "/zerohop/v1/service/default/nope", 7);
	put(&src.set[0], "/zerohop/v1/service/default/c", svc(5, "c", "x"), 7);
	sev_commit(&src.set[0]);
	sev_commit(&src.set[1]);
	ok(!sev_load_delta(&src, base, &st, &token, &d, &err) && !d.patched && n_svcs(st) == 2 &&
	   !strcmp(st->services[1].meta.name, "c"),
	   "delete b + add c: a full build with a and c (deleting a missing key is a no-op)");
	ss_delta_free(&d);

	/* a text that does not parse: every build fails with its error (E2) */
	base = sev_begin(&src);
	put(&src.set[0], "/zerohop/v1/service/default/bad", "kind: Service\nmetadata: [", 8);
	sev_commit(&src.set[0]);
	sev_commit(&src.set[1]);
	ok(sev_load_delta(&src, base, &st, &token, &d, &err) && strstr(err.file, "default/bad"),
	   "an unparseable object fails the build, named: %s", err.file);
	ss_delta_free(&d);
	is_int(n_svcs(st), 2, "the caller's state is untouched by the failed build");
	ok(sev_load(&src, &fresh, &err) == -EINVAL, "and every later build reports it too");

	/* a relist (reset batch): keys not listed are gone */
	base = sev_begin(&src);
	sev_reset(&src.set[0]);
	sev_reset(&src.set[1]);
	put(&src.set[0], "/zerohop/v1/service/default/c", svc(5, "c", "x"), 9);
	sev_commit(&src.set[0]);
	sev_commit(&src.set[1]);
	is_int(src.set[0].n, 1, "after a relist of one key only that key is left");
	ok(!sev_load_delta(&src, base, &st, &token, &d, &err) && !d.patched && n_svcs(st) == 1,
	   "a relist is a full build");
	ss_delta_free(&d);

	md_state_free(st);
	sev_src_clear(&src);
	return done_testing();
}
