/* What one execute_python call used (CPU time, peak memory), measured from
 * the trusted side in /proc: the session cannot fake what the kernel says
 * about it. */
#ifndef SUPERVISOR_USAGE_H
#define SUPERVISOR_USAGE_H

#include <stdbool.h>
#include <sys/types.h>

struct usage {
	bool begun, ended;
	bool known;          /* cpu_ms and peak_mb hold a measurement */
	bool peak_reset;     /* the high-water mark was reset at the start */
	double cpu_start_ms; /* the session's tree at the start */
	double cpu_ms;       /* used during the call */
	double peak_mb;      /* highest resident memory during the call */
};

/* The pid, in this process's pid namespace, of the process behind a pidfd
 * (from /proc/self/fdinfo); -1 when it has exited or cannot be read. */
pid_t pidfd_pid(int pidfd);

/* Signals the process behind a pidfd (sig 0: is it alive?): no pid reuse
 * can redirect it.  0, or -1 with errno. */
int pidfd_signal(int pidfd, int sig);

/* At the start of a call: the CPU time so far of the session process hpid
 * (behind pidfd) and its descendants but the checkpoint ckpt_hpid and what
 * is below it, and its memory high-water mark reset (clear_refs 5; when
 * that is refused, the peak is the session's lifetime peak).  A pidfd of
 * -1 means a process forked for this call, measured from its start. */
void usage_begin(struct usage *u, pid_t hpid, int pidfd, pid_t ckpt_hpid);

/* At the end of a call, or just before the session is killed: the CPU time
 * used since usage_begin and the peak resident memory of the same tree,
 * the descendants still alive (the frozen checkpoint ckpt_hpid and its
 * own still left out).  Only the first call after usage_begin measures; a
 * process already gone leaves the usage unknown. */
void usage_end(struct usage *u, pid_t hpid, int pidfd, pid_t ckpt_hpid);

#endif
