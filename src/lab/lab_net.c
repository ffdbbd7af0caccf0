/* lab_net.c — the lab's CNI: fabric bridge, node namespaces, pod namespaces
 * and their veths, routes between nodes (plain L3 or VXLAN).
 *
 * Invariants:
 * 1. Nothing here touches the root network namespace: every `ip` command
 *    carries -n NS, and sysctls are written from a child that setns()ed into
 *    the node namespace first.
 * 2. The fabric namespace is the only link between nodes and has no link to
 *    the root namespace, so no lab address is reachable from outside and no
 *    lab namespace reaches the real network.
 * 3. A node has its fabric IP before any pod is plumbed (docs/lab.md: ARP
 *    needs a source address), and a pod never ARPs for its gateway: it has a
 *    permanent neighbour entry for LAB_GW, and the node a permanent one for
 *    the pod (MACs are derived from addresses, so both are known up front).
 * 4. Each pod namespace (net, uts, mnt) is kept alive by a bind mount of its
 *    nsfs file, independent of processes: net under /run/netns (so `ip netns`
 *    lists it), uts/mnt under RUNDIR/ns, which is a private mount (the kernel
 *    refuses to bind a mount-namespace file on a shared mount).
 * 5. Every netns name created is appended to RUNDIR/netns.list before it
 *    exists, so `lab down` finds it even after a crash.
 * 6. A node namespace holds .1 of its pod range on lo: the source address of
 *    its L7 proxy's upstream connections (never allocated to a pod; the
 *    node's pod range is already routed to it from every other node).
 * 7. Dual-stack (docs/ipv6.md) mirrors IPv4 exactly: a fabric IPv6 per node,
 *    a route to every other node's /64 via its fabric IPv6 (with the
 *    overlay: via the /64's network address into vxlan0), a /128 and a
 *    permanent neighbour per pod on the node, and in the pod a /128 with a
 *    default route via LAB_GW6 whose neighbour is permanent (LAB_GW_MAC).
 *    Addresses are added with nodad: no duplicate address detection delay
 *    (every address is unique by construction).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zerohop/lab.h"
#include "zerohop/paths.h"
#include "lab_int.h"

int lab_netns_record(const char *lab, const char *name)
{
	char path[LAB_PATH], line[300];
	int fd, ret = 0;

	lab_fmt(path, sizeof(path), "%s/%s/netns.list", ZH_RUN_ROOT, lab);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	lab_fmt(line, sizeof(line), "%s\n", name);
	if (write(fd, line, strlen(line)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Run `ip -n NS -batch -` with cmds on stdin: one exec for many commands. */
static int ip_batch(const char *ns, const char *cmds)
{
	char *argv[] = { "ip", "-n", (char *)ns, "-batch", "-", NULL };
	int ret = lab_run_input(argv, cmds, false);

	if (ret)
		lab_err("in namespace %s, commands were:\n%s", ns, cmds);
	return ret;
}

/* Write value to /proc/sys/KEY inside the network namespace at nspath. */
static int netns_sysctl(const char *nspath, const char *key, const char *value)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char p[LAB_PATH];
		int fd;

		if (lab_join_netns_path(nspath))
			_exit(1);
		lab_fmt(p, sizeof(p), "/proc/sys/%s", key);
		fd = open(p, O_WRONLY);
		if (fd < 0 || write(fd, value, strlen(value)) < 0) {
			lab_err("sysctl %s in %s: %s", key, nspath, strerror(errno));
			_exit(1);
		}
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int netns_add(const char *lab, const char *name)
{
	int ret = lab_netns_record(lab, name);

	if (ret)
		return ret;
	return lab_ip("netns add %s", name);
}

