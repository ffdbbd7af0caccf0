/* fileio.c — whole-file writes through a temporary and rename(2)
 * (see fileio.h for the invariants W1-W5). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerohop/fileio.h"

/* PATH's temporary (W2: the PID keeps two writers' temporaries apart;
 * W4: ".tmp" in the name). */
static int tmp_name(char *tmp, size_t len, const char *path)
{
	if ((size_t)snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid()) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* Write PATH's temporary. EXACT: W5 (a new temporary, fchmod()ed to MODE
 * before any data). On failure the temporary is gone (W3). */
static int write_tmp(const char *path, const void *data, size_t len, mode_t mode, bool sync,
		     bool exact)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd, ret;

	ret = tmp_name(tmp, sizeof(tmp), path);
	if (ret)
		return ret;
	if (exact)
		unlink(tmp);	/* W5: a dead process's stale temporary */
	fd = open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC | (exact ? O_EXCL : O_TRUNC), mode);
	if (fd < 0)
		return -errno;
	if (exact && fchmod(fd, mode))	/* W5: the umask took bits away; never adds */
		ret = -errno;
	while (!ret && len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	if (!ret && sync && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		unlink(tmp);		/* W3 */
	return ret;
}

int zh_commit_tmp(const char *path)
{
	char tmp[PATH_MAX];
	int ret = tmp_name(tmp, sizeof(tmp), path);

	if (ret)
		return ret;
	if (rename(tmp, path)) {	/* W1 */
		ret = -errno;
		unlink(tmp);		/* W3 */
	}
	return ret;
}

void zh_discard_tmp(const char *path)
{
	char tmp[PATH_MAX];

	if (!tmp_name(tmp, sizeof(tmp), path))
		unlink(tmp);
}

int zh_write_tmp(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	return write_tmp(path, data, len, mode, sync, false);
}

int zh_write_tmp_mode(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	return write_tmp(path, data, len, mode, sync, true);
}

static int write_atomic(const char *path, const void *data, size_t len, mode_t mode,
			bool sync, bool exact)
{
	int ret = write_tmp(path, data, len, mode, sync, exact);

	return ret ? ret : zh_commit_tmp(path);
}

int zh_write_atomic(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	return write_atomic(path, data, len, mode, sync, false);
}

int zh_write_atomic_mode(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	return write_atomic(path, data, len, mode, sync, true);
}
