/* mounts.h — the kernel filesystems zerohop needs, mounted when missing
 * (prefix zh_). A fresh machine has no BPF filesystem at /sys/fs/bpf, and
 * hosts that boot with cgroup v1 have no cgroup2 hierarchy; Cilium's agent
 * mounts both itself, and so do we. Nothing here ever unmounts: a mount we
 * made stays for the next run, one we found is not ours to remove.
 */
#ifndef ZH_MOUNTS_H
#define ZH_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>

#define ZH_BPFFS "/sys/fs/bpf"
#define ZH_CGROUP2_OWN "/run/zerohop/cgroup2"	/* ours, when none is mounted */

/* Is PATH the root of a mounted BPF filesystem? */
bool zh_is_bpffs(const char *path);

/* Make PATH a BPF filesystem: 0 if it already was, 1 if it was mounted now
 * (mode 0700, as Cilium does), -errno if it could not be. */
int zh_bpffs_ensure(const char *path);

/* The BPF filesystem a pin dir lives on, when PIN_DIR is under
 * /sys/fs/bpf: that mount is made if missing (zh_bpffs_ensure). Pin dirs
 * elsewhere are the caller's business. 0, 1 (mounted now) or -errno. */
int zh_bpffs_for(const char *pin_dir);

/* The first cgroup2 mount point in /proc/self/mountinfo into buf
 * (hybrid hosts have /sys/fs/cgroup/unified): 0, or -ENOENT when none is
 * mounted. */
int zh_cgroup2_find(char *buf, size_t len);

/* zh_cgroup2_find, else mount one at ZH_CGROUP2_OWN: 0 if found, 1 if
 * mounted now, -errno. buf gets the mount point. */
int zh_cgroup2_ensure(char *buf, size_t len);

#endif
