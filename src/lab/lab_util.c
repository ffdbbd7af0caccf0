/* lab_util.c — lab naming, topology file, pod records, namespace joining and
 * small I/O helpers (see lab.h and lab_int.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zerohop/lab.h"
#include "zerohop/mounts.h"
#include "zerohop/log.h"
#include "zerohop/fileio.h"
#include "zerohop/paths.h"
#include "lab_int.h"

int lab_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n;
}

void lab_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "zerohop lab: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

char *lab_ip4_str(uint32_t ip, char *buf)
{
	struct in_addr a = { .s_addr = ip };

	inet_ntop(AF_INET, &a, buf, 16);
	return buf;
}

/* ---- names --------------------------------------------------------------- */

const char *lab_cgroup_root(bool do_mount)
{
	static char root[LAB_PATH];
	int ret;

	if (root[0])
		return root;
	ret = do_mount ? zh_cgroup2_ensure(root, sizeof(root)) : zh_cgroup2_find(root, sizeof(root));
	if (ret == 1)
		fprintf(stderr, "zerohop lab: no cgroup2 hierarchy was mounted: mounted one at %s\n",
			root);
	if (ret < 0) {
		if (do_mount)
			lab_err("mount cgroup2 at %s: %s", ZH_CGROUP2_OWN, strerror(-ret));
		root[0] = 0;
		return NULL;
	}
	return root;
}

char *lab_lab_cgroup_path(char *buf, size_t len, const char *lab)
{
	const char *r = lab_cgroup_root(true);

	lab_fmt(buf, len, "%s/zerohop-%s", r ? r : ZH_RUN_ROOT "/cgroup2", lab);
	return buf;
}

char *lab_node_cgroup_path(char *buf, size_t len, const char *lab, const char *node)
{
	char l[LAB_PATH];

	lab_fmt(buf, len, "%s/%s", lab_lab_cgroup_path(l, sizeof(l), lab), node);
	return buf;
}

char *lab_pod_cgroup_path(char *buf, size_t len, const char *lab, const char *node,
			  const char *ns, const char *pod)
{
	char l[LAB_PATH];

	lab_fmt(buf, len, "%s/%s/%s_%s", lab_lab_cgroup_path(l, sizeof(l), lab), node, ns, pod);
	return buf;
}

char *lab_node_netns_name(char *buf, size_t len, const char *lab, const char *node)
{
	lab_fmt(buf, len, "%s-%s", lab, node);
	return buf;
}

char *lab_fabric_netns_name(char *buf, size_t len, const char *lab)
{
	lab_fmt(buf, len, "%s-fabric", lab);
	return buf;
}

char *lab_pod_netns_name(char *buf, size_t len, const char *lab, const char *ns,
			 const char *pod)
{
	lab_fmt(buf, len, "%s-p-%s-%s", lab, ns, pod);
	return buf;
}

char *lab_node_netns_path(char *buf, size_t len, const char *lab, const char *node)
{
	lab_fmt(buf, len, "/run/netns/%s-%s", lab, node);
	return buf;
}

char *lab_pod_netns_path(char *buf, size_t len, const char *lab, const char *ns,
			 const char *pod)
{
	lab_fmt(buf, len, "/run/netns/%s-p-%s-%s", lab, ns, pod);
	return buf;
}

char *lab_pod_dir(char *buf, size_t len, const char *lab, const char *ns, const char *pod)
{
	lab_fmt(buf, len, "%s/%s/pods/%s_%s", ZH_RUN_ROOT, lab, ns, pod);
	return buf;
}

char *lab_pod_nsfile(char *buf, size_t len, const char *lab, const char *ns,
		     const char *pod, const char *kind)
{
	lab_fmt(buf, len, "%s/%s/ns/%s_%s.%s", ZH_RUN_ROOT, lab, ns, pod, kind);
	return buf;
}

/* ---- files ---------------------------------------------------------------- */

