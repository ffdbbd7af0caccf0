/* ss_etcd.c — the etcd v3 state source (state.h, docs/state-etcd.md),
 * through etcd's JSON gateway (etcd.h). It only turns etcd into object
 * events; the shared layer (ss_events.c) turns them into the model.
 *
 * Key layout (one key per object, the manifest as JSON or YAML text, K7):
 *   /zerohop/v1/KIND/NAMESPACE/NAME     applied objects; KIND lower case,
 *                                       NAMESPACE "_" for cluster-scoped
 *                                       kinds; the one Cluster object is
 *                                       always /zerohop/v1/cluster/_/cluster
 *   /zerohop/runtime/v1/pod/NS/NAME     runtime pods (the lab's kubelet)
 * Everything lives under "/zerohop/", which is what is listed and watched.
 *
 * Invariants:
 *  K1. apply and delete validate the result (stored objects at revision R
 *      with the inputs applied, md_state_finish) before writing, and write
 *      every object of one command in one etcd transaction whose compares
 *      pin each written key at the mod revision it had at R (or absent):
 *      all objects or none, and never over a concurrent writer's change
 *      (the command retries from a fresh read, at most RETRIES times).
 *  K2. metadata.resourceVersion is the key's mod revision. An input that
 *      carries one is compared with that revision instead (optimistic
 *      concurrency, as the Kubernetes API server does): a mismatch is a
 *      conflict naming the object, and nothing is written. The stored text
 *      never contains a resourceVersion (it is added when shown).
 *  K3. The watcher lists at a revision R (one range, a consistent
 *      snapshot), then watches from R+1; events are applied in revision
 *      order and an event at or below the revision already applied is
 *      skipped (no duplicate). After a disconnect it resumes from the last
 *      revision it saw; a watch canceled for compaction relists (a reset
 *      batch: the model is rebuilt from the new list, the agent's map sync
 *      diffs it against the kernel, which reconciles).
 *  K5. A listing is paginated (PAGE kvs per range request), every page
 *      after the first pinned at the first page's revision R, so the pages
 *      together are the same consistent snapshot as one range at R; a
 *      listing that fails half way (e.g. R compacted meanwhile) is dropped
 *      whole, never applied in part. The request of page k+1 is sent
 *      before page k is parsed, so etcd serves it while we parse.
 *  K6. Without a watcher a load lists again only when the store's
 *      revision moved since the listing src holds (a count_only range:
 *      one small answer): every write bumps it, so an equal revision means
 *      nothing changed.
 *  K7. apply stores an object as one line of JSON (what kubectl and the
 *      API server store), which the model parses without libyaml
 *      (src/model/json_tree.c); an object JSON cannot say exactly stays
 *      YAML, and YAML values written by older versions are read as before.
 *      `get -o yaml` shows every value as YAML.
 *  K4. The watcher never blocks the agent: it only queues raw events under
 *      a mutex and signals an eventfd; parsing and the model are the main
 *      thread's. While no endpoint answers, the last state stays loaded
 *      (the agent keeps its maps), ss_health says why, and the watcher
 *      retries with backoff (100 ms doubling to BACKOFF_MAX_MS, 1 s), trying the endpoints
 *      in turn. A watch on a member without a leader is refused by etcd
 *      (hasleader metadata), so a member cut off from its quorum is left.
 *  K8. A handle's own writes (apply, delete, runtime pods) never move
 *      s->rev, the revision its model holds: the watcher starts after
 *      s->rev and judges its events against it (K3), and a handle that
 *      both watches and writes (the lab's supervisor) must still see its
 *      own write, and the writes of others queued before it, as events.
 *      Its generation (ss_generation) is the newer of s->rev and its last
 *      write, so "wait until the agents reached my write" keeps working.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "zerohop/etcd.h"
#include "zerohop/jsonv.h"
#include "zerohop/log.h"
#include "ss_int.h"

#define PFX "/zerohop/"
#define PFX_END "/zerohop0"	/* '/' + 1: the range end of the prefix */
#define MPFX "/zerohop/v1/"
#define RPFX "/zerohop/runtime/v1/pod/"
#define MAX_EPS 8
#define CALL_MS 3000		/* one unary request */
#define PROBE_MS 1000		/* liveness probe of the watched endpoint */
#define PROBE_EVERY_MS 1000
#define RETRIES 3
#define LIST_MS 30000		/* a listing of the whole state (100,000s of objects) */
#define PAGE 4096		/* kvs per range request (K5) */
#define BACKOFF_MAX_MS 1000	/* K4: a healed node is back within about a second */

struct wev {			/* a raw event queued by the watcher */
	char *key;
	char *val;		/* NULL: delete */
	size_t len;
	uint64_t rev;
	bool reset;		/* a relist starts here (K3) */
};

struct ss_etcd {
	char *spec;
	struct eg_ep eps[MAX_EPS];
	int n_eps;
	struct eg_tls *tls;	/* https:// or etcds:// endpoints (etcd.h T1-T4) */
	int cur;		/* the watcher's endpoint (its thread only) */
	int ccur;		/* the main thread's: unary calls (apply, pods) */
	struct sev_src src;
	uint64_t rev;		/* revision of what src holds (K3) */
	uint64_t wrote;		/* revision of this handle's last write (K8) */
	uint64_t lrev;		/* revision of the last listing src holds (K6) */
	bool listed;
	/* watcher thread (K4) */
	pthread_t th;
	bool th_started;
	int efd;
	pthread_mutex_t mu;
	struct wev *q;
	int nq, capq;
	bool up;
	char why[320];
	volatile int stop;
	uint64_t wrev;		/* watcher: last revision seen */
};

static char *mkey(const struct md_obj_id *o)
{
	char buf[700];

	if (o->kind == MD_K_CLUSTER)
		snprintf(buf, sizeof(buf), MPFX "cluster/_/cluster");
	else
		snprintf(buf, sizeof(buf), MPFX "%s/%s/%s", md_kind_lower(o->kind),
			 o->ns ? o->ns : "_", o->name);
	return zh_strdup(buf);
}

/* ---- JSON requests ------------------------------------------------------ */

static long long mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}


static void put_b64(struct buf *b, const char *s, size_t len)
{
	char *e = eg_b64_encode(s, len);

	buf_printf(b, "\"%s\"", e);
	free(e);
}