/* A private bind mount of RUNDIR/ns onto itself (invariant 4). */
static int ns_dir_setup(const char *lab)
{
	char dir[LAB_PATH];

	lab_fmt(dir, sizeof(dir), "%s/%s/ns", ZH_RUN_ROOT, lab);
	if (lab_mkdirs(dir, 0755))
		goto err;
	if (mount(dir, dir, NULL, MS_BIND, NULL))
		goto err;
	if (mount(NULL, dir, NULL, MS_PRIVATE, NULL))
		goto err;
	return 0;
err:
	lab_err("private mount %s: %s", dir, strerror(errno));
	return -errno;
}

static void vtep_mac(int i, char *buf)
{
	lab_fmt(buf, 18, "02:7a:00:00:%02x:%02x", (i + 1) >> 8 & 0xff, (i + 1) & 0xff);
}

/* Node i's IPv6 commands (invariant 7): fabric address, routes to the
 * other nodes' /64s: via their fabric IPv6 (plain L3), or with --overlay
 * into vxlan0 as for IPv4 (Flannel's layout: a peer's VTEP is the network
 * address of its /64, its MAC static; the fdb entries, per MAC, serve both
 * families). Returns the length written. */
static int node6_cmds(const struct lab_topo *t, int i, char *cmds, size_t len)
{
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN], mac[18];
	int off;

	struct in6_addr px = t->nodes[i].pod_net6;

	off = lab_fmt(cmds, len, "addr add %s/64 dev eth0 nodad\n",
		      inet_ntop(AF_INET6, &t->nodes[i].ip6, a, sizeof(a)));
	/* the node L7 proxy's IPv6 upstream source: ::1 of the node's /64
	 * (the IPv6 of .1, never a pod's), as .1 is on lo for IPv4
	 * (pol_node_proxy_ip6) */
	px.s6_addr[15] = 1;
	off += lab_fmt(cmds + off, len - off, "addr add %s/128 dev lo nodad\n",
		       inet_ntop(AF_INET6, &px, a, sizeof(a)));
	if (t->overlay)
		off += lab_fmt(cmds + off, len - off, "addr add %s/128 dev vxlan0 nodad\n",
			       inet_ntop(AF_INET6, &t->nodes[i].pod_net6, a, sizeof(a)));
	for (int j = 0; j < t->n_nodes; j++) {
		if (j == i)
			continue;
		inet_ntop(AF_INET6, &t->nodes[j].pod_net6, a, sizeof(a));
		if (!t->overlay) {
			off += lab_fmt(cmds + off, len - off, "route add %s/64 via %s dev eth0\n", a,
				       inet_ntop(AF_INET6, &t->nodes[j].ip6, b, sizeof(b)));
			continue;
		}
		vtep_mac(j, mac);
		off += lab_fmt(cmds + off, len - off,
			       "neigh add %s lladdr %s dev vxlan0 nud permanent\n"
			       "route add %s/64 via %s dev vxlan0 onlink\n", a, mac, a, a);
	}
	return off;
}

