/* Small /proc files the server reads on every call (a session's stat,
 * status and io, its threads' stat, schedstat and children, its
 * descriptors' fdinfo), read through a descriptor kept open since the
 * first read of the same path: one pread instead of openat, read and
 * close.  On this project's 2-core VM an open, read and close of
 * /proc/PID/stat costs about 10 us and a pread of a kept one 4 us; a warm
 * call with checkpoints on reads about forty such files.
 *
 * A kept descriptor names the task its path named when it was opened (a
 * /proc file holds its task's struct pid, not the number).  Read while
 * that task lives, it is the task the path names now: a pid is not given
 * to another task while its holder exists, zombie included.  Once the
 * task is gone its files fail (ESRCH) or read empty (children), and
 * either is dropped and read again through the path, exactly as an
 * uncached read does.  So a cached read returns what an uncached read
 * could have returned at that moment, or the uncached read itself. */
#ifndef PSM_COMMON_PCACHE_H
#define PSM_COMMON_PCACHE_H

#include <sys/types.h>

/* Reads rel, relative to the directory dirfd, into buf (at most cap - 1
 * bytes, NUL-terminated), in one read as read_small_at does.  dir is the
 * absolute path dirfd was opened at (AT_FDCWD with rel absolute: NULL or
 * ""; dirfd -1: no directory open, dir/rel read by path), the key under
 * which the descriptor is kept; a read that fails or
 * is empty keeps none, and so does a path not under /proc/.  The bytes
 * read, or -errno. */
ssize_t pcache_read(int dirfd, const char *dir, const char *rel, char *buf, size_t cap);

/* Writes data to the /proc file path (clear_refs) at offset 0, through a
 * descriptor kept open for writing since the first write of the same path,
 * under the same argument as reads: a kept descriptor names its task, and
 * fails once that task is gone (then the path is opened again).  The bytes
 * written, or -errno. */
ssize_t pcache_write(const char *path, const char *data, size_t len);

/* Closes every kept descriptor (a test's clean state; the server keeps
 * them for its life, at most PCACHE_MAX). */
void pcache_clear(void);

/* How many are kept now. */
int pcache_count(void);

#define PCACHE_MAX 96

#endif
