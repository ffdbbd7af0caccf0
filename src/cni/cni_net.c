/* cni_net.c — the pod's veth, address and routes, made with `ip -batch`
 * (as the lab's own lab_net.c does) in the plugin's namespace (the node)
 * and, through a child that setns()es first, in CNI_NETNS.
 *
 * Invariants:
 * 1. Nothing here leaves the plugin's own network namespace except into
 *    CNI_NETNS: the runtime chose both (the lab runs the runtime inside the
 *    node's namespace, DESIGN.md section 4).
 * 2. The host end's name is a function of (container id, ifname), so DEL
 *    finds it without a record and a repeated ADD first removes what an
 *    earlier, interrupted one left.
 * 3. Deleting the host end removes the pair, the pod's address, its /32
 *    route and neighbour at once, even while the container still runs.
 * 4. The result JSON owns stdout: every child's stdout goes to stderr.
 * 5. Dual-stack (podCIDR6) mirrors IPv4 as the lab's lab_net.c does: the
 *    pod's /128 (cni_ip6_of) with nodad, its default route via LAB_GW6 with
 *    the same permanent neighbour MAC, and on the node a /128 route and a
 *    permanent neighbour on the host end, removed with it (invariant 3).
 * 6. IPv6-only (ipv6Only): invariant 5 alone. The pod's IPv4 (the index its
 *    IPv6 and MAC are derived from) is on no interface and in no route, on
 *    either side, as in the lab's IPv6-only process pods (lab_net.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zerohop/lab.h"
#include "zerohop/run.h"
#include "cni_int.h"

void cni_veth_name(const char *id, const char *ifname, char out[16])
{
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a, as lab_net.c names pod veths */

	for (const char *s = id; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	h = (h ^ '/') * 1099511628211ULL;
	for (const char *s = ifname; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	snprintf(out, 16, "%s%011llx", CNI_HOST_VETH_PREFIX,
		 (unsigned long long)(h & 0xfffffffffffULL));
}

void cni_pod_mac(uint32_t ip, char out[18])
{
	const unsigned char *b = (const unsigned char *)&ip;

	snprintf(out, 18, "02:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3]);
}

static int enter_netns(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET)) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	close(fd);
	return 0;
}

/* `ip -batch -` with cmds on stdin, inside netns (NULL: ours); quiet: its
 * stderr is dropped. The exit status (zh_wait), or -errno. */
static int ip_batch(const char *netns, const char *cmds, bool quiet)
{
	int in[2], ret;
	pid_t pid;

	if (pipe2(in, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(in[0]);
		close(in[1]);
		return ret;
	}
	if (pid == 0) {
		if (netns && enter_netns(netns)) {
			fprintf(stderr, "zerohop-cni: enter %s: %s\n", netns, strerror(errno));
			_exit(126);
		}
		dup2(in[0], 0);
		dup2(2, 1);	/* invariant 4 */
		if (quiet) {
			int null = open("/dev/null", O_WRONLY);

			if (null >= 0)
				dup2(null, 2);
		}
		execlp("ip", "ip", "-batch", "-", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	if (write(in[1], cmds, strlen(cmds)) < 0)
		ret = -errno;
	close(in[1]);
	ret = zh_wait(pid);
	return ret;
}

int cni_net_add(const struct cni_req *r, uint32_t ip, struct cni_err *e)
{
	char cmds[2048], mac[18], a[16], a6[INET6_ADDRSTRLEN] = "", mtu[24] = "";
	struct in6_addr ip6;
	int ret, off;

	cni_pod_mac(ip, mac);
	inet_ntop(AF_INET, &ip, a, sizeof(a));
	if (r->plen6) {
		cni_ip6_of(r, ip, &ip6);
		inet_ntop(AF_INET6, &ip6, a6, sizeof(a6));
	}
	if (r->mtu)
		snprintf(mtu, sizeof(mtu), " mtu %d", r->mtu);
	off = snprintf(cmds, sizeof(cmds),
		       "link add %s address %s%s type veth peer name %s address %s%s netns %s\n"
		       "link set %s up\n",
		       r->veth, LAB_GW_MAC, mtu, r->ifname, mac, mtu, r->netns, r->veth);
	if (!r->v6only)	/* invariant 6 */
		off += snprintf(cmds + off, sizeof(cmds) - off,
				"route replace %s/32 dev %s scope link\n"
				"neigh replace %s lladdr %s dev %s nud permanent\n",
				a, r->veth, a, mac, r->veth);
	if (r->plen6)	/* invariant 5 */
		snprintf(cmds + off, sizeof(cmds) - off,
			 "route replace %s/128 dev %s\n"
			 "neigh replace %s lladdr %s dev %s nud permanent\n",
			 a6, r->veth, a6, mac, r->veth);
	ret = ip_batch(NULL, cmds, false);
	if (ret)
		return cni_fail(e, CNI_ERR_NETWORK, "cannot create the pod's veth",
				"ip -batch in the node namespace exited %d: %s", ret, cmds);
	if (r->v6only)	/* invariant 6 */
		off = snprintf(cmds, sizeof(cmds), "link set lo up\nlink set %s up\n", r->ifname);
	else
		off = snprintf(cmds, sizeof(cmds),
			       "link set lo up\n"
			       "addr add %s/32 dev %s\n"
			       "link set %s up\n"
			       "neigh replace %s lladdr %s dev %s nud permanent\n"
			       "route add %s dev %s scope link\n"
			       "route add default via %s dev %s\n",
			       a, r->ifname, r->ifname, LAB_GW, LAB_GW_MAC, r->ifname, LAB_GW,
			       r->ifname, LAB_GW, r->ifname);
	if (r->plen6)
		snprintf(cmds + off, sizeof(cmds) - off,
			 "addr add %s/128 dev %s nodad\n"
			 "neigh replace %s lladdr %s dev %s nud permanent\n"
			 "route add ::/0 via %s dev %s\n",
			 a6, r->ifname, LAB_GW6, LAB_GW_MAC, r->ifname, LAB_GW6, r->ifname);
	ret = ip_batch(r->netns, cmds, false);
	if (ret)
		return cni_fail(e, CNI_ERR_NETWORK, "cannot configure the pod's interface",
				"ip -batch in %s exited %d: %s", r->netns, ret, cmds);
	return 0;
}

void cni_net_del(const char *veth)
{
	char cmd[64];

	if (!if_nametoindex(veth))
		return;
	snprintf(cmd, sizeof(cmd), "link del %s\n", veth);
	ip_batch(NULL, cmd, true);
}

/* Is there a route to dst/plen via gw (0: none) on device ifindex in the
 * current namespace? /proc/net/route is per namespace. */
static bool has_route(uint32_t dst, uint32_t mask, uint32_t gw, const char *dev)
{
	char line[512], ifn[64];
	unsigned d, g, fl, m;
	FILE *f = fopen("/proc/net/route", "re");
	bool yes = false;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %x %x %x %*d %*d %*d %x", ifn, &d, &g, &fl, &m) == 5 &&
		    !strcmp(ifn, dev) && d == dst && m == mask && g == gw)
			yes = true;
	if (f)
		fclose(f);
	return yes;
}

/* Does dev have ip (AF_INET) or ip6 (AF_INET6, when ip6 is not NULL)? */
static bool has_addr(const char *dev, uint32_t ip, const struct in6_addr *ip6)
{
	struct ifaddrs *ifa, *i;
	bool yes = false;

	if (getifaddrs(&ifa))
		return false;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || strcmp(i->ifa_name, dev))
			continue;
		if (!ip6 && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == ip)
			yes = true;
		if (ip6 && i->ifa_addr->sa_family == AF_INET6 &&
		    !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, ip6, sizeof(*ip6)))
			yes = true;
	}
	freeifaddrs(ifa);
	return yes;
}

