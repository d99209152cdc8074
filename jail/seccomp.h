/* Jail layer, the last: the seccomp filters (seccomp.c). */
#ifndef JAIL_SECCOMP_H
#define JAIL_SECCOMP_H

#include "layer.h"

/* Loads the allow-list for c's policy and the mode r records (with the
 * mount tree or without, an IPC namespace or not), then the stacked filter
 * of refusals. */
int seccomp_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

/* The session's own filter, stacked on the jail's by the session process
 * before any code of the session runs: clone with CLONE_PARENT and
 * prctl(PR_SET_CHILD_SUBREAPER, 0), the two ways a process of the session
 * could make a process outside the session's tree (a child of the zygote,
 * outside every limit of the session), are handed to whoever reads the
 * filter's listener, returned in *listener (close-on-exec): the server
 * lets exactly one of them through while it asks the session for a copy of
 * itself (fork_from), and refuses every other with EPERM.  Where the kernel
 * has no listener (seccomp user notification, Linux 5.5 for its
 * "continue"), both are refused outright and *listener is -1.  0 or
 * -errno. */
int seccomp_session_gate(int *listener, struct err *e);

/* Compiles both forms of that filter once, in the zygote, so that each
 * session process it forks loads one with a single system call instead of
 * compiling it (seccomp_session_gate falls back to compiling when this was
 * not called or failed).  True when both are ready. */
bool seccomp_session_gate_prepare(void);

#endif
