/* accel_bare — the bare same-node redirect, the reference zerohop's
 * short-circuit is measured against: the node's cgroup carrying a bare
 * sock_ops + sk_msg redirect and nothing else.
 *
 *   accel_bare on CGROUP PIN_DIR [4|6|46]
 *                                   load, attach to CGROUP, pin under PIN_DIR:
 *                                   the IPv4 pair (default), the native IPv6
 *                                   pair, or both (two sockhashes)
 *   accel_bare off PIN_DIR          detach and unpin both (idempotent)
 *   accel_bare stats-hold           enable kernel BPF run-time stats (run_time_ns,
 *                                   run_cnt in `bpftool prog show`) while this
 *                                   process lives; end it by its PID
 *
 * The two programs are the textbook minimum, written here as raw instructions
 * so the reference carries nothing of ours (no build step, no zerohop header):
 *
 *   sock_ops: on ACTIVE/PASSIVE_ESTABLISHED of an IPv4 socket,
 *             bpf_sock_hash_update(key = {lip, rip, lport, ntohl(rport)})
 *   sk_msg:   bpf_msg_redirect_hash(peer key = {rip, lip, ntohl(rport), lport},
 *             BPF_F_INGRESS); the normal path when the peer is not in the map
 *
 * The IPv6 pair is the same on AF_INET6 sockets, with the key
 * {lip6[4], rip6[4], lport, ntohl(rport)} (40 bytes).
 *
 * No counters, no per-socket state, no policy generation, no closing set, no
 * netns in the key (loopback keys of two pods would collide): a benchmark
 * reference, never a datapath. Pins: PIN_DIR/bare_sockhash (keeps the map and
 * the sk_msg program attached to it alive) and PIN_DIR/bare_sockops_link;
 * bare6_sockhash and bare6_sockops_link for the IPv6 pair.
 * Refuses a cgroup root, as src/agent/accel.c does.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#define INSN(c, d, s, o, i) \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define MOV_REG(d, s)	INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i)	INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i)	INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define LDX_W(d, s, o)	INSN(BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define STX_W(d, s, o)	INSN(BPF_STX | BPF_MEM | BPF_W, d, s, o, 0)
#define BSWAP32(d)	INSN(BPF_ALU | BPF_END | BPF_TO_BE, d, 0, 0, 32)	/* ntohl on LE */
#define JEQ_IMM(d, i, o) INSN(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define JNE_IMM(d, i, o) INSN(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JA(o)		INSN(BPF_JMP | BPF_JA, 0, 0, o, 0)
#define CALL(f)		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT()		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define LD_MAP(d, fd)	INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), INSN(0, 0, 0, 0, 0)

#define SO(f)	(short)offsetof(struct bpf_sock_ops, f)
#define MD(f)	(short)offsetof(struct sk_msg_md, f)

static int load_sockops(int map_fd, char *log, size_t log_len)
{
	struct bpf_insn prog[] = {
		MOV_REG(6, 1),
		LDX_W(2, 6, SO(op)),
		JEQ_IMM(2, BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB, 2),
		JEQ_IMM(2, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, 1),
		JA(18),
		LDX_W(2, 6, SO(family)),
		JNE_IMM(2, 2 /* AF_INET */, 16),
		LDX_W(2, 6, SO(local_ip4)),
		STX_W(10, 2, -16),
		LDX_W(2, 6, SO(remote_ip4)),
		STX_W(10, 2, -12),
		LDX_W(2, 6, SO(local_port)),
		STX_W(10, 2, -8),
		LDX_W(2, 6, SO(remote_port)),
		BSWAP32(2),
		STX_W(10, 2, -4),
		MOV_REG(1, 6),
		LD_MAP(2, map_fd),
		MOV_REG(3, 10),
		ADD_IMM(3, -16),
		MOV_IMM(4, BPF_ANY),
		CALL(BPF_FUNC_sock_hash_update),
		MOV_IMM(0, 1),		/* <- both jumps land here */
		EXIT(),
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = log_len, .log_level = 1);

	return bpf_prog_load(BPF_PROG_TYPE_SOCK_OPS, "bare_sockops", "GPL", prog,
			     sizeof(prog) / sizeof(prog[0]), &o);
}

static int load_msg(int map_fd, char *log, size_t log_len)
{
	struct bpf_insn prog[] = {
		MOV_REG(6, 1),
		LDX_W(2, 6, MD(remote_ip4)),
		STX_W(10, 2, -16),
		LDX_W(2, 6, MD(local_ip4)),
		STX_W(10, 2, -12),
		LDX_W(2, 6, MD(remote_port)),
		BSWAP32(2),
		STX_W(10, 2, -8),
		LDX_W(2, 6, MD(local_port)),
		STX_W(10, 2, -4),
		MOV_REG(1, 6),
		LD_MAP(2, map_fd),
		MOV_REG(3, 10),
		ADD_IMM(3, -16),
		MOV_IMM(4, BPF_F_INGRESS),
		CALL(BPF_FUNC_msg_redirect_hash),
		/* Peer not found: the helper returns SK_DROP and sets no
		 * redirect; pass the message to the normal path instead. */
		MOV_IMM(0, SK_PASS),
		EXIT(),
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = log_len, .log_level = 1,
		    .expected_attach_type = BPF_SK_MSG_VERDICT);

	return bpf_prog_load(BPF_PROG_TYPE_SK_MSG, "bare_msg", "GPL", prog,
			     sizeof(prog) / sizeof(prog[0]), &o);
}

