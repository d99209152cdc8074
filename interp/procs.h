/* Ending the processes that user code left behind.
 *
 * User code may fork, and a forked process may leave its process group
 * (setpgid) or its session (setsid), or orphan itself with a double fork.
 * A process group therefore says nothing about where a process came from;
 * the parent chain does, as long as the nearest ancestor that outlives
 * everything is a child subreaper (or pid 1).  Sessions are subreapers, the
 * zygote is pid 1 of the jail's pid namespace (or a subreaper). */
#ifndef PSM_PROCS_H
#define PSM_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Ends every process below `parent` (itself excluded) except the subtrees
 * of the direct children listed in keep[].  All of them are stopped first,
 * round after round until a round finds none that is new, so that nothing
 * forks while they are being killed; then all are killed.  With `reap`,
 * also waits for them (parent must be the caller: every one of them ends
 * as a child of the caller, which is a subreaper), zombies included.
 * Returns how many processes were ended (0 on the usual path, one scan of
 * /proc), not counting one found already in its exit (it is waited for
 * all the same), or -errno when /proc cannot be read. */
int procs_end_below(pid_t parent, const pid_t *keep, size_t nkeep, bool reap);

/* The same, for a keep[] made elsewhere at clock tick born_by (after boot,
 * as /proc's start times count): a direct child of `parent` born in that
 * tick or later is kept with its subtree, because the list may not know it
 * (a tick is 10 ms: a checkpoint is forked within one of a rollback).
 * The zygote's sweep needs this: the server's list of sessions and
 * checkpoints is made before the sweep runs, and a checkpoint taken in
 * between is reparented to the zygote when its session dies; judged by
 * the older list it was ended, and the session's next rollback found no
 * copy to resume. */
int procs_end_below_by(pid_t parent, const pid_t *keep, size_t nkeep, bool reap, unsigned long long born_by);

/* The live processes below `parent` (itself excluded) except the subtrees of
 * the direct children in keep[], as read now from the procfs at `proc`
 * ("/proc", or another pid namespace's, with that namespace's pids): *out
 * is malloc'd (caller frees), *n its length.  0 or -errno. */
int procs_list_below(const char *proc, pid_t parent, const pid_t *keep, size_t nkeep, pid_t **out, size_t *n);

/* Sends sig to the live processes below `parent` (itself excluded) except
 * the subtrees of the direct children in keep[], as /proc shows them now,
 * each through a pidfd checked against the process the scan saw (a pid
 * may be reused in between).  No stop first: what one forks meanwhile is
 * not found (the zygote's sweep ends it).  Pids are this process's own
 * namespace's.  How many were signalled, or -errno. */
int procs_signal_below(pid_t parent, const pid_t *keep, size_t nkeep, int sig);

/* For a process whose first thread exited while others run on (its stat
 * shows Z, pstat_gone says it is not gone): the task directory
 * proc/PID/task/TID of a thread of it still running in out, and that
 * thread's state in *state ('T' only when every one left is stopped):
 * true; false when none is left.  The leader's own files show no memory
 * and no descriptors any more: the process's are its threads'. */
bool procs_live_task(const char *proc, pid_t pid, char *out, size_t n, char *state);

#endif
