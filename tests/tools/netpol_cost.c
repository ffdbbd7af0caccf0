/* netpol_cost — kernel CPU time of the policy programs while a command runs.
 *
 *   netpol_cost PIN_DIR|LINK_PIN... -- COMMAND [ARGS...]
 *
 * Turns on BPF run-time statistics for as long as this process lives
 * (BPF_ENABLE_STATS: an fd, so the machine-wide setting goes back off by
 * itself even if we are killed; kernel.bpf_stats_enabled is not touched),
 * finds the programs behind the pinned policy links of each PIN_DIR
 * (pol_link_ingress, pol_link_egress, pol_link_connect4, pol_link_sockops,
 * pol_link_connect6:
 * exactly the lab's own programs, never another lab's; a link not pinned —
 * the per-packet pair on a node without an isolated pod — is skipped with
 * a note on stderr; an argument that is a pinned link, not a directory,
 * names just that link's program, e.g. PIN_DIR/lb_link_connect6 for
 * scripts/bench-connrate-v6.sh), reads run_cnt and run_time_ns, runs
 * COMMAND, reads them again. Prints one line per program and a total:
 *
 *	PIN_DIR/pol_link_ingress runs N ns T ns/run R
 *	total runs N ns T
 *
 * and passes COMMAND's stdout through untouched (its exit status too, or
 * 2 on a usage/setup error). The caller divides the total by the number of
 * connections COMMAND made: the policy programs' CPU per connection.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define MAX_PROGS 48

/* The policy's links (include/zerohop/policy.h pol_link_names); the
 * per-packet pair is pinned only on nodes where some pod is isolated. */
static const char *const links[] = { "pol_link_ingress", "pol_link_egress", "pol_link_connect4",
				     "pol_link_sockops", "pol_link_connect6" };

struct prog {
	char name[600];
	int fd;
	__u64 cnt0, ns0;
};

static int stats_of(int fd, __u64 *cnt, __u64 *ns)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	*cnt = info.run_cnt;
	*ns = info.run_time_ns;
	return 0;
}

int main(int argc, char **argv)
{
	struct prog progs[MAX_PROGS];
	int n = 0, sep, stats_fd, status, ret = 2;
	__u64 tcnt = 0, tns = 0;
	pid_t pid;

	for (sep = 1; sep < argc && strcmp(argv[sep], "--"); sep++)
		;
	if (sep >= argc - 1 || sep == 1) {
		fprintf(stderr, "usage: netpol_cost PIN_DIR|LINK_PIN... -- COMMAND [ARGS...]\n");
		return 2;
	}
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "netpol_cost: BPF_ENABLE_STATS: %s\n", strerror(errno));
		return 2;
	}
	for (int i = 1; i < sep; i++) {
		struct stat st;
		/* a pinned link itself (not a dir): just that program */
		bool one = stat(argv[i], &st) == 0 && !S_ISDIR(st.st_mode);
		size_t nl = one ? 1 : sizeof(links) / sizeof(links[0]);

		for (size_t l = 0; l < nl; l++) {
			struct bpf_link_info li = {};
			__u32 len = sizeof(li);
			struct prog *p = &progs[n];
			int lfd;

			if (one)
				snprintf(p->name, sizeof(p->name), "%s", argv[i]);
			else
				snprintf(p->name, sizeof(p->name), "%s/%s", argv[i], links[l]);
			lfd = bpf_obj_get(p->name);
			if (lfd < 0 && errno == ENOENT) {
				fprintf(stderr, "netpol_cost: %s: not pinned, skipped\n", p->name);
				continue;
			}
			if (lfd < 0) {
				fprintf(stderr, "netpol_cost: %s: %s\n", p->name, strerror(errno));
				goto out;
			}
			if (bpf_obj_get_info_by_fd(lfd, &li, &len)) {
				fprintf(stderr, "netpol_cost: %s: link info: %s\n", p->name,
					strerror(errno));
				close(lfd);
				goto out;
			}
			close(lfd);
			p->fd = bpf_prog_get_fd_by_id(li.prog_id);
			if (p->fd < 0 || stats_of(p->fd, &p->cnt0, &p->ns0)) {
				fprintf(stderr, "netpol_cost: %s: program %u: %s\n", p->name,
					li.prog_id, strerror(errno));
				goto out;
			}
			if (++n == MAX_PROGS) {
				fprintf(stderr, "netpol_cost: more than %d programs\n", MAX_PROGS);
				goto out;
			}
		}
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("netpol_cost: fork");
		goto out;
	}
	if (pid == 0) {
		execvp(argv[sep + 1], argv + sep + 1);
		fprintf(stderr, "netpol_cost: %s: %s\n", argv[sep + 1], strerror(errno));
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0) {
		perror("netpol_cost: waitpid");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		__u64 c = 0, ns = 0;

		if (stats_of(progs[i].fd, &c, &ns)) {
			fprintf(stderr, "netpol_cost: %s: %s\n", progs[i].name, strerror(errno));
			goto out;
		}
		c -= progs[i].cnt0;
		ns -= progs[i].ns0;
		tcnt += c;
		tns += ns;
		printf("%s runs %llu ns %llu ns/run %.1f\n", progs[i].name, (unsigned long long)c,
		       (unsigned long long)ns, c ? (double)ns / (double)c : 0.0);
	}
	printf("total runs %llu ns %llu\n", (unsigned long long)tcnt, (unsigned long long)tns);
	ret = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
out:
	for (int i = 0; i < n; i++)
		close(progs[i].fd);
	close(stats_fd);
	return ret;
}
