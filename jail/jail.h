/* The jail: the layers that enforce a policy around the interpreter
 * (docs/SECURITY.md).  What the rest of the program calls; the layers'
 * own headers are the jail's business.
 *
 * The server computes a jail_config; the freshly forked zygote calls
 * jail_enter() while it is still single-threaded and before Python starts.
 * Layers, in order, each in its own file with its own header:
 *   fds + environment (fds.c) -> unprivileged uid when root (uid.c) ->
 *   namespaces and mount tree (ns.c) -> capabilities, securebits,
 *   no_new_privs (caps.c) -> rlimits (rlimits.c) -> Landlock (landlock.c)
 *   -> seccomp, last (seccomp.c).
 * Layers only tighten; a layer the kernel lacks is reported, never widened
 * around. */
#ifndef JAIL_JAIL_H
#define JAIL_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "../common/err.h"
#include "../policy/policy.h"
#include "layer.h"

/* Called in the zygote process right after fork from the server.  May fork
 * internally (to become pid 1 of a new pid namespace): on return the calling
 * process is the one to continue as the zygote; an intermediate process never
 * returns (it waits and exits with the zygote's status).  Fills *r.  Returns 0
 * when the layers were applied as far as the kernel allows (check
 * r->enforceable), negative errno when setting up failed outright. */
int jail_enter(const struct jail_config *c, struct jail_report *r, struct err *e);

/* Called in each session process right after it forks from the zygote:
 * per-session tightening (its own Landlock domain scoping signals and
 * abstract sockets, not dumpable) so sessions cannot touch each other;
 * without a pid namespace that domain also limits /proc to the session's
 * own entry (landlock.c). */
int jail_session_enter(struct err *e);

/* Then, before any code of the project runs in it: the session's seccomp
 * gate on the ways out of its process tree (seccomp.h:
 * seccomp_session_gate); *listener is the gate's listener for the server,
 * or -1 where the kernel has none (both ways refused outright). */
int jail_session_gate(int *listener, struct err *e);

/* Once, in the zygote: that gate compiled for every session it forks
 * (seccomp.h: seccomp_session_gate_prepare); false when each session
 * compiles its own. */
bool jail_session_gate_prepare(void);


const char *jail_layer_name(enum jail_layer_id id);
const char *jail_state_name(enum jail_state s);

/* Multi-line text for --check and the start-up log.  Caller frees (never
 * NULL: out of memory ends the process, common/util.h). */
char *jail_report_describe(const struct jail_report *r);

/* --check: applies the jail in a forked child, prints every layer as applied
 * / not available / not needed / failed, then runs live probes inside that
 * child (a write outside the workspace, socket(AF_INET), execve), each of
 * which must be refused when the policy forbids it.  Returns the exit status
 * for the command: 0 when the policy is enforceable and every probe was
 * refused, 1 otherwise. */
#include <stdio.h>
int jail_check(const struct jail_config *c, FILE *out);

/* Removes a scratch directory made by the jail and everything in it,
 * never following a symlink out of it; safe on what hostile code left
 * there (modes of 0, deep trees, links).  0 or negative errno. */
int jail_scratch_remove(const char *path);
/* The same, only while path still names the directory (dev, ino) that
 * jail_scratch_make made; -ESTALE when it names another. */
int jail_scratch_remove_same(const char *path, dev_t dev, ino_t ino);

/* Makes the namespace-free mode's scratch directory for a sandbox that runs
 * as uid:gid (the server calls it before the zygote starts, and names the
 * result in the zygote's configuration: jail_config.scratch): a fresh
 * /tmp/psm-scratch-XXXXXX (else under /var/tmp), mode 0700, owned by
 * uid:gid.  Its path in out (n bytes), its identity in *dev, *ino, for
 * jail_scratch_remove_same.  0 or negative errno. */
int jail_scratch_make(uid_t uid, gid_t gid, char *out, size_t n, dev_t *dev, ino_t *ino);

/* Whether root (a canonical path) is no project: "/" or the user's home
 * directory (home, or the passwd entry's of this uid).  Writes which one
 * ("the whole file system", "the home directory") to which.  The server
 * refuses to serve such a ROOT, and the jail refuses it again. */
#include <stdbool.h>
#include <stddef.h>
bool jail_root_not_project(const char *root, const char *home, char *which, size_t n);

#endif
