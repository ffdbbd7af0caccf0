/* paths.c — lab naming and well-known paths (see paths.h). */
#include <stdio.h>
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
	snprintf(buf, len, "%s/%s/state", ZH_RUN_ROOT, zh_lab_name(lab));
	return buf;
}

char *zh_pin_dir(char *buf, size_t len, const char *lab, const char *node)
{
	snprintf(buf, len, "%s/%s/%s", ZH_BPF_ROOT, zh_lab_name(lab), node);
	return buf;
}
