/* test_fileio.c — zh_write_atomic (fileio.h, invariants W1-W4) on a real
 * file system: content and mode, replacement, no temporary left behind,
 * and a failed write (the directory is gone) that leaves nothing. W1 is
 * checked by a reader racing a writer: every read sees one whole version.
 * zh_write_atomic_mode (W5): the exact mode under a restrictive umask, a
 * planted temporary symlink not followed, and writes that fail half way
 * (file size limit, PATH a directory) leaving PATH as it was. Batches:
 * zh_write_tmp / zh_commit_tmp / zh_discard_tmp. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/fileio.h"

static int slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return (int)n;
}

/* Files in DIR whose name holds ".tmp". */
static int temporaries(const char *dir)
{
	char cmd[256], line[64];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls -a %s | grep -c '\\.tmp'", dir);
	p = popen(cmd, "r");
	if (!p || !fgets(line, sizeof(line), p))
		line[0] = 0;
	if (p)
		pclose(p);
	return atoi(line);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? (mode_t)-1 : st.st_mode & 07777;
}

/* W5 and W3 for zh_write_atomic_mode, in DIR. */
static void exact_mode(const char *dir)
{
	char path[96], tmp[128], victim[96], buf[64], big[8192];
	struct rlimit old, lim;

	snprintf(path, sizeof(path), "%s/key", dir);
	umask(077);
	is_int(zh_write_atomic(path, "k\n", 2, 0644, false), 0, "umask 077: plain write");
	is_int((int)mode_of(path), 0600, "plain write: the umask took 0044 away");
	is_int(zh_write_atomic_mode(path, "k\n", 2, 0644, true), 0, "umask 077: exact write");
	is_int((int)mode_of(path), 0644, "exact write: mode 0644 exactly");
	umask(0277);
	is_int(zh_write_atomic_mode(path, "key\n", 4, 0600, false), 0, "umask 0277: exact 0600");
	is_int((int)mode_of(path), 0600, "mode 0600, owner may write despite the umask");
	is_str((slurp(path, buf, sizeof(buf)), buf), "key\n", "content");
	umask(022);

	/* W5: a temporary someone planted (a symlink) is not written through. */
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	ok(!symlink(victim, tmp), "planted symlink at the temporary's name");
	is_int(zh_write_atomic_mode(path, "new\n", 4, 0600, false), 0, "exact write over it");
	ok(access(victim, F_OK) != 0, "the symlink's target was not created");
	is_str((slurp(path, buf, sizeof(buf)), buf), "new\n", "PATH has the new content");
	is_int(temporaries(dir), 0, "no temporary left");

	/* W3: a write that fails half way (file size limit) leaves PATH. */
	memset(big, 'x', sizeof(big));
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = 4096;
	signal(SIGXFSZ, SIG_IGN);
	ok(!setrlimit(RLIMIT_FSIZE, &lim), "file size limit 4096");
	is_int(zh_write_atomic_mode(path, big, sizeof(big), 0644, true), -EFBIG,
	       "8192 bytes over the limit: -EFBIG");
	is_int(zh_write_atomic(path, big, sizeof(big), 0644, true), -EFBIG,
	       "plain write too: -EFBIG");
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	is_str((slurp(path, buf, sizeof(buf)), buf), "new\n", "PATH unchanged");
	is_int((int)mode_of(path), 0600, "its mode unchanged");
	is_int(temporaries(dir), 0, "no temporary left");

	/* W3: the rename fails (PATH is a non-empty directory). */
	snprintf(path, sizeof(path), "%s/d", dir);
	snprintf(tmp, sizeof(tmp), "%s/d/in", dir);
	mkdir(path, 0755);
	close(open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	ok(zh_write_atomic_mode(path, "x", 1, 0600, false) < 0, "PATH a directory: fails");
	ok(access(tmp, F_OK) == 0 && (mode_of(path) & 0777) == 0755, "the directory is as it was");
	is_int(temporaries(dir), 0, "no temporary left");
	unlink(tmp);
	rmdir(path);
	unlink(victim);
	snprintf(path, sizeof(path), "%s/key", dir);
	unlink(path);
}

/* Batches (zh_write_tmp, one sync, zh_commit_tmp / zh_discard_tmp): PATH
 * is untouched until its commit, a discarded temporary leaves nothing, a
 * commit with no temporary fails and leaves PATH as it was. */
static void batch(const char *dir)
{
	char p1[96], p2[96], buf[64];

	snprintf(p1, sizeof(p1), "%s/b1", dir);
	snprintf(p2, sizeof(p2), "%s/b2", dir);
	is_int(zh_write_atomic(p1, "old1\n", 5, 0644, false), 0, "batch: b1 exists");
	is_int(zh_write_tmp(p1, "new1\n", 5, 0644, false), 0, "batch: b1's temporary");
	is_int(zh_write_tmp(p2, "new2\n", 5, 0600, true), 0, "batch: b2's temporary (fsync)");
	is_int(temporaries(dir), 2, "batch: two temporaries");
	is_str((slurp(p1, buf, sizeof(buf)), buf), "old1\n", "batch: b1 unchanged before its commit");
	ok(access(p2, F_OK) != 0, "batch: b2 absent before its commit");
	is_int(zh_commit_tmp(p1), 0, "batch: commit b1");
	is_str((slurp(p1, buf, sizeof(buf)), buf), "new1\n", "batch: b1 replaced");
	zh_discard_tmp(p2);
	ok(access(p2, F_OK) != 0 && temporaries(dir) == 0, "batch: b2 discarded, no temporary left");
	is_int(zh_commit_tmp(p1), -ENOENT, "batch: a commit with no temporary fails");
	is_str((slurp(p1, buf, sizeof(buf)), buf), "new1\n", "batch: and leaves b1 as it was");
	unlink(p1);
}

int main(void)
{
	char dir[] = "/tmp/zh-fileio.XXXXXX", path[96], buf[8192], a[4096], b[4096];
	struct stat st;
	int torn = 0, reads = 0;
	pid_t pid;

	ok(mkdtemp(dir) != NULL, "temp dir");
	snprintf(path, sizeof(path), "%s/f", dir);
	umask(022);
	is_int(zh_write_atomic(path, "one\n", 4, 0600, false), 0, "write a new file");
	is_int(slurp(path, buf, sizeof(buf)), 4, "4 bytes");
	is_str(buf, "one\n", "content");
	ok(!stat(path, &st) && (st.st_mode & 0777) == 0600, "mode 0600 as asked");
	is_int(zh_write_atomic(path, "second\n", 7, 0644, true), 0, "replace it (fsync)");
	is_str((slurp(path, buf, sizeof(buf)), buf), "second\n", "new content");
	is_int(zh_write_atomic(path, "", 0, 0644, false), 0, "an empty file");
	is_int(slurp(path, buf, sizeof(buf)), 0, "0 bytes");
	is_int(temporaries(dir), 0, "no temporary left");

	batch(dir);

	/* W1: a reader never sees a mix of two versions or an empty file. */
	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	zh_write_atomic(path, a, sizeof(a), 0644, false);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 2000; i++)
			zh_write_atomic(path, i & 1 ? a : b, sizeof(a), 0644, false);
		_exit(0);
	}
	while (waitpid(pid, NULL, WNOHANG) == 0) {
		int n = slurp(path, buf, sizeof(buf));

		reads++;
		if (n != (int)sizeof(a) || (memcmp(buf, a, n) && memcmp(buf, b, n)))
			torn++;
	}
	ok(reads > 0, "reader ran beside the writer (%d reads)", reads);
	is_int(torn, 0, "no read saw a torn or empty file");

	exact_mode(dir);

	/* W3: a failure leaves nothing: the directory is gone. */
	unlink(path);
	rmdir(dir);
	is_int(zh_write_atomic(path, "x", 1, 0644, false), -ENOENT, "no directory: -ENOENT");
	ok(access(dir, F_OK) != 0, "nothing created");
	return done_testing();
}
