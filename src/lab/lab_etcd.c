/* lab_etcd.c — `zerohop lab up --state etcd`: the lab's state in a real
 * 3-member etcd cluster (Debian's etcd), docs/state-etcd.md "In the lab".
 *
 * Layout:
 *   netns LAB-etcd-K (K = 1..3)   one member each, veth eK on the fabric
 *                                 bridge, address 10.250.0.(200+K)/24,
 *                                 client port 2379, peer port 2380
 *   RUNDIR/etcd/mK/               data dir (member/), log, and the member's
 *                                 Unix client socket "c.sock:0"
 *   RUNDIR/state.spec             etcd://unix:RUNDIR/etcd/m1/c.sock:0,...:
 *                                 what zh_state_dir() returns for the lab
 *                                 (host-side users: apply/get --lab, the
 *                                 supervisor, the DNS pods)
 *   RUNDIR/state.nodespec         etcd://10.250.0.201:2379,...: what the
 *                                 agents get (they run in the node
 *                                 namespaces and reach etcd over the fabric,
 *                                 so a node can be cut off inside the lab)
 *   RUNDIR/etcd/pki/              with --state etcd-tls: a CA of the lab's,
 *                                 the members' certificate (IP SANs of the
 *                                 three, serverAuth and clientAuth: etcd
 *                                 3.4's gateway dials its own gRPC port with
 *                                 it) and the agents' client certificate,
 *                                 made with the openssl CLI; the fabric
 *                                 listeners are then https:// with
 *                                 --client-cert-auth and state.nodespec
 *                                 https://...; the Unix sockets stay plain
 *                                 (root-only files under RUNDIR), and so
 *                                 does the peer traffic
 * Invariants:
 *  L1. Nothing is added to the root network namespace: members listen on
 *      the fabric and on Unix sockets under RUNDIR only.
 *  L2. Members are recorded in netns.list before they exist, so `lab down`
 *      (lab_down.c) kills them with the lab's namespaces and removes their
 *      data with RUNDIR, also after a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <arpa/inet.h>

#include "zerohop/buf.h"
#include "zerohop/etcd.h"
#include "zerohop/jsonv.h"
#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "lab_int.h"

#define N_MEMBERS 3
#define MEMBER_IP(k) "10.250.0.%d", 200 + (k)

static void member_ip(int k, char *buf, size_t len)
{
	lab_fmt(buf, len, MEMBER_IP(k));
}

/* The lab's PKI in RUNDIR/etcd/pki (see the layout above). */
static int make_pki(const char *rundir)
{
	char d[LAB_PATH + 16], f[8][LAB_PATH + 32], san[128] = "subjectAltName=", ip[16];
	int ret = 0;

	lab_fmt(d, sizeof(d), "%s/etcd/pki", rundir);
	if (lab_mkdirs(d, 0700))
		return -errno;
	for (int k = 1; k <= N_MEMBERS; k++) {
		member_ip(k, ip, sizeof(ip));
		lab_fmt(san + strlen(san), sizeof(san) - strlen(san), "%sIP:%s", k > 1 ? "," : "", ip);
	}
	lab_fmt(f[0], sizeof(f[0]), "%s/ca.key", d);
	lab_fmt(f[1], sizeof(f[1]), "%s/ca.crt", d);
	{
		char *gen[] = { "openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
				"ec_paramgen_curve:P-256", "-out", f[0], NULL };
		char *ca[] = { "openssl", "req", "-x509", "-new", "-key", f[0], "-days", "3650",
			       "-subj", "/O=zerohop lab/CN=etcd CA", "-out", f[1], NULL };

		ret = lab_run(gen, false);
		if (!ret)
			ret = lab_run(ca, false);
	}
	for (int i = 0; !ret && i < 2; i++) {	/* server, then client */
		const char *name = i ? "client" : "server";
		char *gen[] = { "openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
				"ec_paramgen_curve:P-256", "-out", f[2], NULL };
		char *req[] = { "openssl", "req", "-new", "-key", f[2], "-subj", "/O=zerohop lab/CN=etcd",
				"-addext", i ? "extendedKeyUsage=clientAuth" :
					       "extendedKeyUsage=serverAuth,clientAuth",
				"-addext", san, "-out", f[3], NULL };
		char *sign[] = { "openssl", "x509", "-req", "-in", f[3], "-CA", f[1], "-CAkey", f[0],
				 "-CAcreateserial", "-days", "3650", "-copy_extensions", "copyall",
				 "-out", f[4], NULL };

		lab_fmt(f[2], sizeof(f[2]), "%s/%s.key", d, name);
		lab_fmt(f[3], sizeof(f[3]), "%s/%s.csr", d, name);
		lab_fmt(f[4], sizeof(f[4]), "%s/%s.crt", d, name);
		ret = lab_run(gen, false);
		if (!ret)
			ret = lab_run(req, false);
		if (!ret)
			ret = lab_run(sign, false);
	}
	if (ret)
		lab_err("etcd TLS: making the lab's certificates in %s failed (Debian package openssl)", d);
	return ret;
}

