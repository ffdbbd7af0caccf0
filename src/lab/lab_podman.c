/* lab_podman.c — real containers in the lab: Debian's podman run inside a
 * node's network namespace, with the zerohop CNI plugin as its network
 * (docs/cni.md "Podman in the lab"). `zerohop lab podman --node NODE --
 * ARGS` is podman for that node; `lab down` removes what it made.
 *
 * Per node, under RUNDIR/podman/NODE (made on first use):
 *   containers.conf   runc, cgroupfs, default_ulimits = [] (raising
 *                     RLIMIT_NOFILE is refused here), CNI backend pointing
 *                     at net.d/ and bin/, podman's tmp, static and volume
 *                     dirs in here (DESIGN.md section 4: the machine's
 *                     /etc/containers and podman state stay untouched)
 *   storage.conf      vfs driver (no overlay mounts to leak), graphroot
 *                     storage/, runroot run/
 *   net.d/zerohop.conflist  the plugin: this node, its pod CIDR, the lab's
 *                     state dir, the addresses .200-.250 (the lab's own
 *                     process pods take theirs next-fit from .2, lab_sup.c)
 *   net.d/zerohop-kubelet.conflist  the same for --runtime podman pods:
 *                     "publish": false, the address from podman --ip (5)
 *   bin/zerohop-cni   a symlink to this zerohop binary
 *   runc/             runc's state (--runtime-flag root=)
 *   ipam/, labels/    the plugin's records and the containers' labels
 *
 * Invariants:
 * 1. podman always runs through pm_exec(): in the node's network namespace
 *    (setns, not `ip netns exec`, which would hide /sys/fs/cgroup from
 *    runc), with this node's configuration in the environment.
 * 2. Containers are created under the node's cgroup (--cgroup-parent), so
 *    the node agent's hooks apply to them as to the lab's process pods.
 * 3. `--label K=V` and `--name N` of `run`/`create` are written to
 *    labels/default_N before podman starts, so the CNI plugin publishes
 *    the pod with the container's labels (cni_pod.c).
 * 4. lab_podman_down() removes every container through podman (CNI DEL
 *    unpublishes and frees each address; podman drops its netns file,
 *    runc state and CNI cache entry), then what a crash left of the
 *    latter two (found through libcni's cache entries of this lab's
 *    networks), then the v1 cgroup directories runc
 *    made for the lab (hybrid hosts); `lab down` stops the supervisor
 *    before (it would restart them) and kills the rest after.
 * 5. Under `lab up --runtime podman` the lab's kubelet owns the pod: it
 *    picks the address (podman --ip, CNI_ARGS IP=), publishes the pod
 *    (the zhlab-LAB-kubelet network has "publish": false) and runs the
 *    one container in the foreground as the pod's process, under the
 *    pod's cgroup, so its readiness, isolation, drain and termination
 *    (lab_sup.c) apply unchanged; pod_finish() removes the container.
 * 6. The pod image is built at `lab up` from local files only (busybox-
 *    static, this zerohop binary and the libraries ldd lists) and
 *    imported on every node: nothing is pulled.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerohop/jsonv.h"
#include "zerohop/log.h"
#include "zerohop/mounts.h"
#include "zerohop/paths.h"
#include "zerohop/run.h"
#include "lab_int.h"

static char *pm_dir(char *buf, size_t len, const char *lab, const char *node)
{
	lab_fmt(buf, len, "%s/%s/podman/%s", ZH_RUN_ROOT, lab, node);
	return buf;
}

/* The node's cgroup relative to the cgroup2 root (what --cgroup-parent takes). */
static int cgroup_parent(const char *lab, const char *node, char *buf, size_t len)
{
	const char *root = lab_cgroup_root(true);
	char cg[LAB_PATH];

	if (!root || !strcmp(root, ZH_CGROUP2_OWN)) {
		lab_err("podman: runc places containers in the machine's cgroup2 hierarchy, and none is mounted (zerohop mounted its own at %s)",
			ZH_CGROUP2_OWN);
		return -ENOENT;
	}
	lab_node_cgroup_path(cg, sizeof(cg), lab, node);
	lab_fmt(buf, len, "%s", cg + strlen(root));
	return 0;
}

