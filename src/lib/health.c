/* health.c — a node daemon's published health file (see health.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zerohop/fileio.h"
#include "zerohop/health.h"

int zh_health_write(const char *path, const struct zh_health *h)
{
	char text[512];
	int n;

	/* error is one line: a newline inside would start a new key */
	n = snprintf(text, sizeof(text), "pid %d\nstate %s\ngeneration %llu\nsyncs %llu\nerror %.*s\n",
		     h->pid, h->state, (unsigned long long)h->generation,
		     (unsigned long long)h->syncs, (int)strcspn(h->error, "\n"), h->error);
	if (n < 0 || (size_t)n >= sizeof(text))
		return -EOVERFLOW;
	return zh_write_atomic(path, text, (size_t)n, 0644, false);
}

int zh_health_read(const char *path, struct zh_health *h)
{
	char line[512];
	FILE *f = fopen(path, "re");

	memset(h, 0, sizeof(*h));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ' ');

		if (!v)
			continue;
		*v++ = 0;
		v[strcspn(v, "\n")] = 0;
		if (!strcmp(line, "pid"))
			h->pid = atoi(v);
		else if (!strcmp(line, "state"))
			snprintf(h->state, sizeof(h->state), "%s", v);
		else if (!strcmp(line, "generation"))
			h->generation = strtoull(v, NULL, 10);
		else if (!strcmp(line, "syncs"))
			h->syncs = strtoull(v, NULL, 10);
		else if (!strcmp(line, "error"))
			snprintf(h->error, sizeof(h->error), "%s", v);
	}
	fclose(f);
	return h->pid > 0 ? 0 : -EINVAL;
}
