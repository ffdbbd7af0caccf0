/* doctor.c — `zerohop doctor`: is this machine ready for zerohop?
 *
 * One line per item, in the order a first run needs them: the kernel and
 * its BPF features, the filesystems zerohop mounts when they are missing,
 * namespaces, the commands the lab, the demo and the benchmarks run. Each
 * line is "ok", "note" (fine, but worth knowing: what zerohop will do about
 * it), "warn" (only some features are affected) or "FAIL" with the fix.
 * Exit status 0 only when nothing needed by `make demo` failed.
 *
 * The doctor changes nothing on the machine: every probe that loads a BPF
 * program or creates a namespace does it in a short-lived child or a
 * throw-away object, never attached anywhere (the lab's safety rule: BPF only on
 * cgroups the lab made).
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "zerohop/cli.h"
#include "zerohop/json.h"
#include "zerohop/mounts.h"

enum verdict { V_OK, V_NOTE, V_WARN, V_FAIL };

struct doctor {
	bool json;
	int n[4];		/* lines per verdict */
	int lines;
};

static const char *const verdict_word[] = { "ok", "note", "warn", "FAIL" };

/* One result line: WHAT, what was found, and (not ok) the fix. */
static void say(struct doctor *d, enum verdict v, const char *what, const char *fix,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void say(struct doctor *d, enum verdict v, const char *what, const char *fix,
		const char *fmt, ...)
{
	char found[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(found, sizeof(found), fmt, ap);
	va_end(ap);
	d->n[v]++;
	if (d->json) {
		printf("%s{\"check\":", d->lines++ ? "," : "");
		json_put_str(stdout, what);
		printf(",\"verdict\":\"%s\",\"found\":", verdict_word[v]);
		json_put_str(stdout, found);
		printf(",\"fix\":");
		if (fix && v != V_OK)
			json_put_str(stdout, fix);
		else
			printf("null");
		printf("}");
		return;
	}
	printf("  %-5s %-28s %s", verdict_word[v], what, found);
	if (fix && v != V_OK)
		printf("\n  %-5s %-28s fix: %s", "", "", fix);
	putchar('\n');
}

/* ---- kernel ---------------------------------------------------------------- */

static void check_kernel(struct doctor *d)
{
	struct utsname u;
	int major = 0, minor = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &major, &minor);
	if (major < 5 || (major == 5 && minor < 10))
		say(d, V_FAIL, "kernel", "a kernel of 5.10 or newer (Debian 12 ships 6.1)",
		    "%s: connect/sendmsg/getpeername hooks and sk_msg need 5.10+", u.release);
	else if (major == 5 || (major == 6 && minor < 5))
		say(d, V_WARN, "kernel", "6.5 or newer for --destroy-stale",
		    "%s (6.5+ is needed only for agent --destroy-stale)", u.release);
	else
		say(d, V_OK, "kernel", NULL, "%s", u.release);
}

static void check_root(struct doctor *d)
{
	if (geteuid() == 0)
		say(d, V_OK, "root", NULL, "running as root");
	else
		say(d, V_FAIL, "root", "run as root (sudo): BPF, namespaces and cgroups need it",
		    "running as uid %d", (int)geteuid());
}

/* The kernel's own build config, when it can be read: names the option a
 * failing probe below is missing. */
static void check_kconfig(struct doctor *d)
{
	static const char *const want[] = {
		"CONFIG_BPF_SYSCALL", "CONFIG_CGROUP_BPF", "CONFIG_BPF_STREAM_PARSER",
		"CONFIG_NET_CLS_ACT", "CONFIG_VETH", "CONFIG_NET_NS",
	};
	struct utsname u;
	char path[300], line[256], missing[256] = "";
	bool have[sizeof(want) / sizeof(want[0])] = { false };
	FILE *f;

	uname(&u);
	snprintf(path, sizeof(path), "/boot/config-%s", u.release);
	f = fopen(path, "re");
	if (!f) {
		say(d, V_NOTE, "kernel config", NULL,
		    "%s not readable; the feature probes below decide", path);
		return;
	}
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			size_t n = strlen(want[i]);

			if (!strncmp(line, want[i], n) && line[n] == '=' &&
			    (line[n + 1] == 'y' || line[n + 1] == 'm'))
				have[i] = true;
		}
	fclose(f);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!have[i])
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s",
				 want[i]);
	if (missing[0])
		say(d, V_FAIL, "kernel config", "a kernel built with these options", "%s lacks%s",
		    path, missing);
	else
		say(d, V_OK, "kernel config", NULL, "%s has the BPF, cgroup and netns options", path);
}