int lab_net_up(const struct lab_topo *t)
{
	char fab[128], nsn[128], nsp[LAB_PATH], a[16], b[16], cmds[8192];
	int ret, off;

	ret = ns_dir_setup(t->lab);
	if (ret)
		return ret;
	lab_fabric_netns_name(fab, sizeof(fab), t->lab);
	ret = netns_add(t->lab, fab);
	if (ret)
		return ret;
	ret = ip_batch(fab, "link set lo up\nlink add br0 type bridge\nlink set br0 up\n");
	if (ret)
		return ret;
	for (int i = 0; i < t->n_nodes; i++) {
		const struct lab_node *n = &t->nodes[i];

		lab_node_netns_name(nsn, sizeof(nsn), t->lab, n->name);
		ret = netns_add(t->lab, nsn);
		if (ret)
			return ret;
		/* the node L7 proxy's upstream source address: .1 of the node's
		 * pod range (never a pod's), routed to this node like its pods;
		 * the policy datapath admits it on ingress everywhere
		 * (pol_node_proxy_ip, docs/policy.md "L7 Services") */
		off = lab_fmt(cmds, sizeof(cmds),
			      "link set lo up\n"
			      "addr add %s/32 dev lo\n"
			      "link add eth0 type veth peer name n%d netns %s\n"
			      "addr add %s/24 dev eth0\n"
			      "link set eth0 up\n",
			      lab_ip4_str(htonl(ntohl(n->pod_net) + 1), b), i, fab,
			      lab_ip4_str(n->ip, a));
		if (t->overlay) {
			char mac[18];

			vtep_mac(i, mac);
			off += lab_fmt(cmds + off, sizeof(cmds) - off,
				       "link add vxlan0 type vxlan id %d dev eth0 local %s dstport %d nolearning\n"
				       "link set vxlan0 address %s\n"
				       "addr add %s/32 dev vxlan0\n"
				       "link set vxlan0 up\n",
				       LAB_VXLAN_ID, a, LAB_VXLAN_PORT, mac, lab_ip4_str(n->pod_net, b));
		}
		if (t->pod_cidr6_len)
			off += node6_cmds(t, i, cmds + off, sizeof(cmds) - off);
		for (int j = 0; j < t->n_nodes; j++) {
			const struct lab_node *o = &t->nodes[j];
			char mac[18];

			if (j == i)
				continue;
			if (!t->overlay) {
				off += lab_fmt(cmds + off, sizeof(cmds) - off,
					       "route add %s/%d via %s dev eth0\n",
					       lab_ip4_str(o->pod_net, a), o->pod_len,
					       lab_ip4_str(o->ip, b));
				continue;
			}
			/* Flannel's vxlan layout: the peer's VTEP is the .0 of
			 * its pod CIDR, its MAC and fabric IP are static. */
			vtep_mac(j, mac);
			off += lab_fmt(cmds + off, sizeof(cmds) - off,
				       "neigh add %s lladdr %s dev vxlan0 nud permanent\n"
				       "route add %s/%d via %s dev vxlan0 onlink\n",
				       lab_ip4_str(o->pod_net, a), mac, a, o->pod_len, a);
		}
		ret = ip_batch(nsn, cmds);
		if (ret)
			return ret;
		ret = lab_ip("-n %s link set n%d master br0 up", fab, i);
		if (ret)
			return ret;
		if (t->overlay) {
			for (int j = 0; j < t->n_nodes; j++) {
				char mac[18], *argv[16] = { "bridge", "-n", nsn, "fdb", "append",
							    mac, "dev", "vxlan0", "dst", a, NULL };

				if (j == i)
					continue;
				vtep_mac(j, mac);
				lab_ip4_str(t->nodes[j].ip, a);
				ret = lab_run(argv, false);
				if (ret)
					return ret;
			}
		}
		lab_node_netns_path(nsp, sizeof(nsp), t->lab, n->name);
		ret = netns_sysctl(nsp, "net/ipv4/ip_forward", "1");
		if (!ret && t->pod_cidr6_len)
			ret = netns_sysctl(nsp, "net/ipv6/conf/all/forwarding", "1");
		if (ret)
			return ret;
	}
	return 0;
}

/* Node-side veth name: "p" + 10 hex digits of a hash of NS/POD (IFNAMSIZ). */
static void pod_veth_name(const char *ns, const char *pod, char *buf)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *s = ns; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	h = (h ^ '/') * 1099511628211ULL;
	for (const char *s = pod; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	lab_fmt(buf, 16, "p%010llx", (unsigned long long)(h & 0xffffffffffULL));
}

