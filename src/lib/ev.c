/* ev.c — event loop: fd table, timer heap, dispatch (contract in ev.h).
 *
 * Design notes.
 *
 * Invariants:
 *  1. files[fd].mask != 0 exactly when fd is registered with epoll.
 *  2. The epoll data of a registered fd is (gen << 32 | fd), where gen is
 *     files[fd].gen at registration. ev_del() bumps gen, so an event fetched
 *     before the delete carries a stale gen and is dropped at dispatch, even
 *     if the fd number was re-added meanwhile (the new registration has the
 *     new gen).
 *  3. heap[0..nheap) is a binary min-heap on (deadline, seq); every live timer
 *     slot t has slots[t].heap_idx its position in heap, and heap entries
 *     point back at their slot.
 *  4. A timer id is (slot gen << 32 | slot index + 1); a slot's gen grows each
 *     time the slot is reused, so an id names one timer for the loop's life.
 *  5. The timerfd is armed at heap top's deadline (armed_ns), or disarmed when
 *     the heap is empty; it is re-armed only when the top changes.
 *  6. Gathering (ev_set_gather): the before-poll hook is skipped in at most
 *     gather consecutive iterations (merged counts them), each one that
 *     follows an iteration which ran a callback and whose non-waiting poll
 *     found events; any other iteration runs the hook before it may sleep,
 *     so work the hook owes is late by at most gather short iterations and
 *     never waits across a sleep.
 *
 * Timer pass: take seq_limit = next_seq, then pop while the top is due and
 * was added before the pass (seq < seq_limit): a callback that re-adds a due
 * timer gets it run in the next iteration, so the loop cannot livelock.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zerohop/ev.h"
#include "zerohop/log.h"
#include "ev_epoll.h"

#define EV_TIMERFD_DATA UINT64_MAX	/* never a valid (gen << 32 | fd) */

struct ev_file {
	int mask;		/* EV_READ | EV_WRITE | EV_EDGE; 0 = free */
	uint32_t gen;		/* bumped by ev_del (invariant 2) */
	ev_file_cb *cb;
	void *arg;
};

struct ev_tslot {
	uint64_t deadline;
	uint64_t seq;		/* insertion order, breaks deadline ties */
	uint32_t gen;		/* invariant 4 */
	uint32_t heap_idx;	/* position in heap, or UINT32_MAX when free */
	ev_timer_cb *cb;
	void *arg;
	uint32_t next_free;	/* free list link (index + 1, 0 = end) */
};

struct ev_loop {
	int epfd, tfd;
	int stop;
	struct ev_file *files;
	int nfiles;
	struct ev_tslot *slots;
	uint32_t nslots, free_head;
	uint32_t *heap;		/* slot indices */
	uint32_t nheap;
	uint64_t next_seq;
	uint64_t armed_ns;	/* 0 = disarmed */
	ev_hook_cb *before_poll;
	void *before_poll_arg;
	ev_ready_cb *after_poll;
	void *after_poll_arg;
	uint64_t iter;
	uint64_t busy_ns;	/* poll without sleeping this long first */
	unsigned gather;	/* iterations in a row that may skip before_poll */
	unsigned merged;	/* ... that did (invariant 6) */
	int last_ran;		/* callbacks the previous iteration ran */
};

uint64_t ev_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static __thread uint64_t ev_turn_t;	/* ev_turn_ns(): set after each poll */

uint64_t ev_turn_ns(void)
{
	return ev_turn_t ? ev_turn_t : ev_now_ns();
}

struct ev_loop *ev_loop_new(int max_fds)
{
	struct ev_loop *loop = zh_calloc(1, sizeof(*loop));
	int err;

	loop->nfiles = max_fds > 16 ? max_fds : 16;
	loop->files = zh_calloc(loop->nfiles, sizeof(*loop->files));
	err = ev_api_create(&loop->epfd, &loop->tfd);
	if (err)
		goto err_free;
	err = ev_api_ctl(loop->epfd, loop->tfd, 0, EV_READ, EV_TIMERFD_DATA);
	if (err)
		goto err_close;
	loop->next_seq = 1;
	return loop;

err_close:
	ev_api_close(loop->epfd, loop->tfd);
err_free:
	free(loop->files);
	free(loop);
	errno = -err;
	return NULL;
}

