/* main.c — the `zerohop` binary: dispatch to a subcommand. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "zerohop/cli.h"
#include "zerohop/cni.h"
#include "zerohop/obs.h"

struct cli_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct cli_cmd cmds[] = {
	{ "lab",      cli_lab,      "lab up|down|status|exec: a cluster on one machine" },
	{ "apply",    cli_apply,    "apply -f FILE|DIR [-n NS] [--strict]: validate and store manifests" },
	{ "delete",   cli_delete,   "delete -f FILE|DIR [-n NS]: remove the manifests' objects" },
	{ "get",      cli_get,      "get " CLI_GET_RESOURCES " [-n NS] [-o json]" },
	{ "agent",    cli_agent,    "agent --node NODE: the node agent (BPF datapath)" },
	{ "proxy",    cli_proxy,    "proxy --node NODE: the node L7 proxy" },
	{ "echo",     cli_echo,     "echo: HTTP + TCP echo server (fortio parameters)" },
	{ "bench",    cli_bench,    "bench URL: load generator; bench report A.json ..." },
	{ "demo",     cli_demo,     "demo: the seed experiments in the lab" },
	{ "validate", cli_validate, "validate -f FILE|DIR [-n NS] [--strict]: parse manifests, print errors" },
	{ "dns",      cli_dns,      "dns: cluster DNS responder for Service names" },
	{ "cni",      cli_cni,      "cni: the CNI plugin (also as a zerohop-cni symlink)" },
	{ "observe",  cli_observe,  "observe [--pod P] [--service S] [--verdict V] [-f]: the connection flow log" },
	{ "top",      cli_top,      "top [-n NS] [--by service|workload] [-o json]: live golden signals" },
	{ "dashboard", cli_dashboard, "dashboard [--addr IP:PORT]: the mesh in a web page (loopback)" },
	{ "doctor",   cli_doctor,   "doctor: check this machine for what zerohop needs" },
	{ "ca",       cli_ca,       "ca init|rotate|issue: the cluster CA and workload certificates (SVIDs)" },
};

static int usage(FILE *f)
{
	fprintf(f, "usage: zerohop COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\nevery command answers --help (-h) with its usage\n");
	return f == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
	/* a runtime runs plugins by file name: zerohop-cni is us (cni.h) */
	const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;

	/* Long-running daemons: keep glibc's mmap threshold fixed. Freeing a
	 * large mmapped block (libbpf frees the parsed kernel BTF after a
	 * CO-RE load) otherwise raises the threshold to that size, and later
	 * big short-lived buffers (a /metrics page, a state snapshot) stay in
	 * the heap after free instead of going back to the kernel: +1.8 MB of
	 * RSS measured in tests/e2e/73-obs-cardinality.t. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	if (argc > 0 && !strcmp(base ? base + 1 : argv[0], CNI_PLUGIN_NAME))
		return cli_cni(argc, argv);
	if (argc < 2)
		return usage(stderr);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help"))
		return usage(stdout);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "zerohop: unknown command '%s'\n", argv[1]);
	return usage(stderr);
}