static int pm_setup(const struct lab_topo *t, const struct lab_node *n, const char *dir)
{
	char p[LAB_PATH + 64], text[4096], st[LAB_PATH], net[16], lo[16], hi[16];
	char cidr6[INET6_ADDRSTRLEN + 64] = "";
	int ret;

	lab_fmt(p, sizeof(p), "%s/containers.conf", dir);
	if (access(p, F_OK) == 0)
		return 0;
	for (const char *sub = "net.d"; sub; sub = !strcmp(sub, "net.d") ? "bin" :
	     !strcmp(sub, "bin") ? "labels" : !strcmp(sub, "labels") ? "tmp" : NULL) {
		lab_fmt(p, sizeof(p), "%s/%s", dir, sub);
		ret = zh_mkdir_p(p, 0755);
		if (ret) {
			lab_err("podman: mkdir %s: %s", p, strerror(-ret));
			return ret;
		}
	}
	lab_fmt(p, sizeof(p), "%s/bin/zerohop-cni", dir);
	unlink(p);
	if (symlink(t->zerohop, p)) {
		lab_err("podman: symlink %s: %s", p, strerror(errno));
		return -errno;
	}
	/* dual-stack: each pod's IPv6 is derived from its IPv4 by the plugin
	 * exactly as lab_pod_ip6() does for the kubelet's podIPs; IPv6-only:
	 * the same IPv6 alone, its IPv4 only the index (lab.h v6only) */
	if (t->pod_cidr6_len) {
		char a6[INET6_ADDRSTRLEN];

		lab_fmt(cidr6, sizeof(cidr6), " \"podCIDR6\": \"%s/64\",%s",
			inet_ntop(AF_INET6, &n->pod_net6, a6, sizeof(a6)),
			t->v6only ? " \"ipv6Only\": true," : "");
	}
	lab_fmt(text, sizeof(text),
		"{\"cniVersion\": \"1.0.0\", \"name\": \"zhlab-%s\", \"plugins\": [{\n"
		"  \"type\": \"zerohop-cni\", \"node\": \"%s\", \"podCIDR\": \"%s/%d\",%s\n"
		"  \"rangeStart\": \"%s\", \"rangeEnd\": \"%s\",\n"
		"  \"stateDir\": \"%s\", \"dataDir\": \"%s/ipam\", \"labelsDir\": \"%s/labels\"}]}\n",
		t->lab, n->name, lab_ip4_str(n->pod_net, net), n->pod_len, cidr6,
		lab_ip4_str(htonl(ntohl(n->pod_net) + LAB_CNI_RANGE_LO), lo),
		lab_ip4_str(htonl(ntohl(n->pod_net) + LAB_CNI_RANGE_HI), hi),
		zh_state_dir(st, sizeof(st), t->lab), dir, dir);
	lab_fmt(p, sizeof(p), "%s/net.d/zerohop.conflist", dir);
	if ((ret = lab_write_str(p, text)))
		return ret;
	/* --runtime podman: the lab's kubelet picks the address and publishes
	 * the pod itself (invariant 5) */
	lab_fmt(text, sizeof(text),
		"{\"cniVersion\": \"1.0.0\", \"name\": \"zhlab-%s-kubelet\", \"plugins\": [{\n"
		"  \"type\": \"zerohop-cni\", \"node\": \"%s\", \"podCIDR\": \"%s/%d\",%s\n"
		"  \"publish\": false, \"capabilities\": {\"ips\": true},\n"
		"  \"stateDir\": \"%s\", \"dataDir\": \"%s/ipam\"}]}\n",
		t->lab, n->name, lab_ip4_str(n->pod_net, net), n->pod_len, cidr6, st, dir);
	lab_fmt(p, sizeof(p), "%s/net.d/zerohop-kubelet.conflist", dir);
	if ((ret = lab_write_str(p, text)))
		return ret;
	lab_fmt(text, sizeof(text),
		"[storage]\ndriver = \"vfs\"\nrunroot = \"%s/run\"\ngraphroot = \"%s/storage\"\n",
		dir, dir);
	lab_fmt(p, sizeof(p), "%s/storage.conf", dir);
	if ((ret = lab_write_str(p, text)))
		return ret;
	lab_fmt(text, sizeof(text),
		"[containers]\ndefault_ulimits = []\nlog_driver = \"k8s-file\"\n"
		"[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"none\"\n"
		"tmp_dir = \"%s/tmp\"\nstatic_dir = \"%s/storage/libpod\"\nvolume_path = \"%s/storage/volumes\"\n"
		"[network]\nnetwork_backend = \"cni\"\nnetwork_config_dir = \"%s/net.d\"\n"
		"cni_plugin_dirs = [\"%s/bin\"]\ndefault_network = \"zhlab-%s\"\n",
		dir, dir, dir, dir, dir, t->lab);
	lab_fmt(p, sizeof(p), "%s/containers.conf", dir);
	return lab_write_str(p, text);	/* last: its presence means "set up" */
}