void ev_loop_free(struct ev_loop *loop)
{
	if (!loop)
		return;
	ev_api_close(loop->epfd, loop->tfd);
	free(loop->files);
	free(loop->slots);
	free(loop->heap);
	free(loop);
}

int ev_add(struct ev_loop *loop, int fd, int mask, ev_file_cb *cb, void *arg)
{
	struct ev_file *f;
	int err;

	if (fd < 0 || !(mask & (EV_READ | EV_WRITE)) || !cb)
		return -EINVAL;
	if (fd >= loop->nfiles) {
		int n = loop->nfiles;

		while (n <= fd)
			n *= 2;
		loop->files = zh_realloc(loop->files, (size_t)n * sizeof(*loop->files));
		memset(loop->files + loop->nfiles, 0, (size_t)(n - loop->nfiles) * sizeof(*loop->files));
		loop->nfiles = n;
	}
	f = &loop->files[fd];
	mask &= EV_READ | EV_WRITE | EV_EDGE;
	if (mask != f->mask) {
		err = ev_api_ctl(loop->epfd, fd, f->mask, mask, (uint64_t)f->gen << 32 | (uint32_t)fd);
		if (err)
			return err;
	}
	f->mask = mask;
	f->cb = cb;
	f->arg = arg;
	return 0;
}

void ev_del(struct ev_loop *loop, int fd)
{
	struct ev_file *f;

	if (fd < 0 || fd >= loop->nfiles || !loop->files[fd].mask)
		return;
	f = &loop->files[fd];
	/* EBADF/ENOENT when the caller closed fd first: the kernel already
	 * dropped it from the set, which is all we wanted. */
	ev_api_ctl(loop->epfd, fd, f->mask, 0, 0);
	f->mask = 0;
	f->cb = NULL;
	f->arg = NULL;
	f->gen++;
}

/* ---- timers: binary min-heap of slot indices ---- */

static int t_less(const struct ev_loop *loop, uint32_t a, uint32_t b)
{
	const struct ev_tslot *x = &loop->slots[a], *y = &loop->slots[b];

	if (x->deadline != y->deadline)
		return x->deadline < y->deadline;
	return x->seq < y->seq;
}

static void t_place(struct ev_loop *loop, uint32_t i, uint32_t s)
{
	loop->heap[i] = s;
	loop->slots[s].heap_idx = i;
}

static void t_sift_up(struct ev_loop *loop, uint32_t i)
{
	uint32_t s = loop->heap[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (!t_less(loop, s, loop->heap[p]))
			break;
		t_place(loop, i, loop->heap[p]);
		i = p;
	}
	t_place(loop, i, s);
}

static void t_sift_down(struct ev_loop *loop, uint32_t i)
{
	uint32_t s = loop->heap[i];

	for (;;) {
		uint32_t l = 2 * i + 1, c;

		if (l >= loop->nheap)
			break;
		c = l;
		if (l + 1 < loop->nheap && t_less(loop, loop->heap[l + 1], loop->heap[l]))
			c = l + 1;
		if (!t_less(loop, loop->heap[c], s))
			break;
		t_place(loop, i, loop->heap[c]);
		i = c;
	}
	t_place(loop, i, s);
}

static void t_heap_remove(struct ev_loop *loop, uint32_t i)
{
	uint32_t last = loop->heap[--loop->nheap];

	if (i == loop->nheap)
		return;
	t_place(loop, i, last);
	if (i > 0 && t_less(loop, last, loop->heap[(i - 1) / 2]))
		t_sift_up(loop, i);
	else
		t_sift_down(loop, i);
}

static void t_free_slot(struct ev_loop *loop, uint32_t s)
{
	loop->slots[s].heap_idx = UINT32_MAX;
	loop->slots[s].cb = NULL;
	loop->slots[s].next_free = loop->free_head;
	loop->free_head = s + 1;
}

