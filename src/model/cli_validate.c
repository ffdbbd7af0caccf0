/* cli_validate.c — `zerohop validate -f FILE|DIR ...`: parse and finish the
 * given manifests together, as apply would, without storing anything.
 * Prints "ok: N objects" on stdout, or "FILE:LINE: FIELD: MESSAGE" on
 * stderr and exits 1. Usage errors exit 2. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "zerohop/cli.h"
#include "zerohop/model.h"

static int usage(void)
{
	fprintf(stderr, "usage: zerohop validate -f FILE|DIR [-f FILE|DIR ...]\n"
			"  FILE: multi-document YAML or JSON; DIR: its *.yaml, *.yml, *.json\n");
	return 2;
}

int cli_validate(int argc, char **argv)
{
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };
	char buf[1024];
	int n_inputs = 0, ret = 1;

	for (int i = 1; i < argc; i++) {
		const char *path = NULL;
		struct stat sb;
		int r;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			ret = usage();
			goto out;
		}
		if (!strcmp(argv[i], "-f") && i + 1 < argc)
			path = argv[++i];
		else if (!strncmp(argv[i], "--filename=", 11))
			path = argv[i] + 11;
		else if (!strncmp(argv[i], "-f", 2) && argv[i][2])
			path = argv[i] + 2;
		if (!path) {
			fprintf(stderr, "zerohop validate: unexpected argument '%s'\n", argv[i]);
			ret = usage();
			goto out;
		}
		n_inputs++;
		if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
			r = md_state_add_dir(st, path, &err);
		else
			r = md_state_add_file(st, path, &err);
		if (r) {
			fprintf(stderr, "%s\n", md_err_str(&err, buf, sizeof(buf)));
			goto out;
		}
	}
	if (!n_inputs) {
		ret = usage();
		goto out;
	}
	if (md_state_finish(st, &err)) {
		fprintf(stderr, "%s\n", md_err_str(&err, buf, sizeof(buf)));
		goto out;
	}
	printf("ok: %d objects\n", md_state_n_objects(st));
	ret = 0;
out:
	md_state_free(st);
	return ret;
}
