/* mounts.c — bpffs and cgroup2, mounted when missing (see mounts.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include "zerohop/mounts.h"
#include "zerohop/paths.h"

bool zh_is_bpffs(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == BPF_FS_MAGIC;
}

int zh_bpffs_ensure(const char *path)
{
	int ret;

	if (zh_is_bpffs(path))
		return 0;
	ret = zh_mkdir_p(path, 0755);
	if (ret)
		return ret;
	if (mount("bpf", path, "bpf", 0, "mode=0700"))
		return -errno;
	return zh_is_bpffs(path) ? 1 : -ENODEV;
}

int zh_bpffs_for(const char *pin_dir)
{
	size_t n = strlen(ZH_BPFFS);

	if (strncmp(pin_dir, ZH_BPFFS, n) || (pin_dir[n] != '/' && pin_dir[n] != '\0'))
		return 0;
	return zh_bpffs_ensure(ZH_BPFFS);
}

int zh_cgroup2_find(char *buf, size_t len)
{
	char line[2048], mp[1024];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (ret && fgets(line, sizeof(line), f)) {
		if (!strstr(line, " - cgroup2 ") || sscanf(line, "%*s %*s %*s %*s %1023s", mp) != 1)
			continue;
		if ((size_t)snprintf(buf, len, "%s", mp) >= len)
			ret = -ENAMETOOLONG;
		else
			ret = 0;
	}
	fclose(f);
	return ret;
}

int zh_cgroup2_ensure(char *buf, size_t len)
{
	int ret = zh_cgroup2_find(buf, len);

	if (ret != -ENOENT)
		return ret;
	ret = zh_mkdir_p(ZH_CGROUP2_OWN, 0755);
	if (ret)
		return ret;
	if (mount("cgroup2", ZH_CGROUP2_OWN, "cgroup2", 0, NULL) && errno != EBUSY)
		return -errno;
	if ((size_t)snprintf(buf, len, "%s", ZH_CGROUP2_OWN) >= len)
		return -ENAMETOOLONG;
	return 1;
}