/* Invariant 5: keep the timerfd at the heap top's deadline. */
static void t_rearm(struct ev_loop *loop)
{
	uint64_t want = 0;

	if (loop->nheap) {
		want = loop->slots[loop->heap[0]].deadline;
		if (!want)
			want = 1;
	}
	if (want == loop->armed_ns)
		return;
	if (ev_api_timer_arm(loop->tfd, want) == 0)
		loop->armed_ns = want;
}

uint64_t ev_timer_add(struct ev_loop *loop, uint64_t deadline_ns, ev_timer_cb *cb, void *arg)
{
	struct ev_tslot *t;
	uint32_t s;

	if (loop->free_head) {
		s = loop->free_head - 1;
		loop->free_head = loop->slots[s].next_free;
	} else {
		uint32_t n = loop->nslots ? loop->nslots * 2 : 64;

		loop->slots = zh_realloc(loop->slots, (size_t)n * sizeof(*loop->slots));
		loop->heap = zh_realloc(loop->heap, (size_t)n * sizeof(*loop->heap));
		memset(loop->slots + loop->nslots, 0, (size_t)(n - loop->nslots) * sizeof(*loop->slots));
		/* Slots nslots+1 .. n-1 go on the free list; nslots is ours. */
		for (s = n - 1; s > loop->nslots; s--) {
			loop->slots[s].heap_idx = UINT32_MAX;
			loop->slots[s].next_free = loop->free_head;
			loop->free_head = s + 1;
		}
		s = loop->nslots;
		loop->nslots = n;
	}
	t = &loop->slots[s];
	t->gen++;
	if (!t->gen)	/* keep ids > 0 even after 2^32 reuses of one slot */
		t->gen = 1;
	t->deadline = deadline_ns;
	t->seq = loop->next_seq++;
	t->cb = cb;
	t->arg = arg;
	loop->heap[loop->nheap] = s;
	t->heap_idx = loop->nheap++;
	t_sift_up(loop, t->heap_idx);
	t_rearm(loop);
	return (uint64_t)t->gen << 32 | (s + 1);
}

void ev_timer_del(struct ev_loop *loop, uint64_t id)
{
	uint32_t s = (uint32_t)id - 1;
	struct ev_tslot *t;

	if (!(uint32_t)id || s >= loop->nslots)
		return;
	t = &loop->slots[s];
	if (t->heap_idx == UINT32_MAX || t->gen != (uint32_t)(id >> 32))
		return;
	t_heap_remove(loop, t->heap_idx);
	t_free_slot(loop, s);
	t_rearm(loop);
}

static int run_timers(struct ev_loop *loop)
{
	uint64_t now = ev_now_ns(), seq_limit = loop->next_seq;
	int ran = 0;

	while (loop->nheap) {
		uint32_t s = loop->heap[0];
		struct ev_tslot *t = &loop->slots[s];
		ev_timer_cb *cb;
		void *arg;
		uint64_t id;

		if (t->deadline > now || t->seq >= seq_limit)
			break;
		cb = t->cb;
		arg = t->arg;
		id = (uint64_t)t->gen << 32 | (s + 1);
		t_heap_remove(loop, 0);
		t_free_slot(loop, s);
		cb(loop, id, arg);
		ran++;
	}
	return ran;
}

void ev_set_before_poll(struct ev_loop *loop, ev_hook_cb *cb, void *arg)
{
	loop->before_poll = cb;
	loop->before_poll_arg = arg;
}

void ev_set_after_poll(struct ev_loop *loop, ev_ready_cb *cb, void *arg)
{
	loop->after_poll = cb;
	loop->after_poll_arg = arg;
}

void ev_set_busy_poll(struct ev_loop *loop, uint64_t ns)
{
	loop->busy_ns = ns;
}

void ev_set_gather(struct ev_loop *loop, unsigned turns)
{
	loop->gather = turns;
	loop->merged = 0;
}

uint64_t ev_iteration(const struct ev_loop *loop)
{
	return loop->iter;
}