/* The IPv6 pair, built instruction by instruction (a 40-byte key copied
 * word by word; the jumps to the exit are patched at the end). */
#define EMIT(i) (prog[n++] = (i))
#define EMIT_LD_MAP(d, fd) (prog[n++] = INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), \
			    prog[n++] = INSN(0, 0, 0, 0, 0))
#define SO6(f, i) (short)(offsetof(struct bpf_sock_ops, f) + 4 * (i))
#define MD6(f, i) (short)(offsetof(struct sk_msg_md, f) + 4 * (i))

static int load_sockops6(int map_fd, char *log, size_t log_len)
{
	struct bpf_insn prog[48];
	int n = 0, i, j, to_end[3], nj = 0;

	EMIT(MOV_REG(6, 1));
	EMIT(LDX_W(2, 6, SO(op)));
	EMIT(JEQ_IMM(2, BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB, 2));
	EMIT(JEQ_IMM(2, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, 1));
	to_end[nj++] = n;
	EMIT(JA(0));
	EMIT(LDX_W(2, 6, SO(family)));
	to_end[nj++] = n;
	EMIT(JNE_IMM(2, 10 /* AF_INET6 */, 0));
	for (i = 0; i < 4; i++) {
		EMIT(LDX_W(2, 6, SO6(local_ip6, i)));
		EMIT(STX_W(10, 2, -40 + 4 * i));
		EMIT(LDX_W(2, 6, SO6(remote_ip6, i)));
		EMIT(STX_W(10, 2, -24 + 4 * i));
	}
	EMIT(LDX_W(2, 6, SO(local_port)));
	EMIT(STX_W(10, 2, -8));
	EMIT(LDX_W(2, 6, SO(remote_port)));
	EMIT(BSWAP32(2));
	EMIT(STX_W(10, 2, -4));
	EMIT(MOV_REG(1, 6));
	EMIT_LD_MAP(2, map_fd);
	EMIT(MOV_REG(3, 10));
	EMIT(ADD_IMM(3, -40));
	EMIT(MOV_IMM(4, BPF_ANY));
	EMIT(CALL(BPF_FUNC_sock_hash_update));
	for (j = 0; j < nj; j++)	/* -> r0 = 1 */
		prog[to_end[j]].off = n - to_end[j] - 1;
	EMIT(MOV_IMM(0, 1));
	EMIT(EXIT());
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = log_len, .log_level = 1);

	return bpf_prog_load(BPF_PROG_TYPE_SOCK_OPS, "bare6_sockops", "GPL", prog, n, &o);
}

static int load_msg6(int map_fd, char *log, size_t log_len)
{
	struct bpf_insn prog[48];
	int n = 0, i;

	EMIT(MOV_REG(6, 1));
	for (i = 0; i < 4; i++) {
		EMIT(LDX_W(2, 6, MD6(remote_ip6, i)));
		EMIT(STX_W(10, 2, -40 + 4 * i));
		EMIT(LDX_W(2, 6, MD6(local_ip6, i)));
		EMIT(STX_W(10, 2, -24 + 4 * i));
	}
	EMIT(LDX_W(2, 6, MD(remote_port)));
	EMIT(BSWAP32(2));
	EMIT(STX_W(10, 2, -8));
	EMIT(LDX_W(2, 6, MD(local_port)));
	EMIT(STX_W(10, 2, -4));
	EMIT(MOV_REG(1, 6));
	EMIT_LD_MAP(2, map_fd);
	EMIT(MOV_REG(3, 10));
	EMIT(ADD_IMM(3, -40));
	EMIT(MOV_IMM(4, BPF_F_INGRESS));
	EMIT(CALL(BPF_FUNC_msg_redirect_hash));
	EMIT(MOV_IMM(0, SK_PASS));	/* peer not found: the normal path */
	EMIT(EXIT());
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = log_len, .log_level = 1,
		    .expected_attach_type = BPF_SK_MSG_VERDICT);

	return bpf_prog_load(BPF_PROG_TYPE_SK_MSG, "bare6_msg", "GPL", prog, n, &o);
}

/* One family's pair: names, key size, loaders. */
static const struct bare_family {
	const char *hash_pin, *link_pin;
	int key_size;
	int (*load_sockops)(int, char *, size_t);
	int (*load_msg)(int, char *, size_t);
} families[] = {
	{ "bare_sockhash", "bare_sockops_link", 16, load_sockops, load_msg },
	{ "bare6_sockhash", "bare6_sockops_link", 40, load_sockops6, load_msg6 },
};