/* POST to the endpoints in turn from *cur (the calling thread's: the
 * watcher's s->cur or the main thread's s->ccur); the parsed body of the first
 * that answers 200. -errno with err->msg. */
static void err_msg_only(struct md_err *err)
{
	err->file[0] = 0;	/* md_err_str: the message alone */
	err->line = 0;
	err->field[0] = 0;
}

/* The outcome ret of a request to endpoint i (eg_call's) and its answer r
 * (freed): 0 with the parsed body, or -errno with err->msg. */
static int answer(struct ss_etcd *s, int i, const char *path, int timeout_ms, int ret,
		  int status, struct buf *r, struct jv **out, struct md_err *err)
{
	char ep[200], jerr[80];

	eg_ep_str(&s->eps[i], ep, sizeof(ep));
	if (!ret && status != 200) {
		/* etcd 3.4's gateway dials its own gRPC port with the server's
		 * certificate as a client's: refused without clientAuth, and
		 * the gateway answers 503 ("client preface", "connection
		 * closed", varying with its retries) */
		bool eku = s->eps[i].tls && status == 503;

		if (eku)
			snprintf(err->msg, sizeof(err->msg),
				 "etcd %.80s: HTTP 503: %.*s (if it persists: etcd's certificate lacks"
				 " clientAuth, docs/state-etcd.md TLS)", ep,
				 (int)(r->data > 50 ? 50 : r->data), buf_head(r));
		else
			snprintf(err->msg, sizeof(err->msg), "etcd %s %s: HTTP %d: %.*s", ep, path,
				 status, (int)(r->data > 120 ? 120 : r->data), buf_head(r));
		ret = -EIO;
	} else if (!ret && !(*out = jv_parse(buf_head(r), r->data, jerr, sizeof(jerr)))) {
		snprintf(err->msg, sizeof(err->msg), "etcd %.80s %.40s: malformed JSON (%.60s)", ep, path, jerr);
		ret = -EPROTO;
	} else if (ret && *eg_last_error()) {	/* TLS (etcd.h T3) */
		snprintf(err->msg, sizeof(err->msg), "etcd %s: %s", ep, eg_last_error());
	} else if (ret == -ETIMEDOUT) {
		snprintf(err->msg, sizeof(err->msg), "etcd %s %s: no answer within %d ms", ep,
			 path, timeout_ms);
	} else if (ret) {
		snprintf(err->msg, sizeof(err->msg), "etcd %s unreachable: %s", ep,
			 strerror(-ret));
	}
	buf_free(r);
	if (ret)
		err_msg_only(err);
	return ret;
}

static int call_t(struct ss_etcd *s, int *cur, const char *path, const char *body,
		  int timeout_ms, struct jv **out, struct md_err *err)
{
	int ret = -ENOTCONN, status = 0;

	for (int k = 0; k < s->n_eps; k++) {
		int i = (*cur + k) % s->n_eps;
		struct buf r;

		buf_init(&r, 0);
		ret = eg_call(&s->eps[i], path, body, timeout_ms, &status, &r);
		ret = answer(s, i, path, timeout_ms, ret, status, &r, out, err);
		if (!ret) {
			*cur = i;
			return 0;
		}
	}
	if (ret == -ENOTCONN) {	/* no endpoint at all */
		snprintf(err->msg, sizeof(err->msg), "etcd: no endpoint");
		err_msg_only(err);
	}
	return ret;
}

/* A unary request; its time bound grows with the request (a big txn takes
 * etcd a while to commit: 2 s per MiB on top of CALL_MS). */
static int call(struct ss_etcd *s, const char *path, const char *body, struct jv **out,
		struct md_err *err)
{
	return call_t(s, &s->ccur, path, body, CALL_MS + (int)(strlen(body) >> 20) * 2000, out,
		      err);
}

/* A range request over the prefix from key `from` (flen bytes): a page
 * of PAGE kvs, or the count alone; pinned at rev unless 0 (K5). */
static void range_req(struct buf *b, const char *from, size_t flen, uint64_t rev, bool count_only)
{
	buf_init(b, 0);
	buf_printf(b, "{\"key\":");
	put_b64(b, from, flen);
	buf_printf(b, ",\"range_end\":");
	put_b64(b, PFX_END, strlen(PFX_END));
	if (count_only)
		buf_printf(b, ",\"count_only\":true");
	else
		buf_printf(b, ",\"limit\":\"%d\"", PAGE);
	if (rev)
		buf_printf(b, ",\"revision\":\"%llu\"", (unsigned long long)rev);
	buf_printf(b, "}");
	buf_append(b, "", 1);
}

/* The store's revision now (K6). */
static int store_rev(struct ss_etcd *s, int *cur, uint64_t *rev, struct md_err *err)
{
	struct jv *r = NULL;
	struct buf b;
	int ret;

	range_req(&b, PFX, strlen(PFX), 0, true);
	ret = call_t(s, cur, "/v3/kv/range", buf_head(&b), CALL_MS, &r, err);
	buf_free(&b);
	if (!ret)
		*rev = jv_u64(jv_get(jv_get(r, "header"), "revision"), 0);
	jv_free(r);
	return ret;
}

static int kv_decode(const struct jv *kv, char **key, char **val, size_t *vlen,
		     uint64_t *mod);

/* Called per listed object, in key order; owns key and val (malloc'd). */
typedef int (*kv_fn)(void *arg, char *key, char *val, size_t len, uint64_t mod);

/* List the whole prefix page by page (K5): fn per object, *rev the
 * listing's revision. A non-zero fn result stops the listing and is
 * returned. */
static int list_each(struct ss_etcd *s, int *cur, kv_fn fn, void *arg, uint64_t *rev,
		     struct md_err *err)
{
	static const char path[] = "/v3/kv/range";
	long long deadline = mono_ms() + LIST_MS;
	struct jv *r = NULL;
	struct eg_conn c = { .fd = -1 };
	struct buf b;
	int ret;

