/* cli.c — `zerohop proxy`: option parsing and mode selection (px_serve). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <arpa/inet.h>

#include "zerohop/cli.h"
#include "zerohop/hbone.h"
#include "zerohop/abi/l7cap.h"
#include "zerohop/identity.h"
#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "zerohop/proxy.h"
#include "px_int.h"

static void px_usage(FILE *f)
{
	fprintf(f,
		"usage: zerohop proxy --node NODE [--lab LAB] [options]      capture mode (lab)\n"
		"       zerohop proxy --node NODE --cgroup PATH --pin-dir DIR --node-ip IP\n"
		"                     --state DIR [options]                  capture mode (any node)\n"
		"       zerohop proxy --listen ADDR:PORT --service NS/NAME[:PORT]\n"
		"                     (--state DIR | --lab LAB | -f FILE...) [options]   explicit mode\n"
		"options:\n"
		"  --stats-addr ADDR:PORT   serve Prometheus text (GET any path)\n"
		"  --access-log FILE        append one line per request (docs/proxy.md)\n"
		"  --max-line N --max-head N --max-headers N   request parser limits\n"
		"                           (defaults 8192, 65536, 100)\n"
		"  --connect-timeout DUR    upstream connect timeout (1s) → 503\n"
		"  --client-idle-timeout DUR    close idle client connections (300s)\n"
		"  --upstream-idle-timeout DUR  close pooled idle upstreams (60s)\n"
		"  --stream-idle-timeout DUR    end an HTTP/2 stream with no frame either way\n"
		"                           (300s, Envoy's; 0 = off) → 408, or RST_STREAM\n"
		"  --outlier-base-ejection DUR  outlier ejection time, x ejections (30s)\n"
		"  --outlier-consecutive N  failed tries in a row that eject (5)\n"
		"  --drain-timeout DUR      SIGTERM: finish in-flight requests, then exit (15s)\n"
		"  --discard-time DUR       an HTTP/1.1 upload answered early: its rest is read\n"
		"                           and dropped this long at most, then the connection\n"
		"                           closes (30s, nginx's lingering_time)\n"
		"  --busy-poll DUR          poll this long (e.g. 50us) before sleeping: lower\n"
		"                           latency for CPU (0, off; default from the\n"
		"                           environment ZEROHOP_PROXY_BUSY_POLL, else 0)\n"
		"  --hbone[=on|off]         capture mode: the HBONE (mTLS) tunnel, on by\n"
		"                           default (docs/mtls.md): serve it on NODE_IP:15008\n"
		"                           and the node proxy address :15008, and carry the\n"
		"                           connections to STRICT pods of other nodes to their\n"
		"                           nodes' proxies; off also with ZH_PROXY_HBONE=0\n"
		"  --svid-dir DIR           the node's SVIDs for --hbone (the lab's naming)\n"
		"  --node-ip6 IP6           capture mode: also listen on [IP6]:15001 for native\n"
		"                           IPv6 clients of L7 Services (a dual-stack lab's\n"
		"                           node: its fabric IPv6, by default; docs/ipv6.md)\n");
}

static int px_size_opt(const char *name, const char *v, size_t *out)
{
	char *end;
	unsigned long long n = strtoull(v, &end, 10);

	if (*end || !n || n > (1ULL << 30)) {
		fprintf(stderr, "zerohop proxy: --%s %s: want a positive number\n", name, v);
		return -EINVAL;
	}
	*out = n;
	return 0;
}

/* A Gateway API duration ("500ms", "10s"), positive. */
static int px_dur_opt(const char *name, const char *v, uint64_t *out)
{
	if (md_duration_ms(v, out) || !*out) {
		fprintf(stderr, "zerohop proxy: --%s %s: want a positive duration like 500ms or 10s\n",
			name, v);
		return -EINVAL;
	}
	return 0;
}