int lab_write_file(const char *path, const char *data, size_t len)
{
	return zh_write_atomic(path, data, len, 0644, false);
}

int lab_write_str(const char *path, const char *s)
{
	return lab_write_file(path, s, strlen(s));
}

int lab_write_sys(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

bool lab_pid_alive(int pid)
{
	char p[64], buf[512], *rp;

	if (pid <= 0)
		return false;
	lab_fmt(p, sizeof(p), "/proc/%d/stat", pid);
	if (lab_read_file(p, buf, sizeof(buf)) <= 0)
		return false;
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

int lab_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t off = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (off + 1 < len && (n = read(fd, buf + off, len - 1 - off)) > 0)
		off += n;
	buf[off] = 0;
	close(fd);
	return (int)off;
}

int lab_mkdirs(const char *path, int mode)
{
	return zh_mkdir_p(path, (mode_t)mode);
}

static int rm_tree_at(int dfd, const char *name, dev_t dev)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int fd, ret = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) && errno != ENOENT ? -errno : 0;
	if (st.st_dev != dev)
		return -EBUSY;	/* a mount point: never descend into another fs */
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		int r;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = rm_tree_at(fd, e->d_name, dev);
		if (r && !ret)
			ret = r;
	}
	closedir(d);
	if (!ret && unlinkat(dfd, name, AT_REMOVEDIR) && errno != ENOENT)
		ret = -errno;
	return ret;
}

int lab_rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	return rm_tree_at(AT_FDCWD, path, st.st_dev);
}

/* ---- running commands ------------------------------------------------------ */

int lab_run(char *const argv[], bool quiet)
{
	return lab_run_input(argv, NULL, quiet);
}