	range_req(&b, PFX, strlen(PFX), 0, false);
	ret = call_t(s, cur, path, buf_head(&b), LIST_MS, &r, err);
	buf_free(&b);
	if (ret)
		return ret;
	*rev = jv_u64(jv_get(jv_get(r, "header"), "revision"), 0);
	for (;;) {
		const struct jv *kvs = jv_get(r, "kvs");
		int n = kvs && kvs->type == JV_ARR ? kvs->n : 0, status = 0, sent = 0;
		bool more = jv_bool(jv_get(r, "more")) && n > 0;
		struct buf resp;

		if (more) {	/* the next page from just after the last key, at *rev */
			const struct jv *k = jv_get(kvs->items[n - 1], "key");
			char *last = NULL;
			size_t kl = 0;

			if (!k || k->type != JV_STR || eg_b64_decode(k->str, k->len, &last, &kl)) {
				snprintf(err->msg, sizeof(err->msg), "etcd %s: malformed key", path);
				err_msg_only(err);
				ret = -EPROTO;
				break;
			}
			range_req(&b, last, kl + 1, *rev, false);	/* key + "\0" */
			free(last);
			sent = eg_call_send(&s->eps[*cur], path, buf_head(&b),
					    (int)(deadline - mono_ms()), &c);
			buf_free(&b);
		}
		for (int i = 0; !ret && i < n; i++) {
			char *key, *val;
			size_t len;
			uint64_t mod;

			if (!kv_decode(kvs->items[i], &key, &val, &len, &mod))
				ret = fn(arg, key, val, len, mod);
		}
		jv_free(r);
		r = NULL;
		if (ret || !more) {
			eg_close(&c);
			break;
		}
		buf_init(&resp, 0);
		if (!sent)	/* else eg_call_send closed c */
			sent = eg_call_recv(&c, (int)(deadline - mono_ms()), &status, &resp);
		ret = answer(s, *cur, path, LIST_MS, sent, status, &resp, &r, err);
		if (ret)
			break;
	}
	jv_free(r);
	return ret;
}

/* key and value of one kv object, decoded (malloc'd). */
static int kv_decode(const struct jv *kv, char **key, char **val, size_t *vlen,
		     uint64_t *mod)
{
	const struct jv *k = jv_get(kv, "key"), *v = jv_get(kv, "value");
	size_t kl;

	*key = *val = NULL;
	*vlen = 0;
	if (!k || k->type != JV_STR || eg_b64_decode(k->str, k->len, key, &kl))
		return -EPROTO;
	if (v && v->type == JV_STR) {
		if (eg_b64_decode(v->str, v->len, val, vlen)) {
			free(*key);
			return -EPROTO;
		}
	} else {
		*val = zh_strdup("");
	}
	*mod = jv_u64(jv_get(kv, "mod_revision"), 0);
	return 0;
}

/* K8: a write of this handle moves its generation, never s->rev. */
static void wrote(struct ss_etcd *s, uint64_t rev)
{
	if (rev > s->wrote)
		s->wrote = rev;
}

/* ---- the event queue (K4) ----------------------------------------------- */

static void q_push(struct ss_etcd *s, char *key, char *val, size_t len, uint64_t rev, bool reset)
{
	if (s->nq == s->capq) {
		s->capq = s->capq ? 2 * s->capq : 64;
		s->q = zh_realloc(s->q, (size_t)s->capq * sizeof(*s->q));
	}
	s->q[s->nq++] = (struct wev){ .key = key, .val = val, .len = len, .rev = rev, .reset = reset };
}

static void signal_main(struct ss_etcd *s)
{
	uint64_t one = 1;

	if (write(s->efd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow in practice; nothing to do */
	}
}

static void set_up(struct ss_etcd *s, bool up, const char *why)
{
	bool changed;

	pthread_mutex_lock(&s->mu);
	changed = s->up != up;
	s->up = up;
	if (!up && why)
		snprintf(s->why, sizeof(s->why), "%s", why);
	pthread_mutex_unlock(&s->mu);
	if (changed) {
		if (up)
			zh_info("etcd: %s:%d: watching from revision %llu", s->eps[s->cur].host,
				s->eps[s->cur].port, (unsigned long long)s->wrev + 1);
		else
			zh_warn("etcd: unreachable: %s (the last state stays in force)", s->why);
		signal_main(s);
	}
}

/* One event of s->src: a key's new text or its deletion. */
static void apply_ev(struct ss_etcd *s, const char *key, const char *val, size_t len, uint64_t rev)
{
	struct sev_set *set;

	if (!strncmp(key, RPFX, strlen(RPFX)))
		set = &s->src.set[1];
	else if (!strncmp(key, MPFX, strlen(MPFX)))
		set = &s->src.set[0];
	else
		return;	/* another version's keys: not ours */
	if (!val) {
		sev_del(set, key, rev);
	} else {
		struct md_file *f = NULL;
		struct md_err err = {};
		char name[600];

		snprintf(name, sizeof(name), "etcd:%s", key);
		if (md_file_parse(name, val, len, &f, &err))
			f = NULL;	/* E2: kept with its error */
		sev_put(set, key, f, &err, rev);
	}
}

static int list_apply_one(void *arg, char *key, char *val, size_t len, uint64_t mod)
{
	apply_ev(arg, key, val, len, mod);
	free(key);
	free(val);
	return 0;
}

/* A listing into s->src as one reset batch (K3), parsed page by page as
 * it arrives (K5); nothing of it stays queued when it fails. */
static int apply_list(struct ss_etcd *s, struct md_err *err)
{
	uint64_t rev = 0;
	int ret;

	for (int k = 0; k < 2; k++)
		sev_reset(&s->src.set[k]);
	ret = list_each(s, &s->ccur, list_apply_one, s, &rev, err);
	if (ret) {
		for (int k = 0; k < 2; k++)
			sev_discard(&s->src.set[k]);
		return ret;
	}
	s->rev = s->lrev = rev;
	s->listed = true;
	return 0;
}

/* Main thread: what the watcher queued, as one batch. */
static void drain_queue(struct ss_etcd *s)
{
	uint64_t base = s->rev, lrev = 0, top = 0;
	bool listing = false;
	struct wev *q;
	int n;

	pthread_mutex_lock(&s->mu);
	q = s->q;
	n = s->nq;
	s->q = NULL;
	s->nq = s->capq = 0;
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < n; i++) {
		if (q[i].reset) {
			sev_reset(&s->src.set[0]);
			sev_reset(&s->src.set[1]);
			base = lrev = q[i].rev;
			listing = true;
			s->listed = true;
		} else if ((listing && q[i].rev <= lrev) || q[i].rev > base) {
			/* K3: a listed object, or newer than what is applied
			 * (the events of one txn share its revision and arrive
			 * in one batch) */
			apply_ev(s, q[i].key, q[i].val, q[i].len, q[i].rev);
			if (q[i].rev > top)
				top = q[i].rev;
		}
		free(q[i].key);
		free(q[i].val);
	}
	s->rev = top > base ? top : base;
	free(q);
}

