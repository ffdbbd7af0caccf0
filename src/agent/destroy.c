/* destroy.c — agent --destroy-stale=on: after a sync removed backends from
 * every Service, destroy this node's pods' established TCP sockets to them
 * (bpf/lb_destroy.bpf.c). The owner of such a socket sees ECONNABORTED.
 *
 * The TCP iterator walks the sockets of the network namespace it is created
 * in, so each pod's namespace is entered — by a forked child, so the agent's
 * own threads never change namespace. Pods are found the way a node would
 * find them: the child cgroups of the node cgroup, and the network namespace
 * of the first process in each (deduplicated by namespace inode).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/agent.h"
#include "zerohop/log.h"
#include "zerohop/run.h"
#include "lb_destroy.skel.h"

#define MAX_NS 4096

/* Run the iterator inside the network namespace of pid (in a child). */
static int iterate_in(int link_fd, const char *netns_path)
{
	pid_t pid;
	int rc;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char buf[256];
		int nfd = open(netns_path, O_RDONLY | O_CLOEXEC), ifd;

		if (nfd < 0 || setns(nfd, CLONE_NEWNET))
			_exit(2);
		ifd = bpf_iter_create(link_fd);
		if (ifd < 0)
			_exit(3);
		while (read(ifd, buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	rc = zh_wait(pid);
	return rc < 0 ? rc : rc ? -EIO : 0;
}

/* First pid of a cgroup, or 0. */
static int first_pid(const char *cg_dir)
{
	char path[700];
	FILE *f;
	int pid = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg_dir);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	return pid;
}

int ag_destroy_stale(const char *node_cgroup, const struct zh_lb_backend *gone, int n,
		     int *destroyed)
{
	struct zh_lb_destroy *skel = NULL;
	struct bpf_link *link = NULL;
	ino_t *seen = NULL;
	int n_seen = 0, i, ret = 0;
	struct dirent *de;
	DIR *d = NULL;
	uint8_t one = 1;
	uint64_t cnt = 0;
	uint32_t k = 0;

	*destroyed = 0;
	if (n <= 0)
		return 0;
	skel = zh_lb_destroy__open_and_load();
	if (!skel) {
		ret = -errno;
		zh_err("destroy-stale: load lb_destroy.bpf.o (needs bpf_sock_destroy, kernel 6.5+): %s",
		       strerror(-ret));
		goto out;
	}
	for (i = 0; i < n && i < 65536; i++)
		bpf_map_update_elem(bpf_map__fd(skel->maps.lb_stale), &gone[i], &one, BPF_ANY);
	link = bpf_program__attach_iter(skel->progs.zh_lb_destroy_iter, NULL);
	if (!link) {
		ret = -errno;
		zh_err("destroy-stale: attach iter/tcp: %s", strerror(-ret));
		goto out;
	}
	d = opendir(node_cgroup);
	if (!d) {
		ret = -errno;
		goto out;
	}
	seen = zh_calloc(MAX_NS, sizeof(*seen));
	while ((de = readdir(d)) && n_seen < MAX_NS) {
		char dir[600], ns[64];
		struct stat st;
		int pid, j;

		if (de->d_name[0] == '.' || de->d_type != DT_DIR)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", node_cgroup, de->d_name);
		pid = first_pid(dir);
		if (!pid)
			continue;
		snprintf(ns, sizeof(ns), "/proc/%d/ns/net", pid);
		if (stat(ns, &st))
			continue;
		for (j = 0; j < n_seen && seen[j] != st.st_ino; j++)
			;
		if (j < n_seen)
			continue;
		seen[n_seen++] = st.st_ino;
		if (iterate_in(bpf_link__fd(link), ns))
			zh_warn("destroy-stale: iterating sockets of pod cgroup %s failed", de->d_name);
	}
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.lb_destroyed), &k, &cnt) == 0)
		*destroyed = (int)cnt;
	k = 1;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.lb_destroyed), &k, &cnt) == 0 && cnt)
		zh_warn("destroy-stale: %llu sockets could not be destroyed", (unsigned long long)cnt);
	{
		uint64_t walked = 0;

		k = 2;
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.lb_destroyed), &k, &walked);
		zh_info("destroy-stale: %d pod network namespaces, %llu IPv4 TCP sockets walked",
			n_seen, (unsigned long long)walked);
	}
out:
	if (d)
		closedir(d);
	free(seen);
	bpf_link__destroy(link);
	zh_lb_destroy__destroy(skel);
	return ret;
}
