/* test_health_mounts.c — health.h (the agent's published health file) and
 * mounts.h (bpffs mounted when missing). The mount checks run in a child
 * with a private mount namespace, so nothing here changes the machine's
 * mounts; they are skipped unless root. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/health.h"
#include "zerohop/mounts.h"

static void health_cases(void)
{
	char dir[] = "/tmp/zh-health.XXXXXX", path[64], tmp[80];
	struct zh_health w = { .pid = 4242, .generation = 17, .syncs = 3 }, r;
	FILE *f;

	ok(mkdtemp(dir) != NULL, "temp dir");
	snprintf(path, sizeof(path), "%s/agent.health", dir);
	is_int(zh_health_read(path, &r), -ENOENT, "no file: -ENOENT");

	snprintf(w.state, sizeof(w.state), "ready");
	is_int(zh_health_write(path, &w), 0, "write");
	is_int(zh_health_read(path, &r), 0, "read back");
	is_int(r.pid, 4242, "pid");
	is_str(r.state, "ready", "state");
	ok(r.generation == 17 && r.syncs == 3, "generation 17, syncs 3");
	is_str(r.error, "", "no error");
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	ok(access(tmp, F_OK) != 0, "no temporary left (written by rename)");

	/* An error with a newline stays one line: no key can be injected. */
	snprintf(w.state, sizeof(w.state), "degraded");
	snprintf(w.error, sizeof(w.error), "compile: bad\ngeneration 99");
	is_int(zh_health_write(path, &w), 0, "write degraded");
	is_int(zh_health_read(path, &r), 0, "read degraded");
	is_str(r.state, "degraded", "state degraded");
	is_str(r.error, "compile: bad", "error cut at its first newline");
	ok(r.generation == 17, "generation not overwritten from inside the error");

	f = fopen(path, "w");
	fputs("state ready\n", f);
	fclose(f);
	is_int(zh_health_read(path, &r), -EINVAL, "a file without pid: -EINVAL");
	unlink(path);
	rmdir(dir);
}

/* In a child with its own mount namespace: unmount every bpffs at
 * /sys/fs/bpf, then ensure. Exit code: 10 + what each step returned. */
static int mount_child(void)
{
	int first, second;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return 2;
	while (zh_is_bpffs(ZH_BPFFS))
		if (umount2(ZH_BPFFS, MNT_DETACH))
			return 3;
	if (zh_bpffs_for("/tmp/not-under-bpffs") != 0 || zh_is_bpffs(ZH_BPFFS))
		return 4;	/* a pin dir elsewhere mounts nothing */
	first = zh_bpffs_for(ZH_BPFFS "/zerohop/lab/node");
	if (first != 1 || !zh_is_bpffs(ZH_BPFFS))
		return 5;
	second = zh_bpffs_ensure(ZH_BPFFS);
	return second == 0 ? 0 : 6;
}

static void mount_cases(void)
{
	char cg[512];
	pid_t pid;
	int st;

	if (geteuid() != 0) {
		ok(1, "# SKIP mount checks need root");
		return;
	}
	pid = fork();
	if (pid == 0)
		_exit(mount_child());
	waitpid(pid, &st, 0);
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0,
	       "private mount ns: no bpffs -> zh_bpffs_for mounts one (1), then 0; elsewhere nothing");
	/* cgroup2_find agrees with /proc/self/mountinfo */
	if (zh_cgroup2_find(cg, sizeof(cg)) == 0)
		ok(cg[0] == '/', "cgroup2 found at %s", cg);
	else
		ok(1, "no cgroup2 mounted here (zh_cgroup2_find: -ENOENT)");
	is_int(zh_cgroup2_find(cg, 2), zh_cgroup2_find(cg, sizeof(cg)) == 0 ? -ENAMETOOLONG : -ENOENT,
	       "a buffer too small is -ENAMETOOLONG");
}

int main(void)
{
	health_cases();
	mount_cases();
	return done_testing();
}
