/* test_ev.c — the event loop against the real kernel: timers (order,
 * precision, re-arm, delete), fd readiness, deletes inside callbacks. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/ev.h"

#define MS 1000000ull
#define US 1000ull

static int order[32], norder;

static void rec_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	order[norder++] = (int)(intptr_t)arg;
}

static void stop_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	ev_stop(loop);
}

static void test_order(void)
{
	struct ev_loop *loop = ev_loop_new(64);
	uint64_t now = ev_now_ns();
	int want[] = { 1, 2, 3, 4, 5, 6 }, i, same = 1;

	norder = 0;
	/* Added out of order; 4 and 5 share a deadline: insertion order wins. */
	ev_timer_add(loop, now + 3 * MS, rec_cb, (void *)3);
	ev_timer_add(loop, now + 1 * MS, rec_cb, (void *)1);
	ev_timer_add(loop, now + 6 * MS, rec_cb, (void *)6);
	ev_timer_add(loop, now + 4 * MS, rec_cb, (void *)4);
	ev_timer_add(loop, now + 4 * MS, rec_cb, (void *)5);
	ev_timer_add(loop, now + 2 * MS, rec_cb, (void *)2);
	ev_timer_add(loop, now + 7 * MS, stop_cb, NULL);
	is_int(ev_run(loop), 0, "ev_run returns 0 after ev_stop");
	is_int(norder, 6, "all six timers fired");
	for (i = 0; i < 6; i++)
		same &= order[i] == want[i];
	ok(same, "timers fire in deadline order, ties in insertion order");
	ev_loop_free(loop);
}

static uint64_t late[40];
static int nlate;

struct prec {
	uint64_t deadline;
	int left;
};

static void prec_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	struct prec *p = arg;
	uint64_t now = ev_now_ns();

	late[nlate++] = now >= p->deadline ? now - p->deadline : UINT64_MAX;
	if (--p->left == 0) {
		ev_stop(loop);
		return;
	}
	/* Re-arm from inside the callback: 300 us ahead. */
	p->deadline = now + 300 * US;
	ev_timer_add(loop, p->deadline, prec_cb, p);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_precision_rearm(void)
{
	struct ev_loop *loop = ev_loop_new(64);
	struct prec p = { .left = 21 };
	int i, never_early = 1;

	nlate = 0;
	p.deadline = ev_now_ns() + 300 * US;
	ev_timer_add(loop, p.deadline, prec_cb, &p);
	ev_run(loop);
	is_int(nlate, 21, "re-armed timer fired 21 times");
	for (i = 0; i < nlate; i++)
		never_early &= late[i] != UINT64_MAX;
	ok(never_early, "no timer fired before its deadline");
	qsort(late, nlate, sizeof(late[0]), cmp_u64);
	ok(late[nlate / 2] < 1 * MS, "median lateness under 1 ms (sub-millisecond timers)");
	diag("lateness: min %llu ns, median %llu ns, max %llu ns", (unsigned long long)late[0],
	     (unsigned long long)late[nlate / 2], (unsigned long long)late[nlate - 1]);
	ev_loop_free(loop);
}

static int fired_deleted;

static void must_not_fire(struct ev_loop *loop, uint64_t id, void *arg)
{
	fired_deleted++;
}

static void test_timer_delete(void)
{
	struct ev_loop *loop = ev_loop_new(64);
	uint64_t now = ev_now_ns(), a, b, c;

	fired_deleted = 0;
	norder = 0;
	a = ev_timer_add(loop, now + 1 * MS, must_not_fire, NULL);
	b = ev_timer_add(loop, now + 2 * MS, rec_cb, (void *)7);
	c = ev_timer_add(loop, now + 500 * US, must_not_fire, NULL);
	ok(a > 0 && b > 0 && c > 0 && a != b && b != c && a != c, "timer ids are > 0 and distinct");
	ev_timer_del(loop, a);
	ev_timer_del(loop, c);	/* the heap top: timerfd must re-arm at b */
	ev_timer_add(loop, now + 5 * MS, stop_cb, NULL);
	ev_run(loop);
	is_int(fired_deleted, 0, "deleted timers never fire");
	is_int(norder, 1, "the kept timer fired");
	ev_timer_del(loop, b);	/* fired: no-op */
	ev_timer_del(loop, 12345678);	/* unknown: no-op */
	/* A reused slot gets a new id: the old id must not delete the new timer. */
	c = ev_timer_add(loop, ev_now_ns() + 1 * MS, rec_cb, (void *)8);
	ok(c != a && c != b, "ids are not reused");
	ev_timer_del(loop, a);
	ev_timer_add(loop, ev_now_ns() + 3 * MS, stop_cb, NULL);
	ev_run(loop);
	is_int(norder, 2, "stale id did not delete a new timer in a reused slot");
	ev_loop_free(loop);
}