static void check_prog(struct doctor *d, enum bpf_prog_type t, const char *name,
		       const char *used_for, enum verdict if_missing)
{
	int r = libbpf_probe_bpf_prog_type(t, NULL);

	if (r == 1)
		say(d, V_OK, name, NULL, "loads (%s)", used_for);
	else
		say(d, if_missing, name, "a kernel with this BPF program type",
		    "%s (%s)", r == 0 ? "not supported" : strerror(-r), used_for);
}

static void check_map(struct doctor *d, enum bpf_map_type t, const char *name,
		      const char *used_for)
{
	int r = libbpf_probe_bpf_map_type(t, NULL);

	if (r == 1)
		say(d, V_OK, name, NULL, "creates (%s)", used_for);
	else
		say(d, V_FAIL, name, "a kernel with this BPF map type", "%s (%s)",
		    r == 0 ? "not supported" : strerror(-r), used_for);
}

static void check_bpf(struct doctor *d)
{
	check_prog(d, BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "bpf cgroup/sock_addr",
		   "Service translation at connect, sendmsg, recvmsg, getpeername", V_FAIL);
	check_prog(d, BPF_PROG_TYPE_SOCK_OPS, "bpf sock_ops", "short-circuit, policy per connection",
		   V_FAIL);
	check_prog(d, BPF_PROG_TYPE_SK_MSG, "bpf sk_msg", "same-node short-circuit", V_FAIL);
	check_prog(d, BPF_PROG_TYPE_CGROUP_SKB, "bpf cgroup_skb", "NetworkPolicy per packet",
		   V_FAIL);
	check_prog(d, BPF_PROG_TYPE_CGROUP_SOCKOPT, "bpf cgroup/sockopt",
		   "short-circuit bookkeeping", V_FAIL);
	check_map(d, BPF_MAP_TYPE_SOCKHASH, "bpf sockhash", "same-node short-circuit");
	check_map(d, BPF_MAP_TYPE_LPM_TRIE, "bpf lpm_trie", "NetworkPolicy ipBlock");
	check_map(d, BPF_MAP_TYPE_ARRAY_OF_MAPS, "bpf array_of_maps", "policy tables flip");
	check_map(d, BPF_MAP_TYPE_SK_STORAGE, "bpf sk_storage", "per-socket policy state");
	if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
		say(d, V_OK, "BTF", NULL, "/sys/kernel/btf/vmlinux present");
	else
		say(d, V_WARN, "BTF", "a kernel built with CONFIG_DEBUG_INFO_BTF",
		    "/sys/kernel/btf/vmlinux missing (needed by iter/tcp: --destroy-stale, and by the "
		    "short-circuit's half-close FIN hold: use --accel off)");
}

/* ---- filesystems and namespaces -------------------------------------------- */

static bool fs_known(const char *type)
{
	char line[128], name[64];
	FILE *f = fopen("/proc/filesystems", "re");
	bool found = false;

	/* lines are "nodev\tbpf" or "\text4": the type is the last word */
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *w = strrchr(line, '\t');

		found = sscanf(w ? w + 1 : line, "%63s", name) == 1 && !strcmp(name, type);
	}
	if (f)
		fclose(f);
	return found;
}

