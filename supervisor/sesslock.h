/* One server at a time per saved session.
 *
 * Two servers on one project (two agent windows on one repository) would
 * both restore a session, diverge, and overwrite each other's snapshot:
 * the last writer wins and the other window's work is gone after a
 * restart.  So the first server to use a session name takes a lock for it,
 * held until it exits (the kernel releases it when the server dies, however
 * it dies), and a second server runs that session without saving or
 * restoring it, and says so in its first reply.
 *
 * Where the lock lives is the point.  The sandboxed code can write under
 * workspace/.sessions, so a lock file there is one it could take first: it
 * would keep every later server from saving the session (a denial of
 * service planted by a cell), and the server could not tell that lock from
 * another server's.  The lock files live in the server's private state
 * directory instead ($XDG_STATE_HOME/python-sandbox-mcp/locks/, mode 0700,
 * beside the key, which the jail never shows), named by the workspace's
 * device and inode and the session's name, so only the user's own
 * processes outside the sandbox can hold one.  Servers that use different
 * XDG_STATE_HOME directories do not see each other's locks (they do not
 * share a key either, so neither restores the other's snapshot). */
#ifndef SUPERVISOR_SESSLOCK_H
#define SUPERVISOR_SESSLOCK_H

#include <sys/types.h>

#include "../common/err.h"
#include "../files/fsafe.h"

/* Takes the lock of session `name` of the workspace.  Returns the
 * descriptor that holds it (close it to let go; the lock ends with the
 * process anyway), -EWOULDBLOCK when another process holds it (*holder
 * is its pid, 0 when not known), or another negative errno with e set. */
int sesslock_take(const struct workspace *ws, const char *name, pid_t *holder, struct err *e);

#endif