/* Invariant 3: labels of `run`/`create` for the CNI plugin. */
static void write_labels(const char *dir, char **args, int n)
{
	char text[4096] = "", p[LAB_PATH + 300];
	const char *name = NULL;
	size_t off = 0;

	if (n < 1 || (strcmp(args[0], "run") && strcmp(args[0], "create")))
		return;
	for (int i = 1; i < n; i++) {
		const char *v = NULL;

		if ((!strcmp(args[i], "--name") || !strcmp(args[i], "-l") ||
		     !strcmp(args[i], "--label")) && i + 1 < n)
			v = args[i + 1];
		else if (!strncmp(args[i], "--name=", 7) || !strncmp(args[i], "--label=", 8))
			v = strchr(args[i], '=') + 1;
		if (!v)
			continue;
		if (args[i][2] == 'n')
			name = v;
		else if (off < sizeof(text))
			off += (size_t)lab_fmt(text + off, sizeof(text) - off, "%s\n", v);
	}
	if (!name)
		return;
	lab_fmt(p, sizeof(p), "%s/labels/default_%s", dir, name);
	lab_write_str(p, text);
}

/* Run podman for one node (invariant 1); args[0] is podman's subcommand.
 * Returns podman's exit status (run.h), or -errno. */
static int pm_exec(const char *lab, const char *node, const char *dir, char **args, int n,
		   bool quiet, bool in_place)
{
	char conf[LAB_PATH + 32], sconf[LAB_PATH + 32], root[LAB_PATH + 32], runroot[LAB_PATH + 32];
	char runc[LAB_PATH + 32], parent[LAB_PATH + 32];
	char **v = zh_calloc(n + 16, sizeof(char *));
	int k = 0, ret;
	pid_t pid;

	ret = cgroup_parent(lab, node, parent + 16, sizeof(parent) - 16);
	if (ret) {
		free(v);
		return ret;
	}
	memcpy(parent, "--cgroup-parent=", 16);
	lab_fmt(conf, sizeof(conf), "%s/containers.conf", dir);
	lab_fmt(sconf, sizeof(sconf), "%s/storage.conf", dir);
	lab_fmt(root, sizeof(root), "--root=%s/storage", dir);
	lab_fmt(runroot, sizeof(runroot), "--runroot=%s/run", dir);
	lab_fmt(runc, sizeof(runc), "--runtime-flag=root=%s/runc", dir);
	v[k++] = "podman";
	v[k++] = root;
	v[k++] = runroot;
	v[k++] = runc;
	for (int i = 0; i < n; i++) {
		bool own = false;

		for (int j = 1; j < n; j++)
			own |= !strncmp(args[j], "--cgroup-parent", 15);
		v[k++] = args[i];
		if (i == 0 && !own && (!strcmp(args[0], "run") || !strcmp(args[0], "create")))
			v[k++] = parent;	/* invariant 2 */
	}
	write_labels(dir, args, n);
	pid = in_place ? 0 : fork();
	if (pid < 0) {
		free(v);
		return -errno;
	}
	if (pid == 0) {
		if (lab_join_node(lab, node)) {
			lab_err("podman: cannot enter node %s's network namespace", node);
			_exit(126);
		}
		setenv("CONTAINERS_CONF", conf, 1);
		setenv("CONTAINERS_STORAGE_CONF", sconf, 1);
		if (quiet) {
			freopen("/dev/null", "w", stdout);
			freopen("/dev/null", "w", stderr);
		}
		execvp(v[0], v);
		lab_err("podman: exec: %s", strerror(errno));
		_exit(127);
	}
	free(v);
	return zh_wait(pid);
}