static int livelock_runs;

static void relive_cb(struct ev_loop *loop, uint64_t id, void *arg)
{
	livelock_runs++;
	ev_timer_add(loop, 0, relive_cb, NULL);	/* always due */
}

static void test_no_livelock(void)
{
	struct ev_loop *loop = ev_loop_new(64);
	int n;

	livelock_runs = 0;
	ev_timer_add(loop, 0, relive_cb, NULL);
	n = ev_run_once(loop, 100);
	is_int(n, 1, "a due timer re-added from its callback waits for the next iteration");
	n = ev_run_once(loop, 100);
	is_int(livelock_runs, 2, "and then fires");
	ev_loop_free(loop);
}

struct fdt {
	int reads, writes;
	int other_fd;		/* deleted by our callback */
	int *fds;		/* the pair that other_fd belongs to */
	int stale_hits;
};

static void read_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct fdt *t = arg;
	char b[64];

	if (events & EV_READ) {
		t->reads++;
		if (read(fd, b, sizeof(b)) < 0)
			t->reads += 1000;
	}
	if (events & EV_WRITE)
		t->writes++;
}

static void stale_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct fdt *t = arg;

	t->stale_hits++;
}

static void deleter_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	struct fdt *t = arg;
	int sv[2], victim = t->other_fd;
	char b[64];

	if (read(fd, b, sizeof(b)) < 0)
		t->reads += 1000;
	t->reads++;
	if (victim < 0)
		return;
	/* Delete the other readable fd, close it, and re-use its number for a
	 * fresh socket registered with another callback: the event already
	 * fetched for the old one must not reach the new registration. */
	ev_del(loop, victim);
	close(victim);
	close(t->fds[1]);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return;
	if (sv[0] != victim) {	/* make the number match */
		dup2(sv[0], victim);
		close(sv[0]);
	}
	t->fds[0] = victim;
	t->fds[1] = sv[1];
	ev_add(loop, victim, EV_READ, stale_cb, t);
	t->other_fd = -1;
}

static void test_fds(void)
{
	struct ev_loop *loop = ev_loop_new(4);	/* small: the table must grow */
	struct fdt t = { 0 };
	int sv[2], n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
		ok(0, "socketpair: %s", strerror(errno));
		return;
	}
	is_int(ev_add(loop, sv[0], EV_READ | EV_WRITE, read_cb, &t), 0, "ev_add read|write");
	n = ev_run_once(loop, 100);
	ok(n == 1 && t.writes == 1 && t.reads == 0, "writable, not readable at first");
	is_int(ev_add(loop, sv[0], EV_READ, read_cb, &t), 0, "ev_add again replaces the mask");
	n = ev_run_once(loop, 20);
	is_int(n, 0, "nothing ready with read interest only");
	if (write(sv[1], "x", 1) != 1)
		diag("write failed");
	n = ev_run_once(loop, 100);
	ok(n == 1 && t.reads == 1, "readable after the peer writes");
	close(sv[1]);
	n = ev_run_once(loop, 100);
	ok(n == 1 && t.reads == 2, "peer close delivers a read event (EOF)");
	ev_del(loop, sv[0]);
	ev_del(loop, sv[0]);	/* twice: no-op */
	close(sv[0]);
	is_int(ev_add(loop, -1, EV_READ, read_cb, &t), -EINVAL, "negative fd is -EINVAL");
	is_int(ev_add(loop, 0, 0, read_cb, &t), -EINVAL, "empty mask is -EINVAL");
	ev_loop_free(loop);
}

