/* obs_view.h — the lab's golden signals as zerohop top computes them
 * (src/agent/top_cli.c), for other views (the dashboard, dash_cli.c).
 * A view reads every agent's and node proxy's /metrics per sample; rates
 * are between its last two samples. Not thread-safe; owned by its opener. */
#ifndef ZH_OBS_VIEW_H
#define ZH_OBS_VIEW_H

#include <stdio.h>

enum obs_view_by {
	OBS_BY_SERVICE = 0,	/* rows per destination Service */
	OBS_BY_WORKLOAD = 1,	/* per destination workload */
	OBS_BY_EDGE = 2,	/* per source workload -> destination workload (or Service) */
};

struct obs_view;

/* 0, or -ENOENT when the lab is not up. */
int obs_view_open(const char *lab, int by, struct obs_view **out);
/* Take a sample (the previous one becomes the window's start). 0, or
 * -ENOENT when no agent answered. */
int obs_view_sample(struct obs_view *v);
/* The rows of the last window as `zerohop top -o json` prints them. */
void obs_view_json(struct obs_view *v, FILE *f);
void obs_view_close(struct obs_view *v);

/* GET target from the node proxy of nd (NODE_IP:15090, fetched by a child
 * process in the node's netns): the body (free it), or NULL. */
struct lab_node;
char *obs_view_proxy_get(const char *lab, const struct lab_node *nd, const char *target);
/* A connection to that proxy (made in nd's netns; this process stays in
 * its own) with GET target sent and a 200 head read: the body follows on
 * the returned fd (the caller closes it), or -errno. For /flows?follow=1. */
int obs_view_proxy_open(const char *lab, const struct lab_node *nd, const char *target);

#endif