int lab_podman(const char *lab, const char *node, char **args, int n)
{
	struct lab_topo *t = zh_calloc(1, sizeof(*t));
	const struct lab_node *nd;
	char dir[LAB_PATH];
	int ret;

	ret = lab_topo_read(lab, t);
	if (ret) {
		lab_err("podman: lab %s is not up", lab);
		goto out;
	}
	nd = lab_topo_node(t, node);
	if (!nd) {
		lab_err("podman: no node '%s' in lab %s", node, lab);
		ret = -ENOENT;
		goto out;
	}
	pm_dir(dir, sizeof(dir), lab, node);
	ret = pm_setup(t, nd, dir);
	if (!ret)
		ret = pm_exec(lab, node, dir, args, n, false, true);	/* returns on failure only */
out:
	free(t);
	return ret < 0 ? 1 : ret;
}

/* rmdir the empty directories of a tree, deepest first. */
static void rmdir_tree(const char *path)
{
	char p[LAB_PATH * 2];
	struct dirent *de;
	DIR *d = opendir(path);

	while (d && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		lab_fmt(p, sizeof(p), "%s/%s", path, de->d_name);
		rmdir_tree(p);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* After a crash podman cannot clean up what lives outside the lab's dirs:
 * its netns files (/run/netns/netns-*) and libcni's cache entries. Both are
 * found through the cache entries of this lab's two networks, named
 * NETWORK-CONTAINERID-IFNAME by libcni. */
#define CNI_CACHE "/var/lib/cni/results"

/* Is the cache entry NAME one of this lab's networks? By its name alone: an
 * entry libcni was killed while writing (a crash during a pod's start) is
 * not valid JSON and must go too. "zhlab-LAB-" followed by a container id
 * or by "kubelet-" and one; another lab whose name starts with LAB has a
 * different next character. */
static bool cni_cache_ours(const char *name, const char *lab)
{
	char pfx[128];
	size_t n, hex;

	n = (size_t)lab_fmt(pfx, sizeof(pfx), "zhlab-%s-", lab);
	if (n >= sizeof(pfx) || strncmp(name, pfx, n))
		return false;
	name += n;
	if (!strncmp(name, "kubelet-", 8))
		name += 8;
	hex = strspn(name, "0123456789abcdef");
	return hex == 64 && name[hex] == '-';
}

void lab_podman_sweep(const char *lab)
{
	char p[LAB_PATH * 2];
	struct dirent *de;
	DIR *d = opendir(CNI_CACHE);

	while (d && (de = readdir(d))) {
		const struct jv *ifs;
		const char *ns;
		struct jv *v;
		size_t len;
		char *text;
		FILE *f;

		if (!cni_cache_ours(de->d_name, lab))
			continue;
		lab_fmt(p, sizeof(p), "%s/%s", CNI_CACHE, de->d_name);
		f = fopen(p, "re");
		if (f) {
			fseek(f, 0, SEEK_END);
			len = (size_t)ftell(f);
			rewind(f);
			text = zh_malloc(len + 1);
			len = fread(text, 1, len, f);
			fclose(f);
			v = jv_parse(text, len, NULL, 0);
			free(text);
			ifs = jv_get(jv_get(v, "result"), "interfaces");
			for (int i = 0; ifs && i < ifs->n; i++) {
				ns = jv_str(jv_get(jv_at(ifs, i), "sandbox"));
				if (ns && !strncmp(ns, "/run/netns/netns-", 17)) {
					umount2(ns, MNT_DETACH);
					unlink(ns);
				}
			}
			jv_free(v);
		}
		unlink(p);
	}
	if (d)
		closedir(d);
}

void lab_podman_down(const char *lab)
{
	char dir[LAB_PATH], p[LAB_PATH * 2], line[1024], mp[LAB_PATH], type[32];
	char *rm[] = { "rm", "--all", "--force", "--time=0", NULL };
	struct dirent *de;
	FILE *f;
	int left = 1;
	DIR *d;

	lab_fmt(dir, sizeof(dir), "%s/%s/podman", ZH_RUN_ROOT, lab);
	d = opendir(dir);	/* none: no podman here, or a crash removed it; sweep anyway */
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		lab_fmt(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (pm_exec(lab, de->d_name, p, rm, 4, true, false))
			lab_err("podman: rm --all on node %s failed; the lab's cgroups are killed anyway",
				de->d_name);
	}
	if (d)
		closedir(d);
	lab_podman_sweep(lab);
	/* v1 hierarchies of a hybrid host: runc made zerohop-LAB there too;
	 * conmon (in NODE/conmon) exits just after its container, so retry
	 * for a while */
	for (int tries = 0; tries < 60 && left; tries++) {
		if (tries)
			usleep(50000);
		left = 0;
		f = fopen("/proc/self/mountinfo", "re");
		while (f && fgets(line, sizeof(line), f)) {
			char *dash = strstr(line, " - ");

			if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1 ||
			    sscanf(dash + 3, "%31s", type) != 1 || strcmp(type, "cgroup"))
				continue;
			lab_fmt(p, sizeof(p), "%s/zerohop-%s", mp, lab);
			rmdir_tree(p);
			left += access(p, F_OK) == 0;
		}
		if (f)
			fclose(f);
	}
	if (left)
		lab_err("podman: %d cgroup v1 directories zerohop-%s are still busy", left, lab);
}

/* ---- --runtime podman: the lab's kubelet runs pods as containers -------- */

#define PM_IMAGE "localhost/zerohop-pod:lab"
#define PM_ZEROHOP "/usr/local/bin/zerohop"	/* the zerohop binary in the image */

static int cp_file(const char *src, const char *dst)
{
	char *argv[] = { "cp", "-L", (char *)src, (char *)dst, NULL };

	return lab_run(argv, false);
}

/* The pod image (invariant 6): busybox-static, the zerohop binary and its
 * shared libraries, packed from local files only. */
static int build_image(const struct lab_topo *t, const char *root, const char *tar)
{
	static const char *const applets[] = { "sh", "ls", "cat", "echo", "sleep", "wget", "nc",
					       "ip", "ping", "hostname", "true", "nslookup", "env" };
	char p[LAB_PATH * 2], cmd[LAB_PATH + 16], line[LAB_PATH];
	const char *bb = access("/usr/bin/busybox", X_OK) ? "/bin/busybox" : "/usr/bin/busybox";
	FILE *f;
	int ret;

	for (const char *d = "bin"; d; d = !strcmp(d, "bin") ? "usr/local/bin" :
	     !strcmp(d, "usr/local/bin") ? "etc" : !strcmp(d, "etc") ? "tmp" : NULL) {
		lab_fmt(p, sizeof(p), "%s/%s", root, d);
		if ((ret = zh_mkdir_p(p, 0755)))
			return ret;
	}
	lab_fmt(p, sizeof(p), "%s/bin/busybox", root);
	if ((ret = cp_file(bb, p)))
		return ret;
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		lab_fmt(p, sizeof(p), "%s/bin/%s", root, applets[i]);
		if (symlink("busybox", p) && errno != EEXIST)
			return -errno;
	}
	lab_fmt(p, sizeof(p), "%s%s", root, PM_ZEROHOP);
	if ((ret = cp_file(t->zerohop, p)))
		return ret;
	lab_fmt(cmd, sizeof(cmd), "ldd %s", t->zerohop);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *lib = strchr(line, '/'), *end;

		if (!lib)
			continue;
		end = lib + strcspn(lib, " \n");
		*end = 0;
		lab_fmt(p, sizeof(p), "%s%s", root, lib);
		*strrchr(p, '/') = 0;
		zh_mkdir_p(p, 0755);
		lab_fmt(p, sizeof(p), "%s%s", root, lib);
		if ((ret = cp_file(lib, p))) {
			pclose(f);
			return ret;
		}
	}
	if (!f || pclose(f))
		lab_err("podman: ldd %s failed; the image may miss libraries", t->zerohop);
	lab_fmt(p, sizeof(p), "%s/etc/passwd", root);
	if ((ret = lab_write_str(p, "root:x:0:0:root:/:/bin/sh\n")))
		return ret;
	{
		char *argv[] = { "tar", "-C", (char *)root, "-cf", (char *)tar, ".", NULL };

		return lab_run(argv, false);
	}
}

