/* cli.h — the `zerohop` subcommands (prefix cli_). Each component implements
 * its entry point in its own folder; src/cli/main.c only dispatches.
 * Every entry point takes the arguments after the subcommand name
 * (argv[0] is the subcommand) and returns the process exit status. */
#ifndef ZH_CLI_H
#define ZH_CLI_H

/* Every resource `zerohop get` accepts (the top-level help lists the same). */
#define CLI_GET_RESOURCES \
	"services|endpoints|backends|splits|routes|routegroups|pods|serviceaccounts|identities|certs|stats|policy-drops"

int cli_lab(int argc, char **argv);	/* src/lab:   lab up|down|status|exec */
int cli_echo(int argc, char **argv);	/* src/bench: echo server */
int cli_bench(int argc, char **argv);	/* src/bench: load generator, bench report */
int cli_demo(int argc, char **argv);	/* src/demo:  the seed experiments */
int cli_agent(int argc, char **argv);	/* src/agent: node agent */
int cli_apply(int argc, char **argv);	/* src/agent: apply -f (state source) */
int cli_delete(int argc, char **argv);	/* src/agent: delete -f */
int cli_get(int argc, char **argv);	/* src/agent: get KIND */
int cli_proxy(int argc, char **argv);	/* src/proxy: node L7 proxy */
int cli_validate(int argc, char **argv);	/* src/model: parse + validate manifests */
int cli_dns(int argc, char **argv);	/* src/agent: cluster DNS responder (runs in a pod) */
int cli_doctor(int argc, char **argv);
int cli_ca(int argc, char **argv);	/* src/identity: cluster CA, workload SVIDs */	/* src/doctor: is this machine ready for zerohop? */

#endif
