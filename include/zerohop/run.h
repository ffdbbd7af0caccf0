/* run.h — run a program, or wait for a child, and get its exit status
 * (prefix zh_). The one fork/exec/wait runner of the daemons and the demo.
 *
 * Results: the child's exit status 0..255 (0 = success); 128 + N when
 * signal N ended it; 127 when argv[0] could not be executed; -errno when
 * fork or wait failed. stdin, stdout and stderr are inherited.
 */
#ifndef ZH_RUN_H
#define ZH_RUN_H

#include <sys/types.h>

/* fork, execvp(argv[0], argv) in the child, wait for it. argv is
 * NULL-terminated and owned by the caller. */
int zh_run(char *const argv[]);

/* Wait for child pid, retrying on EINTR; the result as zh_run's. */
int zh_wait(pid_t pid);

#endif
