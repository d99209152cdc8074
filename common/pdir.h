/* The entries of a small directory (a /proc listing, mostly) read with
 * getdents64 into a buffer of the caller's: no stdio DIR.  opendir adds an
 * fstat and fdopendir two fcntl calls to every listing, and the server
 * lists a session's tasks and descriptors several times per call: about
 * thirty system calls of a warm call's two hundred and fifty. */
#ifndef PSM_COMMON_PDIR_H
#define PSM_COMMON_PDIR_H

#include <stdbool.h>
#include <sys/types.h>

#include "pstat.h"

struct pdir {
	int fd;     /* the directory, for *at() calls on its entries; -1 for
		     * the one thread of pdir_open_tasks (no directory opened:
		     * its entries are read by path) */
	int err;    /* 0, or the errno of a failed read (the listing stopped) */
	long len, off;
	char one[24]; /* pdir_open_tasks: the one entry not yet returned */
	char path[64]; /* the absolute path it was opened at, or "" (pdir_read) */
	bool has_ps;  /* pdir_open_tasks' one thread: ps is the process's stat */
	char ps_name[24]; /* ... and that thread's name */
	struct pstat ps;
	char buf[2048] __attribute__((aligned(8)));
};

/* Opens path (relative to dirfd, or AT_FDCWD): 0, or -errno. */
int pdir_open(struct pdir *d, int dirfd, const char *path);

/* The same relative to dirfd, which was opened at the absolute path dir:
 * the listing's path (for pdir_read) is dir/path. */
int pdir_open_in(struct pdir *d, int dirfd, const char *dir, const char *path);

/* The threads of the process whose /proc directory is procdir (an
 * absolute path; procfd open at it, or -1): its task directory, the same
 * as pdir_open_in(d, procfd, procdir, "task"), except when the process's
 * stat (read through a kept descriptor, pcache.h) says it has one thread
 * and has not exited.  Then the listing is that thread, the process
 * itself, and no directory is opened: a listing costs an open, two
 * getdents and a close (four of the ~190 system calls of a warm call, done
 * nine times a call), the stat one pread.  One thread is the leader: a
 * leader that exits before its other threads stays counted in
 * num_threads, and listed, until the last of them has exited too.  A
 * thread made after the stat is missed, as one made after a getdents is;
 * callers that judge a stopped process see none made.  0, or -errno. */
int pdir_open_tasks(struct pdir *d, int procfd, const char *procdir);

/* When the listing is pdir_open_tasks' one thread and tid is its name:
 * true, with out the process's stat as the listing read it (or was given
 * it), which stands for that thread's own: the state and CPU of its one
 * thread, whose times it sums with those of threads that have exited
 * (never fewer).  A caller reading "tid/stat" right after has it without
 * a second read.  False otherwise. */
bool pdir_one_stat(const struct pdir *d, const char *tid, struct pstat *out);

/* The same, with seen the process's stat as the caller has just read it
 * (procdir/stat, through pstat_read_kept): the caller's read stands for
 * the one above instead of a second one microseconds later.  NULL: read
 * it here. */
struct pstat;
int pdir_open_tasks_seen(struct pdir *d, int procfd, const char *procdir, const struct pstat *seen);

/* The same for a directory already open (fd, owned from now on). */
void pdir_adopt(struct pdir *d, int fd);

/* Reads the small file rel below the directory (read_small_at), through a
 * descriptor kept from the last read of the same path when the directory
 * was opened by an absolute path (pcache.h); by that path when no
 * directory was opened (pdir_open_tasks). */
ssize_t pdir_read(const struct pdir *d, const char *rel, char *buf, size_t cap);

/* The next entry's name, "." and ".." left out; NULL at the end or on an
 * error (then d->err says which). */
const char *pdir_next(struct pdir *d);

void pdir_close(struct pdir *d);

#endif
