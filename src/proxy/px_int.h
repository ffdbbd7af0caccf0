/* px_int.h — internals shared by the proxy's files (not a public contract). */
#ifndef ZH_PX_INT_H
#define ZH_PX_INT_H

#include <stdint.h>

struct bpf_link;
struct zh_l7cap;

struct px_capture {
	struct zh_l7cap *skel;	/* owned */
	struct bpf_link *link;	/* sock_ops on the node cgroup, owned */
	int orig_fd;		/* zh_l7cap_orig map, owned dup */
};

/* Load + pin + attach the capture program for a lab node. 0 or -errno. */
int px_capture_open(const char *lab, const char *node, uint32_t proxy_ip,
		    struct px_capture *cap);
void px_capture_close(struct px_capture *cap);

#endif
