/* Jail layer: an unprivileged uid when the server runs as root (uid.c). */
#ifndef JAIL_UID_H
#define JAIL_UID_H

#include <stdbool.h>
#include <sys/types.h>

#include "layer.h"

/* The unprivileged ids the sandbox runs as when the server is root. */
void jail_uid_choose(const struct jail_config *c, uid_t *uid, gid_t *gid);
/* chown: whether root-owned writable directories must be chowned to the
 * sandbox uid (not when jail_ns_prepare ID-mapped them).  no_tree: no mount
 * tree shows the project (it was refused already): a root-owned project is
 * then reached with the effective uid 0 kept (see uid.c). */
int jail_uid_apply(const struct jail_config *c, bool chown, bool no_tree, struct jail_report *r,
		   struct err *e);

#endif
