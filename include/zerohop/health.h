/* health.h — what a node daemon publishes about itself (prefix zh_health).
 *
 * The agent writes a small text file after every sync (`zerohop agent
 * --health-file PATH`); whoever runs it (the lab's supervisor, a
 * DaemonSet's readiness probe through `cat`) reads it instead of looking
 * into the agent's private BPF maps. One "key value" pair per line:
 *
 *	pid 1234
 *	state ready            ready | degraded (last sync failed; the kernel
 *	                       keeps the state of `generation`)
 *	generation 7           state-source generation in force in the kernel
 *	syncs 12               syncs done, successful or not
 *	error ...              why the last sync failed ("" when it did not)
 *
 * The file is replaced atomically (write to PATH.tmp, rename), so a reader
 * sees a whole old or a whole new one. It is stale once pid is gone: a
 * reader compares pid with the process it knows.
 */
#ifndef ZH_HEALTH_H
#define ZH_HEALTH_H

#include <stdint.h>

struct zh_health {
	int pid;
	char state[16];		/* "ready" or "degraded" */
	uint64_t generation;	/* 0: nothing synced yet */
	uint64_t syncs;
	char error[256];	/* one line; "" when the last sync succeeded */
};

/* Replace PATH with h (atomic). 0 or -errno. */
int zh_health_write(const char *path, const struct zh_health *h);

/* Read PATH into h (unknown keys ignored, missing ones zero). 0, -ENOENT,
 * -EINVAL for a file without a pid line, or -errno. */
int zh_health_read(const char *path, struct zh_health *h);

#endif