/* ---- the watcher thread (K3, K4) ---------------------------------------- */

static void nap(struct ss_etcd *s, int ms)
{
	for (int i = 0; i < ms && !s->stop; i += 50)
		usleep(50 * 1000);
}

/* The endpoint is alive and has a leader (K4). */
static bool probe(struct ss_etcd *s, const struct eg_ep *ep, struct eg_conn *pc)
{
	struct jv *j = NULL;
	struct buf r;
	int status = 0;
	bool ok;

	buf_init(&r, 0);
	/* one kept connection per watch: over TLS, no handshake a second */
	ok = !eg_call_keep(pc, ep, "/v3/maintenance/status", "{}", PROBE_MS, &status, &r) &&
	     status == 200 &&
	     (j = jv_parse(buf_head(&r), r.data, NULL, 0)) &&
	     jv_u64(jv_get(j, "leader"), 0) != 0;
	jv_free(j);
	buf_free(&r);
	return ok;
}

struct wlist {
	struct wev *v;
	int n, cap;
};

static int wlist_one(void *arg, char *key, char *val, size_t len, uint64_t mod)
{
	struct wlist *l = arg;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 1024;
		l->v = zh_realloc(l->v, (size_t)l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = (struct wev){ .key = key, .val = val, .len = len, .rev = mod };
	return 0;
}

/* A listing by the watcher: queued as a reset batch, once complete (K5). */
static int w_list(struct ss_etcd *s, char *why, size_t wl)
{
	struct md_err err = {};
	struct wlist l = {};
	uint64_t rev = 0;
	int ret = list_each(s, &s->cur, wlist_one, &l, &rev, &err);

	if (ret) {
		for (int i = 0; i < l.n; i++) {
			free(l.v[i].key);
			free(l.v[i].val);
		}
		free(l.v);
		snprintf(why, wl, "%.190s", err.msg);
		return ret;
	}
	s->wrev = rev;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->nq; i++) {
		free(s->q[i].key);
		free(s->q[i].val);
	}
	s->nq = 0;
	q_push(s, NULL, NULL, 0, s->wrev, true);
	for (int i = 0; i < l.n; i++)
		q_push(s, l.v[i].key, l.v[i].val, l.v[i].len, l.v[i].rev, false);
	pthread_mutex_unlock(&s->mu);
	free(l.v);
	signal_main(s);
	return 0;
}

/* One watch response: queue its events. 1: canceled for compaction. */
static int w_message(struct ss_etcd *s, const struct jv *m, char *why, size_t wl)
{
	const struct jv *res = jv_get(m, "result"), *evs;
	int n = 0;

	if (!res) {
		const struct jv *e = jv_get(jv_get(m, "error"), "message");

		/* the gateway's error object, e.g. "etcdserver: no leader" */
		snprintf(why, wl, "watch: %.150s", e && e->type == JV_STR ? e->str : "unexpected message");
		return -EPROTO;
	}
	if (jv_bool(jv_get(res, "canceled"))) {
		uint64_t cr = jv_u64(jv_get(res, "compact_revision"), 0);
		const struct jv *reason = jv_get(res, "cancel_reason");

		if (cr) {
			zh_warn("etcd: revision %llu was compacted (now %llu): relisting",
				(unsigned long long)s->wrev + 1, (unsigned long long)cr);
			return 1;
		}
		snprintf(why, wl, "watch canceled: %s",
			 reason && reason->type == JV_STR ? reason->str : "no reason given");
		return -ECONNRESET;
	}
	if (jv_bool(jv_get(res, "created")))
		set_up(s, true, NULL);
	evs = jv_get(res, "events");
	pthread_mutex_lock(&s->mu);
	for (int i = 0; evs && evs->type == JV_ARR && i < evs->n; i++) {
		const struct jv *ev = evs->items[i], *kv = jv_get(ev, "kv");
		const struct jv *type = jv_get(ev, "type");
		char *key, *val;
		size_t len;
		uint64_t mod;

		if (!kv || kv_decode(kv, &key, &val, &len, &mod))
			continue;
		if (type && type->type == JV_STR && !strcmp(type->str, "DELETE")) {
			free(val);
			val = NULL;
		}
		if (mod > s->wrev)
			s->wrev = mod;
		q_push(s, key, val, len, mod, false);
		n++;
	}
	pthread_mutex_unlock(&s->mu);
	if (n)
		signal_main(s);
	return 0;
}

/* Watch from s->wrev + 1 on the current endpoint until an error, a
 * compaction (1), a dead endpoint or stop. */
