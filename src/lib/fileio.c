/* fileio.c — whole-file writes through a temporary and rename(2)
 * (see fileio.h for the invariants W1-W5). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerohop/fileio.h"

/* EXACT: W5 (a new temporary, fchmod()ed to MODE before any data). */
static int write_atomic(const char *path, const void *data, size_t len, mode_t mode,
			bool sync, bool exact)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd, ret = 0;

	/* W2: the PID keeps two writers' temporaries apart. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
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
	if (!ret && rename(tmp, path))	/* W1 */
		ret = -errno;
	if (ret)
		unlink(tmp);		/* W3 */
	return ret;
}

int zh_write_atomic(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	return write_atomic(path, data, len, mode, sync, false);
}

int zh_write_atomic_mode(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	return write_atomic(path, data, len, mode, sync, true);
}