/* What evs[i] fires, or 0 (the timerfd, a stale or uninterested fd). */
static int ev_fire(struct ev_loop *loop, uint64_t d, int got)
{
	int fd = (int)(uint32_t)d;
	struct ev_file *f;

	if (d == EV_TIMERFD_DATA || fd >= loop->nfiles)
		return 0;
	f = &loop->files[fd];
	/* Invariant 2: a stale event for a deleted (maybe re-added) fd. */
	if (!f->mask || f->gen != (uint32_t)(d >> 32))
		return 0;
	if (got & EV_ERROR)
		got |= f->mask & (EV_READ | EV_WRITE);
	got &= f->mask | EV_ERROR;
	return got & (EV_READ | EV_WRITE | EV_ERROR) ? got : 0;
}

static void ev_after_poll(struct ev_loop *loop, const struct ev_api_event *evs, int n)
{
	struct ev_ready r[256];
	int i, k = 0;

	for (i = 0; i < n; i++) {
		int fire = ev_fire(loop, evs[i].data, evs[i].events), fd = (int)(uint32_t)evs[i].data;

		if (fire)
			r[k++] = (struct ev_ready){ .fd = fd, .events = fire,
						    .cb = loop->files[fd].cb,
						    .arg = loop->files[fd].arg };
	}
	if (k)
		loop->after_poll(loop, r, k, loop->after_poll_arg);
}

int ev_run_once(struct ev_loop *loop, int timeout_ms)
{
	struct ev_api_event evs[256];
	int i, n, ran = 0, timer_seen = 0;

	loop->iter++;
	/* Invariant 6: after a turn that did something, events already
	 * ready join it before the hook sends what it queued, so its sends
	 * carry theirs too (fewer, larger sends and fewer sleeps per
	 * request); with nothing ready the hook runs and the loop may sleep. */
	if (loop->merged < loop->gather && loop->last_ran > 0 && loop->before_poll) {
		n = ev_api_poll(loop->epfd, evs, 256, 0);
		if (n > 0) {
			loop->merged++;
			goto ready;
		}
	}
	loop->merged = 0;
	if (loop->before_poll)
		loop->before_poll(loop, loop->before_poll_arg);
	n = ev_api_poll(loop->epfd, evs, 256, loop->busy_ns ? 0 : timeout_ms);
	if (n == 0 && loop->busy_ns && timeout_ms != 0) {
		uint64_t end = ev_now_ns() + loop->busy_ns;

		while (n == 0 && ev_now_ns() < end)
			n = ev_api_poll(loop->epfd, evs, 256, 0);
		if (n == 0)
			n = ev_api_poll(loop->epfd, evs, 256, timeout_ms);
	}
ready:
	if (n < 0)
		return n;
	ev_turn_t = ev_now_ns();
	if (loop->after_poll)
		ev_after_poll(loop, evs, n);
	for (i = 0; i < n; i++) {
		uint64_t d = evs[i].data;
		int fd = (int)(uint32_t)d, fire;

		if (d == EV_TIMERFD_DATA) {
			timer_seen = 1;
			continue;
		}
		fire = ev_fire(loop, d, evs[i].events);
		if (!fire)
			continue;
		loop->files[fd].cb(loop, fd, fire, loop->files[fd].arg);
		ran++;
	}
	if (timer_seen) {
		ev_api_timer_drain(loop->tfd);
		loop->armed_ns = 0;	/* expired: a one-shot timerfd is disarmed now */
	}
	/* Timers are checked every iteration, not only when the timerfd fired:
	 * a deadline can pass while file callbacks run. */
	if (loop->nheap && loop->slots[loop->heap[0]].deadline <= ev_now_ns())
		ran += run_timers(loop);
	t_rearm(loop);
	loop->last_ran = ran;
	return ran;
}

int ev_run(struct ev_loop *loop)
{
	int n;

	loop->stop = 0;
	while (!loop->stop) {
		n = ev_run_once(loop, -1);
		if (n < 0)
			return n;
	}
	return 0;
}

void ev_stop(struct ev_loop *loop)
{
	loop->stop = 1;
}