static int w_watch(struct ss_etcd *s, char *why, size_t wl)
{
	const struct eg_ep *ep = &s->eps[s->cur];
	struct eg_dechunk dc = {};
	struct eg_conn c, pc = { .fd = -1 };	/* the stream, the probe's */
	struct buf in, body, req;
	long long clen, last_probe = mono_ms();
	bool chunked;
	int ret, status = 0;
	char epn[200];

	eg_ep_str(ep, epn, sizeof(epn));
	ret = eg_connect(ep, CALL_MS, &c);
	if (ret) {
		snprintf(why, wl, "%.100s: %.200s", epn, *eg_last_error() ? eg_last_error() : strerror(-ret));
		return ret;
	}
	buf_init(&in, 0);
	buf_init(&body, 0);
	buf_init(&req, 0);
	buf_printf(&req, "{\"create_request\":{\"key\":");
	put_b64(&req, PFX, strlen(PFX));
	buf_printf(&req, ",\"range_end\":");
	put_b64(&req, PFX_END, strlen(PFX_END));
	buf_printf(&req, ",\"start_revision\":\"%llu\"}}", (unsigned long long)s->wrev + 1);
	buf_append(&req, "", 1);
	ret = eg_send(&c, ep, "/v3/watch", buf_head(&req), CALL_MS);
	if (!ret)
		ret = eg_read_head(&c, &in, CALL_MS, &status, &chunked, &clen);
	if (!ret && status != 200)
		ret = -EIO;
	if (ret) {
		snprintf(why, wl, "%.100s: watch: %.200s", epn,
			 ret == -EIO ? "HTTP error" :
			 *eg_last_error() ? eg_last_error() : strerror(-ret));
		goto out;
	}
	while (!s->stop) {
		/* eg_read leaves nothing buffered in TLS: polling fd is enough */
		struct pollfd p = { .fd = c.fd, .events = c.want };
		int r = poll(&p, 1, in.data ? 0 : 200);
		long l;

		if (r < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		if (mono_ms() - last_probe >= PROBE_EVERY_MS) {
			/* a blackholed endpoint never closes the stream */
			if (!probe(s, ep, &pc)) {
				snprintf(why, wl, "%.100s: no answer (or no leader)", epn);
				ret = -ETIMEDOUT;
				break;
			}
			last_probe = mono_ms();
		}
		/* the head's read may have brought the first messages too */
		if (r <= 0 && !in.data)
			continue;
		if (r > 0) {
			ssize_t n = eg_read(&c, &in);

			if (n == 0 || (n < 0 && n != -EAGAIN)) {
				snprintf(why, wl, "%.100s: watch stream %.200s", epn,
					 *eg_last_error() ? eg_last_error() : "closed");
				ret = n ? (int)n : -ECONNRESET;
				break;
			}
		}
		if (chunked)
			ret = eg_dechunk(&dc, buf_head(&in), in.data, &body);
		else
			buf_append(&body, buf_head(&in), in.data);
		buf_consume(&in, in.data);
		if (ret) {
			snprintf(why, wl, "watch: bad chunked framing");
			break;
		}
		while ((l = jv_next(buf_head(&body), body.data)) > 0) {
			struct jv *m = NULL;

			m = jv_parse(buf_head(&body), (size_t)l, NULL, 0);
			ret = !m ? -EPROTO : w_message(s, m, why, wl);
			jv_free(m);
			buf_consume(&body, (size_t)l);
			if (ret)
				goto out;
		}
		if (l < 0) {
			snprintf(why, wl, "watch: malformed stream");
			ret = -EPROTO;
			break;
		}
		last_probe = mono_ms();	/* it talked: alive */
	}
out:
	eg_close(&c);
	eg_close(&pc);
	buf_free(&in);
	buf_free(&body);
	buf_free(&req);
	return ret;
}

static void *watcher(void *arg)
{
	struct ss_etcd *s = arg;
	bool need_list = !s->wrev;
	int backoff = 100;
	char why[320];

	while (!s->stop) {
		int ret = 0;

		why[0] = 0;
		if (need_list) {
			ret = w_list(s, why, sizeof(why));
			if (!ret)
				need_list = false;
		}
		if (!ret)
			ret = w_watch(s, why, sizeof(why));
		if (s->stop)
			break;
		if (ret == 1) {		/* compaction: relist now (K3) */
			need_list = true;
			continue;
		}
		set_up(s, false, why[0] ? why : strerror(-ret));
		s->cur = (s->cur + 1) % s->n_eps;	/* fail over */
		nap(s, backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
		if (s->up)
			backoff = 100;
	}
	return NULL;
}

/* ---- state.h operations -------------------------------------------------- */

int setcd_open(const char *spec, struct ss_etcd **out)
{
	struct ss_etcd *s = zh_calloc(1, sizeof(*s));

	s->n_eps = eg_parse_endpoints(spec, s->eps, MAX_EPS);
	if (s->n_eps < 0) {
		zh_err("state %s: expected etcd://HOST:PORT[,HOST:PORT...], or https:// (etcds://)"
		       " for TLS, at most %d, no unix: with TLS", spec, MAX_EPS);
		free(s);
		return -EINVAL;
	}
	if (s->eps[0].tls) {	/* T4: a wrong file is found here, before any request */
		struct eg_tls_opts o;
		char err[400];

		eg_tls_opts_env(&o);
		s->tls = eg_tls_new(&o, err, sizeof(err));
		if (!s->tls) {
			zh_err("state %s: %s", spec, err);
			free(s);
			return -EINVAL;
		}
		for (int i = 0; i < s->n_eps; i++)
			s->eps[i].tlsc = s->tls;
	}
	s->spec = zh_strdup(spec);
	s->efd = -1;
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->why, sizeof(s->why), "not connected yet");
	*out = s;
	return 0;
}

void setcd_close(struct ss_etcd *s)
{
	if (!s)
		return;
	if (s->th_started) {
		s->stop = 1;
		pthread_join(s->th, NULL);
	}
	for (int i = 0; i < s->nq; i++) {
		free(s->q[i].key);
		free(s->q[i].val);
	}
	free(s->q);
	if (s->efd >= 0)
		close(s->efd);
	sev_src_clear(&s->src);
	pthread_mutex_destroy(&s->mu);
	eg_tls_free(s->tls);
	free(s->spec);
	free(s);
}

const char *setcd_spec(const struct ss_etcd *s)
{
	return s->spec;
}

/* Bring s->src up to date: with the watcher, what it queued; without, one
 * listing. The batch's base in *base. */
static int update(struct ss_etcd *s, uint64_t *base, struct md_err *err)
{
	*base = sev_begin(&s->src);
	if (s->th_started) {
		drain_queue(s);
	} else {
		uint64_t now = 0;
		int ret = 0;

		/* K6: an unchanged store is not listed again (the agent loads
		 * twice when the generation moved during its first load) */
		if (!s->listed || store_rev(s, &s->ccur, &now, err) || now != s->lrev)
			ret = apply_list(s, err);
		if (ret)
			return ret;
	}
	for (int k = 0; k < 2; k++)
		sev_commit(&s->src.set[k]);
	if (!s->listed) {
		pthread_mutex_lock(&s->mu);
		err->file[0] = 0;
		snprintf(err->msg, sizeof(err->msg), "waiting for etcd: %.200s", s->why);
		pthread_mutex_unlock(&s->mu);
		return -ENOTCONN;
	}
	return 0;
}

int setcd_load(struct ss_etcd *s, struct md_state **out, struct md_err *err)
{
	uint64_t base;
	int ret = update(s, &base, err);

	return ret ? ret : sev_load(&s->src, out, err);
}

int setcd_load_delta(struct ss_etcd *s, struct md_state **io, uint64_t *token,
		     struct ss_delta *d, struct md_err *err)
{
	uint64_t base;
	int ret;

	memset(d, 0, sizeof(*d));
	ret = update(s, &base, err);
	return ret ? ret : sev_load_delta(&s->src, base, io, token, d, err);
}

int setcd_load_desired(struct ss_etcd *s, struct md_state **out, struct md_err *err)
{
	uint64_t base;
	int ret = update(s, &base, err);

	return ret ? ret : sev_load_set(&s->src, 0, out, err);
}

uint64_t setcd_generation(struct ss_etcd *s)
{
	return s->wrote > s->rev ? s->wrote : s->rev;	/* K8 */
}

int setcd_watch_fd(struct ss_etcd *s)
{
	if (s->th_started)
		return s->efd;
	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0)
		return -errno;
	s->wrev = s->listed ? s->rev : 0;	/* K3: resume after what is loaded */
	s->up = s->listed;
	if (pthread_create(&s->th, NULL, watcher, s)) {
		close(s->efd);
		s->efd = -1;
		return -EAGAIN;
	}
	s->th_started = true;
	return s->efd;
}