int lab_run_input(char *const argv[], const char *input, bool quiet)
{
	char out[4096];
	int pfd[2], ifd[2] = { -1, -1 }, status, ret = 0;
	size_t off = 0;
	ssize_t n;
	pid_t pid;

	/* input is small (a few kB, below the pipe's capacity): written in
	 * full before the output is read, without deadlock. */
	if (input && strlen(input) >= 60000)
		return -E2BIG;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	if (input && pipe2(ifd, O_CLOEXEC)) {
		ret = -errno;
		goto out_pfd;
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		goto out_ifd;
	}
	if (pid == 0) {
		int in = input ? ifd[0] : open("/dev/null", O_RDONLY);

		dup2(in, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	pfd[1] = -1;
	if (input) {
		close(ifd[0]);
		ifd[0] = -1;
		if (write(ifd[1], input, strlen(input)) < 0)
			ret = -errno;
		close(ifd[1]);
		ifd[1] = -1;
	}
	for (;;) {
		char spill[1024];	/* keep draining once out is full */
		bool room = off < sizeof(out) - 1;

		n = read(pfd[0], room ? out + off : spill, room ? sizeof(out) - 1 - off : sizeof(spill));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (room)
			off += n;
	}
	out[off] = 0;
	close(pfd[0]);
	pfd[0] = -1;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		ret = -EIO;
		if (!quiet) {
			char cmd[1024] = "";

			for (int i = 0; argv[i]; i++) {
				strncat(cmd, argv[i], sizeof(cmd) - strlen(cmd) - 2);
				strcat(cmd, " ");
			}
			while (off && out[off - 1] == '\n')
				out[--off] = 0;
			lab_err("'%s' failed: %s", cmd, out);
		}
	}
out_ifd:
	if (ifd[0] >= 0)
		close(ifd[0]);
	if (ifd[1] >= 0)
		close(ifd[1]);
out_pfd:
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	return ret;
}

static int lab_vip(bool quiet, const char *fmt, va_list ap)
{
	char line[1024], *argv[64], *save = NULL, *tok;
	int n = 0;

	argv[n++] = "ip";
	vsnprintf(line, sizeof(line), fmt, ap);
	for (tok = strtok_r(line, " ", &save); tok && n < 63; tok = strtok_r(NULL, " ", &save))
		argv[n++] = tok;
	argv[n] = NULL;
	return lab_run(argv, quiet);
}

int lab_ip(const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = lab_vip(false, fmt, ap);
	va_end(ap);
	return r;
}

int lab_ip_quiet(const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = lab_vip(true, fmt, ap);
	va_end(ap);
	return r;
}

/* ---- topology --------------------------------------------------------------- */

int lab_topo_write(const struct lab_topo *t)
{
	char path[LAB_PATH], a[16], b[16], buf[16384];
	int off = 0;

	lab_fmt(path, sizeof(path), "%s/%s/lab.conf", ZH_RUN_ROOT, t->lab);
	off += lab_fmt(buf + off, sizeof(buf) - off,
			"lab %s\noverlay %d\nmesh %d\naccel %d\nnft %d\nsidecar %d\nzerohop %s\n",
			t->lab, t->overlay, t->mesh, t->accel, t->nft, t->sidecar, t->zerohop);
	off += lab_fmt(buf + off, sizeof(buf) - off, "pod_cidr %s/%d\nsvc_cidr %s/%d\n",
			lab_ip4_str(t->pod_cidr, a), t->pod_cidr_len,
			lab_ip4_str(t->svc_cidr, b), t->svc_cidr_len);
	for (int i = 0; i < t->n_nodes && off < (int)sizeof(buf) - 200; i++)
		off += lab_fmt(buf + off, sizeof(buf) - off, "node %s %s %s/%d\n",
				t->nodes[i].name, lab_ip4_str(t->nodes[i].ip, a),
				lab_ip4_str(t->nodes[i].pod_net, b), t->nodes[i].pod_len);
	/* dual-stack (docs/ipv6.md): the IPv6 pod CIDR, then per node its
	 * fabric IPv6 and /64 */
	if (t->pod_cidr6_len) {
		char c6[INET6_ADDRSTRLEN], d6[INET6_ADDRSTRLEN];

		off += lab_fmt(buf + off, sizeof(buf) - off, "pod_cidr6 %s/%d\n",
				inet_ntop(AF_INET6, &t->pod_cidr6, c6, sizeof(c6)), t->pod_cidr6_len);
		for (int i = 0; i < t->n_nodes && off < (int)sizeof(buf) - 200; i++)
			off += lab_fmt(buf + off, sizeof(buf) - off, "node6 %s %s %s/64\n",
					t->nodes[i].name,
					inet_ntop(AF_INET6, &t->nodes[i].ip6, c6, sizeof(c6)),
					inet_ntop(AF_INET6, &t->nodes[i].pod_net6, d6, sizeof(d6)));
		if (t->v6only)
			off += lab_fmt(buf + off, sizeof(buf) - off, "v6only %s/%d\n",
					inet_ntop(AF_INET6, &t->svc_cidr6, c6, sizeof(c6)),
					t->svc_cidr6_len);
	}
	return lab_write_file(path, buf, off);
}

static int parse_cidr(const char *s, uint32_t *net, int *len)
{
	char ip[32];
	struct in_addr a;

	if (sscanf(s, "%31[0-9.]/%d", ip, len) != 2 || inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	*net = a.s_addr;
	return 0;
}

static int parse_cidr6(const char *s, struct in6_addr *net, int *len)
{
	char ip[INET6_ADDRSTRLEN];

	if (sscanf(s, "%45[0-9a-fA-F:]/%d", ip, len) != 2 || inet_pton(AF_INET6, ip, net) != 1)
		return -EINVAL;
	return 0;
}

void lab_pod_ip6(const struct lab_node *n, uint32_t ip, struct in6_addr *out)
{
	/* the IPv4's host part in the low 32 bits (zerohop-cni's cni_ip6_of
	 * derives the same for podman's pods) */
	uint32_t host = ntohl(ip) & (n->pod_len > 0 ? (1u << (32 - n->pod_len)) - 1 : 0xff);

	*out = n->pod_net6;
	for (int i = 0; i < 4; i++)
		out->s6_addr[15 - i] |= (uint8_t)(host >> (8 * i));
}

int lab_topo_read(const char *lab, struct lab_topo *t)
{
	char path[LAB_PATH], line[1024], k[32], v1[512], v2[64], v3[64];
	FILE *f;
	int ret = 0;

	memset(t, 0, sizeof(*t));
	lab_fmt(path, sizeof(path), "%s/%s/lab.conf", ZH_RUN_ROOT, lab);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		int n = sscanf(line, "%31s %511s %63s %63s", k, v1, v2, v3);
		struct in_addr a;

		if (n < 2)
			continue;
		if (!strcmp(k, "lab"))
			lab_fmt(t->lab, sizeof(t->lab), "%s", v1);
		else if (!strcmp(k, "overlay"))
			t->overlay = atoi(v1);
		else if (!strcmp(k, "mesh"))
			t->mesh = atoi(v1);
		else if (!strcmp(k, "accel"))
			t->accel = atoi(v1);
		else if (!strcmp(k, "nft"))
			t->nft = atoi(v1);
		else if (!strcmp(k, "sidecar"))
			t->sidecar = atoi(v1);
		else if (!strcmp(k, "zerohop"))
			lab_fmt(t->zerohop, sizeof(t->zerohop), "%s", v1);
		else if (!strcmp(k, "pod_cidr"))
			ret = ret ?: parse_cidr(v1, &t->pod_cidr, &t->pod_cidr_len);
		else if (!strcmp(k, "svc_cidr"))
			ret = ret ?: parse_cidr(v1, &t->svc_cidr, &t->svc_cidr_len);
		else if (!strcmp(k, "pod_cidr6"))
			ret = ret ?: parse_cidr6(v1, &t->pod_cidr6, &t->pod_cidr6_len);
		else if (!strcmp(k, "v6only")) {
			t->v6only = true;
			ret = ret ?: parse_cidr6(v1, &t->svc_cidr6, &t->svc_cidr6_len);
		}
		else if (!strcmp(k, "node6") && n == 4) {
			struct lab_node *nd = NULL;
			int l;

			for (int i = 0; i < t->n_nodes; i++)
				if (!strcmp(t->nodes[i].name, v1))
					nd = &t->nodes[i];
			if (!nd || inet_pton(AF_INET6, v2, &nd->ip6) != 1 ||
			    parse_cidr6(v3, &nd->pod_net6, &l))
				ret = -EINVAL;
		} else if (!strcmp(k, "node") && n == 4 && t->n_nodes < LAB_MAX_NODES) {
			struct lab_node *nd = &t->nodes[t->n_nodes++];

			lab_fmt(nd->name, sizeof(nd->name), "%s", v1);
			if (inet_pton(AF_INET, v2, &a) != 1)
				ret = -EINVAL;
			nd->ip = a.s_addr;
			ret = ret ?: parse_cidr(v3, &nd->pod_net, &nd->pod_len);
		}
	}
	fclose(f);
	if (ret)
		lab_err("%s: malformed", path);
	return ret;
}

const struct lab_node *lab_topo_node(const struct lab_topo *t, const char *name)
{
	for (int i = 0; i < t->n_nodes; i++)
		if (!strcmp(t->nodes[i].name, name))
			return &t->nodes[i];
	return NULL;
}

uint32_t lab_dns_ip(const struct lab_topo *t)
{
	return htonl(ntohl(t->svc_cidr) + 10);
}

const char *lab_dns_str(const struct lab_topo *t, char *buf)
{
	struct in6_addr a;

	if (!t->v6only)
		return lab_ip4_str(lab_dns_ip(t), buf);
	a = t->svc_cidr6;
	a.s6_addr[15] = (uint8_t)(a.s6_addr[15] + 10);
	return inet_ntop(AF_INET6, &a, buf, INET6_ADDRSTRLEN);
}

const char *lab_pod_addr_str(const struct lab_topo *t, const struct lab_node *n, uint32_t ip,
			     char *buf)
{
	struct in6_addr a;

	if (!t->v6only || !n)
		return lab_ip4_str(ip, buf);
	lab_pod_ip6(n, ip, &a);
	return inet_ntop(AF_INET6, &a, buf, INET6_ADDRSTRLEN);
}

/* ---- pod records ------------------------------------------------------------- */

static int pod_info_read(const char *path, struct lab_pod_info *p)
{
	char buf[2048], *save = NULL, *line;
	int r = lab_read_file(path, buf, sizeof(buf));

	if (r < 0)
		return r;
	memset(p, 0, sizeof(*p));
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v = strchr(line, ' ');
		struct in_addr a;

		if (!v)
			continue;
		*v++ = 0;
		if (!strcmp(line, "namespace"))
			lab_fmt(p->ns, sizeof(p->ns), "%s", v);
		else if (!strcmp(line, "name"))
			lab_fmt(p->name, sizeof(p->name), "%s", v);
		else if (!strcmp(line, "node"))
			lab_fmt(p->node, sizeof(p->node), "%s", v);
		else if (!strcmp(line, "owner"))
			lab_fmt(p->owner, sizeof(p->owner), "%s", v);
		else if (!strcmp(line, "phase"))
			lab_fmt(p->phase, sizeof(p->phase), "%s", v);
		else if (!strcmp(line, "ip") && inet_pton(AF_INET, v, &a) == 1)
			p->ip = a.s_addr;
		else if (!strcmp(line, "ip6"))
			inet_pton(AF_INET6, v, &p->ip6);
		else if (!strcmp(line, "pid"))
			p->pid = atoi(v);
		else if (!strcmp(line, "restarts"))
			p->restarts = atoi(v);
	}
	return p->name[0] && p->ns[0] ? 0 : -EINVAL;
}

