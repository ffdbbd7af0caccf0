/* sup_proc.c — the lab supervisor's processes (sup_int.h): a container,
 * agent or proxy is forked into its cgroup first, then into its network (and
 * for pods UTS and mount) namespaces, with stdio to its log, and exec'd; an
 * exec failure reaches the parent through a CLOEXEC pipe. Exits schedule a
 * restart with backoff (BACKOFF_MIN_MS doubling to BACKOFF_MAX_MS, reset
 * after a run of BACKOFF_RESET_MS), as restartPolicy Always.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "sup_int.h"

uint64_t sup_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- processes ------------------------------------------------------------ */

static void cgroup_join_self(const char *cg)
{
	char p[LAB_PATH + 16], pid[16];
	int fd;

	lab_fmt(p, sizeof(p), "%s/cgroup.procs", cg);
	lab_fmt(pid, sizeof(pid), "%d", (int)getpid());
	fd = open(p, O_WRONLY);
	if (fd < 0 || write(fd, pid, strlen(pid)) < 0) {
		fprintf(stderr, "join cgroup %s: %s\n", p, strerror(errno));
		_exit(126);
	}
	close(fd);
}

static int open_ns(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		_exit(126);
	}
	return fd;
}

/* Child side: stdio to the log, cgroup, namespaces, exec. Reports an exec
 * failure's errno on errfd (CLOEXEC, so a successful exec closes it). */
