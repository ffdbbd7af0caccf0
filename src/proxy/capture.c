/* capture.c — load bpf/l7cap.bpf.c for one node: maps pinned by name in
 * the node's pin dir (shared with the agent's connect4 hook), the sock_ops
 * program attached to the node's cgroup (the one the agent serves; in the
 * lab, one the lab made, never any other: docs/lab.md "Safety"). The attachment lives as long as the proxy.
 * Last, the proxy's address goes into zh_l7cap_cfg[0], where connect4 reads
 * where to redirect (abi/l7cap.h step 0). It is left there when the proxy
 * exits: connections then meet a closed port and are refused, which is
 * what a proxy that is down must do (never a silent L4 bypass).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/abi/l7cap.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "l7cap.skel.h"
#include "px_int.h"

static bool ip6_set(const uint8_t *ip6)
{
	static const uint8_t zero[16];

	return ip6 && memcmp(ip6, zero, 16);
}

int px_capture_open(const char *pin, const char *cg, uint32_t proxy_ip,
		    const uint8_t *proxy_ip6, uint16_t cfg_flags, struct px_capture *cap)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo);
	struct zh_l7cap *skel = NULL;
	int cgfd = -1, rc;

	memset(cap, 0, sizeof(*cap));
	cap->orig6_fd = -1;
	rc = zh_mkdir_p(pin, 0700);
	if (rc) {
		zh_err("proxy: capture: pin dir %s: %s", pin, strerror(-rc));
		goto fail;
	}
	cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cgfd < 0) {
		rc = -errno;
		zh_err("proxy: capture: node cgroup %s: %s", cg, strerror(errno));
		goto fail;
	}
	oo.pin_root_path = pin;
	skel = zh_l7cap__open_opts(&oo);
	if (!skel) {
		rc = -errno;
		zh_err("proxy: capture: open l7cap: %s", strerror(errno));
		goto fail;
	}
	skel->rodata->l7cap_cfg.proxy_ip = proxy_ip;
	skel->rodata->l7cap_cfg.proxy_port = htons(ZH_L7CAP_PORT);
	if (ip6_set(proxy_ip6)) {
		memcpy(skel->rodata->l7cap_cfg6.proxy_ip6, proxy_ip6, 16);
		skel->rodata->l7cap_cfg6.proxy_port = htons(ZH_L7CAP_PORT);
	}
	rc = zh_l7cap__load(skel);
	if (rc) {
		zh_err("proxy: capture: load l7cap: %s", strerror(-rc));
		goto fail;
	}
	cap->link = bpf_program__attach_cgroup(skel->progs.zh_l7cap_sockops, cgfd);
	if (!cap->link) {
		rc = -errno;
		zh_err("proxy: capture: attach to %s: %s", cg, strerror(errno));
		goto fail;
	}
	{
		struct zh_l7cap_cfg c = { .proxy_ip = proxy_ip, .proxy_port = htons(ZH_L7CAP_PORT),
					  .flags = cfg_flags };
		uint32_t zero = 0;

		rc = bpf_map_update_elem(bpf_map__fd(skel->maps.zh_l7cap_cfg), &zero, &c, BPF_ANY);
		if (rc) {
			rc = -errno;
			zh_err("proxy: capture: write %s/%s: %s", pin, ZH_L7CAP_CFG_MAP,
			       strerror(errno));
			goto fail;
		}
	}
	{	/* zero when there is no IPv6 listener: connect6 then goes v4-mapped */
		struct zh_l7cap_cfg6 c6 = {};
		uint32_t zero = 0;

		if (ip6_set(proxy_ip6)) {
			memcpy(c6.proxy_ip6, proxy_ip6, 16);
			c6.proxy_port = htons(ZH_L7CAP_PORT);
		}
		if (bpf_map_update_elem(bpf_map__fd(skel->maps.zh_l7cap_cfg6), &zero, &c6, BPF_ANY)) {
			rc = -errno;
			zh_err("proxy: capture: write %s/%s: %s", pin, ZH_L7CAP_CFG6_MAP,
			       strerror(errno));
			goto fail;
		}
	}
	if (ip6_set(proxy_ip6)) {
		cap->orig6_fd = dup(bpf_map__fd(skel->maps.zh_l7cap_orig6));
		memcpy(cap->proxy_ip6, proxy_ip6, 16);
	}
	cap->orig_fd = dup(bpf_map__fd(skel->maps.zh_l7cap_orig));
	cap->skel = skel;
	snprintf(cap->pin_dir, sizeof(cap->pin_dir), "%s", pin);
	snprintf(cap->cgroup, sizeof(cap->cgroup), "%s", cg);
	cap->proxy_ip = proxy_ip;
	cap->cfg_flags = cfg_flags;
	close(cgfd);
	return 0;
fail:
	if (cap->link)
		bpf_link__destroy(cap->link);
	cap->link = NULL;
	if (skel)
		zh_l7cap__destroy(skel);
	if (cgfd >= 0)
		close(cgfd);
	return rc;
}

void px_capture_close(struct px_capture *cap)
{
	if (cap->link)
		bpf_link__destroy(cap->link);
	if (cap->skel)
		zh_l7cap__destroy(cap->skel);
	if (cap->orig_fd > 0)
		close(cap->orig_fd);
	if (cap->orig6_fd > 0)
		close(cap->orig6_fd);
	memset(cap, 0, sizeof(*cap));
	cap->orig6_fd = -1;
}

static uint32_t map_id(int fd)
{
	struct bpf_map_info info = {};
	uint32_t len = sizeof(info);

	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}

int px_capture_refresh(struct px_capture *cap)
{
	struct px_capture fresh;
	const char *pin = cap->pin_dir;
	char path[320];
	uint32_t pinned;
	int fd;

	if (!cap->skel)
		return cap->orig_fd;
	snprintf(path, sizeof(path), "%s/%s", pin, ZH_L7CAP_CFG_MAP);
	fd = bpf_obj_get(path);
	pinned = map_id(fd);
	if (fd >= 0)
		close(fd);
	/* no pin (nobody re-created it yet) or still ours: nothing to do */
	if (!pinned || pinned == map_id(bpf_map__fd(cap->skel->maps.zh_l7cap_cfg)))
		return cap->orig_fd;
	/* new first, then the old one: no moment without a sock_ops program */
	if (px_capture_open(cap->pin_dir, cap->cgroup, cap->proxy_ip, cap->proxy_ip6,
			    cap->cfg_flags, &fresh)) {
		zh_warn("proxy: capture: the shared maps under %s were re-created; re-registering failed (retrying)",
			pin);
		return cap->orig_fd;
	}
	px_capture_close(cap);
	*cap = fresh;
	zh_info("proxy: capture: the shared maps under %s were re-created (agent --cleanup?); registered again",
		pin);
	return cap->orig_fd;
}