enum { BAD_NETNS = 1, BAD_IF = 2, BAD_ADDR = 4, BAD_DEFAULT = 8, BAD_DOWN = 16, BAD_ADDR6 = 32 };

void cni_net_check(const struct cni_req *r, const struct cni_rec *rec, char *buf, size_t len)
{
	uint32_t gw;
	size_t off = 0;
	int bad = 0;
	pid_t pid;
	char a[16], a6[INET6_ADDRSTRLEN] = "";
	struct in6_addr ip6;

	inet_pton(AF_INET, LAB_GW, &gw);
	inet_ntop(AF_INET, &rec->ip, a, sizeof(a));
	if (r->plen6 && !rec->chained) {
		cni_ip6_of(r, rec->ip, &ip6);
		inet_ntop(AF_INET6, &ip6, a6, sizeof(a6));
	}
	buf[0] = 0;
#define ADD(...) off += (size_t)snprintf(buf + off, off < len ? len - off : 0, __VA_ARGS__)
	if (rec->chained)	/* another plugin's interface: only the address is ours to check */
		;
	else if (!if_nametoindex(rec->veth))
		ADD("host veth %s is missing; ", rec->veth);
	else if (!r->v6only && !has_route(rec->ip, 0xffffffff, 0, rec->veth))
		ADD("host route %s/32 dev %s is missing; ", a, rec->veth);
	pid = fork();
	if (pid == 0) {
		unsigned ifx;

		if (enter_netns(r->netns))
			_exit(BAD_NETNS);
		ifx = if_nametoindex(rec->ifname);
		if (!ifx)
			_exit(BAD_IF);
		{
			struct ifreq ifr = { 0 };
			int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

			snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", rec->ifname);
			if (s >= 0 && !ioctl(s, SIOCGIFFLAGS, &ifr) && !(ifr.ifr_flags & IFF_UP))
				bad |= BAD_DOWN;
		}
		if ((!r->v6only || rec->chained) && !has_addr(rec->ifname, rec->ip, NULL))
			bad |= BAD_ADDR;
		if (a6[0] && !has_addr(rec->ifname, 0, &ip6))
			bad |= BAD_ADDR6;
		if (!rec->chained && !r->v6only && !has_route(0, 0, gw, rec->ifname))
			bad |= BAD_DEFAULT;
		_exit(bad);
	}
	bad = pid < 0 ? BAD_NETNS : zh_wait(pid);
	if (bad & BAD_NETNS)
		ADD("network namespace %s cannot be entered; ", r->netns);
	if (bad & BAD_IF)
		ADD("interface %s is missing in %s; ", rec->ifname, r->netns);
	if (bad & BAD_DOWN)
		ADD("interface %s is down; ", rec->ifname);
	if (bad & BAD_ADDR)
		ADD("address %s/32 is missing on %s; ", a, rec->ifname);
	if (bad & BAD_ADDR6)
		ADD("address %s/128 is missing on %s; ", a6, rec->ifname);
	if (bad & BAD_DEFAULT)
		ADD("default route via %s on %s is missing; ", LAB_GW, rec->ifname);
#undef ADD
	if (off >= 2 && off < len)
		buf[off - 2] = 0;	/* the last "; " */
}
