/* ev_epoll.c — epoll and timerfd syscalls for the event loop (see ev_epoll.h).
 * Nothing else in src/lib/ev*.c makes a syscall except ev_now_ns(). */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "zerohop/ev.h"
#include "ev_epoll.h"

int ev_api_create(int *epfd, int *tfd)
{
	int err;

	/* The default 50 us timer slack would blur microsecond deadlines
	 * (the load generator schedules sends with them): 1 ns for this
	 * thread, the one that runs the loop. Best effort. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	*epfd = epoll_create1(EPOLL_CLOEXEC);
	if (*epfd < 0)
		return -errno;
	*tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (*tfd < 0) {
		err = -errno;
		goto err_close_ep;
	}
	return 0;

err_close_ep:
	close(*epfd);
	*epfd = -1;
	return err;
}

void ev_api_close(int epfd, int tfd)
{
	if (tfd >= 0)
		close(tfd);
	if (epfd >= 0)
		close(epfd);
}

static uint32_t to_epoll(int mask)
{
	uint32_t e = 0;

	if (mask & EV_READ)
		e |= EPOLLIN | EPOLLRDHUP;
	if (mask & EV_WRITE)
		e |= EPOLLOUT;
	if (mask & EV_EDGE)
		e |= EPOLLET;
	return e;
}

int ev_api_ctl(int epfd, int fd, int old_mask, int new_mask, uint64_t data)
{
	struct epoll_event ee = { .events = to_epoll(new_mask), .data.u64 = data };
	int op;

	if (!new_mask)
		op = EPOLL_CTL_DEL;
	else if (!old_mask)
		op = EPOLL_CTL_ADD;
	else
		op = EPOLL_CTL_MOD;
	if (epoll_ctl(epfd, op, fd, &ee) < 0)
		return -errno;
	return 0;
}

int ev_api_poll(int epfd, struct ev_api_event *out, int max, int timeout_ms)
{
	struct epoll_event ee[256];
	int i, n;

	if (max > 256)
		max = 256;
	n = epoll_wait(epfd, ee, max, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (i = 0; i < n; i++) {
		uint32_t e = ee[i].events;
		int m = 0;

		if (e & (EPOLLIN | EPOLLRDHUP))
			m |= EV_READ;
		if (e & EPOLLOUT)
			m |= EV_WRITE;
		if (e & (EPOLLERR | EPOLLHUP))
			m |= EV_ERROR;
		out[i].data = ee[i].data.u64;
		out[i].events = m;
	}
	return n;
}

int ev_api_timer_arm(int tfd, uint64_t deadline_ns)
{
	struct itimerspec its = { 0 };

	/* An all-zero it_value disarms: callers pass 0 only to disarm and
	 * bump a real deadline of 0 to 1 ns (still past: fires at once). */
	if (deadline_ns) {
		its.it_value.tv_sec = deadline_ns / 1000000000ull;
		its.it_value.tv_nsec = deadline_ns % 1000000000ull;
	}
	if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		return -errno;
	return 0;
}

void ev_api_timer_drain(int tfd)
{
	uint64_t n;

	/* Nonblocking: EAGAIN when a re-arm already reset the expiry count. */
	if (read(tfd, &n, sizeof(n)) < 0)
		return;
}