void setcd_watch_drain(struct ss_etcd *s)
{
	uint64_t v;

	if (s->efd >= 0 && read(s->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending */
	}
}

int setcd_health(struct ss_etcd *s, char *buf, size_t len)
{
	int ret = 0;

	if (!s->th_started)
		return 0;
	pthread_mutex_lock(&s->mu);
	if (!s->up) {
		snprintf(buf, len, "etcd unreachable: %s", s->why);
		ret = -ENOTCONN;
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

struct raw_ctx {
	ss_raw_fn fn;
	void *arg;
};

static int raw_one(void *arg, char *key, char *val, size_t len, uint64_t mod)
{
	struct raw_ctx *c = arg;
	struct md_state *st = NULL;
	struct md_err err;
	char *yaml = NULL;
	int ret;

	/* K7: shown as YAML, as stored by older versions (and as `get -o
	 * yaml` promises); a value that does not parse is shown as it is */
	if (len && val[0] == '{') {
		st = md_state_new();
		md_state_set_parse(st, MD_PARSE_KEEP_TREE);
		if (!md_state_add_buf(st, key, val, len, &err) && md_state_n_objects(st) == 1 &&
		    !md_state_obj_yaml(st, 0, &yaml, &len)) {
			free(val);
			val = yaml;
		}
		md_state_free(st);
	}
	ret = c->fn(c->arg, key, val, len, mod);

	free(key);
	free(val);
	return ret;
}

int setcd_list_raw(struct ss_etcd *s, ss_raw_fn fn, void *arg, struct md_err *err)
{
	struct raw_ctx c = { fn, arg };
	uint64_t rev;

	return list_each(s, &s->ccur, raw_one, &c, &rev, err);
}

/* ---- writes (K1, K2) ------------------------------------------------------ */

/* Take "  resourceVersion: X" out of metadata in an object's re-emitted
 * YAML (block style, two-space indent, ours): K2. *rv = X or 0. */
static void strip_rv(char *text, size_t *len, uint64_t *rv)
{
	char *md = strstr(text, "\nmetadata:\n"), *p;

	*rv = 0;
	if (!strncmp(text, "metadata:\n", 10))
		md = text - 1;
	if (!md)
		return;
	for (p = md + 11; *p == ' ';) {
		char *eol = strchr(p, '\n');

		if (!eol)
			eol = p + strlen(p);
		if (!strncmp(p, "  resourceVersion:", 18)) {
			const char *v = p + 18;

			while (*v == ' ' || *v == '"' || *v == '\'')
				v++;
			*rv = strtoull(v, NULL, 10);
			if (*eol)
				eol++;
			memmove(p, eol, strlen(eol) + 1);
			*len = strlen(text);
			return;
		}
		if (!*eol)
			break;
		p = eol + 1;
	}
}

struct stored {
	char **key;
	char **val;
	size_t *len;
	uint64_t *mod;
	int n, cap;
	uint64_t rev;
};

static void stored_free(struct stored *st)
{
	for (int i = 0; i < st->n; i++) {
		free(st->key[i]);
		free(st->val[i]);
	}
	free(st->key);
	free(st->val);
	free(st->len);
	free(st->mod);
	memset(st, 0, sizeof(*st));
}

static int stored_one(void *arg, char *key, char *val, size_t len, uint64_t mod)
{
	struct stored *st = arg;

	if (st->n == st->cap) {
		st->cap = st->cap ? 2 * st->cap : 256;
		st->key = zh_realloc(st->key, (size_t)st->cap * sizeof(*st->key));
		st->val = zh_realloc(st->val, (size_t)st->cap * sizeof(*st->val));
		st->len = zh_realloc(st->len, (size_t)st->cap * sizeof(*st->len));
		st->mod = zh_realloc(st->mod, (size_t)st->cap * sizeof(*st->mod));
	}
	st->key[st->n] = key;
	st->val[st->n] = val;
	st->len[st->n] = len;
	st->mod[st->n] = mod;
	st->n++;
	return 0;
}

static int stored_read(struct ss_etcd *s, struct stored *st, struct md_err *err)
{
	int ret = list_each(s, &s->ccur, stored_one, st, &st->rev, err);

	if (ret)
		stored_free(st);
	return ret;
}

/* etcd returns a range sorted by key bytes (strcmp order): bsearch. */
static int stored_find(const struct stored *st, const char *key)
{
	int lo = 0, hi = st->n - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(st->key[mid], key);

		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static int cmp_pstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Add the stored objects except skip[] to u: manifests, then runtime pods. */
static int stored_add(const struct stored *st, struct md_state *u, char *const *skip, int n_skip,
		      struct md_err *err)
{
	char **sorted = zh_calloc((size_t)n_skip + 1, sizeof(*sorted));
	int n_sorted = 0, ret = 0;

	for (int k = 0; k < n_skip; k++)
		if (skip[k])
			sorted[n_sorted++] = skip[k];
	qsort(sorted, (size_t)n_sorted, sizeof(*sorted), cmp_pstr);
	for (int pass = 0; !ret && pass < 2; pass++)
		for (int i = 0; !ret && i < st->n; i++) {
			const char *pfx = pass ? RPFX : MPFX;
			char name[600];

			if (strncmp(st->key[i], pfx, strlen(pfx)) ||
			    (!pass && !strncmp(st->key[i], RPFX, strlen(RPFX))))
				continue;
			if (bsearch(&st->key[i], sorted, (size_t)n_sorted, sizeof(*sorted), cmp_pstr))
				continue;
			snprintf(name, sizeof(name), "etcd:%s", st->key[i]);
			ret = md_state_add_buf(u, name, st->val[i], st->len[i], err);
		}
	free(sorted);
	return ret;
}

static void conflict(struct md_err *err, const struct md_obj_id *id, uint64_t given,
		     uint64_t now)
{
	snprintf(err->file, sizeof(err->file), "%s", id->file);
	err->line = id->line;
	snprintf(err->field, sizeof(err->field), "metadata.resourceVersion");
	snprintf(err->msg, sizeof(err->msg),
		 "conflict: %s %s%s%s has been modified (resourceVersion %llu, stored %llu); "
		 "get it again and reapply",
		 md_kind_name(id->kind), id->ns ? id->ns : "", id->ns ? "/" : "", id->name,
		 (unsigned long long)given, (unsigned long long)now);
}

/* The txn of the objects: compares first, then the puts/deletes. 1 when
 * etcd refused a compare, 0 when done. */
static int txn(struct ss_etcd *s, char **keys, char **texts, uint64_t *want_mod, int n,
	       bool del, struct md_err *err)
{
	struct jv *r = NULL;
	struct buf b;
	int ret;

	buf_init(&b, 0);
	buf_printf(&b, "{\"compare\":[");
	for (int i = 0, c = 0; i < n; i++) {
		if (!keys[i])
			continue;
		buf_printf(&b, "%s{\"key\":", c++ ? "," : "");
		put_b64(&b, keys[i], strlen(keys[i]));
		if (want_mod[i])
			buf_printf(&b, ",\"target\":\"MOD\",\"mod_revision\":\"%llu\",\"result\":\"EQUAL\"}",
				   (unsigned long long)want_mod[i]);
		else	/* absent */
			buf_printf(&b, ",\"target\":\"CREATE\",\"create_revision\":\"0\",\"result\":\"EQUAL\"}");
	}
	buf_printf(&b, "],\"success\":[");
	for (int i = 0, c = 0; i < n; i++) {
		if (!keys[i])
			continue;
		buf_printf(&b, "%s{\"%s\":{\"key\":", c++ ? "," : "",
			   del ? "request_delete_range" : "request_put");
		put_b64(&b, keys[i], strlen(keys[i]));
		if (!del) {
			buf_printf(&b, ",\"value\":");
			put_b64(&b, texts[i], strlen(texts[i]));
		}
		buf_printf(&b, "}}");
	}
	buf_printf(&b, "]}");
	buf_append(&b, "", 1);
	ret = call(s, "/v3/kv/txn", buf_head(&b), &r, err);
	buf_free(&b);
	if (ret)
		return ret;
	ret = jv_bool(jv_get(r, "succeeded")) ? 0 : 1;
	if (!ret)
		wrote(s, jv_u64(jv_get(jv_get(r, "header"), "revision"), 0));
	jv_free(r);
	return ret;
}

static int apply_once(struct ss_etcd *s, char *const *paths, int n_paths, const struct ss_opts *o,
		      struct md_err *err)
{
	struct md_state *u = md_state_new();
	struct stored st = {};
	char **keys = NULL, **texts = NULL;
	uint64_t *want = NULL;
	enum ss_event *ev = NULL;
	int ret, n_in = 0;

	ret = ss_read_inputs(u, MD_PARSE_KEEP_TREE, paths, n_paths, o, err);
	if (ret)
		goto out;
	n_in = md_state_n_objects(u);
	keys = zh_calloc((size_t)n_in + 1, sizeof(*keys));
	texts = zh_calloc((size_t)n_in + 1, sizeof(*texts));
	want = zh_calloc((size_t)n_in + 1, sizeof(*want));
	ev = zh_calloc((size_t)n_in + 1, sizeof(*ev));
	for (int i = 0; i < n_in; i++) {
		struct md_obj_id id;

		md_state_obj_id(u, i, &id);
		keys[i] = mkey(&id);
	}
	ret = stored_read(s, &st, err);
	if (!ret)
		ret = stored_add(&st, u, keys, n_in, err);
	if (!ret)
		ret = md_state_finish(u, err);
	for (int i = 0; !ret && i < n_in; i++) {
		struct md_obj_id id;
		uint64_t rv;
		size_t len;
		int k = stored_find(&st, keys[i]);

		md_state_obj_id(u, i, &id);
		if (md_state_obj_yaml(u, i, &texts[i], &len)) {
			snprintf(err->file, sizeof(err->file), "%s", id.file);
			err->line = id.line;
			snprintf(err->msg, sizeof(err->msg), "cannot re-emit the object as YAML");
			ret = -EINVAL;
			break;
		}
		strip_rv(texts[i], &len, &rv);
		{	/* K7: stored as JSON when JSON can say it exactly */
			char *json;
			size_t jl;

			if (!md_state_obj_json(u, i, &json, &jl)) {
				free(texts[i]);
				texts[i] = json;
				len = jl;
			}
		}
		want[i] = k >= 0 ? st.mod[k] : 0;
		if (rv && rv != want[i]) {	/* K2 */
			conflict(err, &id, rv, want[i]);
			ret = -EBUSY;
			break;
		}
		ev[i] = k < 0 ? SS_CREATED :
			st.len[k] == len && !memcmp(st.val[k], texts[i], len) ? SS_UNCHANGED :
										 SS_CONFIGURED;
		if (ev[i] == SS_UNCHANGED) {	/* not written: no new revision */
			free(keys[i]);
			keys[i] = NULL;
		}
	}
	if (!ret) {
		bool any = false;

		for (int i = 0; i < n_in; i++)
			any |= keys[i] != NULL;
		ret = any ? txn(s, keys, texts, want, n_in, false, err) : 0;
		if (!any)
			wrote(s, st.rev);
	}
	for (int i = 0; !ret && i < n_in; i++)
		ss_report_obj(o, ev[i], u, i);
	if (!ret)
		ss_report_ignored(o, u);
out:
	for (int i = 0; keys && i < n_in; i++) {
		free(keys[i]);
		free(texts[i]);
	}
	free(keys);
	free(texts);
	free(want);
	free(ev);
	stored_free(&st);
	md_state_free(u);
	return ret;
}

typedef int (*write_fn)(struct ss_etcd *, char *const *, int, const struct ss_opts *,
			struct md_err *);

/* K1: once() returns 1 when another writer changed one of its keys since
 * it read them: validate and write again from a fresh read (a stale
 * resourceVersion is then reported as a conflict). */
static int with_retries(struct ss_etcd *s, write_fn once, char *const *paths, int n_paths,
			const struct ss_opts *o, struct md_err *err)
{
	for (int i = 0; i < RETRIES; i++) {
		int ret = once(s, paths, n_paths, o, err);

		if (ret != 1)
			return ret;
	}
	err->file[0] = 0;
	snprintf(err->msg, sizeof(err->msg), "conflict: concurrent writers, retried %d times",
		 RETRIES);
	return -EBUSY;
}

int setcd_apply(struct ss_etcd *s, char *const *paths, int n_paths, const struct ss_opts *o,
		struct md_err *err)
{
	return with_retries(s, apply_once, paths, n_paths, o, err);
}

static int delete_once(struct ss_etcd *s, char *const *paths, int n_paths,
		       const struct ss_opts *o, struct md_err *err)
{
	struct md_state *in = md_state_new(), *u = NULL;
	struct stored st = {};
	char **keys = NULL;
	uint64_t *want = NULL;
	int ret, n_in = 0;

	ret = ss_read_inputs(in, MD_PARSE_IDENT_ONLY, paths, n_paths, o, err);
	if (ret)
		goto out;
	n_in = md_state_n_objects(in);
	keys = zh_calloc((size_t)n_in + 1, sizeof(*keys));
	want = zh_calloc((size_t)n_in + 1, sizeof(*want));
	ret = stored_read(s, &st, err);
	for (int i = 0; !ret && i < n_in; i++) {
		struct md_obj_id id;
		int k;

		md_state_obj_id(in, i, &id);
		keys[i] = mkey(&id);
		k = stored_find(&st, keys[i]);
		if (k >= 0) {
			want[i] = st.mod[k];
			continue;
		}
		snprintf(err->file, sizeof(err->file), "%s", id.file);
		err->line = id.line;
		snprintf(err->field, sizeof(err->field), "metadata.name");
		snprintf(err->msg, sizeof(err->msg), "%s %s%s%s not found", md_kind_name(id.kind),
			 id.ns ? id.ns : "", id.ns ? "/" : "", id.name);
		ret = -ENOENT;
	}
	if (ret)
		goto out;
	u = md_state_new();
	ret = stored_add(&st, u, keys, n_in, err);
	if (!ret)
		ret = md_state_finish(u, err);
	if (!ret)
		ret = txn(s, keys, NULL, want, n_in, true, err);
	for (int i = 0; !ret && i < n_in; i++)
		ss_report_obj(o, SS_DELETED, in, i);
	if (!ret)
		ss_report_ignored(o, in);
out:
	for (int i = 0; keys && i < n_in; i++)
		free(keys[i]);
	free(keys);
	free(want);
	stored_free(&st);
	md_state_free(u);
	md_state_free(in);
	return ret;
}

int setcd_delete(struct ss_etcd *s, char *const *paths, int n_paths, const struct ss_opts *o,
		 struct md_err *err)
{
	return with_retries(s, delete_once, paths, n_paths, o, err);
}

/* ---- runtime pods ---------------------------------------------------------- */

static int put_or_del(struct ss_etcd *s, const char *key, const char *val)
{
	struct md_err err = {};
	struct jv *r = NULL;
	struct buf b;
	int ret;

	buf_init(&b, 0);
	buf_printf(&b, "{\"key\":");
	put_b64(&b, key, strlen(key));
	if (val) {
		buf_printf(&b, ",\"value\":");
		put_b64(&b, val, strlen(val));
	}
	buf_printf(&b, "}");
	buf_append(&b, "", 1);
	ret = call(s, val ? "/v3/kv/put" : "/v3/kv/deleterange", buf_head(&b), &r, &err);
	buf_free(&b);
	if (ret)
		zh_warn("%s", err.msg);
	else
		wrote(s, jv_u64(jv_get(jv_get(r, "header"), "revision"), 0));
	jv_free(r);
	return ret;
}

int setcd_put_pod(struct ss_etcd *s, const char *ns, const char *name, const char *yaml)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	struct md_obj_id o;
	char key[600], *json = NULL;
	size_t jl;
	int ret;

	if (!ns || !name || md_check_dns_label(ns) || md_check_dns_subdomain(name)) {
		md_state_free(st);
		return -EINVAL;
	}
	snprintf(key, sizeof(key), RPFX "%s/%s", ns, name);
	md_state_set_parse(st, MD_PARSE_KEEP_TREE);
	ret = md_state_add_buf(st, key, yaml, strlen(yaml), &err);
	if (!ret && md_state_n_objects(st) == 1)
		md_state_obj_id(st, 0, &o);
	if (!ret && (md_state_n_objects(st) != 1 || o.kind != MD_K_POD || strcmp(o.ns, ns) ||
		     strcmp(o.name, name)))
		ret = -EINVAL;
	if (!ret && !md_state_obj_json(st, 0, &json, &jl))	/* K7 */
		yaml = json;
	md_state_free(st);
	if (ret) {
		zh_warn("ss_put_pod %s/%s: the YAML must be exactly one Pod of that name", ns, name);
		return ret;
	}
	ret = put_or_del(s, key, yaml);
	free(json);
	return ret;
}

int setcd_del_pod(struct ss_etcd *s, const char *ns, const char *name)
{
	char key[600];

	if (!ns || !name || md_check_dns_label(ns) || md_check_dns_subdomain(name))
		return -EINVAL;
	snprintf(key, sizeof(key), RPFX "%s/%s", ns, name);
	return put_or_del(s, key, NULL);
}
