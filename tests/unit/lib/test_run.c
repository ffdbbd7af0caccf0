/* test_run.c — the fork/exec runner (run.h). */
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/run.h"

int main(void)
{
	char *t[] = { "true", NULL };
	char *f[] = { "false", NULL };
	char *code[] = { "/bin/sh", "-c", "exit 42", NULL };
	char *sig[] = { "/bin/sh", "-c", "kill -TERM $$", NULL };
	char *none[] = { "/nonexistent/zh-no-such-program", NULL };
	pid_t pid;

	is_int(zh_run(t), 0, "true: 0");
	is_int(zh_run(f), 1, "false: 1");
	is_int(zh_run(code), 42, "the exit status is returned as is");
	is_int(zh_run(sig), 128 + SIGTERM, "killed by a signal: 128 + N");
	is_int(zh_run(none), 127, "cannot execute: 127");

	pid = fork();
	if (pid == 0)
		_exit(5);
	is_int(zh_wait(pid), 5, "zh_wait on a forked child");
	is_int(zh_wait(pid), -ECHILD, "waiting again: -ECHILD");
	return done_testing();
}
