/* cli_validate.c — `zerohop validate -f FILE|DIR ... [-n NS] [--strict]`:
 * parse and finish the given manifests together, as apply would, without
 * storing anything. Prints "ok: N objects" on stdout (plus "M ignored" and
 * one line per skipped object), warnings on stderr ("warning: FILE:LINE:
 * FIELD: MESSAGE"), or the error "FILE:LINE: FIELD: MESSAGE" on stderr and
 * exits 1. Usage errors exit 2; --help/-h prints the usage and exits 0. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "zerohop/cli.h"
#include "zerohop/model.h"

static int usage(FILE *f)
{
	fprintf(f, "usage: zerohop validate -f FILE|DIR [-f FILE|DIR ...] [-n NS] [--strict]\n"
		   "  FILE: multi-document YAML or JSON; DIR: its *.yaml, *.yml, *.json\n"
		   "  -n, --namespace NS   namespace of objects without one; an object naming\n"
		   "                       another namespace is an error\n"
		   "  --strict             kinds zerohop does not act on are errors\n");
	return f == stdout ? 0 : 2;
}

static void print_ignored(const struct md_ignored *ig)
{
	char kind[64];
	size_t i;

	snprintf(kind, sizeof(kind), "%s", ig->kind);
	for (i = 0; kind[i]; i++)
		kind[i] = (char)tolower((unsigned char)kind[i]);
	printf("%s%s%s/%s ignored (%s)\n", kind, *ig->group ? "." : "", ig->group, ig->name,
	       ig->reason);
}

int cli_validate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "filename", required_argument, NULL, 'f' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "strict", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };
	char buf[1024], *paths[256];
	int n_inputs = 0, ret = 1, c;
	const char *why;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "f:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (n_inputs == (int)(sizeof(paths) / sizeof(paths[0]))) {
				fprintf(stderr, "zerohop validate: too many -f\n");
				ret = usage(stderr);
				goto out;
			}
			paths[n_inputs++] = optarg;
			break;
		case 'n':
			if ((why = md_check_dns_label(optarg))) {
				fprintf(stderr, "zerohop validate: -n: invalid namespace \"%s\": %s\n",
					optarg, why);
				ret = usage(stderr);
				goto out;
			}
			md_state_set_namespace(st, optarg);
			break;
		case 'S':
			md_state_set_strict(st, true);
			break;
		case 'h':
			ret = usage(stdout);
			goto out;
		default:
			fprintf(stderr, "zerohop validate: unexpected argument '%s'\n",
				argv[optind - 1]);
			ret = usage(stderr);
			goto out;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zerohop validate: unexpected argument '%s'\n", argv[optind]);
		ret = usage(stderr);
		goto out;
	}
	if (!n_inputs) {
		ret = usage(stderr);
		goto out;
	}
	for (int i = 0; i < n_inputs; i++) {
		struct stat sb;
		int r;

		if (!stat(paths[i], &sb) && S_ISDIR(sb.st_mode))
			r = md_state_add_dir(st, paths[i], &err);
		else
			r = md_state_add_file(st, paths[i], &err);
		if (r) {
			fprintf(stderr, "%s\n", md_err_str(&err, buf, sizeof(buf)));
			goto out;
		}
	}
	if (md_state_finish(st, &err)) {
		fprintf(stderr, "%s\n", md_err_str(&err, buf, sizeof(buf)));
		goto out;
	}
	for (int i = 0; i < st->n_warnings; i++)
		fprintf(stderr, "warning: %s:%d: %s: %s\n", st->warnings[i].file,
			st->warnings[i].line, st->warnings[i].field, st->warnings[i].msg);
	for (int i = 0; i < st->n_ignored; i++)
		print_ignored(&st->ignored[i]);
	if (st->n_ignored)
		printf("ok: %d objects, %d ignored\n", md_state_n_objects(st), st->n_ignored);
	else
		printf("ok: %d objects\n", md_state_n_objects(st));
	ret = 0;
out:
	md_state_free(st);
	return ret;
}
