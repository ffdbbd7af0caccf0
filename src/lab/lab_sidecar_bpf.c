/* lab_sidecar_bpf.c — `lab up --mesh sidecar --accel on`: the supervisor
 * loads bpf/sidecar.bpf.c (the ASM/Merbridge capture, contract in
 * include/zerohop/abi/sidecar.h) once, attaches it to every node's cgroup
 * and keeps its maps in step with the pods that have a sidecar.
 *
 * Lifetime: the links belong to the supervisor's process (not pinned), so
 * they go when it goes, like every other part of the lab; only the
 * counters are pinned, at /sys/fs/bpf/zerohop/LAB/sidecar/sc_stats, for
 * `bpftool map dump pinned` and the tests (`lab down` removes the whole
 * pin dir). Under istio-init's nft rules alone (no --accel) nothing here
 * runs.
 *
 * Pod states (per pod with a sidecar):
 *   created --lab_sc_bpf_pod_add (after its cgroup, before its processes)-->
 *   IN MAPS (sc_cgpods[cgroup id] = {ip, node}, sc_pods[ip] = node)
 *   --lab_sc_bpf_pod_del (pod_delete)--> gone
 * A pod whose add failed keeps working through istio-init's REDIRECT: the
 * capture degrades to the plain sidecar mesh, it never breaks a pod.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "zerohop/log.h"
#include "zerohop/mounts.h"
#include "zerohop/paths.h"
#include "sup_int.h"
#include "zerohop/abi/sidecar.h"
#include "sidecar.skel.h"

static struct zh_sidecar *skel;
static bool load_failed;

/* Detach and free what sc_load made so far: all or nothing, so a failed
 * load never leaves the capture on some nodes (with empty maps) and not
 * on others. */
static void sc_unload(struct bpf_link **links, size_t n)
{
	for (size_t i = 0; i < n; i++)
		bpf_link__destroy(links[i]);
	free(links);
	zh_sidecar__destroy(skel);
	skel = NULL;
}

static int sc_load(struct sup *s)
{
	char cg[LAB_PATH], dir[LAB_PATH], pin[LAB_PATH + 16];
	struct bpf_link **links;
	size_t nl = 0;
	int fd, ret;

	skel = zh_sidecar__open_and_load();
	if (!skel)
		return -errno ? -errno : -EINVAL;
	struct bpf_program *progs[] = { skel->progs.zh_sc_connect4,
					skel->progs.zh_sc_getpeername4,
					skel->progs.zh_sc_sockops,
					skel->progs.zh_sc_getsockopt };
	const size_t np = sizeof(progs) / sizeof(progs[0]);

	links = calloc((size_t)s->t.n_nodes * np + 1, sizeof(*links));
	if (!links) {
		sc_unload(NULL, 0);
		return -ENOMEM;
	}
	for (int i = 0; i < s->t.n_nodes; i++) {
		lab_node_cgroup_path(cg, sizeof(cg), s->t.lab, s->t.nodes[i].name);
		fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			goto fail;
		}
		/* attached per node cgroup: applies to the pod cgroups below */
		for (size_t k = 0; k < np; k++) {
			links[nl] = bpf_program__attach_cgroup(progs[k], fd);
			if (!links[nl]) {
				ret = -errno;
				close(fd);
				goto fail;
			}	/* kept for the process's life: the links are fds */
			nl++;
		}
		close(fd);
	}
	zh_pin_dir(dir, sizeof(dir), s->t.lab, "sidecar");
	if ((ret = zh_bpffs_for(dir)) < 0 || (ret = zh_mkdir_p(dir, 0700)))
		goto fail;
	lab_fmt(pin, sizeof(pin), "%s/sc_stats", dir);
	unlink(pin);
	if ((ret = bpf_map__pin(skel->maps.sc_stats, pin)))
		goto fail;
	free(links);	/* the array only: the links stay, as fds of this process */
	return 0;
fail:
	sc_unload(links, nl);
	return ret ? ret : -EINVAL;
}

void lab_sc_bpf_pod_add(struct sup *s, struct sup_pod *pod, const char *cg)
{
	struct zh_sc_pod v = { .ip4 = pod->ip, .node = (__u32)pod->node };
	__u32 node = (__u32)pod->node;
	struct stat st;
	__u64 id;
	int ret;

	if (!s->t.sidecar || s->t.accel != 1 || load_failed)
		return;
	if (!skel && (ret = sc_load(s))) {
		zh_err("sidecar capture (BPF) not loaded, istio-init's nft rules only: %s",
		       strerror(-ret));
		load_failed = true;
		return;
	}
	/* a cgroup2 directory's inode number is its cgroup id */
	if (stat(cg, &st)) {
		zh_err("pod %s/%s: stat %s: %s", pod->ns, pod->name, cg, strerror(errno));
		return;
	}
	id = st.st_ino;
	if (bpf_map__update_elem(skel->maps.sc_pods, &pod->ip, sizeof(pod->ip), &node, sizeof(node),
				 BPF_ANY) ||
	    bpf_map__update_elem(skel->maps.sc_cgpods, &id, sizeof(id), &v, sizeof(v), BPF_ANY))
		zh_err("pod %s/%s: sidecar capture maps: %s", pod->ns, pod->name, strerror(errno));
}

void lab_sc_bpf_pod_del(struct sup *s, struct sup_pod *pod, const char *cg)
{
	struct stat st;
	__u64 id;

	if (!skel)
		return;
	bpf_map__delete_elem(skel->maps.sc_pods, &pod->ip, sizeof(pod->ip), 0);
	if (!stat(cg, &st)) {
		id = st.st_ino;
		bpf_map__delete_elem(skel->maps.sc_cgpods, &id, sizeof(id), 0);
	}
	(void)s;
}