static int pod_cmp(const void *a, const void *b)
{
	const struct lab_pod_info *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	return c ? c : strcmp(x->name, y->name);
}

int lab_pod_list(const char *lab, struct lab_pod_info **out, int *n)
{
	char dir[LAB_PATH], path[LAB_PATH * 2];
	struct lab_pod_info *v = NULL;
	struct dirent *e;
	int cnt = 0, cap = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	lab_fmt(dir, sizeof(dir), "%s/%s/pods", ZH_RUN_ROOT, lab);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			v = zh_realloc(v, cap * sizeof(*v));
		}
		lab_fmt(path, sizeof(path), "%s/%s/info", dir, e->d_name);
		if (pod_info_read(path, &v[cnt]) == 0)
			cnt++;
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), pod_cmp);
	*out = v;
	*n = cnt;
	return 0;
}

int lab_pod_find(const char *lab, const char *ref, struct lab_pod_info *out)
{
	char ns[64] = MD_DEFAULT_NS, name[128];
	struct lab_pod_info *v;
	bool deploy = false;
	const char *s = ref, *slash;
	int n, ret = -ENOENT;

	if (!strncmp(s, "deploy/", 7) || !strncmp(s, "deployment/", 11)) {
		deploy = true;
		s = strchr(s, '/') + 1;
	} else if (!strncmp(s, "pod/", 4)) {
		s += 4;
	}
	slash = strchr(s, '/');
	if (slash) {
		lab_fmt(ns, sizeof(ns), "%.*s", (int)(slash - s), s);
		s = slash + 1;
	}
	lab_fmt(name, sizeof(name), "%s", s);
	if (lab_pod_list(lab, &v, &n))
		return -ENOENT;
	for (int i = 0; i < n; i++) {
		if (strcmp(v[i].ns, ns))
			continue;
		if (deploy ? strcmp(v[i].owner, name) : strcmp(v[i].name, name))
			continue;
		/* For deploy/NAME prefer a Running pod, as kubectl does. */
		if (ret == 0 && strcmp(v[i].phase, "Running"))
			continue;
		*out = v[i];
		ret = 0;
		if (!strcmp(v[i].phase, "Running"))
			break;
	}
	free(v);
	return ret;
}

