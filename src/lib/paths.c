/* paths.c — lab naming and well-known paths (see paths.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>

#include "zerohop/paths.h"

const char *zh_lab_name(const char *explicit_name)
{
	const char *env;

	if (explicit_name && *explicit_name)
		return explicit_name;
	env = getenv("ZH_LAB");
	return env && *env ? env : ZH_DEFAULT_LAB;
}

char *zh_run_dir(char *buf, size_t len, const char *lab)
{
	snprintf(buf, len, "%s/%s", ZH_RUN_ROOT, zh_lab_name(lab));
	return buf;
}

char *zh_state_dir(char *buf, size_t len, const char *lab)
{
	char p[512];
	FILE *f;

	/* a lab up with --state etcd names its etcd cluster there
	 * (src/lab/lab_etcd.c) */
	snprintf(p, sizeof(p), "%s/%s/state.spec", ZH_RUN_ROOT, zh_lab_name(lab));
	f = fopen(p, "re");
	if (f) {
		bool got = fgets(buf, (int)len, f) && !strncmp(buf, "etcd://", 7);

		fclose(f);
		if (got) {
			buf[strcspn(buf, "\n")] = 0;
			return buf;
		}
	}
	snprintf(buf, len, "%s/%s/state", ZH_RUN_ROOT, zh_lab_name(lab));
	return buf;
}

char *zh_pin_dir(char *buf, size_t len, const char *lab, const char *node)
{
	snprintf(buf, len, "%s/%s/%s", ZH_BPF_ROOT, zh_lab_name(lab), node);
	return buf;
}

int zh_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}