static void check_bpffs(struct doctor *d)
{
	if (zh_is_bpffs(ZH_BPFFS))
		say(d, V_OK, "bpffs", NULL, "mounted at %s", ZH_BPFFS);
	else if (!fs_known("bpf"))
		say(d, V_FAIL, "bpffs", "a kernel with the bpf filesystem (CONFIG_BPF_SYSCALL)",
		    "the kernel has no 'bpf' filesystem type");
	else
		say(d, V_NOTE, "bpffs", "mount -t bpf bpf " ZH_BPFFS " (or let the agent do it)",
		    "not mounted at %s: zerohop agent mounts it when it starts", ZH_BPFFS);
}

static void check_cgroup2(struct doctor *d)
{
	char mp[512];

	if (zh_cgroup2_find(mp, sizeof(mp)) == 0)
		say(d, V_OK, "cgroup2", NULL, "mounted at %s", mp);
	else if (!fs_known("cgroup2"))
		say(d, V_FAIL, "cgroup2", "a kernel with cgroup v2 (CONFIG_CGROUPS)",
		    "the kernel has no 'cgroup2' filesystem type");
	else
		say(d, V_NOTE, "cgroup2", "mount -t cgroup2 none " ZH_CGROUP2_OWN,
		    "no cgroup2 hierarchy mounted: zerohop lab mounts one at %s", ZH_CGROUP2_OWN);
}

/* Namespaces the lab makes, tried in a child that exits at once. */
static void check_namespaces(struct doctor *d)
{
	pid_t pid = fork();
	int st = 0;

	if (pid == 0)
		_exit(unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS) ? 1 : 0);
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		say(d, V_FAIL, "namespaces", "run as root on a kernel with network namespaces",
		    "unshare(net, uts, mnt) failed");
	else
		say(d, V_OK, "namespaces", NULL, "network, UTS and mount namespaces can be made");
}

static void check_run_dir(struct doctor *d)
{
	if (access("/run", W_OK) == 0)
		say(d, V_OK, "/run", NULL, "writable (lab state under /run/zerohop)");
	else
		say(d, V_FAIL, "/run", "a writable /run (tmpfs)", "not writable: %s", strerror(errno));
}

static void check_port_range(struct doctor *d)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
	int lo = 0, hi = 0;

	if (!f || fscanf(f, "%d %d", &lo, &hi) != 2) {
		if (f)
			fclose(f);
		say(d, V_WARN, "local port range", NULL, "cannot read ip_local_port_range");
		return;
	}
	fclose(f);
	/* Lab namespaces start with the kernel default; this is the host's,
	 * used by the loopback benchmarks. */
	if (hi - lo < 10000)
		say(d, V_WARN, "local port range",
		    "sysctl -w net.ipv4.ip_local_port_range='15000 65000' (loopback benchmarks)",
		    "%d-%d: fewer than 10,000 ephemeral ports", lo, hi);
	else
		say(d, V_OK, "local port range", NULL, "%d-%d", lo, hi);
}

static void check_io_uring(struct doctor *d)
{
	FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
	int v = 0;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	if (v == 2)
		say(d, V_NOTE, "io_uring", "sysctl -w kernel.io_uring_disabled=0",
		    "disabled: the node proxy batches with one send/recv call each instead");
	else
		say(d, V_OK, "io_uring", NULL, "available (node proxy batches its socket I/O)");
}

/* ---- commands ---------------------------------------------------------------- */

struct tool {
	const char *cmd;
	const char *pkg;	/* Debian package that has it */
	const char *used_for;
	bool needed;		/* by `make demo` (else: benchmarks, some tests) */
};