static int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int bare_off(const char *dir)
{
	char p[512];
	int fd;

	for (int f = 0; f < 2; f++) {
		if (!pin_path(p, sizeof(p), dir, families[f].link_pin)) {
			fd = bpf_obj_get(p);
			if (fd >= 0) {
				bpf_link_detach(fd);
				close(fd);
			}
			unlink(p);
		}
		if (!pin_path(p, sizeof(p), dir, families[f].hash_pin))
			unlink(p);
	}
	return 0;
}

static int bare_on_family(const char *cg, const char *dir, const struct bare_family *fam)
{
	static char log[65536];
	int map_fd = -1, ops_fd = -1, msg_fd = -1, cg_fd = -1, link_fd = -1, err;
	char p[512];

	map_fd = bpf_map_create(BPF_MAP_TYPE_SOCKHASH, fam->hash_pin, fam->key_size, 8, 65536, NULL);
	if (map_fd < 0) {
		err = -errno;
		fprintf(stderr, "accel_bare: creating the sockhash: %s\n", strerror(-err));
		goto out;
	}
	ops_fd = fam->load_sockops(map_fd, log, sizeof(log));
	if (ops_fd < 0) {
		err = -errno;
		fprintf(stderr, "accel_bare: loading sock_ops: %s\n%s\n", strerror(-err), log);
		goto out;
	}
	msg_fd = fam->load_msg(map_fd, log, sizeof(log));
	if (msg_fd < 0) {
		err = -errno;
		fprintf(stderr, "accel_bare: loading sk_msg: %s\n%s\n", strerror(-err), log);
		goto out;
	}
	if (bpf_prog_attach(msg_fd, map_fd, BPF_SK_MSG_VERDICT, 0)) {
		err = -errno;
		fprintf(stderr, "accel_bare: attaching sk_msg to the sockhash: %s\n", strerror(-err));
		goto out;
	}
	cg_fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0) {
		err = -errno;
		fprintf(stderr, "accel_bare: opening %s: %s\n", cg, strerror(-err));
		goto out;
	}
	link_fd = bpf_link_create(ops_fd, cg_fd, BPF_CGROUP_SOCK_OPS, NULL);
	if (link_fd < 0) {
		err = -errno;
		fprintf(stderr, "accel_bare: attaching sock_ops to %s: %s\n", cg, strerror(-err));
		goto out;
	}
	err = pin_path(p, sizeof(p), dir, fam->hash_pin);
	if (!err && bpf_obj_pin(map_fd, p))
		err = -errno;
	if (!err)
		err = pin_path(p, sizeof(p), dir, fam->link_pin);
	if (!err && bpf_obj_pin(link_fd, p))
		err = -errno;
	if (err) {
		fprintf(stderr, "accel_bare: pinning %s: %s\n", p, strerror(-err));
		bpf_link_detach(link_fd);
		bare_off(dir);
	}
out:
	if (link_fd >= 0)
		close(link_fd);
	if (cg_fd >= 0)
		close(cg_fd);
	if (msg_fd >= 0)
		close(msg_fd);
	if (ops_fd >= 0)
		close(ops_fd);
	if (map_fd >= 0)
		close(map_fd);
	return err;
}

/* which: "4", "6" or "46". */
static int bare_on(const char *cg, const char *dir, const char *which)
{
	char p[512];
	int err = 0;

	if (strcmp(which, "4") && strcmp(which, "6") && strcmp(which, "46")) {
		fprintf(stderr, "accel_bare: expected 4, 6 or 46, got '%s'\n", which);
		return -EINVAL;
	}
	/* Never a cgroup root (it has no cgroup.events). */
	if (pin_path(p, sizeof(p), cg, "cgroup.events") || access(p, F_OK)) {
		fprintf(stderr, "accel_bare: %s is not a non-root cgroup2 directory; refusing\n", cg);
		return -EPERM;
	}
	bare_off(dir);	/* at most one reference loaded per pin dir */
	if (strchr(which, '4'))
		err = bare_on_family(cg, dir, &families[0]);
	if (!err && strchr(which, '6'))
		err = bare_on_family(cg, dir, &families[1]);
	if (err)
		bare_off(dir);
	return err;
}

/* Global kernel setting while the fd is held: keep this process short-lived. */
static int stats_hold(void)
{
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	if (fd < 0) {
		fprintf(stderr, "accel_bare: enabling BPF run-time stats: %s\n", strerror(errno));
		return -errno;
	}
	printf("ready\n");
	fflush(stdout);
	pause();	/* until killed by PID; the kernel drops the setting with the fd */
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	int err;

	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "on"))
		err = bare_on(argv[2], argv[3], argc == 5 ? argv[4] : "4");
	else if (argc == 3 && !strcmp(argv[1], "off"))
		err = bare_off(argv[2]);
	else if (argc == 2 && !strcmp(argv[1], "stats-hold"))
		err = stats_hold();
	else {
		fprintf(stderr, "usage: accel_bare on CGROUP PIN_DIR [4|6|46] | off PIN_DIR | stats-hold\n");
		return 2;
	}
	return err ? 1 : 0;
}