bool lab_etcd_tls(const char *lab, char *dir, size_t len)
{
	char p[LAB_PATH + 32];

	lab_fmt(dir, len, "%s/%s/etcd/pki", ZH_RUN_ROOT, lab);
	lab_fmt(p, sizeof(p), "%s/client.crt", dir);
	return access(p, R_OK) == 0;
}

static int start_member(const struct lab_topo *t, int k, const char *cluster, bool tls)
{
	char rundir[LAB_PATH], dir[LAB_PATH + 16], log[LAB_PATH + 32], ns[160], nsp[LAB_PATH];
	char ip[16], a[5][256], pki[3][LAB_PATH + 32];
	pid_t pid;

	zh_run_dir(rundir, sizeof(rundir), t->lab);
	lab_fmt(dir, sizeof(dir), "%s/etcd/m%d", rundir, k);
	lab_fmt(log, sizeof(log), "%s/log", dir);
	lab_fmt(ns, sizeof(ns), "%s-etcd-%d", t->lab, k);
	lab_fmt(nsp, sizeof(nsp), "/run/netns/%s", ns);
	member_ip(k, ip, sizeof(ip));
	if (lab_mkdirs(dir, 0700))
		return -errno;
	lab_fmt(a[0], sizeof(a[0]), "m%d", k);
	lab_fmt(a[1], sizeof(a[1]), "%s://%s:2379,unix://c.sock:0", tls ? "https" : "http", ip);
	lab_fmt(a[2], sizeof(a[2]), "%s://%s:2379", tls ? "https" : "http", ip);
	lab_fmt(pki[0], sizeof(pki[0]), "%s/etcd/pki/server.crt", rundir);
	lab_fmt(pki[1], sizeof(pki[1]), "%s/etcd/pki/server.key", rundir);
	lab_fmt(pki[2], sizeof(pki[2]), "%s/etcd/pki/ca.crt", rundir);
	lab_fmt(a[3], sizeof(a[3]), "http://%s:2380", ip);
	lab_fmt(a[4], sizeof(a[4]), "%s/data", dir);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char *argv[] = { "etcd", "--name", a[0], "--data-dir", a[4],
				 "--listen-client-urls", a[1], "--advertise-client-urls", a[2],
				 "--listen-peer-urls", a[3], "--initial-advertise-peer-urls", a[3],
				 "--initial-cluster", (char *)cluster, "--initial-cluster-state", "new",
				 "--heartbeat-interval", "50", "--election-timeout", "500",
				 /* one apply = one txn (ss_etcd.c K1): room for big ones */
				 "--max-txn-ops", "20000", "--max-request-bytes", "33554432",
				 /* TLS on the fabric listener only (the layout above) */
				 "--cert-file", pki[0], "--key-file", pki[1], "--trusted-ca-file",
				 pki[2], "--client-cert-auth", NULL };
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		if (fd < 0 || lab_join_netns_path(nsp) || chdir(dir))
			_exit(127);
		dup2(fd, 1);
		dup2(fd, 2);
		setsid();
		for (int i = 0; !tls && argv[i]; i++)
			if (!strcmp(argv[i], "--cert-file"))
				argv[i] = NULL;	/* plain: the TLS flags go */
		execvp("etcd", argv);
		_exit(127);
	}
	return 0;
}

/* A member answers through its Unix socket and knows a leader. */
static bool member_ok(const char *lab, int k, uint64_t *leader, uint64_t *id, uint64_t *rev)
{
	struct eg_ep ep = { .unix_sock = true };
	struct jv *j = NULL;
	struct buf r;
	int status = 0;
	bool ok;

	lab_fmt(ep.host, sizeof(ep.host), "%s/%s/etcd/m%d/c.sock:0", ZH_RUN_ROOT, lab, k);
	buf_init(&r, 0);
	ok = !eg_call(&ep, "/v3/maintenance/status", "{}", 1000, &status, &r) && status == 200 &&
	     (j = jv_parse(buf_head(&r), r.data, NULL, 0)) != NULL;
	if (ok) {
		const struct jv *h = jv_get(j, "header");

		*leader = jv_u64(jv_get(j, "leader"), 0);
		*id = jv_u64(jv_get(h, "member_id"), 0);
		*rev = jv_u64(jv_get(h, "revision"), 0);
		ok = *leader != 0;
	}
	jv_free(j);
	buf_free(&r);
	return ok;
}

