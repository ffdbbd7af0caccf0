/* lab_down.c — remove everything a lab made, also after a crash.
 *
 * Order matters (each step frees what the next one needs gone):
 * 1. the supervisor, by the pid it recorded (checked to be in the lab's
 *    cgroup, so a recycled pid is never hit), so nothing restarts;
 * 2. every process in the lab's cgroup tree (cgroup.kill, or each pid of
 *    cgroup.procs on older kernels), then any process
 *    still living in one of the lab's network namespaces (e.g. started by
 *    `lab exec --node`), each by pid;
 * 3. the namespaces (bind mounts under /run/netns and RUNDIR/ns): with no
 *    process left the kernel frees them and their veths;
 * 4. cgroups bottom-up, BPF pins, the run dir.
 * Every step tolerates "already gone", so down is idempotent. Leftovers of a
 * crashed run are found by RUNDIR/netns.list and by the lab's name prefix.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "lab_int.h"

#define MAX_NS 4096

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool pid_in_lab_cgroup(int pid, const char *lab)
{
	char p[64], buf[4096], want[128];

	lab_fmt(p, sizeof(p), "/proc/%d/cgroup", pid);
	if (lab_read_file(p, buf, sizeof(buf)) < 0)
		return false;
	lab_fmt(want, sizeof(want), "/zerohop-%s/", lab);
	return strstr(buf, want) != NULL;
}

static void kill_supervisor(const char *lab)
{
	char p[LAB_PATH], buf[32];
	int pid;
	uint64_t end;

	lab_fmt(p, sizeof(p), "%s/%s/supervisor.pid", ZH_RUN_ROOT, lab);
	if (lab_read_file(p, buf, sizeof(buf)) <= 0)
		return;
	pid = atoi(buf);
	if (pid <= 1 || !pid_in_lab_cgroup(pid, lab))
		return;
	kill(pid, SIGKILL);
	end = mono_ms() + 2000;
	while (lab_pid_alive(pid) && mono_ms() < end)
		usleep(5000);
}

static bool cg_populated(const char *cg)
{
	char p[LAB_PATH + 16], buf[256];

	lab_fmt(p, sizeof(p), "%s/cgroup.events", cg);
	if (lab_read_file(p, buf, sizeof(buf)) < 0)
		return false;
	return strstr(buf, "populated 1") != NULL;
}

/* SIGKILL every pid listed in cgroup.procs of cg and its descendants. */
static void cg_kill_procs(const char *path)
{
	char p[LAB_PATH + 16], buf[8192], *save = NULL;
	DIR *d;
	struct dirent *e;

	lab_fmt(p, sizeof(p), "%s/cgroup.procs", path);
	if (lab_read_file(p, buf, sizeof(buf)) > 0)
		for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			if (atoi(l) > 1)
				kill(atoi(l), SIGKILL);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		char sub[LAB_PATH * 2];

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		lab_fmt(sub, sizeof(sub), "%s/%s", path, e->d_name);
		cg_kill_procs(sub);
	}
	if (d)
		closedir(d);
}

/* Remove a cgroup tree bottom-up (directories only hold kernel files). */
static int cg_rmdir_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int ret = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char sub[LAB_PATH * 2];

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		lab_fmt(sub, sizeof(sub), "%s/%s", path, e->d_name);
		ret |= cg_rmdir_tree(sub);
	}
	closedir(d);
	if (rmdir(path) && errno != ENOENT) {
		lab_err("rmdir %s: %s", path, strerror(errno));
		return -errno;
	}
	return ret;
}

/* The lab's netns names: recorded ones plus "LAB-*" entries of /run/netns
 * that no other lab has recorded. */