static int hook_calls;

/* The hook writes what the same iteration's poll then finds readable. */
static void hook_cb(struct ev_loop *loop, void *arg)
{
	(void)loop;
	hook_calls++;
	if (write(*(int *)arg, "h", 1) != 1)
		diag("hook write failed");
}

static void test_before_poll(void)
{
	struct ev_loop *loop = ev_loop_new(4);
	struct fdt t = { 0 };
	int sv[2], n;
	char c;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
		ok(0, "socketpair: %s", strerror(errno));
		return;
	}
	ev_add(loop, sv[0], EV_READ, read_cb, &t);
	ev_set_before_poll(loop, hook_cb, &sv[1]);
	n = ev_run_once(loop, 100);
	ok(n == 1 && hook_calls == 1 && t.reads == 1,
	   "the before-poll hook runs first: its send is read in the same iteration");
	while (read(sv[0], &c, 1) == 1)
		;
	ev_set_before_poll(loop, NULL, NULL);
	n = ev_run_once(loop, 20);
	ok(n == 0 && hook_calls == 1, "a removed hook no longer runs");
	ev_del(loop, sv[0]);
	close(sv[0]);
	close(sv[1]);
	ev_loop_free(loop);
}

/* Busy polling first polls without sleeping, then still honours the
 * timeout, and delivers what arrives either way. */
static void test_busy_poll(void)
{
	struct ev_loop *loop = ev_loop_new(4);
	struct fdt t = { 0 };
	uint64_t t0, el;
	int sv[2], n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
		ok(0, "socketpair: %s", strerror(errno));
		return;
	}
	ev_add(loop, sv[0], EV_READ, read_cb, &t);
	ev_set_busy_poll(loop, 2 * MS);
	t0 = ev_now_ns();
	n = ev_run_once(loop, 30);
	el = ev_now_ns() - t0;
	ok(n == 0 && el >= 30 * MS, "busy poll: nothing ready, the wait still lasts its timeout (%llu us)",
	   (unsigned long long)(el / US));
	if (write(sv[1], "x", 1) != 1)
		diag("write failed");
	t0 = ev_now_ns();
	n = ev_run_once(loop, 1000);
	el = ev_now_ns() - t0;
	ok(n == 1 && t.reads == 1 && el < 500 * MS, "busy poll: a ready socket is served at once");
	is_int(ev_run_once(loop, 0), 0, "busy poll: timeout 0 does not spin");
	ev_del(loop, sv[0]);
	close(sv[0]);
	close(sv[1]);
	ev_loop_free(loop);
}

static int count_hook_calls;

static void count_hook(struct ev_loop *loop, void *arg)
{
	(void)loop;
	(void)arg;
	count_hook_calls++;
}

/* Gathering: after a turn that ran a callback, events already ready are
 * dispatched before the hook, in at most `turns` turns in a row; with
 * nothing ready the hook runs before the wait. */
static void test_gather(void)
{
	struct ev_loop *loop = ev_loop_new(4);
	struct fdt t = { 0 };
	int sv[2], n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
		ok(0, "socketpair: %s", strerror(errno));
		return;
	}
	count_hook_calls = 0;
	ev_add(loop, sv[0], EV_READ, read_cb, &t);
	ev_set_before_poll(loop, count_hook, NULL);
	ev_set_gather(loop, 1);
	if (write(sv[1], "a", 1) != 1)
		diag("write failed");
	n = ev_run_once(loop, 100);
	ok(n == 1 && count_hook_calls == 1, "gather: the first turn runs the hook, then its callback");
	if (write(sv[1], "b", 1) != 1)
		diag("write failed");
	n = ev_run_once(loop, 100);
	ok(n == 1 && t.reads == 2 && count_hook_calls == 1,
	   "gather: a ready event after a busy turn is served before the hook");
	if (write(sv[1], "c", 1) != 1)
		diag("write failed");
	n = ev_run_once(loop, 100);
	ok(n == 1 && t.reads == 3 && count_hook_calls == 2,
	   "gather: at most one turn in a row skips it");
	n = ev_run_once(loop, 20);
	ok(n == 0 && count_hook_calls == 3, "gather: nothing ready, the hook runs before the wait");
	n = ev_run_once(loop, 20);
	ok(n == 0 && count_hook_calls == 4, "gather: after an idle turn the hook runs first");
	ev_set_gather(loop, 0);
	if (write(sv[1], "d", 1) != 1)
		diag("write failed");
	ev_run_once(loop, 100);
	if (write(sv[1], "e", 1) != 1)
		diag("write failed");
	ev_run_once(loop, 100);
	ok(t.reads == 5 && count_hook_calls == 6, "gather off: the hook runs every turn");
	ev_del(loop, sv[0]);
	close(sv[0]);
	close(sv[1]);
	ev_loop_free(loop);
}