int lab_podman_up(const struct lab_topo *t)
{
	char base[LAB_PATH], root[LAB_PATH + 16], tar[LAB_PATH + 16], dir[LAB_PATH];
	char *imp[] = { "import", "--quiet", tar, PM_IMAGE, NULL };
	int ret;

	lab_fmt(base, sizeof(base), "%s/%s/podman", ZH_RUN_ROOT, t->lab);
	lab_fmt(root, sizeof(root), "%s/rootfs", base);
	lab_fmt(tar, sizeof(tar), "%s/image.tar", base);
	ret = build_image(t, root, tar);
	lab_rm_tree(root);
	if (ret) {
		lab_err("podman: cannot build the pod image %s", tar);
		return ret;
	}
	for (int i = 0; i < t->n_nodes; i++) {
		pm_dir(dir, sizeof(dir), t->lab, t->nodes[i].name);
		ret = pm_setup(t, &t->nodes[i], dir);
		if (!ret)
			ret = pm_exec(t->lab, t->nodes[i].name, dir, imp, 4, true, false);
		if (ret) {
			lab_err("podman: node %s: cannot set up podman or import %s (exit %d)",
				t->nodes[i].name, PM_IMAGE, ret);
			return ret < 0 ? ret : -EIO;
		}
	}
	unlink(tar);
	return 0;
}

