/* paths.h — where a lab's things live (prefix zh_). One lab per name; the
 * name comes from --lab/--name, else $ZH_LAB, else "zh", so tests and
 * developers can run several labs side by side without clashes.
 *
 *   /run/zerohop/LAB/                 run dir: supervisor pid, logs, pod dirs
 *   /run/zerohop/LAB/state/           the state source (state.h)
 *   /run/zerohop/cgroup2/             our cgroup2 mount when none is mounted
 *   CGROOT/zerohop-LAB/NODE/POD       cgroups (NODE's programs see its pods)
 *   /sys/fs/bpf/zerohop/LAB/NODE/     pinned maps and links of NODE's agent
 *   network namespaces                LAB-fabric, LAB-NODE, LAB-p-NS-POD
 */
#ifndef ZH_PATHS_H
#define ZH_PATHS_H

#include <stddef.h>
#include <sys/types.h>

#define ZH_RUN_ROOT "/run/zerohop"
#define ZH_BPF_ROOT "/sys/fs/bpf/zerohop"
#define ZH_DEFAULT_LAB "zh"

/* The lab name: explicit if non-NULL, else $ZH_LAB, else "zh". */
const char *zh_lab_name(const char *explicit_name);

/* snprintf helpers; return buf. */
char *zh_run_dir(char *buf, size_t len, const char *lab);
char *zh_state_dir(char *buf, size_t len, const char *lab);
char *zh_pin_dir(char *buf, size_t len, const char *lab, const char *node);

/* mkdir -p PATH (each missing component with mode); 0 or -errno
 * (-ENAMETOOLONG past PATH_MAX). An existing directory is fine. */
int zh_mkdir_p(const char *path, mode_t mode);

#endif
