/* test_util.c — the lab's naming, topology file and pod lookup (lab.h), on
 * a scratch run dir /run/zerohop/Lunit-PID that the test removes. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/lab.h"
#include "zerohop/paths.h"
#include "../../../src/lab/lab_int.h"

static void put_pod(const char *lab, const char *ns, const char *name, const char *owner,
		    const char *ip, const char *phase)
{
	char dir[LAB_PATH], path[LAB_PATH + 8], buf[512];

	lab_pod_dir(dir, sizeof(dir), lab, ns, name);
	lab_mkdirs(dir, 0755);
	snprintf(path, sizeof(path), "%s/info", dir);
	snprintf(buf, sizeof(buf),
		 "namespace %s\nname %s\nnode node-a\nowner %s\nip %s\nphase %s\npid 42\nrestarts 1\n",
		 ns, name, owner, ip, phase);
	lab_write_str(path, buf);
}

int main(void)
{
	char lab[64], buf[LAB_PATH], rundir[LAB_PATH];
	struct lab_topo t = { 0 }, r;
	struct lab_pod_info p, *all;
	int n;

	snprintf(lab, sizeof(lab), "Lunit-%d", (int)getpid());
	zh_run_dir(rundir, sizeof(rundir), lab);

	is_str(lab_pod_netns_name(buf, sizeof(buf), "zh", "shop", "web-1"), "zh-p-shop-web-1",
	       "pod netns name LAB-p-NS-POD");
	is_str(lab_node_netns_path(buf, sizeof(buf), "zh", "node-a"), "/run/netns/zh-node-a",
	       "node netns path");
	is_str(lab_pod_dir(buf, sizeof(buf), "zh", "shop", "web-1"), "/run/zerohop/zh/pods/shop_web-1",
	       "pod run dir");
	ok(lab_cgroup_root(true) != NULL, "a cgroup2 hierarchy is available (%s)",
	   lab_cgroup_root(true));
	lab_pod_cgroup_path(buf, sizeof(buf), "zh", "node-a", "shop", "web-1");
	ok(strstr(buf, "/zerohop-zh/node-a/shop_web-1") && !strncmp(buf, lab_cgroup_root(true),
								      strlen(lab_cgroup_root(true))),
	   "pod cgroup under its node's: %s", buf);

	snprintf(t.lab, sizeof(t.lab), "%s", lab);
	t.n_nodes = 2;
	snprintf(t.nodes[0].name, sizeof(t.nodes[0].name), "node-a");
	snprintf(t.nodes[1].name, sizeof(t.nodes[1].name), "node-b");
	inet_pton(AF_INET, "10.250.0.1", &t.nodes[0].ip);
	inet_pton(AF_INET, "10.250.0.2", &t.nodes[1].ip);
	inet_pton(AF_INET, "10.244.0.0", &t.nodes[0].pod_net);
	inet_pton(AF_INET, "10.244.1.0", &t.nodes[1].pod_net);
	t.nodes[0].pod_len = t.nodes[1].pod_len = 24;
	inet_pton(AF_INET, "10.244.0.0", &t.pod_cidr);
	t.pod_cidr_len = 16;
	inet_pton(AF_INET, "10.96.0.0", &t.svc_cidr);
	t.svc_cidr_len = 12;
	t.overlay = true;
	t.mesh = false;
	t.accel = 0;
	snprintf(t.zerohop, sizeof(t.zerohop), "/usr/local/bin/zerohop");

	is_int(lab_topo_read(lab, &r), -ENOENT, "no lab.conf: -ENOENT (lab not up)");
	lab_mkdirs(rundir, 0755);
	is_int(lab_topo_write(&t), 0, "topology written");
	is_int(lab_topo_read(lab, &r), 0, "topology read back");
	is_str(r.lab, lab, "... lab name");
	is_int(r.n_nodes, 2, "... two nodes");
	ok(r.nodes[1].ip == t.nodes[1].ip && r.nodes[1].pod_net == t.nodes[1].pod_net &&
	   r.nodes[1].pod_len == 24, "... node-b fabric IP and pod CIDR");
	ok(r.overlay && !r.mesh && r.accel == 0 && !r.nft, "... options");
	ok(r.svc_cidr == t.svc_cidr && r.svc_cidr_len == 12, "... service CIDR");
	is_str(r.zerohop, "/usr/local/bin/zerohop", "... zerohop path");
	ok(lab_topo_node(&r, "node-b") == &r.nodes[1] && !lab_topo_node(&r, "node-c"),
	   "lab_topo_node finds by name");
	inet_ntop(AF_INET, &(uint32_t){ lab_dns_ip(&r) }, buf, 16);
	is_str(buf, "10.96.0.10", "cluster DNS = service CIDR base + 10");

	/* dual-stack (docs/ipv6.md): the IPv6 half survives the file, and a
	 * pod's IPv6 is its node's /64 + its IPv4 host byte */
	{
		struct in6_addr a;
		char b6[INET6_ADDRSTRLEN];

		ok(r.pod_cidr6_len == 0, "an IPv4 lab has no IPv6 pod CIDR");
		inet_pton(AF_INET6, "fd00:10:244::", &t.pod_cidr6);
		t.pod_cidr6_len = 56;
		inet_pton(AF_INET6, "fd7a:fab::1", &t.nodes[0].ip6);
		inet_pton(AF_INET6, "fd7a:fab::2", &t.nodes[1].ip6);
		inet_pton(AF_INET6, "fd00:10:244::", &t.nodes[0].pod_net6);
		inet_pton(AF_INET6, "fd00:10:244:1::", &t.nodes[1].pod_net6);
		is_int(lab_topo_write(&t), 0, "dual-stack topology written");
		is_int(lab_topo_read(lab, &r), 0, "... read back");
		is_int(r.pod_cidr6_len, 56, "... IPv6 pod CIDR length");
		is_str(inet_ntop(AF_INET6, &r.nodes[1].ip6, b6, sizeof(b6)), "fd7a:fab::2",
		       "... node-b fabric IPv6");
		is_str(inet_ntop(AF_INET6, &r.nodes[1].pod_net6, b6, sizeof(b6)), "fd00:10:244:1::",
		       "... node-b /64");
		lab_pod_ip6(&r.nodes[1], htonl(0x0af40107), &a);
		is_str(inet_ntop(AF_INET6, &a, b6, sizeof(b6)), "fd00:10:244:1::7",
		       "lab_pod_ip6: 10.244.1.7 on node-b -> fd00:10:244:1::7");
	}

	put_pod(lab, "default", "client", "", "10.244.0.2", "Running");
	put_pod(lab, "default", "web-0123456789-aaaaa", "web", "10.244.0.3", "Pending");
	put_pod(lab, "default", "web-0123456789-bbbbb", "web", "10.244.1.2", "Running");
	put_pod(lab, "shop", "cart", "", "10.244.1.3", "Running");
	is_int(lab_pod_list(lab, &all, &n), 0, "pod list");
	is_int(n, 4, "... 4 pods");
	if (n == 4)
		ok(!strcmp(all[0].name, "client") && !strcmp(all[3].ns, "shop"),
		   "... sorted by namespace/name");
	free(all);
	is_int(lab_pod_find(lab, "client", &p), 0, "find NAME (namespace default)");
	is_int(p.pid, 42, "... its record (pid)");
	is_int(lab_pod_find(lab, "shop/cart", &p), 0, "find NS/NAME");
	is_int(lab_pod_find(lab, "cart", &p), -ENOENT, "NAME looks in default only");
	is_int(lab_pod_find(lab, "deploy/web", &p), 0, "find deploy/NAME");
	is_str(p.name, "web-0123456789-bbbbb", "... prefers a Running pod");
	is_int(lab_pod_find(lab, "deploy/nope", &p), -ENOENT, "unknown Deployment: -ENOENT");

	is_int(lab_rm_tree(rundir), 0, "scratch run dir removed");
	ok(access(rundir, F_OK) != 0, "... and gone");
	return done_testing();
}