char **lab_podman_pod_argv(const struct lab_topo *t, const char *node, const char *ns,
			   const char *name, uint32_t ip, const char *addr, const char *pod_cg,
			   const struct lab_mount *mounts, int n_mounts, char **cmd)
{
	const char *root = lab_cgroup_root(true);
	int n = 0, cap = 50 + 2 * n_mounts;
	char **v, a[16], buf[LAB_PATH * 2 + 8];

	for (char **c = cmd; *c; c++)
		cap++;
	v = zh_calloc(cap, sizeof(char *));
#define ADD(s) (v[n++] = zh_strdup(s))
	ADD(t->zerohop);
	ADD("lab");
	ADD("podman");
	ADD("--lab");
	ADD(t->lab);
	ADD("--node");
	ADD(node);
	ADD("--");
	ADD("run");
	ADD("--rm");
	ADD("--replace");
	lab_fmt(buf, sizeof(buf), "--name=%s.%s", ns, name);	/* a DNS name, as CNI_ARGS wants */
	ADD(buf);
	lab_fmt(buf, sizeof(buf), "--network=zhlab-%s-kubelet", t->lab);
	ADD(buf);
	lab_fmt(buf, sizeof(buf), "--ip=%s", lab_ip4_str(ip, a));
	ADD(buf);
	lab_fmt(buf, sizeof(buf), "--cgroup-parent=%s", root ? pod_cg + strlen(root) : pod_cg);
	ADD(buf);
	lab_fmt(buf, sizeof(buf), "--hostname=%s", name);
	ADD(buf);
	lab_fmt(buf, sizeof(buf), "--env=POD_NAME=%s", name);
	ADD(buf);
	lab_fmt(buf, sizeof(buf), "--env=POD_NAMESPACE=%s", ns);
	ADD(buf);
	lab_fmt(buf, sizeof(buf), "--env=POD_IP=%s", addr);
	ADD(buf);
	/* the lab's run dir where process pods see it (the state the cluster
	 * DNS pod serves from, ConfigMap files); read-write: the state source
	 * opens its lock for writing */
	lab_fmt(buf, sizeof(buf), "--volume=%s/%s:%s/%s", ZH_RUN_ROOT, t->lab, ZH_RUN_ROOT, t->lab);
	ADD(buf);
	for (int i = 0; i < n_mounts; i++) {
		if (mounts[i].tmpfs)
			lab_fmt(buf, sizeof(buf), "--tmpfs=%s", mounts[i].dst);
		else
			lab_fmt(buf, sizeof(buf), "--volume=%s:%s", mounts[i].src, mounts[i].dst);
		ADD(buf);
	}
	ADD(PM_IMAGE);
	/* the lab maps well-known images to this binary (lab_plan_image): in
	 * the container it is the image's copy */
	for (char **c = cmd; *c; c++)
		ADD(c == cmd && !strcmp(*c, t->zerohop) ? PM_ZEROHOP : *c);
#undef ADD
	return v;
}

