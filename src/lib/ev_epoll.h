/* ev_epoll.h — private to src/lib/ev*.c: the only place the loop meets the
 * kernel (epoll + timerfd), as Redis keeps ae_epoll.c apart from ae.c. */
#ifndef ZH_EV_EPOLL_H
#define ZH_EV_EPOLL_H

#include <stdint.h>

struct ev_api_event {
	uint64_t data;	/* what ev_api_ctl() was given */
	int events;	/* EV_READ | EV_WRITE | EV_ERROR */
};

/* Each returns 0 or -errno (ev_api_poll: number of events or -errno). */
int ev_api_create(int *epfd, int *tfd);
void ev_api_close(int epfd, int tfd);
int ev_api_ctl(int epfd, int fd, int old_mask, int new_mask, uint64_t data);
int ev_api_poll(int epfd, struct ev_api_event *out, int max, int timeout_ms);
int ev_api_timer_arm(int tfd, uint64_t deadline_ns);	/* 0 = disarm */
void ev_api_timer_drain(int tfd);

#endif
