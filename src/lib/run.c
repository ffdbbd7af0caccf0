/* run.c — run a program and wait for it (see run.h). */
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zerohop/run.h"

int zh_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 128;
}

int zh_run(char *const argv[])
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	return zh_wait(pid);
}