int lab_etcd_up(const struct lab_topo *t, bool tls)
{
	char rundir[LAB_PATH], fab[128], ns[160], ip[16], cluster[512] = "", p[LAB_PATH + 32];
	char host[1024] = "", node[512] = "";
	struct timespec ts;
	long long end;
	int ret;

	zh_run_dir(rundir, sizeof(rundir), t->lab);
	lab_fabric_netns_name(fab, sizeof(fab), t->lab);
	for (int k = 1; k <= N_MEMBERS; k++) {
		member_ip(k, ip, sizeof(ip));
		lab_fmt(cluster + strlen(cluster), sizeof(cluster) - strlen(cluster),
			"%sm%d=http://%s:2380", k > 1 ? "," : "", k, ip);
		lab_fmt(host + strlen(host), sizeof(host) - strlen(host), "%sunix:%s/etcd/m%d/c.sock:0",
			k > 1 ? "," : "etcd://", rundir, k);
		lab_fmt(node + strlen(node), sizeof(node) - strlen(node), "%s%s:2379",
			k > 1 ? "," : tls ? "https://" : "etcd://", ip);
	}
	if (tls && (ret = make_pki(rundir)))
		return ret;
	for (int k = 1; k <= N_MEMBERS; k++) {
		lab_fmt(ns, sizeof(ns), "%s-etcd-%d", t->lab, k);
		member_ip(k, ip, sizeof(ip));
		if ((ret = lab_netns_record(t->lab, ns)) || (ret = lab_ip("netns add %s", ns)) ||
		    (ret = lab_ip("-n %s link set lo up", ns)) ||
		    (ret = lab_ip("-n %s link add eth0 type veth peer name e%d netns %s", ns, k, fab)) ||
		    (ret = lab_ip("-n %s addr add %s/24 dev eth0", ns, ip)) ||
		    (ret = lab_ip("-n %s link set eth0 up", ns)) ||
		    (ret = lab_ip("-n %s link set e%d master br0 up", fab, k)))
			return ret;
	}
	for (int k = 1; k <= N_MEMBERS; k++) {
		ret = start_member(t, k, cluster, tls);
		if (ret) {
			lab_err("etcd member %d: %s", k, strerror(-ret));
			return ret;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000 + 20000;
	for (;;) {
		uint64_t l, id, rev;
		int n_ok = 0;

		for (int k = 1; k <= N_MEMBERS; k++)
			n_ok += member_ok(t->lab, k, &l, &id, &rev);
		if (n_ok == N_MEMBERS)
			break;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (ts.tv_sec * 1000LL + ts.tv_nsec / 1000000 > end) {
			lab_err("etcd: %d of %d members ready after 20 s (see %s/etcd/m*/log)", n_ok,
				N_MEMBERS, rundir);
			return -ETIMEDOUT;
		}
		usleep(100 * 1000);
	}
	lab_fmt(p, sizeof(p), "%s/state.nodespec", rundir);
	if ((ret = lab_write_str(p, node)))
		return ret;
	lab_fmt(p, sizeof(p), "%s/state.spec", rundir);	/* last: zh_state_dir turns to etcd */
	return lab_write_str(p, host);
}

int lab_etcd_node_spec(const char *lab, char *buf, size_t len)
{
	char p[LAB_PATH + 32];

	lab_fmt(p, sizeof(p), "%s/%s/state.nodespec", ZH_RUN_ROOT, lab);
	return lab_read_file(p, buf, len) < 0 ? -ENOENT : 0;
}

void lab_etcd_status(const char *lab, bool json)
{
	char p[LAB_PATH + 32], spec[1024];
	uint64_t leader = 0, id[N_MEMBERS + 1] = { 0 }, rev[N_MEMBERS + 1] = { 0 };
	bool ok[N_MEMBERS + 1];
	int lk = 0;

	lab_fmt(p, sizeof(p), "%s/%s/state.nodespec", ZH_RUN_ROOT, lab);
	if (lab_read_file(p, spec, sizeof(spec)) < 0)
		return;
	for (int k = 1; k <= N_MEMBERS; k++) {
		uint64_t l = 0;

		ok[k] = member_ok(lab, k, &l, &id[k], &rev[k]);
		if (ok[k])
			leader = l;
	}
	for (int k = 1; k <= N_MEMBERS; k++)
		if (ok[k] && id[k] == leader)
			lk = k;
	if (json) {
		printf(",\"etcd\":{\"spec\":\"%s\",\"leader\":%s%d%s,\"members\":[", spec,
		       lk ? "\"m" : "", lk, lk ? "\"" : "");
		for (int k = 1; k <= N_MEMBERS; k++)
			printf("%s{\"name\":\"m%d\",\"healthy\":%s,\"revision\":%llu}", k > 1 ? "," : "",
			       k, ok[k] ? "true" : "false", (unsigned long long)rev[k]);
		printf("]}");
		return;
	}
	printf("etcd %s\n", spec);
	for (int k = 1; k <= N_MEMBERS; k++) {
		char ip[16];

		member_ip(k, ip, sizeof(ip));
		printf("  m%d  %-14s %-9s %s  revision %llu\n", k, ip, ok[k] ? "healthy" : "UNHEALTHY",
		       k == lk ? "leader " : "       ", (unsigned long long)rev[k]);
	}
}

int lab_etcd_agent_args(const char *lab, char **v, int n)
{
	static const char *const flag[] = { "--etcd-cacert", "--etcd-cert", "--etcd-key" };
	static const char *const file[] = { "ca.crt", "client.crt", "client.key" };
	char d[LAB_PATH], p[LAB_PATH + 32];

	if (!lab_etcd_tls(lab, d, sizeof(d)))
		return n;
	for (int i = 0; i < 3; i++) {
		lab_fmt(p, sizeof(p), "%s/%s", d, file[i]);
		v[n++] = zh_strdup(flag[i]);
		v[n++] = zh_strdup(p);
	}
	return n;
}
