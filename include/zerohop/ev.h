/* ev.h — the event loop shared by the echo server, the load generator and the
 * proxy (prefix ev_). Redis ae.h in spirit: one loop per thread, file events
 * on epoll, timers with nanosecond deadlines on CLOCK_MONOTONIC (timerfd), so
 * a load generator can schedule sends at microsecond precision.
 *
 * Contract:
 * - A loop is used from one thread only. Callbacks run on that thread.
 * - ev_add() registers interest in fd for mask (EV_READ|EV_WRITE); calling it
 *   again replaces the mask and callback. ev_del() removes fd; it is safe to
 *   call from inside any callback, including the fd's own: an event already
 *   fetched from epoll for a deleted fd is never dispatched, even when the fd
 *   number is re-added within the same iteration (a generation per slot).
 *   ev_del() does not close fd; the caller closes it after ev_del().
 * - The fd table grows on demand; max_fds is only the initial size.
 * - Level-triggered by default; EV_EDGE asks for edge-triggered delivery.
 * - A file callback gets the ready subset of EV_READ|EV_WRITE, plus EV_ERROR
 *   when epoll reported EPOLLERR/EPOLLHUP (EV_READ is then set too when read
 *   interest was registered, so a read() sees the EOF or error).
 * - Timers are one-shot: the callback may re-arm with ev_timer_add(). Ids are
 *   never reused within a loop's life; ev_timer_del() of a fired or unknown id
 *   is a no-op. Timers with equal deadlines fire in the order they were added.
 *   A timer added from a timer callback with a past deadline fires in the next
 *   iteration, never in the same pass (no livelock).
 * - ev_set_before_poll() installs one hook run at the start of every
 *   iteration (but see ev_set_gather), before the loop waits (Redis's
 *   beforeSleep): where work the previous iterations' callbacks batched
 *   (deferred sends) is flushed. It must leave nothing that needs doing
 *   before the next event.
 * - ev_set_after_poll() installs one hook that sees the whole batch of
 *   ready file events after the wait and before any callback runs (where a
 *   proxy receives on every ready socket with one batched call). The
 *   callbacks then run as usual, and still only for files not deleted
 *   meanwhile. ev_iteration() numbers iterations, so a callback can tell
 *   that the hook already served its file in this one.
 * - ev_set_busy_poll(ns): before sleeping in a wait, the loop polls without
 *   sleeping for up to ns; a wait with nothing ready can then last up to ns
 *   longer than its timeout. A timeout of 0 never spins.
 * - ev_set_gather(turns): after an iteration that ran a callback, the next
 *   one first polls without waiting; if events are ready it dispatches them
 *   without running the before-poll hook first, in at most turns
 *   iterations in a row (0: off, the default). The hook's batched work
 *   (sends) then carries what those events add; it still runs before any
 *   wait that may sleep.
 * - ev_run() returns 0 after ev_stop(), or -errno on a fatal epoll error.
 *   ev_stop() takes effect after the current iteration's callbacks.
 */
#ifndef ZH_EV_H
#define ZH_EV_H

#include <stdint.h>

#define EV_READ  0x1
#define EV_WRITE 0x2
#define EV_EDGE  0x4
#define EV_ERROR 0x8	/* delivered only: EPOLLERR/EPOLLHUP seen */

struct ev_loop;

typedef void ev_file_cb(struct ev_loop *loop, int fd, int events, void *arg);
typedef void ev_timer_cb(struct ev_loop *loop, uint64_t id, void *arg);
typedef void ev_hook_cb(struct ev_loop *loop, void *arg);

/* One ready file event, as the after-poll hook sees it. */
struct ev_ready {
	int fd;
	int events;		/* what its callback will get */
	ev_file_cb *cb;
	void *arg;
};
typedef void ev_ready_cb(struct ev_loop *loop, const struct ev_ready *r, int n, void *arg);

/* Monotonic clock in nanoseconds. */
uint64_t ev_now_ns(void);

/* The monotonic time at which this thread's loop last returned from its
 * poll (ev_run_once), or ev_now_ns() before the first turn: one clock read
 * per turn instead of one per call (a vDSO clock read costs ~50 ns on
 * this VM, and the proxy read it ~12 times per request). Coarse by the
 * length of a turn: for stamps and statistics, never for deadlines. */
uint64_t ev_turn_ns(void);

struct ev_loop *ev_loop_new(int max_fds);	/* aborts on out-of-memory; NULL + errno if
						 * epoll/timerfd creation fails */
void ev_loop_free(struct ev_loop *loop);	/* does not close registered fds */

/* 0, or -EINVAL (bad fd/mask), or -errno from epoll_ctl. */
int ev_add(struct ev_loop *loop, int fd, int mask, ev_file_cb *cb, void *arg);
void ev_del(struct ev_loop *loop, int fd);

/* Fire cb at absolute monotonic time deadline_ns. Returns a timer id (> 0). */
uint64_t ev_timer_add(struct ev_loop *loop, uint64_t deadline_ns, ev_timer_cb *cb, void *arg);
void ev_timer_del(struct ev_loop *loop, uint64_t id);

/* One hook per loop; cb NULL removes it. */
void ev_set_before_poll(struct ev_loop *loop, ev_hook_cb *cb, void *arg);
void ev_set_after_poll(struct ev_loop *loop, ev_ready_cb *cb, void *arg);
uint64_t ev_iteration(const struct ev_loop *loop);	/* starts at 1 in the first */
/* Before sleeping in a wait, poll without sleeping for up to ns (0: off). */
void ev_set_busy_poll(struct ev_loop *loop, uint64_t ns);
/* Let up to turns iterations in a row skip the before-poll hook when events
 * are already ready (0: off). */
void ev_set_gather(struct ev_loop *loop, unsigned turns);

int ev_run(struct ev_loop *loop);
void ev_stop(struct ev_loop *loop);

/* Run one iteration: wait at most timeout_ms (-1 = until an event or timer),
 * dispatch what is ready. Returns the number of callbacks run or -errno.
 * ev_run() is a loop of this. Handy for tests and for embedding. */
int ev_run_once(struct ev_loop *loop, int timeout_ms);

#endif
