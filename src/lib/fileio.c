/* fileio.c — whole-file writes through a temporary and rename(2)
 * (see fileio.h for the invariants W1-W4). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "zerohop/fileio.h"

int zh_write_atomic(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd, ret = 0;

	/* W2: the PID keeps two writers' temporaries apart. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	while (len) {
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