/* ---- joining namespaces -------------------------------------------------------- */

static int join_file(const char *path, int nstype)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0) {
		ret = -errno;
		lab_err("open %s: %s", path, strerror(errno));
		return ret;
	}
	if (setns(fd, nstype)) {
		ret = -errno;
		lab_err("setns %s: %s", path, strerror(errno));
	}
	close(fd);
	return ret;
}

int lab_join_netns_path(const char *path)
{
	return join_file(path, CLONE_NEWNET);
}

int lab_join_node(const char *lab, const char *node)
{
	char p[LAB_PATH];

	return join_file(lab_node_netns_path(p, sizeof(p), lab, node), CLONE_NEWNET);
}

int lab_join_pod(const char *lab, const struct lab_pod_info *pod)
{
	char p[LAB_PATH + 16], pid[32];
	int ret;

	/* The cgroup first: in the pod's mount namespace /sys is the pod's. */
	lab_pod_cgroup_path(p, LAB_PATH, lab, pod->node, pod->ns, pod->name);
	strcat(p, "/cgroup.procs");	/* fits: p has LAB_PATH + 16 bytes */
	lab_fmt(pid, sizeof(pid), "%d", (int)getpid());
	ret = lab_write_sys(p, pid);
	if (ret) {
		lab_err("join cgroup %s: %s", p, strerror(-ret));
		return ret;
	}
	ret = join_file(lab_pod_netns_path(p, sizeof(p), lab, pod->ns, pod->name), CLONE_NEWNET);
	if (ret)
		return ret;
	ret = join_file(lab_pod_nsfile(p, sizeof(p), lab, pod->ns, pod->name, "uts"),
			CLONE_NEWUTS);
	if (ret)
		return ret;
	return join_file(lab_pod_nsfile(p, sizeof(p), lab, pod->ns, pod->name, "mnt"),
			 CLONE_NEWNS);
}

