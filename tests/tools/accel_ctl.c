/* accel_ctl — drive src/agent/accel.c from tests until the agent calls it.
 *
 *   accel_ctl on CGROUP PIN_DIR [POD_IP ...]   load/adopt, attach, set local pods
 *                                              (IPv4 and IPv6 addresses)
 *   accel_ctl off PIN_DIR                      detach (sockets demoted), keep pins
 *   accel_ctl cleanup PIN_DIR                  detach and unpin everything
 *   accel_ctl stats PIN_DIR                    counters as key=value lines (fresh process)
 *   accel_ctl gen CGROUP PIN_DIR N             set the policy generation (adopts)
 *   accel_ctl skip CGROUP PIN_DIR [PORT ...]   set the ports never short-circuited
 *   accel_ctl proxy CGROUP PIN_DIR [IP[:PORT] ...]  set the node proxy endpoints
 *                                              (no PORT: any port; benchmarks)
 *   accel_ctl keys PIN_DIR                     sockhash keys, one socket a line:
 *                                              LOCAL_IP:PORT REMOTE_IP:PORT
 *                                              ([LOCAL]:PORT [REMOTE]:PORT: IPv6)
 *
 * each tests/tools file is built alone, so this compiles the contract's
 * implementation in directly: exactly the code the agent links. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/log.c"
#include "../../src/lib/paths.c"
#include "../../src/agent/accel.c"

static int usage(void)
{
	fprintf(stderr, "usage: accel_ctl on CGROUP PIN_DIR [IP...] | off PIN_DIR | "
			"cleanup PIN_DIR | stats PIN_DIR | gen CGROUP PIN_DIR N | skip CGROUP PIN_DIR [PORT...] | "
			"proxy CGROUP PIN_DIR [IP[:PORT]...] | keys PIN_DIR\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct ag_accel_stats s;
	struct ag_accel *a = NULL;
	static struct in6_addr ip6s[ZH_ACCEL_MAX_LOCAL];
	uint32_t ips[ZH_ACCEL_MAX_LOCAL];
	int i, n = 0, n6 = 0, err;

	zh_log_init("accel_ctl", ZH_INFO);
	if (argc < 3)
		return usage();
	if (!strcmp(argv[1], "on") && argc >= 4) {
		for (i = 4; i < argc && n < ZH_ACCEL_MAX_LOCAL && n6 < ZH_ACCEL_MAX_LOCAL; i++) {
			if (inet_pton(AF_INET, argv[i], &ips[n]) == 1)
				n++;
			else if (inet_pton(AF_INET6, argv[i], &ip6s[n6]) == 1)
				n6++;
			else {
				fprintf(stderr, "accel_ctl: argument %d: bad IPv4 or IPv6 address '%s'\n", i, argv[i]);
				return 2;
			}
		}
		err = ag_accel_open(argv[2], argv[3], 1, &a);
		if (!err)
			err = ag_accel_set_local(a, ips, n);
		if (!err)
			err = ag_accel_set_local6(a, ip6s, n6);
		ag_accel_close(a, 0);
	} else if (!strcmp(argv[1], "off")) {
		err = ag_accel_open(NULL, argv[2], 0, &a);
		ag_accel_close(a, 0);
	} else if (!strcmp(argv[1], "cleanup")) {
		err = ag_accel_open(NULL, argv[2], 0, &a);
		ag_accel_close(a, 1);
	} else if (!strcmp(argv[1], "gen") && argc == 5) {
		/* enable=1 on an attached pin dir only adopts (idempotent). */
		err = ag_accel_open(argv[2], argv[3], 1, &a);
		if (!err)
			err = ag_accel_set_policy_gen(a, (uint32_t)strtoul(argv[4], NULL, 0));
		ag_accel_close(a, 0);
	} else if (!strcmp(argv[1], "skip") && argc >= 4) {
		uint16_t ports[ZH_ACCEL_MAX_SKIP_PORTS];

		for (i = 4; i < argc && n < ZH_ACCEL_MAX_SKIP_PORTS; i++) {
			char *end;
			unsigned long v = strtoul(argv[i], &end, 10);

			if (*end || !v || v > 65535) {
				fprintf(stderr, "accel_ctl: argument %d: bad port '%s'\n", i, argv[i]);
				return 2;
			}
			ports[n++] = v;
		}
		err = ag_accel_open(argv[2], argv[3], 1, &a);
		if (!err)
			err = ag_accel_set_skip_ports(a, ports, n);
		ag_accel_close(a, 0);
	} else if (!strcmp(argv[1], "stats")) {
		err = ag_accel_read_pinned_stats(argv[2], &s);
		if (!err)
			printf("sockets=%llu\nactive=%llu\nmsgs=%llu\nbytes=%llu\nfallbacks=%llu\n"
			       "removed=%llu\nskipped=%llu\ndemoted=%llu\nreleased=%llu\nproxy=%llu\n"
			       "fin_held=%llu\nbackpressure=%llu\nbp_resumed=%llu\n",
			       (unsigned long long)s.sockets, (unsigned long long)s.active,
			       (unsigned long long)s.msgs, (unsigned long long)s.bytes,
			       (unsigned long long)s.fallbacks, (unsigned long long)s.removed,
			       (unsigned long long)s.skipped, (unsigned long long)s.demoted,
			       (unsigned long long)s.released, (unsigned long long)s.proxy,
			       (unsigned long long)s.fin_held, (unsigned long long)s.backpressure,
			       (unsigned long long)s.bp_resumed);
	} else if (!strcmp(argv[1], "proxy") && argc >= 4) {
		struct zh_accel_proxy_ep eps[ZH_ACCEL_MAX_PROXY];

		for (i = 4; i < argc && n < ZH_ACCEL_MAX_PROXY; i++) {
			char ip[32], *colon;
			unsigned long port = 0;

			snprintf(ip, sizeof(ip), "%s", argv[i]);
			colon = strchr(ip, ':');
			if (colon) {
				*colon = '\0';
				port = strtoul(colon + 1, NULL, 10);
			}
			if (inet_pton(AF_INET, ip, &eps[n].ip4) != 1 || port > 65535) {
				fprintf(stderr, "accel_ctl: argument %d: bad endpoint '%s'\n", i, argv[i]);
				return 2;
			}
			eps[n++].port = (uint32_t)port;
		}
		err = ag_accel_open(argv[2], argv[3], 1, &a);
		if (!err)
			err = ag_accel_set_proxy(a, eps, n);
		ag_accel_close(a, 0);
	} else if (!strcmp(argv[1], "keys")) {
		struct zh_accel_key key, next;
		struct zh_accel_key6 key6, next6;
		char p[300], l[INET_ADDRSTRLEN], r[INET_ADDRSTRLEN];
		char l6[INET6_ADDRSTRLEN], r6[INET6_ADDRSTRLEN];
		int fd;

		snprintf(p, sizeof(p), "%s/accel_sockhash", argv[2]);
		fd = bpf_obj_get(p);
		err = fd < 0 ? -errno : 0;
		for (i = fd < 0 ? -1 : bpf_map_get_next_key(fd, NULL, &next); !i;
		     i = bpf_map_get_next_key(fd, &key, &next)) {
			key = next;
			printf("%s:%u %s:%u\n", inet_ntop(AF_INET, &key.local_ip4, l, sizeof(l)),
			       key.local_port, inet_ntop(AF_INET, &key.remote_ip4, r, sizeof(r)),
			       key.remote_port);
		}
		if (fd >= 0)
			close(fd);
		/* native IPv6 sockets: [LOCAL]:PORT [REMOTE]:PORT (an older
		 * layout without accel_sockhash6 has none) */
		snprintf(p, sizeof(p), "%s/accel_sockhash6", argv[2]);
		fd = err ? -1 : bpf_obj_get(p);
		for (i = fd < 0 ? -1 : bpf_map_get_next_key(fd, NULL, &next6); !i;
		     i = bpf_map_get_next_key(fd, &key6, &next6)) {
			key6 = next6;
			printf("[%s]:%u [%s]:%u\n", inet_ntop(AF_INET6, key6.local_ip6, l6, sizeof(l6)),
			       key6.local_port, inet_ntop(AF_INET6, key6.remote_ip6, r6, sizeof(r6)),
			       key6.remote_port);
		}
		if (fd >= 0)
			close(fd);
	} else {
		return usage();
	}
	if (err)
		fprintf(stderr, "accel_ctl %s: %s\n", argv[1], strerror(-err));
	return err ? 1 : 0;
}