static void proc_child(const struct sup_proc *p, const struct sup_pod *pod, int errfd)
{
	sigset_t all;
	int fd, netfd, utsfd = -1, mntfd = -1, e;

	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
	}
	fd = open("/dev/null", O_RDONLY);
	dup2(fd, 0);
	if (fd > 2)
		close(fd);
	/* Nothing but stdio crosses into the pod's program. */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	/* Join the cgroup before exec, so the program's first connect() is
	 * already under the node's BPF hooks. */
	cgroup_join_self(p->cgroup);
	netfd = open_ns(p->netns);
	if (p->uts[0])
		utsfd = open_ns(p->uts);
	if (p->mnt[0])
		mntfd = open_ns(p->mnt);
	if (setns(netfd, CLONE_NEWNET) || (utsfd >= 0 && setns(utsfd, CLONE_NEWUTS)) ||
	    (mntfd >= 0 && setns(mntfd, CLONE_NEWNS))) {
		fprintf(stderr, "setns: %s\n", strerror(errno));
		_exit(126);
	}
	if (chdir("/"))
		_exit(126);
	if (pod) {
		setenv("POD_NAME", pod->name, 1);
		setenv("POD_NAMESPACE", pod->ns, 1);
		setenv("POD_IP", pod->addr, 1);
		setenv("HOSTNAME", pod->name, 1);
	}
	execvp(p->argv[0], p->argv);
	e = errno;
	fprintf(stderr, "exec %s: %s\n", p->argv[0], strerror(e));
	if (write(errfd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* Start p; 0 when exec succeeded, -errno of the exec otherwise. */
int sup_proc_start(struct sup_proc *p, const struct sup_pod *pod)
{
	int efd[2], e = 0, ret = 0;
	ssize_t n;
	pid_t pid;
	FILE *log;

	if (pipe2(efd, O_CLOEXEC))
		return -errno;
	log = fopen(p->log, "ae");
	if (log) {
		time_t now = time(NULL);
		char ts[64];

		strftime(ts, sizeof(ts), "%FT%TZ", gmtime(&now));
		fprintf(log, "--- %s zerohop lab: start %s (restart %d):", ts, p->name, p->restarts);
		for (int i = 0; p->argv[i]; i++)
			fprintf(log, " %s", p->argv[i]);
		fprintf(log, "\n");
		fclose(log);
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(efd[0]);
		close(efd[1]);
		return ret;
	}
	if (pid == 0) {
		close(efd[0]);
		proc_child(p, pod, efd[1]);
	}
	close(efd[1]);
	while ((n = read(efd[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	close(efd[0]);
	p->pid = pid;
	p->started_ms = sup_now_ms();
	if (n == sizeof(e)) {
		p->exec_errno = e;
		ret = -e;	/* the child exits 127; SIGCHLD reaps it */
	} else {
		p->exec_errno = 0;
		p->ever_execd = true;
	}
	return ret;
}

/* A process exited: plan the restart with backoff. */
/* The last line of a process log that the process wrote itself (not one
 * of our "--- ... start" markers), without its leading timestamp. */
void sup_log_last_line(const char *path, char *buf, size_t len)
{
	char tail[4096], *line = NULL, *p;
	ssize_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = '\0';
	if (fd < 0)
		return;
	if (lseek(fd, 0, SEEK_END) > (off_t)sizeof(tail) - 1)
		lseek(fd, -(off_t)sizeof(tail) + 1, SEEK_END);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, tail, sizeof(tail) - 1);
	close(fd);
	if (n <= 0)
		return;
	tail[n] = '\0';
	for (p = strtok(tail, "\n"); p; p = strtok(NULL, "\n"))
		if (strncmp(p, "--- ", 4) && p[strspn(p, " \t")])
			line = p;
	if (!line)
		return;
	/* zh_log lines start with "SECONDS.MILLIS " */
	if (strspn(line, "0123456789.") > 0 && line[strspn(line, "0123456789.")] == ' ')
		line += strspn(line, "0123456789.") + 1;
	snprintf(buf, len, "%s", line);
}

void sup_proc_exited(struct sup_proc *p, int status, const char *who)
{
	uint64_t now = sup_now_ms(), ran = now - p->started_ms;

	if (WIFEXITED(status))
		zh_info("%s: %s exited with status %d after %llu ms", who, p->name,
			WEXITSTATUS(status), (unsigned long long)ran);
	else
		zh_info("%s: %s killed by signal %d after %llu ms", who, p->name,
			WTERMSIG(status), (unsigned long long)ran);
	p->pid = 0;
	p->ready = false;
	p->exited_once = true;
	sup_log_last_line(p->log, p->last_error, sizeof(p->last_error));
	if (ran >= BACKOFF_RESET_MS)
		p->backoff_ms = 0;
	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (p->backoff_ms > BACKOFF_MAX_MS)
		p->backoff_ms = BACKOFF_MAX_MS;
	p->next_ms = now + p->backoff_ms;
	p->restarts++;
}

void sup_proc_free(struct sup_proc *p)
{
	for (int i = 0; p->argv && p->argv[i]; i++)
		free(p->argv[i]);
	free(p->argv);
	p->argv = NULL;
}

/* ---- cgroups ----------------------------------------------------------------- */

bool sup_cgroup_populated(const char *cg)
{
	char p[LAB_PATH + 16], buf[256];

	lab_fmt(p, sizeof(p), "%s/cgroup.events", cg);
	if (lab_read_file(p, buf, sizeof(buf)) < 0)
		return false;
	return strstr(buf, "populated 1") != NULL;
}

/* SIGTERM every process of the cgroup, wait up to STOP_GRACE_MS, then
 * cgroup.kill; reaps our own children meanwhile. */
void sup_cgroup_signal(const char *cg, int sig)
{
	char p[LAB_PATH + 16], buf[4096], *save = NULL;

	lab_fmt(p, sizeof(p), "%s/cgroup.procs", cg);
	if (lab_read_file(p, buf, sizeof(buf)) > 0)
		for (char *s = strtok_r(buf, "\n", &save); s; s = strtok_r(NULL, "\n", &save))
			if (atoi(s) > 1)
				kill(atoi(s), sig);
}

void sup_cgroup_stop(const char *cg)
{
	char p[LAB_PATH + 16];
	uint64_t end = sup_now_ms() + STOP_GRACE_MS;

	sup_cgroup_signal(cg, SIGTERM);
	while (sup_cgroup_populated(cg) && sup_now_ms() < end)
		usleep(5000);
	if (sup_cgroup_populated(cg)) {
		lab_fmt(p, sizeof(p), "%s/cgroup.kill", cg);
		if (lab_write_sys(p, "1"))	/* before 5.14: pid by pid */
			sup_cgroup_signal(cg, SIGKILL);
		end = sup_now_ms() + 2000;
		while (sup_cgroup_populated(cg) && sup_now_ms() < end)
			usleep(2000);
	}
}

/* ---- pod records -------------------------------------------------------------- */