/* ---- node daemons (RUNDIR/nodes/NODE/info, written by lab_sup.c) ---------- */

int lab_node_daemons_read(const char *lab, const char *node, struct lab_node_daemons *out)
{
	char path[LAB_PATH], line[600];
	FILE *f;

	memset(out, 0, sizeof(*out));
	lab_fmt(out->agent.state, sizeof(out->agent.state), "Unknown");
	lab_fmt(out->proxy.state, sizeof(out->proxy.state), "Unknown");
	lab_fmt(path, sizeof(path), "%s/%s/nodes/%s/info", ZH_RUN_ROOT, lab, node);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct lab_daemon_info *d;
		char *key = line, *v = strchr(line, ' ');

		if (!v)
			continue;
		*v++ = 0;
		v[strcspn(v, "\n")] = 0;
		if (!strncmp(key, "agent_", 6))
			d = &out->agent;
		else if (!strncmp(key, "proxy_", 6))
			d = &out->proxy;
		else
			continue;
		key += 6;
		if (!strcmp(key, "pid"))
			d->pid = atoi(v);
		else if (!strcmp(key, "restarts"))
			d->restarts = atoi(v);
		else if (!strcmp(key, "state"))
			lab_fmt(d->state, sizeof(d->state), "%s", v);
		else if (!strcmp(key, "log"))
			lab_fmt(d->log, sizeof(d->log), "%s", v);
		else if (!strcmp(key, "error"))
			lab_fmt(d->error, sizeof(d->error), "%s", v);
	}
	fclose(f);
	return 0;
}