static int collect_netns(const char *lab, char (*names)[256], int max)
{
	char path[LAB_PATH], line[300], prefix[128];
	int n = 0;
	FILE *f;
	DIR *d;
	struct dirent *e;

	lab_fmt(path, sizeof(path), "%s/%s/netns.list", ZH_RUN_ROOT, lab);
	f = fopen(path, "re");
	while (f && n < max && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0])
			lab_fmt(names[n++], 256, "%s", line);
	}
	if (f)
		fclose(f);
	lab_fmt(prefix, sizeof(prefix), "%s-", lab);
	d = opendir("/run/netns");
	while (d && n < max && (e = readdir(d))) {
		bool dup = false, other = false;
		DIR *labs;
		struct dirent *le;

		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		for (int i = 0; i < n && !dup; i++)
			dup = !strcmp(names[i], e->d_name);
		if (dup)
			continue;
		/* Lab "a" must not take lab "a-b"'s namespaces. */
		labs = opendir(ZH_RUN_ROOT);
		while (labs && !other && (le = readdir(labs))) {
			char op[LAB_PATH * 2], buf[65536];

			if (le->d_name[0] == '.' || !strcmp(le->d_name, lab))
				continue;
			lab_fmt(op, sizeof(op), "%s/%s/netns.list", ZH_RUN_ROOT, le->d_name);
			lab_fmt(line, sizeof(line), "%s\n", e->d_name);
			if (lab_read_file(op, buf, sizeof(buf)) > 0) {
				char nl[300];

				lab_fmt(nl, sizeof(nl), "\n%s", line);
				other = !strncmp(buf, line, strlen(line)) || strstr(buf, nl);
			}
		}
		if (labs)
			closedir(labs);
		if (!other)
			lab_fmt(names[n++], 256, "%s", e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

/* Kill (by pid) every process whose network namespace is one of the lab's. */
static void kill_netns_procs(char (*names)[256], int n)
{
	ino_t *inos = zh_calloc(n + 1, sizeof(*inos));
	int n_ino = 0, killed[256], n_killed = 0;
	uint64_t end;
	DIR *d;
	struct dirent *e;

	for (int i = 0; i < n; i++) {
		char p[LAB_PATH];
		struct stat st;

		lab_fmt(p, sizeof(p), "/run/netns/%s", names[i]);
		if (stat(p, &st) == 0 && st.st_dev != 0)
			inos[n_ino++] = st.st_ino;
	}
	d = n_ino ? opendir("/proc") : NULL;
	while (d && (e = readdir(d))) {
		char p[64];
		struct stat st;
		int pid = atoi(e->d_name);

		if (pid <= 1 || pid == getpid())
			continue;
		lab_fmt(p, sizeof(p), "/proc/%d/ns/net", pid);
		if (stat(p, &st))
			continue;
		for (int i = 0; i < n_ino; i++)
			if (st.st_ino == inos[i]) {
				kill(pid, SIGKILL);
				if (n_killed < 256)
					killed[n_killed++] = pid;
				break;
			}
	}
	if (d)
		closedir(d);
	end = mono_ms() + 2000;
	for (int i = 0; i < n_killed; i++)
		while (lab_pid_alive(killed[i]) && mono_ms() < end)
			usleep(2000);
	free(inos);
}

/* Unmount everything at or below dir (deepest first). */
static void umount_below(const char *dir)
{
	char line[2048], (*mps)[LAB_PATH] = NULL;
	size_t dl = strlen(dir);
	int n = 0, cap = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	while (f && fgets(line, sizeof(line), f)) {
		char mp[LAB_PATH];

		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1)
			continue;
		if (strncmp(mp, dir, dl) || (mp[dl] && mp[dl] != '/'))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			mps = zh_realloc(mps, cap * sizeof(*mps));
		}
		lab_fmt(mps[n++], LAB_PATH, "%s", mp);
	}
	if (f)
		fclose(f);
	for (int i = n - 1; i >= 0; i--)
		umount2(mps[i], MNT_DETACH);
	free(mps);
}

int lab_down(const char *lab, bool verbose)
{
	char (*names)[256] = zh_calloc(MAX_NS, 256);
	char cg[LAB_PATH], p[LAB_PATH + 16], rundir[LAB_PATH];
	const char *root = lab_cgroup_root(false);
	int n, ret = 0;
	uint64_t end;

	zh_run_dir(rundir, sizeof(rundir), lab);
	kill_supervisor(lab);	/* first: it would restart the containers removed next */
	lab_podman_down(lab);	/* through podman: its state is outside the lab's cgroups */
	if (root) {
		lab_lab_cgroup_path(cg, sizeof(cg), lab);
		lab_fmt(p, sizeof(p), "%s/cgroup.kill", cg);
		if (access(cg, F_OK) == 0) {
			/* Kernels before 5.14 have no cgroup.kill: the pids of
			 * cgroup.procs, tree-wide, instead. */
			if (lab_write_sys(p, "1"))
				cg_kill_procs(cg);
			end = mono_ms() + 3000;
			while (cg_populated(cg) && mono_ms() < end)
				usleep(5000);
		}
	}
	lab_podman_sweep(lab);	/* again: a pod's container started during the above */
	n = collect_netns(lab, names, MAX_NS);
	kill_netns_procs(names, n);
	for (int i = 0; i < n; i++) {
		lab_fmt(p, sizeof(p), "/run/netns/%s", names[i]);
		if (umount2(p, MNT_DETACH) && errno != EINVAL && errno != ENOENT)
			lab_err("umount %s: %s", p, strerror(errno));
		if (unlink(p) && errno != ENOENT) {
			lab_err("unlink %s: %s", p, strerror(errno));
			ret = -EBUSY;
		}
	}
	umount_below(rundir);
	if (root) {
		lab_lab_cgroup_path(cg, sizeof(cg), lab);
		if (cg_rmdir_tree(cg))
			ret = -EBUSY;
	}
	zh_pin_dir(p, sizeof(p), lab, "");
	p[strlen(p) - 1] = 0;	/* /sys/fs/bpf/zerohop/LAB */
	if ((n = lab_rm_tree(p))) {
		lab_err("remove %s: %s", p, strerror(-n));
		ret = -EBUSY;
	}
	if (lab_rm_tree(rundir)) {
		lab_err("remove %s: not empty or busy", rundir);
		ret = -EBUSY;
	}
	if (verbose && !ret)
		printf("lab %s is down\n", lab);
	free(names);
	return ret;
}
