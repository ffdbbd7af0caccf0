/* lab_prom.c — `zerohop lab up --prometheus`: a real Prometheus (Debian's
 * /usr/bin/prometheus, 2.42) scraping every node agent and node proxy of
 * the lab (docs/observability.md "The lab's Prometheus").
 *
 * Where it runs (DESIGN.md section 4, rules 1-3): in the first node's
 * network namespace, listening on that node's fabric IP, port
 * LAB_PROM_PORT; it reaches every node's agent (NODE_IP:15020) and proxy
 * (NODE_IP:15090) over the lab fabric and nothing else. Nothing listens in
 * the root network namespace. Config and TSDB under RUN_ROOT/LAB/prometheus
 * (removed by `lab down` with the run dir); the process is in the lab's
 * cgroup (system/prometheus) and in a lab netns, so `lab down` ends it like
 * every other lab process (by cgroup and netns, by PID).
 *
 * The address is published in RUN_ROOT/LAB/prometheus/addr ("IP:PORT")
 * once Prometheus answers /-/ready; tests read it from there (or from the
 * line `lab up` prints).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "lab_int.h"

#define LAB_PROM_BIN "/usr/bin/prometheus"
#define LAB_PROM_PORT 9090	/* inside the first node's netns only */
#define LAB_PROM_READY_MS 15000

static int write_config(const char *path, const struct lab_topo *t, bool proxies)
{
	FILE *f = fopen(path, "w");
	char ip[16];

	if (!f)
		return -errno;
	/* 1 s: the tests compare counters with what a load generator reports
	 * right after it ran; a real cluster would use 15 s. */
	fprintf(f, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
		   "scrape_configs:\n  - job_name: zerohop-agent\n    static_configs:\n");
	for (int i = 0; i < t->n_nodes; i++)
		fprintf(f, "      - targets: ['%s:15020']\n        labels: {node: '%s'}\n",
			lab_ip4_str(t->nodes[i].ip, ip), t->nodes[i].name);
	if (proxies) {
		fprintf(f, "  - job_name: zerohop-proxy\n    static_configs:\n");
		for (int i = 0; i < t->n_nodes; i++)
			fprintf(f, "      - targets: ['%s:15090']\n        labels: {node: '%s'}\n",
				lab_ip4_str(t->nodes[i].ip, ip), t->nodes[i].name);
	}
	return fclose(f) ? -errno : 0;
}

/* Inside the node netns (a child process): does ip:port answer /-/ready? */
static bool prom_ready(const char *lab, const char *node, uint32_t ip)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return false;
	if (pid == 0) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(LAB_PROM_PORT),
					  .sin_addr.s_addr = ip };
		struct timeval tv = { .tv_sec = 1 };
		char buf[64] = "";
		const char req[] = "GET /-/ready HTTP/1.0\r\n\r\n";
		int fd;

		if (lab_join_node(lab, node))
			_exit(1);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
		    write(fd, req, sizeof(req) - 1) < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
			_exit(1);
		_exit(strstr(buf, " 200 ") ? 0 : 1);
	}
	if (waitpid(pid, &st, 0) != pid)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int lab_prom_start(const struct lab_topo *t, bool proxies, char *addr, size_t addrlen)
{
	char dir[LAB_PATH], cfg[LAB_PATH + 32], data[LAB_PATH + 32], log[LAB_PATH + 32];
	char listen[48], ip[16], cg[LAB_PATH], lcg[LAB_PATH], procs[LAB_PATH + 32], pidbuf[32];
	const char *node = t->nodes[0].name;
	struct timespec ts = { 0, 200 * 1000000L };
	pid_t pid;
	int ret;

	if (access(LAB_PROM_BIN, X_OK)) {
		lab_err("--prometheus: %s not found (apt-get install prometheus)", LAB_PROM_BIN);
		return -ENOENT;
	}
	lab_fmt(dir, sizeof(dir), "%s/%s/prometheus", ZH_RUN_ROOT, t->lab);
	lab_fmt(cfg, sizeof(cfg), "%s/prometheus.yml", dir);
	lab_fmt(data, sizeof(data), "%s/data", dir);
	lab_fmt(log, sizeof(log), "%s/prometheus.log", dir);
	ret = zh_mkdir_p(data, 0755);
	if (!ret)
		ret = write_config(cfg, t, proxies);
	if (ret) {
		lab_err("--prometheus: %s: %s", dir, strerror(-ret));
		return ret;
	}
	lab_fmt(listen, sizeof(listen), "%s:%d", lab_ip4_str(t->nodes[0].ip, ip), LAB_PROM_PORT);
	lab_lab_cgroup_path(lcg, sizeof(lcg), t->lab);
	lab_fmt(cg, sizeof(cg), "%s/system/prometheus", lcg);
	if (mkdir(cg, 0755) && errno != EEXIST)
		zh_warn("mkdir %s: %s", cg, strerror(errno));
	lab_fmt(procs, sizeof(procs), "%s/cgroup.procs", cg);

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char a_cfg[LAB_PATH + 64], a_data[LAB_PATH + 64], a_listen[96];
		int fd;

		setsid();
		lab_fmt(pidbuf, sizeof(pidbuf), "%d\n", (int)getpid());
		lab_write_str(procs, pidbuf);	/* into the lab's cgroup (lab down) */
		if (lab_join_node(t->lab, node))
			_exit(127);
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0)
			dup2(fd, 0);
		lab_fmt(a_cfg, sizeof(a_cfg), "--config.file=%s", cfg);
		lab_fmt(a_data, sizeof(a_data), "--storage.tsdb.path=%s", data);
		lab_fmt(a_listen, sizeof(a_listen), "--web.listen-address=%s", listen);
		execl(LAB_PROM_BIN, "prometheus", a_cfg, a_data, a_listen,
		      "--storage.tsdb.retention.time=1d", "--log.level=warn", (char *)NULL);
		_exit(127);
	}
	lab_fmt(pidbuf, sizeof(pidbuf), "%d\n", (int)pid);
	lab_fmt(cfg, sizeof(cfg), "%s/pid", dir);
	lab_write_str(cfg, pidbuf);
	for (int waited = 0; waited < LAB_PROM_READY_MS; waited += 200) {
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid) {
			lab_err("--prometheus: exited at start (see %s)", log);
			return -ECHILD;
		}
		if (prom_ready(t->lab, node, t->nodes[0].ip)) {
			lab_fmt(cfg, sizeof(cfg), "%s/addr", dir);
			lab_fmt(pidbuf, sizeof(pidbuf), "%s\n", listen);
			lab_write_str(cfg, pidbuf);
			snprintf(addr, addrlen, "%s", listen);
			return 0;
		}
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGTERM);
	lab_err("--prometheus: not ready after %d ms (see %s)", LAB_PROM_READY_MS, log);
	return -ETIMEDOUT;
}
