/* pending.c — entry points of components that are not built yet.
 *
 * Each is a weak symbol: the component's real cli_*() (a strong symbol in its
 * own folder) replaces it at link time. Until then the command says plainly
 * that it does not exist yet, and fails — it never pretends to work. */
#include <stdio.h>

#include "zerohop/cli.h"

static int pending(const char *cmd, const char *issue)
{
	fprintf(stderr, "zerohop %s: not built yet (%s)\n", cmd, issue);
	return 3;
}

#define PENDING __attribute__((weak))
PENDING int cli_lab(int argc, char **argv) { return pending("lab", "foundation issue"); }
PENDING int cli_echo(int argc, char **argv) { return pending("echo", "foundation issue"); }
PENDING int cli_bench(int argc, char **argv) { return pending("bench", "load generator issue"); }
PENDING int cli_demo(int argc, char **argv) { return pending("demo", "load generator issue"); }
PENDING int cli_agent(int argc, char **argv) { return pending("agent", "node agent issue"); }
PENDING int cli_apply(int argc, char **argv) { return pending("apply", "node agent issue"); }
PENDING int cli_delete(int argc, char **argv) { return pending("delete", "node agent issue"); }
PENDING int cli_get(int argc, char **argv) { return pending("get", "node agent issue"); }
PENDING int cli_proxy(int argc, char **argv) { return pending("proxy", "L7 proxy issue"); }
PENDING int cli_validate(int argc, char **argv) { return pending("validate", "model"); }
PENDING int cli_dns(int argc, char **argv) { return pending("dns", "node agent issue"); }