static const struct tool tools[] = {
	{ "ip", "iproute2", "lab namespaces, veths and routes", true },
	{ "nft", "nftables", "the kube-proxy-style baseline (--service-proxy nft)", true },
	{ "curl", "curl", "the tour and the demo's clients", true },
	{ "jq", "jq", "the tour and the demo", true },
	{ "nginx", "nginx-light", "the demo's front end (Kmesh experiment)", true },
	{ "iperf3", "iperf3", "the demo's Calico/Flannel experiment", true },
	{ "nsenter", "util-linux", "entering node namespaces", true },
	{ "prove", "perl", "make check's test runner", false },
	{ "haproxy", "haproxy", "proxy benchmarks (the HAProxy contender)", false },
	{ "wrk", "wrk", "load generator benchmarks (the wrk contender)", false },
	{ "clang", "clang", "building the BPF objects", false },
	{ "bpftool", "bpftool", "building the BPF skeletons", false },
};

static bool on_path(const char *cmd, char *found, size_t len)
{
	const char *path = getenv("PATH");
	char dir[4096];

	if (!path)
		return false;
	while (*path) {
		size_t n = strcspn(path, ":");

		snprintf(dir, sizeof(dir), "%.*s/%s", (int)n, path, cmd);
		if (n && access(dir, X_OK) == 0) {
			snprintf(found, len, "%s", dir);
			return true;
		}
		path += n + (path[n] == ':');
	}
	return false;
}

static void check_tools(struct doctor *d)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		const struct tool *t = &tools[i];
		char found[4096], fix[128], what[64];

		snprintf(what, sizeof(what), "command %s", t->cmd);
		snprintf(fix, sizeof(fix), "apt-get install %s (or: make deps)", t->pkg);
		if (on_path(t->cmd, found, sizeof(found)))
			say(d, V_OK, what, NULL, "%s", found);
		else
			say(d, t->needed ? V_FAIL : V_WARN, what, fix, "not found on PATH (%s)",
			    t->used_for);
	}
	/* Tests and tools that need Debian's Python modules call this one
	 * (python3 on PATH may be a private interpreter without them). */
	if (access("/usr/bin/python3", X_OK) == 0)
		say(d, V_OK, "/usr/bin/python3", NULL, "present");
	else
		say(d, V_WARN, "/usr/bin/python3", "apt-get install python3 (or: make deps)",
		    "missing (tests and the client matrix use Debian's Python)");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: zerohop doctor [-o json]\n"
		   "Checks this machine for what zerohop needs; exit status 0 when `make demo`\n"
		   "can run (notes and warnings do not fail it).\n");
}

int cli_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct doctor d = { 0 };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (strcmp(optarg, "json")) {
				fprintf(stderr, "zerohop doctor: -o: only 'json' is supported, got '%s'\n",
					optarg);
				return 2;
			}
			d.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zerohop doctor: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	libbpf_set_print(NULL);	/* probes that fail are reported here, not by libbpf */
	if (d.json)
		printf("{\"checks\":[");
	else
		printf("zerohop doctor: what this machine has for zerohop\n");
	check_root(&d);
	check_kernel(&d);
	check_kconfig(&d);
	if (geteuid() == 0) {
		check_bpf(&d);
		check_namespaces(&d);
	}
	check_bpffs(&d);
	check_cgroup2(&d);
	check_run_dir(&d);
	check_port_range(&d);
	check_io_uring(&d);
	check_tools(&d);
	if (d.json) {
		printf("],\"ok\":%d,\"notes\":%d,\"warnings\":%d,\"failed\":%d}\n", d.n[V_OK],
		       d.n[V_NOTE], d.n[V_WARN], d.n[V_FAIL]);
	} else {
		printf("%d checks: %d ok, %d notes, %d warnings, %d failed\n",
		       d.n[V_OK] + d.n[V_NOTE] + d.n[V_WARN] + d.n[V_FAIL], d.n[V_OK], d.n[V_NOTE],
		       d.n[V_WARN], d.n[V_FAIL]);
		printf("%s\n", d.n[V_FAIL] ? "not ready: fix the FAIL lines above (make deps installs the packages)"
					   : "ready for make demo");
	}
	return d.n[V_FAIL] ? 1 : 0;
}