static void pod_mac(uint32_t ip, char *buf)
{
	const unsigned char *b = (const unsigned char *)&ip;

	lab_fmt(buf, 18, "02:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3]);
}

int lab_net_pod_add(const struct lab_topo *t, const char *node, const char *ns,
		    const char *pod, uint32_t ip)
{
	char nsn[128], pns[256], veth[16], mac[18], a[16], cmds[2048], mtu[16] = "";
	char a6[INET6_ADDRSTRLEN];
	struct in6_addr ip6;
	int ret, off;

	lab_node_netns_name(nsn, sizeof(nsn), t->lab, node);
	lab_pod_netns_name(pns, sizeof(pns), t->lab, ns, pod);
	pod_veth_name(ns, pod, veth);
	pod_mac(ip, mac);
	lab_ip4_str(ip, a);
	/* Under VXLAN the pod's MTU leaves room for the 50-byte encapsulation,
	 * as Flannel configures it. */
	if (t->overlay)
		lab_fmt(mtu, sizeof(mtu), " mtu 1450");
	off = lab_fmt(cmds, sizeof(cmds),
		      "link add %s address %s%s type veth peer name eth0 address %s%s netns %s\n"
		      "link set %s up\n",
		      veth, LAB_GW_MAC, mtu, mac, mtu, pns, veth);
	if (!t->v6only)	/* an IPv6-only lab's pod has no IPv4 (lab.h) */
		lab_fmt(cmds + off, sizeof(cmds) - off,
			"route add %s/32 dev %s scope link\n"
			"neigh replace %s lladdr %s dev %s nud permanent\n",
			a, veth, a, mac, veth);
	if (t->pod_cidr6_len) {
		const struct lab_node *n = lab_topo_node(t, node);

		if (!n)
			return -ENOENT;
		lab_pod_ip6(n, ip, &ip6);
		inet_ntop(AF_INET6, &ip6, a6, sizeof(a6));
		off = strlen(cmds);
		lab_fmt(cmds + off, sizeof(cmds) - off,
			"route add %s/128 dev %s\n"
			"neigh replace %s lladdr %s dev %s nud permanent\n", a6, veth, a6, mac, veth);
	}
	ret = ip_batch(nsn, cmds);
	if (ret)
		return ret;
	if (t->v6only)
		off = lab_fmt(cmds, sizeof(cmds), "link set lo up\nlink set eth0 up\n");
	else
		off = lab_fmt(cmds, sizeof(cmds),
			      "link set lo up\n"
			      "addr add %s/32 dev eth0\n"
			      "link set eth0 up\n"
			      "neigh replace %s lladdr %s dev eth0 nud permanent\n"
			      "route add %s dev eth0 scope link\n"
			      "route add default via %s dev eth0\n",
			      a, LAB_GW, LAB_GW_MAC, LAB_GW, LAB_GW);
	if (t->pod_cidr6_len)
		lab_fmt(cmds + off, sizeof(cmds) - off,
			"addr add %s/128 dev eth0 nodad\n"
			"neigh replace %s lladdr %s dev eth0 nud permanent\n"
			"route add ::/0 via %s dev eth0\n",
			a6, LAB_GW6, LAB_GW_MAC, LAB_GW6);
	return ip_batch(pns, cmds);
}

void lab_net_pod_del(const struct lab_topo *t, const char *node, const char *ns,
		     const char *pod)
{
	char nsn[128], veth[16];

	/* Deleting the node side removes the pair, its /32 route and neighbour
	 * at once, even while a process still holds the pod namespace. */
	lab_node_netns_name(nsn, sizeof(nsn), t->lab, node);
	pod_veth_name(ns, pod, veth);
	lab_ip_quiet("-n %s link del %s", nsn, veth);
}

/* ---- pod namespaces ------------------------------------------------------- */

static int bind_nsfile(pid_t pid, const char *kind, const char *dst)
{
	char src[64];
	int fd;

	fd = open(dst, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0) {
		lab_err("create %s: %s", dst, strerror(errno));
		return -errno;
	}
	close(fd);
	lab_fmt(src, sizeof(src), "/proc/%d/ns/%s", (int)pid, kind);
	if (mount(src, dst, NULL, MS_BIND, NULL)) {
		int ret = -errno;

		/* EINVAL on a mount namespace is retried by lab_pod_ns_create,
		 * which reports it once if every attempt fails. */
		if (ret != -EINVAL || strcmp(kind, "mnt"))
			lab_err("bind %s on %s: %s", src, dst, strerror(errno));
		unlink(dst);
		return ret;
	}
	return 0;
}

/* Detach every RUNDIR/ns mount (/run/zerohop/LAB/ns) in this mount ns. */
static void detach_ns_dirs(void)
{
	char line[2048], mp[LAB_PATH], lab[128], rest[16];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1)
			continue;
		if (sscanf(mp, ZH_RUN_ROOT "/%127[^/]/%15s", lab, rest) == 2 && !strcmp(rest, "ns"))
			umount2(mp, MNT_DETACH);
	}
	if (f)
		fclose(f);
}