int lab_podman_pod_pid(const char *pod_cg)
{
	char p[LAB_PATH * 2], buf[64];
	struct dirent *de;
	int pid = 0;
	DIR *d = opendir(pod_cg);

	while (d && !pid && (de = readdir(d))) {
		if (strncmp(de->d_name, "libpod-", 7) || de->d_type != DT_DIR)
			continue;
		lab_fmt(p, sizeof(p), "%s/%s/cgroup.procs", pod_cg, de->d_name);
		if (lab_read_file(p, buf, sizeof(buf)) > 0)
			pid = atoi(buf);
	}
	if (d)
		closedir(d);
	return pid;
}

void lab_podman_pod_rm(const char *lab, const char *node, const char *ns, const char *name)
{
	char dir[LAB_PATH], cname[300];
	char *rm[] = { "rm", "--force", "--ignore", "--time=0", cname, NULL };

	pm_dir(dir, sizeof(dir), lab, node);
	lab_fmt(cname, sizeof(cname), "%s.%s", ns, name);
	pm_exec(lab, node, dir, rm, 5, true, false);
}

bool lab_podman_has_pod(const char *lab, const struct lab_pod_info *pod)
{
	char p[LAB_PATH];

	lab_pod_netns_path(p, sizeof(p), lab, pod->ns, pod->name);
	if (access(p, F_OK) == 0)
		return false;
	pm_dir(p, sizeof(p), lab, pod->node);
	return access(p, F_OK) == 0;
}

int lab_podman_exec(const char *lab, const struct lab_pod_info *pod, char **cmd)
{
	char cname[300], **args;
	int n = 0, ret;

	struct lab_topo *t = zh_calloc(1, sizeof(*t));

	for (char **c = cmd; *c; c++)
		n++;
	args = zh_calloc(n + 4, sizeof(char *));
	lab_fmt(cname, sizeof(cname), "%s.%s", pod->ns, pod->name);
	args[0] = "exec";
	args[1] = "-i";
	args[2] = cname;
	memcpy(args + 3, cmd, n * sizeof(char *));
	/* this zerohop binary is the image's copy in there (invariant 6) */
	if (!lab_topo_read(lab, t) && !strcmp(cmd[0], t->zerohop))
		args[3] = PM_ZEROHOP;
	free(t);
	ret = lab_podman(lab, pod->node, args, n + 3);
	free(args);
	return ret ? ret : 126;
}
