/* /proc/PID/stat, read and parsed in one place.  The command name (field
 * 2) is the process's to choose (prctl PR_SET_NAME): it may hold spaces,
 * parentheses and digits, so the fields are taken after the last ')',
 * never counted from the start of the line. */
#ifndef PSM_COMMON_PSTAT_H
#define PSM_COMMON_PSTAT_H

#include <stdbool.h>
#include <sys/types.h>

struct pstat {
	char state;                      /* field 3: R, S, D, T, t, Z, X, ... */
	pid_t ppid;                      /* 4 */
	unsigned long flags;             /* 9: the kernel's PF_* */
	unsigned long long minflt, cminflt, majflt, cmajflt; /* 10 to 13: page faults, its own and its reaped children's */
	unsigned long long utime, stime; /* 14, 15: clock ticks */
	long long cutime, cstime;        /* 16, 17: of the children it waited for */
	long num_threads;                /* 20 */
	unsigned long long start;        /* 22: clock ticks after boot */
	long long rss;                   /* 24: resident pages; 0 when the line stops before */
	int processor;                   /* 39: the CPU it last ran on; -1 when the line stops before */
	int exit_code;                   /* 52: the wait status of a zombie; -1 when the line stops before */
};

/* Whether the process is gone (a zombie, or being reaped): state Z or X
 * with no other thread running on.  A process whose first thread exited
 * while others run on shows Z too (the kernel shows the leader's state),
 * its num_threads counting the leader and the threads still running, and
 * it runs code.  Attack: a cell's child that ends its first thread with
 * the raw exit system call and works on in another was taken for a
 * zombie: the server's sweeps left it running between calls and its
 * memory was never counted. */
static inline bool pstat_gone(const struct pstat *ps)
{
	return (ps->state == 'Z' || ps->state == 'X') && ps->num_threads <= 1;
}

/* Whether the process is such a one: its first thread exited, others run
 * on.  Its own /proc files show no memory and no descriptors then; a
 * running thread's task directory shows them (procs_live_task). */
static inline bool pstat_headless(const struct pstat *ps)
{
	return (ps->state == 'Z' || ps->state == 'X') && !pstat_gone(ps);
}

/* The text of a stat file, NUL-terminated: 0, or -EINVAL when it does not
 * parse as far as field 22. */
int pstat_parse(const char *text, struct pstat *out);

/* Reads path (relative to dirfd when dirfd >= 0) and parses it: 0, -errno
 * when it cannot be read (-ENOENT: the process is gone), -EINVAL. */
int pstat_read(int dirfd, const char *path, struct pstat *out);

/* The same through a descriptor kept from the last read of the same path
 * (pcache.h): rel relative to dirfd, opened at the absolute path dir (or
 * AT_FDCWD, NULL and an absolute rel). */
int pstat_read_kept(int dirfd, const char *dir, const char *rel, struct pstat *out);

#endif
