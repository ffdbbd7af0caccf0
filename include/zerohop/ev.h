/* ev.h — the event loop shared by the echo server, the load generator and the
 * proxy (prefix ev_). Redis ae.h in spirit: one loop per thread, file events
 * on epoll, timers with nanosecond deadlines on CLOCK_MONOTONIC (timerfd), so
 * a load generator can schedule sends at microsecond precision.
 *
 * Contract:
 * - A loop is used from one thread only. Callbacks run on that thread.
 * - ev_add() registers interest in fd for mask (EV_READ|EV_WRITE); calling it
 *   again replaces the mask and callback. ev_del() removes fd; it is safe to
 *   call from inside any callback, including the fd's own.
 * - Level-triggered by default; EV_EDGE asks for edge-triggered delivery.
 * - Timers are one-shot: the callback may re-arm with ev_timer_add(). Ids are
 *   never reused within a loop's life; ev_timer_del() of a fired or unknown id
 *   is a no-op.
 * - ev_run() returns 0 after ev_stop(), or -errno on a fatal epoll error.
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

/* Monotonic clock in nanoseconds. */
uint64_t ev_now_ns(void);

struct ev_loop *ev_loop_new(int max_fds);	/* aborts on out-of-memory */
void ev_loop_free(struct ev_loop *loop);

int ev_add(struct ev_loop *loop, int fd, int mask, ev_file_cb *cb, void *arg);
void ev_del(struct ev_loop *loop, int fd);

/* Fire cb at absolute monotonic time deadline_ns. Returns a timer id (> 0). */
uint64_t ev_timer_add(struct ev_loop *loop, uint64_t deadline_ns, ev_timer_cb *cb, void *arg);
void ev_timer_del(struct ev_loop *loop, uint64_t id);

int ev_run(struct ev_loop *loop);
void ev_stop(struct ev_loop *loop);

#endif
