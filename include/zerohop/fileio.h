/* fileio.h — whole-file writes that readers never see half done
 * (prefix zh_).
 *
 * Files other processes read while we write them (a daemon's health file,
 * the lab's topology and pod records, the CNI plugin's IPAM records) are
 * replaced, never rewritten in place:
 *
 *	PATH.tmp.PID  --write all, [fsync]-->  rename(2) onto PATH
 *
 * Invariants:
 *   W1  A reader sees the whole old PATH or the whole new one: rename(2)
 *       within one directory is atomic.
 *   W2  Two processes writing the same PATH at once do not share a
 *       temporary (the PID is in its name); the last rename wins.
 *   W3  On any failure PATH is unchanged and the temporary is gone.
 *   W4  Temporaries contain ".tmp", so directory scanners skip them
 *       (cni_rec_each does).
 *   W5  zh_write_atomic_mode only: PATH gets exactly MODE whatever the
 *       umask, and its content is never readable under a wider mode, not
 *       even for a moment: the temporary is a new file (a stale one left by
 *       a dead process with our PID is removed first; O_EXCL, so never a
 *       file or symlink someone else put there) and is fchmod()ed to MODE
 *       before the first byte is written. For keys and certificates.
 */
#ifndef ZH_FILEIO_H
#define ZH_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Replace PATH with DATA[0, LEN), created with MODE (umask applies).
 * SYNC: fsync the data before the rename (what must survive a power cut,
 * not what dies with the machine's /run). 0 or -errno. */
int zh_write_atomic(const char *path, const void *data, size_t len, mode_t mode, bool sync);

/* As zh_write_atomic, but PATH ends with exactly MODE (W5): the umask
 * does not apply. 0 or -errno. */
int zh_write_atomic_mode(const char *path, const void *data, size_t len, mode_t mode, bool sync);

/* Batches: the two halves of zh_write_atomic, for a writer that replaces
 * many files with ONE sync between (the state directory's apply: every
 * temporary, one syncfs, every rename; src/state/ss_dir.c), where a sync
 * per file would cost one disk flush each. zh_write_tmp writes PATH's
 * temporary (W2, W4; SYNC as above; on failure nothing is left, W3) and
 * leaves it for zh_commit_tmp, which renames it onto PATH (W1; on failure
 * the temporary is removed). zh_discard_tmp removes a temporary that will
 * not be committed. 0 or -errno. */
int zh_write_tmp(const char *path, const void *data, size_t len, mode_t mode, bool sync);
/* As zh_write_tmp, with W5's exact MODE (a key and its certificate written
 * as a pair: both temporaries first, then two renames back to back). */
int zh_write_tmp_mode(const char *path, const void *data, size_t len, mode_t mode, bool sync);
int zh_commit_tmp(const char *path);
void zh_discard_tmp(const char *path);

#endif
