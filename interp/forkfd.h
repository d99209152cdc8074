/* fork() that also hands back a pidfd of the child, without pidfd_open.
 *
 * The sandbox refuses pidfd_open (jail/seccomp.c): without a pid
 * namespace it opens a pidfd of any process of the host, and a pidfd handed
 * up to the server is an identity the server acts on.  The zygote and the
 * sessions still need pidfds of their own children (a new session, a
 * checkpoint) for the server, so they fork with clone(CLONE_PIDFD), which
 * can name nothing but the child it creates.
 *
 * The C library's fork() cannot ask for CLONE_PIDFD (glibc 2.36), and a raw
 * clone skips what fork() does for the child: the thread's id in its
 * descriptor, the robust-futex list, pthread_atfork handlers, and, in a
 * process with several threads, the locks other threads may hold (malloc's,
 * stdio's).  So:
 *   - one thread: a raw clone, with the thread id and the robust list set as
 *     fork() sets them (learned once by forkfd_init, checked with a real
 *     fork());
 *   - several threads: fork() first (locks and handlers as usual), and that
 *     single-threaded child makes the real one with a raw clone, then hands
 *     the pidfd back and exits; the real one is then reparented to the
 *     caller in a session (a subreaper behind a gate that refuses
 *     CLONE_PARENT: forkfd_gated), or made with CLONE_PARENT so that it is
 *     the caller's child.  One more copy of the page tables, only then. */
#ifndef INTERP_FORKFD_H
#define INTERP_FORKFD_H

#include <sys/types.h>

/* Learns where the C library keeps the calling thread's id and robust list
 * (see above).  Once, single-threaded, before seccomp: it forks a child to
 * check what it found. */
void forkfd_init(void);

/* Says that this process (a session) runs behind its seccomp gate, which
 * refuses CLONE_PARENT: with several threads, fork_pidfd then has the
 * child reparented to the caller (a subreaper) instead. */
void forkfd_gated(void);

/* Like fork(), with *pidfd a pidfd of the child (close-on-exec) in the
 * parent; -1 with errno on failure.  The caller brackets it with
 * PyOS_BeforeFork / PyOS_AfterFork_*, as for fork(). */
pid_t fork_pidfd(int *pidfd);

/* The same, but the child is a child of the caller's parent (a session's
 * copy for fork_from is a child of the zygote): CLONE_PARENT, one copy of
 * the page tables.  With several threads, fork() then a plain clone from
 * that copy, which exits: the child is then reparented to the nearest
 * subreaper above the caller, so a caller that is one stops being one for
 * that moment.  In a session, either step is one request to its seccomp
 * gate (jail/seccomp.h), which the server grants once per fork_from. */
pid_t fork_pidfd_sibling(int *pidfd);

#endif