/* --busy-poll: "0", "N" or "Nus" (microseconds), "Nms"; at most 10 ms. */
static int px_busy_opt(const char *from, const char *v, uint64_t *out)
{
	char *end;
	unsigned long long n = strtoull(v, &end, 10);

	if (end == v)
		goto bad;
	if (!strcmp(end, "ms"))
		n *= 1000;
	else if (*end && strcmp(end, "us"))
		goto bad;
	if (n > 10000)
		goto bad;
	*out = n;
	return 0;
bad:
	fprintf(stderr, "zerohop proxy: %s %s: want a duration from 0 to 10ms, like 50us\n", from, v);
	return -EINVAL;
}

int cli_proxy(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "lab", required_argument, NULL, 'L' },
		{ "listen", required_argument, NULL, 'l' },
		{ "service", required_argument, NULL, 's' },
		{ "state", required_argument, NULL, 'S' },
		{ "file", required_argument, NULL, 'f' },
		{ "stats-addr", required_argument, NULL, 'm' },
		{ "access-log", required_argument, NULL, 'a' },
		{ "max-line", required_argument, NULL, 1 },
		{ "max-head", required_argument, NULL, 2 },
		{ "max-headers", required_argument, NULL, 3 },
		{ "connect-timeout", required_argument, NULL, 4 },
		{ "client-idle-timeout", required_argument, NULL, 5 },
		{ "upstream-idle-timeout", required_argument, NULL, 6 },
		{ "stream-idle-timeout", required_argument, NULL, 18 },
		{ "outlier-base-ejection", required_argument, NULL, 7 },
		{ "outlier-consecutive", required_argument, NULL, 8 },
		{ "drain-timeout", required_argument, NULL, 9 },
		{ "busy-poll", required_argument, NULL, 10 },
		{ "cgroup", required_argument, NULL, 11 },
		{ "pin-dir", required_argument, NULL, 12 },
		{ "node-ip", required_argument, NULL, 13 },
		{ "hbone", optional_argument, NULL, 14 },
		{ "svid-dir", required_argument, NULL, 15 },
		{ "node-ip6", required_argument, NULL, 16 },
		{ "discard-time", required_argument, NULL, 17 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct px_config cfg = { .capture_fd = -1 };
	struct px_capture cap = { 0 };
	const char *node = NULL, *lab = NULL, *cgroup = NULL, *pin_dir = NULL, *node_ip = NULL;
	const char *svid_opt = NULL, *hb_env = getenv("ZH_PROXY_HBONE"), *node_ip6 = NULL;
	/* HBONE: on in capture mode unless ZH_PROXY_HBONE=0 or --hbone=off */
	bool hbone = !(hb_env && !strcmp(hb_env, "0")), hbone_flag = false;
	char state[512], listen[64], listen6[80], hb_listen[64], svid_dir[300];
	struct rlimit rl;
	int c, rc;

	zh_log_init("zerohop proxy", ZH_INFO);
	if (getenv("ZEROHOP_PROXY_BUSY_POLL") &&
	    px_busy_opt("ZEROHOP_PROXY_BUSY_POLL", getenv("ZEROHOP_PROXY_BUSY_POLL"), &cfg.busy_poll_us))
		return 2;
	cfg.files = zh_calloc(argc + 1, sizeof(char *));
	optind = 1;
	while ((c = getopt_long(argc, argv, "f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': node = optarg; break;
		case 'L': lab = optarg; break;
		case 'l': cfg.listen = optarg; break;
		case 's': cfg.service = optarg; break;
		case 'S': cfg.state_dir = optarg; break;
		case 'f': cfg.files[cfg.n_files++] = optarg; break;
		case 'm': cfg.stats_addr = optarg; break;
		case 'a': cfg.access_log = optarg; break;
		case 1: if (px_size_opt("max-line", optarg, &cfg.max_line)) goto bad; break;
		case 2: if (px_size_opt("max-head", optarg, &cfg.max_head)) goto bad; break;
		case 3: if (px_size_opt("max-headers", optarg, &cfg.max_headers)) goto bad; break;
		case 4: if (px_dur_opt("connect-timeout", optarg, &cfg.connect_timeout_ms)) goto bad; break;
		case 5: if (px_dur_opt("client-idle-timeout", optarg, &cfg.client_idle_ms)) goto bad; break;
		case 6: if (px_dur_opt("upstream-idle-timeout", optarg, &cfg.upstream_idle_ms)) goto bad; break;
		case 7: if (px_dur_opt("outlier-base-ejection", optarg, &cfg.outlier_base_ms)) goto bad; break;
		case 9: if (px_dur_opt("drain-timeout", optarg, &cfg.drain_timeout_ms)) goto bad; break;
		case 17: if (px_dur_opt("discard-time", optarg, &cfg.discard_ms)) goto bad; break;
		case 18:
			if (!strcmp(optarg, "0") ||
			    (!md_duration_ms(optarg, &cfg.stream_idle_ms) && !cfg.stream_idle_ms))
				cfg.stream_idle_ms = PX_STREAM_IDLE_OFF;	/* 0, 0s: off */
			else if (px_dur_opt("stream-idle-timeout", optarg, &cfg.stream_idle_ms))
				goto bad;
			break;
		case 10: if (px_busy_opt("--busy-poll", optarg, &cfg.busy_poll_us)) goto bad; break;
		case 11: cgroup = optarg; break;
		case 12: pin_dir = optarg; break;
		case 13: node_ip = optarg; break;
		case 14:
			if (optarg && strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "zerohop proxy: --hbone=%s: want on or off\n", optarg);
				goto bad;
			}
			hbone = !optarg || !strcmp(optarg, "on");
			hbone_flag = hbone;
			break;
		case 15: svid_opt = optarg; break;
		case 16: node_ip6 = optarg; break;
		case 8: {
			size_t v;

			if (px_size_opt("outlier-consecutive", optarg, &v) || v > 1000)
				goto bad;
			cfg.outlier_consecutive = v;
			break;
		}
		case 'h': px_usage(stdout); free(cfg.files); return 0;
		default: goto bad;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zerohop proxy: unexpected argument '%s'\n", argv[optind]);
		goto bad;
	}
	if (!cfg.state_dir && !cfg.n_files && (lab || node || getenv("ZH_LAB"))) {
		zh_state_dir(state, sizeof(state), zh_lab_name(lab));
		cfg.state_dir = state;
	}
	if (!cfg.state_dir && !cfg.n_files) {
		fprintf(stderr, "zerohop proxy: routes come from --state DIR, --lab LAB or -f FILE\n");
		goto bad;
	}
	if (hb_env && strcmp(hb_env, "1") && strcmp(hb_env, "0") && *hb_env) {
		fprintf(stderr, "zerohop proxy: ZH_PROXY_HBONE=%s: want 1 (on) or 0 (off)\n", hb_env);
		goto bad;
	}
	if (svid_opt && !hbone) {
		fprintf(stderr, "zerohop proxy: --svid-dir is for the HBONE tunnel (off: --hbone=off or ZH_PROXY_HBONE=0)\n");
		goto bad;
	}
	if ((hbone_flag || svid_opt) && cfg.service) {
		fprintf(stderr, "zerohop proxy: --hbone is for capture mode (--node, no --service)\n");
		goto bad;
	}
	if (!cfg.service && !node) {
		fprintf(stderr, "zerohop proxy: give --node NODE (capture) or --service NS/NAME "
			"(explicit)\n");
		goto bad;
	}
	if (cfg.service && !cfg.listen) {
		fprintf(stderr, "zerohop proxy: --service needs --listen ADDR:PORT\n");
		goto bad;
	}
	/* 10k+ client connections, each with an upstream */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if ((cgroup || pin_dir || node_ip) && !(cgroup && pin_dir && node_ip)) {
		fprintf(stderr, "zerohop proxy: --cgroup, --pin-dir and --node-ip go together "
			"(or none: the lab's naming)\n");
		goto bad;
	}
	if (node_ip6 && (cfg.service || !node)) {
		fprintf(stderr, "zerohop proxy: --node-ip6 is for capture mode (--node, no --service)\n");
		goto bad;
	}
	if (node && !cfg.service) {
		char pin[256], cg[512];
		struct in6_addr ip6 = IN6ADDR_ANY_INIT;
		uint32_t ip4;

		if (node_ip6 && (inet_pton(AF_INET6, node_ip6, &ip6) != 1 ||
				 IN6_IS_ADDR_UNSPECIFIED(&ip6) || IN6_IS_ADDR_V4MAPPED(&ip6))) {
			fprintf(stderr, "zerohop proxy: --node-ip6 %s: not an IPv6 address\n", node_ip6);
			goto bad;
		}

		if (node_ip) {
			/* A node of any kind: everything from the flags. */
			if (inet_pton(AF_INET, node_ip, &ip4) != 1) {
				fprintf(stderr, "zerohop proxy: --node-ip %s: not an IPv4 address\n",
					node_ip);
				goto bad;
			}
			snprintf(pin, sizeof(pin), "%s", pin_dir);
			snprintf(cg, sizeof(cg), "%s", cgroup);
		} else {
			/* A lab node: its address, pins and cgroup by the lab's naming. */
			struct lab_topo topo;
			const struct lab_node *ln;

			lab = zh_lab_name(lab);
			rc = lab_topo_read(lab, &topo);
			if (rc) {
				fprintf(stderr, "zerohop proxy: lab %s: %s (is it up? else give --cgroup, --pin-dir and --node-ip)\n",
					lab, strerror(-rc));
				goto fail;
			}
			ln = lab_topo_node(&topo, node);
			if (!ln) {
				fprintf(stderr, "zerohop proxy: --node %s: no such node in lab %s\n", node,
					lab);
				rc = -ENOENT;
				goto fail;
			}
			ip4 = ln->ip;
			if (!node_ip6)	/* a dual-stack lab's node: its fabric IPv6 */
				ip6 = ln->ip6;
			zh_pin_dir(pin, sizeof(pin), lab, node);
			lab_node_cgroup_path(cg, sizeof(cg), lab, node);
		}
		rc = px_capture_open(pin, cg, ip4, (const uint8_t *)&ip6,
				     hbone ? ZH_L7CAP_CFG_HBONE : 0, &cap);
		if (rc)
			goto fail;
		cfg.capture_fd = cap.orig_fd;
		cfg.capture = &cap;
		if (!cfg.listen) {
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &ip4, ip, sizeof(ip));
			snprintf(listen, sizeof(listen), "%s:%d", ip, PX_OUTBOUND_PORT);
			cfg.listen = listen;
		}
		if (!IN6_IS_ADDR_UNSPECIFIED(&ip6)) {
			char ip[INET6_ADDRSTRLEN];

			inet_ntop(AF_INET6, &ip6, ip, sizeof(ip));
			snprintf(listen6, sizeof(listen6), "[%s]:%d", ip, PX_OUTBOUND_PORT);
			cfg.listen6 = listen6;
		}
		if (hbone) {	/* the HBONE tunnel, on by default: docs/mtls.md */
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &ip4, ip, sizeof(ip));
			snprintf(hb_listen, sizeof(hb_listen), "%s:%d", ip, HB_PORT);
			if (svid_opt)
				snprintf(svid_dir, sizeof(svid_dir), "%s", svid_opt);
			else
				id_svid_dir(svid_dir, sizeof(svid_dir), zh_lab_name(lab), node);
			cfg.hbone_listen = hb_listen;
			cfg.svid_dir = svid_dir;
			cfg.node = node;
		}
	}
	rc = px_serve(&cfg);
fail:
	px_capture_close(&cap);
	free(cfg.files);
	return rc ? 1 : 0;
bad:
	px_usage(stderr);
	free(cfg.files);
	return 2;
}