static void test_del_in_callback(void)
{
	struct ev_loop *loop = ev_loop_new(64);
	int a[2], b[2], n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b) < 0) {
		ok(0, "socketpair");
		return;
	}
	/* Both readable before the iteration: epoll returns both events; the
	 * first callback deletes the other. Which runs first depends on epoll,
	 * so each deletes the other. */
	if (write(a[1], "a", 1) != 1 || write(b[1], "b", 1) != 1)
		diag("write failed");
	struct fdt ta = { .other_fd = b[0], .fds = b }, tb = { .other_fd = a[0], .fds = a };

	ev_add(loop, a[0], EV_READ, deleter_cb, &ta);
	ev_add(loop, b[0], EV_READ, deleter_cb, &tb);
	n = ev_run_once(loop, 100);
	is_int(n, 1, "only one callback ran: the other fd was deleted inside it");
	is_int(ta.stale_hits + tb.stale_hits, 0,
	       "the stale event was not dispatched to the fd number's new registration");
	/* The new registration works normally afterwards. */
	{
		struct fdt *w = ta.other_fd < 0 ? &ta : &tb;

		if (write(w->fds[1], "z", 1) != 1)
			diag("write failed");
		n = ev_run_once(loop, 100);
		ok(n == 1 && w->stale_hits == 1, "the re-added fd gets its own events");
	}
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	ev_loop_free(loop);
}

static void self_del_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	int *hits = arg;

	(*hits)++;
	ev_del(loop, fd);
}

static void test_self_delete(void)
{
	struct ev_loop *loop = ev_loop_new(64);
	int sv[2], hits = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return;
	/* read|write both ready: one callback with both bits, then deleted. */
	if (write(sv[1], "x", 1) != 1)
		diag("write failed");
	ev_add(loop, sv[0], EV_READ | EV_WRITE, self_del_cb, &hits);
	ev_run_once(loop, 100);
	ev_run_once(loop, 20);
	is_int(hits, 1, "a callback may delete its own fd; no further events");
	close(sv[0]);
	close(sv[1]);
	ev_loop_free(loop);
}

static void count_cb(struct ev_loop *loop, int fd, int events, void *arg)
{
	(*(int *)arg)++;
}

static void test_edge(void)
{
	struct ev_loop *loop = ev_loop_new(64);
	int sv[2], lt = 0, et = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return;
	if (write(sv[1], "x", 1) != 1)
		diag("write failed");
	/* Never read: level-triggered fires every iteration, edge once. */
	ev_add(loop, sv[0], EV_READ, count_cb, &lt);
	ev_run_once(loop, 50);
	ev_run_once(loop, 50);
	is_int(lt, 2, "level-triggered: unread data fires each iteration");
	ev_add(loop, sv[0], EV_READ | EV_EDGE, count_cb, &et);
	ev_run_once(loop, 50);
	ev_run_once(loop, 20);
	if (write(sv[1], "y", 1) != 1)
		diag("write failed");
	ev_run_once(loop, 50);
	is_int(et, 2, "edge-triggered: once per new arrival");
	close(sv[0]);
	close(sv[1]);
	ev_loop_free(loop);
}

int main(void)
{
	test_order();
	test_precision_rearm();
	test_timer_delete();
	test_no_livelock();
	test_fds();
	test_before_poll();
	test_busy_poll();
	test_gather();
	test_del_in_callback();
	test_self_delete();
	test_edge();
	return done_testing();
}