/* Child side of lab_pod_ns_create: new namespaces, hostname, mounts. */
static int pod_ns_child(const char *lab, const char *pod, const struct lab_mount *m, int n)
{
	char nsdir[LAB_PATH];

	if (unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS)) {
		lab_err("unshare: %s", strerror(errno));
		return -1;
	}
	if (sethostname(pod, strlen(pod))) {
		lab_err("sethostname %s: %s", pod, strerror(errno));
		return -1;
	}
	/* Slave, not private: unmounts of other labs' /run/netns entries still
	 * propagate in, so this namespace never pins their namespaces. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL)) {
		lab_err("make / rslave: %s", strerror(errno));
		return -1;
	}
	/* Our copies of the private RUNDIR/ns dirs (of every lab) would keep
	 * other pods' uts namespaces alive; drop them. */
	lab_fmt(nsdir, sizeof(nsdir), "%s/%s/ns", ZH_RUN_ROOT, lab);
	umount2(nsdir, MNT_DETACH);
	detach_ns_dirs();
	/* A sysfs of our own, as `ip netns exec` does: /sys/class/net then
	 * shows the pod's interfaces, not the host's. */
	if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		lab_err("pod %s: mount sysfs: %s (keeping the host's)", pod, strerror(errno));
	for (int i = 0; i < n; i++) {
		int r = m[i].tmpfs ? mount("tmpfs", m[i].dst, "tmpfs", MS_NOSUID | MS_NODEV,
					   "mode=0755,size=64m")
				   : mount(m[i].src, m[i].dst, NULL, MS_BIND | MS_REC, NULL);

		if (r) {
			lab_err("pod %s: mount %s on %s: %s", pod, m[i].tmpfs ? "tmpfs" : m[i].src,
				m[i].dst, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int pod_ns_create_once(const char *lab, const char *ns, const char *pod,
			      const struct lab_mount *mounts, int n_mounts, int cpu)
{
	char netp[LAB_PATH], utsp[LAB_PATH], mntp[LAB_PATH], name[256], c;
	int sync1[2], sync2[2], status, ret = 0;
	pid_t pid;

	lab_pod_netns_name(name, sizeof(name), lab, ns, pod);
	lab_pod_netns_path(netp, sizeof(netp), lab, ns, pod);
	lab_pod_nsfile(utsp, sizeof(utsp), lab, ns, pod, "uts");
	lab_pod_nsfile(mntp, sizeof(mntp), lab, ns, pod, "mnt");
	ret = lab_netns_record(lab, name);
	if (ret)
		return ret;
	if (pipe2(sync1, O_CLOEXEC))
		return -errno;
	if (pipe2(sync2, O_CLOEXEC)) {
		ret = -errno;
		goto out_sync1;
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		goto out_sync2;
	}
	if (pid == 0) {
		char ok;

		if (cpu >= 0) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			sched_setaffinity(0, sizeof(set), &set);
		}
		ok = pod_ns_child(lab, pod, mounts, n_mounts) ? 'E' : 'K';

		close(sync1[0]);
		close(sync2[1]);
		if (write(sync1[1], &ok, 1) != 1)
			_exit(1);
		/* Stay alive until the parent has bound our namespaces. */
		if (read(sync2[0], &ok, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(sync1[1]);
	close(sync2[0]);
	sync1[1] = sync2[0] = -1;
	if (read(sync1[0], &c, 1) != 1 || c != 'K') {
		ret = -EIO;
		goto out_child;
	}
	/* /run/netns must exist as ip netns sets it up (lab up created node
	 * namespaces with `ip netns add` first). */
	ret = bind_nsfile(pid, "net", netp);
	if (ret)
		goto out_child;
	ret = bind_nsfile(pid, "uts", utsp);
	if (ret)
		goto out_child;
	ret = bind_nsfile(pid, "mnt", mntp);
out_child:
	close(sync2[1]);
	sync2[1] = -1;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ret)
		lab_pod_ns_destroy(lab, ns, pod);
out_sync2:
	if (sync2[0] >= 0)
		close(sync2[0]);
	if (sync2[1] >= 0)
		close(sync2[1]);
out_sync1:
	close(sync1[0]);
	if (sync1[1] >= 0)
		close(sync1[1]);
	return ret;
}

void lab_pod_ns_destroy(const char *lab, const char *ns, const char *pod)
{
	char p[LAB_PATH];

	lab_pod_netns_path(p, sizeof(p), lab, ns, pod);
	umount2(p, MNT_DETACH);
	unlink(p);
	lab_pod_nsfile(p, sizeof(p), lab, ns, pod, "uts");
	umount2(p, MNT_DETACH);
	unlink(p);
	lab_pod_nsfile(p, sizeof(p), lab, ns, pod, "mnt");
	umount2(p, MNT_DETACH);
	unlink(p);
}

/* Why a pod's mount namespace file cannot always be bound (EINVAL):
 * the kernel refuses to bind a mount namespace whose id is not greater
 * than the binder's own, to rule out reference loops (mnt_ns_loop in
 * fs/namespace.c). Since 6.18 namespace ids come from per-CPU batches
 * (gen_cookie_next), so a namespace made now on CPU 0 can get a smaller id
 * than one made earlier on CPU 1. In the host's first mount namespace (id
 * 1) this never matters; inside `unshare -m` (a fresh-machine test, a
 * container) the supervisor's namespace has a batch id and a pod made on
 * another CPU is refused, every time, as long as that CPU's batch lasts.
 * Reproduced with `taskset -c 1 unshare -m` + children on CPU 0 / CPU 1.
 *
 * So a refused attempt is undone in full (lab_pod_ns_destroy) and made
 * again with the child pinned to each allowed CPU in turn: the CPU that
 * made the supervisor's namespace always works (its batch only grows).
 * The CPU that worked last is tried first next time. */
static int pod_ns_cpu = -1;

int lab_pod_ns_create(const char *lab, const char *ns, const char *pod,
		      const struct lab_mount *mounts, int n_mounts)
{
	cpu_set_t allowed;
	int ret = pod_ns_create_once(lab, ns, pod, mounts, n_mounts, pod_ns_cpu);

	if (ret != -EINVAL || sched_getaffinity(0, sizeof(allowed), &allowed))
		goto out;
	for (int cpu = 0; cpu < CPU_SETSIZE && ret == -EINVAL; cpu++) {
		if (!CPU_ISSET(cpu, &allowed) || cpu == pod_ns_cpu)
			continue;
		ret = pod_ns_create_once(lab, ns, pod, mounts, n_mounts, cpu);
		if (!ret)
			pod_ns_cpu = cpu;
	}
out:
	if (ret == -EINVAL)
		lab_err("pod %s/%s: bind its mount namespace: refused on every CPU (%s)", ns, pod,
			strerror(EINVAL));
	return ret;
}
